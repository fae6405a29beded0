// The gather of 2 to 4 interleaved 8- or 16-bit channels (RGB, RGBA images) on processors with
// hardware gathers: one 32-bit gather per tap reads every channel of 8 or 16 points
// (interleaved_gather.cpp, one Highway source for every such target).
#pragma once

#include <cstdint>

namespace gridwarp::detail {

// Samples the first points of a block whose count is a multiple of the vector length, and returns
// how many it did (the caller does the rest). Point p's channel c is the sum over taps t, in tap
// order from 0, of tap_weights[t * weight_stride + p] * in[base[p] + tap_offset[t] + c], rounded
// half to even and saturated, written to out[c * out_channel_stride + p * out_point_stride]. Each
// point's 32-bit words from in + base[p] + tap_offset[t] must lie inside the input.
template <class S>
using InterleavedGatherFunction = std::int64_t (*)(std::int64_t count, const std::int32_t* base, const std::int32_t* tap_offset,
                                                   const float* tap_weights, std::int64_t weight_stride, const S* in, S* out,
                                                   std::int64_t out_point_stride, std::int64_t out_channel_stride);

// The gather for S in {uint8, uint16}, 2 to 4 channels and 4, 8, 16 or 64 taps on the best allowed
// target (simd_targets.hpp), or nullptr where none has hardware gathers or the form is not served.
template <class S>
InterleavedGatherFunction<S> select_interleaved_gather(std::int64_t channels, int taps);

}  // namespace gridwarp::detail
