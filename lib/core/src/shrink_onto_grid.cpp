// Anti-aliased sampling of an axis-aligned map, reduced onto the output grid (antialias.hpp): the
// low-pass and the kind's taps compose into one row of weights per output index and axis, so the
// filtered copy of the whole input that lowpass_for_shrink makes is never held.
#include "gridwarp/antialias.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "lowpass_taps.hpp"
#include "reference_stages.hpp"

namespace gridwarp {

namespace {

// Per output index of one axis: the input indices first .. first + count - 1 it reads, with weights
// from weight[offset].
template <class C>
struct AxisWeights {
    std::vector<std::int64_t> first, count, offset;
    std::vector<C> weight;
};

bool composes(Interpolation mode) {
    switch (mode) {
        case Interpolation::Linear:
        case Interpolation::Cubic:
        case Interpolation::LanczosSinc:
        case Interpolation::HammingSinc:
        case Interpolation::CosineSinc:
        case Interpolation::WelchSinc:
        case Interpolation::BlackmanSinc: return true;
        default: return false;
    }
}

// The weights of output indices window_start .. window_start + extent - 1 along an input axis of
// `length`: the kind's taps at step * j + start, each tap index mapped by the padding rule and, on
// a filtered axis, replaced by the low-pass row of that index. Sums are taken in double.
template <class C, class Interp, class Pad>
AxisWeights<C> compose_axis(std::int64_t length, std::int64_t window_start, std::int64_t extent, double step, double start,
                            double factor, bool align_corners) {
    constexpr int K = Interp::taps;
    const bool filtered = factor > kShrinkTolerance && length >= 2;
    const double lowpass_factor = std::min(factor, kMaxLowpassFactor);
    AxisWeights<C> axis;
    std::vector<std::int64_t> taps_at;
    std::vector<double> taps_weight, row, dense;
    std::int64_t index[K];
    double weight[K];
    for (std::int64_t j = window_start; j < window_start + extent; ++j) {
        const double u = step * static_cast<double>(j) + start;
        taps_at.clear();
        taps_weight.clear();
        if (detail::axis_taps<double, Interp, Pad>(u, length, align_corners, CoordinateSpace::Pixel, index, weight)) {
            for (int k = 0; k < K; ++k) {
                if (index[k] < 0 || weight[k] == 0.0) continue;  // outside under zeros padding (fill 0), or no weight
                if (!filtered) {
                    taps_at.push_back(index[k]);
                    taps_weight.push_back(weight[k]);
                    continue;
                }
                const std::int64_t first = detail::lowpass_row(length, lowpass_factor, index[k], row);
                for (std::size_t t = 0; t < row.size(); ++t) {
                    taps_at.push_back(first + static_cast<std::int64_t>(t));
                    taps_weight.push_back(weight[k] * row[t]);
                }
            }
        }
        axis.offset.push_back(static_cast<std::int64_t>(axis.weight.size()));
        if (taps_at.empty()) {
            axis.first.push_back(0);
            axis.count.push_back(0);
            continue;
        }
        const auto [lowest, highest] = std::minmax_element(taps_at.begin(), taps_at.end());
        const std::int64_t first = *lowest, count = *highest - *lowest + 1;
        dense.assign(static_cast<std::size_t>(count), 0.0);
        for (std::size_t t = 0; t < taps_at.size(); ++t) dense[static_cast<std::size_t>(taps_at[t] - first)] += taps_weight[t];
        axis.first.push_back(first);
        axis.count.push_back(count);
        for (const double w : dense) axis.weight.push_back(static_cast<C>(w));
    }
    return axis;
}

// One pixel type's reduction: axis a's output index o sums input slices first .. first + count - 1
// of the level above into the thread's slab for the next axis; the innermost axis writes pixels.
template <class S>
class Reducer {
public:
    using C = typename detail::compute_type<S>::type;

    Reducer(const ConstTensorView& input, const TensorView& output, std::vector<AxisWeights<C>> axes)
        : input_(input), output_(output), axes_(std::move(axes)), rank_(static_cast<int>(input.shape.size()) - 2) {
        const std::int64_t channels = input.shape[1];
        lanes_ = channels > 1 && input.strides[1] == 1 ? channels : 1;  // interleaved channels are summed together
        groups_ = channels / lanes_;
        // slab_size_[a]: elements of one slice below axis a - 1 (axes a .. r-1 of the input, times lanes).
        slab_size_.assign(static_cast<std::size_t>(rank_ + 1), lanes_);
        for (int a = rank_ - 1; a >= 1; --a) slab_size_[a] = slab_size_[a + 1] * input.shape[a + 2];
    }

    void run(int threads) {
        const std::int64_t batch = input_.shape[0];
        const std::int64_t outer = rank_ >= 2 ? output_.shape[2] : 1;
        const std::int64_t tasks = batch * groups_ * outer;
#pragma omp parallel num_threads(threads)
        {
            std::vector<std::vector<C>> slabs(static_cast<std::size_t>(rank_));
            for (int a = 1; a < rank_; ++a) slabs[a].resize(static_cast<std::size_t>(slab_size_[a]));
            std::vector<C> sums(static_cast<std::size_t>(lanes_));
#pragma omp for schedule(dynamic, 1)
            for (std::int64_t task = 0; task < tasks; ++task) {
                const std::int64_t o = task % outer, group = (task / outer) % groups_, n = task / (outer * groups_);
                const std::int64_t channel = group * lanes_;
                const S* source = static_cast<const S*>(input_.data) + n * input_.strides[0] + channel * input_.strides[1];
                const std::int64_t target = n * output_.strides[0] + channel * output_.strides[1];
                if (rank_ == 1) {
                    innermost_from_input(source, target, sums);
                    continue;
                }
                sum_input_slices(o, source, slabs[1]);
                descend(1, slabs, target + o * output_.strides[2], sums);
            }
        }
    }

private:
    // Axis 0's output index o: the input's slices along axis 0, converted and weighted, into `slab`.
    void sum_input_slices(std::int64_t o, const S* source, std::vector<C>& slab) const {
        const AxisWeights<C>& axis = axes_[0];
        std::fill(slab.begin(), slab.end(), C(0));
        const std::int64_t x_extent = input_.shape[static_cast<std::size_t>(rank_) + 1];
        const std::int64_t x_stride = input_.strides[static_cast<std::size_t>(rank_) + 1];
        const std::int64_t lane_stride = input_.strides[1];
        const std::int64_t row_length = x_extent * lanes_;
        const bool contiguous_rows = x_stride == lanes_ && (lanes_ == 1 || lane_stride == 1);
        const std::int64_t rows = slab_size_[1] / row_length;
        const C* w = axis.weight.data() + axis.offset[o];
        for (std::int64_t t = 0; t < axis.count[o]; ++t) {
            const C weight = w[t];
            const S* slice = source + (axis.first[o] + t) * input_.strides[2];
            for (std::int64_t r = 0; r < rows; ++r) {
                // The row's offset within the slice: its index over axes 1 .. r-2.
                std::int64_t offset = 0;
                for (std::int64_t rest = r, a = rank_ - 2; a >= 1; --a) {
                    const std::int64_t extent = input_.shape[static_cast<std::size_t>(a) + 2];
                    offset += (rest % extent) * input_.strides[static_cast<std::size_t>(a) + 2];
                    rest /= extent;
                }
                const S* from = slice + offset;
                C* to = slab.data() + r * row_length;
                if (contiguous_rows) {
#pragma omp simd
                    for (std::int64_t e = 0; e < row_length; ++e) to[e] += weight * detail::load<C>(from[e]);
                } else {
                    for (std::int64_t x = 0; x < x_extent; ++x) {
                        for (std::int64_t l = 0; l < lanes_; ++l) {
                            to[x * lanes_ + l] += weight * detail::load<C>(from[x * x_stride + l * lane_stride]);
                        }
                    }
                }
            }
        }
    }

    // Axes a .. r-1 from slabs[a] (axis a - 1 already summed), writing below output offset `target`.
    void descend(int a, std::vector<std::vector<C>>& slabs, std::int64_t target, std::vector<C>& sums) const {
        const C* source = slabs[a].data();
        if (a == rank_ - 1) {
            innermost(source, target, sums);
            return;
        }
        const AxisWeights<C>& axis = axes_[a];
        std::vector<C>& slab = slabs[a + 1];
        const std::int64_t size = slab_size_[a + 1];
        for (std::int64_t o = 0; o < output_.shape[static_cast<std::size_t>(a) + 2]; ++o) {
            std::fill(slab.begin(), slab.end(), C(0));
            const C* w = axis.weight.data() + axis.offset[o];
            for (std::int64_t t = 0; t < axis.count[o]; ++t) {
                const C weight = w[t];
                const C* from = source + (axis.first[o] + t) * size;
                C* to = slab.data();
#pragma omp simd
                for (std::int64_t e = 0; e < size; ++e) to[e] += weight * from[e];
            }
            descend(a + 1, slabs, target + o * output_.strides[static_cast<std::size_t>(a) + 2], sums);
        }
    }

    // A 1-D input: the innermost axis straight from the pixels.
    void innermost_from_input(const S* source, std::int64_t target, std::vector<C>& sums) const {
        const std::int64_t x_stride = input_.strides[2], lane_stride = input_.strides[1];
        const AxisWeights<C>& axis = axes_[0];
        for (std::int64_t o = 0; o < output_.shape[2]; ++o) {
            std::fill(sums.begin(), sums.end(), C(0));
            const C* w = axis.weight.data() + axis.offset[o];
            for (std::int64_t t = 0; t < axis.count[o]; ++t) {
                const S* at = source + (axis.first[o] + t) * x_stride;
                for (std::int64_t l = 0; l < lanes_; ++l) sums[l] += w[t] * detail::load<C>(at[l * lane_stride]);
            }
            store_pixel(sums, target + o * output_.strides[2]);
        }
    }

    // The innermost axis from the thread's last slab (x, then lanes), into pixels.
    void innermost(const C* source, std::int64_t target, std::vector<C>& sums) const {
        switch (lanes_) {
            case 1: innermost_lanes<1>(source, target, sums); break;
            case 2: innermost_lanes<2>(source, target, sums); break;
            case 3: innermost_lanes<3>(source, target, sums); break;
            case 4: innermost_lanes<4>(source, target, sums); break;
            default: innermost_lanes<0>(source, target, sums); break;
        }
    }

    // kLanes > 0 fixes the lane count at compile time, so the sums stay in registers.
    template <int kLanes>
    void innermost_lanes(const C* source, std::int64_t target, std::vector<C>& sums) const {
        const std::int64_t lanes = kLanes > 0 ? kLanes : lanes_;
        const AxisWeights<C>& axis = axes_[static_cast<std::size_t>(rank_) - 1];
        const std::int64_t out_stride = output_.strides[static_cast<std::size_t>(rank_) + 1];
        const std::int64_t lane_stride = output_.strides[1];
        S* pixels = static_cast<S*>(output_.data) + target;
        for (std::int64_t o = 0; o < output_.shape[static_cast<std::size_t>(rank_) + 1]; ++o) {
            const C* w = axis.weight.data() + axis.offset[o];
            const C* at = source + axis.first[o] * lanes;
            const std::int64_t count = axis.count[o];
            if constexpr (kLanes > 0) {
                C sum[kLanes] = {};
                for (std::int64_t t = 0; t < count; ++t) {
                    for (int l = 0; l < kLanes; ++l) sum[l] += w[t] * at[t * kLanes + l];
                }
                for (int l = 0; l < kLanes; ++l) pixels[o * out_stride + l * lane_stride] = detail::store<S, true>(sum[l]);
            } else {
                std::fill(sums.begin(), sums.end(), C(0));
                for (std::int64_t t = 0; t < count; ++t) {
                    for (std::int64_t l = 0; l < lanes; ++l) sums[l] += w[t] * at[t * lanes + l];
                }
                for (std::int64_t l = 0; l < lanes; ++l) pixels[o * out_stride + l * lane_stride] = detail::store<S, true>(sums[l]);
            }
        }
    }

    void store_pixel(const std::vector<C>& sums, std::int64_t target) const {
        S* pixel = static_cast<S*>(output_.data) + target;
        for (std::int64_t l = 0; l < lanes_; ++l) pixel[l * output_.strides[1]] = detail::store<S>(sums[l]);
    }

    ConstTensorView input_;
    TensorView output_;
    std::vector<AxisWeights<C>> axes_;
    int rank_;
    std::int64_t lanes_ = 1, groups_ = 1;
    std::vector<std::int64_t> slab_size_;
};

}  // namespace

bool shrinks_onto_grid(const SampleOptions& options, DType pixels) {
    const bool real = pixels != DType::String && pixels != DType::Bool && pixels != DType::Complex64 && pixels != DType::Complex128;
    const bool padding_reads_input = options.padding != Padding::Zeros || (options.fill == 0.0 && !options.outside_tap_value.has_value());
    return real && composes(options.mode) && !options.generic_label && padding_reads_input;
}

namespace {

void check_window(const AxisAlignedMap& map, const std::vector<double>& factors, std::size_t rank, const Shape& window_start,
                  const Shape& window_extent) {
    if (map.size.size() != rank || map.step.size() != rank || map.start.size() != rank || factors.size() != rank || window_start.size() != rank ||
        window_extent.size() != rank || rank == 0) {
        throw std::invalid_argument("shrink_onto_grid: the input, map, factors and output window disagree in rank or shape");
    }
    for (std::size_t a = 0; a < rank; ++a) {
        if (window_start[a] < 0 || window_extent[a] < 0 || window_start[a] + window_extent[a] > map.size[a]) {
            throw std::invalid_argument("shrink_onto_grid: the output window leaves the map's grid");
        }
    }
}

// Each axis's weights for the output window, over an input of `input_spatial`.
template <class C>
std::vector<AxisWeights<C>> window_weights(const Shape& input_spatial, const AxisAlignedMap& map, const std::vector<double>& factors,
                                           const SampleOptions& options, const Shape& window_start, const Shape& window_extent) {
    std::vector<AxisWeights<C>> axes;
    for (std::size_t a = 0; a < input_spatial.size(); ++a) {
        axes.push_back(detail::visit_any_interpolation(options.mode, options.spline_order, [&](auto interp) {
            return detail::visit_padding(options.padding, [&](auto pad) {
                using I = typename decltype(interp)::type;
                using P = typename decltype(pad)::type;
                return compose_axis<C, I, P>(input_spatial[a], window_start[a], window_extent[a], map.step[a], map.start[a], factors[a],
                                             options.align_corners);
            });
        }));
    }
    return axes;
}

// The compute type's weights are the same for every pixel type of one compute type; the box only
// needs the indices, which double weights give as well.
InputBox box_of(const std::vector<AxisWeights<double>>& axes) {
    InputBox box;
    for (const AxisWeights<double>& axis : axes) {
        std::int64_t lowest = std::numeric_limits<std::int64_t>::max(), highest = -1;
        for (std::size_t o = 0; o < axis.first.size(); ++o) {
            if (axis.count[o] == 0) continue;
            lowest = std::min(lowest, axis.first[o]);
            highest = std::max(highest, axis.first[o] + axis.count[o] - 1);
        }
        box.start.push_back(highest < 0 ? 0 : lowest);
        box.extent.push_back(highest < 0 ? 0 : highest - lowest + 1);
    }
    return box;
}

}  // namespace

InputBox shrink_input_box(const Shape& input_spatial, const AxisAlignedMap& map, const std::vector<double>& factors, const SampleOptions& options,
                          const Shape& window_start, const Shape& window_extent) {
    check_window(map, factors, input_spatial.size(), window_start, window_extent);
    return box_of(window_weights<double>(input_spatial, map, factors, options, window_start, window_extent));
}

void shrink_onto_grid_in_box(const ConstTensorView& input, const Shape& box_start, const Shape& input_spatial, const AxisAlignedMap& map,
                             const std::vector<double>& factors, const SampleOptions& options, const Shape& window_start, const TensorView& output) {
    const std::size_t rank = map.size.size();
    if (!shrinks_onto_grid(options, input.dtype)) throw std::invalid_argument("shrink_onto_grid: these options need lowpass_for_shrink");
    if (input.shape.size() != rank + 2 || output.shape.size() != rank + 2 || box_start.size() != rank || input_spatial.size() != rank ||
        output.dtype != input.dtype || output.shape[0] != input.shape[0] || output.shape[1] != input.shape[1]) {
        throw std::invalid_argument("shrink_onto_grid: the input, map, factors and output window disagree in rank or shape");
    }
    const Shape window_extent(output.shape.begin() + 2, output.shape.end());
    check_window(map, factors, rank, window_start, window_extent);
    if (shape_numel(output.shape) == 0) return;
    const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
    visit_dtype(input.dtype, [&](auto pixel) {
        using S = typename decltype(pixel)::type;
        if constexpr (std::is_arithmetic_v<S> || std::is_same_v<S, float16> || std::is_same_v<S, bfloat16>) {
            using C = typename detail::compute_type<S>::type;
            std::vector<AxisWeights<C>> axes = window_weights<C>(input_spatial, map, factors, options, window_start, window_extent);
            bool reads = shape_numel(input.shape) > 0;
            for (std::size_t a = 0; a < rank; ++a) {
                for (std::size_t o = 0; o < axes[a].first.size(); ++o) {
                    if (axes[a].count[o] == 0) continue;
                    axes[a].first[o] -= box_start[a];
                    if (axes[a].first[o] < 0 || axes[a].first[o] + axes[a].count[o] > input.shape[a + 2]) {
                        throw std::invalid_argument("shrink_onto_grid: the input box does not hold what the window reads");
                    }
                }
                reads = reads && std::any_of(axes[a].count.begin(), axes[a].count.end(), [](std::int64_t c) { return c > 0; });
            }
            if (!reads) {  // no input values: every tap reads the fill, 0
                const Tensor zeros(output.dtype, output.shape);
                copy_elements(zeros.view(), output);
                return;
            }
            Reducer<S>(input, output, std::move(axes)).run(threads);
        }
    });
}

void shrink_onto_grid(const ConstTensorView& input, const AxisAlignedMap& map, const std::vector<double>& factors,
                      const SampleOptions& options, const Shape& window_start, const TensorView& output) {
    if (input.shape.size() < 2) throw std::invalid_argument("shrink_onto_grid: the input, map, factors and output window disagree in rank or shape");
    const Shape input_spatial(input.shape.begin() + 2, input.shape.end());
    shrink_onto_grid_in_box(input, Shape(input_spatial.size(), 0), input_spatial, map, factors, options, window_start, output);
}

}  // namespace gridwarp
