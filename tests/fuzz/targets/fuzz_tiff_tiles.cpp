// TIFF files through the tile reader (io::open_tile_source, tiff.cpp) and the tile cache: each
// tile's place and size from the header, checked against the file and --max-memory, every tile
// decoded and every region of the raster assembled from them.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/tiles.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const gridwarp::fuzz::ScratchFile file(".tif");
    gridwarp::io::ReadOptions options;
    options.memory.max_bytes = std::uint64_t{1} << 24;
    try {
        const auto tiles = gridwarp::io::open_tile_source(file.write(gridwarp::fuzz::as_text(data, size)), options);
        if (!tiles) return 0;
        const gridwarp::io::TileLayout& layout = tiles->layout();
        // Small rasters only: the run reads all of it.
        if (layout.height * layout.width > (std::int64_t{1} << 20)) return 0;
        gridwarp::io::TileCache cache(*tiles, layout.tile_bytes() * 2);
        const std::int64_t rows = std::min<std::int64_t>(layout.height, 97), columns = std::min<std::int64_t>(layout.width, 89);
        std::vector<std::uint8_t> region(static_cast<std::size_t>(rows * columns * layout.channels) * gridwarp::dtype_size(layout.dtype));
        for (std::int64_t y = 0; y < layout.height; y += rows) {
            for (std::int64_t x = 0; x < layout.width; x += columns) {
                cache.read_region(y, x, std::min(rows, layout.height - y), std::min(columns, layout.width - x), region.data());
            }
        }
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
