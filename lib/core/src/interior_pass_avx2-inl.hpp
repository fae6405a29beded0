// The AVX2 interior pass of the fast path: float32, int16 and uint8 pixels, float32 and float64
// coordinates, ranks 2 and 3, for processors with AVX2 but without the AVX-512 pass (Haswell to
// Alder Lake, Zen 1-3), chosen by fast_path.cpp through select_avx2_pass (fast_path.hpp, which
// also holds the pieces it shares with the AVX-512 pass).
//
// Why by hand: the generic stages (plan a block of 256 points into arrays, then gather) spend most
// of their time on the arrays the two stages pass each other and on GCC's one-load-one-insert
// emulation of every gather (docs/performance.md, "Interior passes"). This pass does both
// stages for 8 points at a time in registers, as the AVX-512 pass does for 16, and reads a point's
// taps along x with one load per row.
//
// It computes exactly what classify_points and dense_gather_body compute, in the same order (see
// interior_pass_avx512-inl.hpp: u as pixel_position computes it, the clamped stand-in, the first tap by
// Interp::interior_first, the weights by Interp::weights itself, each tap weight
// (1 * w_outer) * ... * w_inner, the sum over taps in tap order from +0, summed again under the
// zero-weight rule where a float32 sum is NaN), writes every point of a group as if it were
// interior, then gives fill points the fill value and samples the points across an edge whose taps
// map by one clamp or reflection (under zeros padding with linear taps and a fill of +-0: from the
// taps the group has already read, see stand_in_weights_avx2); the few left are listed for the
// generic edge stage. No fused multiply-add can form:
// target("avx2") does not enable FMA, and lib/core builds with -ffp-contract=off.

#pragma once

#include "fast_path.hpp"

#if defined(GRIDWARP_AVX2_DISPATCH)

namespace gridwarp::detail {
namespace {

// 8 floats and 4 doubles with the lane-wise IEEE operations that the interpolation policies'
// weights() use (GCC vector arithmetic: single ymm instructions once inlined).
struct F32x8 {
    __m256 v;
    F32x8() = default;
    GRIDWARP_ALWAYS_INLINE F32x8(float x) : v(__m256{} + x) {}  // NOLINT: the policies write C(1)
    GRIDWARP_ALWAYS_INLINE explicit F32x8(const __m256& x) : v(x) {}
};
GRIDWARP_ALWAYS_INLINE F32x8 operator+(const F32x8& a, const F32x8& b) { return F32x8(a.v + b.v); }
GRIDWARP_ALWAYS_INLINE F32x8 operator-(const F32x8& a, const F32x8& b) { return F32x8(a.v - b.v); }
GRIDWARP_ALWAYS_INLINE F32x8 operator*(const F32x8& a, const F32x8& b) { return F32x8(a.v * b.v); }

struct F64x4 {
    __m256d v;
    F64x4() = default;
    GRIDWARP_ALWAYS_INLINE F64x4(double x) : v(__m256d{} + x) {}  // NOLINT: the policies write C(1)
    GRIDWARP_ALWAYS_INLINE explicit F64x4(const __m256d& x) : v(x) {}
};
GRIDWARP_ALWAYS_INLINE F64x4 operator+(const F64x4& a, const F64x4& b) { return F64x4(a.v + b.v); }
GRIDWARP_ALWAYS_INLINE F64x4 operator-(const F64x4& a, const F64x4& b) { return F64x4(a.v - b.v); }
GRIDWARP_ALWAYS_INLINE F64x4 operator*(const F64x4& a, const F64x4& b) { return F64x4(a.v * b.v); }

// The lane-wise operations of the planner: 8 float or 4 double lanes. Integers (first taps,
// offsets) are 32-bit lanes; comparisons give one bit per lane.
template <class C> struct Avx2Lanes;

template <> struct Avx2Lanes<float> {
    static constexpr int kCount = 8;
    using Vec = __m256;
    using Int = __m256i;
    using Policy = F32x8;
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec set1(float x) { return _mm256_set1_ps(x); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
    // max(a, lo) gives lo where a is NaN (the second operand), as the clamped stand-in needs.
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec min(Vec a, Vec b) { return _mm256_min_ps(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned lt(Vec a, Vec b) {
        return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ)));
    }
    // lo <= a < hi, one bit per lane (false for NaN).
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned within(Vec a, Vec lo, Vec hi) {
        return static_cast<unsigned>(_mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(a, lo, _CMP_GE_OQ), _mm256_cmp_ps(a, hi, _CMP_LT_OQ))));
    }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned finite(Vec a) {
        const Vec magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a);
        return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(magnitude, _mm256_set1_ps(std::numeric_limits<float>::max()), _CMP_LE_OQ)));
    }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int truncate(Vec a) { return _mm256_cvttps_epi32(a); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec truncate_value(Vec a) { return _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec floor(Vec a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec equal(Vec a, Vec b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec select(Vec mask, Vec if_set, Vec if_clear) { return _mm256_blendv_ps(if_clear, if_set, mask); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned bits(Vec mask) { return static_cast<unsigned>(_mm256_movemask_ps(mask)); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec from_int(Int a) { return _mm256_cvtepi32_ps(a); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int set1_int(std::int32_t x) { return _mm256_set1_epi32(x); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int add_int(Int a, Int b) { return _mm256_add_epi32(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int sub_int(Int a, Int b) { return _mm256_sub_epi32(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int mul_int(Int a, Int b) { return _mm256_mullo_epi32(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec abs(Vec a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned le(Vec a, Vec b) {
        return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_LE_OQ)));
    }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned gt(Vec a, Vec b) {
        return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ)));
    }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int mask_to_int(unsigned m) {
        const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        return _mm256_srli_epi32(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(m)), bit), bit), 31);
    }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static __m256i widen_int(Int a) { return a; }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int narrow_int(__m256i a) { return a; }
};

template <> struct Avx2Lanes<double> {
    static constexpr int kCount = 4;
    using Vec = __m256d;
    using Int = __m128i;
    using Policy = F64x4;
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec set1(double x) { return _mm256_set1_pd(x); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec add(Vec a, Vec b) { return _mm256_add_pd(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec sub(Vec a, Vec b) { return _mm256_sub_pd(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec mul(Vec a, Vec b) { return _mm256_mul_pd(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec max(Vec a, Vec b) { return _mm256_max_pd(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec min(Vec a, Vec b) { return _mm256_min_pd(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned lt(Vec a, Vec b) {
        return static_cast<unsigned>(_mm256_movemask_pd(_mm256_cmp_pd(a, b, _CMP_LT_OQ)));
    }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned within(Vec a, Vec lo, Vec hi) {
        return static_cast<unsigned>(_mm256_movemask_pd(_mm256_and_pd(_mm256_cmp_pd(a, lo, _CMP_GE_OQ), _mm256_cmp_pd(a, hi, _CMP_LT_OQ))));
    }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned finite(Vec a) {
        const Vec magnitude = _mm256_andnot_pd(_mm256_set1_pd(-0.0), a);
        return static_cast<unsigned>(_mm256_movemask_pd(_mm256_cmp_pd(magnitude, _mm256_set1_pd(std::numeric_limits<double>::max()), _CMP_LE_OQ)));
    }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int truncate(Vec a) { return _mm256_cvttpd_epi32(a); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec truncate_value(Vec a) { return _mm256_round_pd(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec floor(Vec a) { return _mm256_round_pd(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec equal(Vec a, Vec b) { return _mm256_cmp_pd(a, b, _CMP_EQ_OQ); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec select(Vec mask, Vec if_set, Vec if_clear) { return _mm256_blendv_pd(if_clear, if_set, mask); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned bits(Vec mask) { return static_cast<unsigned>(_mm256_movemask_pd(mask)); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec from_int(Int a) { return _mm256_cvtepi32_pd(a); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int set1_int(std::int32_t x) { return _mm_set1_epi32(x); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int add_int(Int a, Int b) { return _mm_add_epi32(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int sub_int(Int a, Int b) { return _mm_sub_epi32(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int mul_int(Int a, Int b) { return _mm_mullo_epi32(a, b); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Vec abs(Vec a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned le(Vec a, Vec b) {
        return static_cast<unsigned>(_mm256_movemask_pd(_mm256_cmp_pd(a, b, _CMP_LE_OQ)));
    }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static unsigned gt(Vec a, Vec b) {
        return static_cast<unsigned>(_mm256_movemask_pd(_mm256_cmp_pd(a, b, _CMP_GT_OQ)));
    }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int mask_to_int(unsigned m) {
        const __m128i bit = _mm_setr_epi32(1, 2, 4, 8);
        return _mm_srli_epi32(_mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32(static_cast<int>(m)), bit), bit), 31);
    }
    // (Lanes 4-7 of a widened integer are zero and never looked at.)
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static __m256i widen_int(Int a) { return _mm256_zextsi128_si256(a); }
    GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE static Int narrow_int(__m256i a) { return _mm256_castsi256_si128(a); }
};

// All ones in the 32-bit words 0 .. words-1 of a vector (words clamped to 0..8): the mask of a
// masked load or store of a partial group.
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE __m256i first_words(int words) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(words), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// One bit per float lane as a vector mask (lane i all ones where bit i is set).
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE __m256 lane_mask(unsigned bits) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), bit), bit));
}

// Coordinates k = 0..Rank-1 of up to L points stored point after point (x, y[, z], x, ...):
// coordinate[k] lane i = xyz[i * Rank + k]; lanes past `lanes` read as 0. Values are moved as
// 32-bit words (a double is two), so one word permutation serves both coordinate types.
template <class C, int Rank>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void deinterleave_avx2(const C* xyz, int lanes, typename Avx2Lanes<C>::Vec* coordinate) {
    constexpr int N = Avx2Lanes<C>::kCount;
    constexpr int W = static_cast<int>(sizeof(C) / 4);  // words per value
    if constexpr (std::is_same_v<C, float> && Rank == 2) {
        if (lanes == 8) {
            // Two in-lane shuffles give x0 x1 x4 x5 | x2 x3 x6 x7 (and y likewise), one 64-bit
            // permute the order: no index or blend vectors to keep in registers.
            const __m256 low = _mm256_loadu_ps(xyz), high = _mm256_loadu_ps(xyz + 8);
            for (int k = 0; k < 2; ++k) {
                const __m256 paired = k == 0 ? _mm256_shuffle_ps(low, high, _MM_SHUFFLE(2, 0, 2, 0))
                                             : _mm256_shuffle_ps(low, high, _MM_SHUFFLE(3, 1, 3, 1));
                coordinate[k] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(paired), _MM_SHUFFLE(3, 1, 2, 0)));
            }
            return;
        }
    }
    __m256 part[Rank];
    const int values = lanes * Rank;
    for (int j = 0; j < Rank; ++j) {
        const float* words = reinterpret_cast<const float*>(xyz + N * j);
        const int count = std::clamp(values - N * j, 0, N);
        part[j] = count == N ? _mm256_loadu_ps(words) : _mm256_maskload_ps(words, first_words(count * W));
    }
    for (int k = 0; k < Rank; ++k) {
        __m256 value = _mm256_setzero_ps();
        for (int j = 0; j < Rank; ++j) {
            // Value i * Rank + k lies in part (i * Rank + k) / N, at (i * Rank + k) % N.
            alignas(32) std::int32_t index[8] = {};
            alignas(32) std::int32_t take[8] = {};
            bool any = false;
            for (int i = 0; i < N; ++i) {
                const int e = i * Rank + k;
                if (e / N != j) continue;
                any = true;
                for (int w = 0; w < W; ++w) {
                    index[i * W + w] = (e % N) * W + w;
                    take[i * W + w] = -1;
                }
            }
            if (!any) continue;
            const __m256 picked = _mm256_permutevar8x32_ps(part[j], _mm256_load_si256(reinterpret_cast<const __m256i*>(index)));
            value = _mm256_blendv_ps(value, picked, _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(take))));
        }
        if constexpr (std::is_same_v<C, float>) {
            coordinate[k] = value;
        } else {
            coordinate[k] = _mm256_castps_pd(value);
        }
    }
}

// LinearRow's coordinate k of 4 points in double, from their base coordinates (the operations of
// AffinePositions::row: slope * base + offset).
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE __m256d linear_coordinate_x4(const LinearRow& row, const __m256d& base, int k) {
    return _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(row.slope[k]), base), _mm256_set1_pd(row.offset[k]));
}

// The base coordinates of up to 4 points from innermost index `index` on (never read past the
// row's end; lanes past `lanes` read 0).
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE __m256d linear_base_x4(const LinearRow& row, std::int64_t index, int lanes) {
    if (lanes >= 4) return _mm256_loadu_pd(row.base + index);
    return _mm256_maskload_pd(row.base + index, first_words(2 * std::max(lanes, 0)));
}

// Coordinates k = 0..Rank-1 of the points p .. p + lanes - 1.
template <class C, int Rank>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void read_coordinates_avx2(const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                                       typename Avx2Lanes<C>::Vec* coordinate) {
    if (reader.linear == nullptr) {
        deinterleave_avx2<C, Rank>(reader.xyz + p * Rank, lanes, coordinate);
        return;
    }
    const LinearRow& row = *reader.linear;
    const std::int64_t index = reader.first_index + p;
    if constexpr (std::is_same_v<C, double>) {
        const __m256d base = linear_base_x4(row, index, lanes);
        for (int k = 0; k < Rank; ++k) coordinate[k] = linear_coordinate_x4(row, base, k);
    } else {
        // float32 coordinates: computed in double and rounded to float, as AffinePositions::row does.
        const __m256d low = linear_base_x4(row, index, lanes), high = linear_base_x4(row, index + 4, lanes - 4);
        for (int k = 0; k < Rank; ++k) {
            coordinate[k] = _mm256_set_m128(_mm256_cvtpd_ps(linear_coordinate_x4(row, high, k)),
                                            _mm256_cvtpd_ps(linear_coordinate_x4(row, low, k)));
        }
    }
}

// pixel_position<Kind> lane-wise: the same operations, with / 2 as * 0.5 (the same IEEE result).
template <PositionKind Kind, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE typename Avx2Lanes<C>::Vec pixel_position_avx2(typename Avx2Lanes<C>::Vec g, C extent) {
    using L = Avx2Lanes<C>;
    const auto one = L::set1(C(1)), half = L::set1(C(0.5)), d = L::set1(extent);
    if constexpr (Kind == PositionKind::Pixel) {
        return g;
    } else if constexpr (Kind == PositionKind::NormalizedCorners) {
        return L::mul(L::mul(L::add(g, one), half), L::sub(d, one));
    } else {
        return L::mul(L::sub(L::mul(L::add(g, one), d), one), half);
    }
}

// Interp::interior_first lane-wise, for safe (finite, inside [lo, hi)) positions, as a value of C
// (an integer, exact), from which the weights are computed. The double planner sums its offsets
// from these values and converts once per group instead of twice per axis: a conversion between 4
// doubles and 4 int32 changes the vector's width (two micro-ops), a rounding is one.
template <class Interp, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE typename Avx2Lanes<C>::Vec interior_first_value_avx2(typename Avx2Lanes<C>::Vec safe) {
    using L = Avx2Lanes<C>;
    if constexpr (Interp::taps == 1) {
        // (u + 1.5 * 2^p) - 1.5 * 2^p rounds to an integer (ties to even).
        const auto round = L::set1(C(1.5) * C(std::int64_t{1} << (std::numeric_limits<C>::digits - 1)));
        return L::sub(L::add(safe, round), round);
    } else if constexpr (Interp::taps == 2) {
        return L::truncate_value(safe);
    } else {
        static_assert(Interp::taps == 4);
        return L::sub(L::truncate_value(safe), L::set1(C(1)));
    }
}

// The same as an int32.
template <class Interp, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE typename Avx2Lanes<C>::Int interior_first_avx2(typename Avx2Lanes<C>::Vec safe) {
    return Avx2Lanes<C>::truncate(interior_first_value_avx2<Interp, C>(safe));
}

// u clamped into [lo, below_hi[a]] along axis a, where every tap of the first tap taken from it is
// inside: the stand-in of a point that is not interior (NaN -> lo).
template <int Rank, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE typename Avx2Lanes<C>::Vec clamped_stand_in(typename Avx2Lanes<C>::Vec u,
                                                                                          const PlannerAxes<C, Rank>& axes, int a) {
    using L = Avx2Lanes<C>;
    return L::min(L::max(u, L::set1(axes.lo)), L::set1(axes.below_hi[a]));
}

// Adds axis a's term to the first-tap offset of L points (first: their first taps along a, as
// values of C). double: the offset is summed in double and converted once (exact: every term is an
// integer below 2^31), not converted per axis (two micro-ops each). No multiply for the innermost
// axis's unit stride (every float32 input here); the outer axes' strides are multiplied without a
// test, which is cheaper than a branch per axis and group.
template <int Rank, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void add_offset_term(const PlannerAxes<C, Rank>& axes, int a, typename Avx2Lanes<C>::Vec first,
                                                                 typename Avx2Lanes<C>::Vec& offset_value, typename Avx2Lanes<C>::Int& offset) {
    using L = Avx2Lanes<C>;
    const bool unit_stride = a == Rank - 1 && axes.stride[a] == 1;
    if constexpr (std::is_same_v<C, double>) {
        const auto term = unit_stride ? first : L::mul(first, L::set1(axes.stride_value[a]));
        offset_value = a == 0 ? term : L::add(offset_value, term);
    } else {
        const auto first_int = L::truncate(first);
        offset = L::add_int(offset, unit_stride ? first_int : L::mul_int(first_int, L::set1_int(axes.stride[a])));
    }
}

// Points near an edge under zeros padding and linear taps (float32 pixels), read through the
// clamped stand-in taps the group reads anyway. On every axis a point within reach of the input
// has its first tap f = floor(u) in [-1, d-1], and its stand-in first tap s = clamp(f, 0, d-2) (as
// the planner takes it) is f + 1 where f = -1, f - 1 where f = d-1, else f: so the stand-in pair
// holds each of the point's taps that is inside, in order. Weighting each stand-in tap by the
// weight of the tap it holds (Interp::weights from u and f, the products in tap order) and letting
// the stand-in taps that hold none add +0 gives the reference's sum where the fill value is +-0:
// the reference's terms for taps outside are weight (>= 0) x fill = +-0, and adding +-0 to a sum
// that starts at +0 (and so is never -0) leaves it unchanged. For interior points (f = s) these
// are the usual weights, and every tap holds one of the point's taps.
//
// The stand-in pair's weights along one axis for L points (u: positions, stand_in: s as a value of
// C), and per stand-in tap one bit per lane where it holds one of the point's taps.
template <class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void stand_in_weights_avx2(typename Avx2Lanes<C>::Vec u, typename Avx2Lanes<C>::Vec stand_in,
                                                                       typename Avx2Lanes<C>::Policy* weight, unsigned* holds) {
    using L = Avx2Lanes<C>;
    using P = typename L::Policy;
    const auto first = L::floor(u);
    P w[2];
    LinearTaps::weights(P(u), P(first), w);
    const auto shift = L::sub(stand_in, first);
    const auto tap1_at_0 = L::equal(shift, L::set1(C(1)));   // f = -1: stand-in tap 0 holds tap 1, tap 1 holds none
    const auto tap0_at_1 = L::equal(shift, L::set1(C(-1)));  // f = d-1: stand-in tap 1 holds tap 0, tap 0 holds none
    weight[0] = P(L::select(tap1_at_0, w[1].v, w[0].v));
    weight[1] = P(L::select(tap0_at_1, w[0].v, w[1].v));
    holds[0] = ~L::bits(tap0_at_1);
    holds[1] = ~L::bits(tap1_at_0);
}

// What the planner gives the sampler for 8 points: each point's first-tap offset, which points
// are interior or fill points, and the tap weights in float, in tap order (outer taps z, y, then
// the K taps along x).
template <int Rank, int K>
struct Avx2Group {
    static constexpr int kOuterTaps = Rank == 2 ? K : K * K;
    alignas(32) std::int32_t offset[8];
    unsigned interior = 0;
    unsigned fill_zeros = 0;      // zeros padding's fill points: every tap of some axis outside, or not finite
    unsigned fill_nonfinite = 0;  // every padding's fill points: some coordinate not finite
    __m256 weight[kOuterTaps][K];
};

// What a planner knows of its points. Known: the caller knows every point is interior
// (known_interior_span), so u itself is safe and no test or fill rule is needed. Tested: the
// points are planned only if every one is interior (a full group), else nothing is planned.
// General: any points, with the tests, the fill rules and the clamped stand-in.
enum class Planning { Known, Tested, General };

// Plans L = Avx2Lanes<C>::kCount points, as plan_lanes in interior_pass_avx512-inl.hpp plans 16:
// offsets, interior and fill bits, and tap weights in C. False (Tested only): not every point is
// interior, and nothing was planned.
// StandIn (General, linear only): the weights are those of the stand-in taps and axis_holds[a][k]
// says which lanes' stand-in tap k along axis a holds one of their taps (see stand_in_weights_avx2).
template <PositionKind Kind, class Interp, int Rank, class C, Planning Plan, bool StandIn = false>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE bool plan_lanes_avx2(const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                                 const PlannerAxes<C, Rank>& axes, typename Avx2Lanes<C>::Int& offset,
                                                                 unsigned& interior, unsigned& fill_zeros, unsigned& fill_nonfinite,
                                                                 typename Avx2Lanes<C>::Vec (*tap_weight)[Interp::taps],
                                                                 unsigned (*axis_holds)[2] = nullptr) {
    static_assert(!StandIn || (std::is_same_v<Interp, LinearTaps> && Plan == Planning::General));
    using L = Avx2Lanes<C>;
    using P = typename L::Policy;
    constexpr int K = Interp::taps;
    const unsigned active = lanes >= L::kCount ? (1u << L::kCount) - 1u : (1u << std::max(lanes, 0)) - 1u;
    typename L::Vec coordinate[Rank];
    read_coordinates_avx2<C, Rank>(reader, p, lanes, coordinate);
    typename L::Vec u[Rank];
    for (int a = 0; a < Rank; ++a) u[a] = pixel_position_avx2<Kind, C>(coordinate[Rank - 1 - a], axes.extent[a]);
    unsigned inside = active, within_reach = active, finite = active;
    if constexpr (Plan != Planning::Known) {
        for (int a = 0; a < Rank; ++a) inside &= L::within(u[a], L::set1(axes.lo), L::set1(axes.hi[a]));
        if constexpr (Plan == Planning::Tested) {
            if (inside != active) return false;
        } else if (inside != active) {
            // An interior lane is finite and within reach, so the fill tests wait for a lane that is not.
            for (int a = 0; a < Rank; ++a) {
                finite &= L::finite(coordinate[Rank - 1 - a]);
                within_reach &= L::within(u[a], L::set1(axes.outside_below), L::set1(axes.outside_from[a]));
            }
        }
    }
    const bool all_interior = Plan == Planning::Known || (lanes >= L::kCount && inside == active);
    offset = L::set1_int(0);
    typename L::Vec offset_value = L::set1(C(0));
    P weight[Rank][K] = {};
    for (int a = 0; a < Rank; ++a) {
        auto safe = u[a];
        // (Lanes past `lanes` take the stand-in too: their taps are read.)
        if (!all_interior) safe = clamped_stand_in<Rank, C>(u[a], axes, a);
        const auto first = interior_first_value_avx2<Interp, C>(safe);
        add_offset_term<Rank, C>(axes, a, first, offset_value, offset);
        if constexpr (StandIn) {
            stand_in_weights_avx2<C>(u[a], first, weight[a], axis_holds[a]);
        } else if constexpr (K > 1) {
            Interp::weights(P(safe), P(first), weight[a]);
        }
    }
    if constexpr (std::is_same_v<C, double>) offset = L::truncate(offset_value);
    interior = inside;
    fill_zeros = ~within_reach & active;
    fill_nonfinite = ~finite & active;
    if constexpr (K > 1) tap_weights_of<Rank, K>(weight, tap_weight);
    return true;
}

// Plans 8 points into `group` (a float or two double halves); false as plan_lanes_avx2. StandIn:
// also tap_holds[o][k], the lanes whose stand-in tap k of outer tap o holds one of their taps.
template <PositionKind Kind, class Interp, int Rank, class C, Planning Plan, bool StandIn = false>
GRIDWARP_TARGET_AVX2 GRIDWARP_STAGE bool plan_group_avx2(const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                                 const PlannerAxes<C, Rank>& axes, Avx2Group<Rank, Interp::taps>& group,
                                                                 unsigned (*tap_holds)[2] = nullptr) {
    constexpr int K = Interp::taps;
    constexpr int kOuterTaps = Avx2Group<Rank, K>::kOuterTaps;
    unsigned holds[Rank][2] = {};
    if constexpr (std::is_same_v<C, float>) {
        __m256i offset;
        if (!plan_lanes_avx2<Kind, Interp, Rank, float, Plan, StandIn>(reader, p, lanes, axes, offset, group.interior, group.fill_zeros,
                                                                      group.fill_nonfinite, group.weight, holds)) {
            return false;
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(group.offset), offset);
    } else {
        // Two halves of 4 points; tap weights narrowed to float once computed in double.
        __m128i offset[2];
        unsigned interior[2], fill_zeros[2], fill_nonfinite[2];
        __m256d weight[2][kOuterTaps][K];
        unsigned half_holds[2][Rank][2] = {};
        for (int h = 0; h < 2; ++h) {
            if (!plan_lanes_avx2<Kind, Interp, Rank, double, Plan, StandIn>(reader, p + 4 * h, std::clamp(lanes - 4 * h, 0, 4), axes,
                                                                            offset[h], interior[h], fill_zeros[h], fill_nonfinite[h],
                                                                            weight[h], half_holds[h])) {
                return false;
            }
        }
        if constexpr (StandIn) {
            for (int a = 0; a < Rank; ++a) {
                for (int k = 0; k < 2; ++k) holds[a][k] = (half_holds[0][a][k] & 0xFu) | ((half_holds[1][a][k] & 0xFu) << 4);
            }
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(group.offset), _mm256_set_m128i(offset[1], offset[0]));
        group.interior = interior[0] | (interior[1] << 4);
        group.fill_zeros = fill_zeros[0] | (fill_zeros[1] << 4);
        group.fill_nonfinite = fill_nonfinite[0] | (fill_nonfinite[1] << 4);
        if constexpr (K > 1) {
            for (int o = 0; o < kOuterTaps; ++o) {
                for (int k = 0; k < K; ++k) {
                    group.weight[o][k] = _mm256_set_m128(_mm256_cvtpd_ps(weight[1][o][k]), _mm256_cvtpd_ps(weight[0][o][k]));
                }
            }
        }
    }
    if constexpr (StandIn) {
        for (int o = 0; o < kOuterTaps; ++o) {
            const unsigned outer = Rank == 2 ? holds[0][o] : holds[0][o / 2] & holds[1][o % 2];
            for (int k = 0; k < 2; ++k) tap_holds[o][k] = outer & holds[Rank - 1][k] & 0xFFu;
        }
    }
    return true;
}

// Zeros padding: true where no point of the L = Avx2Lanes<C>::kCount points is within reach of
// the input (all fill points), with their first-tap offsets: the clamped stand-ins that
// plan_lanes_avx2 gives them (read by the prefetch of the rows ahead). Explicit grids that zoom
// out have many such groups. For cubic taps this test is much cheaper than a general plan; for
// linear taps it costs about as much as it saves, so only cubic takes it.
template <PositionKind Kind, class Interp, int Rank, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE bool plan_out_of_reach_lanes_avx2(const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                                              const PlannerAxes<C, Rank>& axes,
                                                                              typename Avx2Lanes<C>::Int& offset) {
    using L = Avx2Lanes<C>;
    const unsigned active = lanes >= L::kCount ? (1u << L::kCount) - 1u : (1u << std::max(lanes, 0)) - 1u;
    typename L::Vec coordinate[Rank];
    read_coordinates_avx2<C, Rank>(reader, p, lanes, coordinate);
    typename L::Vec u[Rank];
    unsigned within_reach = active;
    for (int a = 0; a < Rank; ++a) {
        u[a] = pixel_position_avx2<Kind, C>(coordinate[Rank - 1 - a], axes.extent[a]);
        within_reach &= L::within(u[a], L::set1(axes.outside_below), L::set1(axes.outside_from[a]));
    }
    if (within_reach != 0) return false;
    offset = L::set1_int(0);
    typename L::Vec offset_value = L::set1(C(0));
    for (int a = 0; a < Rank; ++a) {
        const auto first = interior_first_value_avx2<Interp, C>(clamped_stand_in<Rank, C>(u[a], axes, a));
        add_offset_term<Rank, C>(axes, a, first, offset_value, offset);
    }
    if constexpr (std::is_same_v<C, double>) offset = L::truncate(offset_value);
    return true;
}

// The same for 8 points into `group` (offsets, and every active point a fill point of zeros padding).
template <PositionKind Kind, class Interp, int Rank, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_STAGE bool plan_out_of_reach_group_avx2(const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                                              const PlannerAxes<C, Rank>& axes,
                                                                              Avx2Group<Rank, Interp::taps>& group) {
    if constexpr (std::is_same_v<C, float>) {
        __m256i offset;
        if (!plan_out_of_reach_lanes_avx2<Kind, Interp, Rank, float>(reader, p, lanes, axes, offset)) return false;
        _mm256_store_si256(reinterpret_cast<__m256i*>(group.offset), offset);
    } else {
        __m128i offset[2];
        for (int h = 0; h < 2; ++h) {
            if (!plan_out_of_reach_lanes_avx2<Kind, Interp, Rank, double>(reader, p + 4 * h, std::clamp(lanes - 4 * h, 0, 4), axes,
                                                                          offset[h])) {
                return false;
            }
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(group.offset), _mm256_set_m128i(offset[1], offset[0]));
    }
    group.interior = 0;
    group.fill_zeros = (1u << std::clamp(lanes, 0, 8)) - 1u;  // (fill_nonfinite is left as it was: zeros padding does not read it)
    return true;
}

// quad[i] holds the 4 taps of point i (low half) and of point i + 4 (high half); one 4 x 4
// transpose within each half puts tap k of points 0-3 | 4-7 into tap[k].
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void transpose_taps(const __m256 (&quad)[4], __m256 (&tap)[4]) {
    const __m256 taps01_of_01 = _mm256_unpacklo_ps(quad[0], quad[1]);  // p0t0 p1t0 p0t1 p1t1
    const __m256 taps23_of_01 = _mm256_unpackhi_ps(quad[0], quad[1]);
    const __m256 taps01_of_23 = _mm256_unpacklo_ps(quad[2], quad[3]);
    const __m256 taps23_of_23 = _mm256_unpackhi_ps(quad[2], quad[3]);
    tap[0] = _mm256_shuffle_ps(taps01_of_01, taps01_of_23, _MM_SHUFFLE(1, 0, 1, 0));
    tap[1] = _mm256_shuffle_ps(taps01_of_01, taps01_of_23, _MM_SHUFFLE(3, 2, 3, 2));
    tap[2] = _mm256_shuffle_ps(taps23_of_01, taps23_of_23, _MM_SHUFFLE(1, 0, 1, 0));
    tap[3] = _mm256_shuffle_ps(taps23_of_01, taps23_of_23, _MM_SHUFFLE(3, 2, 3, 2));
}

// The K taps from each of 8 points' offsets along the innermost axis (stride 1) in each of T rows,
// tap k of row t into v[t][k]: one scalar load per point and row (32-bit for one tap, 64-bit for
// a pair, 128-bit for four) and shuffles into place.
template <int K, int T>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void gather_rows_x8(const float* const* row, const std::int32_t* offset, __m256 (*v)[K]) {
    if constexpr (K == 1) {
        __m128 quad[T][2];
        for (int j = 0; j < 2; ++j) {
            const std::int64_t o0 = offset[4 * j], o1 = offset[4 * j + 1], o2 = offset[4 * j + 2], o3 = offset[4 * j + 3];
            for (int t = 0; t < T; ++t) {
                const float* p = row[t];
                __m128 q = _mm_load_ss(p + o0);
                q = _mm_insert_ps(q, _mm_load_ss(p + o1), 0x10);
                q = _mm_insert_ps(q, _mm_load_ss(p + o2), 0x20);
                quad[t][j] = _mm_insert_ps(q, _mm_load_ss(p + o3), 0x30);
            }
        }
        for (int t = 0; t < T; ++t) v[t][0] = _mm256_set_m128(quad[t][1], quad[t][0]);
    } else if constexpr (K == 2) {
        // pairs[t][j]: the pairs of points 2j (low half) and 2j + 1 (high half).
        __m128 pairs[T][4];
        for (int j = 0; j < 4; ++j) {
            const std::int64_t even = offset[2 * j], odd = offset[2 * j + 1];
            for (int t = 0; t < T; ++t) {
                pairs[t][j] = _mm_castsi128_ps(load_two_8_byte_blocks(row[t] + even, row[t] + odd));
            }
        }
        for (int t = 0; t < T; ++t) {
            // 128-bit lanes: a = points 0, 1 | 4, 5 and b = points 2, 3 | 6, 7, so that taking
            // elements 0, 2 (tap 0) or 1, 3 (tap 1) of a then b puts points 0-3 | 4-7 in order.
            const __m256 a = _mm256_set_m128(pairs[t][2], pairs[t][0]);
            const __m256 b = _mm256_set_m128(pairs[t][3], pairs[t][1]);
            v[t][0] = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
            v[t][1] = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        }
    } else {
        static_assert(K == 4);
        for (int t = 0; t < T; ++t) {
            // quad[i]: the 4 taps of point i (low half) and of point i + 4 (high half).
            __m256 quad[4];
            for (int i = 0; i < 4; ++i) {
                quad[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(row[t] + offset[i])), _mm_loadu_ps(row[t] + offset[i + 4]), 1);
            }
            transpose_taps(quad, v[t]);
        }
    }
}

// The same for int16 pixels: each point's K taps along x in one 16-, 32- or 64-bit load per row
// (the point's own taps, so no load reaches past them), widened to int32 and converted to float
// (exact: float holds every int16).
template <int K, int T>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void gather_rows_x8(const std::int16_t* const* row, const std::int32_t* offset,
                                                                __m256 (*v)[K]) {
    for (int t = 0; t < T; ++t) {
        const std::int16_t* p = row[t];
        if constexpr (K == 1) {
            // Four points' values per 64-bit word.
            std::uint64_t word[2];
            for (int j = 0; j < 2; ++j) {
                word[j] = 0;
                for (int i = 0; i < 4; ++i) word[j] |= std::uint64_t{load_unaligned<std::uint16_t>(p + offset[4 * j + i])} << (16 * i);
            }
            const __m128i values = _mm_set_epi64x(static_cast<long long>(word[1]), static_cast<long long>(word[0]));
            v[t][0] = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(values));
        } else if constexpr (K == 2) {
            // Point i's pair in 32-bit lane i: tap 0 in its low half, tap 1 in its high half.
            std::uint64_t word[4];
            for (int j = 0; j < 4; ++j) {
                word[j] = std::uint64_t{load_unaligned<std::uint32_t>(p + offset[2 * j])} |
                          (std::uint64_t{load_unaligned<std::uint32_t>(p + offset[2 * j + 1])} << 32);
            }
            const __m256i pairs = _mm256_setr_epi64x(static_cast<long long>(word[0]), static_cast<long long>(word[1]),
                                                     static_cast<long long>(word[2]), static_cast<long long>(word[3]));
            v[t][0] = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(pairs, 16), 16));
            v[t][1] = _mm256_cvtepi32_ps(_mm256_srai_epi32(pairs, 16));
        } else {
            static_assert(K == 4);
            // quad[i]: the 4 taps of point i (low half) and of point i + 4 (high half), as floats.
            __m256 quad[4];
            for (int i = 0; i < 4; ++i) {
                const __m128i taps = _mm_set_epi64x(static_cast<long long>(load_unaligned<std::uint64_t>(p + offset[i + 4])),
                                                    static_cast<long long>(load_unaligned<std::uint64_t>(p + offset[i])));
                quad[i] = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(taps));
            }
            transpose_taps(quad, v[t]);
        }
    }
}

// 8 sums stored as float32 (stream: a whole group, with a streaming store).
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void store_sums_avx2(float* o, __m256 sum, int lanes, bool stream) {
    if (lanes == 8) {
        if (stream) {
            _mm256_stream_ps(o, sum);
        } else {
            _mm256_storeu_ps(o, sum);
        }
    } else {
        _mm256_maskstore_ps(o, first_words(lanes), sum);
    }
}

// store_finite<int16_t> lane-wise: round half to even (given with the instruction, whatever the
// caller's MXCSR says), then saturate. The sums are finite and within int32 (int16 taps, weights
// summing to at most 3.4 in magnitude), so converting before saturating clamps the same way.
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void store_sums_avx2(std::int16_t* o, __m256 sum, int lanes, bool /*stream*/) {
    const __m256i rounded = _mm256_cvtps_epi32(_mm256_round_ps(sum, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m128i values = _mm_packs_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1));
    if (lanes == 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o), values);
    } else {
        alignas(16) std::int16_t staged[8];
        _mm_store_si128(reinterpret_cast<__m128i*>(staged), values);
        std::memcpy(o, staged, sizeof(std::int16_t) * static_cast<std::size_t>(std::clamp(lanes, 0, 8)));
    }
}

// One channel's weighted sums of 8 points (K > 1): the taps from `in` at the group's first-tap
// offsets. Masked (linear only): tap k of outer tap t adds +0 instead of its product in the lanes
// whose bit in tap_holds[t][k] is clear. SkipZeroWeights: a tap leaves the sum as it was in the
// lanes where its weight is zero (the zero-weight rule, sampling_policies.hpp).
template <int Rank, int K, class S, bool Masked, bool SkipZeroWeights>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE __m256 weighted_sums_avx2(const Avx2Group<Rank, K>& group, const std::int32_t* outer_offset,
                                                                      const S* in, const unsigned (*tap_holds)[K]) {
    constexpr int kOuterTaps = Avx2Group<Rank, K>::kOuterTaps;
    // Linear: every row at once (each offset loaded once); cubic: a row at a time.
    constexpr int kTogether = K == 4 ? 1 : kOuterTaps;
    __m256 sum = _mm256_setzero_ps();
    for (int t0 = 0; t0 < kOuterTaps; t0 += kTogether) {
        const S* row[kTogether];
        for (int t = 0; t < kTogether; ++t) row[t] = in + outer_offset[t0 + t];
        __m256 v[kTogether][K];
        gather_rows_x8<K, kTogether>(row, group.offset, v);
        for (int t = 0; t < kTogether; ++t) {
            for (int k = 0; k < K; ++k) {
                const __m256 weight = group.weight[t0 + t][k];
                __m256 term = _mm256_mul_ps(weight, v[t][k]);
                if constexpr (Masked) term = _mm256_and_ps(term, lane_mask(tap_holds[t0 + t][k]));
                const __m256 next = _mm256_add_ps(sum, term);
                if constexpr (SkipZeroWeights) {
                    sum = _mm256_blendv_ps(next, sum, _mm256_cmp_ps(weight, _mm256_setzero_ps(), _CMP_EQ_OQ));
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
GRIDWARP_TARGET_AVX2 GRIDWARP_NOINLINE __m256 weighted_sums_skipping_zero_weights_avx2(const Avx2Group<Rank, K>& group,
                                                                                       const std::int32_t* outer_offset, const S* in,
                                                                                       const unsigned (*tap_holds)[K]) {
    return weighted_sums_avx2<Rank, K, S, Masked, true>(group, outer_offset, in, tap_holds);
}

// One channel's 8 points: the taps from `in` at the group's first-tap offsets, the weighted sum
// (fill points replaced by the fill value) written to `o`. Masked: see weighted_sums_avx2.
template <int Rank, int K, class S, bool Masked = false>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void sample_channel_avx2(const Avx2Group<Rank, K>& group, int lanes,
                                                                     const std::int32_t* outer_offset, const S* in, S* o,
                                                                     S fill_stored, unsigned fill, bool stream = false,
                                                                     const unsigned (*tap_holds)[K] = nullptr) {
    __m256 sum;
    if constexpr (K == 1) {
        __m256 v[1][1];
        gather_rows_x8<1, 1>(&in, group.offset, v);
        sum = v[0][0];  // nearest copies the value
    } else {
        sum = weighted_sums_avx2<Rank, K, S, Masked, false>(group, outer_offset, in, tap_holds);
        // The zero-weight rule: only a NaN sum can differ from the sum without the taps of weight
        // zero (sampling_policies.hpp); int16 values and the weights are finite, so their sums are too.
        if constexpr (std::is_same_v<S, float>) {
            if (__builtin_expect(_mm256_movemask_ps(_mm256_cmp_ps(sum, sum, _CMP_UNORD_Q)) != 0, 0)) {
                sum = weighted_sums_skipping_zero_weights_avx2<Rank, K, S, Masked>(group, outer_offset, in, tap_holds);
            }
        }
    }
    // (An int16 fill value is exact in float and stays itself through rounding and saturation.)
    if (fill != 0) sum = _mm256_blendv_ps(sum, _mm256_set1_ps(static_cast<float>(fill_stored)), lane_mask(fill));
    store_sums_avx2(o, sum, lanes, stream);
}

template <int Rank, int K, class S, bool Masked = false>
GRIDWARP_TARGET_AVX2 GRIDWARP_STAGE void sample_group_avx2(const Avx2Group<Rank, K>& group, int lanes,
                                                                   const std::int32_t* outer_offset, const S* input, S* output,
                                                                   const FastOutput<S>& out, unsigned fill, bool stream = false,
                                                                   const unsigned (*tap_holds)[K] = nullptr) {
    if (out.channels == 1) {
        sample_channel_avx2<Rank, K, S, Masked>(group, lanes, outer_offset, input, output, out.fill_stored, fill, stream, tap_holds);
        return;
    }
    for (std::int64_t c = 0; c < out.channels; ++c) {
        sample_channel_avx2<Rank, K, S, Masked>(group, lanes, outer_offset, input + c * out.input_channel_stride,
                                             output + c * out.output_channel_stride, out.fill_stored, fill, stream, tap_holds);
    }
}

// ---- Points near an edge under any padding (float32 pixels): the same operations as
// plan_near_points and the generic near loop (see sample_near_group in interior_pass_avx512-inl.hpp),
// each tap read with a masked gather, since taps are no longer neighbours in memory.

// One bit per 32-bit lane where a > b.
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE unsigned greater_lanes(__m256i a, __m256i b) {
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a, b))));
}

// Lane-wise Pad::near_map on 32-bit integers (zeros: the clamp only keeps the gather inside; taps
// outside read the fill value instead).
template <class Pad>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE __m256i near_map_x8(__m256i i, std::int32_t d, bool align_corners) {
    if constexpr (std::is_same_v<Pad, BorderPadding> || std::is_same_v<Pad, ZerosPadding>) {
        return _mm256_min_epi32(_mm256_max_epi32(i, _mm256_setzero_si256()), _mm256_set1_epi32(d - 1));
    } else {
        static_assert(std::is_same_v<Pad, ReflectionPadding>);
        const __m256i below = align_corners ? _mm256_sub_epi32(_mm256_setzero_si256(), i) : _mm256_sub_epi32(_mm256_set1_epi32(-1), i);
        const __m256i above = _mm256_sub_epi32(_mm256_set1_epi32(align_corners ? 2 * (d - 1) : 2 * d - 1), i);
        const __m256i mapped = _mm256_blendv_epi8(i, below, _mm256_cmpgt_epi32(_mm256_setzero_si256(), i));
        return _mm256_blendv_epi8(mapped, above, _mm256_cmpgt_epi32(i, _mm256_set1_epi32(d - 1)));
    }
}

// Lane-wise Pad::near_ok.
template <class Pad>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE unsigned near_ok_x8(__m256i first, int taps, std::int32_t d, bool align_corners) {
    if constexpr (std::is_same_v<Pad, BorderPadding> || std::is_same_v<Pad, ZerosPadding>) {
        (void)first, (void)taps, (void)align_corners;
        return d >= 1 ? 0xFFu : 0u;
    } else {
        if (d < 2) return 0;
        const std::int32_t lo = align_corners ? 1 - d : -d;
        const std::int32_t hi = align_corners ? 2 * (d - 1) : 2 * d - 1;
        // first >= lo and first + taps - 1 <= hi
        return ~greater_lanes(_mm256_set1_epi32(lo), first) & ~greater_lanes(_mm256_add_epi32(first, _mm256_set1_epi32(taps - 1)),
                                                                            _mm256_set1_epi32(hi)) & 0xFFu;
    }
}

// Plans L = Avx2Lanes<C>::kCount points as plan_near_points does: their mapped tap indices per
// axis, whether they are near, which taps are inside, and their tap weights in C.
template <PositionKind Kind, class Interp, class Pad, int Rank, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void plan_near_lanes_avx2(const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                                      const InputGeometry& geometry,
                                                                      typename Avx2Lanes<C>::Int (*index)[Interp::taps], unsigned& near,
                                                                      unsigned (*inside)[Interp::taps],
                                                                      typename Avx2Lanes<C>::Vec (*tap_weight)[Interp::taps]) {
    using L = Avx2Lanes<C>;
    using P = typename L::Policy;
    constexpr int K = Interp::taps;
    constexpr C kLimit = C(std::int64_t{1} << 22);
    constexpr C kFoldBeyond = C(1 << 20);
    const unsigned active = (1u << std::clamp(lanes, 0, L::kCount)) - 1u;
    typename L::Vec coordinate[Rank];
    read_coordinates_avx2<C, Rank>(reader, p, lanes, coordinate);
    unsigned ok_all = active;
    P weight[Rank][K] = {};
    for (int a = 0; a < Rank; ++a) {
        const auto g = coordinate[Rank - 1 - a];
        const std::int64_t d = geometry.extent[a];
        auto u = pixel_position_avx2<Kind, C>(g, static_cast<C>(d));
        if constexpr (std::is_same_v<Pad, BorderPadding>) {
            u = L::min(L::set1(static_cast<C>(d) + C(1)), L::max(L::set1(C(-2)), u));  // near_bound
        }
        unsigned ok = L::lt(L::abs(u), L::set1(kLimit));
        if constexpr (std::is_same_v<Pad, ReflectionPadding> && Kind != PositionKind::Pixel) {
            ok &= L::le(L::abs(g), L::set1(kFoldBeyond));
        }
        const auto safe = L::min(L::set1(kLimit), L::max(L::set1(-kLimit), u));
        typename L::Int first;
        if constexpr (K == 1) {
            first = interior_first_avx2<Interp, C>(safe);  // the rounding trick holds for |u| < 2^22
        } else {
            const auto truncated = L::truncate(safe);
            // floor_int: truncation, minus 1 where it rounded up.
            first = L::sub_int(truncated, L::mask_to_int(L::gt(L::from_int(truncated), safe)));
            if constexpr (K == 4) first = L::sub_int(first, L::set1_int(1));
        }
        const auto d32 = static_cast<std::int32_t>(d);
        ok &= near_ok_x8<Pad>(L::widen_int(first), K, d32, geometry.align_corners);
        if constexpr (K > 1) Interp::weights(P(safe), P(L::from_int(first)), weight[a]);
        for (int k = 0; k < K; ++k) {
            const __m256i tap = _mm256_add_epi32(L::widen_int(first), _mm256_set1_epi32(k));
            index[a][k] = L::narrow_int(near_map_x8<Pad>(tap, d32, geometry.align_corners));
            // Zeros padding: whether the tap is inside [0, d-1] (ZerosPadding::map gives -1 elsewhere).
            inside[a][k] = greater_lanes(tap, _mm256_set1_epi32(-1)) & greater_lanes(_mm256_set1_epi32(d32), tap);
        }
        ok_all &= ok;
    }
    near = ok_all;
    if constexpr (K > 1) tap_weights_of<Rank, K>(weight, tap_weight);
}

// Samples the `edge` points of a group that are near, writes them, and returns which they are.
template <PositionKind Kind, class Interp, class Pad, int Rank, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_STAGE unsigned sample_near_group_avx2(const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                                            unsigned edge, const InputGeometry& geometry, const float* input,
                                                                            float* output, const FastOutput<float>& out) {
    constexpr int K = Interp::taps;
    constexpr int kOuterTaps = Rank == 2 ? K : K * K;
    __m256i index[Rank][K];
    unsigned inside[Rank][K];
    __m256 weight[kOuterTaps][K];
    unsigned near = 0;
    if constexpr (std::is_same_v<C, float>) {
        plan_near_lanes_avx2<Kind, Interp, Pad, Rank, float>(reader, p, lanes, geometry, index, near, inside, weight);
    } else {
        __m128i half_index[2][Rank][K];
        unsigned half_inside[2][Rank][K];
        __m256d half_weight[2][kOuterTaps][K];
        unsigned half_near[2];
        for (int h = 0; h < 2; ++h) {
            plan_near_lanes_avx2<Kind, Interp, Pad, Rank, double>(reader, p + 4 * h, std::clamp(lanes - 4 * h, 0, 4), geometry,
                                                                  half_index[h], half_near[h], half_inside[h], half_weight[h]);
        }
        near = half_near[0] | (half_near[1] << 4);
        for (int a = 0; a < Rank; ++a) {
            for (int k = 0; k < K; ++k) {
                inside[a][k] = (half_inside[0][a][k] & 0xFu) | ((half_inside[1][a][k] & 0xFu) << 4);
                index[a][k] = _mm256_set_m128i(half_index[1][a][k], half_index[0][a][k]);
            }
        }
        if constexpr (K > 1) {
            for (int o = 0; o < kOuterTaps; ++o) {
                for (int k = 0; k < K; ++k) {
                    weight[o][k] = _mm256_set_m128(_mm256_cvtpd_ps(half_weight[1][o][k]), _mm256_cvtpd_ps(half_weight[0][o][k]));
                }
            }
        }
    }
    const unsigned take = near & edge;
    if (take == 0) return 0;
    // Tap offsets in tap order: outer taps (z, y), then x.
    __m256i offset[kOuterTaps][K];
    for (int o = 0; o < kOuterTaps; ++o) {
        const int ky = o % K, kz = o / K;
        __m256i outer = _mm256_mullo_epi32(index[Rank - 2][ky], _mm256_set1_epi32(static_cast<std::int32_t>(geometry.stride[Rank - 2])));
        if constexpr (Rank == 3) {
            outer = _mm256_add_epi32(_mm256_mullo_epi32(index[0][kz], _mm256_set1_epi32(static_cast<std::int32_t>(geometry.stride[0]))), outer);
        }
        for (int k = 0; k < K; ++k) {
            offset[o][k] = _mm256_add_epi32(outer, _mm256_mullo_epi32(index[Rank - 1][k],
                                                                      _mm256_set1_epi32(static_cast<std::int32_t>(geometry.stride[Rank - 1]))));
        }
    }
    for (std::int64_t c = 0; c < out.channels; ++c) {
        const float* in = input + c * out.input_channel_stride;
        __m256 sum = _mm256_setzero_ps();
        for (int o = 0; o < kOuterTaps; ++o) {
            // Zeros padding: the taps inside every axis are read, the others are the fill value.
            unsigned tap_inside = 0xFFu;
            if constexpr (std::is_same_v<Pad, ZerosPadding>) {
                tap_inside = inside[Rank - 2][o % K] & (Rank == 3 ? inside[0][o / K] : 0xFFu);
            }
            for (int k = 0; k < K; ++k) {
                const unsigned read = std::is_same_v<Pad, ZerosPadding> ? (tap_inside & inside[Rank - 1][k]) : 0xFFu;
                const __m256 v = _mm256_mask_i32gather_ps(_mm256_set1_ps(out.fill_value), in, offset[o][k], lane_mask(take & read), 4);
                if constexpr (K == 1) {
                    sum = v;
                } else {
                    // The zero-weight rule directly (few points): where the weight is zero the sum stays.
                    const __m256 next = _mm256_add_ps(sum, _mm256_mul_ps(weight[o][k], v));
                    sum = _mm256_blendv_ps(next, sum, _mm256_cmp_ps(weight[o][k], _mm256_setzero_ps(), _CMP_EQ_OQ));
                }
            }
        }
        _mm256_maskstore_ps(output + c * out.output_channel_stride, _mm256_castps_si256(lane_mask(take)), sum);
    }
    return take;
}

// sample_near_group_avx2 for the call's padding: zeros padding is a template argument of the
// pass, border and reflection a run-time choice here, in the edge groups only.
template <PositionKind Kind, class Interp, bool ZerosPad, int Rank, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE unsigned sample_near_group_of_padding_avx2(Padding padding, const CoordinateReader<C>& reader,
                                                                                       std::int64_t p, int lanes, unsigned edge,
                                                                                       const InputGeometry& geometry, const float* input,
                                                                                       float* output, const FastOutput<float>& out) {
    if constexpr (ZerosPad) {
        (void)padding;
        return sample_near_group_avx2<Kind, Interp, ZerosPadding, Rank, C>(reader, p, lanes, edge, geometry, input, output, out);
    } else if (padding == Padding::Reflection) {
        return sample_near_group_avx2<Kind, Interp, ReflectionPadding, Rank, C>(reader, p, lanes, edge, geometry, input, output, out);
    } else {
        return sample_near_group_avx2<Kind, Interp, BorderPadding, Rank, C>(reader, p, lanes, edge, geometry, input, output, out);
    }
}

// ---- Sampling 8 planned points: uint8 pixels, interleaved (HWC: channels adjacent) or planar.
// Each point reads 8 bytes per outer tap from its first tap on (every channel's K taps when
// interleaved, K * channels <= 8; one channel's K taps when planar) with one 64-bit load; a byte
// shuffle within each 128-bit half (vpshufb) picks tap k of channel c of 8 points into 32-bit lanes.
// (Byte values and the weights are finite, so the sums already keep the zero-weight rule.)

// The byte shuffles of a uint8 pass, made once per call from the layout.
struct Avx2ByteShuffles {
    // [k][c] (planar: [k][0]): from the loads of points 0, 1 | 4, 5 into lanes 0, 1 | 4, 5 and from
    // those of points 2, 3 | 6, 7 into lanes 2, 3 | 6, 7 (load_bytes_x8), zeroing the other bytes.
    __m256i pick_low[4][4], pick_high[4][4];
    // Interleaved output: bytes j of the group's 8 * channels output bytes, j < 16 (part 0) and
    // j >= 16 (part 1), from channels 0-1 (source 0) and 2-3 (source 1), each channel's 8 bytes in
    // order; a source's zero bytes come from index 0x80.
    __m128i interleave[2][2];
};

GRIDWARP_TARGET_AVX2 inline Avx2ByteShuffles make_byte_shuffles(const ByteLayout& layout, int taps, std::int64_t input_inner_stride) {
    Avx2ByteShuffles shuffles;
    for (int k = 0; k < taps && k < 4; ++k) {
        for (int c = 0; c < layout.channels; ++c) {
            const int b = layout.interleaved_in ? static_cast<int>(k * input_inner_stride) + c : k;
            alignas(32) std::uint8_t low[32], high[32];
            for (int i = 0; i < 32; ++i) low[i] = high[i] = 0x80;
            for (int half = 0; half < 2; ++half) {
                for (int point = 0; point < 2; ++point) {
                    low[16 * half + 4 * point] = static_cast<std::uint8_t>(8 * point + b);
                    high[16 * half + 4 * (point + 2)] = static_cast<std::uint8_t>(8 * point + b);
                }
            }
            shuffles.pick_low[k][c] = _mm256_load_si256(reinterpret_cast<const __m256i*>(low));
            shuffles.pick_high[k][c] = _mm256_load_si256(reinterpret_cast<const __m256i*>(high));
        }
    }
    for (int part = 0; part < 2; ++part) {
        for (int source = 0; source < 2; ++source) {
            alignas(16) std::uint8_t index[16];
            for (int j = 0; j < 16; ++j) {
                const int byte = 16 * part + j, c = byte % layout.channels, point = byte / layout.channels;
                const bool here = byte < 8 * layout.channels && c / 2 == source;
                index[j] = here ? static_cast<std::uint8_t>((c % 2) * 8 + point) : std::uint8_t{0x80};
            }
            shuffles.interleave[part][source] = _mm_load_si128(reinterpret_cast<const __m128i*>(index));
        }
    }
    return shuffles;
}

// 8 bytes from base + offset[i] for 8 points: points 0, 1 | 4, 5 in `low`, 2, 3 | 6, 7 in `high`.
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void load_bytes_x8(const std::uint8_t* base, const std::int32_t* offset, __m256i& low, __m256i& high) {
    __m128i pair[4];
    for (int j = 0; j < 4; ++j) {
        pair[j] = load_two_8_byte_blocks(base + offset[2 * j], base + offset[2 * j + 1]);
    }
    low = _mm256_set_m128i(pair[2], pair[0]);
    high = _mm256_set_m128i(pair[3], pair[1]);
}

// The bytes that a pair of shuffles picks from 8 points' loads, as floats.
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE __m256 byte_values_x8(const __m256i& low, const __m256i& high, const __m256i& pick_low,
                                                                  const __m256i& pick_high) {
    return _mm256_cvtepi32_ps(_mm256_or_si256(_mm256_shuffle_epi8(low, pick_low), _mm256_shuffle_epi8(high, pick_high)));
}

// store_finite<uint8_t> lane-wise: round half to even (by the rounding the instruction names,
// whatever MXCSR says), then clamp to [0, 255] by the two saturating packs; 8 bytes in the low half.
// The sums are finite and far inside the int32 range, so rounding before the clamp gives what
// clamping first would.
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE __m128i round_to_bytes_x8(__m256 sum) {
    const __m256i rounded = _mm256_cvtps_epi32(_mm256_round_ps(sum, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1));
    return _mm_packus_epi16(words, words);
}

// One bit per point as a byte mask (byte i all ones where bit i is set).
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE __m128i point_byte_mask(unsigned bits) {
    const __m128i bit = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm_cmpeq_epi8(_mm_and_si128(_mm_set1_epi8(static_cast<char>(bits)), bit), bit);
}

// Writes `valid` of `bytes` (8 * channels) bytes held in two 16-byte parts.
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void store_group_bytes(std::uint8_t* to, __m128i part0, __m128i part1, int bytes, int valid) {
    if (valid < bytes) {
        alignas(16) std::uint8_t staged[32];
        _mm_store_si128(reinterpret_cast<__m128i*>(staged), part0);
        _mm_store_si128(reinterpret_cast<__m128i*>(staged + 16), part1);
        std::memcpy(to, staged, static_cast<std::size_t>(valid));
        return;
    }
    if (bytes == 8) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(to), part0);
        return;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to), part0);
    if (bytes == 24) _mm_storel_epi64(reinterpret_cast<__m128i*>(to + 16), part1);
    if (bytes == 32) _mm_storeu_si128(reinterpret_cast<__m128i*>(to + 16), part1);
}

// (The channel count is a template parameter so that the per-channel sums stay in registers.)
template <int Rank, int K, int Channels>
GRIDWARP_TARGET_AVX2 GRIDWARP_STAGE void sample_byte_group_avx2(const Avx2Group<Rank, K>& group, int lanes,
                                                                        const std::int32_t* outer_offset, const std::uint8_t* input,
                                                                        std::uint8_t* output, const FastOutput<std::uint8_t>& out,
                                                                        const ByteLayout& layout, const Avx2ByteShuffles& shuffles,
                                                                        unsigned fill) {
    constexpr int kOuterTaps = Avx2Group<Rank, K>::kOuterTaps;
    __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int t = 0; t < kOuterTaps; ++t) {
        if (layout.interleaved_in) {
            __m256i low, high;
            load_bytes_x8(input + outer_offset[t], group.offset, low, high);
            for (int k = 0; k < K; ++k) {
                for (int c = 0; c < Channels; ++c) {
                    const __m256 v = byte_values_x8(low, high, shuffles.pick_low[k][c], shuffles.pick_high[k][c]);
                    sum[c] = K == 1 ? v : _mm256_add_ps(sum[c], _mm256_mul_ps(group.weight[t][k], v));
                }
            }
        } else {
            for (int c = 0; c < Channels; ++c) {
                __m256i low, high;
                load_bytes_x8(input + c * out.input_channel_stride + outer_offset[t], group.offset, low, high);
                for (int k = 0; k < K; ++k) {
                    const __m256 v = byte_values_x8(low, high, shuffles.pick_low[k][0], shuffles.pick_high[k][0]);
                    sum[c] = K == 1 ? v : _mm256_add_ps(sum[c], _mm256_mul_ps(group.weight[t][k], v));
                }
            }
        }
    }
    __m128i bytes[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};
    const __m128i fill_bytes = _mm_set1_epi8(static_cast<char>(out.fill_stored));
    for (int c = 0; c < Channels; ++c) {
        bytes[c] = round_to_bytes_x8(sum[c]);  // exact for nearest's copies too
        if (fill != 0) bytes[c] = _mm_blendv_epi8(bytes[c], fill_bytes, point_byte_mask(fill));
    }
    if (layout.interleaved_out) {
        const __m128i source[2] = {_mm_unpacklo_epi64(bytes[0], bytes[1]), _mm_unpacklo_epi64(bytes[2], bytes[3])};
        __m128i part[2];
        for (int j = 0; j < 2; ++j) {
            part[j] = _mm_or_si128(_mm_shuffle_epi8(source[0], shuffles.interleave[j][0]), _mm_shuffle_epi8(source[1], shuffles.interleave[j][1]));
        }
        store_group_bytes(output, part[0], part[1], 8 * Channels, lanes * Channels);
    } else {
        for (int c = 0; c < Channels; ++c) {
            store_group_bytes(output + c * out.output_channel_stride, bytes[c], bytes[c], 8, lanes);
        }
    }
}

template <int Rank, int K>
GRIDWARP_TARGET_AVX2 GRIDWARP_STAGE void sample_byte_group_avx2(const Avx2Group<Rank, K>& group, int lanes,
                                                                        const std::int32_t* outer_offset, const std::uint8_t* input,
                                                                        std::uint8_t* output, const FastOutput<std::uint8_t>& out,
                                                                        const ByteLayout& layout, const Avx2ByteShuffles& shuffles,
                                                                        unsigned fill) {
    switch (layout.channels) {
        case 1: return sample_byte_group_avx2<Rank, K, 1>(group, lanes, outer_offset, input, output, out, layout, shuffles, fill);
        case 2: return sample_byte_group_avx2<Rank, K, 2>(group, lanes, outer_offset, input, output, out, layout, shuffles, fill);
        case 3: return sample_byte_group_avx2<Rank, K, 3>(group, lanes, outer_offset, input, output, out, layout, shuffles, fill);
        default: return sample_byte_group_avx2<Rank, K, 4>(group, lanes, outer_offset, input, output, out, layout, shuffles, fill);
    }
}

// Groups whose every point is a fill point.
GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void fill_group_avx2(int lanes, float* output, const FastOutput<float>& out, const ByteLayout&) {
    const __m256 value = _mm256_set1_ps(out.fill_stored);
    for (std::int64_t c = 0; c < out.channels; ++c) {
        float* o = output + c * out.output_channel_stride;
        if (lanes == 8) {
            _mm256_storeu_ps(o, value);
        } else {
            _mm256_maskstore_ps(o, first_words(lanes), value);
        }
    }
}

GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void fill_group_avx2(int lanes, std::int16_t* output, const FastOutput<std::int16_t>& out,
                                                                 const ByteLayout&) {
    const __m256 value = _mm256_set1_ps(static_cast<float>(out.fill_stored));
    for (std::int64_t c = 0; c < out.channels; ++c) store_sums_avx2(output + c * out.output_channel_stride, value, lanes, false);
}

GRIDWARP_TARGET_AVX2 GRIDWARP_ALWAYS_INLINE void fill_group_avx2(int lanes, std::uint8_t* output, const FastOutput<std::uint8_t>& out,
                                                                 const ByteLayout& layout) {
    const __m128i value = _mm_set1_epi8(static_cast<char>(out.fill_stored));
    if (layout.interleaved_out) {
        store_group_bytes(output, value, value, 8 * layout.channels, lanes * layout.channels);
    } else {
        for (int c = 0; c < layout.channels; ++c) store_group_bytes(output + c * out.output_channel_stride, value, value, 8, lanes);
    }
}

// The groups of points [from, to) of a row of `count` (from a multiple of 8): fill points only.
template <class S>
GRIDWARP_TARGET_AVX2 GRIDWARP_STAGE void fill_groups_avx2(S* output, std::int64_t from, std::int64_t to, std::int64_t count,
                                                                  const FastOutput<S>& out, const ByteLayout& layout) {
    for (std::int64_t p = from; p < to; p += 8) {
        fill_group_avx2(static_cast<int>(std::min<std::int64_t>(8, count - p)), output + p * out.output_point_stride, out, layout);
    }
}

// Samples the full group of interior points waiting in `waiting` (first point late_at; none if
// negative), reading its offsets and weights from memory (see interior_run_avx2).
template <int Rank, int K, class S>
GRIDWARP_TARGET_AVX2 GRIDWARP_STAGE void sample_late_group_avx2(const Avx2Group<Rank, K>& waiting, std::int64_t& late_at,
                                                                        const std::int32_t* outer_offset, const S* input,
                                                                        S* output, const FastOutput<S>& out, bool stream) {
    if (late_at < 0) return;
    // (The empty asm hides where the group came from, so that its offsets are loaded rather than
    // taken out of the register that stored them.)
    const Avx2Group<Rank, K>* group = &waiting;
    asm("" : "+r"(group));
    sample_group_avx2<Rank, K, S>(*group, 8, outer_offset, input, output + late_at * out.output_point_stride, out, 0, stream);
    late_at = -1;
}

// Float32 and int16 pixels: from point p on, the row's full groups of interior points, until a group with a
// point that is not interior (which the caller then plans in general) or the last full group.
// Returns the first point not sampled. A loop of its own with nothing else in it, so that its
// values stay in registers: the general loop's bookkeeping around the same planning and sampling
// made it about twice as many instructions per group (see docs/performance.md). In 2-D each group
// is sampled one group late, after the next group is planned, so that its offsets are read back
// from a store made a group earlier rather than taken out of the register one by one; the two
// groups take turns (in 3-D that was slower, so there a group is sampled as soon as it is
// planned). stream (out.stream, 2-D, and the run starts at a 64-byte line): its lines are
// written with streaming stores, all but a last group that starts a line (whose other half is not
// the run's), so that no ordinary store (fill values, points near an edge, the edge stage) ever
// meets a line still in flight.
template <PositionKind Kind, class Interp, int Rank, class S, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_STAGE std::int64_t interior_run_avx2(const CoordinateReader<C>& coordinates, std::int64_t p,
                                                                           std::int64_t count, const IndexSpan& known_interior,
                                                                           const PlannerAxes<C, Rank>& axes, const std::int32_t* outer_offset,
                                                                           const S* input, S* output, const FastOutput<S>& out,
                                                                           std::int32_t* first_taps, const C* next_xyz, bool stream) {
    constexpr int K = Interp::taps;
    Avx2Group<Rank, K> groups[2];
    int current = 0;
    std::int64_t late_at = -1;  // the first point of the group waiting in groups[current ^ 1]
    for (; p + 8 <= count; p += 8) {
        prefetch_next_row_coordinates<Rank>(next_xyz, p);
        Avx2Group<Rank, K>& group = groups[current];
        if (p >= known_interior.begin && p + 8 <= known_interior.end) {
            plan_group_avx2<Kind, Interp, Rank, C, Planning::Known>(coordinates, p, 8, axes, group);
        } else if (!plan_group_avx2<Kind, Interp, Rank, C, Planning::Tested>(coordinates, p, 8, axes, group)) {
            break;
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(first_taps + p), _mm256_load_si256(reinterpret_cast<const __m256i*>(group.offset)));
        if constexpr (Rank == 2) {
            sample_late_group_avx2<Rank, K, S>(groups[current ^ 1], late_at, outer_offset, input, output, out, stream);
            late_at = p;
            current ^= 1;
        } else {
            sample_group_avx2<Rank, K, S>(group, 8, outer_offset, input, output + p, out, 0);
        }
    }
    if constexpr (Rank == 2) {
        const bool last_ends_line = late_at >= 0 && (reinterpret_cast<std::uintptr_t>(output + late_at) & 63) != 0;
        sample_late_group_avx2<Rank, K, S>(groups[current ^ 1], late_at, outer_offset, input, output, out, stream && last_ends_line);
    }
    return p;
}

// The pass for one row of `count` points: writes every point of every channel as if it were
// interior, fill points with the fill value, lists the other points in edge_points (their number
// in *edges) and every point's first-tap offset in first_taps (clamped stand-ins where not
// interior), from which the input of the rows ahead is prefetched. next_xyz: the next row's
// stored coordinates, asked for as this row goes (nullptr: none to ask for). uint8: last_safe is
// the last first-tap offset whose 8-byte loads stay inside the input; a group reaching past it
// reads from last_safe instead and the row is redone by the generic stages (Redo).
template <PositionKind Kind, class Interp, bool ZerosPad, int Rank, class S, class C>
GRIDWARP_TARGET_AVX2 GRIDWARP_STAGE PassResult interior_pass_row_avx2(const CoordinateReader<C>& coordinates, std::int64_t count,
                                                                              const PlannerAxes<C, Rank>& axes,
                                                                              const std::int32_t* outer_offset, std::int64_t last_safe,
                                                                              const InputGeometry& geometry, const S* input, S* output,
                                                                              const FastOutput<S>& out, const ByteLayout& layout,
                                                                              const Avx2ByteShuffles* shuffles, std::int32_t* edge_points,
                                                                              std::int64_t* edges, std::int32_t* first_taps, const C* next_xyz,
                                                                              Padding padding) {
    constexpr int K = Interp::taps;
    const IndexSpan known_interior =
        coordinates.linear == nullptr ? IndexSpan{} : known_interior_span<Kind, Rank, C>(coordinates, count, axes);
    // Zeros padding along an affine row: the groups wholly outside the points within reach are
    // fill points (a rotation's corners), written without planning. planned: the
    // groups that were not.
    IndexSpan planned{0, count, false};
    if constexpr (ZerosPad) {
        if (coordinates.linear != nullptr) {
            const IndexSpan reach = within_reach_span<Kind, Rank, C>(coordinates, count, axes);
            if (reach.searched) planned = {reach.begin / 8 * 8, std::min(count, (reach.end + 7) / 8 * 8), true};
        }
    }
    std::int64_t edge_count = 0;
    bool redo = false;
    // Float32 and int16 pixels: runs of full interior groups go to interior_run_avx2, in 3-D only
    // along affine rows (stored 3-D grids and uint8 pixels were slower with runs). With streaming
    // stores a run starts
    // at a line: a row whose output is not 32-byte aligned streams nothing.
    constexpr bool kRuns = kPlanarPassPixel<S>;
    // Float32 pixels, zeros padding and linear taps: edge points from the stand-in taps (see
    // stand_in_weights_avx2).
    constexpr bool kStandInEdges = std::is_same_v<S, float> && ZerosPad && K == 2;
    // Zeros padding and cubic taps along stored rows: groups with no point within reach, found by
    // the reach test alone (affine rows skip them without planning, above).
    constexpr bool kOutOfReachTest = ZerosPad && K == 4;
    const bool runs = kRuns && (Rank == 2 || coordinates.linear != nullptr);
    const bool stream = out.stream && (reinterpret_cast<std::uintptr_t>(output) & 31) == 0;
    Avx2Group<Rank, K> group;
    unsigned tap_holds[Avx2Group<Rank, K>::kOuterTaps][2] = {};  // (kStandInEdges: set by every general plan)
    fill_groups_avx2(output, 0, planned.begin, count, out, layout);
    fill_groups_avx2(output, planned.end, count, count, out, layout);
    for (std::int64_t p = planned.begin; p < planned.end; p += 8) {
        if constexpr (kRuns) {
            if (runs && (!stream || (reinterpret_cast<std::uintptr_t>(output + p) & 63) == 0)) {
                p = interior_run_avx2<Kind, Interp, Rank, S, C>(coordinates, p, count, known_interior, axes, outer_offset, input, output,
                                                             out, first_taps, next_xyz, stream);
                if (p >= planned.end) break;
            }
        }
        const int lanes = static_cast<int>(std::min<std::int64_t>(8, count - p));
        prefetch_next_row_coordinates<Rank>(next_xyz, p);
        if (lanes == 8 && p >= known_interior.begin && p + 8 <= known_interior.end) {
            plan_group_avx2<Kind, Interp, Rank, C, Planning::Known>(coordinates, p, lanes, axes, group);
        } else if (!(kOutOfReachTest && coordinates.linear == nullptr &&
                     plan_out_of_reach_group_avx2<Kind, Interp, Rank, C>(coordinates, p, lanes, axes, group))) {
            plan_group_avx2<Kind, Interp, Rank, C, Planning::General, kStandInEdges>(coordinates, p, lanes, axes, group, tap_holds);
        }
        const unsigned active = (1u << lanes) - 1u;
        const unsigned fill = ZerosPad ? group.fill_zeros : group.fill_nonfinite;
        __m256i offset = _mm256_load_si256(reinterpret_cast<const __m256i*>(group.offset));
        if (lanes == 8) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(first_taps + p), offset);
        } else {
            _mm256_maskstore_epi32(first_taps + p, first_words(lanes), offset);
        }
        S* const o = output + p * out.output_point_stride;
        if (fill == active) {
            // Only fill points: no input to read.
            fill_group_avx2(lanes, o, out, layout);
            continue;
        }
        unsigned edge = ~group.interior & ~fill & active;
        if constexpr (std::is_same_v<S, std::int16_t>) {
            // Edge points are left to the generic stages.
            sample_group_avx2<Rank, K, S>(group, lanes, outer_offset, input, o, out, fill);
        } else if constexpr (std::is_same_v<S, float>) {
            // (Another fill value: the outside taps' terms are not +-0, so edge points take the
            // gathers. The fill value is read here, in edge groups only: a flag held across the
            // loop changed the register allocation of the whole pass, for the worse.)
            if (kStandInEdges && edge != 0 && out.fill_value == 0.0f) {
                if constexpr (kStandInEdges) {
                    // (An edge point is within reach and finite: this finishes it.)
                    sample_group_avx2<Rank, K, S, true>(group, lanes, outer_offset, input, o, out, fill, false, tap_holds);
                    edge = 0;
                }
            } else {
                sample_group_avx2<Rank, K, S>(group, lanes, outer_offset, input, o, out, fill);
                // Points across an edge whose taps map by one clamp or reflection (under zeros
                // padding: whose taps are inside or read the fill value); the rest are finished elsewhere.
                if (edge != 0) {
                    edge &= ~sample_near_group_of_padding_avx2<Kind, Interp, ZerosPad, Rank, C>(padding, coordinates, p, lanes, edge, geometry,
                                                                                               input, o, out);
                }
            }
        } else {
            (void)geometry;
            const __m256i limit = _mm256_set1_epi32(static_cast<std::int32_t>(std::min<std::int64_t>(last_safe, INT32_MAX)));
            if (greater_lanes(offset, limit) != 0) {
                redo = true;
                _mm256_store_si256(reinterpret_cast<__m256i*>(group.offset), _mm256_min_epi32(offset, limit));
            }
            sample_byte_group_avx2<Rank, K>(group, lanes, outer_offset, input, o, out, layout, *shuffles, fill);
        }
        for (; edge != 0; edge &= edge - 1) {
            edge_points[edge_count++] = static_cast<std::int32_t>(p + __builtin_ctz(edge));
        }
    }
    if (planned.searched) fill_in_first_taps(first_taps, count, planned);
    *edges = edge_count;
    if (redo) return PassResult::Redo;
    return edge_count == 0 ? PassResult::Complete : PassResult::EdgesLeft;
}

// The AVX2 pass for a run of rows of one tile (see interior_pass_avx512 for the contract).
template <PositionKind Kind, class Interp, bool ZerosPad, int Rank, class S, class C>
GRIDWARP_TARGET_AVX2 PassStop interior_pass_avx2(const PassRows<C>& rows, std::int64_t count, const InputGeometry& geometry,
                                                 const S* input, S* output, const FastOutput<S>& out, std::int64_t input_span,
                                                 const ByteLayout& layout, std::int32_t* edge_points, std::int32_t* first_taps,
                                                 RowPrefetch& prefetch, Padding padding) {
    constexpr int K = Interp::taps;
    constexpr int kOuterTaps = Avx2Group<Rank, K>::kOuterTaps;
    const PlannerAxes<C, Rank> axes = planner_axes<Interp, C, Rank>(geometry);
    std::int32_t outer_offset[kOuterTaps];
    outer_tap_offsets<K, Rank>(geometry, outer_offset);
    std::int64_t last_safe = 0;
    Avx2ByteShuffles shuffles;
    if constexpr (std::is_same_v<S, std::uint8_t>) {
        last_safe = last_safe_first_tap(input_span, outer_offset[kOuterTaps - 1], layout, out);
        // (An input too small for the loads: the caller samples the first row, and then the next,
        // by the generic stages.)
        if (last_safe < 0) return PassStop{1, PassResult::Redo, 0};
        shuffles = make_byte_shuffles(layout, K, geometry.stride[Rank - 1]);
    }
    (void)input_span;
    PassStop stop;
    for (std::int64_t r = 0; r < rows.rows; ++r) {
        std::int64_t edges = 0;
        PassResult result;
        if (rows.linear != nullptr) {
            CoordinateReader<C> coordinates;
            coordinates.linear = &rows.linear[r];
            coordinates.first_index = rows.first_index;
            result = interior_pass_row_avx2<Kind, Interp, ZerosPad, Rank, S, C>(coordinates, count, axes, outer_offset, last_safe, geometry, input,
                                                                           output + rows.output_offset[r], out, layout, &shuffles,
                                                                           edge_points, &edges, first_taps, nullptr, padding);
        } else {
            const C* next = nullptr;
            if constexpr (std::is_same_v<C, float>) next = r + 1 < rows.rows ? rows.xyz[r + 1] : rows.next_xyz;
            CoordinateReader<C> coordinates;
            coordinates.xyz = rows.xyz[r];
            result = interior_pass_row_avx2<Kind, Interp, ZerosPad, Rank, S, C>(coordinates, count, axes, outer_offset, last_safe, geometry, input,
                                                                           output + rows.output_offset[r], out, layout, &shuffles,
                                                                           edge_points, &edges, first_taps, next, padding);
        }
        prefetch_rows_ahead(prefetch, first_taps, count, input, Rank);
        stop.rows = r + 1;
        if (result != PassResult::Complete) {
            stop.result = result;
            stop.edges = edges;
            break;
        }
    }
    _mm_sfence();  // streamed lines reach memory before anyone else writes or reads them
    return stop;
}

}  // namespace

template <class S, class C>
AvxInteriorPass<S, C> select_avx2_pass(Interpolation mode, Padding padding, const InputGeometry& geometry,
                                       const FastOutput<S>& out, ByteLayout& layout) {
    return choose_interior_pass<S, C>(
        mode, padding, geometry, out, layout, [](auto) {},
        [](auto interp, auto zeros_padding, auto rank, auto kind) -> AvxInteriorPass<S, C> {
            return &interior_pass_avx2<decltype(kind)::value, typename decltype(interp)::type, decltype(zeros_padding)::value,
                                       decltype(rank)::value, S, C>;
        });
}

}  // namespace gridwarp::detail

#endif  // GRIDWARP_AVX2_DISPATCH

// Instantiates the pass for pixel type S and both coordinate types: each pixel type is a
// translation unit of its own (interior_pass_avx2_<type>.cpp), so that they build in parallel.
#if defined(GRIDWARP_AVX2_DISPATCH)
#define GRIDWARP_INSTANTIATE_AVX2_PASS(S)                                                                         \
    namespace gridwarp::detail {                                                                                  \
    template AvxInteriorPass<S, float> select_avx2_pass<S, float>(Interpolation, Padding, const InputGeometry&,   \
                                        const FastOutput<S>&, ByteLayout&);                                       \
    template AvxInteriorPass<S, double> select_avx2_pass<S, double>(Interpolation, Padding, const InputGeometry&, \
                                        const FastOutput<S>&, ByteLayout&);                                       \
    }
#else
#define GRIDWARP_INSTANTIATE_AVX2_PASS(S)
#endif
