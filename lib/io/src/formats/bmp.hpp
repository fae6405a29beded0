// Internal: uncompressed BMP files read and written without OpenCV. The common forms (24-bit
// colour, 8-bit grey, rows bottom-up or top-down) need no decoding, only their rows put in order,
// and a process that reads or writes nothing else then never loads OpenCV (docs/formats.md).
// Everything else (run-length coding, bit fields, colour palettes, 1/4/16/32-bit pixels) goes to
// OpenCV as before; both give the same pixels for the same file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

// The image, as OpenCV's imread(IMREAD_UNCHANGED) decodes it (BGR, or one grey channel), when the
// file is a plain BMP; nullopt when it is some other form. `head`: the file's first bytes (its
// headers and palette); the caller has checked the declared size against the file and the limits.
std::optional<Image> read_plain_bmp(const std::filesystem::path& file, std::string_view head, std::uint64_t file_size);

// Writes the image to `file` as OpenCV's imwrite would for `target`'s name (.bmp, .dib): the same
// bytes. False, writing nothing, for an image that is not 8-bit with 1, 3 or 4 channels or a name
// that is not a BMP's; the caller leaves those to OpenCV.
bool write_plain_bmp(const StagedFile& staged, const Image& image);

}  // namespace gridwarp::io::detail
