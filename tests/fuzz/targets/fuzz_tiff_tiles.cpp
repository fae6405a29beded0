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
        if (gridwarp::shape_numel(layout.spatial) > (std::int64_t{1} << 20)) return 0;
        gridwarp::io::TileCache cache(*tiles, layout.tile_bytes() * 2);
        const gridwarp::Shape step{std::min<std::int64_t>(layout.spatial[0], 97), std::min<std::int64_t>(layout.spatial[1], 89)};
        std::vector<std::uint8_t> region(static_cast<std::size_t>(step[0] * step[1] * layout.channels) * gridwarp::dtype_size(layout.dtype));
        for (std::int64_t y = 0; y < layout.spatial[0]; y += step[0]) {
            for (std::int64_t x = 0; x < layout.spatial[1]; x += step[1]) {
                cache.read_region({y, x}, {std::min(step[0], layout.spatial[0] - y), std::min(step[1], layout.spatial[1] - x)}, region.data());
            }
        }
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
