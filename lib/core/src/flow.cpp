#include "gridwarp/flow.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace gridwarp {

FlowPositions::FlowPositions(ConstTensorView field, FlowUnits units, bool absolute, bool align_corners)
    : field_(std::move(field)), units_(units), absolute_(absolute), align_corners_(align_corners) {
    if (field_.rank() < 3) {
        throw std::invalid_argument("a flow field must have shape (N, O1..Or, r), got " + shape_to_string(field_.shape));
    }
    output_shape_.assign(field_.shape.begin() + 1, field_.shape.end() - 1);
    if (field_.shape.back() != static_cast<std::int64_t>(output_shape_.size())) {
        throw std::invalid_argument("a flow field's last axis must hold " + std::to_string(output_shape_.size()) +
                                    " components (one per spatial axis), got shape " + shape_to_string(field_.shape));
    }
    if (field_.dtype == DType::String || is_complex(field_.dtype)) {
        throw std::invalid_argument("a flow field must hold real numbers, got " + std::string(dtype_name(field_.dtype)));
    }
}

double FlowPositions::base(std::int64_t index, std::int64_t extent) const {
    if (units_ == FlowUnits::Pixels) return static_cast<double>(index);
    if (align_corners_) return extent == 1 ? 0.0 : -1.0 + 2.0 * static_cast<double>(index) / static_cast<double>(extent - 1);
    return (2.0 * static_cast<double>(index) + 1.0) / static_cast<double>(extent) - 1.0;
}

template <class Coord>
void FlowPositions::compute_row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                                Coord* xyz) const {
    const auto rank = static_cast<std::int64_t>(output_shape_.size());
    const auto& strides = field_.strides;
    std::int64_t offset = n * strides[0] + start * strides[rank];
    for (std::int64_t axis = 0; axis + 1 < rank; ++axis) offset += outer[axis] * strides[axis + 1];
    // Base position of the row's outer axes, innermost-first component k = rank-1-axis.
    std::vector<double> row_base(static_cast<std::size_t>(rank), 0.0);
    for (std::int64_t axis = 0; axis + 1 < rank; ++axis) {
        row_base[static_cast<std::size_t>(rank - 1 - axis)] = base(outer[axis], output_shape_[static_cast<std::size_t>(axis)]);
    }
    visit_dtype(field_.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::complex<float>> ||
                      std::is_same_v<T, std::complex<double>>) {
            return;  // refused in the constructor
        } else {
            const T* data = field_.typed<T>() + offset;
            for (std::int64_t p = 0; p < count; ++p) {
                const T* point = data + p * strides[rank];
                row_base[0] = base(start + p, output_shape_.back());
                for (std::int64_t k = 0; k < rank; ++k) {
                    double component;
                    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
                        component = static_cast<float>(point[k * strides[rank + 1]]);
                    } else {
                        component = static_cast<double>(point[k * strides[rank + 1]]);
                    }
                    const double position = absolute_ ? component : row_base[static_cast<std::size_t>(k)] + component;
                    xyz[p * rank + k] = static_cast<Coord>(position);
                }
            }
        }
    });
}

void FlowPositions::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                        float* xyz) const {
    compute_row(n, outer, start, count, xyz);
}

void FlowPositions::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                        double* xyz) const {
    compute_row(n, outer, start, count, xyz);
}

namespace {

// The normalization of one axis as g = scale * u + offset.
struct AxisNormalization {
    double scale = 1.0;
    double offset = 0.0;
};

AxisNormalization normalization(std::int64_t extent, bool align_corners) {
    const auto d = static_cast<double>(extent);
    if (align_corners) {
        if (extent <= 1) return {1.0, 0.0};  // a single point: position 0 is normalized 0
        return {2.0 / (d - 1.0), -1.0};
    }
    return {2.0 / d, 1.0 / d - 1.0};
}

}  // namespace

std::vector<double> pixel_matrix_to_theta(const std::vector<double>& matrix, const Shape& input_spatial,
                                          const Shape& output_spatial, bool align_corners) {
    const auto rank = static_cast<std::int64_t>(input_spatial.size());
    if (static_cast<std::int64_t>(output_spatial.size()) != rank ||
        static_cast<std::int64_t>(matrix.size()) != rank * (rank + 1)) {
        throw std::invalid_argument("pixel_matrix_to_theta: expected a " + std::to_string(rank) + "x" +
                                    std::to_string(rank + 1) + " matrix for " + std::to_string(rank) + "-D shapes");
    }
    // theta = N_in * M * N_out^-1, with N(u) = scale * u + offset per axis (innermost-first k).
    std::vector<double> theta(matrix.size());
    const auto columns = rank + 1;
    for (std::int64_t k = 0; k < rank; ++k) {
        const auto in = normalization(input_spatial[static_cast<std::size_t>(rank - 1 - k)], align_corners);
        double translation = matrix[static_cast<std::size_t>(k * columns + rank)];
        for (std::int64_t j = 0; j < rank; ++j) {
            const auto out = normalization(output_spatial[static_cast<std::size_t>(rank - 1 - j)], align_corners);
            const double m = matrix[static_cast<std::size_t>(k * columns + j)];
            theta[static_cast<std::size_t>(k * columns + j)] = in.scale * m / out.scale;
            translation -= m * out.offset / out.scale;
        }
        theta[static_cast<std::size_t>(k * columns + rank)] = in.scale * translation + in.offset;
    }
    return theta;
}

std::vector<double> invert_affine(const std::vector<double>& matrix, std::int64_t rank) {
    const auto columns = rank + 1;
    if (static_cast<std::int64_t>(matrix.size()) != rank * columns) {
        throw std::invalid_argument("invert_affine: expected " + std::to_string(rank) + "x" + std::to_string(columns) +
                                    " values, got " + std::to_string(matrix.size()));
    }
    // Gauss-Jordan with partial pivoting on [A | I], then the translation -A^-1 t.
    const auto n = static_cast<std::size_t>(rank);
    std::vector<double> a(n * n), inverse(n * n, 0.0);
    double scale = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
            a[i * n + j] = matrix[i * (n + 1) + j];
            scale = std::max(scale, std::fabs(a[i * n + j]));
        }
        inverse[i * n + i] = 1.0;
    }
    const double tolerance = scale * 1e-12;
    for (std::size_t col = 0; col < n; ++col) {
        std::size_t pivot = col;
        for (std::size_t r = col + 1; r < n; ++r) {
            if (std::fabs(a[r * n + col]) > std::fabs(a[pivot * n + col])) pivot = r;
        }
        if (!(std::fabs(a[pivot * n + col]) > tolerance)) {
            throw std::invalid_argument("the matrix is singular and cannot be inverted");
        }
        for (std::size_t j = 0; j < n; ++j) {
            std::swap(a[col * n + j], a[pivot * n + j]);
            std::swap(inverse[col * n + j], inverse[pivot * n + j]);
        }
        const double p = a[col * n + col];
        for (std::size_t j = 0; j < n; ++j) {
            a[col * n + j] /= p;
            inverse[col * n + j] /= p;
        }
        for (std::size_t r = 0; r < n; ++r) {
            if (r == col) continue;
            const double factor = a[r * n + col];
            if (factor == 0.0) continue;
            for (std::size_t j = 0; j < n; ++j) {
                a[r * n + j] -= factor * a[col * n + j];
                inverse[r * n + j] -= factor * inverse[col * n + j];
            }
        }
    }
    std::vector<double> result(n * (n + 1));
    for (std::size_t i = 0; i < n; ++i) {
        double t = 0.0;
        for (std::size_t j = 0; j < n; ++j) {
            result[i * (n + 1) + j] = inverse[i * n + j];
            t -= inverse[i * n + j] * matrix[j * (n + 1) + n];
        }
        result[i * (n + 1) + n] = t;
    }
    return result;
}

}  // namespace gridwarp
