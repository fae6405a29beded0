// Internal: an output sampled straight into its file's mapped pages.
#pragma once

#include <filesystem>
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

// A .npy of one (1, C, H, W) or (1, C, D, H, W) tensor of numbers, little-endian in C order, as
// tiles (512^2 or 128^3) copied out of its memory map; nullptr for any other .npy (read whole).
std::unique_ptr<TileSource> open_npy_tiles(const std::filesystem::path& file, const ReadOptions& options);

// Fills a mapped output (map_nifti_output, map_npy_output: nullopt is an error naming the target)
// a region at a time (write_by_tiles): regions of 512^2 or 128^3 in Z-order on `threads` threads,
// each sampled by `produce` straight into the mapped pages; then the file is closed.
void write_mapped_tiles(const StagedFile& staged, const Image& description, std::optional<MappedOutput> output, int threads,
                        const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done);

}  // namespace gridwarp::io::detail
