// OME-Zarr stores (lib/io/src/formats/zarr.cpp) through the tile reader (io::open_tile_source) and the
// tile cache, and through read_image_header: the NGFF multiscales in .zattrs (axes, dataset path,
// scale and translation), the array header in .zarray (shape, chunks, dtype, byte order, order,
// filters, fill value, dimension separator, compressor) checked against --max-memory, and every
// chunk found, missing (fill), damaged or in the wrong place decoded into every region of the raster.
//
// A store is a folder: the input is split at "\n--zarr--\n" into members, laid out afresh each run
// in `/dev/shm/gridwarp-fuzz-<pid>.zarr`:
//   1. `.zattrs`; when this member is empty there is none, and the array is the store itself (a plain
//      Zarr array, .zarray at the top) rather than its dataset `0`;
//   2. `.zarray` of that array (`0/.zarray`, or `.zarray`); no file when the input has no separator;
//   3. up to 16 chunks: each member's first line is the chunk's key in the array's folder ("0.0",
//      "0/1/2"), the rest its bytes. A key "NAME@TARGET" makes NAME a symbolic link to TARGET instead,
//      so that the reader's link checks are fuzzed too. Keys with empty, "." or ".." parts, or longer
//      than 64 bytes, are skipped, as are keys whose place is already taken.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/tiles.hpp"

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kSeparator = "\n--zarr--\n";
constexpr int kMostChunks = 16;

// Whether `key` names a place inside the array folder: relative, no empty, "." or ".." parts.
bool usable_key(std::string_view key) {
    if (key.empty() || key.size() > 64 || key.find('\0') != std::string_view::npos) return false;
    std::size_t start = 0;
    while (start <= key.size()) {
        const std::size_t end = std::min(key.find('/', start), key.size());
        const std::string_view part = key.substr(start, end - start);
        if (part.empty() || part == "." || part == "..") return false;
        start = end + 1;
    }
    return true;
}

// Whether every folder from `root` down to `path`'s parent is a real folder (no link, no file), and
// `path` itself is free. Creates the missing folders when `create`.
bool free_place(const fs::path& root, const fs::path& path, bool create) {
    std::error_code error;
    fs::path folder = root;
    for (const auto& part : path.lexically_relative(root).parent_path()) {
        folder /= part;
        const auto status = fs::symlink_status(folder, error);
        if (status.type() == fs::file_type::not_found) {
            if (!create || !fs::create_directory(folder, error) || error) return false;
        } else if (status.type() != fs::file_type::directory) {
            return false;
        }
    }
    return fs::symlink_status(path, error).type() == fs::file_type::not_found;
}

// Lays out a fresh store from the input's members; returns the store's folder.
const fs::path& lay_out_store(const gridwarp::fuzz::ScratchFile& scratch, std::string_view bytes) {
    const fs::path& store = scratch.path();
    std::error_code error;
    fs::remove_all(store, error);
    if (!fs::create_directory(store, error)) std::abort();
    std::vector<std::string_view> members;
    std::size_t start = 0;
    while (start <= bytes.size() && members.size() < 2 + kMostChunks) {
        const std::size_t end = std::min(bytes.find(kSeparator, start), bytes.size());
        members.push_back(bytes.substr(start, end - start));
        start = end + kSeparator.size();
    }
    const bool group = !members[0].empty();
    const fs::path array = group ? store / "0" : store;
    if (group) {
        gridwarp::fuzz::write_file(store / ".zattrs", members[0]);
        if (!fs::create_directory(array, error)) std::abort();
    }
    if (members.size() > 1) gridwarp::fuzz::write_file(array / ".zarray", members[1]);
    // Files first, links last: no file is written through a link.
    std::vector<std::pair<std::string_view, std::string_view>> links;
    for (std::size_t m = 2; m < members.size(); ++m) {
        const std::string_view member = members[m];
        const std::size_t line = std::min(member.find('\n'), member.size());
        const std::string_view key = member.substr(0, line);
        const std::string_view content = line < member.size() ? member.substr(line + 1) : std::string_view();
        const std::size_t at = key.find('@');
        if (at != std::string_view::npos) {
            links.emplace_back(key.substr(0, at), key.substr(at + 1));
            continue;
        }
        if (!usable_key(key)) continue;
        const fs::path file = array / std::string(key);
        if (free_place(array, file, true)) gridwarp::fuzz::write_file(file, content);
    }
    for (const auto& [key, target] : links) {
        if (!usable_key(key) || target.empty() || target.find('\0') != std::string_view::npos) continue;
        const fs::path link = array / std::string(key);
        if (free_place(array, link, false)) fs::create_symlink(std::string(target), link, error);
    }
    return store;
}

// a * b, saturated at 2^62: the declared extents are untrusted, up to 2^40 each.
std::int64_t times(std::int64_t a, std::int64_t b) {
    constexpr std::int64_t kMost = std::int64_t{1} << 62;
    if (a <= 0 || b <= 0) return 0;
    return a > kMost / b ? kMost : std::min(a * b, kMost);
}

// Reads every voxel of a small source, region by region, through a cache of two tiles.
void read_every_region(const gridwarp::io::TileSource& tiles) {
    const gridwarp::io::TileLayout& layout = tiles.layout();
    const std::size_t rank = layout.spatial.size();
    if (rank < 2 || rank > 3 || layout.tile.size() != rank) return;
    std::int64_t voxels = 1, tile_count = 1;
    for (std::size_t a = 0; a < rank; ++a) {
        voxels = times(voxels, layout.spatial[a]);
        tile_count = times(tile_count, (layout.spatial[a] + layout.tile[a] - 1) / layout.tile[a]);
    }
    // Small rasters only (the run reads all of it), and not a million one-voxel chunks.
    if (voxels > (std::int64_t{1} << 20) || times(voxels, layout.channels) > (std::int64_t{1} << 22) || tile_count > 4096) return;
    gridwarp::io::TileCache cache(tiles, layout.tile_bytes() * 2);
    // Regions of odd extents, so that they straddle the chunks' edges.
    static const std::int64_t kSteps2[] = {97, 89}, kSteps3[] = {7, 29, 31};
    const std::int64_t* steps = rank == 2 ? kSteps2 : kSteps3;
    gridwarp::Shape step(rank), start(rank, 0), extent(rank);
    std::int64_t region_voxels = 1;
    for (std::size_t a = 0; a < rank; ++a) {
        step[a] = std::min(layout.spatial[a], steps[a]);
        region_voxels *= step[a];
    }
    std::vector<std::uint8_t> region(static_cast<std::size_t>(region_voxels * layout.channels) * gridwarp::dtype_size(layout.dtype));
    for (;;) {
        for (std::size_t a = 0; a < rank; ++a) extent[a] = std::min(step[a], layout.spatial[a] - start[a]);
        cache.read_region(start, extent, region.data());
        std::size_t a = rank;
        while (a-- > 0) {
            start[a] += step[a];
            if (start[a] < layout.spatial[a]) break;
            start[a] = 0;
        }
        if (a == static_cast<std::size_t>(-1)) break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const gridwarp::fuzz::ScratchFile scratch(".zarr");
    const fs::path& store = lay_out_store(scratch, gridwarp::fuzz::as_text(data, size));
    gridwarp::io::ReadOptions options;
    options.memory.max_bytes = std::uint64_t{1} << 24;
    try {
        const auto tiles = gridwarp::io::open_tile_source(store, options);
        if (tiles) {
            (void)tiles->describe();
            read_every_region(*tiles);
        }
    } catch (const gridwarp::io::FileError&) {
    }
    try {
        (void)gridwarp::io::read_image_header(store, options);
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
