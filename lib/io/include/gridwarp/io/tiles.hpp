// Rasters read and written a tile at a time, for images larger than memory (docs/bigdata.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "gridwarp/io/image.hpp"

namespace gridwarp::io {

// A raster or volume stored in tiles (chunks) that decode on their own: a TIFF page's tiles, or its
// strips as tiles of the full width; a Zarr array's chunks.
struct TileLayout {
    Shape spatial;  // (H, W) or (D, H, W): outermost first
    Shape tile;     // every tile's extent along the same axes (those at the far edges are cut)
    std::int64_t channels = 1;
    DType dtype = DType::UInt8;

    Shape tile_counts() const;       // tiles along each axis
    std::int64_t tile_count() const;
    std::uint64_t tile_bytes() const;  // a whole tile, every channel
};

class TileSource {
public:
    virtual ~TileSource() = default;
    const TileLayout& layout() const { return layout_; }
    // What read_image_header says of the file: its kind, shape, type and geometry, without pixels.
    virtual Image describe() const = 0;
    // Decodes the tile at `index` (one per axis) into `out`: tile_bytes(), voxels in C order over the
    // whole tile's extent, channels interleaved in the order read_image gives them. Safe to call
    // from several threads. Throws FileError for a damaged tile.
    virtual void read_tile(const Shape& index, std::uint8_t* out) const = 0;

protected:
    TileLayout layout_;
};

// The tile source of `file` where its format is read by tiles and the file is in a form the tile
// reader takes (a TIFF of one page, not turned by an orientation tag unless
// options.keep_orientation, in a layout read_image gives as it is stored); nullptr otherwise,
// and for a file that is not there (read_image then says why).
std::unique_ptr<TileSource> open_tile_source(const std::filesystem::path& file, const ReadOptions& options);

// Decoded tiles of a source kept up to `max_bytes`, those least recently used dropped first.
// Each tile is decoded once while it stays; several threads may read at once.
class TileCache {
public:
    TileCache(const TileSource& source, std::uint64_t max_bytes);
    ~TileCache();
    TileCache(const TileCache&) = delete;
    TileCache& operator=(const TileCache&) = delete;
    // Copies the box at `start` of `extent` (one per axis) into `out`: voxels in C order, channels
    // interleaved.
    void read_region(const Shape& start, const Shape& extent, std::uint8_t* out) const;
    // Tiles decoded so far, counting those decoded again after they were dropped.
    std::uint64_t tiles_decoded() const;

private:
    struct State;
    std::unique_ptr<State> state_;
};

// Whether the format `file`'s name selects writes tiles (write_by_tiles).
bool writes_tiles(const std::filesystem::path& file);
// Whether it also writes shares of them into one output in place (TileShare; OME-Zarr stores).
bool writes_tile_shares(const std::filesystem::path& file);

// The part of an output's tiles one process writes, into the output itself rather than a staged
// copy, so that several processes fill one output (--tiles K/N) and a stopped run goes on
// (--resume). Share `index` of `count` takes the index-th of `count` runs of tiles in Z-order; the
// output is complete once every share has finished, and reads are refused until then. A finished
// output is not written into again (a resumed run finds nothing left to do).
struct TileShare {
    std::int64_t index = 0, count = 1;
    bool resume = false;  // skip tiles whose chunks are already there
    // What tells this job's output from another's of the same size and type (a digest of what it
    // samples and how): the shares of one store must agree on it.
    std::string job;
    bool in_place() const { return count > 1 || resume; }
};

// Fills the tile of the output at `start` (one per axis): `pixels` is (1, C, extent...) in the
// description's dtype, any strides.
using TileProducer = std::function<void(const Shape& start, const TensorView& pixels)>;

// The order write_by_tiles takes the tiles of a grid of `counts` tiles in: Z-order (the bits of the
// tile indices interleaved), so that tiles taken one after another are near each other and share
// input. Linear (C-order) tile indices.
std::vector<std::int64_t> tiles_in_z_order(const Shape& counts);

// Writes `description` (one item) to `target` tile by tile, atomically: `produce` fills each tile,
// called from `threads` threads at once (0: every core), tiles taken in tiles_in_z_order; each
// tile is encoded and written as soon as it is filled, so memory holds a few tiles per thread,
// whatever the image's size. `done(tiles_written, tiles)` is called after each tile.
// With an in-place share, only that share's tiles are made, written into `target` directly.
void write_by_tiles(const std::filesystem::path& target, const Image& description, const WriteOptions& options, int threads,
                    const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done = nullptr,
                    const TileShare& share = {});

}  // namespace gridwarp::io
