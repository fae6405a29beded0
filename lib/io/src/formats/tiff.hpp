// Internal: TIFF read and written with libtiff, without OpenCV. libtiff reports errors to handlers
// of this codec's own (TIFFOpenOptions), so no decode waits on the process-wide stderr capture, and
// every page of a multi-page file is read and written, not only the first (docs/formats.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/tiles.hpp"

namespace gridwarp::io::detail {

bool has_tiff_signature(std::span<const std::uint8_t> head);

// Every page of the file as the items (N) of one interleaved image, N = pages: grey; grey with alpha
// as BGRA (as PNG's reader gives it); BGR or BGRA; palette colours as BGR; 8- to 64-bit integers,
// 16- to 64-bit floats; 1-, 2- and 4-bit grey widened to 8 bits. Reduced-resolution images (previews,
// pyramid levels) are not pages. nullopt for the forms left to OpenCV (CMYK, Lab, uncompressed YCbCr,
// LogLuv, ...). Throws FileError for a damaged file, for a page of another size, type or channel
// count than the first, and for pages that need more than options.memory.
std::optional<Image> read_tiff(const std::filesystem::path& file, const ReadOptions& options);

// The orientation tag (1 to 8) of the first page that is not a reduced-resolution image, as libtiff
// reads it (classic or BigTIFF, SHORT or LONG); 0 where there is none or the file cannot be read.
// read_tiff's images carry their page's already; this is for the forms left to OpenCV.
int read_tiff_orientation(const std::filesystem::path& file);

// Writes each item (N) of `image` as a page, LZW-compressed (with horizontal differencing for
// integers): 1 channel grey, 2 grey and an unspecified sample, 3 RGB (from BGR), 4 RGB and alpha.
// Throws FileError, writing nothing, for a type TIFF readers do not share (bool, bfloat16, float16,
// complex, strings) or more than 4 channels.
void write_tiff(const StagedFile& staged, const Image& image);

// The tiles (or strips) of a single-page TIFF in a form read_tiff gives sample for sample (8 bits
// and wider, contiguous samples, no orientation to apply unless options.keep_orientation); nullptr
// for any other TIFF, which is read whole.
std::unique_ptr<TileSource> open_tiff_tiles(const std::filesystem::path& file, const ReadOptions& options);

// A 2-D raster as a tiled TIFF (512 x 512 tiles; BigTIFF past 3 GiB) written tile by tile (io::write_by_tiles):
// Adobe Deflate at options.compression_level (default 4; 0 stores the tiles), with horizontal
// differencing for integers, tiles in the order taken (write_by_tiles) whatever order the threads
// finish them in.
void write_tiff_tiles(const StagedFile& staged, const Image& description, const WriteOptions& options, int threads,
                      const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done, const TileShare& share);

}  // namespace gridwarp::io::detail
