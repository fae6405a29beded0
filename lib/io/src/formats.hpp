// Internal: the format back-ends behind read_image / write_image.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "files/mapped_file.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/transform_io.hpp"
#include "gridwarp/physical.hpp"

namespace gridwarp::io::detail {

// The largest magnitude accepted in a file's geometry (spacings, origins, matrices, in mm): no
// imaging geometry spans 10,000 km, and positions computed from larger values lose all precision.
inline constexpr double kMaxGeometryMagnitude = 1e10;

// The strides of the (N, C, spatial...) view of C-ordered pixels stored as `layout` says
// ((N, C, spatial...) or (N, spatial..., C)).
Shape nchw_strides(const Shape& spatial, std::int64_t channels, ChannelLayout layout);

// Text and file names in lower case, for matching extensions.
std::string lowercase(std::string_view text);
std::string lowercase_filename(const std::filesystem::path& file);
bool ends_with(const std::string& text, const std::string& suffix);

// A big-endian 32-bit field (PNG's chunk lengths and IHDR).
inline std::uint32_t big_endian_32(const unsigned char* p) {
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

// Throws FileError unless `file` exists and is a regular file.
void require_readable_file(const std::filesystem::path& file);

// The one containment rule for the files that a named file brings along (a detached header's data
// files, the other half of a NIfTI pair), whatever the format: each must lie in the named file's
// folder (or below it) once symbolic links are resolved, unless options.allow_outside_data_files,
// and must exist and be a regular file. Throws FileError naming `named`; `role` is what the
// companion is to it ("data file", "header").
void require_companion_inside(const std::filesystem::path& named, const std::filesystem::path& companion,
                              const std::string& role, const ReadOptions& options);

Image read_raster(const std::filesystem::path& file);                           // OpenCV
void write_raster(const std::filesystem::path& temporary, const std::filesystem::path& target, const Image& image,
                  const WriteOptions& options);
// Whether OpenCV has an encoder for the file's extension.
bool has_raster_writer(const std::filesystem::path& file);
Image read_volume(const std::filesystem::path& file, bool with_pixels = true);  // ITK
// The guarded entry points (read_guards.cpp): the header checked against the file, then the
// decoder run with its stderr captured; anything it prints fails the read.
Image read_itk_volume(const std::filesystem::path& file, const ReadOptions& options, bool with_pixels);
Image read_raster_checked(const std::filesystem::path& file, const ReadOptions& options);
// Runs `decode` with file descriptor 2 pointed at a temporary file; returns what was written there.
std::string capture_stderr(const std::function<void()>& decode);
// Runs a third-party writer (ITK, OpenCV) of `temporary` with its stderr captured: anything it
// prints (a MetaIO complaint) fails the write with that line. When the storage is the cause (the
// errno its failing call left is ENOSPC, EDQUOT, EROFS, EIO or EFBIG, or the file system is full or
// read-only afterwards), the error says so instead.
void write_reporting_failures(const std::filesystem::path& temporary, const std::filesystem::path& target,
                              const std::function<void()>& write);
// The first non-empty line of a decoder's messages, shortened.
std::string first_message_line(const std::string& text);
Image read_nifti(const std::filesystem::path& file, const ReadOptions& options, bool with_pixels);
void write_nifti(const std::filesystem::path& temporary, const std::filesystem::path& target, const Image& image,
                 const WriteOptions& options);
bool is_nifti_path(const std::filesystem::path& file);
// The files of a NIfTI path: the file itself, or a pair's header and data file (for reading, the
// partner found beside it; for writing, the one the writer makes).
std::vector<std::filesystem::path> nifti_files(const std::filesystem::path& file, bool for_reading);

// An output sampled straight into its file: `image.pixels` are the mapped voxel bytes of `file`
// (created at its final size, header written). Release the image's pixels, then call finish() to
// close the file (or abandon() on failure); the caller moves the file into place.
struct MappedOutput {
    Image image;
    FileClosers closers;
};
// nullopt when the image cannot be stored without conversion (a compressed file, a pair, scaled
// values, another channel layout) or the file system cannot reserve the space up front.
std::optional<MappedOutput> map_nifti_output(const std::filesystem::path& file, const std::filesystem::path& target,
                                             const Image& description);
// The same for a .npy (any dtype but strings), stored as (N, C, spatial...): the image's layout
// becomes planar.
std::optional<MappedOutput> map_npy_output(const std::filesystem::path& file, const std::filesystem::path& target,
                                           const Image& description);

// write_sampled's NIfTI form: whether `target` is written block by block (one image whose
// voxels need no conversion on the way: no scaled values, no other stored type; and not a plain
// .nii), and the writer, which makes `file` (and its pair's partner) beside it, a block of rows of
// all channels at a time, or, where the file stores a volume per channel (a 4-D series), of one
// channel, sampled with a group of channels of about kChannelGroupBytes where `channel_sampling`
// is Together.
bool nifti_output_streams(const std::filesystem::path& target, const Image& description);
void stream_nifti_output(const std::filesystem::path& file, const std::filesystem::path& target, const Image& description,
                         const WriteOptions& options, const WindowSampler& sample, ChannelSampling channel_sampling);
inline constexpr std::uint64_t kChannelGroupBytes = std::uint64_t{32} << 20;
inline constexpr std::uint64_t kMinSeriesBlockBytes = std::uint64_t{64} << 10;

TransformFile read_itk_transform(const std::filesystem::path& file, std::size_t dimension);  // ITK
// An ITK HDF5 file, its structure checked first; runs only in the HDF5 reader's process.
TransformFile read_itk_hdf5_transform(const std::filesystem::path& file, std::size_t dimension, const MemoryBudget& budget);
void write_volume(const std::filesystem::path& temporary, const std::filesystem::path& target, const Image& image);

// What a raster decoder fills: `pages` items of height x width pixels, `channels` interleaved
// (grey; BGR or BGRA for 3 and 4), zeroed; raster_description leaves the pixels empty (a tensor of
// the dtype with no elements) for the decoder to give.
Image raster_description(DType dtype, std::int64_t height, std::int64_t width, std::int64_t channels, std::int64_t pages = 1);
Image decoded_raster(DType dtype, std::int64_t height, std::int64_t width, std::int64_t channels, std::int64_t pages = 1);

// The pixels of `image` as a C-ordered buffer in `layout` ((N, spatial..., C) or (N, C, spatial...)):
// image.pixels itself when it already is one, else a converted copy kept in `scratch`.
const void* pixels_in_layout(const Image& image, ChannelLayout layout, Tensor& scratch);

// The same image with its channels interleaved (a copy when they are planar).
Image interleaved(Image image);

}  // namespace gridwarp::io::detail
