#include "formats/zarr.hpp"

#include <blosc.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <libdeflate.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Metadata files are small; anything larger is not a store gridwarp wrote or reads.
constexpr std::uintmax_t kLargestMetadataBytes = 1 << 20;
constexpr int kMostAxes = 5;

using Codec = ZarrCodec;

// One Zarr v2 array and what its axes mean.
struct ZarrArray {
    fs::path folder;
    Shape shape, chunks;  // every axis, C order
    DType dtype = DType::UInt8;
    bool swap_bytes = false;  // stored big-endian
    Codec codec = Codec::None;
    char separator = '.';
    double fill = 0.0;
    int channel_axis = -1;  // the first axis when it holds channels
    std::vector<double> scale, translation;  // per axis, from the multiscale level
    std::vector<std::string> units;
};

json read_json(const fs::path& file, const fs::path& store) {
    std::error_code error;
    const auto status = fs::symlink_status(file, error);
    if (error || !fs::is_regular_file(status)) throw FileError(store, "no regular file " + file.filename().string() + " in the store");
    if (fs::file_size(file, error) > kLargestMetadataBytes) throw FileError(store, file.filename().string() + " is larger than 1 MiB");
    try {
        return json::parse(read_file_bytes(file));
    } catch (const json::exception& e) {
        throw FileError(store, file.filename().string() + " is not valid JSON (" + std::string(e.what()) + ")");
    }
}

std::optional<DType> zarr_dtype(const std::string& code, bool* swap) {
    if (code.size() < 3) return std::nullopt;
    const char order = code[0], kind = code[1];
    int bytes = 0;
    try {
        bytes = std::stoi(code.substr(2));
    } catch (...) {
        return std::nullopt;
    }
    if (order != '<' && order != '>' && order != '|') return std::nullopt;
    *swap = order == '>' && bytes > 1;
    switch (kind) {
        case 'u': return bytes == 1 ? DType::UInt8 : bytes == 2 ? DType::UInt16 : bytes == 4 ? DType::UInt32 : bytes == 8 ? std::optional(DType::UInt64) : std::nullopt;
        case 'i': return bytes == 1 ? DType::Int8 : bytes == 2 ? DType::Int16 : bytes == 4 ? DType::Int32 : bytes == 8 ? std::optional(DType::Int64) : std::nullopt;
        case 'f': return bytes == 2 ? DType::Float16 : bytes == 4 ? DType::Float32 : bytes == 8 ? std::optional(DType::Float64) : std::nullopt;
        case 'b': return bytes == 1 ? std::optional(DType::Bool) : std::nullopt;
        default: return std::nullopt;
    }
}

}  // namespace

std::string zarr_dtype_code(DType dtype) {
    const std::size_t bytes = dtype_size(dtype);
    const char order = bytes == 1 ? '|' : '<';
    char kind = 'u';
    if (dtype == DType::Int8 || dtype == DType::Int16 || dtype == DType::Int32 || dtype == DType::Int64) kind = 'i';
    if (dtype == DType::Float16 || dtype == DType::Float32 || dtype == DType::Float64) kind = 'f';
    if (dtype == DType::Bool) kind = 'b';
    return std::string(1, order) + kind + std::to_string(bytes);
}

namespace {

// A whole number from the metadata: a JSON integer (a number written with a fraction or an exponent,
// or past 64 bits, is not one).
std::int64_t json_whole_number(const json& value, const fs::path& store, const std::string& what) {
    if (value.is_number_unsigned() && value.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return static_cast<std::int64_t>(value.get<std::uint64_t>());
    }
    if (value.is_number_integer() && !value.is_number_unsigned()) return value.get<std::int64_t>();
    throw FileError(store, what + " must be whole numbers, got " + value.dump());
}

Shape json_whole_numbers(const json& values, const fs::path& store, const std::string& what) {
    if (!values.is_array() || values.size() > kMostAxes) throw FileError(store, what + " must be a list of at most " + std::to_string(kMostAxes) + " whole numbers");
    Shape shape;
    for (const json& value : values) shape.push_back(json_whole_number(value, store, what));
    return shape;
}

// The fill value as a double, checked against the dtype: a missing chunk holds it, so it must be
// one of the dtype's values (zarr-python writes NaN and the infinities as strings, bools as bools).
double fill_value(const json& fill, DType dtype, const fs::path& store) {
    if (fill.is_null()) return 0.0;
    if (fill.is_boolean()) return fill.get<bool>() ? 1.0 : 0.0;
    const bool floating = dtype == DType::Float16 || dtype == DType::Float32 || dtype == DType::Float64;
    if (fill.is_string() && floating) {
        const std::string text = fill.get<std::string>();
        if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
        if (text == "Infinity") return std::numeric_limits<double>::infinity();
        if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
    }
    if (!fill.is_number()) throw FileError(store, "its fill_value " + fill.dump() + " is not a number");
    const double value = fill.get<double>();
    if (floating) return value;
    double lowest = 0, highest = 1;
    visit_dtype(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            lowest = static_cast<double>(std::numeric_limits<T>::lowest());
            highest = static_cast<double>(std::numeric_limits<T>::max());
        }
    });
    // (2^63 and 2^64 are what int64's and uint64's largest values round to: not below them.)
    if (!(value == std::floor(value) && value >= lowest && value <= highest && value < 18446744073709551616.0 &&
          (lowest == 0 || value < 9223372036854775808.0))) {
        throw FileError(store, "its fill_value " + fill.dump() + " is not a value of its dtype " + std::string(dtype_name(dtype)));
    }
    return value;
}

// A dataset path from the metadata: relative, without "..", within the store.
fs::path dataset_folder(const fs::path& store, const std::string& path) {
    const fs::path relative(path);
    if (path.empty() || relative.is_absolute()) throw FileError(store, "a multiscale dataset path must be relative, got \"" + path + "\"");
    for (const auto& part : relative) {
        if (part == ".." || part == ".") throw FileError(store, "a multiscale dataset path must stay inside the store, got \"" + path + "\"");
    }
    return store / relative;
}

ZarrArray open_array(const fs::path& store, std::size_t level, const ReadOptions& options, bool unfinished_allowed) {
    std::error_code error;
    if (!fs::is_directory(store, error)) throw FileError(store, "a Zarr store is a folder");
    if (!unfinished_allowed && fs::exists(store / kUnfinishedFolder, error)) {
        throw FileError(store, "is still being written in place (gridwarp --tiles or --resume), or its writers were stopped: run the "
                               "remaining shares, or the command again with --resume");
    }
    ZarrArray array;
    array.folder = store;
    json axes;
    if (!fs::exists(store / ".zarray", error)) {
        const json attributes = read_json(store / ".zattrs", store);
        try {
            const json& multiscale = attributes.at("multiscales").at(0);
            const json& dataset = multiscale.at("datasets").at(level);
            array.folder = dataset_folder(store, dataset.at("path").get<std::string>());
            if (multiscale.contains("axes")) axes = multiscale.at("axes");
            if (dataset.contains("coordinateTransformations")) {
                for (const json& transform : dataset.at("coordinateTransformations")) {
                    const std::string type = transform.at("type").get<std::string>();
                    if (type == "scale") array.scale = transform.at("scale").get<std::vector<double>>();
                    if (type == "translation") array.translation = transform.at("translation").get<std::vector<double>>();
                }
            }
        } catch (const json::exception& e) {
            throw FileError(store, "its .zattrs holds no OME-Zarr multiscales that gridwarp reads (" + std::string(e.what()) + ")");
        }
    }
    const json meta = read_json(array.folder / ".zarray", store);
    try {
        if (json_whole_number(meta.at("zarr_format"), store, "zarr_format") != 2) throw FileError(store, "only Zarr format 2 arrays are read");
        array.shape = json_whole_numbers(meta.at("shape"), store, "its shape");
        array.chunks = json_whole_numbers(meta.at("chunks"), store, "its chunks");
        if (meta.value("order", std::string("C")) != "C") throw FileError(store, "only C-ordered chunks are read (order \"F\" is not)");
        if (meta.contains("filters") && !meta.at("filters").is_null() && !meta.at("filters").empty()) {
            throw FileError(store, "chunk filters are not read");
        }
        const auto dtype = zarr_dtype(meta.at("dtype").get<std::string>(), &array.swap_bytes);
        if (!dtype) throw FileError(store, "the dtype " + meta.at("dtype").dump() + " is not read");
        array.dtype = *dtype;
        const std::string separator = meta.value("dimension_separator", std::string("."));
        if (separator != "." && separator != "/") throw FileError(store, "the dimension separator must be \".\" or \"/\"");
        array.separator = separator[0];
        array.fill = fill_value(meta.at("fill_value"), array.dtype, store);
        const json& compressor = meta.at("compressor");
        if (!compressor.is_null()) {
            const std::string id = compressor.at("id").get<std::string>();
            if (id == "zlib") array.codec = Codec::Zlib;
            else if (id == "gzip") array.codec = Codec::Gzip;
            else if (id == "zstd") array.codec = Codec::Zstd;
            else if (id == "blosc") array.codec = Codec::Blosc;
            else throw FileError(store, "the chunk compressor \"" + id + "\" is not read (zlib, gzip, zstd, blosc are)");
        }
    } catch (const json::exception& e) {
        throw FileError(store, "its .zarray is not a Zarr v2 array header (" + std::string(e.what()) + ")");
    }
    const std::size_t rank = array.shape.size();
    if (rank < 2 || rank > 4 || array.chunks.size() != rank) throw FileError(store, "arrays of 2 to 4 axes are read, with a chunk extent per axis");
    std::vector<std::string> types(rank, "space");
    array.units.assign(rank, "");
    if (axes.is_array() && axes.size() == rank) {
        for (std::size_t a = 0; a < rank; ++a) {
            if (axes[a].is_object()) {
                types[a] = axes[a].value("type", std::string("space"));
                array.units[a] = axes[a].value("unit", std::string());
            }
        }
    } else if (axes.is_null() && rank == 4) {
        types[0] = "channel";
    }
    for (std::size_t a = 0; a < rank; ++a) {
        if (array.shape[a] < 1 || array.chunks[a] < 1 || array.shape[a] > (std::int64_t{1} << 40) || array.chunks[a] > (std::int64_t{1} << 40)) {
            throw FileError(store, "its shape and chunks must be positive and below 2^40 along every axis");
        }
        if (types[a] == "channel" || types[a] == "time") {
            if (a != 0) throw FileError(store, "a channel axis is read only as the first axis");
            array.channel_axis = 0;
        }
    }
    if (rank - (array.channel_axis == 0 ? 1 : 0) < 2 || rank - (array.channel_axis == 0 ? 1 : 0) > 3) {
        throw FileError(store, "2 or 3 spatial axes are read, after an optional channel axis");
    }
    // A chunk is decoded whole: its size is what the header declares.
    unsigned __int128 chunk_values = 1;
    for (const auto extent : array.chunks) chunk_values = std::min<unsigned __int128>(chunk_values * static_cast<std::uint64_t>(extent), std::uint64_t{1} << 62);
    if (chunk_values > (std::uint64_t{1} << 40)) throw FileError(store, "a chunk of more than 2^40 values is not read");
    check_memory_budget(store, "a chunk", static_cast<std::uint64_t>(chunk_values), dtype_size(array.dtype), options.memory);
    if (!array.scale.empty() && array.scale.size() != rank) throw FileError(store, "a scale needs a value per axis");
    if (!array.translation.empty() && array.translation.size() != rank) throw FileError(store, "a translation needs a value per axis");
    for (const double v : array.scale) {
        if (!(v > 0) || !std::isfinite(v)) throw FileError(store, "scales must be positive and finite");
    }
    for (const double v : array.translation) {
        if (!std::isfinite(v)) throw FileError(store, "translations must be finite");
    }
    return array;
}

// The bytes of a chunk file, read into `buffer` (grown as needed, never shrunk, so that a thread
// keeps one between chunks); empty when it is missing: the chunk is all fill. Opened without
// following a link, each folder of its path a real folder inside the array's.
std::span<const std::uint8_t> read_chunk_file(const ZarrArray& array, const Shape& index, const fs::path& store, std::uint64_t most_bytes,
                                              std::vector<std::uint8_t>& buffer) {
    std::string name;
    for (std::size_t a = 0; a < index.size(); ++a) {
        if (a > 0) name += array.separator;
        name += std::to_string(index[a]);
    }
    const fs::path file = array.folder / name;
    std::error_code error;
    if (array.separator == '/') {
        for (fs::path folder = file.parent_path(); folder != array.folder && folder.has_relative_path(); folder = folder.parent_path()) {
            const auto status = fs::symlink_status(folder, error);
            if (fs::is_symlink(status)) throw FileError(store, "chunk folder " + folder.filename().string() + " is a symbolic link");
        }
    }
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT) return {};
        throw FileError(store, "cannot open chunk " + name + ": " + std::strerror(errno));
    }
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || static_cast<std::uint64_t>(info.st_size) > most_bytes) {
        ::close(fd);
        throw FileError(store, "chunk " + name + " is not a regular file of at most " + std::to_string(most_bytes) + " bytes");
    }
    const auto size = static_cast<std::size_t>(info.st_size);
    if (buffer.size() < size) buffer.resize(size);
    const std::span<std::uint8_t> bytes(buffer.data(), size);
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t got = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
        if (got <= 0) {
            ::close(fd);
            throw FileError(store, "cannot read chunk " + name);
        }
        done += static_cast<std::size_t>(got);
    }
    ::close(fd);
    if (bytes.empty()) throw FileError(store, "chunk " + name + " is empty");
    return bytes;
}

// Decodes `encoded` into exactly `out.size()` bytes; false when it does not decode to that size.
bool decode_chunk(Codec codec, std::span<const std::uint8_t> encoded, std::span<std::uint8_t> out) {
    std::size_t got = 0;
    switch (codec) {
        case Codec::None:
            if (encoded.size() != out.size()) return false;
            std::memcpy(out.data(), encoded.data(), out.size());
            return true;
        case Codec::Zlib:
        case Codec::Gzip: {
            libdeflate_decompressor* inflater = libdeflate_alloc_decompressor();
            if (!inflater) throw std::bad_alloc();
            const auto result = codec == Codec::Zlib
                                    ? libdeflate_zlib_decompress(inflater, encoded.data(), encoded.size(), out.data(), out.size(), &got)
                                    : libdeflate_gzip_decompress(inflater, encoded.data(), encoded.size(), out.data(), out.size(), &got);
            libdeflate_free_decompressor(inflater);
            return result == LIBDEFLATE_SUCCESS && got == out.size();
        }
        case Codec::Zstd: {
            const unsigned long long declared = ZSTD_getFrameContentSize(encoded.data(), encoded.size());
            if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != out.size()) return false;
            got = ZSTD_decompress(out.data(), out.size(), encoded.data(), encoded.size());
            return !ZSTD_isError(got) && got == out.size();
        }
        case Codec::Blosc: {
            std::size_t nbytes = 0, cbytes = 0, blocksize = 0;
            if (encoded.size() < BLOSC_MIN_HEADER_LENGTH) return false;
            blosc_cbuffer_sizes(encoded.data(), &nbytes, &cbytes, &blocksize);
            if (nbytes != out.size() || cbytes != encoded.size()) return false;
            const int result = blosc_decompress_ctx(encoded.data(), out.data(), out.size(), 1);
            return result >= 0 && static_cast<std::size_t>(result) == out.size();
        }
    }
    return false;
}

template <class T>
void fill_with(std::uint8_t* bytes, std::size_t values, double fill) {
    const T value = static_cast<T>(fill);
    auto* typed = reinterpret_cast<T*>(bytes);
    std::fill(typed, typed + values, value);
}

void fill_values(DType dtype, std::uint8_t* bytes, std::size_t values, double fill) {
    switch (dtype) {
        case DType::UInt8: case DType::Bool: fill_with<std::uint8_t>(bytes, values, fill); break;
        case DType::Int8: fill_with<std::int8_t>(bytes, values, fill); break;
        case DType::UInt16: fill_with<std::uint16_t>(bytes, values, fill); break;
        case DType::Int16: fill_with<std::int16_t>(bytes, values, fill); break;
        case DType::UInt32: fill_with<std::uint32_t>(bytes, values, fill); break;
        case DType::Int32: fill_with<std::int32_t>(bytes, values, fill); break;
        case DType::UInt64: fill_with<std::uint64_t>(bytes, values, fill); break;
        case DType::Int64: fill_with<std::int64_t>(bytes, values, fill); break;
        case DType::Float32: fill_with<float>(bytes, values, fill); break;
        case DType::Float64: fill_with<double>(bytes, values, fill); break;
        default: std::memset(bytes, 0, values * dtype_size(dtype)); break;
    }
}

}  // namespace

std::int64_t zarr_stored_channel(std::int64_t c, std::int64_t channels, bool raster) {
    if (!raster || channels < 3 || c > 2) return c;
    return 2 - c;
}

namespace {

class ZarrTileSource final : public TileSource {
public:
    ZarrTileSource(fs::path store, ZarrArray array, const ReadOptions& options) : store_(std::move(store)), array_(std::move(array)) {
        const std::size_t first_spatial = array_.channel_axis == 0 ? 1 : 0;
        layout_.spatial.assign(array_.shape.begin() + static_cast<std::ptrdiff_t>(first_spatial), array_.shape.end());
        layout_.tile.assign(array_.chunks.begin() + static_cast<std::ptrdiff_t>(first_spatial), array_.chunks.end());
        layout_.channels = first_spatial == 1 ? array_.shape[0] : 1;
        layout_.dtype = array_.dtype;
        raster_ = layout_.spatial.size() == 2;
        chunk_budget_ = options.memory.max_bytes == 0 ? std::numeric_limits<std::uint64_t>::max() : options.memory.max_bytes;
        check_memory_budget(store_, "a tile of every channel", static_cast<std::uint64_t>(shape_numel(layout_.tile) * layout_.channels),
                            dtype_size(layout_.dtype), options.memory);
    }

    Image describe() const override {
        Image image;
        const std::size_t rank = layout_.spatial.size();
        image.format = "zarr";
        image.channels = layout_.channels;
        image.spatial = layout_.spatial;
        image.layout = ChannelLayout::Interleaved;
        image.pixels = Tensor(layout_.dtype, Shape{0});
        if (raster_) {
            image.kind = FileKind::Raster;
            if (layout_.channels == 3) image.channel_order = "BGR";
            if (layout_.channels == 4) image.channel_order = "BGRA";
        } else {
            image.kind = FileKind::Volume;
            Geometry geometry = Geometry::identity(rank);
            const std::size_t first_spatial = array_.channel_axis == 0 ? 1 : 0;
            for (std::size_t k = 0; k < rank; ++k) {  // x first
                const std::size_t axis = first_spatial + rank - 1 - k;
                if (!array_.scale.empty()) geometry.spacing[k] = array_.scale[axis];
                if (!array_.translation.empty()) geometry.origin[k] = array_.translation[axis];
            }
            image.geometry = geometry;
            // The spatial unit rides along to a Zarr output: gridwarp itself reads spacings as given.
            const std::string unit = array_.units.empty() ? std::string() : array_.units.back();
            if (!unit.empty()) image.properties.emplace_back("ome-zarr unit", unit);
        }
        return image;
    }

    void read_tile(const Shape& index, std::uint8_t* out) const override {
        const std::int64_t channels = layout_.channels;
        const std::size_t value_bytes = dtype_size(layout_.dtype);
        const auto tile_voxels = static_cast<std::size_t>(shape_numel(layout_.tile));
        const std::int64_t channel_chunk = array_.channel_axis == 0 ? array_.chunks[0] : 1;
        // One channel decodes straight into the tile; several into a buffer of this thread's, kept
        // between tiles, then interleaved.
        const std::size_t chunk_bytes = static_cast<std::size_t>(channel_chunk) * tile_voxels * value_bytes;
        thread_local std::vector<std::uint8_t> buffer;
        const bool in_place = channels == 1 && channel_chunk == 1;
        if (!in_place && buffer.size() < chunk_bytes) buffer.resize(chunk_bytes);
        const std::span<std::uint8_t> chunk(in_place ? out : buffer.data(), chunk_bytes);
        for (std::int64_t first = 0; first < channels; first += channel_chunk) {
            Shape chunk_index;
            if (array_.channel_axis == 0) chunk_index.push_back(first / channel_chunk);
            chunk_index.insert(chunk_index.end(), index.begin(), index.end());
            thread_local std::vector<std::uint8_t> file_bytes;
            const std::span<const std::uint8_t> encoded = read_chunk_file(array_, chunk_index, store_, chunk_budget_, file_bytes);
            if (encoded.empty()) {
                fill_values(layout_.dtype, chunk.data(), chunk.size() / value_bytes, array_.fill);
            } else if (!decode_chunk(array_.codec, encoded, chunk)) {
                std::string name;
                for (const auto i : chunk_index) name += (name.empty() ? "" : std::string(1, array_.separator)) + std::to_string(i);
                throw FileError(store_, "chunk " + name + " does not decode to " + std::to_string(chunk.size()) + " bytes");
            }
            if (array_.swap_bytes) {
                for (std::size_t at = 0; at < chunk.size(); at += value_bytes) std::reverse(chunk.begin() + static_cast<std::ptrdiff_t>(at), chunk.begin() + static_cast<std::ptrdiff_t>(at + value_bytes));
            }
            const std::int64_t count = std::min(channel_chunk, channels - first);
            for (std::int64_t c = 0; c < count; ++c) {
                const std::int64_t target = zarr_stored_channel(first + c, channels, raster_);
                const std::uint8_t* plane = chunk.data() + static_cast<std::size_t>(c) * tile_voxels * value_bytes;
                if (in_place) continue;
                if (channels == 1) {
                    std::memcpy(out, plane, tile_voxels * value_bytes);
                    continue;
                }
                for (std::size_t v = 0; v < tile_voxels; ++v) {
                    std::memcpy(out + (v * static_cast<std::size_t>(channels) + static_cast<std::size_t>(target)) * value_bytes, plane + v * value_bytes, value_bytes);
                }
            }
        }
    }

private:
    fs::path store_;
    ZarrArray array_;
    bool raster_ = true;
    std::uint64_t chunk_budget_ = 0;
};

}  // namespace

std::unique_ptr<TileSource> open_zarr_level(const fs::path& store, std::size_t level, const ReadOptions& options, bool unfinished_allowed) {
    return std::make_unique<ZarrTileSource>(store, open_array(store, level, options, unfinished_allowed), options);
}

std::unique_ptr<TileSource> open_zarr_tiles(const fs::path& store, const ReadOptions& options) { return open_zarr_level(store, 0, options, false); }

Image read_zarr(const fs::path& store, const ReadOptions& options, bool with_pixels) {
    const auto source = open_zarr_tiles(store, options);
    Image image = source->describe();
    if (!with_pixels) return image;
    const TileLayout& layout = source->layout();
    check_memory_budget(store, "the image", static_cast<std::uint64_t>(shape_numel(layout.spatial) * layout.channels), dtype_size(layout.dtype),
                        options.memory);
    image.allocate();
    TileCache cache(*source, layout.tile_bytes());
    cache.read_region(Shape(layout.spatial.size(), 0), layout.spatial, static_cast<std::uint8_t*>(image.pixels.data()));
    return image;
}

}  // namespace gridwarp::io::detail
