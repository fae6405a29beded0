// What every GridSample translation unit shares: the interpolation and padding policies, the input's
// geometry, the pixel position of a coordinate and the compute type of a pixel type. The reference
// path (reference_path.cpp) and the interior pass (interior_pass-inl.h) instantiate the same
// policies, so that every path computes with the same operations.
#pragma once

#include "gridwarp/dtype.hpp"
#include "gridwarp/grid_sample.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__GNUC__) || defined(__clang__)
#define GRIDWARP_ALWAYS_INLINE __attribute__((always_inline)) inline
#define GRIDWARP_NOINLINE __attribute__((noinline))
#else
#define GRIDWARP_ALWAYS_INLINE inline
#define GRIDWARP_NOINLINE
#endif

// A stage of a fast path (plan a group, sample a group, one row): inlined into its caller in
// optimised builds, a function of its own where GRIDWARP_SPLIT_STAGES is defined (the sanitizer
// build): instrumented with every stage inlined, each interior-pass file took GCC more than 30 CPU
// minutes. Only for functions whose callers have the same target attributes, so that vector
// arguments keep one calling convention.
#if defined(GRIDWARP_SPLIT_STAGES)
#define GRIDWARP_STAGE GRIDWARP_NOINLINE inline
#else
#define GRIDWARP_STAGE GRIDWARP_ALWAYS_INLINE
#endif

namespace gridwarp::detail {

// ---------------------------------------------------------------------------------------------
// Interpolation policies: along one axis, the first tap and the weights of `taps` consecutive taps.

// floor(u) as an integer for |u| < 2^31, by truncation and a correction, in code that vectorises.
template <class C>
std::int32_t floor_int(C u) {
    const auto t = static_cast<std::int32_t>(u);
    return t - static_cast<std::int32_t>(static_cast<C>(t) > u);
}

// interior_lo/interior_hi/interior_first serve the fast path only: a coordinate u with
// interior_lo <= u < interior_hi(d) has every tap inside [0, d-1] (so padding cannot matter), and
// there interior_first(u) equals first_tap(u) computed through an integer conversion; with
// u < outside_below or u >= outside_from(d), every tap is outside [0, d-1].
struct NearestTaps {
    static constexpr int taps = 1;
    template <class C> static C first_tap(C u) { return std::nearbyint(u); }  // ties to even
    template <class C> static void weights(C, C, C* w) { w[0] = C(1); }
    template <class C> static C interior_lo() { return C(0); }
    template <class C> static C interior_hi(std::int64_t d) { return static_cast<C>(d) - C(0.5); }
    // u < outside_below or u >= outside_from(d): every tap is outside [0, d-1].
    template <class C> static C outside_below() { return C(-0.5); }
    template <class C> static C outside_from(std::int64_t d) { return static_cast<C>(d); }
    // For 0 <= u < 2^22, adding and subtracting 1.5 * 2^(mantissa bits) rounds to an integer in
    // the current rounding mode, as nearbyint does, without a branch or a call, so it vectorises.
    template <class C> static std::int32_t interior_first(C u) {
        constexpr C kRound = C(1.5) * C(std::int64_t{1} << (std::numeric_limits<C>::digits - 1));
        return static_cast<std::int32_t>((u + kRound) - kRound);
    }
    // first_tap(u) for any |u| < 2^22 (the same rounding, negative u included).
    template <class C> static std::int32_t near_first(C u) { return interior_first(u); }
};

struct LinearTaps {
    static constexpr int taps = 2;
    template <class C> static C first_tap(C u) { return std::floor(u); }
    template <class C> static C interior_lo() { return C(0); }
    template <class C> static C interior_hi(std::int64_t d) { return static_cast<C>(d - 1); }
    template <class C> static C outside_below() { return C(-1); }
    template <class C> static C outside_from(std::int64_t d) { return static_cast<C>(d); }
    // u >= 0: truncation is floor.
    template <class C> static std::int32_t interior_first(C u) { return static_cast<std::int32_t>(u); }
    template <class C> static std::int32_t near_first(C u) { return floor_int(u); }
    template <class C> GRIDWARP_ALWAYS_INLINE static void weights(C u, C first, C* w) {
        const C t = u - first;
        w[0] = C(1) - t;
        w[1] = t;
    }
};

struct CubicTaps {
    static constexpr int taps = 4;
    template <class C> static C first_tap(C u) { return std::floor(u) - C(1); }
    template <class C> static C interior_lo() { return C(1); }
    template <class C> static C interior_hi(std::int64_t d) { return static_cast<C>(d - 2); }
    template <class C> static C outside_below() { return C(-2); }
    template <class C> static C outside_from(std::int64_t d) { return static_cast<C>(d + 1); }
    // u >= 1: truncation is floor.
    template <class C> static std::int32_t interior_first(C u) { return static_cast<std::int32_t>(u) - 1; }
    template <class C> static std::int32_t near_first(C u) { return floor_int(u) - 1; }
    // Keys cubic convolution, A = -0.75 (PyTorch, ONNX), t the offset from the second tap.
    template <class C> GRIDWARP_ALWAYS_INLINE static void weights(C u, C first, C* w) {
        const C A = C(-0.75);  // const, not constexpr: C may be a vector type (the interior pass)
        const C t = u - (first + C(1));
        const C t1 = t + C(1), s = C(1) - t, s1 = C(2) - t;
        w[0] = ((A * t1 - C(5) * A) * t1 + C(8) * A) * t1 - C(4) * A;
        w[1] = ((A + C(2)) * t - (A + C(3))) * t * t + C(1);
        w[2] = ((A + C(2)) * s - (A + C(3))) * s * s + C(1);
        w[3] = ((A * s1 - C(5) * A) * s1 + C(8) * A) * s1 - C(4) * A;
    }
};

// ---------------------------------------------------------------------------------------------
// The zero-weight rule (docs/semantics.md): a tap of weight exactly zero contributes nothing, so an
// infinity or NaN reaches only the outputs that give it weight (0 * inf and 0 * NaN are NaN: an
// identity warp would spread a NaN to the neighbours of every non-finite value). The weight is
// the tap's as the sum multiplies by it: the product of its per-axis weights, in the compute
// type's real type.
//
// The fast paths keep their plain sums and redo only the NaN ones: a sum of every tap that is not
// NaN equals the sum that skips the zero-weight taps bit for bit. (No term was NaN, so each
// zero-weight term was 0 * finite = +-0; the sum starts at +0 and, rounding to nearest, never
// becomes -0, so adding +-0 to it changes nothing.) Where the plain sum is NaN, the fast paths
// sum again with the rule.

// sum + weight * value, or sum unchanged where the weight is zero.
template <class V, class R>
GRIDWARP_ALWAYS_INLINE void add_weighted_tap(V& sum, R weight, const V& value) {
    if (weight != R(0)) sum += weight * value;
}

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
    // Fast path: true when axis_taps would return false (a non-finite coordinate gives a
    // non-finite u), for coordinates that are not folded.
    template <class C> static bool fills(C, C u, std::int64_t d) {
        return !((u > -kTapReach<C>) & (u < static_cast<C>(d) + kTapReach<C>));
    }
};

struct BorderPadding {
    // Past -2 or d+1 every tap clamps to the edge; snapping to those integers keeps the weights exact.
    template <class C> static bool bound(C& u, std::int64_t d) {
        u = std::clamp(u, C(-2), static_cast<C>(d) + C(1));
        return true;
    }
    static std::int64_t map(std::int64_t i, std::int64_t d, bool) { return std::clamp<std::int64_t>(i, 0, d - 1); }
    template <class C> static bool fills(C g, C, std::int64_t) { return !(std::fabs(g) <= std::numeric_limits<C>::max()); }
    // Fast path, points near an edge: u as bound() leaves it (the same value as std::clamp for
    // numbers; max and min vectorise), whether the taps from `first` on all map by near_map, and
    // near_map: map() without a loop, for those taps.
    template <class C> static C near_bound(C u, std::int64_t d) {
        return std::min(static_cast<C>(d) + C(1), std::max(C(-2), u));
    }
    static bool near_ok(std::int32_t, int, std::int32_t d, bool) { return d >= 1; }
    static std::int32_t near_map(std::int32_t i, std::int32_t d, bool) { return std::min(std::max(i, 0), d - 1); }
};

struct ReflectionPadding {
    template <class C> static bool bound(C&, std::int64_t) { return true; }  // folded in normalized space
    // Reflect about -0.5 and d-0.5 (align_corners=0) or 0 and d-1 (align_corners=1), repeatedly.
    static std::int64_t map(std::int64_t i, std::int64_t d, bool align_corners) {
        if (i >= 0 && i < d) return i;
        if (d == 1) return 0;
        const std::int64_t period = align_corners ? 2 * (d - 1) : 2 * d;
        std::int64_t m = i % period;
        if (m < 0) m += period;
        if (m < d) return m;
        return align_corners ? period - m : period - 1 - m;
    }
    template <class C> static bool fills(C g, C, std::int64_t) { return !(std::fabs(g) <= std::numeric_limits<C>::max()); }
    // Fast path: taps within one reflection of the axis (map() without the modulo), d >= 2.
    template <class C> static C near_bound(C u, std::int64_t) { return u; }
    static bool near_ok(std::int32_t first, int taps, std::int32_t d, bool align_corners) {
        const std::int32_t lo = align_corners ? 1 - d : -d;
        const std::int32_t hi = align_corners ? 2 * (d - 1) : 2 * d - 1;
        return (d >= 2) & (first >= lo) & (first + taps - 1 <= hi);
    }
    static std::int32_t near_map(std::int32_t i, std::int32_t d, bool align_corners) {
        const std::int32_t below = align_corners ? -i : -1 - i;
        const std::int32_t above = align_corners ? 2 * (d - 1) - i : 2 * d - 1 - i;
        return i < 0 ? below : (i >= d ? above : i);
    }
};

// A normalized coordinate as a pixel position along an axis of d pixels.
template <class C>
C unnormalize(C g, std::int64_t d, bool align_corners) {
    const C extent = static_cast<C>(d);
    return align_corners ? (g + C(1)) / C(2) * (extent - C(1)) : ((g + C(1)) * extent - C(1)) / C(2);
}

// The input's spatial axes as the planners see them.
struct InputGeometry {
    int rank = 0;
    const std::int64_t* extent = nullptr;  // D1..Dr, outermost first
    const std::int64_t* stride = nullptr;  // element strides of D1..Dr
    bool align_corners = false;
    CoordinateSpace space = CoordinateSpace::Normalized;
};

// Runtime options as template arguments: calls fn with a type_tag of the policy. The ONNX kinds
// only, which the fast paths serve; spline_sinc_kernels.hpp's visit_any_interpolation has them all.
template <class Fn>
decltype(auto) visit_interpolation(Interpolation mode, Fn&& fn) {
    switch (mode) {
        case Interpolation::Nearest: return fn(type_tag<NearestTaps>{});
        case Interpolation::Cubic: return fn(type_tag<CubicTaps>{});
        default: break;
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

// The type a pixel type's weighted sums are computed in, and its real part's type.
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

// How a coordinate becomes a pixel position: unnormalized (align_corners 0 or 1) or taken as is.
enum class PositionKind { NormalizedEdges, NormalizedCorners, Pixel };

// u as axis_taps computes it for coordinates that are not folded (folded ones are never interior).
template <PositionKind Kind, class C>
GRIDWARP_ALWAYS_INLINE C pixel_position(C g, std::int64_t d) {
    if constexpr (Kind == PositionKind::Pixel) {
        return g;
    } else {
        return unnormalize(g, d, Kind == PositionKind::NormalizedCorners);
    }
}

}  // namespace gridwarp::detail
