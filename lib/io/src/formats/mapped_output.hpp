// Internal: an output sampled straight into its file's mapped pages.
#pragma once

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>

#include "files/mapped_file.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/tiles.hpp"

namespace gridwarp::io::detail {

// An output sampled straight into its file: `image.pixels` are the mapped voxel bytes of `file`
// (created at its final size, header written). Release the image's pixels, then call finish() to
// close the file (or abandon() on failure); the caller moves the file into place.
struct MappedOutput {
    Image image;
    FileClosers closers;
};

// The same for a .npy (any dtype but strings), stored as (N, C, spatial...): the image's layout
// becomes planar.
std::optional<MappedOutput> map_npy_output(const StagedFile& staged, const Image& description);

// Walks the rows (along the innermost axis) of tile `index` of `layout` in a raster stored whole in
// C order: row(voxel in the raster, voxel in the tile, voxels in the row), after clearing a tile cut
// by the raster's far edges (`out`, tile_bytes()), so that what lies past them is zero.
template <class Row>
void for_each_tile_row(const TileLayout& layout, const Shape& index, std::uint8_t* out, Row&& row) {
    const std::size_t rank = layout.spatial.size();
    Shape start(rank), extent(rank);
    for (std::size_t a = 0; a < rank; ++a) {
        start[a] = index[a] * layout.tile[a];
        extent[a] = std::min(layout.tile[a], layout.spatial[a] - start[a]);
    }
    if (extent != layout.tile) std::memset(out, 0, static_cast<std::size_t>(layout.tile_bytes()));
    Shape at(rank, 0);  // the row within the tile; at[rank - 1] stays 0
    for (;;) {
        std::size_t in_raster = 0, in_tile = 0;
        for (std::size_t a = 0; a < rank; ++a) {
            in_raster = in_raster * static_cast<std::size_t>(layout.spatial[a]) + static_cast<std::size_t>(start[a] + at[a]);
            in_tile = in_tile * static_cast<std::size_t>(layout.tile[a]) + static_cast<std::size_t>(at[a]);
        }
        row(in_raster, in_tile, static_cast<std::size_t>(extent[rank - 1]));
        std::size_t a = rank - 1;
        while (a-- > 0) {
            if (++at[a] < extent[a]) break;
            at[a] = 0;
        }
        if (a == static_cast<std::size_t>(-1)) break;
    }
}

// A .npy of one (1, C, H, W) or (1, C, D, H, W) tensor of numbers, little-endian in C order, as
// tiles (512^2 or 128^3) copied out of its memory map; nullptr for any other .npy (read whole).
std::unique_ptr<TileSource> open_npy_tiles(const std::filesystem::path& file, const ReadOptions& options);

// Runs work(i) for i in [0, count) on `threads` threads (0: every core), taking i in order; the
// first exception stops the rest and is rethrown.
void run_tasks_in_order(std::int64_t count, int threads, const std::function<void(std::int64_t)>& work);

// A format's writer by tiles (FormatHandler::write_tiles).
using TileWriter = void (*)(const StagedFile& staged, const Image& description, const WriteOptions& options, int threads,
                            const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done, const TileShare& share);

// An image held whole (N = 1) written to `target` through a format's writer by tiles, each tile
// copied out of it; its geometry is kept.
void write_whole_by_tiles(const std::filesystem::path& target, const Image& image, const WriteOptions& options, TileWriter write_tiles);

// Fills a mapped output (map_nifti_output, map_npy_output: nullopt is an error naming the target)
// a region at a time (write_by_tiles): regions of 512^2 or 128^3 in Z-order on `threads` threads,
// each sampled by `produce` straight into the mapped pages; then the file is closed.
void write_mapped_tiles(const StagedFile& staged, const Image& description, std::optional<MappedOutput> output, int threads,
                        const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done);

}  // namespace gridwarp::io::detail
