// ITK's BSplineTransform (and elastix's, which stores the same grid) as a B-spline displacement
// field: fixed parameters are the coefficient grid's size, origin, spacing and direction (row by
// row), parameters the coefficients of each component in turn, x fastest.
#include <cmath>
#include <stdexcept>

#include "gridwarp/io/error.hpp"
#include "gridwarp/io/transform_io.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

void append_bspline_transform(const std::vector<double>& fixed, const std::vector<double>& parameters, std::size_t dimension, int order,
                              TransformFile& result, const fs::path& file) {
    const std::size_t d = dimension;
    if (fixed.size() != d * (d + 3)) {
        throw FileError(file, "a B-spline transform needs " + std::to_string(d * (d + 3)) + " fixed parameters (grid size, origin, spacing, "
                              "direction), found " + std::to_string(fixed.size()));
    }
    Shape shape;
    std::uint64_t points = 1;
    for (std::size_t axis = 0; axis < d; ++axis) {
        const double size = fixed[axis];
        if (!(size >= order + 1 && size <= 1e6 && std::floor(size) == size)) {
            throw FileError(file, "the B-spline grid's size along axis " + std::to_string(axis) + " is " + std::to_string(size) +
                                  ", not a whole number of at least " + std::to_string(order + 1) + " control points");
        }
        points *= static_cast<std::uint64_t>(size);
        shape.insert(shape.begin(), static_cast<std::int64_t>(size));
    }
    if (parameters.size() != points * d) {
        throw FileError(file, "a B-spline grid of " + std::to_string(points) + " control points takes " + std::to_string(points * d) +
                              " parameters, found " + std::to_string(parameters.size()));
    }
    std::vector<double> origin(fixed.begin() + static_cast<std::ptrdiff_t>(d), fixed.begin() + static_cast<std::ptrdiff_t>(2 * d));
    std::vector<double> spacing(fixed.begin() + static_cast<std::ptrdiff_t>(2 * d), fixed.begin() + static_cast<std::ptrdiff_t>(3 * d));
    std::vector<double> direction(fixed.begin() + static_cast<std::ptrdiff_t>(3 * d), fixed.end());
    for (double value : fixed) {
        if (!std::isfinite(value)) throw FileError(file, "the B-spline grid's geometry holds a non-finite value");
    }
    for (double value : spacing) {
        if (!(value > 0)) throw FileError(file, "the B-spline grid's spacing must be positive");
    }
    shape.push_back(static_cast<std::int64_t>(d));
    auto coefficients = std::make_shared<Tensor>(DType::Float64, shape);
    double* out = coefficients->data_as<double>();
    for (std::uint64_t point = 0; point < points; ++point) {
        for (std::size_t component = 0; component < d; ++component) {
            const double value = parameters[component * points + point];
            if (!std::isfinite(value)) throw FileError(file, "the B-spline coefficients hold a non-finite value");
            out[point * d + component] = value;
        }
    }
    PointTransform step;
    try {
        step.field = std::make_shared<const DisplacementField>(DisplacementField::bspline(
            std::const_pointer_cast<const Tensor>(coefficients)->view(), AffineMap::from_geometry(spacing, origin, direction), order));
    } catch (const std::invalid_argument& e) {
        throw FileError(file, std::string("the B-spline grid cannot be used: ") + e.what());
    }
    result.steps.push_back(std::move(step));
    result.buffers.push_back(std::move(coefficients));
}

}  // namespace gridwarp::io
