// The GridSample kernel.
//
// Sampling runs in two stages per chunk of output points along one output row:
//
//  1. Plan (build_plan): from each point's normalized coordinates, compute along every axis the tap
//     indices and weights that the interpolation policy asks for, map the indices through the
//     padding policy, and expand the per-axis taps into their tensor product: one input offset
//     and one weight per tap (offset -1 marks a tap outside the input under zeros padding).
//     This stage knows the interpolation, the padding and the rank, but not the pixel type.
//  2. Gather (gather_chunk): for every channel, the weighted sum of the planned taps, computed in
//     the pixel type's compute type and stored with rounding and saturation. This stage knows the
//     pixel type, but not the interpolation or padding. The plan is reused across channels.
//
// Splitting the work this way keeps one body per stage: the planner is instantiated per
// (coordinate type, interpolation, padding, rank) and the gatherer per (pixel type, coordinate
// type, taps per point) instead of once per element of their product. Ranks 2 and 3 get fixed-rank
// planners whose axis loops unroll; every other rank uses the same source with a runtime rank.
#include "gridwarp/grid_sample.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace gridwarp {

Interpolation parse_interpolation(std::string_view name) {
    if (name == "linear" || name == "bilinear" || name == "trilinear") return Interpolation::Linear;
    if (name == "nearest") return Interpolation::Nearest;
    if (name == "cubic" || name == "bicubic") return Interpolation::Cubic;
    throw std::invalid_argument("unknown interpolation mode '" + std::string(name) +
                                "': expected linear, nearest or cubic (or bilinear, trilinear, bicubic)");
}

Padding parse_padding(std::string_view name) {
    if (name == "zeros") return Padding::Zeros;
    if (name == "border") return Padding::Border;
    if (name == "reflection") return Padding::Reflection;
    throw std::invalid_argument("unknown padding mode '" + std::string(name) +
                                "': expected zeros, border or reflection");
}

std::string_view interpolation_name(Interpolation mode) {
    switch (mode) {
        case Interpolation::Linear: return "linear";
        case Interpolation::Nearest: return "nearest";
        case Interpolation::Cubic: return "cubic";
    }
    return "linear";
}

std::string_view padding_name(Padding padding) {
    switch (padding) {
        case Padding::Zeros: return "zeros";
        case Padding::Border: return "border";
        case Padding::Reflection: return "reflection";
    }
    return "zeros";
}

namespace {

// ---------------------------------------------------------------------------------------------
// Interpolation policies: along one axis, the first tap and the weights of `taps` consecutive taps.

struct NearestTaps {
    static constexpr int taps = 1;
    template <class C> static C first_tap(C u) { return std::nearbyint(u); }  // ties to even
    template <class C> static void weights(C, C, C* w) { w[0] = C(1); }
};

struct LinearTaps {
    static constexpr int taps = 2;
    template <class C> static C first_tap(C u) { return std::floor(u); }
    template <class C> static void weights(C u, C first, C* w) {
        const C t = u - first;
        w[0] = C(1) - t;
        w[1] = t;
    }
};

struct CubicTaps {
    static constexpr int taps = 4;
    template <class C> static C first_tap(C u) { return std::floor(u) - C(1); }
    // Keys cubic convolution, A = -0.75 (PyTorch, ONNX), t the offset from the second tap.
    template <class C> static void weights(C u, C first, C* w) {
        constexpr C A = C(-0.75);
        const C t = u - (first + C(1));
        const C t1 = t + C(1), s = C(1) - t, s1 = C(2) - t;
        w[0] = ((A * t1 - C(5) * A) * t1 + C(8) * A) * t1 - C(4) * A;
        w[1] = ((A + C(2)) * t - (A + C(3))) * t * t + C(1);
        w[2] = ((A + C(2)) * s - (A + C(3))) * s * s + C(1);
        w[3] = ((A * s1 - C(5) * A) * s1 + C(8) * A) * s1 - C(4) * A;
    }
};

// ---------------------------------------------------------------------------------------------
// Padding policies. Each bounds a coordinate before it is converted to an integer (finite
// coordinates of any size must not overflow that conversion), then maps every tap index to an
// input index, or to -1 for "outside: read the fill value".

// Beyond this, every tap of every interpolation lies outside the axis or on its edge.
template <class C> constexpr C kTapReach = C(6);

struct ZerosPadding {
    // False when every tap is outside the axis: the whole point takes the fill value.
    template <class C> static bool bound(C& u, std::int64_t d) {
        return u > -kTapReach<C> && u < static_cast<C>(d) + kTapReach<C>;
    }
    static std::int64_t map(std::int64_t i, std::int64_t d, bool) { return (i >= 0 && i < d) ? i : -1; }
};

struct BorderPadding {
    // Past -2 or d+1 every tap clamps to the edge; snapping to those integers keeps the weights exact.
    template <class C> static bool bound(C& u, std::int64_t d) {
        u = std::clamp(u, C(-2), static_cast<C>(d) + C(1));
        return true;
    }
    static std::int64_t map(std::int64_t i, std::int64_t d, bool) { return std::clamp<std::int64_t>(i, 0, d - 1); }
};

struct ReflectionPadding {
    template <class C> static bool bound(C&, std::int64_t) { return true; }  // folded in normalized space
    // Reflect about -0.5 and d-0.5 (align_corners=0) or 0 and d-1 (align_corners=1), repeatedly.
    static std::int64_t map(std::int64_t i, std::int64_t d, bool align_corners) {
        if (d == 1) return 0;
        const std::int64_t period = align_corners ? 2 * (d - 1) : 2 * d;
        std::int64_t m = i % period;
        if (m < 0) m += period;
        if (m < d) return m;
        return align_corners ? period - m : period - 1 - m;
    }
};

template <class C>
C unnormalize(C g, std::int64_t d, bool align_corners) {
    const C extent = static_cast<C>(d);
    return align_corners ? (g + C(1)) / C(2) * (extent - C(1)) : ((g + C(1)) * extent - C(1)) / C(2);
}

// Taps and weights along one axis. False when the point takes the fill value.
template <class C, class Interp, class Pad>
bool axis_taps(C g, std::int64_t d, bool align_corners, CoordinateSpace space, std::int64_t* index, C* weight) {
    if (!std::isfinite(g) || d == 0) return false;
    C u;
    if (space == CoordinateSpace::Normalized) {
        if constexpr (std::is_same_v<Pad, ReflectionPadding>) {
            // Reflection repeats with period 4 in normalized units for both align_corners settings;
            // folding a far coordinate keeps the unnormalized value small enough for an int64.
            constexpr C kFoldBeyond = C(1 << 20);
            if (std::fabs(g) > kFoldBeyond) g = std::fmod(g, C(4));
        }
        u = unnormalize(g, d, align_corners);
    } else {
        u = g;
        if constexpr (std::is_same_v<Pad, ReflectionPadding>) {
            // The same period in pixels: 2d, or 2(d-1) with align_corners (any period for d = 1).
            const C period = static_cast<C>(align_corners ? 2 * std::max<std::int64_t>(d - 1, 1) : 2 * d);
            constexpr C kFoldBeyond = C(std::int64_t{1} << 40);
            if (std::fabs(u) > kFoldBeyond) u = std::fmod(u, period);
        }
    }
    if (!Pad::bound(u, d)) return false;
    const C first = Interp::first_tap(u);
    Interp::weights(u, first, weight);
    const auto first_index = static_cast<std::int64_t>(first);
    for (int k = 0; k < Interp::taps; ++k) index[k] = Pad::map(first_index + k, d, align_corners);
    return true;
}

constexpr std::int64_t int_pow(std::int64_t base, std::int64_t exponent) {
    std::int64_t result = 1;
    while (exponent-- > 0) result *= base;
    return result;
}

// ---------------------------------------------------------------------------------------------
// Stage 1: the plan of a chunk of points.

struct InputGeometry {
    int rank = 0;
    const std::int64_t* extent = nullptr;  // D1..Dr, outermost first
    const std::int64_t* stride = nullptr;  // element strides of D1..Dr
    bool align_corners = false;
    CoordinateSpace space = CoordinateSpace::Normalized;
};

template <class C>
struct Plan {
    std::int64_t taps_per_point = 0;
    std::vector<std::int64_t> offset;     // points x taps; -1: outside, read the fill value
    std::vector<C> weight;                // points x taps
    std::vector<unsigned char> fill;      // per point: 1 when the whole point is the fill value
    std::vector<std::int64_t> axis_index; // scratch: rank x taps-per-axis
    std::vector<C> axis_weight;
};

template <class C>
using PlanFunction = void (*)(const C* xyz, std::int64_t count, const InputGeometry& geometry, Plan<C>& plan);

template <class C, class Interp, class Pad, int FixedRank>
void build_plan(const C* xyz, std::int64_t count, const InputGeometry& geometry, Plan<C>& plan) {
    constexpr int K = Interp::taps;
    const int rank = FixedRank > 0 ? FixedRank : geometry.rank;
    const std::int64_t taps = FixedRank > 0 ? int_pow(K, FixedRank) : plan.taps_per_point;
    std::int64_t* axis_index = plan.axis_index.data();
    C* axis_weight = plan.axis_weight.data();
    for (std::int64_t p = 0; p < count; ++p) {
        const C* coords = xyz + p * rank;
        bool inside = true;
        for (int a = 0; a < rank && inside; ++a) {
            // Coordinates come innermost-first: x belongs to the last input axis.
            inside = axis_taps<C, Interp, Pad>(coords[rank - 1 - a], geometry.extent[a], geometry.align_corners,
                                               geometry.space, axis_index + a * K, axis_weight + a * K);
        }
        plan.fill[p] = inside ? 0 : 1;
        if (!inside) continue;
        // Tensor product of the per-axis taps, expanded in place from the back; the tap number has
        // the outermost axis as its most significant digit.
        std::int64_t* offset = plan.offset.data() + p * taps;
        C* weight = plan.weight.data() + p * taps;
        offset[0] = 0;
        weight[0] = C(1);
        std::int64_t filled = 1;
        for (int a = 0; a < rank; ++a) {
            const std::int64_t stride = geometry.stride[a];
            for (std::int64_t j = filled; j-- > 0;) {
                const std::int64_t base_offset = offset[j];
                const C base_weight = weight[j];
                for (int k = K; k-- > 0;) {
                    const std::int64_t index = axis_index[a * K + k];
                    offset[j * K + k] = (base_offset < 0 || index < 0) ? -1 : base_offset + index * stride;
                    weight[j * K + k] = base_weight * axis_weight[a * K + k];
                }
            }
            filled *= K;
        }
    }
}

template <class Fn>
decltype(auto) visit_interpolation(Interpolation mode, Fn&& fn) {
    switch (mode) {
        case Interpolation::Nearest: return fn(type_tag<NearestTaps>{});
        case Interpolation::Cubic: return fn(type_tag<CubicTaps>{});
        case Interpolation::Linear: break;
    }
    return fn(type_tag<LinearTaps>{});
}

template <class Fn>
decltype(auto) visit_padding(Padding padding, Fn&& fn) {
    switch (padding) {
        case Padding::Border: return fn(type_tag<BorderPadding>{});
        case Padding::Reflection: return fn(type_tag<ReflectionPadding>{});
        case Padding::Zeros: break;
    }
    return fn(type_tag<ZerosPadding>{});
}

template <class C>
PlanFunction<C> select_planner(const SampleOptions& options, int rank) {
    return visit_interpolation(options.mode, [&](auto interp) {
        return visit_padding(options.padding, [&](auto pad) -> PlanFunction<C> {
            using I = typename decltype(interp)::type;
            using P = typename decltype(pad)::type;
            if (!options.force_generic_rank && rank == 2) return &build_plan<C, I, P, 2>;
            if (!options.force_generic_rank && rank == 3) return &build_plan<C, I, P, 3>;
            return &build_plan<C, I, P, 0>;
        });
    });
}

// ---------------------------------------------------------------------------------------------
// Stage 2: per pixel type, load into the compute type, accumulate, store with rounding.

template <class S> struct compute_type { using type = float; };  // 8/16-bit integers, bool, float16, bfloat16, float32
template <> struct compute_type<double> { using type = double; };
template <> struct compute_type<std::int32_t> { using type = double; };
template <> struct compute_type<std::int64_t> { using type = double; };
template <> struct compute_type<std::uint32_t> { using type = double; };
template <> struct compute_type<std::uint64_t> { using type = double; };
template <> struct compute_type<std::complex<float>> { using type = std::complex<float>; };
template <> struct compute_type<std::complex<double>> { using type = std::complex<double>; };

template <class V> struct real_of { using type = V; };
template <class R> struct real_of<std::complex<R>> { using type = R; };

template <class V, class S>
V load(const S& value) {
    if constexpr (std::is_same_v<S, float16> || std::is_same_v<S, bfloat16>) {
        return static_cast<float>(value);
    } else if constexpr (std::is_same_v<S, bool>) {
        return value ? V(1) : V(0);
    } else {
        return static_cast<V>(value);
    }
}

// Round half to even and saturate; NaN becomes 0 (only a NaN fill value can produce one).
template <class S, class R>
S round_saturate(R value) {
    if (std::isnan(value)) return S(0);
    const R rounded = std::nearbyint(value);
    if constexpr (std::is_same_v<S, bool>) {
        return rounded >= R(1);
    } else {
        // Limits as powers of two are exact in R; compare before converting (no overflow UB).
        constexpr R upper = std::is_signed_v<S> ? R(std::numeric_limits<S>::max()) + R(1)
                                                : R(std::numeric_limits<S>::max()) + R(1);
        constexpr R lower = R(std::numeric_limits<S>::min());
        if (rounded >= upper) return std::numeric_limits<S>::max();
        if (rounded <= lower) return std::numeric_limits<S>::min();
        return static_cast<S>(rounded);
    }
}

template <class S, class V>
S store(V value) {
    if constexpr (std::is_same_v<S, float16> || std::is_same_v<S, bfloat16>) {
        return S(value);
    } else if constexpr (std::is_integral_v<S>) {
        return round_saturate<S>(value);
    } else {
        return static_cast<S>(value);
    }
}

struct OutputRow {
    std::int64_t element_stride = 0;  // stride of the innermost output axis
};

// Nearest: copies values exactly, for every type.
template <class S, class C>
void copy_chunk(const Plan<C>& plan, std::int64_t count, const S* input, S* output, std::int64_t output_stride,
                const S& fill) {
    for (std::int64_t p = 0; p < count; ++p) {
        const std::int64_t offset = plan.offset[p];
        output[p * output_stride] = (plan.fill[p] || offset < 0) ? fill : input[offset];
    }
}

// Linear and cubic: weighted sums. Taps > 0 fixes the tap count at compile time so the inner
// loop unrolls; 0 reads it from the plan.
template <int Taps, class S, class C>
void gather_chunk(const Plan<C>& plan, std::int64_t count, const S* input, S* output, std::int64_t output_stride,
                  const S& fill_stored, typename compute_type<S>::type fill_value) {
    using V = typename compute_type<S>::type;
    using R = typename real_of<V>::type;
    const std::int64_t taps = Taps > 0 ? Taps : plan.taps_per_point;
    for (std::int64_t p = 0; p < count; ++p) {
        if (plan.fill[p]) {
            output[p * output_stride] = fill_stored;
            continue;
        }
        const std::int64_t* offset = plan.offset.data() + p * taps;
        const C* weight = plan.weight.data() + p * taps;
        V sum = V(0);
        for (std::int64_t t = 0; t < taps; ++t) {
            const V value = offset[t] >= 0 ? load<V>(input[offset[t]]) : fill_value;
            sum += static_cast<R>(weight[t]) * value;
        }
        output[p * output_stride] = store<S>(sum);
    }
}

// Points per chunk: enough to amortise the per-row calls, few enough that a plan stays in cache.
constexpr std::int64_t kPlanTapBudget = 8192;

struct Task {
    const ConstTensorView& input;
    const PositionSource& positions;
    const TensorView& output;
    const SampleOptions& options;
};

template <class S, class C>
void run_sampler(const Task& task) {
    const auto& input = task.input;
    const auto& output = task.output;
    const auto& options = task.options;
    const int rank = static_cast<int>(input.rank()) - 2;
    const Shape& out_spatial = task.positions.output_shape();
    const std::int64_t batch = input.shape[0];
    const std::int64_t channels = input.shape[1];
    const std::int64_t width = out_spatial.back();
    const std::int64_t rows = shape_numel(Shape(out_spatial.begin(), out_spatial.end() - 1));

    const int taps_per_axis = options.mode == Interpolation::Nearest ? 1 : options.mode == Interpolation::Linear ? 2 : 4;
    const std::int64_t taps = int_pow(taps_per_axis, rank);
    const std::int64_t chunk = std::clamp<std::int64_t>(kPlanTapBudget / taps, 1, std::max<std::int64_t>(width, 1));
    const std::int64_t chunks_per_row = (width + chunk - 1) / chunk;
    const std::int64_t work_items = batch * rows * chunks_per_row;

    const InputGeometry geometry{rank, input.shape.data() + 2, input.strides.data() + 2, options.align_corners,
                                 task.positions.space()};
    const PlanFunction<C> planner = select_planner<C>(options, rank);

    using V = typename compute_type<S>::type;
    S fill_stored{};
    V fill_value{};
    if constexpr (!std::is_same_v<S, std::string>) {
        fill_value = V(static_cast<typename real_of<V>::type>(options.fill));
        fill_stored = store<S>(fill_value);
    }

    const S* in_data = input.typed<S>();
    S* out_data = output.typed<S>();
    const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();

#pragma omp parallel num_threads(threads)
    {
        Plan<C> plan;
        plan.taps_per_point = taps;
        plan.offset.resize(static_cast<std::size_t>(chunk * taps));
        plan.weight.resize(static_cast<std::size_t>(chunk * taps));
        plan.fill.resize(static_cast<std::size_t>(chunk));
        plan.axis_index.resize(static_cast<std::size_t>(rank * taps_per_axis));
        plan.axis_weight.resize(static_cast<std::size_t>(rank * taps_per_axis));
        std::vector<C> xyz(static_cast<std::size_t>(chunk * rank));
        std::vector<std::int64_t> outer(static_cast<std::size_t>(std::max(rank - 1, 1)), 0);

#pragma omp for schedule(dynamic, 4)
        for (std::int64_t item = 0; item < work_items; ++item) {
            const std::int64_t chunk_index = item % chunks_per_row;
            const std::int64_t row = (item / chunks_per_row) % rows;
            const std::int64_t n = item / (chunks_per_row * rows);
            const std::int64_t start = chunk_index * chunk;
            const std::int64_t count = std::min(chunk, width - start);

            std::int64_t out_offset = n * output.strides[0] + start * output.strides[rank + 1];
            std::int64_t rest = row;
            for (int axis = rank - 2; axis >= 0; --axis) {
                outer[static_cast<std::size_t>(axis)] = rest % out_spatial[static_cast<std::size_t>(axis)];
                rest /= out_spatial[static_cast<std::size_t>(axis)];
                out_offset += outer[static_cast<std::size_t>(axis)] * output.strides[axis + 2];
            }

            task.positions.row(n, outer.data(), start, count, xyz.data());
            planner(xyz.data(), count, geometry, plan);

            const std::int64_t out_stride = output.strides[rank + 1];
            for (std::int64_t c = 0; c < channels; ++c) {
                const S* channel_in = in_data + n * input.strides[0] + c * input.strides[1];
                S* channel_out = out_data + out_offset + c * output.strides[1];
                if constexpr (std::is_same_v<S, std::string>) {
                    copy_chunk(plan, count, channel_in, channel_out, out_stride, fill_stored);
                } else {
                    switch (taps) {
                        case 1: copy_chunk(plan, count, channel_in, channel_out, out_stride, fill_stored); break;
                        case 4: gather_chunk<4>(plan, count, channel_in, channel_out, out_stride, fill_stored, fill_value); break;
                        case 8: gather_chunk<8>(plan, count, channel_in, channel_out, out_stride, fill_stored, fill_value); break;
                        case 16: gather_chunk<16>(plan, count, channel_in, channel_out, out_stride, fill_stored, fill_value); break;
                        case 64: gather_chunk<64>(plan, count, channel_in, channel_out, out_stride, fill_stored, fill_value); break;
                        default: gather_chunk<0>(plan, count, channel_in, channel_out, out_stride, fill_stored, fill_value); break;
                    }
                }
            }
        }
    }
}

void check_strides(const char* what, const Shape& strides) {
    for (auto stride : strides) {
        if (stride < 0) {
            throw std::invalid_argument(std::string("grid_sample(): ") + what +
                                        " strides must be non-negative, got " + shape_to_string(strides));
        }
    }
}

}  // namespace

Shape grid_sample_output_shape(const ConstTensorView& input, const PositionSource& positions) {
    if (input.rank() < 3) {
        throw std::invalid_argument("grid_sample(): input must have rank >= 3 (N, C, D1..Dr), got shape " +
                                    shape_to_string(input.shape));
    }
    const Shape& spatial = positions.output_shape();
    const auto rank = input.rank() - 2;
    if (positions.spatial_rank() != rank) {
        throw std::invalid_argument("grid_sample(): positions have spatial rank " +
                                    std::to_string(positions.spatial_rank()) + " (output " +
                                    shape_to_string(spatial) + ") but the input of shape " +
                                    shape_to_string(input.shape) + " has spatial rank " + std::to_string(rank));
    }
    if (positions.batch() != input.shape[0]) {
        throw std::invalid_argument("grid_sample(): positions are given for N=" + std::to_string(positions.batch()) +
                                    " but the input of shape " + shape_to_string(input.shape) + " has N=" +
                                    std::to_string(input.shape[0]));
    }
    Shape shape{input.shape[0], input.shape[1]};
    shape.insert(shape.end(), spatial.begin(), spatial.end());
    return shape;
}

void grid_sample(const ConstTensorView& input, const PositionSource& positions, const TensorView& output,
                 const SampleOptions& options) {
    const Shape expected = grid_sample_output_shape(input, positions);
    if (output.dtype != input.dtype || output.shape != expected) {
        throw std::invalid_argument("grid_sample(): output must be " + std::string(dtype_name(input.dtype)) + " " +
                                    shape_to_string(expected) + ", got " + std::string(dtype_name(output.dtype)) +
                                    " " + shape_to_string(output.shape));
    }
    if (input.dtype == DType::String && options.mode != Interpolation::Nearest) {
        throw std::invalid_argument("grid_sample(): " + std::string(interpolation_name(options.mode)) +
                                    " interpolation is not defined for string tensors; use nearest");
    }
    const DType coordinate = positions.coordinate_dtype();
    if (!is_floating(coordinate)) {
        throw std::invalid_argument("grid_sample(): positions must be float16, bfloat16, float32 or float64, got " +
                                    std::string(dtype_name(coordinate)));
    }
    check_strides("input", input.strides);
    check_strides("output", output.strides);
    if (shape_numel(expected) == 0) return;

    const Task task{input, positions, output, options};
    visit_dtype(input.dtype, [&](auto tag) {
        using S = typename decltype(tag)::type;
        if (coordinate == DType::Float64) {
            run_sampler<S, double>(task);
        } else {
            run_sampler<S, float>(task);
        }
    });
}

Tensor grid_sample(const ConstTensorView& input, const PositionSource& positions, const SampleOptions& options) {
    Tensor output(input.dtype, grid_sample_output_shape(input, positions));
    grid_sample(input, positions, output.view(), options);
    return output;
}

Tensor grid_sample(const ConstTensorView& input, const ConstTensorView& grid, const SampleOptions& options) {
    if (input.rank() < 3) {
        throw std::invalid_argument("grid_sample(): input must have rank >= 3 (N, C, D1..Dr), got shape " +
                                    shape_to_string(input.shape));
    }
    const auto rank = input.rank() - 2;
    if (grid.rank() != input.rank() || grid.shape.back() != rank) {
        throw std::invalid_argument("grid_sample(): grid must have shape (N, O1..O" + std::to_string(rank) + ", " +
                                    std::to_string(rank) + ") for an input of shape " +
                                    shape_to_string(input.shape) + ", got shape " + shape_to_string(grid.shape));
    }
    if (grid.shape[0] != input.shape[0]) {
        throw std::invalid_argument("grid_sample(): grid's N=" + std::to_string(grid.shape[0]) +
                                    " does not match the input's N=" + std::to_string(input.shape[0]) +
                                    " (input shape " + shape_to_string(input.shape) + ", grid shape " +
                                    shape_to_string(grid.shape) + ")");
    }
    check_strides("grid", grid.strides);
    const GridPositions positions(grid);
    return grid_sample(input, positions, options);
}

}  // namespace gridwarp
