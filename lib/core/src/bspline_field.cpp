// Displacement fields given as B-spline coefficients, evaluated as ITK 5.2's BSplineTransform
// (BSplineInterpolationWeightFunction, BSplineKernelFunction, InsideValidRegion) evaluates them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "gridwarp/physical.hpp"

namespace gridwarp {

namespace {

double bspline_kernel(int order, double t) {
    const double a = std::fabs(t);
    switch (order) {
        case 1:
            return a < 1.0 ? 1.0 - a : 0.0;
        case 2:
            if (a < 0.5) return 0.75 - a * a;
            return a < 1.5 ? 0.5 * (1.5 - a) * (1.5 - a) : 0.0;
        default:
            if (a < 1.0) return (4.0 - 6.0 * a * a + 3.0 * a * a * a) / 6.0;
            return a < 2.0 ? (2.0 - a) * (2.0 - a) * (2.0 - a) / 6.0 : 0.0;
    }
}

// ITK treats an index within a few ULPs of the upper limit as on it, and moves it just inside.
bool on_upper_limit(double index, double limit) { return std::fabs(index - limit) <= 4 * std::numeric_limits<double>::epsilon() * std::max(1.0, std::fabs(limit)); }

}  // namespace

DisplacementField DisplacementField::bspline(ConstTensorView coefficients, AffineMap index_to_point, int order) {
    if (order < 1 || order > 3) throw std::invalid_argument("B-spline transforms of order " + std::to_string(order) + " are not supported (1 to 3)");
    DisplacementField field(std::move(coefficients), std::move(index_to_point));
    const std::size_t d = field.dimension();
    for (std::size_t a = 0; a < d; ++a) {
        if (field.field_.shape[a] < order + 1) {
            throw std::invalid_argument("a B-spline grid of order " + std::to_string(order) + " needs at least " + std::to_string(order + 1) +
                                        " control points along each axis, got " + shape_to_string(field.field_.shape));
        }
    }
    field.bspline_order_ = order;
    return field;
}

bool DisplacementField::inside_bspline_region(const double* index) const {
    const std::size_t d = dimension();
    const double margin = 0.5 * (bspline_order_ - 1);
    for (std::size_t a = 0; a < d; ++a) {
        const double upper = static_cast<double>(field_.shape[d - 1 - a]) - margin - 1.0;
        if (!(index[a] >= margin) || (index[a] >= upper && !on_upper_limit(index[a], upper))) return false;
    }
    return true;
}

void DisplacementField::apply_bspline(const double* index, const double* in, double* out) const {
    const std::size_t d = dimension();
    if (!inside_bspline_region(index)) {
        std::copy(in, in + d, out);
        return;
    }
    const int support = bspline_order_ + 1;
    std::int64_t start[8];
    double weights[8][4];
    for (std::size_t a = 0; a < d; ++a) {
        const std::int64_t extent = field_.shape[d - 1 - a];
        // The last support that fits: an index on the upper limit is evaluated just inside it.
        start[a] = std::min<std::int64_t>(static_cast<std::int64_t>(std::floor(index[a] + 0.5 - bspline_order_ / 2.0)), extent - support);
        double x = index[a] - static_cast<double>(start[a]);
        for (int k = 0; k < support; ++k, x -= 1.0) weights[a][k] = bspline_kernel(bspline_order_, x);
    }
    double displacement[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int offset[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // the support point, per axis
    while (true) {
        double weight = 1.0;
        std::int64_t at = 0;
        for (std::size_t a = 0; a < d; ++a) {
            weight *= weights[a][offset[a]];
            at += (start[a] + offset[a]) * field_.strides[d - 1 - a];
        }
        for (std::size_t k = 0; k < d; ++k) {
            const std::int64_t element = at + static_cast<std::int64_t>(k) * field_.strides[d];
            const double coefficient = field_.dtype == DType::Float32 ? static_cast<double>(field_.typed<float>()[element]) : field_.typed<double>()[element];
            displacement[k] += weight * coefficient;
        }
        std::size_t a = 0;
        for (; a < d; ++a) {
            if (++offset[a] < support) break;
            offset[a] = 0;
        }
        if (a == d) break;
    }
    for (std::size_t k = 0; k < d; ++k) out[k] = in[k] + displacement[k];
}

}  // namespace gridwarp
