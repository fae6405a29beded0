// Internal: the NIfTI codec's entry points (nifti_file.cpp, nifti_header.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <filesystem>
#include <optional>
#include <vector>

#include "formats/mapped_output.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/tiles.hpp"

namespace gridwarp::io::detail {

Image read_nifti(const std::filesystem::path& file, const ReadOptions& options, bool with_pixels);
void write_nifti(const StagedFile& staged, const Image& image,
                 const WriteOptions& options);
// The files of a NIfTI path: the file itself, or a pair's header and data file (for reading, the
// partner found beside it; for writing, the one the writer makes).
std::vector<std::filesystem::path> nifti_files_read(const std::filesystem::path& file);
std::vector<std::filesystem::path> nifti_files_written(const std::filesystem::path& file);

// nullopt when the image cannot be stored without conversion (a compressed file, a pair, scaled
// values, another channel layout) or the file system cannot reserve the space up front.
std::optional<MappedOutput> map_nifti_output(const StagedFile& staged, const Image& description);

// write_sampled's NIfTI form: whether `target` is written block by block (one image whose
// voxels need no conversion on the way: no scaled values, no other stored type; and not a plain
// .nii), and the writer, which makes `file` (and its pair's partner) beside it, a block of rows of
// all channels at a time, or, where the file stores a volume per channel (a 4-D series), of one
// channel, sampled with a group of channels of about kChannelGroupBytes where `channel_sampling`
// is Together.
bool nifti_output_streams(const std::filesystem::path& target, const Image& description);
void stream_nifti_output(const StagedFile& staged, const Image& description,
                         const WriteOptions& options, const WindowSampler& sample, ChannelSampling channel_sampling);
// An uncompressed .nii of one scalar 2-D or 3-D image, stored values unscaled, as tiles (128^3 or
// 512^2) read out of its memory map; nullptr for any other NIfTI file (read whole).
std::unique_ptr<TileSource> open_nifti_tiles(const std::filesystem::path& file, const ReadOptions& options);
// Whether a NIfTI name is written by regions into its mapped pages (a plain .nii).
bool nifti_writes_tiles(const std::filesystem::path& file);

inline constexpr std::uint64_t kChannelGroupBytes = std::uint64_t{32} << 20;
inline constexpr std::uint64_t kMinSeriesBlockBytes = std::uint64_t{64} << 10;

}  // namespace gridwarp::io::detail
