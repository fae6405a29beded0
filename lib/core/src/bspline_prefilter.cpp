#include "bspline_prefilter.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>
#include <vector>

#include "axis_lines.hpp"

namespace gridwarp::detail {

namespace {

// The poles of the B-spline of each order (Unser 1999, table 1); orders 0 and 1 have none.
std::vector<double> spline_poles(int order) {
    switch (order) {
        case 2: return {std::sqrt(8.0) - 3.0};
        case 3: return {std::sqrt(3.0) - 2.0};
        case 4:
            return {std::sqrt(664.0 - std::sqrt(438976.0)) + std::sqrt(304.0) - 19.0,
                    std::sqrt(664.0 + std::sqrt(438976.0)) - std::sqrt(304.0) - 19.0};
        case 5:
            return {std::sqrt(135.0 / 2.0 - std::sqrt(17745.0 / 4.0)) + std::sqrt(105.0 / 4.0) - 13.0 / 2.0,
                    std::sqrt(135.0 / 2.0 + std::sqrt(17745.0 / 4.0)) - std::sqrt(105.0 / 4.0) - 13.0 / 2.0};
        default: return {};
    }
}

constexpr double kCausalTolerance = 1e-10;

// The first causal coefficient under mirror boundaries: the truncated sum where z^n falls below
// the tolerance within the line, else the exact sum over the mirrored line.
template <class W>
W causal_start(const W* c, std::int64_t length, double z) {
    const auto horizon = static_cast<std::int64_t>(std::ceil(std::log(kCausalTolerance) / std::log(std::fabs(z))));
    double zn = z;
    if (horizon < length) {
        W sum = c[0];
        for (std::int64_t n = 1; n < horizon; ++n) {
            sum += zn * c[n];
            zn *= z;
        }
        return sum;
    }
    const double iz = 1.0 / z;
    double z2n = std::pow(z, static_cast<double>(length - 1));
    W sum = c[0] + z2n * c[length - 1];
    z2n *= z2n * iz;
    for (std::int64_t n = 1; n <= length - 2; ++n) {
        sum += (zn + z2n) * c[n];
        zn *= z;
        z2n *= iz;
    }
    return sum / (1.0 - zn * zn);
}

template <class W>
void decompose_line(W* c, std::int64_t length, const std::vector<double>& poles, double gain) {
    if (length == 1) return;  // a single sample is its own coefficient under mirror boundaries
    for (std::int64_t n = 0; n < length; ++n) c[n] *= gain;
    for (const double z : poles) {
        c[0] = causal_start(c, length, z);
        for (std::int64_t n = 1; n < length; ++n) c[n] += z * c[n - 1];
        c[length - 1] = (z / (z * z - 1.0)) * (z * c[length - 2] + c[length - 1]);
        for (std::int64_t n = length - 2; n >= 0; --n) c[n] = z * (c[n + 1] - c[n]);
    }
}

template <class T, class W>
void decompose(Tensor& coefficients, int order, int threads) {
    const std::vector<double> poles = spline_poles(order);
    double gain = 1.0;
    for (const double z : poles) gain *= (1.0 - z) * (1.0 - 1.0 / z);
    for (std::size_t axis = 2; axis < coefficients.shape().size(); ++axis) {
        filter_lines_along_axis<T, W>(coefficients.data_as<T>(), coefficients.shape(), axis, threads,
                                      [&](W* line, W*, std::int64_t length) { decompose_line(line, length, poles, gain); });
    }
}

}  // namespace

DType coefficient_dtype(DType pixels) {
    switch (pixels) {
        case DType::Float64:
        case DType::Int32:
        case DType::Int64:
        case DType::UInt32:
        case DType::UInt64: return DType::Float64;
        case DType::Complex64:
        case DType::Complex128: return pixels;
        default: return DType::Float32;
    }
}

Tensor bspline_coefficients(const ConstTensorView& input, int order, int threads) {
    const DType type = coefficient_dtype(input.dtype);
    if (input.dtype == DType::String) throw std::invalid_argument("B-spline interpolation is not defined for string tensors");
    Tensor coefficients = (type == DType::Complex64 || type == DType::Complex128) ? Tensor::copy_of(input) : convert_to(input, type);
    switch (type) {
        case DType::Float32: decompose<float, double>(coefficients, order, threads); break;
        case DType::Float64: decompose<double, double>(coefficients, order, threads); break;
        case DType::Complex64: decompose<std::complex<float>, std::complex<double>>(coefficients, order, threads); break;
        default: decompose<std::complex<double>, std::complex<double>>(coefficients, order, threads); break;
    }
    return coefficients;
}

}  // namespace gridwarp::detail
