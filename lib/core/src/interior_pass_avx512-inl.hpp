// The AVX-512 interior pass of the fast path: float32, int16 and uint8 pixels, float32 and float64
// coordinates, ranks 2 and 3, chosen by fast_path.cpp through select_avx512_pass (fast_path.hpp)
// on processors with AVX-512 F, BW, VL and VBMI.
//
// Why by hand: GCC vectorises the generic interior pass (dense_gather_body) but emulates its
// gathers with one scalar load and one insert per tap, and on virtual machines the position, weight
// and offset arrays that the two generic stages pass each other cost as much again. This pass does
// both stages for 16 points at a time in registers and reads the taps along x of a point with one
// load per row.
//
// It computes exactly what classify_points and dense_gather_body compute, in the same order:
//  - u from the coordinate as pixel_position does (x / 2 and x * 0.5 are the same IEEE operation:
//    both round the same real number);
//  - the clamped stand-in "safe" (max(lo, u) sends NaN to lo, then min with the last value below
//    hi), the first tap by Interp::interior_first, and the weights by Interp::weights itself,
//    instantiated for a vector type whose operators are the lane-wise IEEE operations;
//  - each tap weight (1 * w_outer) * ... * w_inner (1 * w is w exactly), and the sum over taps in
//    tap order starting from +0 (so a -0 product still gives +0, as in the reference), summed
//    again under the zero-weight rule where a float32 sum is NaN (sampling_policies.hpp);
// and writes every point of the block as if it were interior, then fill points and (float32)
// points near an edge as the generic stages would. The points it leaves are listed for the
// generic edge stage (PassResult). No fused multiply-add can form: lib/core builds with
// -ffp-contract=off, and intrinsics never contract.

#pragma once

#include "fast_path.hpp"

#if defined(GRIDWARP_AVX2_DISPATCH)

namespace gridwarp::detail {
namespace {

// AVX-512 F, BW, VL and VBMI (Ice Lake, Zen 4 and later): the byte permutations need VBMI.
#define GRIDWARP_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

// 16 floats, with the lane-wise IEEE operations that the interpolation policies' weights() use.
// The operators are GCC vector arithmetic rather than intrinsics so that they need no target of
// their own: inlined into the AVX-512 functions below they become single zmm instructions.
// (Parameters by reference: a 64-byte vector passed by value outside an AVX-512 function draws
// GCC's ABI note, though these are always inlined.)
struct F32x16 {
    __m512 v;
    F32x16() = default;
    GRIDWARP_ALWAYS_INLINE F32x16(float x) : v(__m512{} + x) {}  // NOLINT: the policies write C(1)
    GRIDWARP_ALWAYS_INLINE explicit F32x16(const __m512& x) : v(x) {}
};
GRIDWARP_ALWAYS_INLINE F32x16 operator+(const F32x16& a, const F32x16& b) { return F32x16(a.v + b.v); }
GRIDWARP_ALWAYS_INLINE F32x16 operator-(const F32x16& a, const F32x16& b) { return F32x16(a.v - b.v); }
GRIDWARP_ALWAYS_INLINE F32x16 operator*(const F32x16& a, const F32x16& b) { return F32x16(a.v * b.v); }

// The K taps from each lane's offset along the innermost axis (stride 1) in each of T rows (the
// outer taps), tap k of row t into v[t][k]. Scalar loads, not the gather instructions: on the
// processor measured (docs/performance.md) a 32-bit load per tap, a 64-bit load per pair of taps or
// a 128-bit load per four, and shuffles into place, take less time than vgatherdps / vgatherdpd for
// the same elements. All T rows are read point by point, so that each point's offset is loaded
// once rather than once per row (GCC keeps no 16 offsets in registers).
template <int K, int T>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void gather_rows_x16(const float* const* row, const std::int32_t* offset,
                                                                   __m512 (*v)[K]) {
    if constexpr (K == 1) {
        __m128 quad[T][4];
        for (int j = 0; j < 4; ++j) {
            const std::int64_t o0 = offset[4 * j], o1 = offset[4 * j + 1], o2 = offset[4 * j + 2], o3 = offset[4 * j + 3];
            for (int t = 0; t < T; ++t) {
                const float* p = row[t];
                __m128 q = _mm_load_ss(p + o0);
                q = _mm_insert_ps(q, _mm_load_ss(p + o1), 0x10);
                q = _mm_insert_ps(q, _mm_load_ss(p + o2), 0x20);
                quad[t][j] = _mm_insert_ps(q, _mm_load_ss(p + o3), 0x30);
            }
        }
        for (int t = 0; t < T; ++t) {
            v[t][0] = _mm512_insertf32x4(_mm512_insertf32x4(_mm512_insertf32x4(_mm512_castps128_ps512(quad[t][0]), quad[t][1], 1),
                                                            quad[t][2], 2), quad[t][3], 3);
        }
    } else if constexpr (K == 2) {
        // Two points' pairs per 128-bit lane: point 2j in the low half, point 2j+1 in the high half.
        __m128 pairs[T][8];
        for (int j = 0; j < 8; ++j) {
            const std::int64_t even = offset[2 * j], odd = offset[2 * j + 1];
            for (int t = 0; t < T; ++t) {
                pairs[t][j] = _mm_castsi128_ps(load_two_8_byte_blocks(row[t] + even, row[t] + odd));
            }
        }
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        for (int t = 0; t < T; ++t) {
            const __m128* q = pairs[t];
            const __m512 a = _mm512_insertf32x4(_mm512_insertf32x4(_mm512_insertf32x4(_mm512_castps128_ps512(q[0]), q[1], 1), q[2], 2), q[3], 3);
            const __m512 b = _mm512_insertf32x4(_mm512_insertf32x4(_mm512_insertf32x4(_mm512_castps128_ps512(q[4]), q[5], 1), q[6], 2), q[7], 3);
            v[t][0] = _mm512_permutex2var_ps(a, even, b);
            v[t][1] = _mm512_permutex2var_ps(a, odd, b);
        }
    } else {
        static_assert(K == 4);
        // One point's four taps per 128-bit lane: quad[t][j] holds points 4j..4j+3.
        __m512 quad[T][4];
        for (int j = 0; j < 4; ++j) {
            const std::int64_t o0 = offset[4 * j], o1 = offset[4 * j + 1], o2 = offset[4 * j + 2], o3 = offset[4 * j + 3];
            for (int t = 0; t < T; ++t) {
                const float* p = row[t];
                quad[t][j] = _mm512_insertf32x4(
                    _mm512_insertf32x4(_mm512_insertf32x4(_mm512_castps128_ps512(_mm_loadu_ps(p + o0)), _mm_loadu_ps(p + o1), 1),
                                       _mm_loadu_ps(p + o2), 2),
                    _mm_loadu_ps(p + o3), 3);
            }
        }
        for (int t = 0; t < T; ++t) {
            for (int k = 0; k < 4; ++k) {
                // Tap k of point i is element 4 * (i % 8) + k of the pair (quad[2h], quad[2h+1]), h = i / 8.
                const __m512i index = _mm512_setr_epi32(k, 4 + k, 8 + k, 12 + k, 16 + k, 20 + k, 24 + k, 28 + k,
                                                        k, 4 + k, 8 + k, 12 + k, 16 + k, 20 + k, 24 + k, 28 + k);
                const __m512 low = _mm512_permutex2var_ps(quad[t][0], index, quad[t][1]);
                const __m512 high = _mm512_permutex2var_ps(quad[t][2], index, quad[t][3]);
                v[t][k] = _mm512_mask_mov_ps(low, 0xFF00, high);
            }
        }
    }
}

// The same for int16 pixels: each point's K taps along x in one 16-, 32- or 64-bit load per row,
// widened to int32 and converted to float (exact: float holds every int16). The taps are a point's
// own, so no load reaches past them.
template <int K, int T>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void gather_rows_x16(const std::int16_t* const* row, const std::int32_t* offset,
                                                                   __m512 (*v)[K]) {
    for (int t = 0; t < T; ++t) {
        const std::int16_t* p = row[t];
        if constexpr (K == 1) {
            // Four points' values per 64-bit word.
            std::uint64_t word[4];
            for (int j = 0; j < 4; ++j) {
                word[j] = 0;
                for (int i = 0; i < 4; ++i) word[j] |= std::uint64_t{load_unaligned<std::uint16_t>(p + offset[4 * j + i])} << (16 * i);
            }
            const __m256i values = _mm256_setr_epi64x(static_cast<long long>(word[0]), static_cast<long long>(word[1]),
                                                      static_cast<long long>(word[2]), static_cast<long long>(word[3]));
            v[t][0] = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(values));
        } else if constexpr (K == 2) {
            // Point i's pair in 32-bit lane i: tap 0 in its low half, tap 1 in its high half.
            std::uint64_t word[8];
            for (int j = 0; j < 8; ++j) {
                word[j] = std::uint64_t{load_unaligned<std::uint32_t>(p + offset[2 * j])} |
                          (std::uint64_t{load_unaligned<std::uint32_t>(p + offset[2 * j + 1])} << 32);
            }
            const __m512i pairs = _mm512_setr_epi64(static_cast<long long>(word[0]), static_cast<long long>(word[1]),
                                                    static_cast<long long>(word[2]), static_cast<long long>(word[3]),
                                                    static_cast<long long>(word[4]), static_cast<long long>(word[5]),
                                                    static_cast<long long>(word[6]), static_cast<long long>(word[7]));
            v[t][0] = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(pairs, 16), 16));
            v[t][1] = _mm512_cvtepi32_ps(_mm512_srai_epi32(pairs, 16));
        } else {
            static_assert(K == 4);
            // Point i's four taps in 64-bit lane i % 8 of half[i / 8]; a word permutation picks tap k
            // of all 16 points.
            std::uint64_t word[16];
            for (int i = 0; i < 16; ++i) word[i] = load_unaligned<std::uint64_t>(p + offset[i]);
            __m512i half[2];
            for (int h = 0; h < 2; ++h) {
                const std::uint64_t* w = word + 8 * h;
                half[h] = _mm512_setr_epi64(static_cast<long long>(w[0]), static_cast<long long>(w[1]), static_cast<long long>(w[2]),
                                            static_cast<long long>(w[3]), static_cast<long long>(w[4]), static_cast<long long>(w[5]),
                                            static_cast<long long>(w[6]), static_cast<long long>(w[7]));
            }
            for (int k = 0; k < 4; ++k) {
                alignas(64) std::int16_t index[32] = {};
                for (int i = 0; i < 16; ++i) index[i] = static_cast<std::int16_t>(i < 8 ? 4 * i + k : 32 + 4 * (i - 8) + k);
                const __m512i picked = _mm512_permutex2var_epi16(half[0], _mm512_load_si512(index), half[1]);
                v[t][k] = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(picked)));
            }
        }
    }
}

// How many outer taps (rows) sample_group reads together: all of linear's (faster than one at a
// time), one for cubic (two at a time spill registers).
template <int K, int OuterTaps>
constexpr int kRowsTogether = K == 4 ? 1 : (OuterTaps < 4 ? OuterTaps : 4);

// 8 doubles, as F32x16 for the double-coordinate planner.
struct F64x8 {
    __m512d v;
    F64x8() = default;
    GRIDWARP_ALWAYS_INLINE F64x8(double x) : v(__m512d{} + x) {}  // NOLINT: the policies write C(1)
    GRIDWARP_ALWAYS_INLINE explicit F64x8(const __m512d& x) : v(x) {}
};
GRIDWARP_ALWAYS_INLINE F64x8 operator+(const F64x8& a, const F64x8& b) { return F64x8(a.v + b.v); }
GRIDWARP_ALWAYS_INLINE F64x8 operator-(const F64x8& a, const F64x8& b) { return F64x8(a.v - b.v); }
GRIDWARP_ALWAYS_INLINE F64x8 operator*(const F64x8& a, const F64x8& b) { return F64x8(a.v * b.v); }

// The lane-wise operations the planner needs, for float (16 lanes) and double (8 lanes)
// coordinates. Integers (first taps, offsets) are 32-bit lanes in both.
template <class C> struct Lanes;

template <> struct Lanes<float> {
    static constexpr int kCount = 16;
    using Vec = __m512;
    using Int = __m512i;
    using Mask = __mmask16;
    using Policy = F32x16;
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec set1(float x) { return _mm512_set1_ps(x); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
    // max(u, lo) gives lo for NaN u (the second operand wins where either is NaN).
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec min(Vec a, Vec b) { return _mm512_min_ps(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Mask ge(Vec a, Vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Mask lt(Vec a, Vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int truncate(Vec a) { return _mm512_cvttps_epi32(a); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec from_int(Int a) { return _mm512_cvtepi32_ps(a); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int set1_int(std::int32_t x) { return _mm512_set1_epi32(x); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int add_int(Int a, Int b) { return _mm512_add_epi32(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int sub_int(Int a, Int b) { return _mm512_sub_epi32(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int mul_int(Int a, Int b) { return _mm512_mullo_epi32(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec load(const float* p, int n) {
        return n == kCount ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
    }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec pick2(Vec a, const std::int32_t* index, Vec b) {
        return _mm512_permutex2var_ps(a, _mm512_loadu_si512(index), b);
    }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec pick_where(Vec into, Mask where, const std::int32_t* index, Vec from) {
        return _mm512_mask_permutexvar_ps(into, where, _mm512_loadu_si512(index), from);
    }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Mask finite(Vec a) {
        return _mm512_cmp_ps_mask(_mm512_abs_ps(a), set1(std::numeric_limits<float>::max()), _CMP_LE_OQ);
    }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec abs(Vec a) { return _mm512_abs_ps(a); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Mask le(Vec a, Vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Mask gt(Vec a, Vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int mask_to_int(Mask m) { return _mm512_maskz_set1_epi32(m, 1); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static __m512i widen_int(Int a) { return a; }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int narrow_int(__m512i a) { return a; }
};

template <> struct Lanes<double> {
    static constexpr int kCount = 8;
    using Vec = __m512d;
    using Int = __m256i;
    using Mask = __mmask8;
    using Policy = F64x8;
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec set1(double x) { return _mm512_set1_pd(x); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec add(Vec a, Vec b) { return _mm512_add_pd(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec sub(Vec a, Vec b) { return _mm512_sub_pd(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec mul(Vec a, Vec b) { return _mm512_mul_pd(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec max(Vec a, Vec b) { return _mm512_max_pd(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec min(Vec a, Vec b) { return _mm512_min_pd(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Mask ge(Vec a, Vec b) { return _mm512_cmp_pd_mask(a, b, _CMP_GE_OQ); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Mask lt(Vec a, Vec b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int truncate(Vec a) { return _mm512_cvttpd_epi32(a); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec from_int(Int a) { return _mm512_cvtepi32_pd(a); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int set1_int(std::int32_t x) { return _mm256_set1_epi32(x); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int add_int(Int a, Int b) { return _mm256_add_epi32(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int sub_int(Int a, Int b) { return _mm256_sub_epi32(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int mul_int(Int a, Int b) { return _mm256_mullo_epi32(a, b); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec load(const double* p, int n) {
        return n == kCount ? _mm512_loadu_pd(p) : _mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << n) - 1u), p);
    }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec pick2(Vec a, const std::int32_t* index, Vec b) {
        return _mm512_permutex2var_pd(a, _mm512_cvtepi32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(index))), b);
    }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec pick_where(Vec into, Mask where, const std::int32_t* index, Vec from) {
        return _mm512_mask_permutexvar_pd(into, where, _mm512_cvtepi32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(index))), from);
    }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Mask finite(Vec a) {
        return _mm512_cmp_pd_mask(_mm512_abs_pd(a), set1(std::numeric_limits<double>::max()), _CMP_LE_OQ);
    }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Vec abs(Vec a) { return _mm512_abs_pd(a); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Mask le(Vec a, Vec b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Mask gt(Vec a, Vec b) { return _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int mask_to_int(Mask m) { return _mm256_maskz_set1_epi32(m, 1); }
    // 8 lanes widened to 16 (the upper 8 zero) for the 16-lane integer helpers, and back.
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static __m512i widen_int(Int a) { return _mm512_zextsi256_si512(a); }
    GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE static Int narrow_int(__m512i a) { return _mm512_castsi512_si256(a); }
};

// Coordinates k = 0..Rank-1 of up to L points stored point after point (x, y[, z], x, ...):
// coordinate[k] lane i = xyz[i * Rank + k]; lanes past `lanes` read as 0.
template <class C, int Rank>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void deinterleave(const C* xyz, int lanes, typename Lanes<C>::Vec* coordinate) {
    using L = Lanes<C>;
    constexpr int N = L::kCount;
    typename L::Vec part[Rank];
    const int values = lanes * Rank;
    for (int j = 0; j < Rank; ++j) part[j] = L::load(xyz + N * j, std::clamp(values - N * j, 0, N));
    for (int k = 0; k < Rank; ++k) {
        // Value i * Rank + k lies in part[(i * Rank + k) / N]: take it from parts 0 and 1, then (3-D)
        // from part 2 where it lies there.
        alignas(64) std::int32_t index[16] = {};
        for (int i = 0; i < N; ++i) index[i] = (i * Rank + k) & (2 * N - 1);
        typename L::Vec value = L::pick2(part[0], index, part[1]);
        if constexpr (Rank == 3) {
            unsigned from_third = 0;
            for (int i = 0; i < N; ++i) {
                if (i * Rank + k >= 2 * N) from_third |= 1u << i;
                index[i] = (i * Rank + k) & (N - 1);
            }
            value = L::pick_where(value, static_cast<typename L::Mask>(from_third), index, part[2]);
        }
        coordinate[k] = value;
    }
}

// Two halves of 8 lanes (the double-coordinate planner's) as one vector of 16: weights narrowed
// to float, integers joined.
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE __m512 join_halves(const __m512d& low, const __m512d& high) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(_mm512_cvtpd_ps(low))),
                                               _mm256_castps_pd(_mm512_cvtpd_ps(high)), 1));
}
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE __m512i join_halves(const __m256i& low, const __m256i& high) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

// LinearRow's coordinate k of 8 points in double, from their base coordinates.
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE __m512d linear_coordinate_x8(const LinearRow& row, const __m512d& base, int k) {
    return _mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(row.slope[k]), base), _mm512_set1_pd(row.offset[k]));
}

// The base coordinates of up to 8 points from innermost index `index` on (a masked load: never
// past the row's end; lanes past `lanes` read 0, which plan to the clamped stand-in like any lane).
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE __m512d linear_base_x8(const LinearRow& row, std::int64_t index, int lanes) {
    return _mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << std::clamp(lanes, 0, 8)) - 1u), row.base + index);
}

// Coordinates k = 0..Rank-1 of the points p .. p + lanes - 1 (stored: lanes past `lanes` read as 0).
template <class C, int Rank>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void read_coordinates(const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                                    typename Lanes<C>::Vec* coordinate) {
    if (reader.linear == nullptr) {
        deinterleave<C, Rank>(reader.xyz + p * Rank, lanes, coordinate);
        return;
    }
    const LinearRow& row = *reader.linear;
    const std::int64_t index = reader.first_index + p;
    if constexpr (std::is_same_v<C, double>) {
        // (float64 coordinates: the values are used as computed.)
        const __m512d base = linear_base_x8(row, index, lanes);
        for (int k = 0; k < Rank; ++k) coordinate[k] = linear_coordinate_x8(row, base, k);
    } else {
        // float32 coordinates: rounded to float, as AffinePositions::row rounds them.
        const __m512d base_low = linear_base_x8(row, index, lanes), base_high = linear_base_x8(row, index + 8, lanes - 8);
        for (int k = 0; k < Rank; ++k) {
            coordinate[k] = join_halves(linear_coordinate_x8(row, base_low, k), linear_coordinate_x8(row, base_high, k));
        }
    }
}

// pixel_position<Kind> lane-wise: the same operations, with / 2 as * 0.5.
template <PositionKind Kind, class C>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE typename Lanes<C>::Vec pixel_position_lanes(typename Lanes<C>::Vec g, C extent) {
    using L = Lanes<C>;
    const auto one = L::set1(C(1)), half = L::set1(C(0.5)), d = L::set1(extent);
    if constexpr (Kind == PositionKind::Pixel) {
        return g;
    } else if constexpr (Kind == PositionKind::NormalizedCorners) {
        return L::mul(L::mul(L::add(g, one), half), L::sub(d, one));
    } else {
        return L::mul(L::sub(L::mul(L::add(g, one), d), one), half);
    }
}

// Interp::interior_first lane-wise, for safe (finite, inside [lo, hi)) positions.
template <class Interp, class C>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE typename Lanes<C>::Int interior_first_lanes(typename Lanes<C>::Vec safe) {
    using L = Lanes<C>;
    if constexpr (Interp::taps == 1) {
        // (u + 1.5 * 2^p) - 1.5 * 2^p rounds to an integer (ties to even), then converts exactly.
        const auto round = L::set1(C(1.5) * C(std::int64_t{1} << (std::numeric_limits<C>::digits - 1)));
        return L::truncate(L::sub(L::add(safe, round), round));
    } else if constexpr (Interp::taps == 2) {
        return L::truncate(safe);
    } else {
        static_assert(Interp::taps == 4);
        return L::sub_int(L::truncate(safe), L::set1_int(1));
    }
}

// What the planner gives the sampling stage for 16 points: the offset of each point's first tap,
// which points are interior, and the tap weights in float (the compute type's real type of every
// pixel type this pass serves), in tap order: outer taps (z, y) times the K taps along x.
template <int Rank, int K>
struct PlannedGroup {
    static constexpr int kOuterTaps = Rank == 2 ? K : K * K;
    alignas(64) std::int32_t offset[16];
    __mmask16 interior;
    __mmask16 fill_zeros;      // zeros padding's fill points: every tap of some axis outside, or not finite
    __mmask16 fill_nonfinite;  // every padding's fill points: some coordinate not finite
    __m512 weight[kOuterTaps][K];
};

// Which lanes are interior on every axis: lo <= u < hi (false for NaN), u by axis, outermost first.
template <class C, int Rank>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE unsigned interior_lanes(const typename Lanes<C>::Vec (&u)[Rank],
                                                                      const PlannerAxes<C, Rank>& axes) {
    using L = Lanes<C>;
    const auto lo = L::set1(axes.lo);
    unsigned inside = ~0u;
    for (int a = 0; a < Rank; ++a) inside &= static_cast<unsigned>(L::ge(u[a], lo) & L::lt(u[a], L::set1(axes.hi[a])));
    return inside;
}

// group of 16, the weights narrowed to float.
template <int Rank, int K>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void join_planned_halves(const __m256i (&offset)[2],
                                                                       const __m512d (&weight)[2][PlannedGroup<Rank, K>::kOuterTaps][K],
                                                                       PlannedGroup<Rank, K>& group) {
    _mm512_store_si512(group.offset, join_halves(offset[0], offset[1]));
    if constexpr (K > 1) {
        for (int o = 0; o < PlannedGroup<Rank, K>::kOuterTaps; ++o) {
            for (int k = 0; k < K; ++k) group.weight[o][k] = join_halves(weight[0][o][k], weight[1][o][k]);
        }
    }
}

// Plans L = Lanes<C>::kCount points: offsets, interior bits and tap weights in C, each as
// classify_points and tap_weight compute them (tap weight: 1 * w_outer ... * w_x in C, then
// converted to float).
// KnownInterior: every one of the L points is known to be interior (known_interior_span), so no
// point needs the tests, the clamped stand-in or the fill rules: u itself is safe. The same holds
// where the interior tests alone pass for all L points (an interior point has finite coordinates
// and taps within reach), which is most groups of a warp: those skip the rest of the tests too.
// (For float32 pixels such groups are taken by plan_interior_group first; this serves uint8.)
template <PositionKind Kind, class Interp, int Rank, class C, bool KnownInterior>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void plan_lanes(const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                              const PlannerAxes<C, Rank>& axes,
                                                              typename Lanes<C>::Int& offset, unsigned& interior,
                                                              unsigned& fill_zeros, unsigned& fill_nonfinite,
                                                              typename Lanes<C>::Vec (*tap_weight)[Interp::taps]) {
    using L = Lanes<C>;
    using P = typename L::Policy;
    constexpr int K = Interp::taps;
    const unsigned active = (1u << lanes) - 1u;
    typename L::Vec coordinate[Rank];
    read_coordinates<C, Rank>(reader, p, lanes, coordinate);
    // Axis a (outermost first) is coordinate Rank - 1 - a.
    typename L::Vec u[Rank];
    for (int a = 0; a < Rank; ++a) u[a] = pixel_position_lanes<Kind, C>(coordinate[Rank - 1 - a], axes.extent[a]);
    unsigned inside = active;
    if constexpr (!KnownInterior) inside &= interior_lanes<C, Rank>(u, axes);
    // (Only full groups: the first taps of lanes past `lanes` are read too, and must come from the
    // clamped stand-ins. Not cubic: the branch made its planning slower.)
    const bool all_interior = KnownInterior || (K <= 2 && lanes == L::kCount && inside == active);
    unsigned within_reach = active;  // on every axis, some tap inside (false for NaN)
    unsigned finite = active;        // every coordinate finite (|g| <= max, as Pad::fills)
    offset = L::set1_int(0);
    P weight[Rank][K] = {};
    for (int a = 0; a < Rank; ++a) {
        auto safe = u[a];
        if (!all_interior) {
            finite &= static_cast<unsigned>(L::finite(coordinate[Rank - 1 - a]));
            within_reach &= static_cast<unsigned>(L::ge(u[a], L::set1(axes.outside_below)) & L::lt(u[a], L::set1(axes.outside_from[a])));
            safe = L::min(L::max(u[a], L::set1(axes.lo)), L::set1(axes.below_hi[a]));  // NaN -> lo
        }
        const auto first = interior_first_lanes<Interp, C>(safe);
        offset = L::add_int(offset, L::mul_int(first, L::set1_int(axes.stride[a])));
        if constexpr (K > 1) Interp::weights(P(safe), P(L::from_int(first)), weight[a]);
    }
    interior = inside;
    fill_zeros = ~within_reach & active;
    fill_nonfinite = ~finite & active;
    if constexpr (K > 1) tap_weights_of<Rank, K>(weight, tap_weight);
}

template <PositionKind Kind, class Interp, int Rank, class C, bool KnownInterior>
GRIDWARP_TARGET_AVX512 GRIDWARP_STAGE void plan_group(const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                              const PlannerAxes<C, Rank>& axes,
                                                              PlannedGroup<Rank, Interp::taps>& group) {
    constexpr int K = Interp::taps;
    constexpr int kOuterTaps = PlannedGroup<Rank, K>::kOuterTaps;
    if constexpr (std::is_same_v<C, float>) {
        __m512i offset;
        unsigned interior, fill_zeros, fill_nonfinite;
        plan_lanes<Kind, Interp, Rank, float, KnownInterior>(reader, p, lanes, axes, offset, interior, fill_zeros, fill_nonfinite, group.weight);
        _mm512_store_si512(group.offset, offset);
        group.interior = static_cast<__mmask16>(interior);
        group.fill_zeros = static_cast<__mmask16>(fill_zeros);
        group.fill_nonfinite = static_cast<__mmask16>(fill_nonfinite);
    } else {
        // Two halves of 8 points; tap weights narrowed to float once computed in double.
        __m256i offset[2];
        unsigned interior[2], fill_zeros[2], fill_nonfinite[2];
        __m512d weight[2][kOuterTaps][K];
        for (int h = 0; h < 2; ++h) {
            plan_lanes<Kind, Interp, Rank, double, KnownInterior>(reader, p + 8 * h, std::clamp(lanes - 8 * h, 0, 8), axes, offset[h],
                                                   interior[h], fill_zeros[h], fill_nonfinite[h], weight[h]);
        }
        join_planned_halves<Rank, K>(offset, weight, group);
        group.interior = static_cast<__mmask16>(interior[0] | (interior[1] << 8));
        group.fill_zeros = static_cast<__mmask16>(fill_zeros[0] | (fill_zeros[1] << 8));
        group.fill_nonfinite = static_cast<__mmask16>(fill_nonfinite[0] | (fill_nonfinite[1] << 8));
    }
}

// Plans L = Lanes<C>::kCount points that are all interior, as plan_lanes plans interior points:
// returns false, having planned nothing, where some point is not interior (Known: the caller
// knows that every point is, so the test is left out). An interior point has finite coordinates
// and taps within reach, so u itself is the safe position and no fill rule applies.
template <PositionKind Kind, class Interp, int Rank, class C, bool Known>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE bool plan_interior_lanes(const CoordinateReader<C>& reader, std::int64_t p,
                                                                       const PlannerAxes<C, Rank>& axes,
                                                                       typename Lanes<C>::Int& offset,
                                                                       typename Lanes<C>::Vec (*tap_weight)[Interp::taps]) {
    using L = Lanes<C>;
    using P = typename L::Policy;
    constexpr int K = Interp::taps;
    typename L::Vec coordinate[Rank];
    read_coordinates<C, Rank>(reader, p, L::kCount, coordinate);
    typename L::Vec u[Rank];
    for (int a = 0; a < Rank; ++a) u[a] = pixel_position_lanes<Kind, C>(coordinate[Rank - 1 - a], axes.extent[a]);
    if constexpr (!Known) {
        if (interior_lanes<C, Rank>(u, axes) != (1u << L::kCount) - 1u) return false;
    }
    offset = L::set1_int(0);
    P weight[Rank][K] = {};
    for (int a = 0; a < Rank; ++a) {
        const auto first = interior_first_lanes<Interp, C>(u[a]);
        offset = L::add_int(offset, L::mul_int(first, L::set1_int(axes.stride[a])));
        if constexpr (K > 1) Interp::weights(P(u[a]), P(L::from_int(first)), weight[a]);
    }
    if constexpr (K > 1) tap_weights_of<Rank, K>(weight, tap_weight);
    return true;
}

// plan_interior_lanes for 16 points: false, with nothing planned, where some point is not interior.
template <PositionKind Kind, class Interp, int Rank, class C, bool Known>
GRIDWARP_TARGET_AVX512 GRIDWARP_STAGE bool plan_interior_group(const CoordinateReader<C>& reader, std::int64_t p,
                                                                       const PlannerAxes<C, Rank>& axes,
                                                                       PlannedGroup<Rank, Interp::taps>& group) {
    constexpr int K = Interp::taps;
    constexpr int kOuterTaps = PlannedGroup<Rank, K>::kOuterTaps;
    if constexpr (std::is_same_v<C, float>) {
        __m512i offset;
        if (!plan_interior_lanes<Kind, Interp, Rank, float, Known>(reader, p, axes, offset, group.weight)) return false;
        _mm512_store_si512(group.offset, offset);
    } else {
        __m256i offset[2];
        __m512d weight[2][kOuterTaps][K];
        for (int h = 0; h < 2; ++h) {
            if (!plan_interior_lanes<Kind, Interp, Rank, double, Known>(reader, p + 8 * h, axes, offset[h], weight[h])) return false;
        }
        join_planned_halves<Rank, K>(offset, weight, group);
    }
    return true;
}

// ---- Sampling 16 planned points: float32 and int16 pixels (one channel at a time).

// 16 sums stored as float32, the fill points given the fill value.
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void store_sums(float* o, __m512 sum, int lanes, float fill_stored, __mmask16 fill) {
    sum = _mm512_mask_blend_ps(fill, sum, _mm512_set1_ps(fill_stored));
    // (A masked store only for a partial group: on AMD processors it is far slower.)
    if (lanes == 16) {
        _mm512_storeu_ps(o, sum);
    } else {
        _mm512_mask_storeu_ps(o, static_cast<__mmask16>((1u << lanes) - 1u), sum);
    }
}

// store_finite<int16_t> lane-wise: round half to even (given with the instruction, whatever the
// caller's MXCSR says), then saturate. The sums are finite and within int32 (int16 taps, weights
// summing to at most 3.4 in magnitude), so converting before saturating clamps the same way.
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void store_sums(std::int16_t* o, __m512 sum, int lanes, std::int16_t fill_stored,
                                                              __mmask16 fill) {
    const __m512i rounded = _mm512_cvt_roundps_epi32(sum, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i values = _mm256_mask_blend_epi16(fill, _mm512_cvtsepi32_epi16(rounded), _mm256_set1_epi16(fill_stored));
    if (lanes == 16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), values);
    } else {
        _mm256_mask_storeu_epi16(o, static_cast<__mmask16>((1u << lanes) - 1u), values);
    }
}

// One channel's weighted sums of 16 points (K > 1): the taps from `in` at the first-tap offsets
// `offset`. SkipZeroWeights: a tap leaves the sum as it was in the lanes where its weight is zero
// (the zero-weight rule, sampling_policies.hpp).
template <int Rank, int K, class S, bool SkipZeroWeights>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE __m512 weighted_sums(const PlannedGroup<Rank, K>& group, const std::int32_t* offset,
                                                                   const std::int32_t* outer_offset, const S* in) {
    constexpr int kOuterTaps = PlannedGroup<Rank, K>::kOuterTaps;
    constexpr int kTogether = kRowsTogether<K, kOuterTaps>;
    static_assert(kOuterTaps % kTogether == 0);
    __m512 sum = _mm512_setzero_ps();
    for (int t0 = 0; t0 < kOuterTaps; t0 += kTogether) {
        const S* row[kTogether];
        for (int t = 0; t < kTogether; ++t) row[t] = in + outer_offset[t0 + t];
        __m512 v[kTogether][K];
        gather_rows_x16<K, kTogether>(row, offset, v);
        for (int t = 0; t < kTogether; ++t) {
            for (int k = 0; k < K; ++k) {
                const __m512 weight = group.weight[t0 + t][k];
                const __m512 term = _mm512_mul_ps(weight, v[t][k]);
                if constexpr (SkipZeroWeights) {
                    sum = _mm512_mask_add_ps(sum, _mm512_cmp_ps_mask(weight, _mm512_setzero_ps(), _CMP_NEQ_UQ), sum, term);
                } else {
                    sum = _mm512_add_ps(sum, term);
                }
            }
        }
    }
    return sum;
}

// The same with the zero-weight rule, for the groups whose plain sums came out NaN: a function of
// its own, so that the common path's code and registers stay as they were.
template <int Rank, int K, class S>
GRIDWARP_TARGET_AVX512 GRIDWARP_NOINLINE __m512 weighted_sums_skipping_zero_weights(const PlannedGroup<Rank, K>& group,
                                                                                    const std::int32_t* offset,
                                                                                    const std::int32_t* outer_offset, const S* in) {
    return weighted_sums<Rank, K, S, true>(group, offset, outer_offset, in);
}

// One channel's 16 points: the taps from `in` at the first-tap offsets `offset` (the group's own,
// or a copy of them), the sum written to `o`.
template <int Rank, int K, class S>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void sample_channel(const PlannedGroup<Rank, K>& group, const std::int32_t* offset,
                                                                  int lanes, const std::int32_t* outer_offset, const S* in,
                                                                  S* o, S fill_stored, __mmask16 fill) {
    __m512 sum;
    if constexpr (K == 1) {
        __m512 v[1][1];
        gather_rows_x16<1, 1>(&in, offset, v);
        sum = v[0][0];  // nearest copies the value
    } else {
        sum = weighted_sums<Rank, K, S, false>(group, offset, outer_offset, in);
        // The zero-weight rule: only a NaN sum can differ from the sum without the taps of weight
        // zero (sampling_policies.hpp); int16 values and the weights are finite, so their sums are too.
        if constexpr (std::is_same_v<S, float>) {
            if (__builtin_expect(_mm512_cmp_ps_mask(sum, sum, _CMP_UNORD_Q) != 0, 0)) {
                sum = weighted_sums_skipping_zero_weights<Rank, K, S>(group, offset, outer_offset, in);
            }
        }
    }
    store_sums(o, sum, lanes, fill_stored, fill);
}

template <int Rank, int K, class S, std::enable_if_t<kPlanarPassPixel<S>, int> = 0>
GRIDWARP_TARGET_AVX512 GRIDWARP_STAGE void sample_group(const PlannedGroup<Rank, K>& group, const std::int32_t* offset,
                                                                int lanes, const std::int32_t* outer_offset, const S* input,
                                                                S* output, const FastOutput<S>& out, __mmask16 fill) {
    // One channel apart: in a loop over channels GCC loads the 16 offsets once for all channels,
    // which needs more registers than there are, and spills them.
    if (out.channels == 1) {
        sample_channel<Rank, K, S>(group, offset, lanes, outer_offset, input, output, out.fill_stored, fill);
        return;
    }
    for (std::int64_t c = 0; c < out.channels; ++c) {
        sample_channel<Rank, K, S>(group, offset, lanes, outer_offset, input + c * out.input_channel_stride,
                                output + c * out.output_channel_stride, out.fill_stored, fill);
    }
}

// ---- Sampling 16 planned points: uint8 pixels, interleaved (HWC: channels adjacent) or planar.
// Each point reads 8 bytes per outer tap from its first tap on (every channel's K taps when
// interleaved, K * channels <= 8; one channel's K taps when planar), with one 64-bit load, and a
// byte permutation (AVX-512 VBMI) picks tap k of channel c of all 16 points.
// (Byte values and the weights are finite, so the sums already keep the zero-weight rule.)

// 8 bytes from base + offset[i] for 16 points: point i in bytes (i % 8) * 8.. of half[i / 8].
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void load_bytes_x16(const std::uint8_t* base, const std::int32_t* offset,
                                                                        __m512i* half) {
    for (int h = 0; h < 2; ++h) {
        __m128i pairs[4];
        for (int j = 0; j < 4; ++j) {
            pairs[j] = load_two_8_byte_blocks(base + offset[8 * h + 2 * j], base + offset[8 * h + 2 * j + 1]);
        }
        half[h] = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(pairs[0]), pairs[1], 1), pairs[2], 2), pairs[3], 3);
    }
}

// The byte permutation that takes byte `b` of each of 16 points' 8-byte loads into byte 0 of
// 32-bit lane i (byte_values zeroes the other three bytes).
GRIDWARP_TARGET_AVX512 inline __m512i byte_picker(int b) {
    alignas(64) std::uint8_t index[64] = {};
    for (int i = 0; i < 16; ++i) index[4 * i] = static_cast<std::uint8_t>((i / 8) * 64 + (i % 8) * 8 + b);
    return _mm512_load_si512(index);
}

// store_finite<uint8_t> lane-wise: round half to even (the rounding given with the instruction,
// whatever the caller's MXCSR says), clamp to [0, 255], convert: 16 bytes. The sums are finite and
// far inside the int32 range (|weights| sum to a few units, pixels are at most 255), so rounding
// before the clamp gives what clamping first would. Linear and nearest sums are never below 0.
template <int K>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE __m128i round_to_bytes(__m512 sum) {
    __m512i rounded = _mm512_cvt_roundps_epi32(sum, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if constexpr (K > 2) rounded = _mm512_max_epi32(rounded, _mm512_setzero_si512());
    return _mm512_cvtusepi32_epi8(rounded);  // unsigned saturation: above 255 gives 255
}

// Stores `bytes` (a multiple of 16, up to 64) of v; whole 64/32/16-byte stores where they fit, a
// masked store only for the tail of a row.
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void store_bytes(std::uint8_t* to, __m512i v, int bytes, int valid) {
    if (valid < bytes) {
        _mm512_mask_storeu_epi8(to, valid >= 64 ? ~__mmask64{0} : ((__mmask64{1} << valid) - 1), v);
        return;
    }
    int done = 0;
    if (bytes - done >= 64) {
        _mm512_storeu_si512(to, v);
        return;
    }
    if (bytes - done >= 32) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), _mm512_castsi512_si256(v));
        done = 32;
    }
    if (bytes - done >= 16) {
        const __m128i part = done == 0 ? _mm512_castsi512_si128(v) : _mm512_extracti32x4_epi32(v, 2);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(to + done), part);
    }
}

// The bytes that `pick` selects from 16 points' loads (load_bytes_x16), as floats. (A function, not a
// lambda: a lambda's body does not inherit the AVX-512 target.)
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE __m512 byte_values(const __m512i* half, const __m512i& pick) {
    return _mm512_cvtepi32_ps(_mm512_maskz_permutex2var_epi8(0x1111111111111111ull, half[0], pick, half[1]));
}

// (The channel count is a template parameter so that the per-channel sums stay in registers.)
template <int Rank, int K, int Channels>
GRIDWARP_TARGET_AVX512 GRIDWARP_STAGE void sample_byte_group(const PlannedGroup<Rank, K>& group, int lanes,
                                                                     const std::int32_t* outer_offset,
                                                                     const std::uint8_t* input, std::uint8_t* output,
                                                                     const FastOutput<std::uint8_t>& out,
                                                                     const ByteLayout& layout, __mmask16 fill) {
    constexpr int kOuterTaps = PlannedGroup<Rank, K>::kOuterTaps;
    constexpr int channels = Channels;
    __m512 sum[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int t = 0; t < kOuterTaps; ++t) {
        if (layout.interleaved_in) {
            __m512i half[2];
            load_bytes_x16(input + outer_offset[t], group.offset, half);
            for (int k = 0; k < K; ++k) {
                for (int c = 0; c < channels; ++c) {
                    const __m512 v = byte_values(half, layout.pick[k][c]);
                    if constexpr (K == 1) {
                        sum[c] = v;
                    } else {
                        sum[c] = _mm512_add_ps(sum[c], _mm512_mul_ps(group.weight[t][k], v));
                    }
                }
            }
        } else {
            for (int c = 0; c < channels; ++c) {
                __m512i half[2];
                load_bytes_x16(input + c * out.input_channel_stride + outer_offset[t], group.offset, half);
                for (int k = 0; k < K; ++k) {
                    const __m512 v = byte_values(half, layout.pick[k][0]);
                    if constexpr (K == 1) {
                        sum[c] = v;
                    } else {
                        sum[c] = _mm512_add_ps(sum[c], _mm512_mul_ps(group.weight[t][k], v));
                    }
                }
            }
        }
    }
    __m128i bytes[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};
    for (int c = 0; c < channels; ++c) {
        bytes[c] = _mm_mask_blend_epi8(fill, round_to_bytes<K>(sum[c]),  // exact for nearest's copies too
                                       _mm_set1_epi8(static_cast<char>(out.fill_stored)));
    }
    if (layout.interleaved_out) {
        __m512i all = _mm512_castsi128_si512(bytes[0]);
        if (channels > 1) all = _mm512_inserti32x4(all, bytes[1], 1);
        if (channels > 2) all = _mm512_inserti32x4(all, bytes[2], 2);
        if (channels > 3) all = _mm512_inserti32x4(all, bytes[3], 3);
        store_bytes(output, _mm512_permutexvar_epi8(layout.interleave, all), 16 * channels, lanes * channels);
    } else {
        for (int c = 0; c < channels; ++c) {
            store_bytes(output + c * out.output_channel_stride, _mm512_castsi128_si512(bytes[c]), 16, lanes);
        }
    }
}

template <int Rank, int K>
GRIDWARP_TARGET_AVX512 GRIDWARP_STAGE void sample_group(const PlannedGroup<Rank, K>& group, int lanes,
                                                                const std::int32_t* outer_offset,
                                                                const std::uint8_t* input, std::uint8_t* output,
                                                                const FastOutput<std::uint8_t>& out,
                                                                const ByteLayout& layout, __mmask16 fill) {
    switch (layout.channels) {
        case 1: return sample_byte_group<Rank, K, 1>(group, lanes, outer_offset, input, output, out, layout, fill);
        case 2: return sample_byte_group<Rank, K, 2>(group, lanes, outer_offset, input, output, out, layout, fill);
        case 3: return sample_byte_group<Rank, K, 3>(group, lanes, outer_offset, input, output, out, layout, fill);
        default: return sample_byte_group<Rank, K, 4>(group, lanes, outer_offset, input, output, out, layout, fill);
    }
}

// ---- Groups whose every point is a fill point (outside the input: the corners of a rotation, the
// margin of a zoom-out): the fill value, with no input read.

GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void fill_group(int lanes, float* output, const FastOutput<float>& out,
                                                              const ByteLayout& /*layout*/) {
    const __m512 fill = _mm512_set1_ps(out.fill_stored);
    for (std::int64_t c = 0; c < out.channels; ++c) {
        float* o = output + c * out.output_channel_stride;
        if (lanes == 16) {
            _mm512_storeu_ps(o, fill);
        } else {
            _mm512_mask_storeu_ps(o, static_cast<__mmask16>((1u << lanes) - 1u), fill);
        }
    }
}

GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void fill_group(int lanes, std::int16_t* output,
                                                              const FastOutput<std::int16_t>& out, const ByteLayout& /*layout*/) {
    for (std::int64_t c = 0; c < out.channels; ++c) {
        store_sums(output + c * out.output_channel_stride, _mm512_setzero_ps(), lanes, out.fill_stored, 0xFFFF);
    }
}

GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void fill_group(int lanes, std::uint8_t* output,
                                                              const FastOutput<std::uint8_t>& out, const ByteLayout& layout) {
    const __m512i fill = _mm512_set1_epi8(static_cast<char>(out.fill_stored));
    if (layout.interleaved_out) {
        store_bytes(output, fill, 16 * layout.channels, lanes * layout.channels);
    } else {
        for (int c = 0; c < layout.channels; ++c) store_bytes(output + c * out.output_channel_stride, fill, 16, lanes);
    }
}

// ---- Points near an edge under border and reflection padding (float32 pixels).
// The same operations as plan_near_points and the gather's near loop: the coordinate bounded by
// Pad::near_bound, the first tap by Interp::near_first, the weights by Interp::weights, every tap
// index mapped by Pad::near_map where Pad::near_ok holds; the sum over taps in tap order from +0.
// Taps are no longer neighbours in memory here, so each is read with a masked gather.

// Lane-wise Pad::near_bound, near_ok and near_map on 32-bit integers.
template <class Pad>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE __m512i near_map_x16(__m512i i, std::int32_t d, bool align_corners) {
    if constexpr (std::is_same_v<Pad, BorderPadding> || std::is_same_v<Pad, ZerosPadding>) {
        // (Zeros: taps outside read the fill value instead; the clamp only keeps the gather inside.)
        return _mm512_min_epi32(_mm512_max_epi32(i, _mm512_setzero_si512()), _mm512_set1_epi32(d - 1));
    } else {
        static_assert(std::is_same_v<Pad, ReflectionPadding>);
        const __m512i below = align_corners ? _mm512_sub_epi32(_mm512_setzero_si512(), i)
                                            : _mm512_sub_epi32(_mm512_set1_epi32(-1), i);
        const __m512i above = _mm512_sub_epi32(_mm512_set1_epi32(align_corners ? 2 * (d - 1) : 2 * d - 1), i);
        __m512i mapped = _mm512_mask_mov_epi32(i, _mm512_cmplt_epi32_mask(i, _mm512_setzero_si512()), below);
        return _mm512_mask_mov_epi32(mapped, _mm512_cmpge_epi32_mask(i, _mm512_set1_epi32(d)), above);
    }
}

template <class Pad>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE __mmask16 near_ok_x16(__m512i first, int taps, std::int32_t d, bool align_corners) {
    if constexpr (std::is_same_v<Pad, BorderPadding> || std::is_same_v<Pad, ZerosPadding>) {
        (void)first, (void)taps, (void)align_corners;
        return d >= 1 ? __mmask16{0xFFFF} : __mmask16{0};
    } else {
        if (d < 2) return 0;
        const std::int32_t lo = align_corners ? 1 - d : -d;
        const std::int32_t hi = align_corners ? 2 * (d - 1) : 2 * d - 1;
        return static_cast<__mmask16>(_mm512_cmpge_epi32_mask(first, _mm512_set1_epi32(lo)) &
                                      _mm512_cmple_epi32_mask(_mm512_add_epi32(first, _mm512_set1_epi32(taps - 1)),
                                                              _mm512_set1_epi32(hi)));
    }
}

// Plans L = Lanes<C>::kCount points as plan_near_points does: their mapped tap indices per axis,
// whether they are near, and their tap weights in C (as tap_weight multiplies them).
template <PositionKind Kind, class Interp, class Pad, int Rank, class C>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void plan_near_lanes(const CoordinateReader<C>& reader, std::int64_t p, int lanes,
                                                                   const InputGeometry& geometry,
                                                                   typename Lanes<C>::Int (*index)[Interp::taps], unsigned& near,
                                                                   unsigned (*inside)[Interp::taps],
                                                                   typename Lanes<C>::Vec (*tap_weight)[Interp::taps]) {
    using L = Lanes<C>;
    using P = typename L::Policy;
    constexpr int K = Interp::taps;
    constexpr C kLimit = C(std::int64_t{1} << 22);
    constexpr C kFoldBeyond = C(1 << 20);
    typename L::Vec coordinate[Rank];
    read_coordinates<C, Rank>(reader, p, lanes, coordinate);
    unsigned ok_all = (1u << lanes) - 1u;
    P weight[Rank][K] = {};
    for (int a = 0; a < Rank; ++a) {
        const auto g = coordinate[Rank - 1 - a];
        const std::int64_t d = geometry.extent[a];
        auto u = pixel_position_lanes<Kind, C>(g, static_cast<C>(d));
        if constexpr (std::is_same_v<Pad, BorderPadding>) {
            u = L::min(L::set1(static_cast<C>(d) + C(1)), L::max(L::set1(C(-2)), u));  // near_bound
        }
        unsigned ok = static_cast<unsigned>(L::lt(L::abs(u), L::set1(kLimit)));
        if constexpr (std::is_same_v<Pad, ReflectionPadding> && Kind != PositionKind::Pixel) {
            ok &= static_cast<unsigned>(L::le(L::abs(g), L::set1(kFoldBeyond)));
        }
        const auto safe = L::min(L::set1(kLimit), L::max(L::set1(-kLimit), u));
        typename L::Int first;
        if constexpr (K == 1) {
            first = interior_first_lanes<Interp, C>(safe);  // the rounding trick holds for |u| < 2^22
        } else {
            const auto truncated = L::truncate(safe);
            // floor_int: truncation, minus 1 where it rounded up.
            first = L::sub_int(truncated, L::mask_to_int(L::gt(L::from_int(truncated), safe)));
            if constexpr (K == 4) first = L::sub_int(first, L::set1_int(1));
        }
        const auto d32 = static_cast<std::int32_t>(d);
        ok &= static_cast<unsigned>(near_ok_x16<Pad>(L::widen_int(first), K, d32, geometry.align_corners));
        if constexpr (K > 1) Interp::weights(P(safe), P(L::from_int(first)), weight[a]);
        for (int k = 0; k < K; ++k) {
            const __m512i tap = _mm512_add_epi32(L::widen_int(first), _mm512_set1_epi32(k));
            index[a][k] = L::narrow_int(near_map_x16<Pad>(tap, d32, geometry.align_corners));
            // Zeros padding: whether the tap is inside [0, d-1] (ZerosPadding::map gives -1 elsewhere).
            inside[a][k] = static_cast<unsigned>(_mm512_cmpge_epi32_mask(tap, _mm512_setzero_si512()) &
                                                 _mm512_cmplt_epi32_mask(tap, _mm512_set1_epi32(d32)));
        }
        ok_all &= ok;
    }
    near = ok_all;
    if constexpr (K > 1) {
        constexpr int kOuterTaps = Rank == 2 ? K : K * K;
        for (int o = 0; o < kOuterTaps; ++o) {
            const P outer = Rank == 2 ? weight[0][o] : weight[0][o / K] * weight[1][o % K];
            for (int k = 0; k < K; ++k) tap_weight[o][k] = (outer * weight[Rank - 1][k]).v;
        }
    }
}

// Samples the `edge` points of a group (float32 pixels) that are near, writes them, and returns
// which they are.
template <PositionKind Kind, class Interp, class Pad, int Rank, class C>
GRIDWARP_TARGET_AVX512 GRIDWARP_STAGE unsigned sample_near_group(const CoordinateReader<C>& reader, std::int64_t p,
                                                                         int lanes, unsigned edge,
                                                                         const InputGeometry& geometry, const float* input,
                                                                         float* output, const FastOutput<float>& out) {
    constexpr int K = Interp::taps;
    constexpr int kOuterTaps = Rank == 2 ? K : K * K;
    __m512i index[Rank][K];
    unsigned inside[Rank][K];
    __m512 weight[kOuterTaps][K];
    unsigned near = 0;
    if constexpr (std::is_same_v<C, float>) {
        plan_near_lanes<Kind, Interp, Pad, Rank, float>(reader, p, lanes, geometry, index, near, inside, weight);
    } else {
        __m256i half_index[2][Rank][K];
        unsigned half_inside[2][Rank][K];
        __m512d half_weight[2][kOuterTaps][K];
        unsigned half_near[2];
        for (int h = 0; h < 2; ++h) {
            plan_near_lanes<Kind, Interp, Pad, Rank, double>(reader, p + 8 * h, std::clamp(lanes - 8 * h, 0, 8), geometry,
                                                             half_index[h], half_near[h], half_inside[h], half_weight[h]);
        }
        near = half_near[0] | (half_near[1] << 8);
        for (int a = 0; a < Rank; ++a) {
            for (int k = 0; k < K; ++k) inside[a][k] = (half_inside[0][a][k] & 0xFFu) | ((half_inside[1][a][k] & 0xFFu) << 8);
        }
        for (int a = 0; a < Rank; ++a) {
            for (int k = 0; k < K; ++k) index[a][k] = join_halves(half_index[0][a][k], half_index[1][a][k]);
        }
        if constexpr (K > 1) {
            for (int o = 0; o < kOuterTaps; ++o) {
                for (int k = 0; k < K; ++k) weight[o][k] = join_halves(half_weight[0][o][k], half_weight[1][o][k]);
            }
        }
    }
    const __mmask16 take = static_cast<__mmask16>(near & edge);
    if (take == 0) return 0;
    // Zeros padding: axis_taps makes a point with no tap inside along some axis the fill value.
    // Outside fill_zeros that happens only to nearest (u in [d - 0.5, d) rounding to d), whose one
    // tap then reads the fill value here, which is the same float; so no case of its own.
    // Tap offsets in tap order: outer taps (z, y), then x.
    __m512i offset[kOuterTaps][K];
    for (int o = 0; o < kOuterTaps; ++o) {
        const int ky = o % K, kz = o / K;
        __m512i outer = _mm512_mullo_epi32(index[Rank - 2][ky], _mm512_set1_epi32(static_cast<std::int32_t>(geometry.stride[Rank - 2])));
        if constexpr (Rank == 3) {
            outer = _mm512_add_epi32(_mm512_mullo_epi32(index[0][kz], _mm512_set1_epi32(static_cast<std::int32_t>(geometry.stride[0]))), outer);
        }
        for (int k = 0; k < K; ++k) {
            offset[o][k] = _mm512_add_epi32(outer, _mm512_mullo_epi32(index[Rank - 1][k],
                                                                        _mm512_set1_epi32(static_cast<std::int32_t>(geometry.stride[Rank - 1]))));
        }
    }
    for (std::int64_t c = 0; c < out.channels; ++c) {
        const float* in = input + c * out.input_channel_stride;
        __m512 sum = _mm512_setzero_ps();
        for (int o = 0; o < kOuterTaps; ++o) {
            // Zeros padding: the taps inside every axis are read, the others are the fill value.
            unsigned tap_inside = 0xFFFFu;
            if constexpr (std::is_same_v<Pad, ZerosPadding>) {
                tap_inside = inside[Rank - 2][o % K] & (Rank == 3 ? inside[0][o / K] : 0xFFFFu);
            }
            for (int k = 0; k < K; ++k) {
                const unsigned read = std::is_same_v<Pad, ZerosPadding> ? (tap_inside & inside[Rank - 1][k]) : 0xFFFFu;
                const __m512 v = _mm512_mask_i32gather_ps(_mm512_set1_ps(out.fill_value), static_cast<__mmask16>(take & read),
                                                          offset[o][k], in, 4);
                if constexpr (K == 1) {
                    sum = v;
                } else {
                    // The zero-weight rule directly (few points): where the weight is zero the sum stays.
                    sum = _mm512_mask_add_ps(sum, _mm512_cmp_ps_mask(weight[o][k], _mm512_setzero_ps(), _CMP_NEQ_UQ), sum,
                                             _mm512_mul_ps(weight[o][k], v));
                }
            }
        }
        _mm512_mask_storeu_ps(output + c * out.output_channel_stride, take, sum);
    }
    return take;
}

// sample_near_group for the call's padding: zeros padding is a template argument of the pass,
// border and reflection a run-time choice here, in the edge groups only.
template <PositionKind Kind, class Interp, bool ZerosPad, int Rank, class C>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE unsigned sample_near_group_of_padding(Padding padding, const CoordinateReader<C>& reader,
                                                                                    std::int64_t p, int lanes, unsigned edge,
                                                                                    const InputGeometry& geometry, const float* input,
                                                                                    float* output, const FastOutput<float>& out) {
    if constexpr (ZerosPad) {
        (void)padding;
        return sample_near_group<Kind, Interp, ZerosPadding, Rank, C>(reader, p, lanes, edge, geometry, input, output, out);
    } else if (padding == Padding::Reflection) {
        return sample_near_group<Kind, Interp, ReflectionPadding, Rank, C>(reader, p, lanes, edge, geometry, input, output, out);
    } else {
        return sample_near_group<Kind, Interp, BorderPadding, Rank, C>(reader, p, lanes, edge, geometry, input, output, out);
    }
}

// ---- The pass.

// A full group of interior points whose sampling waits for the next group's planning (see
// interior_pass_row): its weights, and its first-tap offsets in memory.
template <int Rank, int K>
struct LateGroup {
    PlannedGroup<Rank, K> planned;  // its weights (the sampler reads the offsets below instead)
    alignas(64) std::int32_t offset[16];
    std::int64_t at = -1;  // its first point, or -1: none waiting
};

// Samples the waiting group, if any, with its offsets read from memory (and in 3-D its weights:
// kept in registers until the next group, GCC spilled some of the eight; stored and loaded
// instead, which is faster).
template <int Rank, int K, class S>
GRIDWARP_TARGET_AVX512 GRIDWARP_STAGE void sample_late_group(LateGroup<Rank, K>& late, const std::int32_t* outer_offset,
                                                                     const S* input, S* output, const FastOutput<S>& out) {
    if (late.at < 0) return;
    // (The empty asm hides where the pointer came from, so that what it points to is loaded rather
    // than taken out of the registers that stored it.)
    if constexpr (Rank == 3) {
        const LateGroup<Rank, K>* waiting = &late;
        asm("" : "+r"(waiting));
        sample_group<Rank, K, S>(waiting->planned, waiting->offset, 16, outer_offset, input, output + late.at, out, 0);
    } else {
        const std::int32_t* offset = late.offset;
        asm("" : "+r"(offset));
        sample_group<Rank, K, S>(late.planned, offset, 16, outer_offset, input, output + late.at, out, 0);
    }
    late.at = -1;
}

// The interior pass for one row of `count` points (coordinates innermost-first, as the position
// source writes them). Writes every point of every channel as if it were interior, and says what
// is left to do. last_safe: the last first-tap offset whose 8-byte loads stay inside the input
// (uint8 only). Fill points (Zeros: zeros padding's rule; otherwise non-finite
// coordinates) get the fill value; the remaining points that are not interior are listed in
// edge_points (their number in *edges).
// first_taps receives every point's first-tap offset (clamped stand-ins where not interior), from
// which the input of the rows ahead is prefetched. next_xyz: the next row's stored coordinates,
// asked for a group at a time as this row goes (nullptr: none to ask for); asked for all at once
// after the row, the requests stalled the pass. next_output: where the next row's output
// starts (nullptr: no next row in this run), asked for, ready to be written, a group at a time.
template <PositionKind Kind, class Interp, bool ZerosPad, int Rank, class S, class C>
GRIDWARP_TARGET_AVX512 GRIDWARP_STAGE PassResult interior_pass_row(const CoordinateReader<C>& coordinates, std::int64_t count,
                                                                           const PlannerAxes<C, Rank>& axes,
                                                                           const std::int32_t* outer_offset, std::int64_t last_safe,
                                                                           const InputGeometry& geometry,
                                                                           const S* input, S* output, const FastOutput<S>& out,
                                                                           const ByteLayout& layout, std::int32_t* edge_points,
                                                                           std::int64_t* edges, std::int32_t* first_taps,
                                                                           const C* next_xyz, const S* next_output,
                                                                           Padding padding) {
    constexpr int K = Interp::taps;
    (void)last_safe;
    // (known_interior_span tests `linear` itself; the test is repeated here, where the stored-grid
    // copy of this loop sees its literal nullptr, so that copy keeps no span bounds at all.)
    const IndexSpan known_interior =
        coordinates.linear == nullptr ? IndexSpan{} : known_interior_span<Kind, Rank, C>(coordinates, count, axes);
    std::int64_t edge_count = 0;
    bool redo = false;
    // Full groups of interior points are sampled one group late, after the next group is planned.
    // Their tap offsets are then read back from memory, stored a group earlier, instead of taken
    // out of the vector register one by one (the compiler's choice: about 30 extracts and shuffles
    // per group) or read back from a store just made (which stalled: see docs/performance.md).
    LateGroup<Rank, K> late;
    PlannedGroup<Rank, K> group;
    for (std::int64_t p = 0; p < count; p += 16) {
        const int lanes = static_cast<int>(std::min<std::int64_t>(16, count - p));
        prefetch_next_row_coordinates<Rank>(next_xyz, p);
        if (next_output != nullptr) prefetch_line_for_write(reinterpret_cast<std::uintptr_t>(next_output + p * out.output_point_stride));
        if constexpr (kPlanarPassPixel<S> && K <= 2) {
            // A full group of interior points: planned without the tests and fill rules.
            // (A group of a searched row outside its interior run holds a point that is not
            // interior: it goes to the general planner without the interior planner's attempt,
            // which would fail there.)
            if (lanes == 16) {
                const bool known = p >= known_interior.begin && p + 16 <= known_interior.end;
                if (known ? plan_interior_group<Kind, Interp, Rank, C, true>(coordinates, p, axes, group)
                          : !known_interior.searched && plan_interior_group<Kind, Interp, Rank, C, false>(coordinates, p, axes, group)) {
                    const __m512i offset = _mm512_load_si512(group.offset);
                    _mm512_storeu_si512(first_taps + p, offset);
                    sample_late_group(late, outer_offset, input, output, out);
                    _mm512_store_si512(late.offset, offset);
                    if constexpr (K > 1) {
                        for (int o = 0; o < PlannedGroup<Rank, K>::kOuterTaps; ++o) {
                            for (int k = 0; k < K; ++k) late.planned.weight[o][k] = group.weight[o][k];
                        }
                    }
                    late.at = p;
                    continue;
                }
            }
            sample_late_group(late, outer_offset, input, output, out);
        }
        if (lanes == 16 && p >= known_interior.begin && p + 16 <= known_interior.end) {
            plan_group<Kind, Interp, Rank, C, true>(coordinates, p, lanes, axes, group);
        } else {
            plan_group<Kind, Interp, Rank, C, false>(coordinates, p, lanes, axes, group);
        }
        const unsigned interior = group.interior;
        const unsigned active = (1u << lanes) - 1u;
        const __mmask16 fill = ZerosPad ? group.fill_zeros : group.fill_nonfinite;
        if (lanes == 16) {
            _mm512_storeu_si512(first_taps + p, _mm512_load_si512(group.offset));
        } else {
            _mm512_mask_storeu_epi32(first_taps + p, static_cast<__mmask16>(active), _mm512_load_si512(group.offset));
        }
        if (fill == active) {
            // Only fill points: the taps (clamped stand-ins) need not be read.
            fill_group(lanes, output + p * out.output_point_stride, out, layout);
            continue;
        }
        if constexpr (std::is_same_v<S, std::uint8_t>) {
            // Loads from past last_safe would pass the end of the input: read from last_safe
            // instead (inside the input, a wrong value), and let the generic stages redo the block.
            const __m512i offset = _mm512_load_si512(group.offset);
            const __m512i limit = _mm512_set1_epi32(static_cast<std::int32_t>(std::min<std::int64_t>(last_safe, INT32_MAX)));
            if (_mm512_cmpgt_epi32_mask(offset, limit) != 0) {
                redo = true;
                _mm512_store_si512(group.offset, _mm512_min_epi32(offset, limit));
            }
        }
        unsigned edge = ~interior & ~static_cast<unsigned>(fill) & active;
        if constexpr (kPlanarPassPixel<S>) {
            sample_group<Rank, K, S>(group, group.offset, lanes, outer_offset, input, output + p, out, fill);
            // Points across an edge whose taps map by one clamp or reflection (under zeros
            // padding: whose taps are inside or read the fill value). (int16: left to the
            // generic stages.)
            if constexpr (std::is_same_v<S, float>) {
                if (edge != 0) {
                    edge &= ~sample_near_group_of_padding<Kind, Interp, ZerosPad, Rank, C>(padding, coordinates, p, lanes, edge, geometry,
                                                                                          input, output + p, out);
                }
            }
        } else {
            sample_group<Rank, K>(group, lanes, outer_offset, input, output + p * out.output_point_stride, out, layout, fill);
        }
        // Points to finish elsewhere.
        for (; edge != 0; edge &= edge - 1) edge_points[edge_count++] = static_cast<std::int32_t>(p + __builtin_ctz(edge));
    }
    if constexpr (kPlanarPassPixel<S> && K <= 2) sample_late_group(late, outer_offset, input, output, out);
    *edges = edge_count;
    if (redo) return PassResult::Redo;
    return edge_count == 0 ? PassResult::Complete : PassResult::EdgesLeft;
}

// The interior pass for a run of rows of one tile (rows.rows rows of `count` points), with the
// input and (stored rows) the next row's coordinates prefetched as it goes. Stops after the first
// row that is not Complete, so that the caller can finish that row's edge points (the first taps
// and edge points are those of the last row). Looping over the rows here rather than calling the
// pass once per row matters: the per-row call and set-up are a large share of a short row.
template <PositionKind Kind, class Interp, bool ZerosPad, int Rank, class S, class C>
GRIDWARP_TARGET_AVX512 PassStop interior_pass_avx512(const PassRows<C>& rows, std::int64_t count, const InputGeometry& geometry,
                                                     const S* input, S* output, const FastOutput<S>& out,
                                                     std::int64_t input_span, const ByteLayout& layout,
                                                     std::int32_t* edge_points, std::int32_t* first_taps,
                                                     RowPrefetch& prefetch, Padding padding) {
    constexpr int K = Interp::taps;
    constexpr int kOuterTaps = PlannedGroup<Rank, K>::kOuterTaps;
    const PlannerAxes<C, Rank> axes = planner_axes<Interp, C, Rank>(geometry);
    std::int32_t outer_offset[kOuterTaps];
    outer_tap_offsets<K, Rank>(geometry, outer_offset);
    // The last first-tap offset whose 8-byte loads stay inside the input (uint8 only).
    std::int64_t last_safe = 0;
    if constexpr (std::is_same_v<S, std::uint8_t>) {
        last_safe = last_safe_first_tap(input_span, outer_offset[kOuterTaps - 1], layout, out);
        // (An input too small for the loads: the caller samples the first row, and then the next,
        // by the generic stages.)
        if (last_safe < 0) return PassStop{1, PassResult::Redo, 0};
    }
    (void)input_span;
    PassStop stop;
    for (std::int64_t r = 0; r < rows.rows; ++r) {
        std::int64_t edges = 0;
        PassResult result;
        // The next row's output asked for ahead of its stores: in 2-D only; 3-D groups take long
        // enough for their stores.
        const S* next_output = Rank == 2 && r + 1 < rows.rows ? output + rows.output_offset[r + 1] : nullptr;
        // Two copies of the row's loop, one per kind of coordinates, so that each knows its kind
        // (a reader whose `linear` is a literal nullptr): no per-group test of the kind, and no
        // interior-run bounds to check for stored coordinates.
        if (rows.linear != nullptr) {
            CoordinateReader<C> coordinates;
            coordinates.linear = &rows.linear[r];
            coordinates.first_index = rows.first_index;
            result = interior_pass_row<Kind, Interp, ZerosPad, Rank, S, C>(coordinates, count, axes, outer_offset, last_safe, geometry, input,
                                                                      output + rows.output_offset[r], out, layout, edge_points, &edges,
                                                                      first_taps, nullptr, next_output, padding);
        } else {
            // Read in place, the next row's coordinates are not streamed in by a copy: asked for as
            // this row goes.
            const C* next = nullptr;
            if constexpr (std::is_same_v<C, float>) next = r + 1 < rows.rows ? rows.xyz[r + 1] : rows.next_xyz;
            CoordinateReader<C> coordinates;
            coordinates.xyz = rows.xyz[r];
            result = interior_pass_row<Kind, Interp, ZerosPad, Rank, S, C>(coordinates, count, axes, outer_offset, last_safe, geometry, input,
                                                                      output + rows.output_offset[r], out, layout, edge_points, &edges,
                                                                      first_taps, next, next_output, padding);
        }
        prefetch_rows_ahead(prefetch, first_taps, count, input, Rank);
        stop.rows = r + 1;
        if (result != PassResult::Complete) {
            stop.result = result;
            stop.edges = edges;
            return stop;
        }
    }
    return stop;
}

// The byte permutations of a uint8 layout.
template <int K>
GRIDWARP_TARGET_AVX512 void prepare_byte_layout(ByteLayout& layout, std::int64_t input_inner_stride) {
    for (int k = 0; k < K && k < 4; ++k) {
        for (int c = 0; c < layout.channels; ++c) {
            const int b = layout.interleaved_in ? static_cast<int>(k * input_inner_stride) + c : k;
            layout.pick[k][c] = byte_picker(b);
        }
    }
    alignas(64) std::uint8_t index[64] = {};
    for (int j = 0; j < 16 * layout.channels; ++j) {
        index[j] = static_cast<std::uint8_t>((j % layout.channels) * 16 + j / layout.channels);
    }
    layout.interleave = _mm512_load_si512(index);
}

}  // namespace

template <class S, class C>
AvxInteriorPass<S, C> select_avx512_pass(Interpolation mode, Padding padding, const InputGeometry& geometry,
                                         const FastOutput<S>& out, ByteLayout& layout) {
    return choose_interior_pass<S, C>(
        mode, padding, geometry, out, layout,
        [&](auto interp) {
            // uint8: the byte permutations of this layout.
            if constexpr (std::is_same_v<S, std::uint8_t>) {
                prepare_byte_layout<decltype(interp)::type::taps>(layout, geometry.stride[geometry.rank - 1]);
            }
        },
        [](auto interp, auto zeros_padding, auto rank, auto kind) -> AvxInteriorPass<S, C> {
            return &interior_pass_avx512<decltype(kind)::value, typename decltype(interp)::type, decltype(zeros_padding)::value,
                                         decltype(rank)::value, S, C>;
        });
}

}  // namespace gridwarp::detail

#endif  // GRIDWARP_AVX2_DISPATCH

// Instantiates the pass for pixel type S and both coordinate types: each pixel type is a
// translation unit of its own (interior_pass_avx512_<type>.cpp), so that they build in parallel.
#if defined(GRIDWARP_AVX2_DISPATCH)
#define GRIDWARP_INSTANTIATE_AVX512_PASS(S)                                                                         \
    namespace gridwarp::detail {                                                                                    \
    template AvxInteriorPass<S, float> select_avx512_pass<S, float>(Interpolation, Padding, const InputGeometry&,   \
                                        const FastOutput<S>&, ByteLayout&);                                         \
    template AvxInteriorPass<S, double> select_avx512_pass<S, double>(Interpolation, Padding, const InputGeometry&, \
                                        const FastOutput<S>&, ByteLayout&);                                         \
    }
#else
#define GRIDWARP_INSTANTIATE_AVX512_PASS(S)
#endif
