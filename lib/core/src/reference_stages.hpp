// The reference path's two stages (see reference_path.cpp): the plan of a chunk of points and the
// gather in each pixel type. The fast path plans and gathers its far points with them.
#pragma once

#include "gridwarp/grid_sample.hpp"

#include "sampling_policies.hpp"
#include "spline_sinc_kernels.hpp"

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

namespace gridwarp::detail {


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
    if constexpr (std::is_same_v<S, std::int64_t> || std::is_same_v<S, std::uint64_t>) {
        // A point on a pixel reads that pixel alone, with weight 1: copied, since a double holds
        // 64-bit integers exactly only up to 2^53 (identities, integer shifts, quarter turns).
        std::int64_t only = -1;
        for (std::int64_t t = 0; t < taps; ++t) {
            if (weight[t] == C(0)) continue;
            only = only == -1 && weight[t] == C(1) ? t : -2;
        }
        if (only >= 0) return offset[only] >= 0 ? input[offset[only]] : fill_stored;
    }
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

}  // namespace gridwarp::detail
