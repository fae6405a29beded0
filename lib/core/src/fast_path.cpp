// The fast path: ranks 2 and 3; float32, float64, 8- and 16-bit integer pixels; extents up to
// 2^22 and batch items that span fewer than 2^31 elements (int32 offsets). Everything else, and
// every call with SampleOptions::force_generic_rank, takes the reference path above.
//
// The output is cut into tiles (run_fast), so that a tile's input stays in cache, and a tile's
// rows into blocks of up to 256 points, each taken in two stages again:
//
//  1. fast_plan_body<Coord, Interp, Pad, Rank>: one loop over the block, which the compiler vectorises,
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
// points at once but each with those operations, and no fused multiply-add can form (lib/core
// builds with -ffp-contract=off). So the results are the same bits as the reference path's, which
// tests/core/test_fast_paths.cpp checks for every interpolation, padding, align_corners, every
// compiled instruction set, strided views and points near, across and far past every edge.
//
// Instruction sets: the vectorised loops of both stages (fast_stages.hpp) are compiled once per
// Highway target by fast_stages.cpp and chosen per call (GRIDWARP_ISA caps the choice, so a test
// can run each); the edge points' code here is compiled once, for the portable target.
#include "fast_path.hpp"
#include "fast_stages.hpp"
#include "sampler_task.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace gridwarp::detail {

namespace {

// Extents up to this keep u, d - 1 and d - 0.5 exact in float and tap indices inside int32.
constexpr std::int64_t kFastMaxExtent = std::int64_t{1} << 22;

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

// The edge points the interior pass lists: a thin frame of the output, so one copy, not one per
// instruction set.
template <class C, class Interp, class Pad, int Rank>
void plan_listed(const C* xyz, std::int64_t edges, const InputGeometry& geometry, FastBlock<C>& block) {
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

template <class C>
ListedPlanFunction<C> select_listed_planner(const SampleOptions& options, int rank) {
    return visit_interpolation(options.mode, [&](auto interp) {
        return visit_padding(options.padding, [&](auto pad) -> ListedPlanFunction<C> {
            using I = typename decltype(interp)::type;
            using P = typename decltype(pad)::type;
            return rank == 2 ? &plan_listed<C, I, P, 2> : &plan_listed<C, I, P, 3>;
        });
    });
}

// Whether the interleaved gather (interleaved_gather.hpp) may run on this block: 2 to 4 interleaved
// channels, every point's 32-bit reads inside the input's `input_span` elements, and their byte
// offsets within int32.
template <class S, class C, int T>
bool interleaved_words_readable(const FastBlock<C>& block, std::int64_t channels, std::int64_t input_channel_stride,
                                std::int64_t input_span) {
    if (channels < 2 || channels > 4 || input_channel_stride != 1 || block.count == 0) return false;
    constexpr std::int64_t kPerWord = 4 / static_cast<std::int64_t>(sizeof(S));
    const std::int64_t read_elements = (channels + kPerWord - 1) / kPerWord * kPerWord;
    const std::int32_t last_tap = *std::max_element(block.tap_offset.data(), block.tap_offset.data() + T);
    const std::int32_t last_base = *std::max_element(block.base.data(), block.base.data() + block.count);
    const std::int64_t read_end = std::int64_t{last_base} + last_tap + read_elements;
    return read_end <= input_span && read_end * static_cast<std::int64_t>(sizeof(S)) <= std::numeric_limits<std::int32_t>::max();
}

// Stage 2. The dense pass is the chosen target's (dense); the rest (fill, near and far edge points)
// is compiled once.
template <class S, class C, int K, int Rank>
void fast_gather(const FastBlock<C>& block, const S* input, S* output, const FastOutput<S>& out, std::int64_t input_span,
                 const DenseKernels<S, C>& dense) {
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
            dense.tap_weights(block.count, block.weight.data(), tap_weights);
        }
        bool channels_done = false;
        if constexpr ((std::is_same_v<S, std::uint8_t> || std::is_same_v<S, std::uint16_t>) && K > 1) {
            if (shared && out.interleaved_gather != nullptr && interleaved_words_readable<S, C, T>(block, out.channels, ics, input_span)) {
                constexpr std::int64_t B = FastBlock<C>::kPoints;
                const std::int64_t done = out.interleaved_gather(block.count, block.base.data(), block.tap_offset.data(), tap_weights, B,
                                                                 input, output, ops, ocs);
                // The points after the last whole vector, with the same products in the same order.
                for (std::int64_t p = done; p < block.count; ++p) {
                    for (std::int64_t c = 0; c < out.channels; ++c) {
                        float sum = 0.0f;
                        for (int t = 0; t < T; ++t) {
                            sum += tap_weights[t * B + p] * static_cast<float>(input[block.base[p] + block.tap_offset[t] + c]);
                        }
                        output[c * ocs + p * ops] = store_finite<S>(sum);
                    }
                }
                channels_done = true;
            }
        }
        const DenseGatherFunction<S, C> dense_gather = shared ? dense.with_tap_weights : dense.computing_weights;
        for (std::int64_t c = 0; c < out.channels && !channels_done; ++c) {
            dense_gather(block.count, block.base.data(), block.tap_offset.data(), block.weight.data(), tap_weights, input + c * ics,
                         output + c * ocs, ops);
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
                                    std::int64_t input_span, const DenseKernels<S, C>& dense);

template <class S, class C>
FastGatherFunction<S, C> select_fast_gatherer(Interpolation mode, int rank) {
    return visit_interpolation(mode, [&](auto interp) -> FastGatherFunction<S, C> {
        constexpr int K = decltype(interp)::type::taps;
        return rank == 2 ? &fast_gather<S, C, K, 2> : &fast_gather<S, C, K, 3>;
    });
}

// Output tiles of the fast path: kTileWidth points along the innermost axis times kTileRows
// along the next one in 2-D; in 3-D, kTileRows3d rows times kTileSlices slices. Neighbouring rows
// of a warp read neighbouring input, so a tile's input stays in cache while the tile is sampled,
// where whole rows would stream a rotated input's rows through the cache again for every output
// row. A tile's rows go slice by slice, and in 3-D the next slice reads again most of the input
// lines that this one read for its upper taps: with 4 rows a slice they are still in cache
// (docs/performance.md, "Tuning choices").
constexpr std::int64_t kTileWidth = 256;
// Outputs from this size on are written with streaming stores where the pass can (FastOutput::stream).
constexpr std::int64_t kStreamOutputBytes = std::int64_t{8} << 20;
constexpr std::int64_t kTileRows = 64;
constexpr std::int64_t kTileRows3d = 4;
constexpr std::int64_t kTileSlices = 16;

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

// The output of every batch item cut into tiles; a work item is one tile.
struct FastTiling {
    FastTiling(const Shape& out_spatial, int rank, std::int64_t batch)
        : rank(rank),
          width(out_spatial.back()),
          height(out_spatial[static_cast<std::size_t>(rank - 2)]),
          depth(rank == 3 ? out_spatial[0] : 1),
          tile_w(std::min(kTileWidth, width)),
          tile_h(std::min(rank == 3 ? kTileRows3d : kTileRows, height)),
          tile_d(std::min(kTileSlices, depth)),
          tiles_w((width + tile_w - 1) / tile_w),
          tiles_h((height + tile_h - 1) / tile_h),
          tiles_d((depth + tile_d - 1) / tile_d),
          work_items(batch * tiles_d * tiles_h * tiles_w) {}

    int rank;  // 2 or 3
    std::int64_t width, height, depth;
    std::int64_t tile_w, tile_h, tile_d;
    std::int64_t tiles_w, tiles_h, tiles_d;
    std::int64_t work_items;
};

// One tile: batch item n, points [start, start + count) of rows y in [y_begin, y_end) of slices z
// in [z_begin, z_end) (one slice, z = 0, in 2-D).
struct Tile {
    std::int64_t n, start, count, z_begin, z_end, y_begin, y_end;
};

Tile tile_of(const FastTiling& tiling, std::int64_t item) {
    const std::int64_t tx = item % tiling.tiles_w;
    item /= tiling.tiles_w;
    const std::int64_t ty = item % tiling.tiles_h;
    item /= tiling.tiles_h;
    const std::int64_t tz = item % tiling.tiles_d;
    const std::int64_t start = tx * tiling.tile_w;
    return {item / tiling.tiles_d,
            start,
            std::min(tiling.tile_w, tiling.width - start),
            tz * tiling.tile_d,
            std::min(tiling.depth, (tz + 1) * tiling.tile_d),
            ty * tiling.tile_h,
            std::min(tiling.height, (ty + 1) * tiling.tile_h)};
}

// What the fast path runs for one task, chosen once: the planners and gatherer for its mode and
// rank, the interior pass where the allowed targets have one, and the output's description.
template <class S, class C>
struct FastKernels {
    InputGeometry geometry;
    int axis_taps_count = 0;
    FastPlanFunction<C> planner = nullptr;
    FastGatherFunction<S, C> gatherer = nullptr;
    DenseKernels<S, C> dense;
    FastOutput<S> output;
    std::int64_t input_span = 0;  // elements of a batch item that may be read, from its start
    InteriorPass<S, C> interior_pass = nullptr;
    ByteLayout byte_layout;
    ListedPlanFunction<C> listed_planner = nullptr;
};

template <class S, class C>
FastKernels<S, C> choose_fast_kernels(const Task& task, int rank) {
    const auto& input = task.input;
    const auto& output = task.output;
    const auto& options = task.options;
    // (The interior pass takes a tile's row as one block.)
    static_assert(kTileWidth <= FastBlock<C>::kPoints);
    FastKernels<S, C> kernels;
    kernels.geometry = InputGeometry{rank, input.shape.data() + 2, input.strides.data() + 2, options.align_corners, task.positions.space()};
    kernels.axis_taps_count = taps_per_axis(options.mode, options.spline_order);
    kernels.planner = select_fast_planner<C>(options.mode, options.padding, rank);
    kernels.gatherer = select_fast_gatherer<S, C>(options.mode, rank);
    kernels.dense = select_dense_kernels<S, C>(options.mode, rank);
    const Fill<S> fill(options.fill);
    FastOutput<S>& fast_output = kernels.output;
    fast_output.channels = input.shape[1];
    fast_output.input_channel_stride = input.strides[1];
    fast_output.output_channel_stride = output.strides[1];
    fast_output.output_point_stride = output.strides[static_cast<std::size_t>(rank + 1)];
    fast_output.fill_stored = fill.stored;
    fast_output.fill_value = fill.value;
    if constexpr (std::is_same_v<S, std::uint8_t> || std::is_same_v<S, std::uint16_t>) {
        if (fast_output.input_channel_stride == 1) {
            fast_output.interleaved_gather =
                select_interleaved_gather<S>(fast_output.channels, static_cast<int>(int_pow(kernels.axis_taps_count, rank)));
        }
    }
    // An output larger than the caches is gone from them before anyone reads it: streaming stores
    // save reading each line in before it is overwritten (docs/performance.md, "Tuning choices").
    fast_output.stream = std::is_same_v<S, float> && rank == 2 && fast_output.output_point_stride == 1 &&
                         (fast_output.channels == 1 || fast_output.output_channel_stride % 16 == 0) &&
                         output.numel() * static_cast<std::int64_t>(sizeof(S)) >= kStreamOutputBytes;

    kernels.input_span = 1 + (input.shape[1] - 1) * input.strides[1];
    for (int a = 0; a < rank; ++a) kernels.input_span += (kernels.geometry.extent[a] - 1) * kernels.geometry.stride[a];
    if (task.readable_span >= 0) kernels.input_span = std::min(kernels.input_span, task.readable_span);
    if constexpr (kInteriorPassPixel<S>) {
        kernels.interior_pass = select_interior_pass<S, C>(options.mode, kernels.geometry, fast_output, kernels.byte_layout);
    }
    if (kernels.interior_pass) kernels.listed_planner = select_listed_planner<C>(options, rank);
    return kernels;
}

// One thread's buffers: a block's plan, a row's positions, and a tile's rows as the interior pass
// takes them.
template <class C>
struct TileScratch {
    TileScratch(const FastTiling& tiling, int axis_taps_count, const std::int64_t* stride)
        : block(tiling.rank, axis_taps_count, stride),
          xyz(static_cast<std::size_t>(tiling.tile_w * tiling.rank)),
          row_xyz(static_cast<std::size_t>(tiling.tile_d * tiling.tile_h)),
          row_linear(row_xyz.size()),
          row_output(row_xyz.size()),
          row_outer(row_xyz.size()) {}

    FastBlock<C> block;
    std::vector<C> xyz;
    std::vector<const C*> row_xyz;
    std::vector<LinearRow> row_linear;
    std::vector<std::int64_t> row_output;
    std::vector<std::array<std::int64_t, 2>> row_outer;
};

// The output offset of a row's first point; outer = {z or y, y}, outermost first.
std::int64_t row_output_offset(const TensorView& output, int rank, const Tile& tile, const std::int64_t* outer) {
    const std::int64_t* strides = output.strides.data();
    std::int64_t offset = tile.n * strides[0] + tile.start * strides[rank + 1] + outer[1] * strides[rank];
    if (rank == 3) offset += outer[0] * strides[2];
    return offset;
}

// A tile through the interior pass. An affine row's positions are computed by the pass itself (and
// written out only for the points it leaves), an explicit float32 grid is read in place; other
// positions are copied row by row. Points the pass leaves go through the generic stages.
template <class S, class C>
void sample_tile_by_interior_pass(const Task& task, const FastKernels<S, C>& kernels, const Tile& tile, TileScratch<C>& scratch) {
    const int rank = kernels.geometry.rank;
    const S* batch_in = task.input.typed<S>() + tile.n * task.input.strides[0];
    S* out_data = task.output.typed<S>();
    FastBlock<C>& block = scratch.block;
    std::vector<C>& xyz = scratch.xyz;
    std::int64_t rows = 0;
    for (std::int64_t z = tile.z_begin; z < tile.z_end; ++z) {
        for (std::int64_t y = tile.y_begin; y < tile.y_end; ++y) {
            const auto at = static_cast<std::size_t>(rows++);
            scratch.row_outer[at] = {rank == 3 ? z : y, y};
            scratch.row_output[at] = row_output_offset(task.output, rank, tile, scratch.row_outer[at].data());
        }
    }
    // (A source answers row by row; a tile whose rows are not all of one kind is copied.)
    bool linear = true;
    for (std::int64_t r = 0; r < rows && linear; ++r) {
        const auto at = static_cast<std::size_t>(r);
        linear = task.positions.linear_row(tile.n, scratch.row_outer[at].data(), &scratch.row_linear[at]);
    }
    bool stored = false;
    if constexpr (std::is_same_v<C, float>) {
        stored = !linear;
        for (std::int64_t r = 0; r < rows && stored; ++r) {
            const auto at = static_cast<std::size_t>(r);
            scratch.row_xyz[at] = task.positions.stored_row(tile.n, scratch.row_outer[at].data(), tile.start);
            stored = scratch.row_xyz[at] != nullptr;
        }
    }
    PassRows<C> pass_rows;
    pass_rows.first_index = tile.start;
    const C* next_xyz = nullptr;  // the coordinates of the row after the tile's last
    if constexpr (std::is_same_v<C, float>) {
        const auto& [z, y] = scratch.row_outer[static_cast<std::size_t>(rows - 1)];
        if (stored && y + 1 < task.positions.output_shape()[static_cast<std::size_t>(rank - 2)]) {
            const std::int64_t next_outer[2] = {rank == 3 ? z : y + 1, y + 1};
            next_xyz = task.positions.stored_row(tile.n, next_outer, tile.start);
        }
    }
    RowPrefetch prefetch;
    prefetch.last_tap = block.tap_offset.back();
    prefetch.point_stride = kernels.geometry.stride[rank - 1];
    for (std::int64_t r = 0; r < rows;) {
        // Rows r.. at once where the pass reads them itself; else one row, copied.
        const auto at = static_cast<std::size_t>(r);
        if (!linear && !stored) task.positions.row(tile.n, scratch.row_outer[at].data(), tile.start, tile.count, xyz.data());
        const C* copied = xyz.data();
        pass_rows.rows = (linear || stored) ? rows - r : 1;
        pass_rows.linear = linear ? &scratch.row_linear[at] : nullptr;
        pass_rows.xyz = stored ? &scratch.row_xyz[at] : &copied;
        pass_rows.output_offset = &scratch.row_output[at];
        pass_rows.next_xyz = next_xyz;
        const PassStop stop = kernels.interior_pass(pass_rows, tile.count, kernels.geometry, batch_in, out_data, kernels.output,
                                                    kernels.input_span, kernels.byte_layout, block.edge_point.data(),
                                                    block.base.data(), prefetch, task.options.padding);
        r += stop.rows;
        if (stop.result == PassResult::Complete) continue;
        // The last row it did has points left to the generic stages.
        const auto last = static_cast<std::size_t>(r - 1);
        const C* block_xyz = stored ? scratch.row_xyz[last] : xyz.data();
        if (linear && stop.result == PassResult::EdgesLeft) {
            // The listed points' positions only (row() would write these values), not the whole
            // row's: a row across an edge usually leaves a few points.
            const LinearRow& row = scratch.row_linear[last];
            for (std::int64_t e = 0; e < stop.edges; ++e) {
                const std::int64_t p = block.edge_point[static_cast<std::size_t>(e)];
                for (int k = 0; k < rank; ++k) xyz[static_cast<std::size_t>(p * rank + k)] = linear_row_coordinate<C>(row, tile.start + p, k);
            }
        } else if (linear) {
            task.positions.row(tile.n, scratch.row_outer[last].data(), tile.start, tile.count, xyz.data());
        }
        if (stop.result == PassResult::EdgesLeft) {
            // Only the listed points across an edge are left.
            kernels.listed_planner(block_xyz, stop.edges, kernels.geometry, block);
        } else {
            kernels.planner(block_xyz, tile.count, kernels.geometry, block);
        }
        kernels.gatherer(block, batch_in, out_data + scratch.row_output[last], kernels.output, kernels.input_span, kernels.dense);
    }
}

// A tile through the generic stages: each row's positions, planned and gathered a block at a time.
template <class S, class C>
void sample_tile_by_blocks(const Task& task, const FastKernels<S, C>& kernels, const Tile& tile, TileScratch<C>& scratch) {
    const int rank = kernels.geometry.rank;
    const S* batch_in = task.input.typed<S>() + tile.n * task.input.strides[0];
    S* out_data = task.output.typed<S>();
    const std::int64_t point_stride = task.output.strides[static_cast<std::size_t>(rank + 1)];
    constexpr std::int64_t B = FastBlock<C>::kPoints;
    FastBlock<C>& block = scratch.block;
    bool row_started = false;
    std::int64_t previous_base = 0;
    // With a row's first block planned (first taps in block.base): the row kPrefetchRowsAhead rows
    // on will read about where this one reads, moved that many times by the move from the previous
    // row to this one.
    const auto prefetch_rows_ahead = [&](std::int64_t block_count) {
        const std::int64_t move = row_started ? block.base[0] - previous_base : 0;
        previous_base = block.base[0];
        row_started = true;
        prefetch_input(block.base.data(), block_count, batch_in, kPrefetchRowsAhead * move + block.tap_offset.back(),
                       kernels.geometry.stride[rank - 1], prefetches_per_line(rank));
    };
    for (std::int64_t z = tile.z_begin; z < tile.z_end; ++z) {
        for (std::int64_t y = tile.y_begin; y < tile.y_end; ++y) {
            const std::int64_t outer[2] = {rank == 3 ? z : y, y};  // outermost first
            task.positions.row(tile.n, outer, tile.start, tile.count, scratch.xyz.data());
            const std::int64_t out_offset = row_output_offset(task.output, rank, tile, outer);
            for (std::int64_t b = 0; b < tile.count; b += B) {
                const std::int64_t block_count = std::min(B, tile.count - b);
                kernels.planner(scratch.xyz.data() + b * rank, block_count, kernels.geometry, block);
                if (b == 0) prefetch_rows_ahead(block_count);
                kernels.gatherer(block, batch_in, out_data + out_offset + b * point_stride, kernels.output, kernels.input_span, kernels.dense);
            }
        }
    }
}

template <class S, class C>
void run_fast(const Task& task) {
    const int rank = static_cast<int>(task.input.rank()) - 2;  // 2 or 3
    const FastTiling tiling(task.positions.output_shape(), rank, task.input.shape[0]);
    const FastKernels<S, C> kernels = choose_fast_kernels<S, C>(task, rank);
    // Each thread samples its own slice of tiles (the same slice on every call), then helps with
    // what is left of the others' (work_split.hpp).
    const int threads = thread_count(task.options);
    WorkSplit split(tiling.work_items, threads);
#pragma omp parallel num_threads(threads)
    {
        const int me = omp_get_thread_num();
        TileScratch<C> scratch(tiling, kernels.axis_taps_count, kernels.geometry.stride);
        for (std::int64_t item = split.next(me); item >= 0; item = split.next(me)) {
            const Tile tile = tile_of(tiling, item);
            if (kernels.interior_pass) {
                sample_tile_by_interior_pass(task, kernels, tile, scratch);
            } else {
                sample_tile_by_blocks(task, kernels, tile, scratch);
            }
        }
    }
}

}  // namespace

bool fast_path_serves(const Task& task) {
    bool served = false;
    visit_dtype(task.input.dtype, [&](auto pixel) {
        served = kFastStorage<typename decltype(pixel)::type> && fast_path_applies(task, static_cast<int>(task.input.rank()) - 2);
    });
    return served;
}

void sample_by_fast_path(const Task& task) {
    visit_sample_types(task, [&](auto pixel, auto coordinate) {
        using S = typename decltype(pixel)::type;
        if constexpr (kFastStorage<S>) run_fast<S, typename decltype(coordinate)::type>(task);
    });
}

}  // namespace gridwarp::detail
