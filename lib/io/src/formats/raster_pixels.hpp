// Internal: pixel buffers in the layouts the decoders fill and the writers take (image.cpp), and
// the limit on the geometry a file may declare.
#pragma once

#include <cstdint>

#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

// The largest magnitude accepted in a file's geometry (spacings, origins, matrices, in mm): no
// imaging geometry spans 10,000 km, and positions computed from larger values lose all precision.
inline constexpr double kMaxGeometryMagnitude = 1e10;

// The strides of the (N, C, spatial...) view of C-ordered pixels stored as `layout` says
// ((N, C, spatial...) or (N, spatial..., C)).
Shape nchw_strides(const Shape& spatial, std::int64_t channels, ChannelLayout layout);

// What a raster decoder fills: `pages` items of height x width pixels, `channels` interleaved
// (grey; BGR or BGRA for 3 and 4), zeroed; raster_description leaves the pixels empty (a tensor of
// the dtype with no elements) for the decoder to give.
Image raster_description(DType dtype, std::int64_t height, std::int64_t width, std::int64_t channels, std::int64_t pages = 1);
Image decoded_raster(DType dtype, std::int64_t height, std::int64_t width, std::int64_t channels, std::int64_t pages = 1);

// The pixels of `image` as a C-ordered buffer in `layout` ((N, spatial..., C) or (N, C, spatial...)):
// image.pixels itself when it already is one, else a converted copy kept in `scratch`.
const void* pixels_in_layout(const Image& image, ChannelLayout layout, Tensor& scratch);

// The same image with its channels interleaved (a copy when they are planar).
Image interleaved(Image image);

// A scaled image's values back in their stored type, (value - inter) / slope rounded and
// saturated: the pixels (and shape) a writer that keeps the scaling stores.
Image stored_values(const Image& image, DType stored);

// How a format that stores a scaling (NIfTI, MRtrix3) stores `image`: in `stored`, its values
// turned into it by stored_values where `converts`, the slope and intercept in the header where
// `writes_scaling` (values from a scaled file, or the stored values themselves).
struct ScaledStorage {
    DType stored = DType::Float32;
    bool converts = false;
    bool writes_scaling = false;
};
ScaledStorage scaled_storage(const Image& image);

}  // namespace gridwarp::io::detail
