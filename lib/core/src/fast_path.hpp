// What the fast path (fast_path.cpp) and the interior pass share: the output's layout, the input
// prefetch, and the interface of the pass (interior_pass-inl.h, one Highway source compiled per
// target in one translation unit per pixel and coordinate type, interior_pass_<pixel>_<f32|f64>.cpp).
#pragma once

#include "interleaved_gather.hpp"
#include "sampling_policies.hpp"

#include "gridwarp/positions.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace gridwarp::detail {

// A Word's bytes from an address of any alignment (an int16 point's taps), through memcpy, which
// compiles to one load.
template <class Word>
inline Word load_unaligned(const void* p) {
    Word bits;
    std::memcpy(&bits, p, sizeof bits);
    return bits;
}

// Where and how the fast path writes a call's output, and the fill value.
template <class S>
struct FastOutput {
    std::int64_t channels = 0;
    std::int64_t input_channel_stride = 0;
    std::int64_t output_channel_stride = 0;
    std::int64_t output_point_stride = 0;
    S fill_stored{};
    typename compute_type<S>::type fill_value{};
    bool stream = false;  // write whole lines of interior points with streaming stores (the pass, float32, 2-D only)
    InterleavedGatherFunction<S> interleaved_gather = nullptr;  // 8- and 16-bit pixels of 2-4 interleaved channels
};

// Pixel types of the interior pass.
template <class S>
inline constexpr bool kInteriorPassPixel = std::is_same_v<S, float> || std::is_same_v<S, std::uint8_t> || std::is_same_v<S, std::int16_t>;
// The pixel types whose passes read one channel at a time along a unit-stride row (planar).
template <class S>
inline constexpr bool kPlanarPassPixel = std::is_same_v<S, float> || std::is_same_v<S, std::int16_t>;

// How far ahead the fast path asks for input, in rows of a tile, and how many requests it makes per
// cache line's worth of points: off the input's axes, neighbouring points' first taps already lie
// in other input rows, and one row ahead is too late for the lines to arrive. 3-D points' taps span
// four input rows, hence more requests (measurements: docs/performance.md, "Tuning choices").
constexpr std::int64_t kPrefetchRowsAhead = 3;
constexpr std::int64_t kPrefetchesPerLine2d = 2;
constexpr std::int64_t kPrefetchesPerLine3d = 4;
constexpr std::int64_t prefetches_per_line(int rank) { return rank == 3 ? kPrefetchesPerLine3d : kPrefetchesPerLine2d; }

// Asks the processor to load the cache line at `address` (never faults). An asm statement rather
// than __builtin_prefetch: GCC counts that builtin as free of side effects, so its interprocedural
// analysis found prefetch_input pure and deleted the calls, whose result nobody uses; the input
// prefetch of the float32, float64 and 16-bit paths was missing from the binary (objdump) until
// it was written this way.
inline void prefetch_line(std::uintptr_t address) {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    asm volatile("prefetcht0 (%0)" : : "r"(address));
#elif defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(reinterpret_cast<const void*>(address));
#else
    (void)address;
#endif
}

// Asks the processor for the cache line at `address` ready to be written (PREFETCHW): the output of
// the row ahead, so that the row's stores do not wait for their lines to be read in. Used by the
// pass on AVX-512 only (measured there); every processor with AVX-512 has the instruction.
inline void prefetch_line_for_write(std::uintptr_t address) {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    asm volatile("prefetchw (%0)" : : "r"(address));
#elif defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(reinterpret_cast<const void*>(address), 1);
#else
    (void)address;
#endif
}

// Asks the processor to start loading the input where `count` points whose first taps lie at
// first_tap[] would read, moved by `ahead` elements: `requests_per_line` requests per cache line of
// first taps (neighbouring points lie about `point_stride` elements apart: the channel count of
// interleaved pixels). Prefetching never faults, and the address is formed as an integer, so no
// pointer leaves the input.
template <class S>
void prefetch_input(const std::int32_t* first_tap, std::int64_t count, const S* input, std::int64_t ahead,
                    std::int64_t point_stride, std::int64_t requests_per_line) {
    const std::int64_t points_per_line =
        64 / (static_cast<std::int64_t>(sizeof(S)) * std::max<std::int64_t>(point_stride, 1));
    const std::int64_t kStep = std::max<std::int64_t>(points_per_line / requests_per_line, 1);
    const auto origin = reinterpret_cast<std::uintptr_t>(input);
    for (std::int64_t p = 0; p < count; p += kStep) {
        const std::int64_t element = first_tap[p] + ahead;
        prefetch_line(origin + static_cast<std::uintptr_t>(element) * sizeof(S));
    }
}

// ---------------------------------------------------------------------------------------------
// The interior pass: what it takes and gives, and the steps that need no vectors.

// Where the pass reads a block's coordinates: stored point after point (xyz[p * Rank + k], as
// PositionSource::row writes them), or computed from the row's LinearRow with the operations
// that AffinePositions::row uses, lane-wise (so the same values).
template <class C>
struct CoordinateReader {
    const C* xyz = nullptr;             // stored coordinates, or nullptr
    const LinearRow* linear = nullptr;  // else: the row's terms
    std::int64_t first_index = 0;       // linear: the innermost output index of point 0
};

// Per-axis constants of the planner. Normalized coordinates become pixel positions as
// u = ((g + 1) * scale_first - shift) * scale_then, which is unnormalize's arithmetic for either
// align_corners (align_corners: scale_first 1/2, shift +0, scale_then d - 1, and x - (+0) is x
// exactly; otherwise d, 1 and 1/2): one loop serves both, with the constants in registers.
template <class C, int Rank>
struct PlannerAxes {
    bool normalized = false;
    C scale_first[Rank], shift[Rank], scale_then[Rank];
    C lo, hi[Rank], below_hi[Rank];
    C outside_below, outside_from[Rank];  // Interp::outside_below / outside_from
    std::int32_t stride[Rank];
    double stride_value[Rank];  // the same in double (the double planner sums offsets in double)

    // Coordinate g's pixel position along axis a, as pixel_position computes it.
    C position(C g, int a) const {
        return normalized ? ((g + C(1)) * scale_first[a] - shift[a]) * scale_then[a] : g;
    }
};

// ---- Affine rows: which points are interior, known before planning.
// Along an affine row, coordinate k of point i is slope_k * base_i + offset_k with base_i ascending,
// and every operation from there to u (one multiply, one add, a rounding to float, the
// unnormalization) is monotone in its operand: so along the row each u is monotone, each of the
// tests lo <= u and u < hi holds on a prefix or a suffix of the row, and the interior points form
// one run. Its two ends are searched for with the very operations the planner uses, in scalar code.
// Coordinates that are not finite at both ends (overflow) take the general planner. The same holds
// for the points within reach of the input (some tap inside on every axis): under zeros padding
// every point outside that run is a fill point.

struct IndexSpan {
    std::int64_t begin = 0, end = 0;
    bool searched = false;  // found by the search: the points outside [begin, end) fail the test
};

// Coordinate k of point i of a linear row, as read_coordinates computes it lane-wise.
template <class C>
C linear_row_coordinate(const LinearRow& row, std::int64_t index, int k) {
    return static_cast<C>(row.slope[k] * row.base[index] + row.offset[k]);
}

// u on axis a (outermost first) of point i of a linear row, as the pass computes it lane-wise.
template <int Rank, class C>
C linear_row_position(const LinearRow& row, std::int64_t index, int a, const PlannerAxes<C, Rank>& axes) {
    return axes.position(linear_row_coordinate<C>(row, index, Rank - 1 - a), a);
}

// The points [begin, end) of a block of `count` points whose u lies in [lo, hi[a]) on every axis a,
// found by the search (`searched`: no other point's does); empty and not searched where the block
// is not a linear row or its coordinates overflow.
template <int Rank, class C>
IndexSpan linear_row_span(const CoordinateReader<C>& reader, std::int64_t count, const PlannerAxes<C, Rank>& axes, C lo,
                          const C (&hi)[Rank]) {
    IndexSpan span;
    if (reader.linear == nullptr || count == 0) return span;
    const LinearRow& row = *reader.linear;
    const std::int64_t first = reader.first_index, last = reader.first_index + count - 1;
    for (int k = 0; k < Rank; ++k) {
        for (const std::int64_t i : {first, last}) {
            if (!(std::fabs(linear_row_coordinate<C>(row, i, k)) <= std::numeric_limits<C>::max())) return span;
        }
    }
    span.end = count;
    span.searched = true;
    // Narrows the span to the points where the monotone test `holds` holds: a prefix, a suffix, all
    // or none. The test compares u with `bound`; since u is close to linear along the row, the first
    // two probes go where the line through the two ends crosses the bound, and bisection follows.
    const auto narrow_to = [&](auto holds, C u_first, C u_last, C bound) {
        const bool at_first = holds(0), at_last = holds(count - 1);
        if (at_first == at_last) {
            if (!at_first) span.end = span.begin;
            return;
        }
        std::int64_t yes = at_first ? 0 : count - 1, no = at_first ? count - 1 : 0;  // holds(yes), !holds(no)
        bool moved_yes = true;
        const auto probe = [&](std::int64_t p) {
            moved_yes = holds(p);
            (moved_yes ? yes : no) = p;
        };
        const double crossing = static_cast<double>(count - 1) * (static_cast<double>(bound) - static_cast<double>(u_first)) /
                                (static_cast<double>(u_last) - static_cast<double>(u_first));
        if (std::abs(yes - no) > 1 && std::isfinite(crossing)) {
            probe(std::clamp(static_cast<std::int64_t>(std::llround(std::clamp(crossing, -1.0, static_cast<double>(count)))),
                             std::min(yes, no) + 1, std::max(yes, no) - 1));
            if (std::abs(yes - no) > 1) {
                const std::int64_t toward_no = no > yes ? 1 : -1;
                probe(moved_yes ? yes + toward_no : no - toward_no);
            }
        }
        while (std::abs(yes - no) > 1) probe((yes + no) / 2);
        if (at_first) {
            span.end = std::min(span.end, yes + 1);
        } else {
            span.begin = std::max(span.begin, yes);
        }
    };
    for (int a = 0; a < Rank && span.begin < span.end; ++a) {
        const C u_first = linear_row_position<Rank, C>(row, first, a, axes);
        const C u_last = linear_row_position<Rank, C>(row, last, a, axes);
        const auto u_at = [&](std::int64_t p) {
            return p == 0 ? u_first : p == count - 1 ? u_last : linear_row_position<Rank, C>(row, first + p, a, axes);
        };
        narrow_to([&](std::int64_t p) { return u_at(p) >= lo; }, u_first, u_last, lo);
        narrow_to([&](std::int64_t p) { return u_at(p) < hi[a]; }, u_first, u_last, hi[a]);
    }
    if (span.begin >= span.end) span.begin = span.end = 0;
    return span;
}

// The interior points of a linear row (every tap inside), planned without tests.
template <int Rank, class C>
IndexSpan known_interior_span(const CoordinateReader<C>& reader, std::int64_t count, const PlannerAxes<C, Rank>& axes) {
    return linear_row_span<Rank, C>(reader, count, axes, axes.lo, axes.hi);
}

// The points of a linear row within reach of the input (on every axis some tap inside, as the
// planner's within_reach test): under zeros padding the others are fill points.
template <int Rank, class C>
IndexSpan within_reach_span(const CoordinateReader<C>& reader, std::int64_t count, const PlannerAxes<C, Rank>& axes) {
    return linear_row_span<Rank, C>(reader, count, axes, axes.outside_below, axes.outside_from);
}

// After a row whose groups outside `planned` were written as fill without planning: their first
// taps (read by prefetch_rows_ahead) become those of the nearest planned point, so that the
// prefetch asks for lines the row did read. A row with nothing planned keeps the previous values.
inline void fill_in_first_taps(std::int32_t* first_taps, std::int64_t count, const IndexSpan& planned) {
    if (planned.begin >= planned.end) return;
    std::fill(first_taps, first_taps + planned.begin, first_taps[planned.begin]);
    std::fill(first_taps + planned.end, first_taps + count, first_taps[planned.end - 1]);
}

// How a uint8 pass reads and writes: channels interleaved or planar, in and out.
struct ByteLayout {
    int channels = 1;
    bool interleaved_in = false;   // channel stride 1, innermost stride = channels
    bool interleaved_out = false;  // channel stride 1, point stride = channels
};

// Whether the interior pass can run, and the layout it reads and writes: the innermost axis of
// unit stride (float32, int16 and planar uint8) or interleaved uint8 channels; an output row of unit
// stride or interleaved uint8; every axis long enough to have interior points at all (otherwise the
// clamped stand-ins could reach outside the input).
template <class S, class Interp>
bool interior_pass_applies(const InputGeometry& geometry, const FastOutput<S>& out, ByteLayout* layout) {
    for (int a = 0; a < geometry.rank; ++a) {
        if (!(Interp::template interior_lo<float>() < Interp::template interior_hi<float>(geometry.extent[a]))) return false;
    }
    const std::int64_t inner = geometry.stride[geometry.rank - 1];
    if constexpr (kPlanarPassPixel<S>) {
        (void)layout;
        return inner == 1 && out.output_point_stride == 1;
    } else {
        static_assert(std::is_same_v<S, std::uint8_t>);
        const std::int64_t channels = out.channels;
        if (channels > 4) return false;
        layout->channels = static_cast<int>(channels);
        layout->interleaved_in = channels > 1 && out.input_channel_stride == 1 && inner == channels;
        if (!layout->interleaved_in && inner != 1) return false;
        if (layout->interleaved_in && Interp::taps * channels > 8) return false;
        layout->interleaved_out = channels > 1 && out.output_channel_stride == 1 && out.output_point_stride == channels;
        if (!layout->interleaved_out && out.output_point_stride != 1) return false;
        return true;
    }
}

// What the interior pass leaves to the generic stages: nothing; the listed edge points (every
// interior and fill point is written); or everything (some interior points could not be read with the pass's
// 8-byte loads, at the very end of the input, and were not written correctly).
enum class PassResult { Complete, EdgesLeft, Redo };

// A run of rows of one tile for the pass, each of `count` points: row r's coordinates are read
// from xyz[r] (stored point after point) or computed from linear[r] (an affine row; first_index
// is the innermost output index of its point 0), and its output starts at output_offset[r]
// elements from the pass's `output`.
template <class C>
struct PassRows {
    std::int64_t rows = 0;
    const C* const* xyz = nullptr;
    const LinearRow* linear = nullptr;
    std::int64_t first_index = 0;
    const std::int64_t* output_offset = nullptr;
    const C* next_xyz = nullptr;  // stored rows: the coordinates of the row after the last, or nullptr
};

// The input prefetch's state, carried from row to row of a tile: after a row is planned, the row
// kPrefetchRowsAhead rows on will read about where this one read, moved that many times by the
// move from the previous row to this one.
struct RowPrefetch {
    bool started = false;
    std::int64_t previous_base = 0;
    std::int64_t last_tap = 0;      // the offset of a point's last tap from its first
    std::int64_t point_stride = 1;  // elements between neighbouring points' pixels
};

// Where the pass stopped: after `rows` rows, the last of which ended as `result` (for EdgesLeft,
// with `edges` points listed for the generic edge stage).
struct PassStop {
    std::int64_t rows = 0;
    PassResult result = PassResult::Complete;
    std::int64_t edges = 0;
};

// ---- Set-up and per-row steps of the pass that need no vectors.

// The planner's per-axis constants of an interpolation on this input.
template <class Interp, class C, int Rank>
PlannerAxes<C, Rank> planner_axes(const InputGeometry& geometry) {
    PlannerAxes<C, Rank> axes;
    axes.normalized = geometry.space != CoordinateSpace::Pixel;
    axes.lo = Interp::template interior_lo<C>();
    axes.outside_below = Interp::template outside_below<C>();
    for (int a = 0; a < Rank; ++a) {
        axes.outside_from[a] = Interp::template outside_from<C>(geometry.extent[a]);
        const auto extent = static_cast<C>(geometry.extent[a]);
        axes.scale_first[a] = geometry.align_corners ? C(0.5) : extent;
        axes.shift[a] = geometry.align_corners ? C(0) : C(1);
        axes.scale_then[a] = geometry.align_corners ? extent - C(1) : C(0.5);
        axes.hi[a] = Interp::template interior_hi<C>(geometry.extent[a]);
        axes.below_hi[a] = std::nextafter(axes.hi[a], -std::numeric_limits<C>::infinity());
        axes.stride[a] = static_cast<std::int32_t>(geometry.stride[a]);
        axes.stride_value[a] = static_cast<double>(axes.stride[a]);
    }
    return axes;
}

// Offsets of the outer taps (z, y) from the first tap, in tap order (the x taps come from each load).
template <int K, int Rank>
void outer_tap_offsets(const InputGeometry& geometry, std::int32_t* outer_offset) {
    constexpr int kOuterTaps = Rank == 2 ? K : K * K;
    for (int o = 0; o < kOuterTaps; ++o) {
        const int ky = o % K, kz = o / K;
        outer_offset[o] = static_cast<std::int32_t>(ky * geometry.stride[Rank - 2] + (Rank == 3 ? kz * geometry.stride[0] : 0));
    }
}

// uint8: the last first-tap offset whose 8-byte loads stay inside the input (negative: the input
// is too small for the loads, and the caller samples by the generic stages).
template <class S>
std::int64_t last_safe_first_tap(std::int64_t input_span, std::int32_t last_outer_offset, const ByteLayout& layout,
                                 const FastOutput<S>& out) {
    const std::int64_t channel_reach = layout.interleaved_in ? 0 : (layout.channels - 1) * out.input_channel_stride;
    return input_span - 8 - last_outer_offset - channel_reach;
}

// After a row is planned: asks for the input the row kPrefetchRowsAhead rows on will read, this
// row's first taps moved that many times by the move from the previous row to this one.
template <class S>
void prefetch_rows_ahead(RowPrefetch& prefetch, const std::int32_t* first_taps, std::int64_t count, const S* input, int rank) {
    const std::int64_t move = prefetch.started ? first_taps[0] - prefetch.previous_base : 0;
    prefetch.previous_base = first_taps[0];
    prefetch.started = true;
    prefetch_input(first_taps, count, input, kPrefetchRowsAhead * move + prefetch.last_tap, prefetch.point_stride,
                   prefetches_per_line(rank));
}

template <class S, class C>
using InteriorPass = PassStop (*)(const PassRows<C>& rows, std::int64_t count, const InputGeometry& geometry, const S* input,
                                  S* output, const FastOutput<S>& out, std::int64_t input_span, const ByteLayout& layout,
                                  std::int32_t* edge_points, std::int32_t* first_taps, RowPrefetch& prefetch, Padding padding);

// As a pass goes along a row of stored coordinates: at every 16th point, asks for the next row's
// coordinates of the same 16 points (Rank cache lines' worth; nullptr: no next row to ask for).
template <int Rank, class C>
GRIDWARP_ALWAYS_INLINE void prefetch_next_row_coordinates(const C* next_xyz, std::int64_t p) {
    if (next_xyz == nullptr || (p & 15) != 0) return;
    for (int l = 0; l < Rank; ++l) prefetch_line(reinterpret_cast<std::uintptr_t>(next_xyz + p * Rank + 16 * l));
}

// The interior pass for this interpolation, rank and kind of coordinates on the best allowed
// Highway target that has one (simd_targets.hpp), or nullptr where none has or the pass does not
// serve this input and output (`layout`: set for uint8 pixels). Defined for S in {float, uint8,
// int16} and C in {float, double} by interior_pass_<pixel>_<f32|f64>.cpp.
template <class S, class C>
InteriorPass<S, C> select_interior_pass(Interpolation mode, const InputGeometry& geometry, const FastOutput<S>& out,
                                        ByteLayout& layout);

}  // namespace gridwarp::detail
