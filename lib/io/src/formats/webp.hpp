// Internal: WebP read and written with libwebp, without OpenCV (libwebp reports through return
// values and never prints, so no decode or encode needs the stderr capture).
#pragma once

#include <filesystem>
#include <optional>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

// The image as OpenCV's imread(IMREAD_UNCHANGED) decodes the file: 8-bit BGR, or BGRA where the
// file has alpha. nullopt for an animation (left to OpenCV, which refuses it). Throws FileError for
// a damaged file and for pixels that need more than options.memory.
std::optional<Image> read_webp(const std::filesystem::path& file, const ReadOptions& options);

// Writes an 8-bit grey (as BGR), BGR or BGRA image as OpenCV's imwrite does: lossless without
// options.quality, else lossy at that quality. False, writing nothing, for any other image.
bool write_webp(const StagedFile& staged, const Image& image,
                const WriteOptions& options);

}  // namespace gridwarp::io::detail
