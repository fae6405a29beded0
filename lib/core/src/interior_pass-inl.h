// The interior pass of the fast path, one Highway source for every target it is compiled for
// (GRIDWARP_PASS_TARGET): float32, int16 and uint8 pixels, float32 and float64 coordinates, ranks 2
// and 3. Re-included once per target by interior_pass_<pixel>_<f32|f64>.cpp (foreach_target.h).
//
// Why a pass of its own: the generic stages (plan a block of 256 points into arrays, then gather)
// spend most of their time on the arrays the two stages pass each other and on one load per tap.
// The pass does both stages for a group of points at a time in registers (a vector of floats: 8
// points with AVX2, 16 with AVX-512, 4 with NEON) and reads a point's taps along x with one load
// per row.
//
// It computes exactly what classify_points and dense_gather_body compute, in the same order: u as
// pixel_position computes it, the clamped stand-in, the first tap by Interp::interior_first, the
// weights by Interp::weights itself (on vectors), each tap weight (1 * w_outer) * ... * w_inner,
// the sum over taps in tap order from +0, summed again under the zero-weight rule where a float32
// sum is NaN. It writes every point of a group as if it were interior, then gives fill points the
// fill value and samples the points across an edge whose taps map by one clamp or reflection
// (under zeros padding with linear taps and a fill of +-0: from the taps the group has already
// read, see stand_in_weights); the few left are listed for the generic edge stage. No fused
// multiply-add can form: lib/core builds with -ffp-contract=off and Highway's Mul and Add are
// separate instructions.

// Once: the vectors that the interpolation policies' weights() take (sampling_policies.hpp). They
// wrap a target's raw vector type and use GCC's vector arithmetic, which needs no target attribute:
// the policies are compiled without one, and an always-inline function may only call functions
// whose targets are a subset of its own.
#ifndef GRIDWARP_INTERIOR_PASS_POLICY_LANES_H_
#define GRIDWARP_INTERIOR_PASS_POLICY_LANES_H_
namespace gridwarp::detail {
template <class Raw, class T>
struct PolicyLanes {
    Raw v;
    PolicyLanes() = default;
    __attribute__((always_inline)) PolicyLanes(T x) : v(Raw{} + x) {}  // NOLINT: the policies write C(1)
    __attribute__((always_inline)) explicit PolicyLanes(Raw x) : v(x) {}
};
template <class Raw, class T>
__attribute__((always_inline)) inline PolicyLanes<Raw, T> operator+(PolicyLanes<Raw, T> a, PolicyLanes<Raw, T> b) {
    return PolicyLanes<Raw, T>(a.v + b.v);
}
template <class Raw, class T>
__attribute__((always_inline)) inline PolicyLanes<Raw, T> operator-(PolicyLanes<Raw, T> a, PolicyLanes<Raw, T> b) {
    return PolicyLanes<Raw, T>(a.v - b.v);
}
template <class Raw, class T>
__attribute__((always_inline)) inline PolicyLanes<Raw, T> operator*(PolicyLanes<Raw, T> a, PolicyLanes<Raw, T> b) {
    return PolicyLanes<Raw, T>(a.v * b.v);
}
}  // namespace gridwarp::detail
#endif

#if defined(GRIDWARP_INTERIOR_PASS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDWARP_INTERIOR_PASS_INL_H_
#undef GRIDWARP_INTERIOR_PASS_INL_H_
#else
#define GRIDWARP_INTERIOR_PASS_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "fast_path.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace gridwarp::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The targets the pass is compiled for: x86's AVX2 and AVX-512 and ARM's NEON. (Processors with
// only SSE4 take the generic stages, as does everything under GRIDWARP_ISA=baseline.)
#define GRIDWARP_PASS_TARGET (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON)
// x86 targets: masked loads and stores that never touch the masked-off lanes' memory.
#define GRIDWARP_PASS_X86 (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3)

#if GRIDWARP_PASS_TARGET

// A group: one float per point.
using GroupFloats = hn::ScalableTag<float>;
using GroupInts = hn::RebindToSigned<GroupFloats>;
constexpr int kGroup = static_cast<int>(hn::MaxLanes(GroupFloats()));
static_assert(kGroup >= 4 && kGroup <= 16 && kGroup % 4 == 0);
using FloatVec = hn::Vec<GroupFloats>;
using IntVec = hn::Vec<GroupInts>;

// The planner's lanes for coordinate type C: a whole group of floats, or half a group of doubles
// (a group is planned in two halves), with int32 lanes of the same count.
template <class C> struct PlannerLanes;
template <> struct PlannerLanes<float> {
    using D = GroupFloats;
    static constexpr int kHalves = 1;
};
template <> struct PlannerLanes<double> {
    using D = hn::Repartition<double, GroupFloats>;
    static constexpr int kHalves = 2;
};
template <class C> using PlanD = typename PlannerLanes<C>::D;
template <class C> using PlanIntD = hn::Rebind<std::int32_t, PlanD<C>>;
template <class C> using PlanVec = hn::Vec<PlanD<C>>;
template <class C> using PlanInt = hn::Vec<PlanIntD<C>>;
template <class C> constexpr int kPlanLanes = static_cast<int>(hn::MaxLanes(PlanD<C>()));
// The policies' vectors for D.
template <class D> using Policy = PolicyLanes<decltype(hn::Vec<D>().raw), hn::TFromD<D>>;

// Each tap's weight from the per-axis weights (outermost axis first), in tap order, as tap_weight
// computes it: 1 * w_outer * ... * w_x (1 * w is w exactly: the outer taps' weight is w_y in 2-D,
// w_z * w_y in 3-D).
template <int Rank, int K, class D>
HWY_INLINE void tap_weights_of_axes(const Policy<D> (&weight)[Rank][K], hn::Vec<D> (*tap_weight)[K]) {
    constexpr int kOuterTaps = Rank == 2 ? K : K * K;
    for (int o = 0; o < kOuterTaps; ++o) {
        const Policy<D> outer = Rank == 2 ? weight[0][o] : weight[0][o / K] * weight[1][o % K];
        for (int k = 0; k < K; ++k) tap_weight[o][k] = hn::Vec<D>{(outer * weight[Rank - 1][k]).v};
    }
}

// ---- Lane masks as bits (one per point, lane i = bit i), as the pass's bookkeeping keeps them.

template <class D>
HWY_INLINE unsigned lane_bits(D d, hn::Mask<D> mask) {
    (void)d;
#if HWY_TARGET == HWY_AVX3
    return static_cast<unsigned>(mask.raw) & ((1u << hn::MaxLanes(D())) - 1u);
#else
    // (Highway 1.0's public StoreMaskBits goes through memory; this is its movmsk.)
    return static_cast<unsigned>(hn::detail::BitsFromMask(mask));
#endif
}

template <class D>
HWY_INLINE hn::Mask<D> mask_of_bits(D d, unsigned bits) {
    std::uint8_t bytes[8] = {};
    std::memcpy(bytes, &bits, sizeof bits);
    return hn::LoadMaskBits(d, bytes);
}

// The first `lanes` lanes, 0 <= lanes <= 16 (callers clamp a partial group's halves).
HWY_INLINE unsigned active_bits(int lanes) { return (1u << std::clamp(lanes, 0, 16)) - 1u; }

// ---- Conversions of values known to be in range (first taps, rounded sums): Highway's checked
// conversions add a fix-up for overflow that the pass never needs.

template <class D>
HWY_INLINE hn::Vec<hn::Rebind<std::int32_t, D>> truncate_to_int32(D d, hn::Vec<D> v) {
    const hn::Rebind<std::int32_t, D> di;
#if GRIDWARP_PASS_X86
    if constexpr (std::is_same_v<hn::TFromD<D>, float>) {
#if HWY_TARGET == HWY_AVX3
        if constexpr (hn::MaxLanes(D()) == 16) return hn::Vec<decltype(di)>{_mm512_cvttps_epi32(v.raw)};
#endif
        if constexpr (hn::MaxLanes(D()) == 8) return hn::Vec<decltype(di)>{_mm256_cvttps_epi32(v.raw)};
    } else {
#if HWY_TARGET == HWY_AVX3
        if constexpr (hn::MaxLanes(D()) == 8) return hn::Vec<decltype(di)>{_mm512_cvttpd_epi32(v.raw)};
#endif
        if constexpr (hn::MaxLanes(D()) == 4) return hn::Vec<decltype(di)>{_mm256_cvttpd_epi32(v.raw)};
    }
#endif
    if constexpr (std::is_same_v<hn::TFromD<D>, float>) {
        return hn::ConvertTo(di, v);
    } else {
        (void)d;
        return hn::DemoteTo(di, v);
    }
}

// Int32 lanes as C (exact).
template <class D>
HWY_INLINE hn::Vec<D> from_int32(D d, hn::Vec<hn::Rebind<std::int32_t, D>> v) {
    if constexpr (std::is_same_v<hn::TFromD<D>, float>) {
        return hn::ConvertTo(d, v);
    } else {
        return hn::PromoteTo(d, v);
    }
}

// ---- Partial groups: loads and stores of the first `lanes` lanes that touch no other memory.

template <class D>
HWY_INLINE hn::Vec<D> load_first(D d, const hn::TFromD<D>* from, int lanes) {
    constexpr int N = static_cast<int>(hn::MaxLanes(D()));
    if (lanes >= N) return hn::LoadU(d, from);
#if GRIDWARP_PASS_X86
    return hn::MaskedLoad(hn::FirstN(d, static_cast<std::size_t>(std::max(lanes, 0))), d, from);
#else
    HWY_ALIGN hn::TFromD<D> staged[N] = {};
    if (lanes > 0) std::memcpy(staged, from, sizeof(staged[0]) * static_cast<std::size_t>(lanes));
    return hn::Load(d, staged);
#endif
}

// The same with the lanes past `lanes` set to `spare`.
template <class D>
HWY_INLINE hn::Vec<D> load_first_or(D d, const hn::TFromD<D>* from, int lanes, hn::TFromD<D> spare) {
    constexpr int N = static_cast<int>(hn::MaxLanes(D()));
    if (lanes >= N) return hn::LoadU(d, from);
    return hn::IfThenElse(hn::FirstN(d, static_cast<std::size_t>(std::max(lanes, 0))), load_first(d, from, lanes), hn::Set(d, spare));
}

template <class D>
HWY_INLINE void store_first(D d, hn::Vec<D> v, hn::TFromD<D>* to, int lanes) {
    constexpr int N = static_cast<int>(hn::MaxLanes(D()));
    if (lanes >= N) {
        hn::StoreU(v, d, to);
        return;
    }
#if GRIDWARP_PASS_X86
    if constexpr (sizeof(hn::TFromD<D>) >= 4) {
        hn::BlendedStore(v, hn::FirstN(d, static_cast<std::size_t>(std::max(lanes, 0))), d, to);
        return;
    }
#endif
    HWY_ALIGN hn::TFromD<D> staged[N];
    hn::Store(v, d, staged);
    if (lanes > 0) std::memcpy(to, staged, sizeof(staged[0]) * static_cast<std::size_t>(lanes));
}

// hn::Combine without its zero extension of the lower half, which GCC keeps as a register move
// although the upper half is overwritten at once.
template <class D>
HWY_INLINE hn::Vec<D> combine_halves(D d, hn::Vec<hn::Half<D>> high, hn::Vec<hn::Half<D>> low) {
#if GRIDWARP_PASS_X86
    using T = hn::TFromD<D>;
    constexpr std::size_t kBytes = hn::MaxLanes(D()) * sizeof(T);
    if constexpr (kBytes == 32) {
        if constexpr (std::is_same_v<T, float>) {
            return hn::Vec<D>{_mm256_insertf128_ps(_mm256_castps128_ps256(low.raw), high.raw, 1)};
        } else if constexpr (std::is_same_v<T, double>) {
            return hn::Vec<D>{_mm256_insertf128_pd(_mm256_castpd128_pd256(low.raw), high.raw, 1)};
        } else {
            return hn::Vec<D>{_mm256_inserti128_si256(_mm256_castsi128_si256(low.raw), high.raw, 1)};
        }
    }
#if HWY_TARGET == HWY_AVX3
    if constexpr (kBytes == 64) {
        if constexpr (std::is_same_v<T, float>) {
            return hn::Vec<D>{_mm512_insertf32x8(_mm512_castps256_ps512(low.raw), high.raw, 1)};
        } else if constexpr (std::is_same_v<T, double>) {
            return hn::Vec<D>{_mm512_insertf64x4(_mm512_castpd256_pd512(low.raw), high.raw, 1)};
        } else {
            return hn::Vec<D>{_mm512_inserti64x4(_mm512_castsi256_si512(low.raw), high.raw, 1)};
        }
    }
#endif
#endif
    return hn::Combine(d, high, low);
}

// A vector of D from consecutive pieces (each a vector of a narrower descriptor), piece 0 in the
// lowest lanes.
template <class D, class Piece>
HWY_INLINE hn::Vec<D> join_pieces(D d, const Piece* piece) {
    constexpr std::size_t kPieces = hn::MaxLanes(D()) / hn::MaxLanes(hn::DFromV<Piece>());
    if constexpr (kPieces == 1) {
        (void)d;
        return piece[0];
    } else {
        const hn::Half<D> half;
        return combine_halves(d, join_pieces(half, piece + kPieces / 2), join_pieces(half, piece));
    }
}

// 8 bytes from each of two addresses of any alignment, `low`'s in the low half of a block: one
// 64-bit load and one insert.
HWY_INLINE hn::Vec<hn::Full128<std::uint64_t>> load_two_words(const void* low, const void* high) {
    const hn::Full128<std::uint64_t> d;
    return hn::InsertLane(hn::Set(d, load_unaligned<std::uint64_t>(low)), 1, load_unaligned<std::uint64_t>(high));
}

// p itself, hidden from the compiler, so that loads at p + offset take one addressing mode each
// instead of an add per load (GCC otherwise re-associates base + row offset + tap offset).
template <class T>
HWY_INLINE const T* opaque(const T* p) {
    asm("" : "+r"(p));
    return p;
}

// ---- Planning a group.

// Coordinates k = 0..Rank-1 of points p .. p + lanes - 1 (lanes past `lanes` read as 0).
template <class C, int Rank>
HWY_INLINE void read_coordinates(const CoordinateReader<C>& reader, std::int64_t p, int lanes, PlanVec<C>* coordinate) {
    const PlanD<C> d;
    constexpr int N = kPlanLanes<C>;
    if (reader.linear == nullptr) {
        const auto deinterleave = [&](const C* xyz) {
            if constexpr (Rank == 2) {
                hn::LoadInterleaved2(d, xyz, coordinate[0], coordinate[1]);
            } else {
                hn::LoadInterleaved3(d, xyz, coordinate[0], coordinate[1], coordinate[2]);
            }
        };
        if (lanes >= N) {
            deinterleave(reader.xyz + p * Rank);
        } else {
            // Lanes past `lanes` are read at their stand-ins: they take point 0's coordinates, so
            // that they read only what the row's points read (a box of the input may be all there is).
            HWY_ALIGN C staged[Rank * N];
            for (int lane = 0; lane < N; ++lane) std::memcpy(staged + lane * Rank, reader.xyz, sizeof(C) * Rank);
            if (lanes > 0) std::memcpy(staged, reader.xyz + p * Rank, sizeof(C) * static_cast<std::size_t>(lanes * Rank));
            deinterleave(staged);
        }
        return;
    }
    // An affine row: slope * base + offset in double, as AffinePositions::row computes it (lanes
    // past `lanes` at point 0, as above).
    const LinearRow& row = *reader.linear;
    const std::int64_t index = reader.first_index + p;
    const double spare = row.base[reader.first_index];
    const PlanD<double> dd;
    const auto coordinate_of = [&](hn::Vec<decltype(dd)> base, int k) {
        return hn::Add(hn::Mul(hn::Set(dd, row.slope[k]), base), hn::Set(dd, row.offset[k]));
    };
    if constexpr (std::is_same_v<C, double>) {
        const auto base = load_first_or(dd, row.base + index, lanes, spare);
        for (int k = 0; k < Rank; ++k) coordinate[k] = coordinate_of(base, k);
    } else {
        // float32 coordinates: computed in double and rounded to float.
        constexpr int H = kPlanLanes<double>;
        const hn::Half<GroupFloats> dh;
        const auto low = load_first_or(dd, row.base + index, lanes, spare), high = load_first_or(dd, row.base + index + H, lanes - H, spare);
        for (int k = 0; k < Rank; ++k) {
            coordinate[k] = combine_halves(d, hn::DemoteTo(dh, coordinate_of(high, k)), hn::DemoteTo(dh, coordinate_of(low, k)));
        }
    }
}

// pixel_position lane-wise (see PlannerAxes): / 2 is * 0.5, the same IEEE result.
template <bool Normalized, class C, int Rank>
HWY_INLINE PlanVec<C> pixel_position_lanes(PlanVec<C> g, const PlannerAxes<C, Rank>& axes, int a) {
    const PlanD<C> d;
    if constexpr (!Normalized) {
        (void)axes, (void)a;
        return g;
    } else {
        const auto scaled = hn::Mul(hn::Add(g, hn::Set(d, C(1))), hn::Set(d, axes.scale_first[a]));
        return hn::Mul(hn::Sub(scaled, hn::Set(d, axes.shift[a])), hn::Set(d, axes.scale_then[a]));
    }
}

// lo <= u < hi, one bit per lane (false for NaN).
template <class D>
HWY_INLINE unsigned within_bits(D d, hn::Vec<D> u, hn::TFromD<D> lo, hn::TFromD<D> hi) {
    return lane_bits(d, hn::And(u >= hn::Set(d, lo), u < hn::Set(d, hi)));
}

template <class D>
HWY_INLINE unsigned finite_bits(D d, hn::Vec<D> g) {
    return lane_bits(d, hn::Abs(g) <= hn::Set(d, std::numeric_limits<hn::TFromD<D>>::max()));
}

// Interp::interior_first lane-wise, for safe (finite, inside [lo, hi)) positions, as a value of C
// (an integer, exact), from which the weights are computed.
template <class Interp, class D>
HWY_INLINE hn::Vec<D> interior_first_value(D d, hn::Vec<D> safe) {
    using C = hn::TFromD<D>;
    if constexpr (Interp::taps == 1) {
        // (u + 1.5 * 2^p) - 1.5 * 2^p rounds to an integer (ties to even).
        const auto round = hn::Set(d, C(1.5) * C(std::int64_t{1} << (std::numeric_limits<C>::digits - 1)));
        return hn::Sub(hn::Add(safe, round), round);
    } else if constexpr (Interp::taps == 2) {
        return hn::Trunc(safe);
    } else {
        static_assert(Interp::taps == 4);
        return hn::Sub(hn::Trunc(safe), hn::Set(d, C(1)));
    }
}

// Adds axis a's term to the first-tap offset of a planner's lanes (first: their first taps along
// a, as values of C). double: summed in double and converted once (exact: every term is an integer
// below 2^31), as a conversion that changes the vector's width costs two micro-ops on x86. No
// multiply for the innermost axis's unit stride.
template <int Rank, class C>
HWY_INLINE void add_offset_term(const PlannerAxes<C, Rank>& axes, int a, PlanVec<C> first, PlanVec<C>& offset_value,
                                PlanInt<C>& offset) {
    const PlanD<C> d;
    const PlanIntD<C> di;
    const bool unit_stride = a == Rank - 1 && axes.stride[a] == 1;
    if constexpr (std::is_same_v<C, double>) {
        const auto term = unit_stride ? first : hn::Mul(first, hn::Set(d, axes.stride_value[a]));
        offset_value = a == 0 ? term : hn::Add(offset_value, term);
    } else {
        (void)offset_value;
        const auto first_int = truncate_to_int32(d, first);
        offset = hn::Add(offset, unit_stride ? first_int : hn::Mul(first_int, hn::Set(di, axes.stride[a])));
    }
}

// Points near an edge under zeros padding and linear taps (float32 pixels), read through the
// clamped stand-in taps the group reads anyway. On every axis a point within reach of the input
// has its first tap f = floor(u) in [-1, d-1], and its stand-in first tap s = clamp(f, 0, d-2) is
// f + 1 where f = -1, f - 1 where f = d-1, else f: so the stand-in pair holds each of the point's
// taps that is inside, in order. Weighting each stand-in tap by the weight of the tap it holds and
// letting the stand-in taps that hold none add +0 gives the reference's sum where the fill value
// is +-0: the reference's terms for taps outside are weight (>= 0) x fill = +-0, and adding +-0 to
// a sum that starts at +0 (and so is never -0) leaves it unchanged.
//
// The stand-in pair's weights along one axis (u: positions, stand_in: s as a value of C), and per
// stand-in tap one bit per lane where it holds one of the point's taps.
template <class D>
HWY_INLINE void stand_in_weights(D d, hn::Vec<D> u, hn::Vec<D> stand_in, Policy<D>* weight, unsigned* holds) {
    using C = hn::TFromD<D>;
    using P = Policy<D>;
    using V = hn::Vec<D>;
    const auto first = hn::Floor(u);
    P w[2];
    LinearTaps::weights(P(u.raw), P(first.raw), w);
    const auto shift = hn::Sub(stand_in, first);
    const auto tap1_at_0 = shift == hn::Set(d, C(1));   // f = -1: stand-in tap 0 holds tap 1, tap 1 holds none
    const auto tap0_at_1 = shift == hn::Set(d, C(-1));  // f = d-1: stand-in tap 1 holds tap 0, tap 0 holds none
    weight[0] = P(hn::IfThenElse(tap1_at_0, V{w[1].v}, V{w[0].v}).raw);
    weight[1] = P(hn::IfThenElse(tap0_at_1, V{w[0].v}, V{w[1].v}).raw);
    holds[0] = ~lane_bits(d, tap0_at_1);
    holds[1] = ~lane_bits(d, tap1_at_0);
}

// What the planner gives the sampler for a group: each point's first-tap offset, which points are
// interior or fill points, and the tap weights in float, in tap order (outer taps z, y, then the
// K taps along x).
template <int Rank, int K>
struct PlannedGroup {
    static constexpr int kOuterTaps = Rank == 2 ? K : K * K;
    HWY_INLINE PlannedGroup() {}  // (see BytePicks)
    HWY_ALIGN std::int32_t offset[kGroup];
    unsigned interior = 0;
    unsigned fill_zeros = 0;      // zeros padding's fill points: every tap of some axis outside, or not finite
    unsigned fill_nonfinite = 0;  // every padding's fill points: some coordinate not finite
    FloatVec weight[kOuterTaps][K];
};

// What a planner knows of its points. Known: the caller knows every point is interior
// (known_interior_span), so u itself is safe and no test or fill rule is needed. Tested: the
// points are planned only if every one is interior (a full group), else nothing is planned.
// General: any points, with the tests, the fill rules and the clamped stand-in.
enum class Planning { Known, Tested, General };

// Plans a planner's lanes: offsets, interior and fill bits, and tap weights in C. False (Tested
// only): not every point is interior, and nothing was planned. StandIn (General, linear only): the
// weights are those of the stand-in taps and axis_holds[a][k] says which lanes' stand-in tap k
// along axis a holds one of their taps (see stand_in_weights).
template <bool Normalized, class Interp, int Rank, class C, Planning Plan, bool StandIn = false>
HWY_INLINE bool plan_lanes(const CoordinateReader<C>& reader, std::int64_t p, int lanes, const PlannerAxes<C, Rank>& axes,
                           PlanInt<C>& offset, unsigned& interior, unsigned& fill_zeros, unsigned& fill_nonfinite,
                           PlanVec<C> (*tap_weight)[Interp::taps], unsigned (*axis_holds)[2]) {
    static_assert(!StandIn || (std::is_same_v<Interp, LinearTaps> && Plan == Planning::General));
    const PlanD<C> d;
    const PlanIntD<C> di;
    using P = Policy<PlanD<C>>;
    constexpr int K = Interp::taps;
    constexpr int N = kPlanLanes<C>;
    const unsigned active = active_bits(lanes);
    PlanVec<C> coordinate[Rank];
    read_coordinates<C, Rank>(reader, p, lanes, coordinate);
    PlanVec<C> u[Rank];
    for (int a = 0; a < Rank; ++a) u[a] = pixel_position_lanes<Normalized, C, Rank>(coordinate[Rank - 1 - a], axes, a);
    unsigned inside = active, within_reach = active, finite = active;
    if constexpr (Plan != Planning::Known) {
        for (int a = 0; a < Rank; ++a) inside &= within_bits(d, u[a], axes.lo, axes.hi[a]);
        if constexpr (Plan == Planning::Tested) {
            if (inside != active) return false;
        } else if (inside != active) {
            // An interior lane is finite and within reach, so the fill tests wait for a lane that is not.
            for (int a = 0; a < Rank; ++a) {
                finite &= finite_bits(d, coordinate[Rank - 1 - a]);
                within_reach &= within_bits(d, u[a], axes.outside_below, axes.outside_from[a]);
            }
        }
    }
    const bool all_interior = Plan == Planning::Known || (lanes >= N && inside == active);
    offset = hn::Zero(di);
    PlanVec<C> offset_value = hn::Zero(d);
    P weight[Rank][K] = {};
    for (int a = 0; a < Rank; ++a) {
        auto safe = u[a];
        // u clamped into [lo, below_hi] where every tap is inside: the stand-in of a point that is
        // not interior (NaN -> lo). (Lanes past `lanes` take the stand-in too: their taps are read.)
        if (!all_interior) safe = hn::Min(hn::Max(u[a], hn::Set(d, axes.lo)), hn::Set(d, axes.below_hi[a]));
        const auto first = interior_first_value<Interp>(d, safe);
        add_offset_term<Rank, C>(axes, a, first, offset_value, offset);
        if constexpr (StandIn) {
            stand_in_weights(d, u[a], first, weight[a], axis_holds[a]);
        } else if constexpr (K > 1) {
            Interp::weights(P(safe.raw), P(first.raw), weight[a]);
        }
    }
    if constexpr (std::is_same_v<C, double>) offset = truncate_to_int32(d, offset_value);
    interior = inside;
    fill_zeros = ~within_reach & active;
    fill_nonfinite = ~finite & active;
    if constexpr (K > 1) tap_weights_of_axes<Rank, K, PlanD<C>>(weight, tap_weight);
    return true;
}

// Plans a group into `group` (one float planner, or two double halves); false as plan_lanes.
// StandIn: also tap_holds[o][k], the lanes whose stand-in tap k of outer tap o holds one of their taps.
template <bool Normalized, class Interp, int Rank, class C, Planning Plan, bool StandIn = false>
GRIDWARP_STAGE bool plan_group(const CoordinateReader<C>& reader, std::int64_t p, int lanes, const PlannerAxes<C, Rank>& axes,
                               PlannedGroup<Rank, Interp::taps>& group, unsigned (*tap_holds)[2] = nullptr) {
    constexpr int K = Interp::taps;
    constexpr int kOuterTaps = PlannedGroup<Rank, K>::kOuterTaps;
    const GroupInts di;
    unsigned holds[Rank][2] = {};
    if constexpr (std::is_same_v<C, float>) {
        IntVec offset;
        if (!plan_lanes<Normalized, Interp, Rank, float, Plan, StandIn>(reader, p, lanes, axes, offset, group.interior, group.fill_zeros,
                                                                        group.fill_nonfinite, group.weight, holds)) {
            return false;
        }
        hn::Store(offset, di, group.offset);
    } else {
        // Two halves; tap weights narrowed to float once computed in double.
        constexpr int H = kPlanLanes<double>;
        PlanInt<double> offset[2];
        unsigned interior[2], fill_zeros[2], fill_nonfinite[2];
        PlanVec<double> weight[2][kOuterTaps][K];
        unsigned half_holds[2][Rank][2] = {};
        for (int h = 0; h < 2; ++h) {
            if (!plan_lanes<Normalized, Interp, Rank, double, Plan, StandIn>(reader, p + H * h, std::clamp(lanes - H * h, 0, H), axes,
                                                                             offset[h], interior[h], fill_zeros[h], fill_nonfinite[h],
                                                                             weight[h], half_holds[h])) {
                return false;
            }
        }
        constexpr unsigned kHalfMask = (1u << H) - 1u;
        if constexpr (StandIn) {
            for (int a = 0; a < Rank; ++a) {
                for (int k = 0; k < 2; ++k) holds[a][k] = (half_holds[0][a][k] & kHalfMask) | ((half_holds[1][a][k] & kHalfMask) << H);
            }
        }
        hn::Store(combine_halves(di, offset[1], offset[0]), di, group.offset);
        group.interior = interior[0] | (interior[1] << H);
        group.fill_zeros = fill_zeros[0] | (fill_zeros[1] << H);
        group.fill_nonfinite = fill_nonfinite[0] | (fill_nonfinite[1] << H);
        if constexpr (K > 1) {
            const GroupFloats df;
            const hn::Half<GroupFloats> dh;
            for (int o = 0; o < kOuterTaps; ++o) {
                for (int k = 0; k < K; ++k) group.weight[o][k] = combine_halves(df, hn::DemoteTo(dh, weight[1][o][k]), hn::DemoteTo(dh, weight[0][o][k]));
            }
        }
    }
    if constexpr (StandIn) {
        for (int o = 0; o < kOuterTaps; ++o) {
            const unsigned outer = Rank == 2 ? holds[0][o] : holds[0][o / 2] & holds[1][o % 2];
            for (int k = 0; k < 2; ++k) tap_holds[o][k] = outer & holds[Rank - 1][k] & active_bits(kGroup);
        }
    }
    return true;
}

// Zeros padding: true where no point of the planner's lanes is within reach of the input (all
// fill points), with their first-tap offsets: the clamped stand-ins that plan_lanes gives them (read
// by the prefetch of the rows ahead). Explicit grids that zoom out have many such groups. For cubic
// taps this test is much cheaper than a general plan; for linear taps it costs about as much as it
// saves, so only cubic takes it.
template <bool Normalized, class Interp, int Rank, class C>
HWY_INLINE bool plan_out_of_reach_lanes(const CoordinateReader<C>& reader, std::int64_t p, int lanes, const PlannerAxes<C, Rank>& axes,
                                        PlanInt<C>& offset) {
    const PlanD<C> d;
    PlanVec<C> coordinate[Rank];
    read_coordinates<C, Rank>(reader, p, lanes, coordinate);
    PlanVec<C> u[Rank];
    unsigned within_reach = active_bits(lanes);
    for (int a = 0; a < Rank; ++a) {
        u[a] = pixel_position_lanes<Normalized, C, Rank>(coordinate[Rank - 1 - a], axes, a);
        within_reach &= within_bits(d, u[a], axes.outside_below, axes.outside_from[a]);
    }
    if (within_reach != 0) return false;
    offset = hn::Zero(PlanIntD<C>());
    PlanVec<C> offset_value = hn::Zero(d);
    for (int a = 0; a < Rank; ++a) {
        const auto safe = hn::Min(hn::Max(u[a], hn::Set(d, axes.lo)), hn::Set(d, axes.below_hi[a]));
        add_offset_term<Rank, C>(axes, a, interior_first_value<Interp>(d, safe), offset_value, offset);
    }
    if constexpr (std::is_same_v<C, double>) offset = truncate_to_int32(d, offset_value);
    return true;
}

// The same for a group into `group` (offsets, and every active point a fill point of zeros padding).
template <bool Normalized, class Interp, int Rank, class C>
GRIDWARP_STAGE bool plan_out_of_reach_group(const CoordinateReader<C>& reader, std::int64_t p, int lanes, const PlannerAxes<C, Rank>& axes,
                                            PlannedGroup<Rank, Interp::taps>& group) {
    const GroupInts di;
    if constexpr (std::is_same_v<C, float>) {
        IntVec offset;
        if (!plan_out_of_reach_lanes<Normalized, Interp, Rank, float>(reader, p, lanes, axes, offset)) return false;
        hn::Store(offset, di, group.offset);
    } else {
        constexpr int H = kPlanLanes<double>;
        PlanInt<double> offset[2];
        for (int h = 0; h < 2; ++h) {
            if (!plan_out_of_reach_lanes<Normalized, Interp, Rank, double>(reader, p + H * h, std::clamp(lanes - H * h, 0, H), axes,
                                                                           offset[h])) {
                return false;
            }
        }
        hn::Store(combine_halves(di, offset[1], offset[0]), di, group.offset);
    }
    group.interior = 0;
    group.fill_zeros = active_bits(lanes);  // (fill_nonfinite is left as it was: zeros padding does not read it)
    return true;
}

// ---- Reading taps: the K taps from each point's offset along the innermost axis (stride 1) in
// each of T rows, tap k of row t into v[t][k], with one load per point and row (32 bits for one
// float tap, 64 for a pair, 128 for four) and shuffles into place.

// Per 128-bit block: the even and the odd 32-bit elements of a then b ([a0 a2 b0 b2], [a1 a3 b1 b3]).
HWY_INLINE void even_odd_in_blocks(FloatVec a, FloatVec b, FloatVec& even, FloatVec& odd) {
#if HWY_TARGET == HWY_AVX2
    even = FloatVec{_mm256_shuffle_ps(a.raw, b.raw, _MM_SHUFFLE(2, 0, 2, 0))};
    odd = FloatVec{_mm256_shuffle_ps(a.raw, b.raw, _MM_SHUFFLE(3, 1, 3, 1))};
#elif HWY_TARGET == HWY_AVX3
    even = FloatVec{_mm512_shuffle_ps(a.raw, b.raw, _MM_SHUFFLE(2, 0, 2, 0))};
    odd = FloatVec{_mm512_shuffle_ps(a.raw, b.raw, _MM_SHUFFLE(3, 1, 3, 1))};
#else
    static_assert(kGroup == 4);  // one block: ConcatEven/Odd are the per-block shuffles
    even = hn::ConcatEven(GroupFloats(), b, a);
    odd = hn::ConcatOdd(GroupFloats(), b, a);
#endif
}

// quad[i] block b holds the 4 taps of point 4b + i: a 4 x 4 transpose within each block puts tap
// k of points 4b..4b+3 into tap[k].
HWY_INLINE void transpose_taps(const FloatVec (&quad)[4], FloatVec (&tap)[4]) {
    const GroupFloats d;
    const hn::Repartition<double, GroupFloats> dd;
    const auto taps01_of_01 = hn::BitCast(dd, hn::InterleaveLower(d, quad[0], quad[1]));  // p0t0 p1t0 p0t1 p1t1
    const auto taps23_of_01 = hn::BitCast(dd, hn::InterleaveUpper(d, quad[0], quad[1]));
    const auto taps01_of_23 = hn::BitCast(dd, hn::InterleaveLower(d, quad[2], quad[3]));
    const auto taps23_of_23 = hn::BitCast(dd, hn::InterleaveUpper(d, quad[2], quad[3]));
    tap[0] = hn::BitCast(d, hn::InterleaveLower(dd, taps01_of_01, taps01_of_23));
    tap[1] = hn::BitCast(d, hn::InterleaveUpper(dd, taps01_of_01, taps01_of_23));
    tap[2] = hn::BitCast(d, hn::InterleaveLower(dd, taps23_of_01, taps23_of_23));
    tap[3] = hn::BitCast(d, hn::InterleaveUpper(dd, taps23_of_01, taps23_of_23));
}

template <int K, int T>
HWY_INLINE void load_taps(const float* const* row, const std::int32_t* offset, FloatVec (*v)[K]) {
    const GroupFloats d;
    constexpr int kBlocks = kGroup / 4;
    const hn::Full128<float> d128;
    if constexpr (K == 1) {
        hn::Vec<decltype(d128)> block[T][kBlocks];
        for (int b = 0; b < kBlocks; ++b) {
            const std::int64_t o0 = offset[4 * b], o1 = offset[4 * b + 1], o2 = offset[4 * b + 2], o3 = offset[4 * b + 3];
            for (int t = 0; t < T; ++t) {
                const float* p = row[t];
                auto q = hn::Set(d128, p[o0]);
                q = hn::InsertLane(q, 1, p[o1]);
                q = hn::InsertLane(q, 2, p[o2]);
                block[t][b] = hn::InsertLane(q, 3, p[o3]);
            }
        }
        for (int t = 0; t < T; ++t) v[t][0] = join_pieces(d, block[t]);
    } else if constexpr (K == 2) {
        // Block b of `a`: the pairs of points 4b, 4b+1; of `b`: those of 4b+2, 4b+3.
        hn::Vec<decltype(d128)> a[T][kBlocks], b[T][kBlocks];
        for (int j = 0; j < kBlocks; ++j) {
            const std::int64_t o[4] = {offset[4 * j], offset[4 * j + 1], offset[4 * j + 2], offset[4 * j + 3]};
            for (int t = 0; t < T; ++t) {
                a[t][j] = hn::BitCast(d128, load_two_words(row[t] + o[0], row[t] + o[1]));
                b[t][j] = hn::BitCast(d128, load_two_words(row[t] + o[2], row[t] + o[3]));
            }
        }
        for (int t = 0; t < T; ++t) even_odd_in_blocks(join_pieces(d, a[t]), join_pieces(d, b[t]), v[t][0], v[t][1]);
    } else {
        static_assert(K == 4);
        for (int t = 0; t < T; ++t) {
            FloatVec quad[4];
            for (int i = 0; i < 4; ++i) {
                hn::Vec<decltype(d128)> block[kBlocks];
                for (int b = 0; b < kBlocks; ++b) block[b] = hn::LoadU(d128, row[t] + offset[4 * b + i]);
                quad[i] = join_pieces(d, block);
            }
            transpose_taps(quad, v[t]);
        }
    }
}

// The same for int16 pixels: each point's K taps along x in one 16-, 32- or 64-bit load per row
// (the point's own taps, so no load reaches past them), widened to int32 and converted to float
// (exact: float holds every int16).
template <int K, int T>
HWY_INLINE void load_taps(const std::int16_t* const* row, const std::int32_t* offset, FloatVec (*v)[K]) {
    const GroupFloats d;
    const GroupInts di;
    const hn::Rebind<std::int16_t, GroupInts> d16;
    const hn::Simd<std::uint64_t, 1, 0> dword;
    for (int t = 0; t < T; ++t) {
        const std::int16_t* p = row[t];
        if constexpr (K == 1) {
            // Four points' values per 64-bit word.
            hn::Vec<decltype(dword)> words[kGroup / 4];
            for (int j = 0; j < kGroup / 4; ++j) {
                std::uint64_t word = 0;
                for (int i = 0; i < 4; ++i) word |= std::uint64_t{load_unaligned<std::uint16_t>(p + offset[4 * j + i])} << (16 * i);
                words[j] = hn::Set(dword, word);
            }
            const hn::Repartition<std::uint64_t, decltype(d16)> d16_words;
            v[t][0] = hn::ConvertTo(d, hn::PromoteTo(di, hn::BitCast(d16, join_pieces(d16_words, words))));
        } else if constexpr (K == 2) {
            // Point i's pair in 32-bit lane i: tap 0 in its low half, tap 1 in its high half.
            hn::Vec<decltype(dword)> words[kGroup / 2];
            for (int j = 0; j < kGroup / 2; ++j) {
                words[j] = hn::Set(dword, std::uint64_t{load_unaligned<std::uint32_t>(p + offset[2 * j])} |
                                              (std::uint64_t{load_unaligned<std::uint32_t>(p + offset[2 * j + 1])} << 32));
            }
            const hn::Repartition<std::uint64_t, GroupInts> dwords;
            const IntVec pairs = hn::BitCast(di, join_pieces(dwords, words));
            v[t][0] = hn::ConvertTo(d, hn::ShiftRight<16>(hn::ShiftLeft<16>(pairs)));
            v[t][1] = hn::ConvertTo(d, hn::ShiftRight<16>(pairs));
        } else {
            static_assert(K == 4);
            // quad[i] block b: the 4 taps of point 4b + i, as floats.
            const hn::Simd<std::int16_t, 4, 0> d4;
            FloatVec quad[4];
            for (int i = 0; i < 4; ++i) {
                hn::Vec<decltype(d4)> taps[kGroup / 4];
                for (int b = 0; b < kGroup / 4; ++b) taps[b] = hn::LoadU(d4, p + offset[4 * b + i]);
                quad[i] = hn::ConvertTo(d, hn::PromoteTo(di, join_pieces(d16, taps)));
            }
            transpose_taps(quad, v[t]);
        }
    }
}

// ---- Sampling a planned group: float32 and int16 pixels (one channel at a time).

// A group's sums stored as float32 (stream: a whole group, with a streaming store).
HWY_INLINE void store_sums(float* o, FloatVec sum, int lanes, bool stream) {
    const GroupFloats d;
    if (lanes >= kGroup && stream) {
        hn::Stream(sum, d, o);
    } else {
        store_first(d, sum, o, lanes);
    }
}

// The sums rounded half to even (by the instruction's own rounding, whatever the caller's MXCSR
// says) as int32: they are finite and within int32 (8- and 16-bit taps, weights summing to at most
// 3.4 in magnitude), so converting before saturating clamps as saturating first would.
HWY_INLINE IntVec round_sums(FloatVec sum) { return truncate_to_int32(GroupFloats(), hn::Round(sum)); }

// store_finite<int16_t> lane-wise.
HWY_INLINE void store_sums(std::int16_t* o, FloatVec sum, int lanes, bool /*stream*/) {
    const hn::Rebind<std::int16_t, GroupInts> d16;
    store_first(d16, hn::DemoteTo(d16, round_sums(sum)), o, lanes);
}

// One channel's weighted sums of a group (K > 1): the taps from `in` at the group's first-tap
// offsets. Masked (linear only): tap k of outer tap t adds +0 instead of its product in the lanes
// whose bit in tap_holds[t][k] is clear. SkipZeroWeights: a tap leaves the sum as it was in the
// lanes where its weight is zero (the zero-weight rule, sampling_policies.hpp).
template <int Rank, int K, class S, bool Masked, bool SkipZeroWeights>
HWY_INLINE FloatVec weighted_sums(const PlannedGroup<Rank, K>& group, const std::int32_t* outer_offset, const S* in,
                                  const unsigned (*tap_holds)[K]) {
    const GroupFloats d;
    constexpr int kOuterTaps = PlannedGroup<Rank, K>::kOuterTaps;
    // Linear: every row at once (each offset loaded once); cubic: a row at a time.
    constexpr int kTogether = K == 4 ? 1 : kOuterTaps;
    FloatVec sum = hn::Zero(d);
    for (int t0 = 0; t0 < kOuterTaps; t0 += kTogether) {
        const S* row[kTogether];
        for (int t = 0; t < kTogether; ++t) row[t] = opaque(in + outer_offset[t0 + t]);
        FloatVec v[kTogether][K];
        load_taps<K, kTogether>(row, group.offset, v);
        for (int t = 0; t < kTogether; ++t) {
            for (int k = 0; k < K; ++k) {
                const FloatVec weight = group.weight[t0 + t][k];
                FloatVec term = hn::Mul(weight, v[t][k]);
                if constexpr (Masked) term = hn::IfThenElseZero(mask_of_bits(d, tap_holds[t0 + t][k]), term);
                const FloatVec next = hn::Add(sum, term);
                if constexpr (SkipZeroWeights) {
                    sum = hn::IfThenElse(weight == hn::Zero(d), sum, next);
                } else {
                    sum = next;
                }
            }
        }
    }
    return sum;
}

// The same with the zero-weight rule, for the groups whose plain sums came out NaN: a function of
// its own, so that the common path's code and registers stay as they were.
template <int Rank, int K, class S, bool Masked>
HWY_NOINLINE FloatVec weighted_sums_skipping_zero_weights(const PlannedGroup<Rank, K>& group, const std::int32_t* outer_offset,
                                                          const S* in, const unsigned (*tap_holds)[K]) {
    return weighted_sums<Rank, K, S, Masked, true>(group, outer_offset, in, tap_holds);
}

// One channel's group: the weighted sums (fill points replaced by the fill value) written to `o`.
template <int Rank, int K, class S, bool Masked = false>
HWY_INLINE void sample_channel(const PlannedGroup<Rank, K>& group, int lanes, const std::int32_t* outer_offset, const S* in, S* o,
                               S fill_stored, unsigned fill, bool stream, const unsigned (*tap_holds)[K]) {
    const GroupFloats d;
    FloatVec sum;
    if constexpr (K == 1) {
        FloatVec v[1][1];
        load_taps<1, 1>(&in, group.offset, v);
        sum = v[0][0];  // nearest copies the value
    } else {
        sum = weighted_sums<Rank, K, S, Masked, false>(group, outer_offset, in, tap_holds);
        // The zero-weight rule: only a NaN sum can differ from the sum without the taps of weight
        // zero (sampling_policies.hpp); int16 values and the weights are finite, so their sums are too.
        if constexpr (std::is_same_v<S, float>) {
            if (HWY_UNLIKELY(!hn::AllFalse(d, hn::IsNaN(sum)))) {
                sum = weighted_sums_skipping_zero_weights<Rank, K, S, Masked>(group, outer_offset, in, tap_holds);
            }
        }
    }
    // (An int16 fill value is exact in float and stays itself through rounding and saturation.)
    if (fill != 0) sum = hn::IfThenElse(mask_of_bits(d, fill), hn::Set(d, static_cast<float>(fill_stored)), sum);
    store_sums(o, sum, lanes, stream);
}

template <int Rank, int K, class S, bool Masked = false>
GRIDWARP_STAGE void sample_group(const PlannedGroup<Rank, K>& group, int lanes, const std::int32_t* outer_offset, const S* input,
                                 S* output, const FastOutput<S>& out, unsigned fill, bool stream = false,
                                 const unsigned (*tap_holds)[K] = nullptr) {
    if (out.channels == 1) {
        sample_channel<Rank, K, S, Masked>(group, lanes, outer_offset, input, output, out.fill_stored, fill, stream, tap_holds);
        return;
    }
    for (std::int64_t c = 0; c < out.channels; ++c) {
        sample_channel<Rank, K, S, Masked>(group, lanes, outer_offset, input + c * out.input_channel_stride,
                                           output + c * out.output_channel_stride, out.fill_stored, fill, stream, tap_holds);
    }
}

// ---- Points near an edge under any padding (float32 pixels): the same operations as
// plan_near_points and the generic near loop, each tap read with a gather, since taps are no
// longer neighbours in memory.

// Lane-wise Pad::near_map on int32 lanes (zeros: the clamp only keeps the gather inside; taps
// outside read the fill value instead).
template <class Pad>
HWY_INLINE IntVec near_map(IntVec i, std::int32_t d, bool align_corners) {
    const GroupInts di;
    if constexpr (std::is_same_v<Pad, BorderPadding> || std::is_same_v<Pad, ZerosPadding>) {
        return hn::Min(hn::Max(i, hn::Zero(di)), hn::Set(di, d - 1));
    } else {
        static_assert(std::is_same_v<Pad, ReflectionPadding>);
        const IntVec below = hn::Sub(hn::Set(di, align_corners ? 0 : -1), i);
        const IntVec above = hn::Sub(hn::Set(di, align_corners ? 2 * (d - 1) : 2 * d - 1), i);
        const IntVec mapped = hn::IfThenElse(i < hn::Zero(di), below, i);
        return hn::IfThenElse(i > hn::Set(di, d - 1), above, mapped);
    }
}

// Lane-wise Pad::near_ok.
template <class Pad>
HWY_INLINE unsigned near_ok(IntVec first, int taps, std::int32_t d, bool align_corners) {
    const GroupInts di;
    if constexpr (std::is_same_v<Pad, BorderPadding> || std::is_same_v<Pad, ZerosPadding>) {
        (void)first, (void)taps, (void)align_corners;
        return d >= 1 ? active_bits(kGroup) : 0u;
    } else {
        if (d < 2) return 0;
        const std::int32_t lo = align_corners ? 1 - d : -d;
        const std::int32_t hi = align_corners ? 2 * (d - 1) : 2 * d - 1;
        // first >= lo and first + taps - 1 <= hi
        return ~lane_bits(di, hn::Set(di, lo) > first) & ~lane_bits(di, hn::Add(first, hn::Set(di, taps - 1)) > hn::Set(di, hi)) &
               active_bits(kGroup);
    }
}

// Plans a planner's lanes as plan_near_points does: their mapped tap indices per axis (as one
// group's int32 lanes, the planner's in the low lanes), whether they are near, which taps are
// inside, and their tap weights in C.
template <bool Normalized, class Interp, class Pad, int Rank, class C>
HWY_INLINE void plan_near_lanes(const CoordinateReader<C>& reader, std::int64_t p, int lanes, const PlannerAxes<C, Rank>& axes,
                                const InputGeometry& geometry, PlanInt<C> (*index)[Interp::taps], unsigned& near,
                                unsigned (*inside)[Interp::taps], PlanVec<C> (*tap_weight)[Interp::taps]) {
    const PlanD<C> d;
    const PlanIntD<C> di;
    using P = Policy<PlanD<C>>;
    constexpr int K = Interp::taps;
    constexpr C kLimit = C(std::int64_t{1} << 22);
    constexpr C kFoldBeyond = C(1 << 20);
    const unsigned active = active_bits(lanes);
    PlanVec<C> coordinate[Rank];
    read_coordinates<C, Rank>(reader, p, lanes, coordinate);
    unsigned ok_all = active;
    P weight[Rank][K] = {};
    for (int a = 0; a < Rank; ++a) {
        const auto g = coordinate[Rank - 1 - a];
        const std::int64_t extent = geometry.extent[a];
        auto u = pixel_position_lanes<Normalized, C, Rank>(g, axes, a);
        if constexpr (std::is_same_v<Pad, BorderPadding>) {
            u = hn::Min(hn::Set(d, static_cast<C>(extent) + C(1)), hn::Max(hn::Set(d, C(-2)), u));  // near_bound
        }
        unsigned ok = lane_bits(d, hn::Abs(u) < hn::Set(d, kLimit));
        if constexpr (std::is_same_v<Pad, ReflectionPadding>) {
            if (Normalized) ok &= lane_bits(d, hn::Abs(g) <= hn::Set(d, kFoldBeyond));
        }
        const auto safe = hn::Min(hn::Set(d, kLimit), hn::Max(hn::Set(d, -kLimit), u));
        PlanInt<C> first;
        if constexpr (K == 1) {
            first = truncate_to_int32(d, interior_first_value<Interp>(d, safe));  // the rounding trick holds for |u| < 2^22
        } else {
            const auto truncated = truncate_to_int32(d, safe);
            // floor_int: truncation, minus 1 where it rounded up.
            const unsigned rounded_up = lane_bits(d, from_int32(d, truncated) > safe);
            first = hn::Sub(truncated, hn::IfThenElseZero(mask_of_bits(di, rounded_up), hn::Set(di, 1)));
            if constexpr (K == 4) first = hn::Sub(first, hn::Set(di, 1));
        }
        const auto d32 = static_cast<std::int32_t>(extent);
        if constexpr (K > 1) Interp::weights(P(safe.raw), P(from_int32(d, first).raw), weight[a]);
        // The planner's lanes in a group's int32 lanes (a double half: the upper lanes are zero and
        // never looked at).
        IntVec first_group;
        if constexpr (std::is_same_v<C, float>) {
            first_group = first;
        } else {
            first_group = hn::ZeroExtendVector(GroupInts(), first);
        }
        ok &= near_ok<Pad>(first_group, K, d32, geometry.align_corners);
        for (int k = 0; k < K; ++k) {
            const IntVec tap = hn::Add(first_group, hn::Set(GroupInts(), k));
            const IntVec mapped = near_map<Pad>(tap, d32, geometry.align_corners);
            if constexpr (std::is_same_v<C, float>) {
                index[a][k] = mapped;
            } else {
                index[a][k] = hn::LowerHalf(mapped);
            }
            // Zeros padding: whether the tap is inside [0, d-1] (ZerosPadding::map gives -1 elsewhere).
            inside[a][k] = lane_bits(GroupInts(), hn::And(tap > hn::Set(GroupInts(), -1), hn::Set(GroupInts(), d32) > tap));
        }
        ok_all &= ok;
    }
    near = ok_all & active;
    if constexpr (K > 1) tap_weights_of_axes<Rank, K, PlanD<C>>(weight, tap_weight);
}

// Samples the `edge` points of a group that are near, writes them, and returns which they are.
template <bool Normalized, class Interp, class Pad, int Rank, class C>
GRIDWARP_STAGE unsigned sample_near_group(const CoordinateReader<C>& reader, std::int64_t p, int lanes, unsigned edge,
                                          const PlannerAxes<C, Rank>& axes, const InputGeometry& geometry, const float* input,
                                          float* output, const FastOutput<float>& out) {
    const GroupFloats df;
    const GroupInts di;
    constexpr int K = Interp::taps;
    constexpr int kOuterTaps = Rank == 2 ? K : K * K;
    IntVec index[Rank][K];
    unsigned inside[Rank][K];
    FloatVec weight[kOuterTaps][K];
    unsigned near = 0;
    if constexpr (std::is_same_v<C, float>) {
        plan_near_lanes<Normalized, Interp, Pad, Rank, float>(reader, p, lanes, axes, geometry, index, near, inside, weight);
    } else {
        constexpr int H = kPlanLanes<double>;
        constexpr unsigned kHalfMask = (1u << H) - 1u;
        PlanInt<double> half_index[2][Rank][K];
        unsigned half_inside[2][Rank][K];
        PlanVec<double> half_weight[2][kOuterTaps][K];
        unsigned half_near[2];
        for (int h = 0; h < 2; ++h) {
            plan_near_lanes<Normalized, Interp, Pad, Rank, double>(reader, p + H * h, std::clamp(lanes - H * h, 0, H), axes, geometry,
                                                                   half_index[h], half_near[h], half_inside[h], half_weight[h]);
        }
        near = (half_near[0] & kHalfMask) | ((half_near[1] & kHalfMask) << H);
        for (int a = 0; a < Rank; ++a) {
            for (int k = 0; k < K; ++k) {
                inside[a][k] = (half_inside[0][a][k] & kHalfMask) | ((half_inside[1][a][k] & kHalfMask) << H);
                index[a][k] = combine_halves(di, half_index[1][a][k], half_index[0][a][k]);
            }
        }
        if constexpr (K > 1) {
            const hn::Half<GroupFloats> dh;
            for (int o = 0; o < kOuterTaps; ++o) {
                for (int k = 0; k < K; ++k) {
                    weight[o][k] = combine_halves(df, hn::DemoteTo(dh, half_weight[1][o][k]), hn::DemoteTo(dh, half_weight[0][o][k]));
                }
            }
        }
    }
    const unsigned take = near & edge;
    if (take == 0) return 0;
    // Tap offsets in tap order: outer taps (z, y), then x.
    IntVec offset[kOuterTaps][K];
    for (int o = 0; o < kOuterTaps; ++o) {
        const int ky = o % K, kz = o / K;
        IntVec outer = hn::Mul(index[Rank - 2][ky], hn::Set(di, static_cast<std::int32_t>(geometry.stride[Rank - 2])));
        if constexpr (Rank == 3) {
            outer = hn::Add(hn::Mul(index[0][kz], hn::Set(di, static_cast<std::int32_t>(geometry.stride[0]))), outer);
        }
        for (int k = 0; k < K; ++k) {
            offset[o][k] = hn::Add(outer, hn::Mul(index[Rank - 1][k], hn::Set(di, static_cast<std::int32_t>(geometry.stride[Rank - 1]))));
        }
    }
    [[maybe_unused]] const auto taken = hn::RebindMask(di, mask_of_bits(df, take));  // (border and reflection)
    // Lanes that read nothing gather a taken lane's tap instead, which lies where the point reads
    // (a box of the input may be all there is).
    const auto spare_lane = static_cast<std::size_t>(__builtin_ctz(take));
    for (std::int64_t c = 0; c < out.channels; ++c) {
        const float* in = input + c * out.input_channel_stride;
        FloatVec sum = hn::Zero(df);
        for (int o = 0; o < kOuterTaps; ++o) {
            // Zeros padding: the taps inside every axis are read, the others are the fill value.
            unsigned tap_inside = ~0u;
            if constexpr (std::is_same_v<Pad, ZerosPadding>) {
                tap_inside = inside[Rank - 2][o % K] & (Rank == 3 ? inside[0][o / K] : ~0u);
            }
            for (int k = 0; k < K; ++k) {
                FloatVec v;
                if constexpr (std::is_same_v<Pad, ZerosPadding>) {
                    const auto reads = mask_of_bits(df, take & tap_inside & inside[Rank - 1][k]);
                    // (Lanes not read gather the spare tap and take the fill value.)
                    const IntVec spare = hn::Set(di, hn::ExtractLane(offset[o][k], spare_lane));
                    const IntVec at = hn::IfThenElse(hn::RebindMask(di, reads), offset[o][k], spare);
                    v = hn::IfThenElse(reads, hn::GatherIndex(df, in, at), hn::Set(df, out.fill_value));
                } else {
                    // Every tap of a taken lane is read; the other lanes gather the spare tap and are not stored.
                    const IntVec spare = hn::Set(di, hn::ExtractLane(offset[o][k], spare_lane));
                    v = hn::GatherIndex(df, in, hn::IfThenElse(taken, offset[o][k], spare));
                }
                if constexpr (K == 1) {
                    sum = v;
                } else {
                    // The zero-weight rule directly (few points): where the weight is zero the sum stays.
                    const FloatVec next = hn::Add(sum, hn::Mul(weight[o][k], v));
                    sum = hn::IfThenElse(weight[o][k] == hn::Zero(df), sum, next);
                }
            }
        }
        float* o = output + c * out.output_channel_stride;
#if GRIDWARP_PASS_X86
        hn::BlendedStore(sum, mask_of_bits(df, take), df, o);
#else
        HWY_ALIGN float staged[kGroup];
        hn::Store(sum, df, staged);
        for (unsigned bits = take; bits != 0; bits &= bits - 1) o[__builtin_ctz(bits)] = staged[__builtin_ctz(bits)];
#endif
    }
    return take;
}

// sample_near_group for the call's padding (a run-time choice, in the edge groups only).
template <bool Normalized, class Interp, int Rank, class C>
HWY_INLINE unsigned sample_near_group_of_padding(Padding padding, const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                 unsigned edge, const PlannerAxes<C, Rank>& axes, const InputGeometry& geometry,
                                                 const float* input, float* output, const FastOutput<float>& out) {
    switch (padding) {
        case Padding::Zeros:
            return sample_near_group<Normalized, Interp, ZerosPadding, Rank, C>(reader, p, lanes, edge, axes, geometry, input, output, out);
        case Padding::Reflection:
            return sample_near_group<Normalized, Interp, ReflectionPadding, Rank, C>(reader, p, lanes, edge, axes, geometry, input, output,
                                                                                     out);
        default:
            return sample_near_group<Normalized, Interp, BorderPadding, Rank, C>(reader, p, lanes, edge, axes, geometry, input, output, out);
    }
}

// ---- Sampling a planned group: uint8 pixels, interleaved (HWC: channels adjacent) or planar.
// Each point reads 8 bytes per outer tap from its first tap on (every channel's K taps when
// interleaved, K * channels <= 8; one channel's K taps when planar) with one 64-bit load; a byte
// table lookup within each 128-bit block picks tap k of channel c of the points into 32-bit lanes.
// (Byte values and the weights are finite, so the sums already keep the zero-weight rule.)

using GroupBytes = hn::Repartition<std::uint8_t, GroupFloats>;  // 4 bytes per point
using ByteVec = hn::Vec<GroupBytes>;
using PointBytes = hn::Rebind<std::uint8_t, GroupInts>;  // one byte per point
using PointByteVec = hn::Vec<PointBytes>;

// Two channels' bytes of a group side by side (the interleaving's lookups read both at once).
using PairBytes = hn::Twice<PointBytes>;
using PairByteVec = hn::Vec<PairBytes>;
// Interleaved output by lookups in pairs of channels: where a pair's bytes fit one 128-bit block.
constexpr bool kInterleaveByLookup = kGroup <= 8;

// The byte lookups of a uint8 pass, made once per call from the layout.
struct BytePicks {
    // (Constructors written out here take the target's attributes; implicit ones would not, and
    // could not inline Highway's vector constructors.)
    HWY_INLINE BytePicks() {}
    // [k][c] (planar: [k][0]) picks, per 128-bit block b, from the loads of points 4b, 4b+1 (`low`)
    // or 4b+2, 4b+3 (`high`) into the 32-bit lanes of those points, zeroing the other bytes.
    ByteVec low[4][4], high[4][4];
    // Interleaved output (kInterleaveByLookup): bytes j of part `part` of the group's output
    // bytes (kGroup * channels, two parts of 2 * kGroup), from channels 0-1 (source 0) and 2-3
    // (source 1), each channel's kGroup bytes in order; 0x80 where the source gives none.
    PairByteVec interleave[2][2];
};

HWY_INLINE BytePicks make_byte_picks(const ByteLayout& layout, int taps, std::int64_t input_inner_stride) {
    const GroupBytes d;
    constexpr int kBytes = 4 * kGroup;
    BytePicks picks;
    for (int k = 0; k < taps && k < 4; ++k) {
        for (int c = 0; c < layout.channels; ++c) {
            const int b = layout.interleaved_in ? static_cast<int>(k * input_inner_stride) + c : k;
            HWY_ALIGN std::uint8_t low[kBytes], high[kBytes];
            for (int i = 0; i < kBytes; ++i) low[i] = high[i] = 0x80;
            for (int block = 0; block < kGroup / 4; ++block) {
                for (int point = 0; point < 2; ++point) {
                    low[16 * block + 4 * point] = static_cast<std::uint8_t>(8 * point + b);
                    high[16 * block + 4 * (point + 2)] = static_cast<std::uint8_t>(8 * point + b);
                }
            }
            picks.low[k][c] = hn::Load(d, low);
            picks.high[k][c] = hn::Load(d, high);
        }
    }
    if constexpr (kInterleaveByLookup) {
        constexpr int kPart = 2 * kGroup;
        for (int part = 0; part < 2; ++part) {
            for (int source = 0; source < 2; ++source) {
                HWY_ALIGN std::uint8_t index[kPart];
                for (int j = 0; j < kPart; ++j) {
                    const int byte = kPart * part + j, c = byte % layout.channels, point = byte / layout.channels;
                    const bool here = byte < kGroup * layout.channels && c / 2 == source;
                    index[j] = here ? static_cast<std::uint8_t>((c % 2) * kGroup + point) : std::uint8_t{0x80};
                }
                picks.interleave[part][source] = hn::Load(PairBytes(), index);
            }
        }
    }
    return picks;
}

// 8 bytes from base + offset[i] for the group's points: points 4b, 4b+1 in block b of `low`,
// 4b+2, 4b+3 in block b of `high`.
HWY_INLINE void load_point_bytes(const std::uint8_t* base, const std::int32_t* offset, ByteVec& low, ByteVec& high) {
    const hn::Full128<std::uint8_t> d128;
    hn::Vec<decltype(d128)> low_blocks[kGroup / 4], high_blocks[kGroup / 4];
    for (int b = 0; b < kGroup / 4; ++b) {
        low_blocks[b] = hn::BitCast(d128, load_two_words(base + offset[4 * b], base + offset[4 * b + 1]));
        high_blocks[b] = hn::BitCast(d128, load_two_words(base + offset[4 * b + 2], base + offset[4 * b + 3]));
    }
    low = join_pieces(GroupBytes(), low_blocks);
    high = join_pieces(GroupBytes(), high_blocks);
}

// The bytes that a pair of picks takes from a group's loads, as floats.
HWY_INLINE FloatVec byte_values(ByteVec low, ByteVec high, ByteVec pick_low, ByteVec pick_high) {
    const ByteVec bytes = hn::Or(hn::TableLookupBytesOr0(low, pick_low), hn::TableLookupBytesOr0(high, pick_high));
    return hn::ConvertTo(GroupFloats(), hn::BitCast(GroupInts(), bytes));
}

// store_finite<uint8_t> lane-wise: rounded half to even, then clamped to [0, 255] by the
// saturating narrowing.
HWY_INLINE PointByteVec round_to_bytes(FloatVec sum) {
#if HWY_TARGET == HWY_AVX2
    // Two saturating packs, as the sums lie within [-868, 868] (Highway's DemoteTo also serves
    // values past int16, at two more instructions).
    const __m256i rounded = round_sums(sum).raw;
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1));
    return PointByteVec{_mm_packus_epi16(words, words)};
#else
    return hn::DemoteTo(PointBytes(), round_sums(sum));
#endif
}

// Writes a group's bytes: `channels` channels of `lanes` points, interleaved or planar.
template <int Channels>
HWY_INLINE void store_group_bytes(std::uint8_t* output, const PointByteVec (&bytes)[4], int lanes, const ByteLayout& layout,
                                  const BytePicks& picks, std::int64_t output_channel_stride) {
    const PointBytes d;
    if (layout.interleaved_out) {
        constexpr int kBytes = kGroup * Channels;
        HWY_ALIGN std::uint8_t staged[4 * kGroup];
        std::uint8_t* to = lanes >= kGroup ? output : staged;
        if constexpr (kInterleaveByLookup) {
            const PairBytes dp;
            const PairByteVec source[2] = {combine_halves(dp, bytes[1], bytes[0]), combine_halves(dp, bytes[3], bytes[2])};
            PairByteVec part[2];
            for (int j = 0; j < 2; ++j) {
                part[j] = hn::Or(hn::TableLookupBytesOr0(source[0], picks.interleave[j][0]),
                                 hn::TableLookupBytesOr0(source[1], picks.interleave[j][1]));
            }
            hn::StoreU(part[0], dp, to);
            if constexpr (Channels == 3) hn::StoreU(hn::LowerHalf(part[1]), d, to + 2 * kGroup);
            if constexpr (Channels == 4) hn::StoreU(part[1], dp, to + 2 * kGroup);
        } else {
            (void)picks;
            if constexpr (Channels == 2) hn::StoreInterleaved2(bytes[0], bytes[1], d, to);
            if constexpr (Channels == 3) hn::StoreInterleaved3(bytes[0], bytes[1], bytes[2], d, to);
            if constexpr (Channels == 4) hn::StoreInterleaved4(bytes[0], bytes[1], bytes[2], bytes[3], d, to);
        }
        if (lanes < kGroup && lanes > 0) std::memcpy(output, staged, static_cast<std::size_t>(lanes * Channels));
        static_assert(kBytes <= 4 * kGroup);
    } else {
        for (int c = 0; c < Channels; ++c) store_first(d, bytes[c], output + c * output_channel_stride, lanes);
    }
}

// (The channel count is a template parameter so that the per-channel sums stay in registers.)
template <int Rank, int K, int Channels>
GRIDWARP_STAGE void sample_byte_group(const PlannedGroup<Rank, K>& group, int lanes, const std::int32_t* outer_offset,
                                      const std::uint8_t* input, std::uint8_t* output, const FastOutput<std::uint8_t>& out,
                                      const ByteLayout& layout, const BytePicks& picks, unsigned fill) {
    constexpr int kOuterTaps = PlannedGroup<Rank, K>::kOuterTaps;
    const GroupFloats d;
    FloatVec sum[4] = {hn::Zero(d), hn::Zero(d), hn::Zero(d), hn::Zero(d)};
    for (int t = 0; t < kOuterTaps; ++t) {
        if (layout.interleaved_in) {
            ByteVec low, high;
            load_point_bytes(opaque(input + outer_offset[t]), group.offset, low, high);
            for (int k = 0; k < K; ++k) {
                for (int c = 0; c < Channels; ++c) {
                    const FloatVec v = byte_values(low, high, picks.low[k][c], picks.high[k][c]);
                    sum[c] = K == 1 ? v : hn::Add(sum[c], hn::Mul(group.weight[t][k], v));
                }
            }
        } else {
            for (int c = 0; c < Channels; ++c) {
                ByteVec low, high;
                load_point_bytes(opaque(input + c * out.input_channel_stride + outer_offset[t]), group.offset, low, high);
                for (int k = 0; k < K; ++k) {
                    const FloatVec v = byte_values(low, high, picks.low[k][0], picks.high[k][0]);
                    sum[c] = K == 1 ? v : hn::Add(sum[c], hn::Mul(group.weight[t][k], v));
                }
            }
        }
    }
    const PointBytes db;
    PointByteVec bytes[4] = {hn::Zero(db), hn::Zero(db), hn::Zero(db), hn::Zero(db)};
    for (int c = 0; c < Channels; ++c) {
        bytes[c] = round_to_bytes(sum[c]);  // exact for nearest's copies too
        if (fill != 0) bytes[c] = hn::IfThenElse(mask_of_bits(db, fill), hn::Set(db, out.fill_stored), bytes[c]);
    }
    store_group_bytes<Channels>(output, bytes, lanes, layout, picks, out.output_channel_stride);
}

template <int Rank, int K>
GRIDWARP_STAGE void sample_byte_group(const PlannedGroup<Rank, K>& group, int lanes, const std::int32_t* outer_offset,
                                      const std::uint8_t* input, std::uint8_t* output, const FastOutput<std::uint8_t>& out,
                                      const ByteLayout& layout, const BytePicks& picks, unsigned fill) {
    switch (layout.channels) {
        case 1: return sample_byte_group<Rank, K, 1>(group, lanes, outer_offset, input, output, out, layout, picks, fill);
        case 2: return sample_byte_group<Rank, K, 2>(group, lanes, outer_offset, input, output, out, layout, picks, fill);
        case 3: return sample_byte_group<Rank, K, 3>(group, lanes, outer_offset, input, output, out, layout, picks, fill);
        default: return sample_byte_group<Rank, K, 4>(group, lanes, outer_offset, input, output, out, layout, picks, fill);
    }
}

// ---- Groups whose every point is a fill point.

HWY_INLINE void fill_group(int lanes, float* output, const FastOutput<float>& out, const ByteLayout&, const BytePicks*) {
    const GroupFloats d;
    for (std::int64_t c = 0; c < out.channels; ++c) store_first(d, hn::Set(d, out.fill_stored), output + c * out.output_channel_stride, lanes);
}

HWY_INLINE void fill_group(int lanes, std::int16_t* output, const FastOutput<std::int16_t>& out, const ByteLayout&, const BytePicks*) {
    const hn::Rebind<std::int16_t, GroupInts> d16;
    for (std::int64_t c = 0; c < out.channels; ++c) store_first(d16, hn::Set(d16, out.fill_stored), output + c * out.output_channel_stride, lanes);
}

HWY_INLINE void fill_group(int lanes, std::uint8_t* output, const FastOutput<std::uint8_t>& out, const ByteLayout& layout,
                           const BytePicks* picks) {
    const PointBytes d;
    const PointByteVec value = hn::Set(d, out.fill_stored);
    const PointByteVec bytes[4] = {value, value, value, value};
    switch (layout.channels) {
        case 1: return store_group_bytes<1>(output, bytes, lanes, layout, *picks, out.output_channel_stride);
        case 2: return store_group_bytes<2>(output, bytes, lanes, layout, *picks, out.output_channel_stride);
        case 3: return store_group_bytes<3>(output, bytes, lanes, layout, *picks, out.output_channel_stride);
        default: return store_group_bytes<4>(output, bytes, lanes, layout, *picks, out.output_channel_stride);
    }
}

// The groups of points [from, to) of a row of `count` (from a multiple of kGroup): fill points only.
template <class S>
GRIDWARP_STAGE void fill_groups(S* output, std::int64_t from, std::int64_t to, std::int64_t count, const FastOutput<S>& out,
                                const ByteLayout& layout, const BytePicks* picks) {
    for (std::int64_t p = from; p < to; p += kGroup) {
        fill_group(static_cast<int>(std::min<std::int64_t>(kGroup, count - p)), output + p * out.output_point_stride, out, layout, picks);
    }
}

// ---- The pass.

// Samples the full group of interior points waiting in `waiting` (first point late_at; none if
// negative), reading its offsets and weights from memory (see interior_run).
template <int Rank, int K, class S>
GRIDWARP_STAGE void sample_late_group(const PlannedGroup<Rank, K>& waiting, std::int64_t& late_at, const std::int32_t* outer_offset,
                                      const S* input, S* output, const FastOutput<S>& out, bool stream) {
    if (late_at < 0) return;
    // (The empty asm hides where the group came from, so that its offsets are loaded rather than
    // taken out of the register that stored them.)
    const PlannedGroup<Rank, K>* group = &waiting;
    asm("" : "+r"(group));
    sample_group<Rank, K, S>(*group, kGroup, outer_offset, input, output + late_at * out.output_point_stride, out, 0, stream);
    late_at = -1;
}

// Float32 and int16 pixels: from point p on, the row's full groups of interior points, until a
// group with a point that is not interior (which the caller then plans in general) or the last
// full group. Returns the first point not sampled. A loop of its own with nothing else in it, so
// that its values stay in registers (see docs/performance.md). In 2-D each group is sampled one
// group late, after the next group is planned, so that its offsets are read back from a store
// made a group earlier rather than taken out of the register one by one; in 3-D (where that was
// slower) a group is sampled as soon as it is planned. stream (out.stream, 2-D, and the run starts
// at a 64-byte line): its lines are written with streaming stores, all but a last group that starts
// a line (whose other half is not the run's), so that no ordinary store ever meets a line in flight.
template <bool Normalized, class Interp, int Rank, class S, class C>
GRIDWARP_STAGE std::int64_t interior_run(const CoordinateReader<C>& coordinates, std::int64_t p, std::int64_t count,
                                         const IndexSpan& known_interior, const PlannerAxes<C, Rank>& axes,
                                         const std::int32_t* outer_offset, const S* input, S* output, const FastOutput<S>& out,
                                         std::int32_t* first_taps, const C* next_xyz, bool stream) {
    constexpr int K = Interp::taps;
    const GroupInts di;
    PlannedGroup<Rank, K> groups[2];
    int current = 0;
    std::int64_t late_at = -1;  // the first point of the group waiting in groups[current ^ 1]
    for (; p + kGroup <= count; p += kGroup) {
        prefetch_next_row_coordinates<Rank>(next_xyz, p);
        PlannedGroup<Rank, K>& group = groups[current];
        if (p >= known_interior.begin && p + kGroup <= known_interior.end) {
            plan_group<Normalized, Interp, Rank, C, Planning::Known>(coordinates, p, kGroup, axes, group);
        } else if (known_interior.searched || !plan_group<Normalized, Interp, Rank, C, Planning::Tested>(coordinates, p, kGroup, axes, group)) {
            // (Outside a searched row's interior run some point is not interior: no attempt.)
            break;
        }
        hn::StoreU(hn::Load(di, group.offset), di, first_taps + p);
        if constexpr (Rank == 2) {
            sample_late_group<Rank, K, S>(groups[current ^ 1], late_at, outer_offset, input, output, out, stream);
            late_at = p;
            current ^= 1;
        } else {
            sample_group<Rank, K, S>(group, kGroup, outer_offset, input, output + p, out, 0);
        }
    }
    if constexpr (Rank == 2) {
        const bool last_ends_line = late_at >= 0 && (reinterpret_cast<std::uintptr_t>(output + late_at) & 63) != 0;
        sample_late_group<Rank, K, S>(groups[current ^ 1], late_at, outer_offset, input, output, out, stream && last_ends_line);
    }
    return p;
}

// Whether the pass asks for the next row's output, ready to be written, as it goes (2-D): measured
// worthwhile on AVX-512 processors, where a group's stores outrun the line fills.
constexpr bool kPrefetchOutputForWrite = HWY_TARGET == HWY_AVX3;

// The pass for one row of `count` points: writes every point of every channel as if it were
// interior, fill points with the fill value, lists the other points in edge_points (their number in
// *edges) and every point's first-tap offset in first_taps (clamped stand-ins where not interior),
// from which the input of the rows ahead is prefetched. next_xyz: the next row's stored
// coordinates, asked for as this row goes (nullptr: none to ask for); next_output: where the next
// row's output starts (nullptr: none). uint8: last_safe is the last first-tap offset whose 8-byte
// loads stay inside the input; a group reaching past it reads from last_safe instead and the row is
// redone by the generic stages (Redo).
template <bool Normalized, class Interp, int Rank, class S, class C>
GRIDWARP_STAGE PassResult interior_pass_row(const CoordinateReader<C>& coordinates, std::int64_t count, const PlannerAxes<C, Rank>& axes,
                                            const std::int32_t* outer_offset, std::int64_t last_safe, const InputGeometry& geometry,
                                            const S* input, S* output, const FastOutput<S>& out, const ByteLayout& layout,
                                            const BytePicks* picks, std::int32_t* edge_points, std::int64_t* edges,
                                            std::int32_t* first_taps, const C* next_xyz, const S* next_output, Padding padding) {
    constexpr int K = Interp::taps;
    const GroupInts di;
    const bool zeros = padding == Padding::Zeros;
    const IndexSpan known_interior = coordinates.linear == nullptr ? IndexSpan{} : known_interior_span<Rank, C>(coordinates, count, axes);
    // Zeros padding along an affine row: the groups wholly outside the points within reach are fill
    // points (a rotation's corners), written without planning. planned: the groups that were not.
    IndexSpan planned{0, count, false};
    if (zeros && coordinates.linear != nullptr) {
        const IndexSpan reach = within_reach_span<Rank, C>(coordinates, count, axes);
        if (reach.searched) planned = {reach.begin / kGroup * kGroup, std::min(count, (reach.end + kGroup - 1) / kGroup * kGroup), true};
    }
    std::int64_t edge_count = 0;
    bool redo = false;
    // Float32 and int16 pixels: runs of full interior groups go to interior_run, in 3-D only along
    // affine rows (stored 3-D grids and uint8 pixels were slower with runs). With streaming stores a
    // run starts at a line: a row whose output is not 32-byte aligned streams nothing.
    constexpr bool kRuns = kPlanarPassPixel<S>;
    // Float32 pixels, zeros padding, linear taps and a fill value of +-0: edge points from the
    // stand-in taps (see stand_in_weights). (Another fill value: the outside taps' terms are not
    // +-0, so edge points take the gathers.)
    constexpr bool kStandInPixel = std::is_same_v<S, float> && K == 2;
    const bool stand_in_edges = kStandInPixel && zeros && out.fill_value == 0;
    // Zeros padding and cubic taps along stored rows: groups with no point within reach, found by
    // the reach test alone (affine rows skip them without planning, above).
    const bool out_of_reach_test = K == 4 && zeros && coordinates.linear == nullptr;
    const bool runs = kRuns && (Rank == 2 || coordinates.linear != nullptr);
    const bool stream = out.stream && (reinterpret_cast<std::uintptr_t>(output) & 31) == 0;
    PlannedGroup<Rank, K> group;
    unsigned tap_holds[PlannedGroup<Rank, K>::kOuterTaps][2] = {};  // (stand_in_edges: set by every general plan)
    fill_groups(output, 0, planned.begin, count, out, layout, picks);
    fill_groups(output, planned.end, count, count, out, layout, picks);
    for (std::int64_t p = planned.begin; p < planned.end; p += kGroup) {
        if constexpr (kRuns) {
            if (runs && (!stream || (reinterpret_cast<std::uintptr_t>(output + p) & 63) == 0)) {
                p = interior_run<Normalized, Interp, Rank, S, C>(coordinates, p, count, known_interior, axes, outer_offset, input, output, out,
                                                                 first_taps, next_xyz, stream);
                if (p >= planned.end) break;
            }
        }
        const int lanes = static_cast<int>(std::min<std::int64_t>(kGroup, count - p));
        prefetch_next_row_coordinates<Rank>(next_xyz, p);
        if constexpr (kPrefetchOutputForWrite && Rank == 2) {
            if (next_output != nullptr) prefetch_line_for_write(reinterpret_cast<std::uintptr_t>(next_output + p * out.output_point_stride));
        }
        if (lanes == kGroup && p >= known_interior.begin && p + kGroup <= known_interior.end) {
            plan_group<Normalized, Interp, Rank, C, Planning::Known>(coordinates, p, lanes, axes, group);
        } else if (!(out_of_reach_test && plan_out_of_reach_group<Normalized, Interp, Rank, C>(coordinates, p, lanes, axes, group))) {
            if constexpr (kStandInPixel) {
                if (stand_in_edges) {
                    plan_group<Normalized, Interp, Rank, C, Planning::General, true>(coordinates, p, lanes, axes, group, tap_holds);
                } else {
                    plan_group<Normalized, Interp, Rank, C, Planning::General>(coordinates, p, lanes, axes, group);
                }
            } else {
                plan_group<Normalized, Interp, Rank, C, Planning::General>(coordinates, p, lanes, axes, group);
            }
        }
        const unsigned active = active_bits(lanes);
        const unsigned fill = zeros ? group.fill_zeros : group.fill_nonfinite;
        const IntVec offset = hn::Load(di, group.offset);
        store_first(di, offset, first_taps + p, lanes);
        S* const o = output + p * out.output_point_stride;
        if (fill == active) {
            // Only fill points: no input to read.
            fill_group(lanes, o, out, layout, picks);
            continue;
        }
        unsigned edge = ~group.interior & ~fill & active;
        if constexpr (std::is_same_v<S, std::int16_t>) {
            // Edge points are left to the generic stages.
            sample_group<Rank, K, S>(group, lanes, outer_offset, input, o, out, fill);
        } else if constexpr (std::is_same_v<S, float>) {
            if (stand_in_edges && edge != 0) {
                if constexpr (kStandInPixel) {
                    // (An edge point is within reach and finite: this finishes it.)
                    sample_group<Rank, K, S, true>(group, lanes, outer_offset, input, o, out, fill, false, tap_holds);
                    edge = 0;
                }
            } else {
                sample_group<Rank, K, S>(group, lanes, outer_offset, input, o, out, fill);
                // Points across an edge whose taps map by one clamp or reflection (under zeros
                // padding: whose taps are inside or read the fill value); the rest are finished elsewhere.
                if (edge != 0) {
                    edge &= ~sample_near_group_of_padding<Normalized, Interp, Rank, C>(padding, coordinates, p, lanes, edge, axes, geometry,
                                                                                       input, o, out);
                }
            }
        } else {
            (void)geometry;
            const IntVec limit = hn::Set(di, static_cast<std::int32_t>(std::min<std::int64_t>(last_safe, INT32_MAX)));
            if (!hn::AllFalse(di, offset > limit)) {
                redo = true;
                hn::Store(hn::Min(offset, limit), di, group.offset);
            }
            sample_byte_group<Rank, K>(group, lanes, outer_offset, input, o, out, layout, *picks, fill);
        }
        for (; edge != 0; edge &= edge - 1) edge_points[edge_count++] = static_cast<std::int32_t>(p + __builtin_ctz(edge));
    }
    if (planned.searched) fill_in_first_taps(first_taps, count, planned);
    *edges = edge_count;
    if (redo) return PassResult::Redo;
    return edge_count == 0 ? PassResult::Complete : PassResult::EdgesLeft;
}

// The pass for a run of rows of one tile (rows.rows rows of `count` points), with the input and
// (stored rows) the next row's coordinates prefetched as it goes. Stops after the first row that is
// not Complete, so that the caller can finish that row's edge points (the first taps and edge
// points are those of the last row). Looping over the rows here rather than calling the pass once
// per row matters: the per-row call and set-up are a large share of a short row.
template <bool Normalized, class Interp, int Rank, class S, class C>
PassStop interior_pass(const PassRows<C>& rows, std::int64_t count, const InputGeometry& geometry, const S* input, S* output,
                       const FastOutput<S>& out, std::int64_t input_span, const ByteLayout& layout, std::int32_t* edge_points,
                       std::int32_t* first_taps, RowPrefetch& prefetch, Padding padding) {
    constexpr int K = Interp::taps;
    constexpr int kOuterTaps = PlannedGroup<Rank, K>::kOuterTaps;
    const PlannerAxes<C, Rank> axes = planner_axes<Interp, C, Rank>(geometry);
    std::int32_t outer_offset[kOuterTaps];
    outer_tap_offsets<K, Rank>(geometry, outer_offset);
    std::int64_t last_safe = 0;
    BytePicks picks;
    if constexpr (std::is_same_v<S, std::uint8_t>) {
        last_safe = last_safe_first_tap(input_span, outer_offset[kOuterTaps - 1], layout, out);
        // (An input too small for the loads: the caller samples the first row, and then the next,
        // by the generic stages.)
        if (last_safe < 0) return PassStop{1, PassResult::Redo, 0};
        picks = make_byte_picks(layout, K, geometry.stride[Rank - 1]);
    }
    (void)input_span;
    PassStop stop;
    for (std::int64_t r = 0; r < rows.rows; ++r) {
        std::int64_t edges = 0;
        PassResult result;
        const S* next_output = r + 1 < rows.rows ? output + rows.output_offset[r + 1] : nullptr;
        // Two copies of the row's loop, one per kind of coordinates, so that each knows its kind
        // (a reader whose `linear` is a literal nullptr): no per-group test of the kind, and no
        // interior-run bounds to check for stored coordinates.
        if (rows.linear != nullptr) {
            CoordinateReader<C> coordinates;
            coordinates.linear = &rows.linear[r];
            coordinates.first_index = rows.first_index;
            result = interior_pass_row<Normalized, Interp, Rank, S, C>(coordinates, count, axes, outer_offset, last_safe, geometry, input,
                                                                       output + rows.output_offset[r], out, layout, &picks, edge_points,
                                                                       &edges, first_taps, nullptr, next_output, padding);
        } else {
            const C* next = nullptr;
            if constexpr (std::is_same_v<C, float>) next = r + 1 < rows.rows ? rows.xyz[r + 1] : rows.next_xyz;
            CoordinateReader<C> coordinates;
            coordinates.xyz = rows.xyz[r];
            result = interior_pass_row<Normalized, Interp, Rank, S, C>(coordinates, count, axes, outer_offset, last_safe, geometry, input,
                                                                       output + rows.output_offset[r], out, layout, &picks, edge_points,
                                                                       &edges, first_taps, next, next_output, padding);
        }
        prefetch_rows_ahead(prefetch, first_taps, count, input, Rank);
        stop.rows = r + 1;
        if (result != PassResult::Complete) {
            stop.result = result;
            stop.edges = edges;
            break;
        }
    }
    hwy::FlushStream();  // streamed lines reach memory before anyone else writes or reads them
    return stop;
}

// The pass's instantiation for this call, or nullptr where it does not serve this input and output.
template <class S, class C>
InteriorPass<S, C> select_pass(Interpolation mode, const InputGeometry& geometry, const FastOutput<S>& out, ByteLayout& layout) {
    return visit_interpolation(mode, [&](auto interp) -> InteriorPass<S, C> {
        using I = typename decltype(interp)::type;
        if (!interior_pass_applies<S, I>(geometry, out, &layout)) return nullptr;
        const bool normalized = geometry.space != CoordinateSpace::Pixel;
        if (geometry.rank == 2) return normalized ? &interior_pass<true, I, 2, S, C> : &interior_pass<false, I, 2, S, C>;
        return normalized ? &interior_pass<true, I, 3, S, C> : &interior_pass<false, I, 3, S, C>;
    });
}

#else

template <class S, class C>
InteriorPass<S, C> select_pass(Interpolation, const InputGeometry&, const FastOutput<S>&, ByteLayout&) {
    return nullptr;
}

#endif  // GRIDWARP_PASS_TARGET

#undef GRIDWARP_PASS_TARGET
#undef GRIDWARP_PASS_X86

}  // namespace HWY_NAMESPACE
}  // namespace gridwarp::detail
HWY_AFTER_NAMESPACE();

#endif  // GRIDWARP_INTERIOR_PASS_INL_H_ per-target guard

// Once, after every target: the choice among the targets' passes.
#if HWY_ONCE && !defined(GRIDWARP_INTERIOR_PASS_DISPATCH_H_)
#define GRIDWARP_INTERIOR_PASS_DISPATCH_H_

#include "simd_targets.hpp"

namespace gridwarp::detail {

template <class S, class C>
InteriorPass<S, C> select_interior_pass(Interpolation mode, const InputGeometry& geometry, const FastOutput<S>& out, ByteLayout& layout) {
    using Select = InteriorPass<S, C> (*)(Interpolation, const InputGeometry&, const FastOutput<S>&, ByteLayout&);
    const TargetFunction<Select> table[] = {
#if HWY_TARGETS & HWY_AVX3
        {HWY_AVX3, &N_AVX3::select_pass<S, C>},
#endif
#if HWY_TARGETS & HWY_AVX2
        {HWY_AVX2, &N_AVX2::select_pass<S, C>},
#endif
#if HWY_TARGETS & HWY_NEON
        {HWY_NEON, &N_NEON::select_pass<S, C>},
#endif
        {0, nullptr},
    };
    const Select select = best_allowed_function(table);
    return select == nullptr ? nullptr : select(mode, geometry, out, layout);
}

}  // namespace gridwarp::detail

// The pass for pixel type S and coordinate type C, in the translation unit of that pair.
#define GRIDWARP_INSTANTIATE_INTERIOR_PASS(S, C)                                                                   \
    namespace gridwarp::detail {                                                                                   \
    template InteriorPass<S, C> select_interior_pass<S, C>(Interpolation, const InputGeometry&, const FastOutput<S>&, \
                                                           ByteLayout&);                                           \
    }

#endif  // HWY_ONCE
