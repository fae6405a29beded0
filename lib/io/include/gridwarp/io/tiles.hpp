// Rasters read and written a tile at a time, for images larger than memory (docs/bigdata.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>

#include "gridwarp/io/image.hpp"

namespace gridwarp::io {

// A 2-D raster stored in tiles that decode on their own (a TIFF page's tiles, or its strips as
// tiles of the full width).
struct TileLayout {
    std::int64_t height = 0, width = 0;            // the raster's pixels
    std::int64_t tile_height = 0, tile_width = 0;  // every tile's (those at the edges are cut)
    std::int64_t channels = 1;
    DType dtype = DType::UInt8;

    std::int64_t tile_rows() const { return (height + tile_height - 1) / tile_height; }
    std::int64_t tile_columns() const { return (width + tile_width - 1) / tile_width; }
    std::uint64_t tile_bytes() const {
        return static_cast<std::uint64_t>(tile_height * tile_width * channels) * dtype_size(dtype);
    }
};

class TileSource {
public:
    virtual ~TileSource() = default;
    const TileLayout& layout() const { return layout_; }
    // Decodes tile (row, column) into `out` (tile_bytes(): tile_height rows of tile_width pixels,
    // channels interleaved in the order read_image gives them). Safe to call from several threads.
    // Throws FileError for a damaged tile.
    virtual void read_tile(std::int64_t row, std::int64_t column, std::uint8_t* out) const = 0;

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
    // Copies the pixels of rows [y, y + rows) and columns [x, x + columns) into `out`, row after
    // row, channels interleaved (rows * columns * channels values).
    void read_region(std::int64_t y, std::int64_t x, std::int64_t rows, std::int64_t columns, std::uint8_t* out) const;
    // Tiles decoded so far, counting those decoded again after they were dropped.
    std::uint64_t tiles_decoded() const;

private:
    struct State;
    std::unique_ptr<State> state_;
};

// Whether the format `file`'s name selects writes tiles (write_by_tiles).
bool writes_tiles(const std::filesystem::path& file);

// Fills the tile of rows [y, y + rows) and columns [x, x + columns) of the output: `pixels` is
// (1, C, rows, columns), channels interleaved, in the description's dtype.
using TileProducer = std::function<void(std::int64_t y, std::int64_t x, const TensorView& pixels)>;

// Writes `description` (a 2-D raster, one item) to `target` tile by tile, atomically: `produce`
// fills each tile, called from `threads` threads at once (0: every core), tiles taken in bands of 8
// tile rows, column by column within a band (neighbours one after another, so that the input they
// share is read once); each tile is encoded and written as soon as it is filled, so memory holds a
// few tiles per thread, whatever the image's size. `done(tiles_written, tiles)` is called after each tile.
void write_by_tiles(const std::filesystem::path& target, const Image& description, const WriteOptions& options, int threads,
                    const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done = nullptr);

}  // namespace gridwarp::io
