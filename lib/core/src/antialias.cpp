#include "gridwarp/antialias.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <stdexcept>

#include "axis_lines.hpp"
#include "bspline_prefilter.hpp"
#include "lowpass_taps.hpp"

namespace gridwarp {

namespace detail {

namespace {

constexpr double kLowpassLobes = 3.0;

double sinc(double x) {
    if (x == 0.0) return 1.0;
    const double pi_x = M_PI * x;
    return std::sin(pi_x) / pi_x;
}

}  // namespace

std::int64_t lowpass_row(std::int64_t length, double factor, std::int64_t i, std::vector<double>& weights) {
    // Offsets |d| < 3k: at |d| = 3k exactly the window is zero.
    const auto half = static_cast<std::int64_t>(std::ceil(kLowpassLobes * factor)) - 1;
    const std::int64_t first = std::max<std::int64_t>(0, i - half), last = std::min(length - 1, i + half);
    weights.resize(static_cast<std::size_t>(last - first + 1));
    double sum = 0.0;
    for (std::int64_t j = first; j <= last; ++j) {
        const double d = static_cast<double>(j - i) / factor;
        weights[static_cast<std::size_t>(j - first)] = sinc(d) * sinc(d / kLowpassLobes);
        sum += weights[static_cast<std::size_t>(j - first)];
    }
    for (double& w : weights) w /= sum;
    return first;
}

LowpassTaps lowpass_taps(std::int64_t length, double factor) {
    LowpassTaps taps;
    taps.width = 2 * (static_cast<std::int64_t>(std::ceil(kLowpassLobes * factor)) - 1) + 1;
    taps.first.resize(static_cast<std::size_t>(length));
    taps.count.resize(static_cast<std::size_t>(length));
    taps.weights.assign(static_cast<std::size_t>(length * taps.width), 0.0);
    std::vector<double> row;
    for (std::int64_t i = 0; i < length; ++i) {
        const std::int64_t first = lowpass_row(length, factor, i, row);
        std::copy(row.begin(), row.end(), taps.weights.begin() + i * taps.width);
        taps.first[static_cast<std::size_t>(i)] = first;
        taps.count[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(row.size());
    }
    return taps;
}

}  // namespace detail

namespace {

using detail::LowpassTaps;
using detail::lowpass_taps;

constexpr std::int64_t kLatticePointsPerAxis = 17;
constexpr std::int64_t kLatticeBatches = 8;
// Lines filtered side by side.
constexpr int kLowpassLanes = 16;

// Up to kLatticePointsPerAxis indices spread evenly over 0 .. extent - 1, the ends included.
std::vector<std::int64_t> lattice_indices(std::int64_t extent) {
    std::vector<std::int64_t> indices;
    if (extent <= kLatticePointsPerAxis) {
        for (std::int64_t i = 0; i < extent; ++i) indices.push_back(i);
        return indices;
    }
    for (std::int64_t i = 0; i < kLatticePointsPerAxis; ++i) {
        indices.push_back((i * (extent - 1) + (kLatticePointsPerAxis - 1) / 2) / (kLatticePointsPerAxis - 1));
    }
    return indices;
}

double median(std::vector<double>& values) {
    const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), middle, values.end());
    return *middle;
}

template <class T>
void lowpass_along_shrunk_axes(Tensor& pixels, const std::vector<double>& factors, int threads) {
    using Real = decltype(std::real(T{}));
    const Shape& shape = pixels.shape();
    for (std::size_t a = 0; a < factors.size(); ++a) {
        const std::size_t axis = a + 2;
        if (!(factors[a] > kShrinkTolerance) || shape[axis] < 2) continue;  // NaN: not shrunk
        const LowpassTaps taps = lowpass_taps(shape[axis], std::min(factors[a], kMaxLowpassFactor));
        const std::vector<Real> weights(taps.weights.begin(), taps.weights.end());
        detail::filter_interleaved_lines_along_axis<kLowpassLanes, T, T>(
            pixels.data_as<T>(), shape, axis, threads, [&](T* lines, T* filtered, std::int64_t length) {
                for (std::int64_t i = 0; i < length; ++i) {
                    const T* source = lines + taps.first[static_cast<std::size_t>(i)] * kLowpassLanes;
                    const Real* w = weights.data() + i * taps.width;
                    T sum[kLowpassLanes] = {};
                    for (std::int64_t t = 0; t < taps.count[static_cast<std::size_t>(i)]; ++t) {
                        for (int b = 0; b < kLowpassLanes; ++b) sum[b] += w[t] * source[t * kLowpassLanes + b];
                    }
                    std::copy(sum, sum + kLowpassLanes, filtered + i * kLowpassLanes);
                }
                std::copy(filtered, filtered + length * kLowpassLanes, lines);
            });
    }
}

}  // namespace

std::vector<double> shrink_factors(const PositionSource& positions, const Shape& input_spatial, bool align_corners) {
    const auto rank = static_cast<std::size_t>(positions.spatial_rank());
    std::vector<double> factors(input_spatial.size(), 1.0);
    if (rank != input_spatial.size() || rank == 0) return factors;
    // Input voxels per unit of coordinate k (innermost first).
    std::vector<double> voxels_per_unit(rank, 1.0);
    if (positions.space() == CoordinateSpace::Normalized) {
        for (std::size_t k = 0; k < rank; ++k) {
            const auto extent = static_cast<double>(input_spatial[rank - 1 - k]);
            voxels_per_unit[k] = align_corners ? (extent - 1.0) / 2.0 : extent / 2.0;
        }
    }
    const Shape& output = positions.output_shape();
    std::vector<std::vector<std::int64_t>> lattice(rank);
    for (std::size_t a = 0; a < rank; ++a) lattice[a] = lattice_indices(output[a]);
    std::vector<std::vector<double>> row_lengths(rank);  // per input axis, outermost first
    std::vector<double> point(rank), neighbour(rank), jacobian(rank * rank);  // jacobian[k * rank + j]: coordinate k, output axis j
    std::vector<std::int64_t> index(rank);                                     // output index, outermost first
    std::vector<std::size_t> cursor(rank, 0);
    const std::int64_t batches = std::min(positions.batch(), kLatticeBatches);
    const auto position_at = [&](std::int64_t n, const std::vector<std::int64_t>& at, double* xyz) {
        positions.row(n, at.data(), at[rank - 1], 1, xyz);
        for (std::size_t k = 0; k < rank; ++k) xyz[k] *= voxels_per_unit[k];
    };
    for (std::int64_t n = 0; n < batches; ++n) {
        const std::int64_t batch_item = batches == positions.batch() ? n : n * (positions.batch() - 1) / std::max<std::int64_t>(batches - 1, 1);
        std::fill(cursor.begin(), cursor.end(), 0);
        for (bool more = !output.empty() && shape_numel(output) > 0; more;) {
            for (std::size_t a = 0; a < rank; ++a) index[a] = lattice[a][cursor[a]];
            position_at(batch_item, index, point.data());
            bool finite = std::all_of(point.begin(), point.end(), [](double v) { return std::isfinite(v); });
            std::fill(jacobian.begin(), jacobian.end(), 0.0);
            for (std::size_t j = 0; j < rank && finite; ++j) {
                if (output[j] < 2) continue;
                const std::int64_t step = index[j] + 1 < output[j] ? 1 : -1;
                std::vector<std::int64_t> next = index;
                next[j] += step;
                position_at(batch_item, next, neighbour.data());
                for (std::size_t k = 0; k < rank; ++k) {
                    finite = finite && std::isfinite(neighbour[k]);
                    jacobian[k * rank + j] = (neighbour[k] - point[k]) * static_cast<double>(step);
                }
            }
            if (finite) {
                for (std::size_t k = 0; k < rank; ++k) {
                    double squares = 0.0;
                    for (std::size_t j = 0; j < rank; ++j) squares += jacobian[k * rank + j] * jacobian[k * rank + j];
                    row_lengths[rank - 1 - k].push_back(std::sqrt(squares));
                }
            }
            more = false;
            for (std::size_t a = rank; a-- > 0;) {
                if (++cursor[a] < lattice[a].size()) {
                    more = true;
                    break;
                }
                cursor[a] = 0;
            }
        }
    }
    for (std::size_t axis = 0; axis < rank; ++axis) {
        if (!row_lengths[axis].empty()) factors[axis] = median(row_lengths[axis]);
    }
    return factors;
}

bool any_axis_shrunk(const std::vector<double>& factors, const Shape& input_spatial) {
    for (std::size_t axis = 0; axis < factors.size() && axis < input_spatial.size(); ++axis) {
        if (factors[axis] > kShrinkTolerance && input_spatial[axis] > 1) return true;
    }
    return false;
}

DType lowpass_dtype(DType pixels) { return detail::coefficient_dtype(pixels); }

Tensor lowpass_for_shrink(const ConstTensorView& input, const std::vector<double>& factors, int threads) {
    if (input.dtype == DType::String) throw std::invalid_argument("anti-aliasing is not defined for string tensors");
    if (factors.size() + 2 != input.shape.size()) throw std::invalid_argument("lowpass_for_shrink: one factor per spatial axis");
    if (threads <= 0) threads = omp_get_max_threads();
    const DType type = lowpass_dtype(input.dtype);
    Tensor pixels = type == input.dtype ? Tensor::copy_of(input) : convert_to(input, type);
    switch (type) {
        case DType::Float32: lowpass_along_shrunk_axes<float>(pixels, factors, threads); break;
        case DType::Float64: lowpass_along_shrunk_axes<double>(pixels, factors, threads); break;
        case DType::Complex64: lowpass_along_shrunk_axes<std::complex<float>>(pixels, factors, threads); break;
        default: lowpass_along_shrunk_axes<std::complex<double>>(pixels, factors, threads); break;
    }
    return pixels;
}

std::string describe_antialias(const std::vector<double>& factors, const Shape& input_spatial) {
    static const char* const kNames3[] = {"z", "y", "x"};
    std::string filtered;
    for (std::size_t axis = 0; axis < factors.size() && axis < input_spatial.size(); ++axis) {
        if (!(factors[axis] > kShrinkTolerance) || input_spatial[axis] < 2) continue;
        const std::size_t from_end = factors.size() - 1 - axis;
        const std::string name = from_end < 3 ? kNames3[2 - from_end] : "axis " + std::to_string(axis);
        char factor[64];
        if (factors[axis] > kMaxLowpassFactor) {
            std::snprintf(factor, sizeof factor, "%.4g, filtered as %g", factors[axis], kMaxLowpassFactor);
        } else {
            std::snprintf(factor, sizeof factor, "%.4g", factors[axis]);
        }
        filtered += (filtered.empty() ? "" : ", ") + name + " (factor " + factor + ")";
    }
    return filtered.empty() ? "none: no axis is shrunk" : "Lanczos-3 low-pass along " + filtered;
}

}  // namespace gridwarp
