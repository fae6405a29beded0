// EXIF orientation (tag 0x0112): how a viewer turns an image's stored pixels before showing them.
#pragma once

#include <filesystem>

#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

// The orientation a JPEG (APP1 Exif), PNG (eXIf) or WebP (EXIF) file declares, 1 to 8, or 0 where it
// declares none or the tag cannot be read (a damaged tag is ignored, as viewers do). A TIFF's is its
// page's own tag, read through libtiff (read_tiff_orientation).
int read_exif_orientation(const std::filesystem::path& file);

// Turns the pixels of a 2-D interleaved raster ((N,) H, W, C; every page alike) the way orientation 2..8 asks (Pillow's
// ImageOps.exif_transpose): afterwards they are what a viewer shows. 0 and 1 change nothing.
void apply_exif_orientation(Image& image, int orientation);

}  // namespace gridwarp::io::detail
