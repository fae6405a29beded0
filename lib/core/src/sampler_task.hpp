// What the sampling paths share: a call's task, the fill value in a pixel type, the split of the
// output into chunks over the threads, and each path's entry point (grid_sample.cpp picks one).
#pragma once

#include "gridwarp/grid_sample.hpp"

#include "reference_stages.hpp"
#include "work_split.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace gridwarp::detail {

// Points per chunk: enough to amortise the per-row calls, few enough that a plan stays in cache.
constexpr std::int64_t kPlanTapBudget = 8192;

struct Task {
    const ConstTensorView& input;
    const PositionSource& positions;
    const TensorView& output;
    const SampleOptions& options;
    // Elements of a batch item, from its start, that may be read; -1: all the input view spans. A
    // view that places a box of the input in the whole (grid_sample_in_box) holds less.
    std::int64_t readable_span = -1;
};

template <class S>
struct Fill {
    S stored{};
    typename compute_type<S>::type value{};
    explicit Fill(double fill) {
        if constexpr (!std::is_same_v<S, std::string>) {
            using V = typename compute_type<S>::type;
            value = V(static_cast<typename real_of<V>::type>(fill));
            stored = store<S>(value);
        }
    }
};

inline int thread_count(const SampleOptions& options) { return options.threads > 0 ? options.threads : omp_get_max_threads(); }

// The output's rows in chunks of at most `chunk` points, shared out over the threads: each thread
// makes its scratch with make_scratch() and calls visit(scratch, n, outer, start, count, out_offset)
// per chunk, with outer the row's index on the axes before the last (outermost first).
template <class MakeScratch, class Visit>
void for_each_chunk(const Task& task, std::int64_t chunk, MakeScratch make_scratch, Visit visit) {
    const auto& output = task.output;
    const int rank = static_cast<int>(task.input.rank()) - 2;
    const Shape& out_spatial = task.positions.output_shape();
    const std::int64_t width = out_spatial.back();
    const std::int64_t rows = shape_numel(Shape(out_spatial.begin(), out_spatial.end() - 1));
    const std::int64_t chunks_per_row = (width + chunk - 1) / chunk;
    const std::int64_t work_items = task.input.shape[0] * rows * chunks_per_row;
    const int threads = thread_count(task.options);
    WorkSplit split(work_items, threads);
#pragma omp parallel num_threads(threads)
    {
        const int me = omp_get_thread_num();
        auto scratch = make_scratch();
        std::vector<std::int64_t> outer(static_cast<std::size_t>(std::max(rank - 1, 1)), 0);
        for (std::int64_t item = split.next(me); item >= 0; item = split.next(me)) {
            const std::int64_t chunk_index = item % chunks_per_row;
            const std::int64_t row = (item / chunks_per_row) % rows;
            const std::int64_t n = item / (chunks_per_row * rows);
            const std::int64_t start = chunk_index * chunk;
            const std::int64_t count = std::min(chunk, width - start);
            std::int64_t out_offset = n * output.strides[0] + start * output.strides[rank + 1];
            std::int64_t rest = row;
            for (int axis = rank - 2; axis >= 0; --axis) {
                outer[static_cast<std::size_t>(axis)] = rest % out_spatial[static_cast<std::size_t>(axis)];
                rest /= out_spatial[static_cast<std::size_t>(axis)];
                out_offset += outer[static_cast<std::size_t>(axis)] * output.strides[axis + 2];
            }
            visit(scratch, n, outer.data(), start, count, out_offset);
        }
    }
}

// Calls fn(type_tag<S>{}, type_tag<C>{}) with the task's pixel type S and coordinate type C.
template <class Fn>
void visit_sample_types(const Task& task, Fn fn) {
    visit_dtype(task.input.dtype, [&](auto pixel) {
        if (task.positions.coordinate_dtype() == DType::Float64) {
            fn(pixel, type_tag<double>{});
        } else {
            fn(pixel, type_tag<float>{});
        }
    });
}

// The paths, each in a file of its own.
void sample_by_reference(const Task& task);                  // reference_path.cpp: any rank, type and ONNX kind
bool fast_path_serves(const Task& task);                      // fast_path.cpp: ranks 2 and 3 of the common types
void sample_by_fast_path(const Task& task);
void sample_separable(const Task& task);                      // separable_path.cpp: B-splines, windowed sincs
void sample_gaussian(const Task& task);                       // gaussian_path.cpp: Gaussian, MultiLabel
void check_gaussian_options(const SampleOptions& options, std::int64_t spatial_rank);
// Gaussian and MultiLabel: the cut-off in sigmas, and sigma in pixels along spatial axis `axis`.
double gaussian_alpha(const SampleOptions& options);
double gaussian_sigma(const SampleOptions& options, int axis);

}  // namespace gridwarp::detail
