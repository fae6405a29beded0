// Rasters read and written a tile at a time: the tile cache, and the format table's tile rows.
#include "gridwarp/io/tiles.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "formats/format_table.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

std::unique_ptr<TileSource> open_tile_source(const fs::path& file, const ReadOptions& options) {
    const detail::FormatHandler& format = detail::format_for_path(file);
    std::error_code error;
    if (!format.open_tiles || !fs::is_regular_file(file, error)) return nullptr;
    return format.open_tiles(file, options);
}

struct TileCache::State {
    // A tile decoded, or being decoded by the thread that asked for it first.
    struct CachedTile {
        std::mutex mutex;
        std::condition_variable decoded;
        bool ready = false;
        std::exception_ptr error;
        std::vector<std::uint8_t> pixels;
    };
    const TileSource& source;
    std::uint64_t max_bytes;
    std::mutex mutex;
    std::list<std::int64_t> recent;  // most recently used first
    struct Entry {
        std::shared_ptr<CachedTile> tile;
        std::list<std::int64_t>::iterator place;
    };
    std::unordered_map<std::int64_t, Entry> tiles;
    std::uint64_t decoded = 0;

    // Tile `index`, decoded here or by the thread already at it.
    std::shared_ptr<CachedTile> tile(std::int64_t index) {
        std::shared_ptr<CachedTile> tile;
        bool decode = false;
        {
            const std::lock_guard lock(mutex);
            const auto found = tiles.find(index);
            if (found != tiles.end()) {
                recent.splice(recent.begin(), recent, found->second.place);
                tile = found->second.tile;
            } else {
                tile = std::make_shared<CachedTile>();
                recent.push_front(index);
                tiles.emplace(index, Entry{tile, recent.begin()});
                decode = true;
                ++decoded;
                // Dropped tiles stay alive for the threads still copying from them.
                const std::uint64_t tile_bytes = source.layout().tile_bytes();
                while (tiles.size() > 1 && tiles.size() * tile_bytes > max_bytes) {
                    tiles.erase(recent.back());
                    recent.pop_back();
                }
            }
        }
        if (decode) {
            try {
                tile->pixels.resize(source.layout().tile_bytes());
                const TileLayout& layout = source.layout();
                source.read_tile(index / layout.tile_columns(), index % layout.tile_columns(), tile->pixels.data());
            } catch (...) {
                tile->error = std::current_exception();
            }
            {
                const std::lock_guard lock(tile->mutex);
                tile->ready = true;
            }
            tile->decoded.notify_all();
        } else {
            std::unique_lock lock(tile->mutex);
            tile->decoded.wait(lock, [&] { return tile->ready; });
        }
        if (tile->error) {
            const std::lock_guard lock(mutex);  // a damaged tile is not kept: asking again reports it again
            const auto found = tiles.find(index);
            if (found != tiles.end() && found->second.tile == tile) {
                recent.erase(found->second.place);
                tiles.erase(found);
            }
            std::rethrow_exception(tile->error);
        }
        return tile;
    }
};

TileCache::TileCache(const TileSource& source, std::uint64_t max_bytes) : state_(new State{source, max_bytes, {}, {}, {}, 0}) {}
TileCache::~TileCache() = default;

std::uint64_t TileCache::tiles_decoded() const {
    const std::lock_guard lock(state_->mutex);
    return state_->decoded;
}

void TileCache::read_region(std::int64_t y, std::int64_t x, std::int64_t rows, std::int64_t columns, std::uint8_t* out) const {
    const TileLayout& layout = state_->source.layout();
    if (y < 0 || x < 0 || rows < 0 || columns < 0 || y + rows > layout.height || x + columns > layout.width) {
        throw std::invalid_argument("TileCache::read_region: the region lies outside the raster");
    }
    const std::size_t pixel_bytes = static_cast<std::size_t>(layout.channels) * dtype_size(layout.dtype);
    const std::size_t tile_row_bytes = static_cast<std::size_t>(layout.tile_width) * pixel_bytes;
    const std::size_t out_row_bytes = static_cast<std::size_t>(columns) * pixel_bytes;
    for (std::int64_t tile_row = y / layout.tile_height; tile_row * layout.tile_height < y + rows; ++tile_row) {
        for (std::int64_t tile_column = x / layout.tile_width; tile_column * layout.tile_width < x + columns; ++tile_column) {
            const std::shared_ptr<State::CachedTile> tile = state_->tile(tile_row * layout.tile_columns() + tile_column);
            const std::int64_t top = tile_row * layout.tile_height, left = tile_column * layout.tile_width;
            const std::int64_t first_row = std::max(y, top), end_row = std::min(y + rows, top + layout.tile_height);
            const std::int64_t first_column = std::max(x, left), end_column = std::min(x + columns, left + layout.tile_width);
            const auto bytes = static_cast<std::size_t>(end_column - first_column) * pixel_bytes;
            for (std::int64_t r = first_row; r < end_row; ++r) {
                std::memcpy(out + static_cast<std::size_t>(r - y) * out_row_bytes + static_cast<std::size_t>(first_column - x) * pixel_bytes,
                            tile->pixels.data() + static_cast<std::size_t>(r - top) * tile_row_bytes +
                                static_cast<std::size_t>(first_column - left) * pixel_bytes,
                            bytes);
            }
        }
    }
}

bool writes_tiles(const fs::path& file) { return detail::format_for_path(file).write_tiles != nullptr; }

void write_by_tiles(const fs::path& target, const Image& description, const WriteOptions& options, int threads,
                    const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done) {
    const detail::FormatHandler& format = detail::format_for_path(target);
    if (!format.write_tiles) throw FileError(target, std::string(format.name) + " files are not written by tiles");
    write_path_atomically(target, [&](const StagedFile& staged) {
        format.write_tiles(staged, description, options, threads, produce, done);
    });
}

}  // namespace gridwarp::io
