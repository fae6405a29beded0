// Internal: OME-Zarr (NGFF 0.4, Zarr v2) stores, read and written a chunk at a time
// (docs/formats.md, docs/bigdata.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/tiles.hpp"

namespace gridwarp::io::detail {

// The folder inside a store that marks it as still being written in place (--tiles, --resume):
// it holds the number of shares and a file for each share that has finished.
inline constexpr std::string_view kUnfinishedFolder = ".gridwarp-unfinished";

// The multiscale level `level` (0: the finest) of an OME-Zarr store (or a bare Zarr v2 array) as
// tiles: one chunk of the spatial axes, every channel. Axes (c,) y, x make an image (3 and 4
// channels in BGR(A) order, as every raster); (c,) z, y, x a volume with the level's scale and
// translation as its spacing and origin. Throws FileError for metadata gridwarp does not read or
// that is damaged, and for a store still being written unless `unfinished_allowed`.
std::unique_ptr<TileSource> open_zarr_level(const std::filesystem::path& store, std::size_t level, const ReadOptions& options,
                                            bool unfinished_allowed);
std::unique_ptr<TileSource> open_zarr_tiles(const std::filesystem::path& store, const ReadOptions& options);
// The whole first level, assembled from its chunks.
Image read_zarr(const std::filesystem::path& store, const ReadOptions& options, bool with_pixels);

// Chunk codecs of Zarr v2 (numcodecs ids).
enum class ZarrCodec { None, Zlib, Gzip, Zstd, Blosc };
// The NumPy type string of a dtype as gridwarp writes it ("|u1", "<i2", "<f4").
std::string zarr_dtype_code(DType dtype);
// The stored channel of channel c: RGB(A) in the store, BGR(A) in memory as for every raster.
std::int64_t zarr_stored_channel(std::int64_t c, std::int64_t channels, bool raster);

// Writes `description` as an OME-Zarr store chunk by chunk (write_by_tiles): chunks of 512^2
// (images) or 128^3 (volumes), one channel each, compressed by Blosc (LZ4, byte shuffle, level 5,
// one thread: the bytes do not depend on the machine) unless options.chunk_codec names zstd, zlib,
// gzip or none; with options.pyramid_levels, the 2x reductions of each level made from its chunks
// as they are written. A share (TileShare::in_place) writes its part of the chunks into the store
// at staged.target itself, creating it if no other share has.
void write_zarr_tiles(const StagedFile& staged, const Image& description, const WriteOptions& options, int threads,
                      const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done, const TileShare& share);
void write_zarr_image(const std::filesystem::path& target, const Image& image, const WriteOptions& options);

}  // namespace gridwarp::io::detail
