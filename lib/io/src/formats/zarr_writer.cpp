// OME-Zarr stores written chunk by chunk: one level or a pyramid, whole into a staged copy, or a
// share of the chunks into a store that several processes fill (docs/bigdata.md).
#include <blosc.h>
#include <libdeflate.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "files/file_write_queue.hpp"
#include "files/output_file.hpp"
#include "formats/halving.hpp"
#include "formats/mapped_output.hpp"
#include "formats/zarr.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Codec = ZarrCodec;

Codec codec_named(const std::string& name, const fs::path& target) {
    if (name.empty() || name == "blosc") return Codec::Blosc;
    if (name == "zstd") return Codec::Zstd;
    if (name == "zlib") return Codec::Zlib;
    if (name == "gzip") return Codec::Gzip;
    if (name == "none") return Codec::None;
    throw FileError(target, "--chunk-codec: blosc, zstd, zlib, gzip or none, got " + name);
}

json compressor_json(Codec codec, int level) {
    switch (codec) {
        case Codec::None: return nullptr;
        case Codec::Zlib: return {{"id", "zlib"}, {"level", level}};
        case Codec::Gzip: return {{"id", "gzip"}, {"level", level}};
        case Codec::Zstd: return {{"id", "zstd"}, {"level", level}};
        case Codec::Blosc: return {{"id", "blosc"}, {"cname", "lz4"}, {"clevel", level}, {"shuffle", 1}, {"blocksize", 0}};
    }
    return nullptr;
}

// The most bytes `raw` takes when encoded.
std::size_t encoded_bound(Codec codec, std::size_t raw_bytes) {
    switch (codec) {
        case Codec::None: return raw_bytes;
        // libdeflate's bounds depend on the compressor only through its level, never above these.
        case Codec::Zlib: return libdeflate_zlib_compress_bound(nullptr, raw_bytes);
        case Codec::Gzip: return libdeflate_gzip_compress_bound(nullptr, raw_bytes);
        case Codec::Zstd: return ZSTD_compressBound(raw_bytes);
        case Codec::Blosc: return raw_bytes + BLOSC_MAX_OVERHEAD;
    }
    return raw_bytes;
}

// Encodes the chunk `raw` as stored into `out` (encoded_bound bytes); returns the bytes written.
std::size_t encode_chunk(Codec codec, int level, std::span<const std::uint8_t> raw, std::size_t value_bytes, std::span<std::uint8_t> out) {
    switch (codec) {
        case Codec::None:
            std::memcpy(out.data(), raw.data(), raw.size());
            return raw.size();
        case Codec::Zlib:
        case Codec::Gzip: {
            libdeflate_compressor* deflater = libdeflate_alloc_compressor(std::clamp(level, 0, 12));
            if (!deflater) throw std::bad_alloc();
            const std::size_t size = codec == Codec::Zlib ? libdeflate_zlib_compress(deflater, raw.data(), raw.size(), out.data(), out.size())
                                                          : libdeflate_gzip_compress(deflater, raw.data(), raw.size(), out.data(), out.size());
            libdeflate_free_compressor(deflater);
            if (size == 0) throw std::runtime_error("deflate failed");
            return size;
        }
        case Codec::Zstd: {
            const std::size_t size = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), level);
            if (ZSTD_isError(size)) throw std::runtime_error("zstd failed");
            return size;
        }
        case Codec::Blosc: {
            const int size = blosc_compress_ctx(std::clamp(level, 0, 9), BLOSC_SHUFFLE, value_bytes, raw.size(), raw.data(), out.data(), out.size(), "lz4", 0, 1);
            if (size <= 0) throw std::runtime_error("blosc failed");
            return static_cast<std::size_t>(size);
        }
    }
    return 0;
}

void write_bytes(const fs::path& file, const fs::path& target, std::span<const std::uint8_t> bytes) {
    OutputFile out(StagedFile{file, target});
    out.write(bytes);
    out.close();
}

void write_text(const fs::path& file, const fs::path& target, const std::string& text) {
    write_bytes(file, target, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

// The text of a small file, or "" where it cannot be read or is larger than metadata is.
std::string text_of(const fs::path& file) {
    std::error_code error;
    if (!fs::is_regular_file(file, error) || fs::file_size(file, error) > (1 << 20)) return {};
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Shape unravel(std::int64_t linear, const Shape& counts) {
    Shape index(counts.size());
    for (std::size_t a = counts.size(); a-- > 0;) {
        index[a] = linear % counts[a];
        linear /= counts[a];
    }
    return index;
}

// One multiscale level: its extent, chunks, and where its voxels lie relative to the first level's.
struct Level {
    Shape spatial, chunk, counts;  // outermost axis first
    std::vector<double> scale, translation;
    Shape valid(const Shape& index) const {  // the extent of chunk `index` inside the level
        Shape extent(spatial.size());
        for (std::size_t a = 0; a < spatial.size(); ++a) extent[a] = std::min(chunk[a], spatial[a] - index[a] * chunk[a]);
        return extent;
    }
};

// What every process writing one output computes alike: the levels, the codec, the metadata.
struct StorePlan {
    std::size_t rank = 0;
    std::int64_t channels = 1;
    DType dtype = DType::UInt8;
    std::size_t value_bytes = 1;
    bool raster = true;
    bool bgr = true;  // an image's colours, BGR(A) in memory, stored as RGB(A); a tensor's channels as they are
    std::int64_t side = 512;  // chunk side; even, so that a chunk's 2x reduction is half a chunk
    Codec codec = Codec::Blosc;
    int codec_level = 5;
    std::vector<Level> levels;
    std::string group_text, attributes_text;
    std::vector<std::string> array_texts;  // each level's .zarray

    std::size_t chunk_bytes(std::size_t level) const {
        return static_cast<std::size_t>(shape_numel(levels[level].chunk) * channels) * value_bytes;
    }
};

StorePlan plan_store(const fs::path& target, const Image& description, const WriteOptions& options) {
    StorePlan plan;
    plan.rank = description.spatial.size();
    if (description.batch != 1 || plan.rank < 2 || plan.rank > 3) {
        throw FileError(target, "an OME-Zarr store holds one 2-D image or 3-D volume, got size " + image_size_text(description.spatial));
    }
    plan.dtype = description.dtype();
    if (is_complex(plan.dtype) || plan.dtype == DType::String || plan.dtype == DType::BFloat16) {
        throw FileError(target, "an OME-Zarr store written by gridwarp cannot hold " + std::string(dtype_name(plan.dtype)) + " values");
    }
    plan.channels = description.channels;
    plan.value_bytes = dtype_size(plan.dtype);
    plan.raster = plan.rank == 2;
    plan.bgr = description.kind == FileKind::Raster;
    plan.side = plan.raster ? 512 : 128;
    plan.codec = codec_named(options.chunk_codec, target);
    plan.codec_level = options.compression_level >= 0 ? options.compression_level : plan.codec == Codec::Zstd ? 3 : 5;

    Level first;
    first.spatial = description.spatial;
    for (std::size_t a = 0; a < plan.rank; ++a) {
        const std::size_t k = plan.rank - 1 - a;  // geometry is x first
        first.scale.push_back(!plan.raster && description.geometry ? description.geometry->spacing[k] : 1.0);
        first.translation.push_back(!plan.raster && description.geometry ? description.geometry->origin[k] : 0.0);
    }
    plan.levels.push_back(first);
    // Each level halves every axis longer than 1 (an odd length rounds up: its last voxel is the
    // mean of what there is); a voxel's centre is the centre of those it is the mean of.
    const auto fits_one_chunk = [&](const Level& level) {
        return std::all_of(level.spatial.begin(), level.spatial.end(), [&](std::int64_t extent) { return extent <= plan.side; });
    };
    const auto all_ones = [](const Level& level) { return std::all_of(level.spatial.begin(), level.spatial.end(), [](std::int64_t e) { return e == 1; }); };
    for (int made = 0; options.pyramid_levels < 0 ? !fits_one_chunk(plan.levels.back()) : made < options.pyramid_levels; ++made) {
        if (all_ones(plan.levels.back())) break;
        Level next = plan.levels.back();
        for (std::size_t a = 0; a < plan.rank; ++a) {
            if (next.spatial[a] == 1) continue;
            next.spatial[a] = (next.spatial[a] + 1) / 2;
            next.translation[a] += next.scale[a] / 2;
            next.scale[a] *= 2;
        }
        plan.levels.push_back(next);
    }
    for (Level& level : plan.levels) {
        level.chunk.resize(plan.rank);
        level.counts.resize(plan.rank);
        for (std::size_t a = 0; a < plan.rank; ++a) {
            level.chunk[a] = std::min(plan.side, level.spatial[a]);
            level.counts[a] = (level.spatial[a] + level.chunk[a] - 1) / level.chunk[a];
        }
    }

    std::string unit = "millimeter";
    for (const auto& [key, value] : description.properties) {
        if (key == "ome-zarr unit") unit = value;
    }
    json axes = json::array();
    if (plan.channels > 1) axes.push_back({{"name", "c"}, {"type", "channel"}});
    static const char* kNames[] = {"z", "y", "x"};
    for (std::size_t a = 0; a < plan.rank; ++a) {
        json axis = {{"name", kNames[3 - plan.rank + a]}, {"type", "space"}};
        if (!plan.raster) axis["unit"] = unit;
        axes.push_back(axis);
    }
    json datasets = json::array();
    for (std::size_t l = 0; l < plan.levels.size(); ++l) {
        const Level& level = plan.levels[l];
        json scale = json::array(), translation = json::array();
        Shape shape, chunks;
        if (plan.channels > 1) {
            scale.push_back(1.0);
            translation.push_back(0.0);
            shape.push_back(plan.channels);
            chunks.push_back(1);
        }
        for (std::size_t a = 0; a < plan.rank; ++a) {
            scale.push_back(level.scale[a]);
            translation.push_back(level.translation[a]);
        }
        shape.insert(shape.end(), level.spatial.begin(), level.spatial.end());
        chunks.insert(chunks.end(), level.chunk.begin(), level.chunk.end());
        datasets.push_back({{"path", std::to_string(l)},
                            {"coordinateTransformations",
                             json::array({{{"type", "scale"}, {"scale", scale}}, {{"type", "translation"}, {"translation", translation}}})}});
        const json array = {{"zarr_format", 2},    {"shape", shape},     {"chunks", chunks},  {"dtype", zarr_dtype_code(plan.dtype)},
                            {"compressor", compressor_json(plan.codec, plan.codec_level)}, {"fill_value", 0}, {"order", "C"},
                            {"filters", nullptr}, {"dimension_separator", "/"}};
        plan.array_texts.push_back(array.dump(2));
    }
    json multiscale = {{"version", "0.4"}, {"name", target.stem().string()}, {"axes", axes}, {"datasets", datasets}};
    if (plan.levels.size() > 1) multiscale["type"] = "mean";
    plan.attributes_text = json({{"multiscales", json::array({multiscale})}}).dump(2);
    plan.group_text = json({{"zarr_format", 2}}).dump(2);
    return plan;
}

void write_metadata(const fs::path& folder, const fs::path& target, const StorePlan& plan) {
    for (std::size_t l = 0; l < plan.levels.size(); ++l) {
        std::error_code error;
        fs::create_directories(folder / std::to_string(l), error);
        if (error) throw FileError(target, "cannot create the store: " + error.message());
        write_text(folder / std::to_string(l) / ".zarray", target, plan.array_texts[l]);
    }
    write_text(folder / ".zgroup", target, plan.group_text);
    write_text(folder / ".zattrs", target, plan.attributes_text);
}

// The mean of each 2x2(x2) block of a chunk of level l, into its part of the chunk of level l + 1.
template <class T>
void reduce_chunk(const StorePlan& plan, std::size_t level, const Shape& index, const std::uint8_t* child_bytes, std::uint8_t* parent_bytes) {
    const Level& from = plan.levels[level];
    const Level& to = plan.levels[level + 1];
    const Shape valid = from.valid(index);
    // As three axes, a raster's outermost of length 1.
    HalvedBlock block;
    for (std::size_t a = 0; a < plan.rank; ++a) {
        const std::size_t k = 3 - plan.rank + a;
        block.in[k] = valid[a];
        block.in_chunk[k] = from.chunk[a];
        block.out_chunk[k] = to.chunk[a];
        block.step[k] = from.spatial[a] == 1 ? 1 : 2;  // an axis 1 long is not halved
        block.offset[k] = block.step[k] == 2 ? (index[a] % 2) * (plan.side / 2) : 0;
    }
    halve_block<T>(block, plan.channels, reinterpret_cast<const T*>(child_bytes), reinterpret_cast<T*>(parent_bytes));
}

// Channel `channel` of `voxels` interleaved voxels of `channels` values into a plane of its own.
template <class Word>
void take_channel_as(const std::uint8_t* interleaved, std::uint8_t* plane, std::size_t voxels, std::size_t channels, std::size_t channel) {
    Word* to = reinterpret_cast<Word*>(plane);
    const std::uint8_t* from = interleaved + channel * sizeof(Word);
    const std::size_t step = channels * sizeof(Word);
    for (std::size_t v = 0; v < voxels; ++v, from += step) std::memcpy(to + v, from, sizeof(Word));
}

void take_channel(const std::uint8_t* interleaved, std::uint8_t* plane, std::size_t voxels, std::size_t channels, std::size_t channel,
                  std::size_t value_bytes) {
    switch (value_bytes) {
        case 1: return take_channel_as<std::uint8_t>(interleaved, plane, voxels, channels, channel);
        case 2: return take_channel_as<std::uint16_t>(interleaved, plane, voxels, channels, channel);
        case 4: return take_channel_as<std::uint32_t>(interleaved, plane, voxels, channels, channel);
        case 8: return take_channel_as<std::uint64_t>(interleaved, plane, voxels, channels, channel);
        default:
            for (std::size_t v = 0; v < voxels; ++v) std::memcpy(plane + v * value_bytes, interleaved + (v * channels + channel) * value_bytes, value_bytes);
    }
}

// Writes the chunks of a store and builds the coarser levels from them as they come: a finished
// chunk of level l is reduced into its quarter (eighth) of a chunk of level l + 1, which is written
// once all its parts are in.
class LevelWriter {
public:
    LevelWriter(const StorePlan& plan, fs::path folder, fs::path target, bool in_place, std::size_t top_level, int threads)
        : plan_(plan), folder_(std::move(folder)), target_(std::move(target)), in_place_(in_place), top_level_(top_level),
          queue_(2 * static_cast<std::size_t>(std::max(threads, 1)) + 2) {}

    // Waits for every chunk to be in the store; rethrows a failed write.
    void finish() { queue_.finish(); }

    fs::path chunk_file(std::size_t level, std::int64_t channel, const Shape& index) const {
        fs::path file = folder_ / std::to_string(level);
        if (plan_.channels > 1) file /= std::to_string(channel);
        for (const auto i : index) file /= std::to_string(i);
        return file;
    }

    // Whether every channel of a chunk is in the store already (a share resumed).
    bool written(std::size_t level, const Shape& index) const {
        std::error_code error;
        for (std::int64_t c = 0; c < plan_.channels; ++c) {
            if (!fs::is_regular_file(chunk_file(level, c, index), error)) return false;
        }
        return true;
    }

    // `pixels`: the chunk's voxels in C order over the level's chunk extent, channels interleaved in
    // memory's order; what lies past the level's edge is zero.
    void add(std::size_t level, const Shape& index, const std::vector<std::uint8_t>& pixels) {
        write(level, index, pixels);
        if (level >= top_level_) return;
        reduce_into_parent(level, index, pixels);
    }

    // Passes a chunk already in the store on to the levels above it, without writing it again.
    void reduce_into_parent(std::size_t level, const Shape& index, const std::vector<std::uint8_t>& pixels) {
        const Level& from = plan_.levels[level];
        Shape parent(index.size());
        std::int64_t parts = 1;
        for (std::size_t a = 0; a < index.size(); ++a) {
            const bool halved = from.spatial[a] > 1;
            parent[a] = halved ? index[a] / 2 : index[a];
            parts *= halved ? std::min<std::int64_t>(2 * parent[a] + 2, from.counts[a]) - 2 * parent[a] : 1;
        }
        std::int64_t linear = 0;
        for (std::size_t a = 0; a < parent.size(); ++a) linear = linear * plan_.levels[level + 1].counts[a] + parent[a];
        std::shared_ptr<Pending> pending;
        {
            const std::lock_guard lock(mutex_);
            auto& slot = pending_[{level + 1, linear}];
            if (!slot) slot = std::make_shared<Pending>(Pending{std::vector<std::uint8_t>(plan_.chunk_bytes(level + 1), 0), 0});
            pending = slot;
        }
        visit_dtype(plan_.dtype, [&](auto tag) {
            using T = typename decltype(tag)::type;
            if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, float16>) {
                reduce_chunk<T>(plan_, level, index, pixels.data(), pending->pixels.data());
            }
        });
        {
            const std::lock_guard lock(mutex_);
            if (++pending->parts < parts) return;
            pending_.erase({level + 1, linear});
        }
        add(level + 1, parent, pending->pixels);
    }

private:
    struct Pending {
        std::vector<std::uint8_t> pixels;
        std::int64_t parts = 0;
    };

    void write(std::size_t level, const Shape& index, const std::vector<std::uint8_t>& pixels) {
        const std::int64_t channels = plan_.channels;
        const std::size_t value_bytes = plan_.value_bytes;
        const auto voxels = static_cast<std::size_t>(shape_numel(plan_.levels[level].chunk));
        thread_local std::vector<std::uint8_t> plane;
        plane.resize(channels > 1 ? voxels * value_bytes : 0);
        for (std::int64_t c = 0; c < channels; ++c) {
            const std::int64_t source = zarr_stored_channel(c, channels, plan_.bgr);
            if (channels > 1) take_channel(pixels.data(), plane.data(), voxels, static_cast<std::size_t>(channels), static_cast<std::size_t>(source), value_bytes);
            const std::span<const std::uint8_t> raw = channels > 1 ? std::span<const std::uint8_t>(plane) : std::span<const std::uint8_t>(pixels);
            FileWriteQueue::Buffer encoded = queue_.take(encoded_bound(plan_.codec, raw.size()));
            const std::size_t size = encode_chunk(plan_.codec, plan_.codec_level, raw, value_bytes, encoded.span());
            fs::path file = chunk_file(level, c, index);
            std::error_code error;
            fs::create_directories(file.parent_path(), error);
            if (error) throw FileError(target_, "cannot create " + file.parent_path().filename().string() + ": " + error.message());
            // Another share reads the store meanwhile (in place): a chunk appears whole or not at all.
            queue_.write(std::move(file), target_, std::move(encoded), size, in_place_);
        }
    }

    const StorePlan& plan_;
    fs::path folder_, target_;
    bool in_place_;
    std::size_t top_level_;
    std::mutex mutex_;
    std::map<std::pair<std::size_t, std::int64_t>, std::shared_ptr<Pending>> pending_;
    FileWriteQueue queue_;
};

// The level up to which a share builds the pyramid from its own chunks: each chunk of that level
// (a block of first-level chunks) belongs to one share. A whole run builds every level; shares and
// resumed runs stop where there are 16 blocks a share, and the levels above are made from that one
// by whichever share finishes last.
std::size_t block_level(const StorePlan& plan, const TileShare& share) {
    std::size_t level = plan.levels.size() - 1;
    if (!share.in_place()) return level;
    while (level > 0 && shape_numel(plan.levels[level].counts) < 16 * share.count) --level;
    return level;
}

// Opens the store a share writes into: creates it, metadata and the unfinished mark, unless
// another share has; an existing store must be this job's, and unfinished. Returns false where a
// resumed run finds it finished.
bool open_shared_store(const fs::path& target, const StorePlan& plan, const TileShare& share) {
    const fs::path unfinished = target / kUnfinishedFolder;
    for (int attempt = 0; attempt < 3; ++attempt) {
        std::error_code error;
        const auto status = fs::symlink_status(target, error);
        if (fs::exists(status)) {
            if (!fs::is_directory(status)) throw FileError(target, "exists and is not a Zarr store; refusing to write into it");
            bool same = text_of(target / ".zattrs") == plan.attributes_text && text_of(target / ".zgroup") == plan.group_text;
            for (std::size_t l = 0; l < plan.levels.size() && same; ++l) same = text_of(target / std::to_string(l) / ".zarray") == plan.array_texts[l];
            if (!same) {
                throw FileError(target, "exists and holds another image (its metadata is not this command's): remove it, or write another name");
            }
            if (!fs::exists(unfinished, error)) {
                if (share.resume) return false;
                throw FileError(target, "exists and is finished: remove it to write it again, or give --resume to keep it");
            }
            const std::string count = text_of(unfinished / "shares");
            if (count != std::to_string(share.count)) {
                throw FileError(target, "is being written in " + (count.empty() ? std::string("another number of") : count) + " shares, not " +
                                            std::to_string(share.count));
            }
            if (text_of(unfinished / "job") != share.job) {
                throw FileError(target, "is being written by another command (other transforms, options or input): remove it, or write another name");
            }
            return true;
        }
        const bool created = create_folder_atomically(target, [&](const fs::path& folder) {
            write_metadata(folder, target, plan);
            fs::create_directory(folder / kUnfinishedFolder, error);
            if (error) throw FileError(target, "cannot create the store: " + error.message());
            write_text(folder / kUnfinishedFolder / "shares", target, std::to_string(share.count));
            write_text(folder / kUnfinishedFolder / "job", target, share.job);
        });
        if (created) return true;
    }
    throw FileError(target, "appeared and vanished while this share looked at it; is another run removing it?");
}

// Marks this share finished; the share that finds every share finished makes the levels above the
// blocks' and removes the mark. True for the share that is to do so.
bool finish_share(const fs::path& target, const TileShare& share) {
    const fs::path unfinished = target / kUnfinishedFolder;
    write_path_atomically(unfinished / ("done-" + std::to_string(share.index)), [&](const StagedFile& staged) {
        write_text(staged.file, target, "");
    });
    std::error_code error;
    for (std::int64_t k = 0; k < share.count; ++k) {
        if (!fs::exists(unfinished / ("done-" + std::to_string(k)), error)) return false;
    }
    // Two shares finishing at once both see every mark: the one that makes this folder goes on
    // (a resumed run goes on regardless, in case the one that made it was stopped).
    return fs::create_directory(unfinished / "finishing", error) || share.resume;
}

void remove_unfinished_mark(const fs::path& target) {
    const fs::path unfinished = target / kUnfinishedFolder;
    const fs::path aside = target / (std::string(kUnfinishedFolder) + "-removed-" + std::to_string(::getpid()));
    std::error_code error;
    fs::rename(unfinished, aside, error);  // one rename: the store reads as finished from here on
    if (error && fs::exists(unfinished)) throw FileError(target, "cannot remove the mark of an unfinished store: " + error.message());
    fs::remove_all(aside, error);
}

}  // namespace

void write_zarr_tiles(const StagedFile& staged, const Image& description, const WriteOptions& options, int threads,
                      const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done, const TileShare& share) {
    const StorePlan plan = plan_store(staged.target, description, options);
    const std::size_t rank = plan.rank;
    const bool in_place = share.in_place();
    const bool unfinished = in_place ? open_shared_store(staged.target, plan, share) : (write_metadata(staged.file, staged.target, plan), false);
    if (in_place && !unfinished) return;  // a resumed run of a finished store
    const std::size_t blocks_level = block_level(plan, share);
    LevelWriter writer(plan, staged.file, staged.target, in_place, blocks_level, threads);

    // The first level's chunks this share makes: those of its run of blocks, in Z-order.
    const Level& first = plan.levels[0];
    const Level& blocks = plan.levels[blocks_level];
    const std::vector<std::int64_t> block_order = tiles_in_z_order(blocks.counts);
    const auto block_count = static_cast<std::int64_t>(block_order.size());
    const std::int64_t first_block = block_count * share.index / share.count, end_block = block_count * (share.index + 1) / share.count;
    const std::int64_t block_side = std::int64_t{1} << blocks_level;
    const std::vector<std::int64_t> within_block = tiles_in_z_order(Shape(rank, block_side));
    std::vector<Shape> chunks;
    std::int64_t skipped = 0;
    for (std::int64_t b = first_block; b < end_block; ++b) {
        const Shape block = unravel(block_order[static_cast<std::size_t>(b)], blocks.counts);
        std::vector<Shape> inside;
        for (const auto local : within_block) {
            Shape index = unravel(local, Shape(rank, block_side));
            bool in_level = true;
            for (std::size_t a = 0; a < rank; ++a) {
                // An axis 1 long is not halved: its block holds one chunk along it.
                index[a] = first.spatial[a] == 1 ? (index[a] == 0 ? 0 : first.counts[a]) : block[a] * block_side + index[a];
                in_level = in_level && index[a] < first.counts[a];
            }
            if (in_level) inside.push_back(index);
        }
        if (share.resume && writer.written(blocks_level, block)) {
            skipped += static_cast<std::int64_t>(inside.size());
            continue;
        }
        chunks.insert(chunks.end(), inside.begin(), inside.end());
    }
    const std::int64_t total = skipped + static_cast<std::int64_t>(chunks.size());
    std::atomic<std::int64_t> written{skipped};
    std::mutex done_mutex;
    if (done && skipped > 0) done(skipped, total);

    const std::size_t chunk_bytes = plan.chunk_bytes(0);
    run_tasks_in_order(static_cast<std::int64_t>(chunks.size()), threads, [&](std::int64_t i) {
        const Shape& index = chunks[static_cast<std::size_t>(i)];
        Shape start(rank);
        const Shape extent = first.valid(index);
        for (std::size_t a = 0; a < rank; ++a) start[a] = index[a] * first.chunk[a];
        // A chunk past the image's edge is written whole: the part outside is zero.
        thread_local std::vector<std::uint8_t> pixels;
        pixels.resize(chunk_bytes);
        if (extent != first.chunk) std::fill(pixels.begin(), pixels.end(), std::uint8_t{0});
        Shape shape{1, plan.channels}, strides(rank + 2);
        shape.insert(shape.end(), extent.begin(), extent.end());
        std::int64_t stride = plan.channels;
        for (std::size_t a = rank; a-- > 0;) {
            strides[a + 2] = stride;
            stride *= first.chunk[a];
        }
        strides[1] = 1;
        strides[0] = stride;
        produce(start, TensorView(plan.dtype, pixels.data(), shape, strides));
        writer.add(0, index, pixels);
        const std::int64_t count = ++written;
        if (done) {
            const std::lock_guard lock(done_mutex);
            done(count, total);
        }
    });
    writer.finish();

    if (!in_place || !finish_share(staged.target, share)) return;
    if (blocks_level + 1 < plan.levels.size()) {
        // The levels above the blocks', from the blocks' level as every share wrote it.
        const auto source = open_zarr_level(staged.target, blocks_level, ReadOptions{}, true);
        LevelWriter upper(plan, staged.file, staged.target, true, plan.levels.size() - 1, threads);
        const std::vector<std::int64_t> order = tiles_in_z_order(blocks.counts);
        run_tasks_in_order(static_cast<std::int64_t>(order.size()), threads, [&](std::int64_t i) {
            const Shape index = unravel(order[static_cast<std::size_t>(i)], blocks.counts);
            std::vector<std::uint8_t> pixels(plan.chunk_bytes(blocks_level));
            source->read_tile(index, pixels.data());
            if (plan.raster && !plan.bgr && plan.channels >= 3) {
                // The reader gives a 2-D store's colours in BGR(A) order; a tensor's are written as they are.
                const std::size_t step = static_cast<std::size_t>(plan.channels) * plan.value_bytes;
                for (std::size_t at = 0; at < pixels.size(); at += step) {
                    std::swap_ranges(pixels.begin() + static_cast<std::ptrdiff_t>(at), pixels.begin() + static_cast<std::ptrdiff_t>(at + plan.value_bytes),
                                     pixels.begin() + static_cast<std::ptrdiff_t>(at + 2 * plan.value_bytes));
                }
            }
            // What lies past the level's edge is zero in a written chunk, and the reduction reads
            // only inside the edge: the decoded chunk is passed on as it is.
            upper.reduce_into_parent(blocks_level, index, pixels);
        });
        upper.finish();
    }
    remove_unfinished_mark(staged.target);
}

void write_zarr_image(const fs::path& target, const Image& image, const WriteOptions& options) {
    if (image.batch != 1) throw FileError(target, "an OME-Zarr store holds one image, got " + std::to_string(image.batch));
    write_whole_by_tiles(target, image, options, write_zarr_tiles);
}

}  // namespace gridwarp::io::detail
