// Filters that run along the lines of one axis of a C-ordered tensor: the B-spline prefilter and
// the anti-aliasing low-pass.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gridwarp/tensor.hpp"

namespace gridwarp::detail {

// Calls filter(lines, scratch, length) on every line of `data` (C-ordered, of `shape`) along `axis`,
// kLanes lines at a time held interleaved in W (sample n of lane b at lines[n * kLanes + b]), so that
// a filter runs kLanes independent chains side by side in vector registers; `scratch` is the
// thread's own buffer of the same size. Lanes are consecutive lines in C order; a last, short group
// has zero lanes that are filtered and dropped. The lines are read through read(flat index) -> W,
// which may take them from another tensor of the same shape (the first pass of a filter that would
// otherwise need a copy first), and written to `data`.
template <int kLanes, class T, class W, class Filter, class Read>
void filter_interleaved_lines_along_axis(T* data, const Shape& shape, std::size_t axis, int threads, const Filter& filter,
                                         const Read& read) {
    const std::int64_t length = shape[axis];
    std::int64_t inner = 1;
    for (std::size_t a = axis + 1; a < shape.size(); ++a) inner *= shape[a];
    const std::int64_t lines_total = shape_numel(shape) / std::max<std::int64_t>(length, 1);
    const std::int64_t groups = (lines_total + kLanes - 1) / kLanes;
#pragma omp parallel num_threads(threads)
    {
        std::vector<W> lines(static_cast<std::size_t>(length * kLanes));
        std::vector<W> scratch(lines.size());
        std::int64_t start[kLanes];
#pragma omp for schedule(dynamic, 1)
        for (std::int64_t g = 0; g < groups; ++g) {
            const int count = static_cast<int>(std::min<std::int64_t>(kLanes, lines_total - g * kLanes));
            for (int b = 0; b < count; ++b) {
                const std::int64_t line = g * kLanes + b;
                start[b] = (line / inner) * length * inner + line % inner;
            }
            for (std::int64_t n = 0; n < length; ++n) {
                W* row = lines.data() + n * kLanes;
                for (int b = 0; b < count; ++b) row[b] = read(start[b] + n * inner);
                for (int b = count; b < kLanes; ++b) row[b] = W(0);
            }
            filter(lines.data(), scratch.data(), length);
            for (std::int64_t n = 0; n < length; ++n) {
                const W* row = lines.data() + n * kLanes;
                for (int b = 0; b < count; ++b) data[start[b] + n * inner] = static_cast<T>(row[b]);
            }
        }
    }
}

template <int kLanes, class T, class W, class Filter>
void filter_interleaved_lines_along_axis(T* data, const Shape& shape, std::size_t axis, int threads, const Filter& filter) {
    filter_interleaved_lines_along_axis<kLanes, T, W>(data, shape, axis, threads, filter,
                                                      [data](std::int64_t i) { return W(data[i]); });
}

}  // namespace gridwarp::detail
