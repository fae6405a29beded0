// The generic stages of the fast path (fast_path.cpp) that the compiler vectorises: stage 1,
// planning a block of points (fast_plan_body), and the dense pass of stage 2 (dense_gather_body,
// tap_weights_body). Written as scalar loops; fast_stages.cpp compiles them once per Highway target,
// so that each processor runs them vectorised with its own instructions.
#pragma once

#include "fast_path.hpp"
#include "sampler_task.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace gridwarp::detail {

// Pixel types with a fast path (the rest are rare enough for the reference path).
template <class S>
inline constexpr bool kFastStorage = std::is_same_v<S, float> || std::is_same_v<S, double> ||
                                     std::is_same_v<S, std::uint8_t> || std::is_same_v<S, std::int8_t> ||
                                     std::is_same_v<S, std::uint16_t> || std::is_same_v<S, std::int16_t>;

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
// portable instruction set even inside a target's copy.)
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
GRIDWARP_STAGE void fast_plan_body(const C* xyz, std::int64_t count, const InputGeometry& geometry, FastBlock<C>& block) {
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
// once for all channels by tap_weights_body). Each target calls it through a function of its own
// (DenseGatherChannel, fast_stages.cpp).
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

// Stage 2's dense pass of one channel, and the tap weights shared by several channels, as one
// target compiled them for a block's interpolation and rank.
template <class S, class C>
using DenseGatherFunction = void (*)(std::int64_t count, const std::int32_t* base, const std::int32_t* tap_offset,
                                     const C* axis_weight,
                                     const typename real_of<typename compute_type<S>::type>::type* tap_weights,
                                     const S* in, S* out, std::int64_t out_stride);
template <class R, class C>
using TapWeightsFunction = void (*)(std::int64_t count, const C* axis_weight, R* tap_weights);

template <class S, class C>
struct DenseKernels {
    DenseGatherFunction<S, C> with_tap_weights = nullptr;  // reads the tap weights computed by tap_weights
    DenseGatherFunction<S, C> computing_weights = nullptr;  // computes them on the way (one channel)
    TapWeightsFunction<typename real_of<typename compute_type<S>::type>::type, C> tap_weights = nullptr;
};

// The stages of the best allowed Highway target (simd_targets.hpp) for this interpolation, padding
// and rank (2 or 3). Defined by fast_stages.cpp for C in {float, double} and S in kFastStorage.
template <class C>
FastPlanFunction<C> select_fast_planner(Interpolation mode, Padding padding, int rank);
template <class S, class C>
DenseKernels<S, C> select_dense_kernels(Interpolation mode, int rank);

}  // namespace gridwarp::detail
