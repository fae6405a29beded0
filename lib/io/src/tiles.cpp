// Rasters read and written a tile at a time: the tile cache, and the format table's tile rows.
#include "gridwarp/io/tiles.hpp"

#include <algorithm>
#include <atomic>
#include <thread>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "formats/format_table.hpp"
#include "formats/mapped_output.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

Shape TileLayout::tile_counts() const {
    Shape counts(spatial.size());
    for (std::size_t a = 0; a < spatial.size(); ++a) counts[a] = (spatial[a] + tile[a] - 1) / tile[a];
    return counts;
}

std::int64_t TileLayout::tile_count() const { return shape_numel(tile_counts()); }

std::uint64_t TileLayout::tile_bytes() const {
    return static_cast<std::uint64_t>(shape_numel(tile) * channels) * dtype_size(dtype);
}

std::vector<std::int64_t> tiles_in_z_order(const Shape& counts) {
    const std::size_t rank = counts.size();
    int bits = 0;
    for (const auto count : counts) {
        while ((std::int64_t{1} << bits) < count) ++bits;
    }
    std::vector<std::int64_t> order;
    order.reserve(static_cast<std::size_t>(shape_numel(counts)));
    const std::uint64_t codes = std::uint64_t{1} << (bits * rank);
    for (std::uint64_t code = 0; code < codes && order.size() < order.capacity(); ++code) {
        std::int64_t linear = 0;
        bool inside = true;
        for (std::size_t a = 0; a < rank && inside; ++a) {
            std::int64_t index = 0;
            for (int b = 0; b < bits; ++b) index |= static_cast<std::int64_t>((code >> (b * rank + (rank - 1 - a))) & 1) << b;
            inside = index < counts[a];
            linear = linear * counts[a] + index;
        }
        if (inside) order.push_back(linear);
    }
    return order;
}

std::unique_ptr<TileSource> open_tile_source(const fs::path& file, const ReadOptions& options) {
    const detail::FormatHandler& format = detail::format_for_path(file);
    std::error_code error;
    if (!format.open_tiles || !(fs::is_regular_file(file, error) || fs::is_directory(file, error))) return nullptr;
    return format.open_tiles(file, options);
}

struct TileCache::State {
    // A tile decoded, or being decoded by the thread that asked for it first.
    struct CachedTile {
        std::mutex mutex;
        std::condition_variable decoded;
        bool ready = false;
        std::exception_ptr error;
        std::unique_ptr<std::uint8_t[]> pixels;  // every byte written by read_tile: not cleared first
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
                tile->pixels = std::make_unique_for_overwrite<std::uint8_t[]>(source.layout().tile_bytes());
                const TileLayout& layout = source.layout();
                const Shape counts = layout.tile_counts();
                Shape tile_index(counts.size());
                std::int64_t rest = index;
                for (std::size_t a = counts.size(); a-- > 0;) {
                    tile_index[a] = rest % counts[a];
                    rest /= counts[a];
                }
                source.read_tile(tile_index, tile->pixels.get());
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

void TileCache::read_region(const Shape& start, const Shape& extent, std::uint8_t* out) const {
    const TileLayout& layout = state_->source.layout();
    const std::size_t rank = layout.spatial.size();
    if (start.size() != rank || extent.size() != rank) throw std::invalid_argument("TileCache::read_region: a start and extent per axis");
    for (std::size_t a = 0; a < rank; ++a) {
        if (start[a] < 0 || extent[a] < 1 || start[a] + extent[a] > layout.spatial[a]) {
            throw std::invalid_argument("TileCache::read_region: the region lies outside the raster");
        }
    }
    const std::size_t voxel_bytes = static_cast<std::size_t>(layout.channels) * dtype_size(layout.dtype);
    const Shape counts = layout.tile_counts();
    // The tiles the region meets, each copied row by row (rows along the innermost axis).
    Shape first(rank), last(rank);
    for (std::size_t a = 0; a < rank; ++a) {
        first[a] = start[a] / layout.tile[a];
        last[a] = (start[a] + extent[a] - 1) / layout.tile[a];
    }
    Shape tile_index = first;
    for (;;) {
        std::int64_t linear = 0;
        for (std::size_t a = 0; a < rank; ++a) linear = linear * counts[a] + tile_index[a];
        const std::shared_ptr<State::CachedTile> tile = state_->tile(linear);
        Shape lo(rank), hi(rank);  // the part of the region in this tile, in raster voxels
        for (std::size_t a = 0; a < rank; ++a) {
            lo[a] = std::max(start[a], tile_index[a] * layout.tile[a]);
            hi[a] = std::min(start[a] + extent[a], (tile_index[a] + 1) * layout.tile[a]);
        }
        const auto row_bytes = static_cast<std::size_t>(hi[rank - 1] - lo[rank - 1]) * voxel_bytes;
        Shape at = lo;  // the row's first voxel; at[rank - 1] stays lo[rank - 1]
        for (;;) {
            std::int64_t in_tile = 0, in_region = 0;
            for (std::size_t a = 0; a < rank; ++a) {
                in_tile = in_tile * layout.tile[a] + (at[a] - tile_index[a] * layout.tile[a]);
                in_region = in_region * extent[a] + (at[a] - start[a]);
            }
            std::memcpy(out + static_cast<std::size_t>(in_region) * voxel_bytes, tile->pixels.get() + static_cast<std::size_t>(in_tile) * voxel_bytes,
                        row_bytes);
            std::size_t a = rank - 1;
            while (a-- > 0) {
                if (++at[a] < hi[a]) break;
                at[a] = lo[a];
            }
            if (a == static_cast<std::size_t>(-1)) break;
        }
        std::size_t a = rank;
        while (a-- > 0) {
            if (++tile_index[a] <= last[a]) break;
            tile_index[a] = first[a];
        }
        if (a == static_cast<std::size_t>(-1)) break;
    }
}

bool writes_tiles(const fs::path& file) {
    const detail::FormatHandler& format = detail::format_for_path(file);
    return format.write_tiles != nullptr && (!format.writes_tiles_to || format.writes_tiles_to(file));
}

namespace detail {

void write_whole_by_tiles(const fs::path& target, const Image& image, const WriteOptions& options, TileWriter write_tiles) {
    Image description = Image::describe_like(image, image.spatial);
    description.geometry = image.geometry;
    const ConstTensorView whole = image.nchw();
    const auto copy_tile = [&](const Shape& start, const TensorView& pixels) {
        ConstTensorView box = whole;
        const auto* byte = static_cast<const std::uint8_t*>(whole.data);
        for (std::size_t a = 0; a < start.size(); ++a) {
            byte += start[a] * whole.strides[a + 2] * static_cast<std::int64_t>(dtype_size(whole.dtype));
            box.shape[a + 2] = pixels.shape[a + 2];
        }
        box.data = byte;
        copy_elements(box, pixels);
    };
    write_path_atomically(target, [&](const StagedFile& staged) {
        write_tiles(staged, description, options, options.threads, copy_tile, nullptr, TileShare{});
    });
}

void run_tasks_in_order(std::int64_t count, int threads, const std::function<void(std::int64_t)>& work) {
    std::atomic<std::int64_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mutex;
    std::exception_ptr failure;
    const auto worker = [&] {
        try {
            for (std::int64_t i; !failed && (i = next++) < count;) work(i);
        } catch (...) {
            const std::lock_guard lock(mutex);
            if (!failure) failure = std::current_exception();
            failed = true;
        }
    };
    const int workers = std::max(1, std::min<int>(threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()),
                                                  static_cast<int>(std::min<std::int64_t>(count, 256))));
    std::vector<std::thread> pool;
    for (int t = 1; t < workers; ++t) pool.emplace_back(worker);
    worker();
    for (auto& thread : pool) thread.join();
    if (failure) std::rethrow_exception(failure);
}

void write_mapped_tiles(const StagedFile& staged, const Image& description, std::optional<MappedOutput> output, int threads,
                        const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done) {
    if (!output) {
        throw FileError(staged.target, "is not written by regions here (an uncompressed .nii or a .npy of values stored as they are is)");
    }
    const std::size_t rank = description.spatial.size();
    Shape tile(rank), counts(rank);
    for (std::size_t a = 0; a < rank; ++a) {
        tile[a] = std::min<std::int64_t>(rank == 2 ? 512 : 128, description.spatial[a]);
        counts[a] = (description.spatial[a] + tile[a] - 1) / tile[a];
    }
    const std::vector<std::int64_t> order = tiles_in_z_order(counts);
    const auto total = static_cast<std::int64_t>(order.size());
    try {
        const TensorView whole = output->image.nchw();
        std::atomic<std::int64_t> written{0};
        std::mutex mutex;
        run_tasks_in_order(total, threads, [&](std::int64_t taken) {
            std::int64_t rest = order[static_cast<std::size_t>(taken)];
            Shape start(rank);
            TensorView region = whole;
            auto* byte = static_cast<std::uint8_t*>(whole.data);
            for (std::size_t a = rank; a-- > 0;) {
                start[a] = (rest % counts[a]) * tile[a];
                rest /= counts[a];
                region.shape[a + 2] = std::min(tile[a], description.spatial[a] - start[a]);
                byte += start[a] * whole.strides[a + 2] * static_cast<std::int64_t>(dtype_size(whole.dtype));
            }
            region.data = byte;
            produce(start, region);
            const std::int64_t count = ++written;
            if (done) {
                const std::lock_guard lock(mutex);
                done(count, total);
            }
        });
    } catch (...) {
        output->image.pixels = Tensor();
        output->closers.abandon();
        throw;
    }
    output->image.pixels = Tensor();  // unmaps the file before it is closed
    output->closers.finish();
}

}  // namespace detail
bool writes_tile_shares(const fs::path& file) { return detail::format_for_path(file).writes_tile_shares; }

void write_by_tiles(const fs::path& target, const Image& description, const WriteOptions& options, int threads,
                    const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done, const TileShare& share) {
    const detail::FormatHandler& format = detail::format_for_path(target);
    if (!format.write_tiles) throw FileError(target, std::string(format.name) + " files are not written by tiles");
    check_write_options(target, options);
    if (share.in_place()) {
        if (!format.writes_tile_shares) throw FileError(target, std::string(format.name) + " files are not written in shares (write a .zarr store)");
        if (share.count < 1 || share.index < 0 || share.index >= share.count) throw std::invalid_argument("write_by_tiles: share index outside 0..count-1");
        format.write_tiles(StagedFile{target, target}, description, options, threads, produce, done, share);
        return;
    }
    write_path_atomically(target, [&](const StagedFile& staged) {
        format.write_tiles(staged, description, options, threads, produce, done, share);
    });
}

}  // namespace gridwarp::io
