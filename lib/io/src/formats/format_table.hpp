// Internal: the file formats gridwarp reads and writes, one row each. read_image, read_image_header,
// write_image, PendingOutput, write_sampled, kind_for_path and the signature check loop over this
// table (docs/design.md): adding a format is a codec file and a row in format_table.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "formats/mapped_output.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/tiles.hpp"

namespace gridwarp::io::detail {

// Rows are written with designated initializers; a function a format lacks is left out (nullptr).
struct FormatHandler {
    std::string_view name;  // as error messages name the format: "PNG", "NIfTI", ...
    FileKind kind = FileKind::Raster;
    // File name endings, lower case, that select this row (the longest match wins); none: the row
    // for every other name (raster images through OpenCV).
    std::array<std::string_view, 6> suffixes;
    // Whether a file's first bytes are this format's. A file named with one of the suffixes must
    // pass it; raster files are decoded by the row whose signature they carry, whatever their name.
    // nullptr: no signature.
    bool (*sniff)(std::span<const std::uint8_t> head) = nullptr;
    // The whole image, or (with_pixels false) what describes it, where the format can read less.
    Image (*read)(const std::filesystem::path& file, const ReadOptions& options, bool with_pixels) = nullptr;
    // Raster rows: gridwarp's own decoder, run after the checks every raster file gets; nullopt
    // leaves the file to OpenCV. nullptr: always OpenCV.
    std::optional<Image> (*decode)(const std::filesystem::path& file, const ReadOptions& options, std::string_view head,
                                   std::uint64_t file_size) = nullptr;
    // The write options the format takes beyond the common ones: the names whose writer takes a
    // quality (lossy encoders), and the highest compression level (0: no limit of its own).
    std::array<std::string_view, 3> quality_suffixes{};
    int highest_compression_level = 0;
    // Writes `image` to `target`, atomically (staged beside it, then renamed).
    void (*write)(const std::filesystem::path& target, const Image& image, const WriteOptions& options) = nullptr;
    // The files a read of a path opens and those a write creates, companions included (a NIfTI
    // pair's other half, a detached header's data files): files_read and files_written
    // (gridwarp/io/file_identity.hpp). nullptr: the file alone.
    std::vector<std::filesystem::path> (*files_read)(const std::filesystem::path& file) = nullptr;
    std::vector<std::filesystem::path> (*files_written)(const std::filesystem::path& file) = nullptr;
    // How the file stores a multi-channel float image: a description in this layout is written
    // without reordering its values.
    ChannelLayout channel_layout = ChannelLayout::Interleaved;
    // Whether the header holds a slope and intercept for stored values (ValueScaling).
    bool stores_value_scaling = false;
    // An output sampled straight into its file (see MappedOutput); nullptr: sampled into memory.
    std::optional<MappedOutput> (*map_output)(const StagedFile& staged, const Image& description) = nullptr;
    // An output written a block at a time as it is sampled, where streams(target, description).
    bool (*streams)(const std::filesystem::path& target, const Image& description) = nullptr;
    void (*stream)(const StagedFile& staged, const Image& description,
                   const WriteOptions& options, const WindowSampler& sample, ChannelSampling channel_sampling) = nullptr;
    // Rasters larger than memory (gridwarp/io/tiles.hpp): a file's tiles, where this file is read by
    // them (else nullptr), and an output written tile by tile. nullptr: read and written whole.
    std::unique_ptr<TileSource> (*open_tiles)(const std::filesystem::path& file, const ReadOptions& options) = nullptr;
    void (*write_tiles)(const StagedFile& staged, const Image& description, const WriteOptions& options, int threads,
                        const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done,
                        const TileShare& share) = nullptr;
    // Which of the row's names write_tiles takes (nullptr: every one).
    bool (*writes_tiles_to)(const std::filesystem::path& file) = nullptr;
    // Whether write_tiles takes shares written in place (TileShare::in_place).
    bool writes_tile_shares = false;
    // Whether the writer takes WriteOptions::pyramid_levels.
    bool writes_pyramids = false;
};

std::span<const FormatHandler> format_table();
// The row a file name selects.
const FormatHandler& format_for_path(const std::filesystem::path& file);

}  // namespace gridwarp::io::detail
