// The AVX-512 interior pass of the fast path, for float32 pixels and float32 coordinates, ranks 2
// and 3. Included by grid_sample.cpp only, inside its anonymous namespace, after the interpolation
// policies, FastBlock and PositionKind.
//
// Why by hand: GCC vectorises the generic interior pass (dense_gather_body) but emulates its
// gathers with one scalar load and one insert per tap, and on virtual machines the position, weight
// and offset arrays that the two generic stages pass each other cost as much again. This pass does
// both stages for 16 points at a time in registers and reads each pair of horizontally
// neighbouring taps with one 64-bit gather element.
//
// It computes exactly what classify_points and dense_gather_body compute, in the same order:
//  - u from the coordinate as pixel_position does (x / 2 and x * 0.5 are the same IEEE operation:
//    both round the same real number);
//  - the clamped stand-in "safe" (max(lo, u) sends NaN to lo, then min with the last value below
//    hi), the first tap by Interp::interior_first, and the weights by Interp::weights itself,
//    instantiated for a 16-lane vector type whose operators are the lane-wise IEEE operations;
//  - each tap weight (1 * w_outer) * ... * w_inner (1 * w is w exactly), and the sum over taps in
//    tap order starting from +0 (so a -0 product still gives +0, as in the reference);
// and writes every point of the block as if it were interior. It reports whether all points were:
// if not, the caller plans the block with the generic stages, which then overwrite the points
// that are not interior (fill, near and far points) and leave the interior ones as written here.
// No fused multiply-add can form: lib/core builds with -ffp-contract=off, and intrinsics never
// contract.

// Writes every point of the block as if interior; returns whether every point is (see above).
using InteriorPassFunction = bool (*)(const float* xyz, std::int64_t count, const InputGeometry& geometry,
                                      const float* input, float* output, const FastOutput<float>& out);

#if defined(GRIDWARP_AVX2_DISPATCH)
// (<immintrin.h> is included by grid_sample.cpp, outside any namespace.)

#define GRIDWARP_TARGET_AVX512 __attribute__((target("avx512f")))

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

// Interp::interior_first for 16 lanes of safe (finite, inside [lo, hi)) positions.
template <class Interp>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE __m512i interior_first_x16(__m512 safe) {
    if constexpr (Interp::taps == 1) {
        // (u + 1.5 * 2^23) - 1.5 * 2^23 rounds to an integer (ties to even), then converts exactly.
        const __m512 round = _mm512_set1_ps(1.5f * 8388608.0f);
        return _mm512_cvttps_epi32(_mm512_sub_ps(_mm512_add_ps(safe, round), round));
    } else if constexpr (Interp::taps == 2) {
        return _mm512_cvttps_epi32(safe);
    } else {
        static_assert(Interp::taps == 4);
        return _mm512_sub_epi32(_mm512_cvttps_epi32(safe), _mm512_set1_epi32(1));
    }
}

// The K taps from each lane's offset along the innermost axis (stride 1), tap k into v[k].
// Scalar loads, not the gather instructions: on the processors measured (docs/performance.md) a
// 64-bit load per pair of taps, or a 128-bit load per four, and shuffles into place take less time
// than vgatherdps / vgatherdpd for the same elements.
template <int K>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void gather_row_x16(const float* base, const std::int32_t* offset, __m512* v) {
    if constexpr (K == 1) {
        v[0] = _mm512_i32gather_ps(_mm512_load_si512(offset), base, 4);
    } else if constexpr (K == 2) {
        // Two points' pairs per 128-bit lane: point 2j in the low half, point 2j+1 in the high half.
        __m128 pairs[8];
        for (int j = 0; j < 8; ++j) {
            const __m128 low = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(base + offset[2 * j])));
            pairs[j] = _mm_loadh_pi(low, reinterpret_cast<const __m64*>(base + offset[2 * j + 1]));
        }
        const __m512 a = _mm512_insertf32x4(_mm512_insertf32x4(_mm512_insertf32x4(_mm512_castps128_ps512(pairs[0]), pairs[1], 1), pairs[2], 2), pairs[3], 3);
        const __m512 b = _mm512_insertf32x4(_mm512_insertf32x4(_mm512_insertf32x4(_mm512_castps128_ps512(pairs[4]), pairs[5], 1), pairs[6], 2), pairs[7], 3);
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        v[0] = _mm512_permutex2var_ps(a, even, b);
        v[1] = _mm512_permutex2var_ps(a, odd, b);
    } else {
        static_assert(K == 4);
        // One point's four taps per 128-bit lane: quad[j] holds points 4j..4j+3.
        __m512 quad[4];
        for (int j = 0; j < 4; ++j) {
            const float* p = base;
            quad[j] = _mm512_insertf32x4(
                _mm512_insertf32x4(_mm512_insertf32x4(_mm512_castps128_ps512(_mm_loadu_ps(p + offset[4 * j])),
                                                      _mm_loadu_ps(p + offset[4 * j + 1]), 1),
                                   _mm_loadu_ps(p + offset[4 * j + 2]), 2),
                _mm_loadu_ps(p + offset[4 * j + 3]), 3);
        }
        for (int k = 0; k < 4; ++k) {
            // Tap k of point i is element 4 * (i % 8) + k of the pair (quad[2h], quad[2h+1]), h = i / 8.
            const __m512i index = _mm512_setr_epi32(k, 4 + k, 8 + k, 12 + k, 16 + k, 20 + k, 24 + k, 28 + k,
                                                    k, 4 + k, 8 + k, 12 + k, 16 + k, 20 + k, 24 + k, 28 + k);
            const __m512 low = _mm512_permutex2var_ps(quad[0], index, quad[1]);
            const __m512 high = _mm512_permutex2var_ps(quad[2], index, quad[3]);
            v[k] = _mm512_mask_mov_ps(low, 0xFF00, high);
        }
    }
}

// Coordinates k = 0..Rank-1 of up to 16 points stored point after point (x, y[, z], x, ...):
// coordinate[k] lane i = xyz[i * Rank + k]; lanes past `lanes` read as 0.
template <int Rank>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE void deinterleave_x16(const float* xyz, std::int64_t lanes, __m512* coordinate) {
    __m512 part[Rank];
    const std::int64_t values = lanes * Rank;
    for (int j = 0; j < Rank; ++j) {
        const std::int64_t here = std::clamp<std::int64_t>(values - 16 * j, 0, 16);
        part[j] = here == 16 ? _mm512_loadu_ps(xyz + 16 * j)
                             : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << here) - 1u), xyz + 16 * j);
    }
    alignas(64) std::int32_t index[16];
    for (int k = 0; k < Rank; ++k) {
        // Value i * Rank + k lies in part[(i * Rank + k) / 16]; first take it from parts 0 and 1,
        // then (3-D) from part 2 where it lies there.
        for (int i = 0; i < 16; ++i) index[i] = (i * Rank + k) & 31;
        __m512 value = _mm512_permutex2var_ps(part[0], _mm512_load_si512(index), part[1]);
        if constexpr (Rank == 3) {
            __mmask16 from_third = 0;
            for (int i = 0; i < 16; ++i) {
                if (i * Rank + k >= 32) from_third = static_cast<__mmask16>(from_third | (1u << i));
                index[i] = (i * Rank + k) & 15;
            }
            value = _mm512_mask_permutexvar_ps(value, from_third, _mm512_load_si512(index), part[2]);
        }
        coordinate[k] = value;
    }
}

// pixel_position<Kind> for 16 lanes: the same operations, with / 2 as * 0.5.
template <PositionKind Kind>
GRIDWARP_TARGET_AVX512 GRIDWARP_ALWAYS_INLINE __m512 pixel_position_x16(__m512 g, float extent) {
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f), d = _mm512_set1_ps(extent);
    if constexpr (Kind == PositionKind::Pixel) {
        return g;
    } else if constexpr (Kind == PositionKind::NormalizedCorners) {
        return _mm512_mul_ps(_mm512_mul_ps(_mm512_add_ps(g, one), half), _mm512_sub_ps(d, one));
    } else {
        return _mm512_mul_ps(_mm512_sub_ps(_mm512_mul_ps(_mm512_add_ps(g, one), d), one), half);
    }
}

// Whether interior_pass_avx512 can run: float32 pixels and coordinates (checked by the caller),
// the innermost axis of unit stride (pairs of neighbours are adjacent), an output row of unit
// stride, one channel or several, and every axis long enough to have interior points at all
// (otherwise the clamped stand-ins could reach outside the input).
template <class Interp>
bool interior_pass_avx512_applies(const InputGeometry& geometry, std::int64_t output_point_stride) {
    if (geometry.stride[geometry.rank - 1] != 1 || output_point_stride != 1) return false;
    for (int a = 0; a < geometry.rank; ++a) {
        if (!(Interp::template interior_lo<float>() < Interp::template interior_hi<float>(geometry.extent[a]))) return false;
    }
    return true;
}

// The interior pass for one block of `count` points (coordinates innermost-first, as the position
// source writes them). Writes every point of every channel as if it were interior; returns
// whether every point is.
template <PositionKind Kind, class Interp, int Rank>
GRIDWARP_TARGET_AVX512 bool interior_pass_avx512(const float* xyz, std::int64_t count, const InputGeometry& geometry,
                                                 const float* input, float* output, const FastOutput<float>& out) {
    constexpr int K = Interp::taps;
    constexpr int kOuterTaps = Rank == 2 ? K : K * K;
    float extent[Rank];
    __m512 lo[Rank], hi[Rank], below_hi[Rank];
    __m512i stride[Rank];
    for (int a = 0; a < Rank; ++a) {
        extent[a] = static_cast<float>(geometry.extent[a]);
        lo[a] = _mm512_set1_ps(Interp::template interior_lo<float>());
        const float h = Interp::template interior_hi<float>(geometry.extent[a]);
        hi[a] = _mm512_set1_ps(h);
        below_hi[a] = _mm512_set1_ps(std::nextafter(h, -std::numeric_limits<float>::infinity()));
        stride[a] = _mm512_set1_epi32(static_cast<std::int32_t>(geometry.stride[a]));
    }
    // Tap offsets of the outer axes (the innermost axis's taps come from gather_row_x16), in tap order.
    std::int32_t outer_offset[kOuterTaps];
    for (int o = 0; o < kOuterTaps; ++o) {
        const int ky = o % K, kz = o / K;
        outer_offset[o] = static_cast<std::int32_t>(ky * geometry.stride[Rank - 2] + (Rank == 3 ? kz * geometry.stride[0] : 0));
    }
    const std::int64_t channels = out.channels;
    const std::int64_t input_channel_stride = out.input_channel_stride;
    const std::int64_t output_channel_stride = out.output_channel_stride;
    __mmask16 all_interior = 0xFFFF;
    for (std::int64_t p = 0; p < count; p += 16) {
        const std::int64_t lanes = std::min<std::int64_t>(16, count - p);
        const __mmask16 active = static_cast<__mmask16>((1u << lanes) - 1u);
        const float* point = xyz + p * Rank;
        __m512 coordinate[Rank];
        deinterleave_x16<Rank>(point, lanes, coordinate);
        __mmask16 interior = active;
        __m512i offset = _mm512_setzero_si512();
        F32x16 weight[Rank][K] = {};
        for (int a = 0; a < Rank; ++a) {
            // Axis a (outermost first) is coordinate Rank - 1 - a.
            const __m512 g = coordinate[Rank - 1 - a];
            const __m512 u = pixel_position_x16<Kind>(g, extent[a]);
            interior &= _mm512_cmp_ps_mask(u, lo[a], _CMP_GE_OQ) & _mm512_cmp_ps_mask(u, hi[a], _CMP_LT_OQ);
            const __m512 safe = _mm512_min_ps(_mm512_max_ps(u, lo[a]), below_hi[a]);  // NaN -> lo
            const __m512i first = interior_first_x16<Interp>(safe);
            offset = _mm512_add_epi32(offset, _mm512_mullo_epi32(first, stride[a]));
            if constexpr (K > 1) {
                F32x16 w[K] = {};
                Interp::weights(F32x16(safe), F32x16(_mm512_cvtepi32_ps(first)), w);
                for (int k = 0; k < K; ++k) weight[a][k] = w[k];
            }
        }
        all_interior &= static_cast<__mmask16>(interior | static_cast<__mmask16>(~active));
        alignas(64) std::int32_t first_offset[16];
        _mm512_store_si512(first_offset, offset);
        for (std::int64_t c = 0; c < channels; ++c) {
            const float* in = input + c * input_channel_stride;
            float* o = output + c * output_channel_stride + p;
            __m512 sum;
            if constexpr (K == 1) {
                __m512 v[1];
                gather_row_x16<1>(in, first_offset, v);
                sum = v[0];  // nearest copies the value
            } else {
                sum = _mm512_setzero_ps();
                for (int t = 0; t < kOuterTaps; ++t) {
                    __m512 v[K];
                    gather_row_x16<K>(in + outer_offset[t], first_offset, v);
                    // (1 * w_z) * w_y for 3-D, 1 * w_y for 2-D; 1 * w is w exactly.
                    const __m512 w_outer = Rank == 2 ? weight[0][t].v : _mm512_mul_ps(weight[0][t / K].v, weight[1][t % K].v);
                    for (int k = 0; k < K; ++k) {
                        sum = _mm512_add_ps(sum, _mm512_mul_ps(_mm512_mul_ps(w_outer, weight[Rank - 1][k].v), v[k]));
                    }
                }
            }
            // (A masked store only for a partial group: on AMD processors it is far slower.)
            if (lanes == 16) {
                _mm512_storeu_ps(o, sum);
            } else {
                _mm512_mask_storeu_ps(o, active, sum);
            }
        }
    }
    return all_interior == 0xFFFF;
}

template <class Interp, int Rank>
InteriorPassFunction select_interior_pass_kind(CoordinateSpace space, bool align_corners) {
    if (space == CoordinateSpace::Pixel) return &interior_pass_avx512<PositionKind::Pixel, Interp, Rank>;
    if (align_corners) return &interior_pass_avx512<PositionKind::NormalizedCorners, Interp, Rank>;
    return &interior_pass_avx512<PositionKind::NormalizedEdges, Interp, Rank>;
}

#endif  // GRIDWARP_AVX2_DISPATCH
