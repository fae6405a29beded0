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
//
// That is the reference path, kept as the definition of the results. Ranks 2 and 3 of the common
// pixel types take a fast path (further down) with the same two stages over blocks of points,
// written for the compiler to vectorise, and with the same arithmetic in the same order, so that
// it gives the same bits; SampleOptions::force_generic_rank selects the reference path.
#include "gridwarp/grid_sample.hpp"

#include "bspline_prefilter.hpp"
#include "fast_path.hpp"
#include "sampling_policies.hpp"
#include "spline_sinc_kernels.hpp"
#include "work_split.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gridwarp {

Padding parse_padding(std::string_view name) {
    if (name == "zeros") return Padding::Zeros;
    if (name == "border") return Padding::Border;
    if (name == "reflection") return Padding::Reflection;
    throw std::invalid_argument("unknown padding mode '" + std::string(name) +
                                "': expected zeros, border or reflection");
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

// The policies, geometry and pass interface shared with the interior passes (sampling_policies.hpp, fast_path.hpp).
using namespace detail;

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
    bool any_inside = false;
    for (int k = 0; k < Interp::taps; ++k) {
        index[k] = Pad::map(first_index + k, d, align_corners);
        any_inside |= index[k] >= 0;
    }
    // Every tap outside this axis (zeros padding): the point is exactly the fill value, rather than
    // a sum of weight * fill that rounding may leave a hair off it.
    return any_inside;
}

constexpr std::int64_t int_pow(std::int64_t base, std::int64_t exponent) {
    std::int64_t result = 1;
    while (exponent-- > 0) result *= base;
    return result;
}

// ---------------------------------------------------------------------------------------------
// Stage 1: the plan of a chunk of points.

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

template <class C>
PlanFunction<C> select_planner(const SampleOptions& options, int rank) {
    return visit_any_interpolation(options.mode, options.spline_order, [&](auto interp) {
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
// Rint: round with std::rint instead of std::nearbyint. Both give the same value in every rounding
// mode (rint may raise FE_INEXACT besides), but rint compiles to inline SSE2 code where nearbyint is
// a library call. The reference path keeps nearbyint; the fast path uses rint.
template <class S, bool Rint = false, class R>
S round_saturate(R value) {
    if (std::isnan(value)) return S(0);
    const R rounded = Rint ? std::rint(value) : std::nearbyint(value);
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

template <class S, bool Rint = false, class V>
S store(V value) {
    if constexpr (std::is_same_v<S, float16> || std::is_same_v<S, bfloat16>) {
        return S(value);
    } else if constexpr (std::is_integral_v<S>) {
        return round_saturate<S, Rint>(value);
    } else {
        return static_cast<S>(value);
    }
}

// Nearest: copies values exactly, for every type.
template <class S, class C>
const S& copy_point(const Plan<C>& plan, std::int64_t p, const S* input, const S& fill) {
    const std::int64_t offset = plan.offset[static_cast<std::size_t>(p)];
    return (plan.fill[static_cast<std::size_t>(p)] || offset < 0) ? fill : input[offset];
}

template <class S, class C>
void copy_chunk(const Plan<C>& plan, std::int64_t count, const S* input, S* output, std::int64_t output_stride,
                const S& fill) {
    for (std::int64_t p = 0; p < count; ++p) output[p * output_stride] = copy_point(plan, p, input, fill);
}

// Linear and cubic: the weighted sum of one planned point. Taps > 0 fixes the tap count at
// compile time so the inner loop unrolls; 0 reads it from the plan.
template <int Taps, bool Rint, class S, class C>
S gather_point(const Plan<C>& plan, std::int64_t p, const S* input, const S& fill_stored,
               typename compute_type<S>::type fill_value) {
    using V = typename compute_type<S>::type;
    using R = typename real_of<V>::type;
    if (plan.fill[static_cast<std::size_t>(p)]) return fill_stored;
    const std::int64_t taps = Taps > 0 ? Taps : plan.taps_per_point;
    const std::int64_t* offset = plan.offset.data() + p * taps;
    const C* weight = plan.weight.data() + p * taps;
    V sum = V(0);
    for (std::int64_t t = 0; t < taps; ++t) {
        const R w = static_cast<R>(weight[t]);
        if (w == R(0)) continue;  // the zero-weight rule (sampling_policies.hpp)
        const V value = offset[t] >= 0 ? load<V>(input[offset[t]]) : fill_value;
        sum += w * value;
    }
    return store<S, Rint>(sum);
}

// GenericLabel: the label whose taps' weights sum to the most (SampleOptions::generic_label).
// `labels` and `sums` hold a point's distinct tap values and their summed weights.
template <class S, class C>
void label_chunk(const Plan<C>& plan, std::int64_t count, const S* input, S* output, std::int64_t output_stride,
                 const S& fill_stored, std::vector<S>& labels, std::vector<double>& sums) {
    const std::int64_t taps = plan.taps_per_point;
    // float16 and bfloat16 compare as float; the other types as they are.
    using Key = std::conditional_t<std::is_arithmetic_v<S>, S, float>;
    for (std::int64_t p = 0; p < count; ++p) {
        S& out = output[p * output_stride];
        if (plan.fill[static_cast<std::size_t>(p)]) {
            out = fill_stored;
            continue;
        }
        labels.clear();
        sums.clear();
        const std::int64_t* offset = plan.offset.data() + p * taps;
        const C* weight = plan.weight.data() + p * taps;
        for (std::int64_t t = 0; t < taps; ++t) {
            if (weight[t] == C(0)) continue;
            const S& value = offset[t] >= 0 ? input[offset[t]] : fill_stored;
            std::size_t at = 0;
            while (at < labels.size() && !(static_cast<Key>(labels[at]) == static_cast<Key>(value))) ++at;
            if (at == labels.size()) {
                labels.push_back(value);
                sums.push_back(0.0);
            }
            sums[at] += static_cast<double>(weight[t]);
        }
        if (labels.empty()) {
            out = fill_stored;
            continue;
        }
        std::size_t best = 0;
        for (std::size_t at = 1; at < labels.size(); ++at) {
            if (sums[at] > sums[best] ||
                (sums[at] == sums[best] && static_cast<Key>(labels[at]) < static_cast<Key>(labels[best]))) {
                best = at;
            }
        }
        out = labels[best];
    }
}

template <int Taps, class S, class C>
void gather_chunk(const Plan<C>& plan, std::int64_t count, const S* input, S* output, std::int64_t output_stride,
                  const S& fill_stored, typename compute_type<S>::type fill_value) {
    for (std::int64_t p = 0; p < count; ++p) {
        output[p * output_stride] = gather_point<Taps, false>(plan, p, input, fill_stored, fill_value);
    }
}

// ---------------------------------------------------------------------------------------------
// The fast path: ranks 2 and 3; float32, float64, 8- and 16-bit integer pixels; extents up to
// 2^22 and batch items that span fewer than 2^31 elements (int32 offsets). Everything else, and
// every call with SampleOptions::force_generic_rank, takes the reference path above.
//
// The output is cut into tiles (run_fast), so that a tile's input stays in cache, and a tile's
// rows into blocks of up to 256 points, each taken in two stages again:
//
//  1. fast_plan<Coord, Interp, Pad, Rank>: one loop over the block, which the compiler vectorises,
//     computes along every axis the pixel position u, whether every tap lies inside the input (an
//     "interior" point: padding cannot matter), the first tap by an integer conversion, the weights
//     by the interpolation policy's own weights(), the int32 offset of the first tap, and whether
//     the point certainly takes the fill value. The remaining "edge" points: under border and
//     reflection padding, those whose taps map by one clamp or one reflection get their mapped tap
//     indices and weights from a second vectorised loop (plan_near_points); all others ("far":
//     every edge point under zeros padding, and huge coordinates) are planned by the reference
//     planner build_plan itself.
//  2. fast_gather<Storage, Coord, Taps per axis, Rank>: every point of the block is first summed
//     as if it were interior, from its first tap's offset plus constant tap offsets, with no
//     per-tap bounds check and no branch (a loop the compiler vectorises); then fill points get the
//     fill value, near points the sum over their mapped taps, and far points the reference gather
//     of their reference plan, overwriting what the first pass wrote there.
//
// Every operation on a value is the reference path's, in the same order: the same u, the same
// bounding, the same weights, each tap weight 1 times the per-axis weights from the outermost axis
// on, the sum over taps in tap order starting from 0, the same rounding on store (an inline form of
// it where the values allow). The one difference: the reference skips the taps of weight zero, and
// the fast paths add them and sum again, skipping them, only where a float sum came out NaN, which
// gives the same bits (the zero-weight rule, sampling_policies.hpp). Vectorising computes many
// points at once but each with those operations, and no fused multiply-add can form (AVX2 is
// enabled without FMA, and generic x86-64 has none). So the results are the same bits as the
// reference path's, which tests/core/test_fast_paths.cpp checks for every interpolation, padding,
// align_corners, both instruction sets, strided views and points near, across and far past every
// edge.
//
// Instruction sets: the default build targets generic x86-64 (SSE2). On x86-64, the two stages are
// compiled a second time for AVX2 and chosen at run time when the processor has it (function
// multiversioning by hand rather than target_clones, so that a test can run either:
// GRIDWARP_ISA=baseline in the environment forces the generic code). Nothing else changes: no
// -march flag, and the library still runs on every x86-64 processor. (The macros that say so,
// GRIDWARP_AVX2_DISPATCH and GRIDWARP_TARGET_AVX2, are in fast_path.hpp.)

// Pixel types with a fast path (the rest are rare enough for the reference path).
template <class S>
inline constexpr bool kFastStorage = std::is_same_v<S, float> || std::is_same_v<S, double> ||
                                     std::is_same_v<S, std::uint8_t> || std::is_same_v<S, std::int8_t> ||
                                     std::is_same_v<S, std::uint16_t> || std::is_same_v<S, std::int16_t>;

// Extents up to this keep u, d - 1 and d - 0.5 exact in float and tap indices inside int32.
constexpr std::int64_t kFastMaxExtent = std::int64_t{1} << 22;

// Per-point flags as wide as the coordinate type, so that their loops vectorise for doubles too.
template <class C> using LaneFlag = std::conditional_t<sizeof(C) == 4, std::int32_t, std::int64_t>;

// store<S> for the sums of the dense pass, written so that it vectorises. There the sum is finite
// (finite weights times finite values) and, for 8- and 16-bit integers, below 2^22 in magnitude
// (|value| < 2^16 times the weights' absolute sum, below 2^6 for every mode and rank), where
// adding and subtracting 1.5 * 2^23 rounds half to even like nearbyint; the limits are exact in
// float. So this gives store<S>'s value.
template <class S, class V>
GRIDWARP_ALWAYS_INLINE S store_finite(V value) {
    if constexpr (std::is_integral_v<S>) {
        static_assert(sizeof(S) <= 2 && std::is_same_v<V, float>);
        constexpr V kRound = V(1.5) * V(std::int64_t{1} << (std::numeric_limits<V>::digits - 1));
        constexpr V lower = V(std::numeric_limits<S>::min());
        constexpr V upper = V(std::numeric_limits<S>::max());
        V r = (value + kRound) - kRound;
        r = r < lower ? lower : r;
        r = r > upper ? upper : r;
        return static_cast<S>(static_cast<std::int32_t>(r));
    } else {
        return static_cast<S>(value);
    }
}

template <class C>
struct FastBlock {
    static constexpr std::int64_t kPoints = 256;
    std::int64_t count = 0;
    std::int64_t interior_points = 0;
    std::vector<LaneFlag<C>> interior;     // per point: every tap is inside the input
    std::vector<LaneFlag<C>> fill;         // per point: the reference gives the fill value
    std::vector<C> weight;                 // rank x taps-per-axis x kPoints
    std::vector<std::int32_t> base;        // per point: the offset of its first tap
    std::vector<std::int32_t> tap_offset;  // per tap: its offset from the first tap
    std::int64_t fills = 0;
    std::vector<std::int32_t> fill_point;  // the fill points of the block
    std::int64_t edges = 0;
    std::vector<std::int32_t> edge_point;  // the other points (near or past an edge), and their coordinates
    std::vector<C> edge_xyz;
    // Border and reflection: edge points whose taps map by one clamp or reflection along every axis
    // ("near" points) keep their mapped tap indices and weights per axis (rank x taps-per-axis x kPoints,
    // by edge number); the others are planned by the reference planner.
    std::vector<LaneFlag<C>> near;
    std::vector<std::int32_t> near_index;
    std::vector<C> near_weight;
    std::vector<std::int32_t> stride;      // the input's spatial strides
    std::int64_t far_edges = 0;
    std::vector<std::int32_t> far_point;   // the points that the edge plan holds
    std::vector<C> far_xyz;
    Plan<C> edge_plan;
    // Scratch of the gather: the tap weights shared by several channels, in float or double.
    mutable std::vector<float> tap_weights_float;
    mutable std::vector<double> tap_weights_double;

    template <class R>
    R* tap_weights(std::int64_t taps) const {
        auto& scratch = [this]() -> std::vector<R>& {
            if constexpr (std::is_same_v<R, float>) return tap_weights_float;
            else return tap_weights_double;
        }();
        if (scratch.size() < static_cast<std::size_t>(taps * kPoints)) scratch.resize(static_cast<std::size_t>(taps * kPoints));
        return scratch.data();
    }

    FastBlock(int rank, int taps_per_axis, const std::int64_t* stride_values)
        : interior(kPoints),
          fill(kPoints),
          weight(static_cast<std::size_t>(rank * taps_per_axis * kPoints)),
          base(kPoints),
          fill_point(kPoints),
          edge_point(kPoints),
          edge_xyz(static_cast<std::size_t>(rank * kPoints)),
          near(kPoints),
          near_index(static_cast<std::size_t>(rank * taps_per_axis * kPoints)),
          near_weight(static_cast<std::size_t>(rank * taps_per_axis * kPoints)),
          stride(stride_values, stride_values + rank),
          far_point(kPoints),
          far_xyz(static_cast<std::size_t>(rank * kPoints)) {
        const std::int64_t taps = int_pow(taps_per_axis, rank);
        // Tap numbers as build_plan numbers them: the outermost axis is the most significant digit.
        tap_offset.assign(static_cast<std::size_t>(taps), 0);
        std::int64_t filled = 1;
        for (int a = 0; a < rank; ++a) {
            for (std::int64_t j = filled; j-- > 0;) {
                for (int k = taps_per_axis; k-- > 0;) {
                    tap_offset[static_cast<std::size_t>(j * taps_per_axis + k)] =
                        static_cast<std::int32_t>(tap_offset[static_cast<std::size_t>(j)] + k * stride_values[a]);
                }
            }
            filled *= taps_per_axis;
        }
        edge_plan.taps_per_point = taps;
        edge_plan.offset.resize(static_cast<std::size_t>(kPoints * taps));
        edge_plan.weight.resize(static_cast<std::size_t>(kPoints * taps));
        edge_plan.fill.resize(kPoints);
        edge_plan.axis_index.resize(static_cast<std::size_t>(rank * taps_per_axis));
        edge_plan.axis_weight.resize(static_cast<std::size_t>(rank * taps_per_axis));
    }
};

// Stage 1 for the points of a block, every axis in one pass. Returns the number of interior points.
template <PositionKind Kind, class C, class Interp, class Pad, int Rank>
GRIDWARP_ALWAYS_INLINE std::int64_t classify_points(const C* __restrict xyz, std::int64_t count,
                                                    const std::int64_t* extent, const std::int64_t* stride,
                                                    C* __restrict weight, std::int32_t* __restrict base,
                                                    LaneFlag<C>* __restrict interior, LaneFlag<C>* __restrict fill) {
    constexpr int K = Interp::taps;
    constexpr std::int64_t B = FastBlock<C>::kPoints;
    using Flag = LaneFlag<C>;
    C lo[Rank], hi[Rank], below_hi[Rank], out_below[Rank], out_from[Rank];
    std::int32_t s[Rank];
    std::int64_t d[Rank];
    for (int a = 0; a < Rank; ++a) {
        d[a] = extent[a];
        lo[a] = Interp::template interior_lo<C>();
        hi[a] = Interp::template interior_hi<C>(d[a]);
        below_hi[a] = std::nextafter(hi[a], -std::numeric_limits<C>::infinity());
        out_below[a] = Interp::template outside_below<C>();
        out_from[a] = Interp::template outside_from<C>(d[a]);
        s[a] = static_cast<std::int32_t>(stride[a]);
    }
    Flag interior_points = 0;
    for (std::int64_t p = 0; p < count; ++p) {
        Flag in_all = 1, fill_any = 0;
        std::int32_t offset = 0;
#pragma GCC unroll 3
        for (int a = 0; a < Rank; ++a) {
            const C g = xyz[p * Rank + (Rank - 1 - a)];  // coordinates come innermost-first
            const C u = pixel_position<Kind>(g, d[a]);
            const bool inside = (u >= lo[a]) & (u < hi[a]);  // false for NaN
            // u itself where inside; elsewhere (NaN included) a stand-in in [lo, hi), which keeps
            // the integer conversion defined and the taps inside the input. (max and min in this
            // order send NaN to lo and compile to maxss/minss, which vectorise.)
            const C safe = std::min(below_hi[a], std::max(lo[a], u));
            const std::int32_t f = Interp::interior_first(safe);
            offset += f * s[a];
            if constexpr (K > 1) {
                C w[K];
                Interp::weights(safe, static_cast<C>(f), w);
                for (int k = 0; k < K; ++k) weight[(a * K + k) * B + p] = w[k];
            }
            in_all &= static_cast<Flag>(inside);
            fill_any |= static_cast<Flag>(Pad::fills(g, u, d[a]));
            if constexpr (std::is_same_v<Pad, ZerosPadding>) {
                // Every tap outside this axis: axis_taps gives the fill value.
                fill_any |= static_cast<Flag>((u < out_below[a]) | (u >= out_from[a]));
            }
        }
        base[p] = offset;
        interior[p] = in_all;
        fill[p] = fill_any;
        interior_points += in_all;
    }
    return static_cast<std::int64_t>(interior_points);
}

// Stage 1 for the edge points of a block under border or reflection padding: the coordinate as
// axis_taps bounds it, the first tap and weights as axis_taps computes them, and the mapped tap
// indices, where every axis's taps map by one clamp or reflection (near[e]); 0 elsewhere.
template <PositionKind Kind, class C, class Interp, class Pad, int Rank>
GRIDWARP_ALWAYS_INLINE void plan_near_points(const C* __restrict xyz, std::int64_t count, const std::int64_t* extent,
                                             bool align_corners, std::int32_t* __restrict index,
                                             C* __restrict weight, LaneFlag<C>* __restrict near) {
    constexpr int K = Interp::taps;
    constexpr std::int64_t B = FastBlock<C>::kPoints;
    using Flag = LaneFlag<C>;
    // Beyond these, axis_taps folds the coordinate first (reflection), or int32 would not do.
    constexpr C kLimit = C(std::int64_t{1} << 22);
    constexpr C kFoldBeyond = C(1 << 20);
    std::int64_t d[Rank];
    std::int32_t d32[Rank];
    for (int a = 0; a < Rank; ++a) {
        d[a] = extent[a];
        d32[a] = static_cast<std::int32_t>(extent[a]);
    }
    for (std::int64_t e = 0; e < count; ++e) {
        Flag all = 1;
#pragma GCC unroll 3
        for (int a = 0; a < Rank; ++a) {
            const C g = xyz[e * Rank + (Rank - 1 - a)];
            const C u = Pad::near_bound(pixel_position<Kind>(g, d[a]), d[a]);
            bool ok = std::fabs(u) < kLimit;
            if constexpr (std::is_same_v<Pad, ReflectionPadding> && Kind != PositionKind::Pixel) {
                ok &= std::fabs(g) <= kFoldBeyond;
            }
            const C safe = std::min(kLimit, std::max(-kLimit, u));  // u where ok; NaN never reaches here
            const std::int32_t first = Interp::near_first(safe);
            ok &= Pad::near_ok(first, K, d32[a], align_corners);
            if constexpr (K > 1) {
                C w[K];
                Interp::weights(safe, static_cast<C>(first), w);
                for (int k = 0; k < K; ++k) weight[(a * K + k) * B + e] = w[k];
            }
            for (int k = 0; k < K; ++k) {
                index[(a * K + k) * B + e] = ok ? Pad::near_map(first + k, d32[a], align_corners) : 0;
            }
            all &= static_cast<Flag>(ok);
        }
        near[e] = all;
    }
}

// Stage 1 for the edge points of a block (block.edges of them, listed in block.edge_point with
// their coordinates in block.edge_xyz): near points by plan_near_points, the others ("far") by the
// reference planner.
template <PositionKind Kind, class C, class Interp, class Pad, int Rank>
GRIDWARP_ALWAYS_INLINE void plan_edge_points(const InputGeometry& geometry, FastBlock<C>& block) {
    const std::int64_t edges = block.edges;
    // Edge points that are not near (all of them under zeros padding) are planned by the reference
    // planner build_plan.
    std::int64_t far_edges = 0;
    if constexpr (std::is_same_v<Pad, ZerosPadding>) {
        far_edges = edges;
        std::copy_n(block.edge_point.data(), edges, block.far_point.data());
        std::copy_n(block.edge_xyz.data(), edges * Rank, block.far_xyz.data());
    } else {
        plan_near_points<Kind, C, Interp, Pad, Rank>(block.edge_xyz.data(), edges, geometry.extent,
                                                     geometry.align_corners, block.near_index.data(),
                                                     block.near_weight.data(), block.near.data());
        for (std::int64_t e = 0; e < edges; ++e) {
            if (block.near[static_cast<std::size_t>(e)]) continue;
            block.far_point[static_cast<std::size_t>(far_edges)] = block.edge_point[static_cast<std::size_t>(e)];
            for (int k = 0; k < Rank; ++k) {
                block.far_xyz[static_cast<std::size_t>(far_edges * Rank + k)] =
                    block.edge_xyz[static_cast<std::size_t>(e * Rank + k)];
            }
            ++far_edges;
        }
    }
    block.far_edges = far_edges;
    if (far_edges > 0) build_plan<C, Interp, Pad, Rank>(block.far_xyz.data(), far_edges, geometry, block.edge_plan);
}

// Stage 1 for one kind of positions. (No lambdas here: a lambda's body would be compiled for the
// generic instruction set even inside the AVX2 build.)
template <PositionKind Kind, class C, class Interp, class Pad, int Rank>
GRIDWARP_ALWAYS_INLINE void fast_plan_kind(const C* xyz, std::int64_t count, const InputGeometry& geometry,
                                           FastBlock<C>& block) {
    block.count = count;
    block.interior_points = classify_points<Kind, C, Interp, Pad, Rank>(
        xyz, count, geometry.extent, geometry.stride, block.weight.data(), block.base.data(),
        block.interior.data(), block.fill.data());
    block.fills = 0;
    block.edges = 0;
    block.far_edges = 0;
    if (block.interior_points == count) return;
    // The rest: fill points, and edge points.
    std::int64_t fills = 0, edges = 0;
    for (std::int64_t p = 0; p < count; ++p) {
        if (block.interior[static_cast<std::size_t>(p)]) continue;
        if (block.fill[static_cast<std::size_t>(p)]) {
            block.fill_point[static_cast<std::size_t>(fills++)] = static_cast<std::int32_t>(p);
            continue;
        }
        block.edge_point[static_cast<std::size_t>(edges)] = static_cast<std::int32_t>(p);
        for (int k = 0; k < Rank; ++k) block.edge_xyz[static_cast<std::size_t>(edges * Rank + k)] = xyz[p * Rank + k];
        ++edges;
    }
    block.fills = fills;
    block.edges = edges;
    if (edges == 0) return;
    plan_edge_points<Kind, C, Interp, Pad, Rank>(geometry, block);
}

template <class C, class Interp, class Pad, int Rank>
GRIDWARP_STAGE void fast_plan_body(const C* xyz, std::int64_t count, const InputGeometry& geometry,
                                           FastBlock<C>& block) {
    if (geometry.space == CoordinateSpace::Pixel) {
        fast_plan_kind<PositionKind::Pixel, C, Interp, Pad, Rank>(xyz, count, geometry, block);
    } else if (geometry.align_corners) {
        fast_plan_kind<PositionKind::NormalizedCorners, C, Interp, Pad, Rank>(xyz, count, geometry, block);
    } else {
        fast_plan_kind<PositionKind::NormalizedEdges, C, Interp, Pad, Rank>(xyz, count, geometry, block);
    }
}

template <class C>
using FastPlanFunction = void (*)(const C* xyz, std::int64_t count, const InputGeometry& geometry, FastBlock<C>& block);

template <class C, class Interp, class Pad, int Rank>
void fast_plan(const C* xyz, std::int64_t count, const InputGeometry& geometry, FastBlock<C>& block) {
    fast_plan_body<C, Interp, Pad, Rank>(xyz, count, geometry, block);
}

#ifdef GRIDWARP_AVX2_DISPATCH
template <class C, class Interp, class Pad, int Rank>
GRIDWARP_TARGET_AVX2 void fast_plan_avx2(const C* xyz, std::int64_t count, const InputGeometry& geometry,
                                         FastBlock<C>& block) {
    fast_plan_body<C, Interp, Pad, Rank>(xyz, count, geometry, block);
}
#endif

template <class C>
FastPlanFunction<C> select_fast_planner(const SampleOptions& options, int rank, bool avx2) {
    return visit_interpolation(options.mode, [&](auto interp) {
        return visit_padding(options.padding, [&](auto pad) -> FastPlanFunction<C> {
            using I = typename decltype(interp)::type;
            using P = typename decltype(pad)::type;
#ifdef GRIDWARP_AVX2_DISPATCH
            if (avx2) return rank == 2 ? &fast_plan_avx2<C, I, P, 2> : &fast_plan_avx2<C, I, P, 3>;
#endif
            (void)avx2;
            return rank == 2 ? &fast_plan<C, I, P, 2> : &fast_plan<C, I, P, 3>;
        });
    });
}

// Stage 1 for a block whose interior and fill points an interior pass has written: only its edge
// points, listed by the pass in block.edge_point, are planned (near and far, as fast_plan_kind
// plans them), and the gather is told to write nothing else.
template <PositionKind Kind, class C, class Interp, class Pad, int Rank>
GRIDWARP_ALWAYS_INLINE void plan_listed_kind(const C* xyz, std::int64_t edges, const InputGeometry& geometry,
                                             FastBlock<C>& block) {
    block.interior_points = 0;  // no dense pass: the interior points are written
    block.fills = 0;
    block.edges = edges;
    block.far_edges = 0;
    for (std::int64_t e = 0; e < edges; ++e) {
        const std::int64_t p = block.edge_point[static_cast<std::size_t>(e)];
        for (int k = 0; k < Rank; ++k) block.edge_xyz[static_cast<std::size_t>(e * Rank + k)] = xyz[p * Rank + k];
    }
    if (edges > 0) plan_edge_points<Kind, C, Interp, Pad, Rank>(geometry, block);
}

template <class C, class Interp, class Pad, int Rank>
GRIDWARP_STAGE void plan_listed_body(const C* xyz, std::int64_t edges, const InputGeometry& geometry,
                                             FastBlock<C>& block) {
    if (geometry.space == CoordinateSpace::Pixel) {
        plan_listed_kind<PositionKind::Pixel, C, Interp, Pad, Rank>(xyz, edges, geometry, block);
    } else if (geometry.align_corners) {
        plan_listed_kind<PositionKind::NormalizedCorners, C, Interp, Pad, Rank>(xyz, edges, geometry, block);
    } else {
        plan_listed_kind<PositionKind::NormalizedEdges, C, Interp, Pad, Rank>(xyz, edges, geometry, block);
    }
}

template <class C>
using ListedPlanFunction = void (*)(const C* xyz, std::int64_t edges, const InputGeometry& geometry, FastBlock<C>& block);

#ifdef GRIDWARP_AVX2_DISPATCH
// Only the interior passes (AVX-512, AVX2) list edge points, and both need AVX2, so only an AVX2
// build of this stage is needed.
template <class C, class Interp, class Pad, int Rank>
GRIDWARP_TARGET_AVX2 void plan_listed_avx2(const C* xyz, std::int64_t edges, const InputGeometry& geometry,
                                           FastBlock<C>& block) {
    plan_listed_body<C, Interp, Pad, Rank>(xyz, edges, geometry, block);
}

template <class C>
ListedPlanFunction<C> select_listed_planner(const SampleOptions& options, int rank) {
    return visit_interpolation(options.mode, [&](auto interp) {
        return visit_padding(options.padding, [&](auto pad) -> ListedPlanFunction<C> {
            using I = typename decltype(interp)::type;
            using P = typename decltype(pad)::type;
            return rank == 2 ? &plan_listed_avx2<C, I, P, 2> : &plan_listed_avx2<C, I, P, 3>;
        });
    });
}
#endif

// The place value of each axis's digit in a tap number (the outermost axis is the most significant).
template <int K, int Rank>
constexpr std::array<int, Rank> digit_places() {
    std::array<int, Rank> place{};
    int value = 1;
    for (int a = Rank - 1; a >= 0; --a) {
        place[static_cast<std::size_t>(a)] = value;
        value *= K;
    }
    return place;
}

// The weight of tap t of point p as build_plan computes it: 1 times the per-axis weights from the
// outermost axis on, then converted to the compute type's real type R as the gather converts it.
template <class R, class C, int K, int Rank>
GRIDWARP_ALWAYS_INLINE R tap_weight(const C* __restrict axis_weight, int t, std::int64_t p) {
    constexpr std::int64_t B = FastBlock<C>::kPoints;
    constexpr std::array<int, Rank> kPlace = digit_places<K, Rank>();
    C w = C(1);
#pragma GCC unroll 3
    for (int a = 0; a < Rank; ++a) {
        const int k = (t / kPlace[static_cast<std::size_t>(a)]) % K;
        w = w * axis_weight[(a * K + k) * B + p];
    }
    return static_cast<R>(w);
}

// The zero-weight rule for dense_gather_body's float sums (sampling_policies.hpp): the points
// whose sum came out NaN, summed again without the taps of weight zero. A function of its own, off
// the vectorised loop.
template <bool Precomputed, class S, class C, int K, int Rank>
GRIDWARP_NOINLINE void resum_nan_points(std::int64_t count, const std::int32_t* base, const std::int32_t* offset,
                                        const C* axis_weight,
                                        const typename real_of<typename compute_type<S>::type>::type* tap_weights,
                                        const S* in, S* out, std::int64_t out_stride) {
    using V = typename compute_type<S>::type;
    using R = typename real_of<V>::type;
    constexpr std::int64_t B = FastBlock<C>::kPoints;
    constexpr int T = static_cast<int>(int_pow(K, Rank));
    for (std::int64_t p = 0; p < count; ++p) {
        S& result = out[p * out_stride];
        if (!std::isnan(result)) continue;
        V sum = V(0);
        for (int t = 0; t < T; ++t) {
            const R w = Precomputed ? tap_weights[t * B + p] : tap_weight<R, C, K, Rank>(axis_weight, t, p);
            add_weighted_tap(sum, w, load<V>(in[base[p] + offset[t]]));
        }
        result = store_finite<S>(sum);
    }
}

// Stage 2, first pass: one channel of every point of the block as if it were interior, with the
// tap weights computed on the way (one channel) or read from tap_weights (T x kPoints, computed
// once for all channels by tap_weights_body). (Called through dense_gather_channel[_avx2]: GCC
// vectorises where the restrict pointers are the parameters of a function that is not inlined.)
template <bool Precomputed, class S, class C, int K, int Rank>
GRIDWARP_STAGE void dense_gather_body(std::int64_t count, const std::int32_t* __restrict base,
                                              const std::int32_t* __restrict tap_offset,
                                              const C* __restrict axis_weight,
                                              const typename real_of<typename compute_type<S>::type>::type* __restrict tap_weights,
                                              const S* __restrict in, S* __restrict out, std::int64_t out_stride) {
    using V = typename compute_type<S>::type;
    using R = typename real_of<V>::type;
    constexpr std::int64_t B = FastBlock<C>::kPoints;
    constexpr int T = static_cast<int>(int_pow(K, Rank));
    std::int32_t offset[T];
    for (int t = 0; t < T; ++t) offset[t] = tap_offset[t];
    if constexpr (std::is_integral_v<S> && K > 1) {
        // GCC does not vectorise gathers of 8- and 16-bit values: gather the taps into a staging
        // array first (plain loads), then compute in a loop that vectorises.
        S staged[T * B];
        for (std::int64_t p = 0; p < count; ++p) {
            const std::int32_t b = base[p];
            for (int t = 0; t < T; ++t) staged[t * B + p] = in[b + offset[t]];
        }
        for (std::int64_t p = 0; p < count; ++p) {
            V sum = V(0);
#pragma GCC unroll 64
            for (int t = 0; t < T; ++t) {
                const R w = Precomputed ? tap_weights[t * B + p] : tap_weight<R, C, K, Rank>(axis_weight, t, p);
                sum += w * load<V>(staged[t * B + p]);
            }
            out[p * out_stride] = store_finite<S>(sum);
        }
        return;
    }
    // A NaN sum, if one came out (float pixels): the zero-weight rule. Kept as a value of V, not an
    // integer flag, so that GCC still vectorises the loop for double pixels.
    [[maybe_unused]] V nan_probe = V(0);
    for (std::int64_t p = 0; p < count; ++p) {
        const std::int32_t b = base[p];
        if constexpr (K == 1) {
            out[p * out_stride] = in[b];
        } else {
            V sum = V(0);
#pragma GCC unroll 64
            for (int t = 0; t < T; ++t) {
                const R w = Precomputed ? tap_weights[t * B + p] : tap_weight<R, C, K, Rank>(axis_weight, t, p);
                sum += w * load<V>(in[b + offset[t]]);
            }
            nan_probe = sum != sum ? sum : nan_probe;
            out[p * out_stride] = store_finite<S>(sum);
        }
    }
    if constexpr (K > 1 && std::is_floating_point_v<S>) {
        if (nan_probe != nan_probe) {
            resum_nan_points<Precomputed, S, C, K, Rank>(count, base, offset, axis_weight, tap_weights, in, out, out_stride);
        }
    }
}

template <class R, class C, int K, int Rank>
GRIDWARP_ALWAYS_INLINE void tap_weights_body(std::int64_t count, const C* __restrict axis_weight, R* __restrict tap_weights) {
    constexpr std::int64_t B = FastBlock<C>::kPoints;
    constexpr int T = static_cast<int>(int_pow(K, Rank));
    for (int t = 0; t < T; ++t) {
        for (std::int64_t p = 0; p < count; ++p) tap_weights[t * B + p] = tap_weight<R, C, K, Rank>(axis_weight, t, p);
    }
}

// The functions that the two instruction sets get compiled for.
#define GRIDWARP_DENSE_FUNCTIONS(SUFFIX, TARGET)                                                                 \
    template <bool Precomputed, class S, class C, int K, int Rank>                                               \
    GRIDWARP_NOINLINE TARGET void dense_gather_channel##SUFFIX(                                                  \
        std::int64_t count, const std::int32_t* __restrict base, const std::int32_t* __restrict tap_offset,     \
        const C* __restrict axis_weight,                                                                         \
        const typename real_of<typename compute_type<S>::type>::type* __restrict tap_weights,                   \
        const S* __restrict in, S* __restrict out, std::int64_t out_stride) {                                   \
        dense_gather_body<Precomputed, S, C, K, Rank>(count, base, tap_offset, axis_weight, tap_weights, in, out, \
                                                      out_stride);                                               \
    }                                                                                                            \
    template <class R, class C, int K, int Rank>                                                                 \
    GRIDWARP_NOINLINE TARGET void tap_weights##SUFFIX(std::int64_t count, const C* __restrict axis_weight,      \
                                                      R* __restrict tap_weights) {                               \
        tap_weights_body<R, C, K, Rank>(count, axis_weight, tap_weights);                                       \
    }

GRIDWARP_DENSE_FUNCTIONS(, )
#ifdef GRIDWARP_AVX2_DISPATCH
GRIDWARP_DENSE_FUNCTIONS(_avx2, GRIDWARP_TARGET_AVX2)
#endif

#ifdef GRIDWARP_AVX2_DISPATCH
// dense_gather_body for 2 to 4 interleaved 8- or 16-bit channels at once, 8 points at a time: one
// 32-bit gather per tap brings 4 (uint8) or 2 (uint16) channels of 8 points, instead of a staged
// load per tap and channel. Each channel is summed in tap order from +0 with the same float
// products, and rounded half to even and clamped as store_finite does. The gathers read whole
// 32-bit words from a pixel's first channel on: the caller makes sure they lie inside the input.
template <class S, int Channels, int T>
GRIDWARP_NOINLINE GRIDWARP_TARGET_AVX2 void interleaved_gather_avx2(std::int64_t count, const std::int32_t* __restrict base,
                                                                   const std::int32_t* __restrict tap_offset,
                                                                   const float* __restrict tap_weights, const S* __restrict in,
                                                                   S* __restrict out, std::int64_t out_point_stride,
                                                                   std::int64_t out_channel_stride) {
    static_assert(std::is_same_v<S, std::uint8_t> || std::is_same_v<S, std::uint16_t>);
    constexpr std::int64_t B = FastBlock<double>::kPoints;
    static_assert(FastBlock<float>::kPoints == B);
    constexpr int kPerWord = 4 / static_cast<int>(sizeof(S));
    constexpr int kWords = (Channels + kPerWord - 1) / kPerWord;
    constexpr int kBits = 8 * static_cast<int>(sizeof(S));
    const __m256i value_mask = _mm256_set1_epi32((1 << kBits) - 1);
    std::int64_t p = 0;
    for (; p + 8 <= count; p += 8) {
        const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + p));
        __m256 sum[Channels];
        for (int c = 0; c < Channels; ++c) sum[c] = _mm256_setzero_ps();
#pragma GCC unroll 64
        for (int t = 0; t < T; ++t) {
            const __m256i index = _mm256_add_epi32(first, _mm256_set1_epi32(tap_offset[t]));
            const __m256 weight = _mm256_loadu_ps(tap_weights + t * B + p);
            for (int w = 0; w < kWords; ++w) {
                const __m256i words =
                    _mm256_i32gather_epi32(reinterpret_cast<const int*>(in + w * kPerWord), index, static_cast<int>(sizeof(S)));
                for (int k = 0; k < kPerWord && w * kPerWord + k < Channels; ++k) {
                    const int c = w * kPerWord + k;
                    const __m256 value = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(words, kBits * k), value_mask));
                    sum[c] = _mm256_add_ps(sum[c], _mm256_mul_ps(weight, value));
                }
            }
        }
        for (int c = 0; c < Channels; ++c) {
            const __m256i rounded = _mm256_cvtps_epi32(_mm256_round_ps(sum[c], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1));
            alignas(16) S values[16];
            if constexpr (sizeof(S) == 1) {
                _mm_store_si128(reinterpret_cast<__m128i*>(values), _mm_packus_epi16(packed, packed));
            } else {
                _mm_store_si128(reinterpret_cast<__m128i*>(values), packed);
            }
            S* o = out + c * out_channel_stride + p * out_point_stride;
            for (int i = 0; i < 8; ++i) o[i * out_point_stride] = values[i];
        }
    }
    for (; p < count; ++p) {
        for (int c = 0; c < Channels; ++c) {
            float sum = 0.0f;
            for (int t = 0; t < T; ++t) sum += tap_weights[t * B + p] * static_cast<float>(in[base[p] + tap_offset[t] + c]);
            out[c * out_channel_stride + p * out_point_stride] = store_finite<S>(sum);
        }
    }
}

// Whether interleaved_gather_avx2 may run on this block: 2 to 4 interleaved channels, and every
// point's 32-bit reads inside the input's `input_span` elements.
template <class S, class C, int T>
bool interleaved_words_readable(const FastBlock<C>& block, std::int64_t channels, std::int64_t input_channel_stride,
                                std::int64_t input_span) {
    if (channels < 2 || channels > 4 || input_channel_stride != 1 || block.count == 0) return false;
    constexpr std::int64_t kPerWord = 4 / static_cast<std::int64_t>(sizeof(S));
    const std::int64_t read_elements = (channels + kPerWord - 1) / kPerWord * kPerWord;
    const std::int32_t last_tap = *std::max_element(block.tap_offset.data(), block.tap_offset.data() + T);
    const std::int32_t last_base = *std::max_element(block.base.data(), block.base.data() + block.count);
    return std::int64_t{last_base} + last_tap + read_elements <= input_span;
}
#endif

template <bool Avx2, class S, class C, int K, int Rank>
GRIDWARP_STAGE void fast_gather_body(const FastBlock<C>& block, const S* input, S* output,
                                             const FastOutput<S>& out, std::int64_t input_span) {
    constexpr int T = static_cast<int>(int_pow(K, Rank));
    const std::int64_t ops = out.output_point_stride;
    const std::int64_t ocs = out.output_channel_stride;
    const std::int64_t ics = out.input_channel_stride;
    if (block.interior_points > 0) {
        using R = typename real_of<typename compute_type<S>::type>::type;
        // Several channels share the tap weights, computed once.
        const bool shared = K > 1 && out.channels > 1;
        R* tap_weights = nullptr;
        if (shared) {
            tap_weights = block.template tap_weights<R>(T);
#ifdef GRIDWARP_AVX2_DISPATCH
            if constexpr (Avx2) {
                tap_weights_avx2<R, C, K, Rank>(block.count, block.weight.data(), tap_weights);
            } else
#endif
            {
                ::gridwarp::tap_weights<R, C, K, Rank>(block.count, block.weight.data(), tap_weights);
            }
        }
        bool channels_done = false;
#ifdef GRIDWARP_AVX2_DISPATCH
        if constexpr (Avx2 && (std::is_same_v<S, std::uint8_t> || std::is_same_v<S, std::uint16_t>) && K > 1) {
            if (shared && interleaved_words_readable<S, C, T>(block, out.channels, ics, input_span)) {
                const auto gather = out.channels == 2   ? &interleaved_gather_avx2<S, 2, T>
                                    : out.channels == 3 ? &interleaved_gather_avx2<S, 3, T>
                                                        : &interleaved_gather_avx2<S, 4, T>;
                gather(block.count, block.base.data(), block.tap_offset.data(), tap_weights, input, output, ops, ocs);
                channels_done = true;
            }
        }
#else
        (void)input_span;
#endif
        for (std::int64_t c = 0; c < out.channels && !channels_done; ++c) {
            const S* in = input + c * ics;
            S* o = output + c * ocs;
#ifdef GRIDWARP_AVX2_DISPATCH
            if constexpr (Avx2) {
                if (shared) {
                    dense_gather_channel_avx2<true, S, C, K, Rank>(block.count, block.base.data(), block.tap_offset.data(),
                                                                   block.weight.data(), tap_weights, in, o, ops);
                } else {
                    dense_gather_channel_avx2<false, S, C, K, Rank>(block.count, block.base.data(), block.tap_offset.data(),
                                                                    block.weight.data(), tap_weights, in, o, ops);
                }
                continue;
            }
#endif
            if (shared) {
                dense_gather_channel<true, S, C, K, Rank>(block.count, block.base.data(), block.tap_offset.data(),
                                                          block.weight.data(), tap_weights, in, o, ops);
            } else {
                dense_gather_channel<false, S, C, K, Rank>(block.count, block.base.data(), block.tap_offset.data(),
                                                           block.weight.data(), tap_weights, in, o, ops);
            }
        }
    }
    for (std::int64_t f = 0; f < block.fills; ++f) {
        S* o = output + block.fill_point[static_cast<std::size_t>(f)] * ops;
        for (std::int64_t c = 0; c < out.channels; ++c) o[c * ocs] = out.fill_stored;
    }
    // Near points (border, reflection): the mapped taps, summed as the reference sums them (few
    // points: the zero-weight rule directly).
    if constexpr (K > 1) {
        if (block.far_edges < block.edges) {
            using V = typename compute_type<S>::type;
            using R = typename real_of<V>::type;
            constexpr std::int64_t B = FastBlock<C>::kPoints;
            constexpr std::array<int, Rank> kPlace = digit_places<K, Rank>();
            for (std::int64_t e = 0; e < block.edges; ++e) {
                if (!block.near[static_cast<std::size_t>(e)]) continue;
                std::int32_t offset[T];
                R w[T];
                for (int t = 0; t < T; ++t) {
                    std::int32_t sum_offset = 0;
                    for (int a = 0; a < Rank; ++a) {
                        const int k = (t / kPlace[static_cast<std::size_t>(a)]) % K;
                        sum_offset += block.near_index[static_cast<std::size_t>((a * K + k) * B + e)] * block.stride[static_cast<std::size_t>(a)];
                    }
                    offset[t] = sum_offset;
                    w[t] = tap_weight<R, C, K, Rank>(block.near_weight.data(), t, e);
                }
                S* o = output + block.edge_point[static_cast<std::size_t>(e)] * ops;
                for (std::int64_t c = 0; c < out.channels; ++c) {
                    const S* in = input + c * ics;
                    V sum = V(0);
                    for (int t = 0; t < T; ++t) add_weighted_tap(sum, w[t], load<V>(in[offset[t]]));
                    o[c * ocs] = store_finite<S>(sum);
                }
            }
        }
    } else {
        for (std::int64_t e = 0; e < block.edges; ++e) {
            if (!block.near[static_cast<std::size_t>(e)] || block.far_edges == block.edges) continue;
            std::int32_t offset = 0;
            for (int a = 0; a < Rank; ++a) offset += block.near_index[static_cast<std::size_t>(a * FastBlock<C>::kPoints + e)] * block.stride[static_cast<std::size_t>(a)];
            S* o = output + block.edge_point[static_cast<std::size_t>(e)] * ops;
            for (std::int64_t c = 0; c < out.channels; ++c) o[c * ocs] = input[c * ics + offset];
        }
    }
    // Far edge points: the reference gather of their reference plan.
    for (std::int64_t e = 0; e < block.far_edges; ++e) {
        S* o = output + block.far_point[static_cast<std::size_t>(e)] * ops;
        for (std::int64_t c = 0; c < out.channels; ++c) {
            if constexpr (K == 1) {
                o[c * ocs] = copy_point(block.edge_plan, e, input + c * ics, out.fill_stored);
            } else {
                o[c * ocs] = gather_point<T, true>(block.edge_plan, e, input + c * ics, out.fill_stored, out.fill_value);
            }
        }
    }
}

template <class S, class C>
using FastGatherFunction = void (*)(const FastBlock<C>& block, const S* input, S* output, const FastOutput<S>& out,
                                    std::int64_t input_span);

template <class S, class C, int K, int Rank>
void fast_gather(const FastBlock<C>& block, const S* input, S* output, const FastOutput<S>& out, std::int64_t input_span) {
    fast_gather_body<false, S, C, K, Rank>(block, input, output, out, input_span);
}

#ifdef GRIDWARP_AVX2_DISPATCH
template <class S, class C, int K, int Rank>
GRIDWARP_TARGET_AVX2 void fast_gather_avx2(const FastBlock<C>& block, const S* input, S* output,
                                           const FastOutput<S>& out, std::int64_t input_span) {
    fast_gather_body<true, S, C, K, Rank>(block, input, output, out, input_span);
}
#endif

template <class S, class C>
FastGatherFunction<S, C> select_fast_gatherer(Interpolation mode, int rank, bool avx2) {
    return visit_interpolation(mode, [&](auto interp) -> FastGatherFunction<S, C> {
        constexpr int K = decltype(interp)::type::taps;
#ifdef GRIDWARP_AVX2_DISPATCH
        if (avx2) return rank == 2 ? &fast_gather_avx2<S, C, K, 2> : &fast_gather_avx2<S, C, K, 3>;
#endif
        (void)avx2;
        return rank == 2 ? &fast_gather<S, C, K, 2> : &fast_gather<S, C, K, 3>;
    });
}

// Output tiles of the fast path: kTileWidth points along the innermost axis times kTileRows
// along the next one in 2-D; in 3-D, kTileRows3d rows times kTileSlices slices. Neighbouring rows
// of a warp read neighbouring input, so a tile's input stays in cache while the tile is sampled,
// where whole rows would stream a rotated input's rows through the cache again for every output
// row. A tile's rows go slice by slice, and in 3-D the next slice reads again most of the input
// lines that this one read for its upper taps: with 4 rows a slice they are a few rows old and
// still in cache, where with 64 they had often left it (W5 on two threads: 8-10% faster with
// 4 x 16 than with 64 x 4; 8 x 16 and 2 x 32 were within a few percent of 4 x 16).
constexpr std::int64_t kTileWidth = 256;
// Outputs from this size on are written with streaming stores where the pass can (FastOutput::stream).
constexpr std::int64_t kStreamOutputBytes = std::int64_t{8} << 20;
constexpr std::int64_t kTileRows = 64;
constexpr std::int64_t kTileRows3d = 4;
constexpr std::int64_t kTileSlices = 16;

// The instruction sets the fast path may use: the best the processor has, unless the environment
// says GRIDWARP_ISA=baseline (generic x86-64 only) or GRIDWARP_ISA=avx2 (no AVX-512), which tests
// use to check every build against the reference path.
struct IsaChoice {
    bool avx2 = false;
    bool avx512 = false;
};

IsaChoice select_isa() {
    IsaChoice choice;
#ifdef GRIDWARP_AVX2_DISPATCH
    const char* isa = std::getenv("GRIDWARP_ISA");
    const std::string_view wanted = isa != nullptr ? std::string_view(isa) : std::string_view();
    if (wanted == "baseline") return choice;
    choice.avx2 = __builtin_cpu_supports("avx2");
    choice.avx512 = choice.avx2 && wanted != "avx2" && __builtin_cpu_supports("avx512f") &&
                    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("avx512vbmi");
#endif
    return choice;
}

// Points per chunk: enough to amortise the per-row calls, few enough that a plan stays in cache.
constexpr std::int64_t kPlanTapBudget = 8192;

struct Task {
    const ConstTensorView& input;
    const PositionSource& positions;
    const TensorView& output;
    const SampleOptions& options;
};

template <class S>
struct Fill {
    S stored{};
    typename compute_type<S>::type value{};
    explicit Fill(double fill) {
        if constexpr (!std::is_same_v<S, std::string>) {
            using V = typename compute_type<S>::type;
            value = V(static_cast<typename real_of<V>::type>(fill));
            stored = store<S>(value);
        }
    }
};

int thread_count(const SampleOptions& options) { return options.threads > 0 ? options.threads : omp_get_max_threads(); }

// The output's rows in chunks of at most `chunk` points, shared out over the threads: each thread
// makes its scratch with make_scratch() and calls visit(scratch, n, outer, start, count, out_offset)
// per chunk, with outer the row's index on the axes before the last (outermost first).
template <class MakeScratch, class Visit>
void for_each_chunk(const Task& task, std::int64_t chunk, MakeScratch make_scratch, Visit visit) {
    const auto& output = task.output;
    const int rank = static_cast<int>(task.input.rank()) - 2;
    const Shape& out_spatial = task.positions.output_shape();
    const std::int64_t width = out_spatial.back();
    const std::int64_t rows = shape_numel(Shape(out_spatial.begin(), out_spatial.end() - 1));
    const std::int64_t chunks_per_row = (width + chunk - 1) / chunk;
    const std::int64_t work_items = task.input.shape[0] * rows * chunks_per_row;
    const int threads = thread_count(task.options);
    WorkSplit split(work_items, threads);
#pragma omp parallel num_threads(threads)
    {
        const int me = omp_get_thread_num();
        auto scratch = make_scratch();
        std::vector<std::int64_t> outer(static_cast<std::size_t>(std::max(rank - 1, 1)), 0);
        for (std::int64_t item = split.next(me); item >= 0; item = split.next(me)) {
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
            visit(scratch, n, outer.data(), start, count, out_offset);
        }
    }
}

// The reference path: any rank, any type; rows in chunks, planned by build_plan, gathered by
// copy_chunk / gather_chunk.
template <class S, class C>
void run_reference(const Task& task) {
    const auto& input = task.input;
    const auto& output = task.output;
    const auto& options = task.options;
    const int rank = static_cast<int>(input.rank()) - 2;
    const std::int64_t channels = input.shape[1];
    const std::int64_t width = task.positions.output_shape().back();

    const int axis_taps_count = taps_per_axis(options.mode, options.spline_order);
    const std::int64_t taps = int_pow(axis_taps_count, rank);
    const std::int64_t chunk = std::clamp<std::int64_t>(kPlanTapBudget / taps, 1, std::max<std::int64_t>(width, 1));

    const InputGeometry geometry{rank, input.shape.data() + 2, input.strides.data() + 2, options.align_corners,
                                 task.positions.space()};
    const PlanFunction<C> planner = select_planner<C>(options, rank);
    const Fill<S> fill(options.fill);
    const S& fill_stored = fill.stored;
    const auto fill_value = Fill<S>(options.outside_tap_value.value_or(options.fill)).value;

    const S* in_data = input.typed<S>();
    S* out_data = output.typed<S>();

    struct Scratch {
        Plan<C> plan;
        std::vector<C> xyz;
        std::vector<S> labels;
        std::vector<double> label_sums;
    };
    const auto make_scratch = [&] {
        Scratch scratch;
        Plan<C>& plan = scratch.plan;
        plan.taps_per_point = taps;
        plan.offset.resize(static_cast<std::size_t>(chunk * taps));
        plan.weight.resize(static_cast<std::size_t>(chunk * taps));
        plan.fill.resize(static_cast<std::size_t>(chunk));
        plan.axis_index.resize(static_cast<std::size_t>(rank * axis_taps_count));
        plan.axis_weight.resize(static_cast<std::size_t>(rank * axis_taps_count));
        scratch.xyz.resize(static_cast<std::size_t>(chunk * rank));
        return scratch;
    };
    for_each_chunk(task, chunk, make_scratch, [&](Scratch& scratch, std::int64_t n, const std::int64_t* outer, std::int64_t start,
                                                  std::int64_t count, std::int64_t out_offset) {
        Plan<C>& plan = scratch.plan;
        task.positions.row(n, outer, start, count, scratch.xyz.data());
        planner(scratch.xyz.data(), count, geometry, plan);

        const std::int64_t out_stride = output.strides[rank + 1];
        for (std::int64_t c = 0; c < channels; ++c) {
            const S* channel_in = in_data + n * input.strides[0] + c * input.strides[1];
            S* channel_out = out_data + out_offset + c * output.strides[1];
            if constexpr (std::is_same_v<S, std::string>) {
                copy_chunk(plan, count, channel_in, channel_out, out_stride, fill_stored);
            } else if (options.generic_label && taps > 1) {
                if constexpr (!std::is_same_v<S, std::complex<float>> && !std::is_same_v<S, std::complex<double>>) {
                    label_chunk(plan, count, channel_in, channel_out, out_stride, fill_stored, scratch.labels, scratch.label_sums);
                }
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
    });
}

// ---------------------------------------------------------------------------------------------
// The separable path: the kinds beyond ONNX (B-splines, windowed sincs), any rank and type. Their
// supports are wide (up to 6^3 taps), so a point keeps its taps per axis (the input offset along
// the axis, -1 outside under zeros padding, and the weight) instead of their tensor product, and is
// summed nested, innermost axis first. A tap whose weight along some axis is zero is skipped (the
// zero-weight rule, per axis).

template <class C>
struct AxisTaps {
    int taps = 0;                       // per axis
    bool offsets_of_interior = true;    // false: interior points get only base and weights
    std::vector<std::int64_t> offset;   // points x rank x taps; -1: outside, read the fill value
    std::vector<C> weight;              // points x rank x taps
    std::vector<unsigned char> fill;    // per point: 1 when the whole point is the fill value
    // per point: kInteriorTaps, kInsideTaps or kTapsByRule
    std::vector<unsigned char> interior;
    std::vector<std::int64_t> base;     // per interior point: the offset of its first tap
};

constexpr unsigned char kTapsByRule = 0;    // some tap outside: summed by the padding rule
constexpr unsigned char kInteriorTaps = 1;  // every tap inside, consecutive along each axis
constexpr unsigned char kInsideTaps = 2;    // every tap inside, mapped there by the padding rule

template <class C>
using AxisPlanFunction = void (*)(const C* xyz, std::int64_t count, const InputGeometry& geometry, AxisTaps<C>& plan);

// Points planned at once by plan_interior_lanes.
constexpr int kInteriorLanes = 4;

template <class C>
C pixel_coordinate(C g, std::int64_t extent, const InputGeometry& geometry) {
    return geometry.space == CoordinateSpace::Normalized ? unnormalize(g, extent, geometry.align_corners) : g;
}

// The index of the first tap of pixel coordinate u where all the kind's taps lie inside an axis of
// `extent`, so that no padding rule applies; -1 where they do not (a NaN included). Kinds with a
// tap origin are checked on the origin itself, where truncation is floor.
template <class C, class Interp>
std::int64_t interior_first_tap(C u, std::int64_t extent) {
    constexpr int K = Interp::taps;
    if constexpr (requires { Interp::taps_before; }) {
        const C origin = Interp::tap_origin(u);
        const bool interior = origin >= C(Interp::taps_before) && origin < static_cast<C>(extent - K + Interp::taps_before + 1);
        return interior ? static_cast<std::int64_t>(origin) - Interp::taps_before : -1;
    } else {
        const C first = Interp::first_tap(u);
        return first >= C(0) && first <= static_cast<C>(extent - K) ? static_cast<std::int64_t>(first) : -1;
    }
}

// The taps of a point whose taps lie inside the input along every axis, where no padding rule
// applies: weights and the first tap's offset only. False where some axis is not interior.
template <class C, class Interp>
bool plan_interior_point(const C* coords, const InputGeometry& geometry, C* weight, std::int64_t& base) {
    constexpr int K = Interp::taps;
    const int rank = geometry.rank;
    base = 0;
    for (int a = 0; a < rank; ++a) {
        const std::int64_t d = geometry.extent[a];
        const C u = pixel_coordinate(coords[rank - 1 - a], d, geometry);
        const std::int64_t first = interior_first_tap<C, Interp>(u, d);
        if (first < 0) return false;
        Interp::weights(u, static_cast<C>(first), weight + a * K);
        base += first * geometry.stride[a];
    }
    return true;
}

// Every tap of one point, padding rules applied per axis where the taps leave the input.
template <class C, class Interp, class Pad>
void plan_point(const C* coords, const InputGeometry& geometry, AxisTaps<C>& plan, std::int64_t p) {
    constexpr int K = Interp::taps;
    const int rank = geometry.rank;
    std::int64_t* offset = plan.offset.data() + p * rank * K;
    C* weight = plan.weight.data() + p * rank * K;
    bool inside = true;
    bool interior = true;
    std::int64_t base = 0;
    for (int a = 0; a < rank; ++a) {
        const std::int64_t d = geometry.extent[a];
        const C g = coords[rank - 1 - a];
        // Taps all inside the axis: no padding rule applies, so the taps and weights are axis_taps'
        // without its folding, bounds and per-tap mapping.
        const C u = pixel_coordinate(g, d, geometry);
        const std::int64_t first = interior_first_tap<C, Interp>(u, d);
        if (first >= 0) {
            Interp::weights(u, static_cast<C>(first), weight + a * K);
            const std::int64_t first_offset = first * geometry.stride[a];
            for (int k = 0; k < K; ++k) offset[a * K + k] = first_offset + k * geometry.stride[a];
            base += first_offset;
            continue;
        }
        interior = false;
        inside = axis_taps<C, Interp, Pad>(g, d, geometry.align_corners, geometry.space, offset + a * K, weight + a * K);
        // (Where it returns false, the later axes' taps are left as an earlier point had them.)
        if (!inside) break;
        for (int k = 0; k < K; ++k) offset[a * K + k] = offset[a * K + k] < 0 ? -1 : offset[a * K + k] * geometry.stride[a];
    }
    bool taps_inside = inside;
    for (int t = 0; t < rank * K && taps_inside; ++t) taps_inside = offset[t] >= 0;
    plan.fill[static_cast<std::size_t>(p)] = inside ? 0 : 1;
    plan.interior[static_cast<std::size_t>(p)] = !taps_inside ? kTapsByRule : interior ? kInteriorTaps : kInsideTaps;
    plan.base[static_cast<std::size_t>(p)] = base;
}

// plan_interior_point for kLanes points of a 3-D input at once, where the kind computes weights
// lane by lane; false, with nothing written, where some point is not interior.
template <class C, class Interp>
bool plan_interior_lanes(const C* xyz, const InputGeometry& geometry, C* weight, std::int64_t* base) {
    constexpr int K = Interp::taps;
    constexpr int kRank = 3;
    constexpr int N = kInteriorLanes;
    C u[kRank][N], first[kRank][N], w[kRank][K * N];
    std::int64_t first_index[kRank][N];
    bool interior = true;
    for (int a = 0; a < kRank; ++a) {
        const std::int64_t d = geometry.extent[a];
        for (int b = 0; b < N; ++b) u[a][b] = pixel_coordinate(xyz[b * kRank + kRank - 1 - a], d, geometry);
        for (int b = 0; b < N; ++b) {
            first_index[a][b] = interior_first_tap<C, Interp>(u[a][b], d);
            interior &= first_index[a][b] >= 0;
        }
    }
    if (!interior) return false;
    for (int a = 0; a < kRank; ++a) {
        for (int b = 0; b < N; ++b) first[a][b] = static_cast<C>(first_index[a][b]);
        Interp::template weights_of_lanes<N>(u[a], first[a], w[a]);
    }
    for (int b = 0; b < N; ++b) {
        base[b] = first_index[0][b] * geometry.stride[0] + first_index[1][b] * geometry.stride[1] + first_index[2][b] * geometry.stride[2];
        for (int a = 0; a < kRank; ++a) {
            for (int k = 0; k < K; ++k) weight[(b * kRank + a) * K + k] = w[a][k * N + b];
        }
    }
    return true;
}

template <class C, class Interp, class Pad>
void plan_axis_taps(const C* xyz, std::int64_t count, const InputGeometry& geometry, AxisTaps<C>& plan) {
    const int rank = geometry.rank;
    constexpr int K = Interp::taps;
    bool lanes = false;
    if constexpr (requires { &Interp::template weights_of_lanes<kInteriorLanes, C>; }) {
        lanes = !plan.offsets_of_interior && rank == 3;
    }
    std::int64_t p = 0;
    while (p < count) {
        // Blocks of kInteriorLanes points at once where all are interior, else point by point.
        const std::int64_t block_end = lanes ? std::min<std::int64_t>(p + kInteriorLanes, count) : count;
        if constexpr (requires { &Interp::template weights_of_lanes<kInteriorLanes, C>; }) {
            if (lanes && block_end - p == kInteriorLanes &&
                plan_interior_lanes<C, Interp>(xyz + p * rank, geometry, plan.weight.data() + p * rank * K, plan.base.data() + p)) {
                std::fill_n(plan.fill.begin() + p, kInteriorLanes, 0);
                std::fill_n(plan.interior.begin() + p, kInteriorLanes, kInteriorTaps);
                p = block_end;
                continue;
            }
        }
        for (; p < block_end; ++p) {
            const C* coords = xyz + p * rank;
            if constexpr (requires { Interp::taps_before; }) {
                if (!plan.offsets_of_interior &&
                    plan_interior_point<C, Interp>(coords, geometry, plan.weight.data() + p * rank * K, plan.base[static_cast<std::size_t>(p)])) {
                    plan.fill[static_cast<std::size_t>(p)] = 0;
                    plan.interior[static_cast<std::size_t>(p)] = kInteriorTaps;
                    continue;
                }
            }
            plan_point<C, Interp, Pad>(coords, geometry, plan, p);
        }
    }
}

template <class C>
using PointPlanFunction = void (*)(const C* coords, const InputGeometry& geometry, AxisTaps<C>& plan, std::int64_t p);

template <class C>
struct AxisPlanners {
    AxisPlanFunction<C> row;
    PointPlanFunction<C> point;  // one point with every offset, for the sums by the rule
};

template <class C>
AxisPlanners<C> select_axis_planners(const SampleOptions& options) {
    return visit_any_interpolation(options.mode, options.spline_order, [&](auto interp) {
        return visit_padding(options.padding, [&](auto pad) -> AxisPlanners<C> {
            using Interp = typename decltype(interp)::type;
            using Pad = typename decltype(pad)::type;
            return {&plan_axis_taps<C, Interp, Pad>, &plan_point<C, Interp, Pad>};
        });
    });
}

// The nested sum over axes axis..rank-1 from `base`; `outside`: an outer tap is outside the input.
// Taps and Rank are 0 where known only at run time (`taps`, `rank`); fixed, the loops unroll.
template <int Taps, int Rank, class V, class S, class C>
V separable_sum(const S* input, const std::int64_t* offset, const C* weight, int taps, int rank, int axis, std::int64_t base,
                bool outside, V fill_value) {
    using R = typename real_of<V>::type;
    if constexpr (Taps > 0) taps = Taps;
    if constexpr (Rank > 0) rank = Rank;
    const std::int64_t* axis_offset = offset + axis * taps;
    const C* axis_weight = weight + axis * taps;
    V sum = V(0);
    for (int k = 0; k < taps; ++k) {
        const R w = static_cast<R>(axis_weight[k]);
        if (w == R(0)) continue;
        const bool tap_outside = outside || axis_offset[k] < 0;
        if (axis == rank - 1) {
            sum += w * (tap_outside ? fill_value : load<V>(input[base + axis_offset[k]]));
        } else {
            sum += w * separable_sum<Taps, Rank, V>(input, offset, weight, taps, rank, axis + 1,
                                                    tap_outside ? base : base + axis_offset[k], tap_outside, fill_value);
        }
    }
    return sum;
}

template <class V>
bool is_nan(const V& value) {
    if constexpr (std::is_arithmetic_v<V>) {
        return std::isnan(value);
    } else {
        return std::isnan(value.real()) || std::isnan(value.imag());
    }
}

// An interior point of a 3-D input: the same nested sum with K taps per axis fixed and no per-tap
// test, which the compiler unrolls. Taps of zero weight are summed too: where that gives NaN the
// caller sums again by the rule (as the fast paths do, sampling_policies.hpp).
template <int K, class V, class S, class C>
V separable_interior_3d(const S* input, std::int64_t base, const std::int64_t* stride, const C* weight) {
    using R = typename real_of<V>::type;
    R w[3 * K];
    for (int t = 0; t < 3 * K; ++t) w[t] = static_cast<R>(weight[t]);
    if constexpr (std::is_arithmetic_v<V>) {
        if (stride[2] == 1) {
            // Contiguous rows: one sum per innermost tap and plane, each a short independent chain the
            // compiler keeps in vector registers, instead of one long dependent chain of scalars.
            V column[K] = {};
            for (int k = 0; k < K; ++k) {
                V plane[K] = {};
                for (int j = 0; j < K; ++j) {
                    const S* line = input + base + k * stride[0] + j * stride[1];
                    for (int i = 0; i < K; ++i) plane[i] += w[K + j] * load<V>(line[i]);
                }
                for (int i = 0; i < K; ++i) column[i] += w[k] * plane[i];
            }
            V sum = V(0);
            for (int i = 0; i < K; ++i) sum += w[2 * K + i] * column[i];
            return sum;
        }
    }
    V sum = V(0);
    for (int k = 0; k < K; ++k) {
        V plane = V(0);
        for (int j = 0; j < K; ++j) {
            const S* line = input + base + k * stride[0] + j * stride[1];
            V row = V(0);
            for (int i = 0; i < K; ++i) row += w[2 * K + i] * load<V>(line[i * stride[2]]);
            plane += w[K + j] * row;
        }
        sum += w[k] * plane;
    }
    return sum;
}

// The same for float32 input with 4 taps per axis: a row of taps is one vector of 4 floats (GCC's
// vector extension: SSE on x86-64, NEON on ARM), and the sums are short independent chains.
template <class C>
float separable_interior_3d_f32x4(const float* input, std::int64_t base, const std::int64_t* stride, const C* weight) {
    using Float4 = float __attribute__((vector_size(16)));
    Float4 column = {};
    for (int k = 0; k < 4; ++k) {
        Float4 plane = {};
        for (int j = 0; j < 4; ++j) {
            Float4 row;
            std::memcpy(&row, input + base + k * stride[0] + j * stride[1], sizeof row);
            plane += static_cast<float>(weight[4 + j]) * row;
        }
        column += static_cast<float>(weight[k]) * plane;
    }
    const Float4 along_x = {static_cast<float>(weight[8]), static_cast<float>(weight[9]), static_cast<float>(weight[10]),
                            static_cast<float>(weight[11])};
    const Float4 terms = column * along_x;
    return ((terms[0] + terms[1]) + terms[2]) + terms[3];
}

// A point of a 3-D input whose taps are all inside but not consecutive (mapped by the padding
// rule near an edge): the nested sum of separable_sum without its per-tap tests, NaN as above.
template <int K, class V, class S, class C>
V separable_inside_3d(const S* input, const std::int64_t* offset, const C* weight) {
    using R = typename real_of<V>::type;
    V sum = V(0);
    for (int k = 0; k < K; ++k) {
        V plane = V(0);
        for (int j = 0; j < K; ++j) {
            const S* line = input + offset[k] + offset[K + j];
            V row = V(0);
            for (int i = 0; i < K; ++i) row += static_cast<R>(weight[2 * K + i]) * load<V>(line[offset[2 * K + i]]);
            plane += static_cast<R>(weight[K + j]) * row;
        }
        sum += static_cast<R>(weight[k]) * plane;
    }
    return sum;
}

template <class S, class C>
void run_separable(const Task& task) {
    const auto& input = task.input;
    const auto& output = task.output;
    const auto& options = task.options;
    const int rank = static_cast<int>(input.rank()) - 2;
    const std::int64_t channels = input.shape[1];
    const std::int64_t width = task.positions.output_shape().back();
    const int taps = taps_per_axis(options.mode, options.spline_order);
    constexpr std::int64_t kChunk = 256;
    const std::int64_t chunk = std::min(kChunk, std::max<std::int64_t>(width, 1));

    const InputGeometry geometry{rank, input.shape.data() + 2, input.strides.data() + 2, options.align_corners,
                                 task.positions.space()};
    const AxisPlanners<C> planners = select_axis_planners<C>(options);
    // The interior sums below take base and weights; the sums by the rule take offsets.
    const bool interior_sums = rank == 3 && (taps == 4 || taps == 6);
    const Fill<S> fill(options.fill);
    const auto fill_value = Fill<S>(options.outside_tap_value.value_or(options.fill)).value;
    using V = typename compute_type<S>::type;
    const S* in_data = input.typed<S>();
    S* out_data = output.typed<S>();

    struct Scratch {
        AxisTaps<C> plan;
        std::vector<C> xyz;
    };
    const auto make_scratch = [&] {
        Scratch scratch;
        scratch.plan.taps = taps;
        scratch.plan.offsets_of_interior = !interior_sums;
        scratch.plan.offset.resize(static_cast<std::size_t>(chunk * rank * taps));
        scratch.plan.weight.resize(static_cast<std::size_t>(chunk * rank * taps));
        scratch.plan.fill.resize(static_cast<std::size_t>(chunk));
        scratch.plan.interior.resize(static_cast<std::size_t>(chunk));
        scratch.plan.base.resize(static_cast<std::size_t>(chunk));
        scratch.xyz.resize(static_cast<std::size_t>(chunk * rank));
        return scratch;
    };
    const auto sum_point = [&](const S* channel_in, Scratch& scratch, std::int64_t p) -> V {
        AxisTaps<C>& plan = scratch.plan;
        const std::int64_t* offset = plan.offset.data() + p * rank * taps;
        const C* weight = plan.weight.data() + p * rank * taps;
        if (interior_sums && plan.interior[static_cast<std::size_t>(p)] == kInsideTaps) {
            const V sum = taps == 4 ? separable_inside_3d<4, V>(channel_in, offset, weight) : separable_inside_3d<6, V>(channel_in, offset, weight);
            if (!is_nan(sum)) return sum;
        }
        if (interior_sums && plan.interior[static_cast<std::size_t>(p)] == kInteriorTaps) {
            const std::int64_t base = plan.base[static_cast<std::size_t>(p)];
            V sum;
            if constexpr (std::is_same_v<S, float>) {
                sum = taps == 4 && geometry.stride[2] == 1 ? separable_interior_3d_f32x4(channel_in, base, geometry.stride, weight)
                      : taps == 4                          ? separable_interior_3d<4, V>(channel_in, base, geometry.stride, weight)
                                                           : separable_interior_3d<6, V>(channel_in, base, geometry.stride, weight);
            } else {
                sum = taps == 4 ? separable_interior_3d<4, V>(channel_in, base, geometry.stride, weight)
                                : separable_interior_3d<6, V>(channel_in, base, geometry.stride, weight);
            }
            if (!is_nan(sum)) return sum;
            planners.point(scratch.xyz.data() + p * rank, geometry, plan, p);
        }
        if (rank == 3 && taps == 4) return separable_sum<4, 3, V>(channel_in, offset, weight, taps, rank, 0, 0, false, fill_value);
        if (rank == 3 && taps == 6) return separable_sum<6, 3, V>(channel_in, offset, weight, taps, rank, 0, 0, false, fill_value);
        return separable_sum<0, 0, V>(channel_in, offset, weight, taps, rank, 0, 0, false, fill_value);
    };
    for_each_chunk(task, chunk, make_scratch, [&](Scratch& scratch, std::int64_t n, const std::int64_t* outer, std::int64_t start,
                                                  std::int64_t count, std::int64_t out_offset) {
        task.positions.row(n, outer, start, count, scratch.xyz.data());
        planners.row(scratch.xyz.data(), count, geometry, scratch.plan);
        const std::int64_t out_stride = output.strides[rank + 1];
        for (std::int64_t c = 0; c < channels; ++c) {
            const S* channel_in = in_data + n * input.strides[0] + c * input.strides[1];
            S* channel_out = out_data + out_offset + c * output.strides[1];
            for (std::int64_t p = 0; p < count; ++p) {
                channel_out[p * out_stride] = scratch.plan.fill[static_cast<std::size_t>(p)]
                                                  ? fill.stored
                                                  : store<S>(sum_point(channel_in, scratch, p));
            }
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Gaussian and MultiLabel: ITK's GaussianInterpolateImageFunction and
// LabelImageGaussianInterpolateImageFunction. Along each axis a point reads the voxels i within the
// cut-off, clipped to the input, each weighted by the Gaussian's integral over the voxel,
// erf((i + 1/2 - u) s) - erf((i - 1/2 - u) s) with s = 1 / (sqrt(2) sigma), summed incrementally
// as ITK does; a voxel's weight is the product over axes.

double gaussian_alpha(const SampleOptions& options) {
    return options.gaussian_alpha.value_or(options.mode == Interpolation::Gaussian ? kDefaultGaussianAlpha : kDefaultMultiLabelAlpha);
}

double gaussian_sigma(const SampleOptions& options, int axis) {
    return options.gaussian_sigma.empty() ? 1.0 : options.gaussian_sigma[static_cast<std::size_t>(axis)];
}

// The padding applied to the point itself (the taps never leave the input): zeros, a point beyond
// the input's extent [-1/2, d - 1/2] takes the fill; border clamps it to that extent; reflection
// folds it into it (or into [0, d - 1] with align_corners).
bool gaussian_bound(double& u, std::int64_t d, Padding padding, bool align_corners) {
    if (!std::isfinite(u) || d == 0) return false;
    const double low = align_corners && padding == Padding::Reflection ? 0.0 : -0.5;
    const double high = static_cast<double>(d) - 1.0 - low;
    switch (padding) {
        case Padding::Zeros: return u >= -0.5 && u <= static_cast<double>(d) - 0.5;
        case Padding::Border: u = std::clamp(u, low, high); return true;
        case Padding::Reflection: {
            const double span = high - low;
            if (span <= 0.0) {
                u = low;
                return true;
            }
            const double distance = std::fabs(u - low);
            const double flips = std::floor(distance / span);
            const double rest = distance - flips * span;
            u = std::fmod(flips, 2.0) == 0.0 ? low + rest : high - rest;
            return true;
        }
    }
    return false;
}

struct GaussianAxes {
    std::vector<std::int64_t> taps;     // per axis, the most voxels a point reads
    std::vector<std::int64_t> place;    // per axis, where its weights start within a point's
    std::int64_t weights_per_point = 0;
    std::vector<double> cut;            // per axis, sigma * alpha in pixels
    std::vector<double> scale;          // per axis, 1 / (sqrt(2) sigma)
};

GaussianAxes gaussian_axes(const SampleOptions& options, int rank) {
    GaussianAxes axes;
    const double alpha = gaussian_alpha(options);
    for (int a = 0; a < rank; ++a) {
        const double sigma = gaussian_sigma(options, a);
        axes.place.push_back(axes.weights_per_point);
        axes.taps.push_back(gaussian_taps_per_axis(sigma, alpha));
        axes.weights_per_point += axes.taps.back();
        axes.cut.push_back(sigma * alpha);
        axes.scale.push_back(1.0 / (std::numbers::sqrt2 * sigma));
    }
    return axes;
}

template <class C>
struct GaussianPlan {
    std::vector<std::int64_t> first;   // points x rank: the first voxel read along each axis
    std::vector<std::int64_t> count;   // points x rank: how many
    std::vector<double> weight;        // points x weights_per_point
    std::vector<unsigned char> fill;   // per point: 1 when the whole point is the fill value
};

template <class C>
void plan_gaussian(const C* xyz, std::int64_t count, const InputGeometry& geometry, const GaussianAxes& axes, Padding padding,
                   GaussianPlan<C>& plan) {
    const int rank = geometry.rank;
    for (std::int64_t p = 0; p < count; ++p) {
        const C* coords = xyz + p * rank;
        bool inside = true;
        for (int a = 0; a < rank && inside; ++a) {
            const std::int64_t d = geometry.extent[a];
            const C g = coords[rank - 1 - a];
            double u = geometry.space == CoordinateSpace::Normalized && std::isfinite(g) && d > 0
                           ? static_cast<double>(unnormalize(g, d, geometry.align_corners))
                           : static_cast<double>(g);
            inside = gaussian_bound(u, d, padding, geometry.align_corners);
            if (!inside) break;
            // ITK's ComputeInterpolationRegion and ComputeErrorFunctionArray, operation for operation.
            const double begin_at = u + 0.5 - axes.cut[static_cast<std::size_t>(a)];
            const double end_at = u + 0.5 + axes.cut[static_cast<std::size_t>(a)];
            const std::int64_t first = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(begin_at)));
            const std::int64_t last = std::min<std::int64_t>(d, static_cast<std::int64_t>(std::ceil(end_at)));
            const std::int64_t taps = std::min(last - first, axes.taps[static_cast<std::size_t>(a)]);
            inside = taps > 0;
            plan.first[static_cast<std::size_t>(p * rank + a)] = first;
            plan.count[static_cast<std::size_t>(p * rank + a)] = taps;
            const double scale = axes.scale[static_cast<std::size_t>(a)];
            double* weight = plan.weight.data() + p * axes.weights_per_point + axes.place[static_cast<std::size_t>(a)];
            double t = (-0.5 - u + static_cast<double>(first)) * scale;
            double e_last = std::erf(t);
            for (std::int64_t k = 0; k < taps; ++k) {
                t += scale;
                const double e_now = std::erf(t);
                weight[k] = e_now - e_last;
                e_last = e_now;
            }
        }
        plan.fill[static_cast<std::size_t>(p)] = inside ? 0 : 1;
    }
}

// Calls visit(offset, weight) for each voxel of a planned point, in ITK's order (x fastest), the
// weight multiplied over the axes x first as ITK multiplies it.
template <class C, class Visit>
void for_each_gaussian_tap(const GaussianPlan<C>& plan, const GaussianAxes& axes, const InputGeometry& geometry, std::int64_t p,
                           std::int64_t* position, Visit visit) {
    const int rank = geometry.rank;
    const std::int64_t* first = plan.first.data() + p * rank;
    const std::int64_t* count = plan.count.data() + p * rank;
    const double* weights = plan.weight.data() + p * axes.weights_per_point;
    std::fill(position, position + rank, 0);
    while (true) {
        std::int64_t offset = 0;
        double weight = 1.0;
        for (int a = rank; a-- > 0;) {
            offset += (first[a] + position[a]) * geometry.stride[a];
            weight *= weights[axes.place[static_cast<std::size_t>(a)] + position[a]];
        }
        visit(offset, weight);
        int a = rank - 1;
        while (a >= 0 && ++position[a] == count[a]) position[a--] = 0;
        if (a < 0) return;
    }
}

template <class S, class C>
void run_gaussian(const Task& task) {
    const auto& input = task.input;
    const auto& output = task.output;
    const auto& options = task.options;
    const int rank = static_cast<int>(input.rank()) - 2;
    const std::int64_t channels = input.shape[1];
    const std::int64_t width = task.positions.output_shape().back();
    constexpr std::int64_t kChunk = 256;
    const std::int64_t chunk = std::min(kChunk, std::max<std::int64_t>(width, 1));
    const InputGeometry geometry{rank, input.shape.data() + 2, input.strides.data() + 2, options.align_corners,
                                 task.positions.space()};
    const GaussianAxes axes = gaussian_axes(options, rank);
    const bool labels = options.mode == Interpolation::MultiLabel;
    const Fill<S> fill(options.fill);
    using V = typename compute_type<S>::type;
    using Sum = std::conditional_t<std::is_arithmetic_v<V>, double, std::complex<double>>;
    // float16 and bfloat16 labels compare as float; the other types as they are.
    using Key = std::conditional_t<std::is_arithmetic_v<S>, S, float>;
    const S* in_data = input.typed<S>();
    S* out_data = output.typed<S>();

    struct Scratch {
        GaussianPlan<C> plan;
        std::vector<C> xyz;
        std::vector<std::int64_t> position;
        std::vector<S> labels;
        std::vector<double> sums;
    };
    const auto make_scratch = [&] {
        Scratch scratch;
        scratch.plan.first.resize(static_cast<std::size_t>(chunk * rank));
        scratch.plan.count.resize(static_cast<std::size_t>(chunk * rank));
        scratch.plan.weight.resize(static_cast<std::size_t>(chunk * axes.weights_per_point));
        scratch.plan.fill.resize(static_cast<std::size_t>(chunk));
        scratch.xyz.resize(static_cast<std::size_t>(chunk * rank));
        scratch.position.resize(static_cast<std::size_t>(rank));
        return scratch;
    };
    // ITK's rule: the label whose running sum first exceeds every sum before it; so of labels with
    // equal totals, the one whose total was complete first in that order.
    const auto label_point = [&](Scratch& scratch, const S* channel_in, std::int64_t p) -> S {
        if constexpr (std::is_same_v<S, std::complex<float>> || std::is_same_v<S, std::complex<double>>) {
            return fill.stored;  // refused by grid_sample()
        } else {
        scratch.labels.clear();
        scratch.sums.clear();
        double best_sum = 0.0;
        std::optional<S> best;
        for_each_gaussian_tap(scratch.plan, axes, geometry, p, scratch.position.data(), [&](std::int64_t offset, double weight) {
            const S& value = channel_in[offset];
            std::size_t at = 0;
            while (at < scratch.labels.size() && !(static_cast<Key>(scratch.labels[at]) == static_cast<Key>(value))) ++at;
            if (at == scratch.labels.size()) {
                scratch.labels.push_back(value);
                scratch.sums.push_back(0.0);
            }
            scratch.sums[at] += weight;
            if (scratch.sums[at] > best_sum) {
                best_sum = scratch.sums[at];
                best = value;
            }
        });
        return best ? *best : fill.stored;
        }
    };
    const auto value_point = [&](Scratch& scratch, const S* channel_in, std::int64_t p) -> S {
        Sum weighted = Sum(0);
        double total = 0.0;
        for_each_gaussian_tap(scratch.plan, axes, geometry, p, scratch.position.data(), [&](std::int64_t offset, double weight) {
            weighted += Sum(load<V>(channel_in[offset])) * weight;
            total += weight;
        });
        if (!(total > 0.0)) return fill.stored;
        return store<S>(static_cast<V>(weighted / total));
    };
    for_each_chunk(task, chunk, make_scratch, [&](Scratch& scratch, std::int64_t n, const std::int64_t* outer, std::int64_t start,
                                                  std::int64_t count, std::int64_t out_offset) {
        task.positions.row(n, outer, start, count, scratch.xyz.data());
        plan_gaussian(scratch.xyz.data(), count, geometry, axes, options.padding, scratch.plan);
        const std::int64_t out_stride = output.strides[rank + 1];
        for (std::int64_t c = 0; c < channels; ++c) {
            const S* channel_in = in_data + n * input.strides[0] + c * input.strides[1];
            S* channel_out = out_data + out_offset + c * output.strides[1];
            for (std::int64_t p = 0; p < count; ++p) {
                S& out = channel_out[p * out_stride];
                if (scratch.plan.fill[static_cast<std::size_t>(p)]) {
                    out = fill.stored;
                } else if (labels) {
                    out = label_point(scratch, channel_in, p);
                } else {
                    out = value_point(scratch, channel_in, p);
                }
            }
        }
    });
}

bool fast_path_applies(const Task& task, int rank) {
    const auto& input = task.input;
    if (task.options.force_generic_rank || (rank != 2 && rank != 3)) return false;
    // Every tap of every channel of a batch item must be within int32 reach of its start.
    std::int64_t span = (input.shape[1] - 1) * input.strides[1];
    for (int a = 0; a < rank; ++a) {
        const std::int64_t extent = input.shape[static_cast<std::size_t>(a + 2)];
        if (extent > kFastMaxExtent) return false;
        span += std::max<std::int64_t>(extent - 1, 0) * input.strides[static_cast<std::size_t>(a + 2)];
    }
    return span <= std::numeric_limits<std::int32_t>::max();
}

template <class S, class C>
void run_fast(const Task& task) {
    const auto& input = task.input;
    const auto& output = task.output;
    const auto& options = task.options;
    const int rank = static_cast<int>(input.rank()) - 2;  // 2 or 3
    const Shape& out_spatial = task.positions.output_shape();
    const std::int64_t batch = input.shape[0];
    const std::int64_t width = out_spatial.back();
    const std::int64_t height = out_spatial[static_cast<std::size_t>(rank - 2)];
    const std::int64_t depth = rank == 3 ? out_spatial[0] : 1;
    const std::int64_t tile_w = std::min(kTileWidth, width);
    const std::int64_t tile_h = std::min(rank == 3 ? kTileRows3d : kTileRows, height);
    const std::int64_t tile_d = std::min(kTileSlices, depth);
    const std::int64_t tiles_w = (width + tile_w - 1) / tile_w;
    const std::int64_t tiles_h = (height + tile_h - 1) / tile_h;
    const std::int64_t tiles_d = (depth + tile_d - 1) / tile_d;
    const std::int64_t work_items = batch * tiles_d * tiles_h * tiles_w;
    // (The interior passes take a tile's row as one block.)
    static_assert(kTileWidth <= FastBlock<C>::kPoints);

    const int axis_taps_count = taps_per_axis(options.mode, options.spline_order);
    const InputGeometry geometry{rank, input.shape.data() + 2, input.strides.data() + 2, options.align_corners,
                                 task.positions.space()};
    const IsaChoice isa = select_isa();
    const bool avx2 = isa.avx2;
    const FastPlanFunction<C> planner = select_fast_planner<C>(options, rank, avx2);
    const FastGatherFunction<S, C> gatherer = select_fast_gatherer<S, C>(options.mode, rank, avx2);
    const Fill<S> fill(options.fill);
    FastOutput<S> fast_output;
    fast_output.channels = input.shape[1];
    fast_output.input_channel_stride = input.strides[1];
    fast_output.output_channel_stride = output.strides[1];
    fast_output.output_point_stride = output.strides[static_cast<std::size_t>(rank + 1)];
    fast_output.fill_stored = fill.stored;
    fast_output.fill_value = fill.value;
    // An output larger than the caches is gone from them before anyone reads it: streaming stores
    // save reading each line in before it is overwritten (a third of W1's memory traffic).
    fast_output.stream = std::is_same_v<S, float> && rank == 2 && fast_output.output_point_stride == 1 &&
                         (fast_output.channels == 1 || fast_output.output_channel_stride % 16 == 0) &&
                         output.numel() * static_cast<std::int64_t>(sizeof(S)) >= kStreamOutputBytes;

    // The AVX-512 interior pass, where it serves this pixel type and layout; else the AVX2 one.
    bool use_interior_pass = false;
    // Elements of a batch item that may be read, from its start.
    std::int64_t input_span = 1 + (input.shape[1] - 1) * input.strides[1];
    for (int a = 0; a < rank; ++a) input_span += (geometry.extent[a] - 1) * geometry.stride[a];

#ifdef GRIDWARP_AVX2_DISPATCH
    AvxInteriorPass<S, C> interior_pass = nullptr;
    const ListedPlanFunction<C> listed_planner = select_listed_planner<C>(options, rank);
    ByteLayout byte_layout;
    if constexpr (kInteriorPassPixel<S>) {
        if (isa.avx512) {
            interior_pass = select_avx512_pass<S, C>(options.mode, options.padding, geometry, fast_output, byte_layout);
        } else if (isa.avx2) {
            // Without AVX-512: the AVX2 pass, for the same pixel types and layouts.
            interior_pass = select_avx2_pass<S, C>(options.mode, options.padding, geometry, fast_output, byte_layout);
        }
        use_interior_pass = interior_pass != nullptr;
    }
#endif

    const S* in_data = input.typed<S>();
    S* out_data = output.typed<S>();
    const std::int64_t* out_strides = output.strides.data();
    constexpr std::int64_t B = FastBlock<C>::kPoints;

    // Each thread samples its own slice of tiles (the same slice on every call), then helps with
    // what is left of the others' (work_split.hpp).
    const int threads = thread_count(options);
    WorkSplit split(work_items, threads);
#pragma omp parallel num_threads(threads)
    {
        const int me = omp_get_thread_num();
        FastBlock<C> block(rank, axis_taps_count, geometry.stride);
        std::vector<C> xyz(static_cast<std::size_t>(tile_w * rank));
#ifdef GRIDWARP_AVX2_DISPATCH
        // A tile's rows as the interior passes take them.
        const std::int64_t tile_rows = tile_d * tile_h;
        std::vector<const C*> row_xyz(static_cast<std::size_t>(tile_rows));
        std::vector<LinearRow> row_linear(static_cast<std::size_t>(tile_rows));
        std::vector<std::int64_t> row_output(static_cast<std::size_t>(tile_rows));
        std::vector<std::array<std::int64_t, 2>> row_outer(static_cast<std::size_t>(tile_rows));
#endif

        for (std::int64_t item = split.next(me); item >= 0; item = split.next(me)) {
            std::int64_t rest = item;
            const std::int64_t tx = rest % tiles_w;
            rest /= tiles_w;
            const std::int64_t ty = rest % tiles_h;
            rest /= tiles_h;
            const std::int64_t tz = rest % tiles_d;
            const std::int64_t n = rest / tiles_d;
            const std::int64_t start = tx * tile_w;
            const std::int64_t count = std::min(tile_w, width - start);
            const S* batch_in = in_data + n * input.strides[0];
            // The output offset of a row's first point; outer = {z or y, y}, outermost first.
            const auto output_offset = [&](const std::int64_t* outer) {
                std::int64_t offset = n * out_strides[0] + start * out_strides[rank + 1] + outer[1] * out_strides[rank];
                if (rank == 3) offset += outer[0] * out_strides[2];
                return offset;
            };
#ifdef GRIDWARP_AVX2_DISPATCH
            if (use_interior_pass) {
                // The tile's rows: an affine row's positions are computed by the pass itself (and
                // written out only for the points it leaves), an explicit float32 grid is read in
                // place; other positions are copied row by row.
                std::int64_t rows = 0;
                for (std::int64_t z = tz * tile_d; z < std::min(depth, (tz + 1) * tile_d); ++z) {
                    for (std::int64_t y = ty * tile_h; y < std::min(height, (ty + 1) * tile_h); ++y) {
                        const auto at = static_cast<std::size_t>(rows++);
                        row_outer[at] = {rank == 3 ? z : y, y};
                        row_output[at] = output_offset(row_outer[at].data());
                    }
                }
                // (A source answers row by row; a tile whose rows are not all of one kind is copied.)
                bool linear = true;
                for (std::int64_t r = 0; r < rows && linear; ++r) {
                    const auto at = static_cast<std::size_t>(r);
                    linear = task.positions.linear_row(n, row_outer[at].data(), &row_linear[at]);
                }
                bool stored = false;
                if constexpr (std::is_same_v<C, float>) {
                    stored = !linear;
                    for (std::int64_t r = 0; r < rows && stored; ++r) {
                        const auto at = static_cast<std::size_t>(r);
                        row_xyz[at] = task.positions.stored_row(n, row_outer[at].data(), start);
                        stored = row_xyz[at] != nullptr;
                    }
                }
                PassRows<C> pass_rows;
                pass_rows.first_index = start;
                const C* next_xyz = nullptr;  // the coordinates of the row after the tile's last
                if constexpr (std::is_same_v<C, float>) {
                    const auto& [z, y] = row_outer[static_cast<std::size_t>(rows - 1)];
                    if (stored && y + 1 < height) {
                        const std::int64_t next_outer[2] = {rank == 3 ? z : y + 1, y + 1};
                        next_xyz = task.positions.stored_row(n, next_outer, start);
                    }
                }
                RowPrefetch prefetch;
                prefetch.last_tap = block.tap_offset.back();
                prefetch.point_stride = geometry.stride[rank - 1];
                for (std::int64_t r = 0; r < rows;) {
                    // Rows r.. at once where the pass reads them itself; else one row, copied.
                    const auto at = static_cast<std::size_t>(r);
                    if (!linear && !stored) task.positions.row(n, row_outer[at].data(), start, count, xyz.data());
                    const C* copied = xyz.data();
                    pass_rows.rows = (linear || stored) ? rows - r : 1;
                    pass_rows.linear = linear ? &row_linear[at] : nullptr;
                    pass_rows.xyz = stored ? &row_xyz[at] : &copied;
                    pass_rows.output_offset = &row_output[at];
                    pass_rows.next_xyz = next_xyz;
                    const PassStop stop = interior_pass(pass_rows, count, geometry, batch_in, out_data, fast_output, input_span,
                                                        byte_layout, block.edge_point.data(), block.base.data(), prefetch);
                    r += stop.rows;
                    if (stop.result == PassResult::Complete) continue;
                    // The last row it did has points left to the generic stages.
                    const auto last = static_cast<std::size_t>(r - 1);
                    const C* block_xyz = stored ? row_xyz[last] : xyz.data();
                    if (linear && stop.result == PassResult::EdgesLeft) {
                        // The listed points' positions only (row() would write these values), not
                        // the whole row's: a row across an edge usually leaves a few points.
                        const LinearRow& row = row_linear[last];
                        for (std::int64_t e = 0; e < stop.edges; ++e) {
                            const std::int64_t p = block.edge_point[static_cast<std::size_t>(e)];
                            for (int k = 0; k < rank; ++k) xyz[static_cast<std::size_t>(p * rank + k)] = linear_row_coordinate<C>(row, start + p, k);
                        }
                    } else if (linear) {
                        task.positions.row(n, row_outer[last].data(), start, count, xyz.data());
                    }
                    if (stop.result == PassResult::EdgesLeft) {
                        // Only the listed points across an edge are left.
                        listed_planner(block_xyz, stop.edges, geometry, block);
                    } else {
                        planner(block_xyz, count, geometry, block);
                    }
                    gatherer(block, batch_in, out_data + row_output[last], fast_output, input_span);
                }
                continue;
            }
#endif
            bool row_started = false;
            std::int64_t previous_base = 0;
            // With a row's first block planned (first taps in block.base): the row kPrefetchRowsAhead
            // rows on will read about where this one reads, moved that many times by the move from
            // the previous row to this one.
            const auto prefetch_rows_ahead = [&](std::int64_t block_count) {
                const std::int64_t move = row_started ? block.base[0] - previous_base : 0;
                previous_base = block.base[0];
                row_started = true;
                prefetch_input(block.base.data(), block_count, batch_in, kPrefetchRowsAhead * move + block.tap_offset.back(),
                               geometry.stride[rank - 1], prefetches_per_line(rank));
            };
            for (std::int64_t z = tz * tile_d; z < std::min(depth, (tz + 1) * tile_d); ++z) {
                for (std::int64_t y = ty * tile_h; y < std::min(height, (ty + 1) * tile_h); ++y) {
                    const std::int64_t outer[2] = {rank == 3 ? z : y, y};  // outermost first
                    task.positions.row(n, outer, start, count, xyz.data());
                    const std::int64_t out_offset = output_offset(outer);
                    for (std::int64_t b = 0; b < count; b += B) {
                        const std::int64_t block_count = std::min(B, count - b);
                        planner(xyz.data() + b * rank, block_count, geometry, block);
                        if (b == 0) prefetch_rows_ahead(block_count);
                        gatherer(block, batch_in, out_data + out_offset + b * out_strides[rank + 1], fast_output, input_span);
                    }
                }
            }
        }
    }
}

template <class S, class C>
void run_sampler(const Task& task) {
    if constexpr (!std::is_same_v<S, std::string>) {
        if (interpolation_kind(task.options.mode).gaussian) {
            run_gaussian<S, C>(task);
            return;
        }
        if (!interpolation_kind(task.options.mode).onnx && !task.options.generic_label) {
            run_separable<S, C>(task);
            return;
        }
    }
    if constexpr (kFastStorage<S>) {
        // The fast paths serve the ONNX kinds, exactly; the others take the reference path.
        const bool fast_kind = interpolation_kind(task.options.mode).onnx && !task.options.generic_label &&
                               !task.options.outside_tap_value;
        if (fast_kind && fast_path_applies(task, static_cast<int>(task.input.rank()) - 2)) {
            run_fast<S, C>(task);
            return;
        }
    }
    run_reference<S, C>(task);
}

void sample(const Task& task) {
    visit_dtype(task.input.dtype, [&](auto tag) {
        using S = typename decltype(tag)::type;
        if (task.positions.coordinate_dtype() == DType::Float64) {
            run_sampler<S, double>(task);
        } else {
            run_sampler<S, float>(task);
        }
    });
}

// B-splines of order 2 and more: the coefficients are sampled in their own (compute) type, straight
// into the output where that is the output's type, else into a copy converted as the samplers store.
void sample_coefficients(const ConstTensorView& input, const PositionSource& positions, const TensorView& output,
                         const SampleOptions& options) {
    const Tensor coefficients = bspline_coefficients(input, options.spline_order, thread_count(options));
    if (coefficients.dtype() == output.dtype) {
        sample(Task{coefficients.view(), positions, output, options});
        return;
    }
    Tensor sampled(coefficients.dtype(), output.shape);
    sample(Task{coefficients.view(), positions, sampled.view(), options});
    copy_elements(convert_to(sampled.view(), output.dtype).view(), output);
}

// Gaussian and MultiLabel: one sigma per spatial axis (or none), and at most 2^20 voxels per point.
void check_gaussian_options(const SampleOptions& options, std::int64_t spatial_rank) {
    const std::string kind(interpolation_name(options.mode));
    if (!options.gaussian_sigma.empty() && static_cast<std::int64_t>(options.gaussian_sigma.size()) != spatial_rank) {
        throw std::invalid_argument("grid_sample(): " + kind + " takes one sigma per spatial axis (" + std::to_string(spatial_rank) +
                                    "), got " + std::to_string(options.gaussian_sigma.size()));
    }
    const double alpha = gaussian_alpha(options);
    double taps_per_point = 1.0;
    for (std::int64_t axis = 0; axis < spatial_rank; ++axis) {
        taps_per_point *= static_cast<double>(gaussian_taps_per_axis(gaussian_sigma(options, static_cast<int>(axis)), alpha));
    }
    if (taps_per_point > double(std::int64_t{1} << 20)) {
        throw std::invalid_argument("grid_sample(): " + kind + " with these sigma and alpha reads up to " +
                                    std::to_string(static_cast<std::int64_t>(std::min(taps_per_point, 1e18))) +
                                    " values per point, more than the 2^20 supported; lower sigma or alpha");
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
    if (options.generic_label && (input.dtype == DType::Complex64 || input.dtype == DType::Complex128 || input.dtype == DType::String)) {
        throw std::invalid_argument("grid_sample(): GenericLabel needs real labels, got " + std::string(dtype_name(input.dtype)));
    }
    if (options.generic_label && !interpolation_kind(options.mode).label_inner) {
        throw std::invalid_argument("grid_sample(): GenericLabel takes linear, nearest, cubic or a windowed sinc, not " +
                                    std::string(interpolation_name(options.mode)));
    }
    if (options.mode == Interpolation::BSpline && (options.spline_order < 0 || options.spline_order > kMaxSplineOrder)) {
        throw std::invalid_argument("grid_sample(): the B-spline order must be 0 to 5, got " + std::to_string(options.spline_order));
    }
    if (interpolation_kind(options.mode).gaussian) {
        check_gaussian_options(options, static_cast<std::int64_t>(input.shape.size()) - 2);
    } else {
        check_taps_per_point(options.mode, options.spline_order, static_cast<std::int64_t>(input.shape.size()) - 2);
    }
    if (options.mode == Interpolation::MultiLabel && (input.dtype == DType::Complex64 || input.dtype == DType::Complex128)) {
        throw std::invalid_argument("grid_sample(): MultiLabel needs real labels, got " + std::string(dtype_name(input.dtype)));
    }
    const DType coordinate = positions.coordinate_dtype();
    if (!is_floating(coordinate)) {
        throw std::invalid_argument("grid_sample(): positions must be float16, bfloat16, float32 or float64, got " +
                                    std::string(dtype_name(coordinate)));
    }
    check_strides("input", input.strides);
    check_strides("output", output.strides);
    if (shape_numel(expected) == 0) return;

    if (needs_prefilter(options.mode, options.spline_order)) {
        sample_coefficients(input, positions, output, options);
        return;
    }
    sample(Task{input, positions, output, options});
}

Tensor grid_sample(const ConstTensorView& input, const PositionSource& positions, const SampleOptions& options) {
    Tensor output(input.dtype, grid_sample_output_shape(input, positions));
    grid_sample(input, positions, output.view(), options);
    return output;
}

namespace {

// The ONNX operator's requirements on its grid (N, O1..Or, r).
void check_onnx_grid(const ConstTensorView& input, const ConstTensorView& grid) {
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
}

}  // namespace

Shape grid_sample_output_shape(const ConstTensorView& input, const ConstTensorView& grid) {
    check_onnx_grid(input, grid);
    return grid_sample_output_shape(input, GridPositions(grid));
}

void grid_sample_into(const ConstTensorView& input, const ConstTensorView& grid, const TensorView& output, const SampleOptions& options) {
    check_onnx_grid(input, grid);
    grid_sample(input, GridPositions(grid), output, options);
}

Tensor grid_sample(const ConstTensorView& input, const ConstTensorView& grid, const SampleOptions& options) {
    check_onnx_grid(input, grid);
    return grid_sample(input, GridPositions(grid), options);
}

}  // namespace gridwarp
