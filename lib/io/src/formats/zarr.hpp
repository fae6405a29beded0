// Internal: OME-Zarr (NGFF 0.4, Zarr v2) stores, read and written a chunk at a time
// (docs/formats.md, docs/bigdata.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/tiles.hpp"

namespace gridwarp::io::detail {

// The first multiscale level of an OME-Zarr store (or a bare Zarr v2 array) as tiles: one chunk
// of the spatial axes, every channel. Axes (c,) y, x make an image (3 and 4 channels in BGR(A)
// order, as every raster); (c,) z, y, x a volume with the level's scale and translation as its
// spacing and origin. Throws FileError for metadata gridwarp does not read or that is damaged.
std::unique_ptr<TileSource> open_zarr_tiles(const std::filesystem::path& store, const ReadOptions& options);
// The whole first level, assembled from its chunks.
Image read_zarr(const std::filesystem::path& store, const ReadOptions& options, bool with_pixels);
// Writes `description` as an OME-Zarr store of one level, chunk by chunk (write_by_tiles):
// chunks of 512^2 (images) or 128^3 (volumes), one channel each, compressed by Blosc (LZ4, byte
// shuffle, level 5, one thread: the bytes do not depend on the machine) unless options.chunk_codec
// names zstd, zlib, gzip or none.
void write_zarr_tiles(const StagedFile& staged, const Image& description, const WriteOptions& options, int threads,
                      const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done);
void write_zarr_image(const std::filesystem::path& target, const Image& image, const WriteOptions& options);

}  // namespace gridwarp::io::detail
