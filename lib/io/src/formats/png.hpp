// Internal: PNG read with libpng and written with libdeflate, without OpenCV. libpng reports its
// errors and warnings to hooks of this reader's own, so no decode waits on a process-wide stderr
// capture and jobs of a batch decode in parallel; the writer filters rows and compresses blocks of
// them on several cores into one zlib stream (docs/formats.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

bool has_png_signature(std::span<const std::uint8_t> head);

// The image as OpenCV's imread(IMREAD_UNCHANGED) decodes the file: 8 or 16 bits; one grey channel,
// or BGR, with alpha (BGRA) where the file has an alpha channel or a transparency chunk (a grey
// image with alpha becomes BGRA). Throws FileError for a damaged file; libpng's warnings (a damaged
// ancillary chunk, data after the image) become the image's warnings.
Image read_png(const std::filesystem::path& file);

// PNG levels are zlib's 0..9, compressed with libdeflate's levels of the same numbers.
inline constexpr int kDefaultPngLevel = 4;
inline constexpr std::size_t kIdatBytes = std::size_t{256} << 10;

// Writes `image` (8- or 16-bit; 1, 3 or 4 channels taken as grey, BGR or BGRA) as a PNG to `file`;
// compression_level 0..9 as zlib's, -1 the default. False, writing nothing, for any other image
// (the caller leaves it to OpenCV, which refuses it).
bool write_png(const StagedFile& staged, const Image& image,
               const WriteOptions& options);

}  // namespace gridwarp::io::detail
