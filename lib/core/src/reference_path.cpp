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
#include "sampler_task.hpp"

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

namespace {

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

}  // namespace

void sample_by_reference(const Task& task) {
    visit_sample_types(task, [&](auto pixel, auto coordinate) {
        run_reference<typename decltype(pixel)::type, typename decltype(coordinate)::type>(task);
    });
}

}  // namespace gridwarp::detail
