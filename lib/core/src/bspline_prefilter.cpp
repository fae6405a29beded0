#include "bspline_prefilter.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>
#include <type_traits>
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

// Lines are filtered this many at a time, interleaved: the recursions are latency-bound chains, and
// side by side they fill the vector registers.
constexpr int kLanes = 16;

// The first causal coefficient of each lane under mirror boundaries: the truncated sum where z^n
// falls below the tolerance within the line, else the exact sum over the mirrored line.
template <class W>
void causal_start(const W* c, std::int64_t length, double z, W* start) {
    const auto horizon = static_cast<std::int64_t>(std::ceil(std::log(kCausalTolerance) / std::log(std::fabs(z))));
    double zn = z;
    if (horizon < length) {
        for (int b = 0; b < kLanes; ++b) start[b] = c[b];
        for (std::int64_t n = 1; n < horizon; ++n) {
            for (int b = 0; b < kLanes; ++b) start[b] += zn * c[n * kLanes + b];
            zn *= z;
        }
        return;
    }
    const double iz = 1.0 / z;
    double z2n = std::pow(z, static_cast<double>(length - 1));
    for (int b = 0; b < kLanes; ++b) start[b] = c[b] + z2n * c[(length - 1) * kLanes + b];
    z2n *= z2n * iz;
    for (std::int64_t n = 1; n <= length - 2; ++n) {
        for (int b = 0; b < kLanes; ++b) start[b] += (zn + z2n) * c[n * kLanes + b];
        zn *= z;
        z2n *= iz;
    }
    for (int b = 0; b < kLanes; ++b) start[b] /= 1.0 - zn * zn;
}

// The causal and anti-causal recursions of every pole on kLanes interleaved lines; each lane gets
// exactly the operations a line filtered alone would.
template <class W>
void decompose_lines(W* c, std::int64_t length, const std::vector<double>& poles, double gain) {
    if (length == 1) return;  // a single sample is its own coefficient under mirror boundaries
    for (std::int64_t i = 0; i < length * kLanes; ++i) c[i] *= gain;
    W* last = c + (length - 1) * kLanes;
    for (const double z : poles) {
        W start[kLanes];
        causal_start(c, length, z, start);
        std::copy(start, start + kLanes, c);
        for (std::int64_t n = 1; n < length; ++n) {
            for (int b = 0; b < kLanes; ++b) c[n * kLanes + b] += z * c[(n - 1) * kLanes + b];
        }
        const double end_gain = z / (z * z - 1.0);
        for (int b = 0; b < kLanes; ++b) last[b] = end_gain * (z * last[b - kLanes] + last[b]);
        for (std::int64_t n = length - 2; n >= 0; --n) {
            for (int b = 0; b < kLanes; ++b) c[n * kLanes + b] = z * (c[(n + 1) * kLanes + b] - c[n * kLanes + b]);
        }
    }
}

// The coefficient a pixel starts as: its value in T, as a conversion of the image to T gives it.
template <class T, class Pixel>
T coefficient_of(const Pixel& value) {
    if constexpr (std::is_same_v<Pixel, float16> || std::is_same_v<Pixel, bfloat16>) {
        return static_cast<T>(static_cast<float>(value));
    } else if constexpr (std::is_same_v<Pixel, std::complex<float>> || std::is_same_v<Pixel, std::complex<double>>) {
        return T(value);
    } else {
        return static_cast<T>(static_cast<double>(value));
    }
}

// Filters along every spatial axis of `coefficients`; the first pass reads the C-ordered pixels
// (of the same shape), so the image is copied only into the coefficients themselves.
template <class T, class W, class Pixel>
void decompose(Tensor& coefficients, const Pixel* pixels, int order, int threads) {
    const std::vector<double> poles = spline_poles(order);
    double gain = 1.0;
    for (const double z : poles) gain *= (1.0 - z) * (1.0 - 1.0 / z);
    T* data = coefficients.data_as<T>();
    const Shape& shape = coefficients.shape();
    const auto filter = [&](W* lines, W*, std::int64_t length) { decompose_lines(lines, length, poles, gain); };
    if (shape.size() <= 2) {
        for (std::int64_t i = 0; i < coefficients.numel(); ++i) data[i] = coefficient_of<T>(pixels[i]);
        return;
    }
    filter_interleaved_lines_along_axis<kLanes, T, W>(data, shape, 2, threads, filter,
                                                      [pixels](std::int64_t i) { return W(coefficient_of<T>(pixels[i])); });
    for (std::size_t axis = 3; axis < shape.size(); ++axis) {
        filter_interleaved_lines_along_axis<kLanes, T, W>(data, shape, axis, threads, filter);
    }
}

template <class T, class W>
void decompose_pixels(Tensor& coefficients, const ConstTensorView& input, int order, int threads) {
    visit_dtype(input.dtype, [&](auto tag) {
        using Pixel = typename decltype(tag)::type;
        if constexpr (std::is_same_v<Pixel, std::string>) {
            throw std::invalid_argument("B-spline interpolation is not defined for string tensors");
        } else if constexpr ((std::is_same_v<Pixel, std::complex<float>> || std::is_same_v<Pixel, std::complex<double>>) &&
                             !std::is_same_v<Pixel, T>) {
            throw std::invalid_argument("B-spline coefficients of a complex image keep its type");
        } else {
            if (is_c_ordered(input)) {
                decompose<T, W>(coefficients, static_cast<const Pixel*>(input.data), order, threads);
            } else {
                const Tensor contiguous = Tensor::copy_of(input);
                decompose<T, W>(coefficients, contiguous.data_as<Pixel>(), order, threads);
            }
        }
    });
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
    Tensor coefficients(type, input.shape);
    switch (type) {
        case DType::Float32: decompose_pixels<float, double>(coefficients, input, order, threads); break;
        case DType::Float64: decompose_pixels<double, double>(coefficients, input, order, threads); break;
        case DType::Complex64: decompose_pixels<std::complex<float>, std::complex<double>>(coefficients, input, order, threads); break;
        default: decompose_pixels<std::complex<double>, std::complex<double>>(coefficients, input, order, threads); break;
    }
    return coefficients;
}

}  // namespace gridwarp::detail
