// Internal: JPEG read and written with libjpeg-turbo, without OpenCV. libjpeg's errors and warnings go to an
// error manager of this reader's own, so no decode waits on the process-wide stderr capture and
// jobs of a batch decode in parallel (docs/formats.md).
#pragma once

#include <filesystem>
#include <optional>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

// The image as OpenCV's imread(IMREAD_UNCHANGED) decodes the file: 8-bit grey or BGR. nullopt for
// the forms left to OpenCV (four components: CMYK or YCCK; other precisions). Throws FileError for a
// damaged file: libjpeg's warnings (a premature end, corrupt data) refuse it, as they did through
// OpenCV, where they were caught on stderr.
std::optional<Image> read_jpeg(const std::filesystem::path& file, const MemoryBudget& budget);

// OpenCV's JPEG quality when none is given.
inline constexpr int kDefaultJpegQuality = 95;

// Writes an 8-bit grey or BGR image as OpenCV's imwrite does (libjpeg's defaults, baseline
// quantisation tables at options.quality or 95, 4:2:0 chroma), to `file`. False, writing nothing,
// for any other image (the caller leaves it to OpenCV: four channels, other depths).
bool write_jpeg(const StagedFile& staged, const Image& image,
                const WriteOptions& options);

}  // namespace gridwarp::io::detail
