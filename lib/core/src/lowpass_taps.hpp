// The anti-aliasing low-pass of one axis as rows of weights (docs/semantics.md, "Anti-aliasing"):
// shared by the filtered copy (antialias.cpp) and the reduction onto the output grid
// (shrink_onto_grid.cpp), so that both apply the same kernel.
#pragma once

#include <cstdint>
#include <vector>

namespace gridwarp::detail {

// Row i reads input indices first[i] .. first[i] + count[i] - 1 with weights weights[i * width ..].
struct LowpassTaps {
    std::int64_t width = 0;
    std::vector<std::int64_t> first, count;
    std::vector<double> weights;
};

// Row i of the low-pass along an axis of `length`: Lanczos-3 stretched by `factor` at integer
// offsets, taps outside 0 .. length - 1 dropped and the rest scaled to sum to 1. Returns the first
// input index read; `weights` gets one weight per index from there.
std::int64_t lowpass_row(std::int64_t length, double factor, std::int64_t i, std::vector<double>& weights);

// Every row of an axis.
LowpassTaps lowpass_taps(std::int64_t length, double factor);

}  // namespace gridwarp::detail
