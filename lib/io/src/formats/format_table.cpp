#include "formats/format_table.hpp"

#include <cstring>

#include "formats/bmp.hpp"
#include "formats/dicom.hpp"
#include "formats/jpeg.hpp"
#include "formats/mapped_output.hpp"
#include "formats/mgh.hpp"
#include "formats/mif.hpp"
#include "formats/nifti.hpp"
#include "formats/png.hpp"
#include "formats/read_guards.hpp"
#include "formats/tiff.hpp"
#include "formats/zarr.hpp"
#include "formats/volume_header_check.hpp"
#include "formats/webp.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/file_identity.hpp"
#include "gridwarp/io/npy.hpp"
#include "modules/backends.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

bool starts_with(std::span<const std::uint8_t> head, std::string_view magic, std::size_t at = 0) {
    return head.size() >= at + magic.size() && std::memcmp(head.data() + at, magic.data(), magic.size()) == 0;
}

bool is_jpeg(std::span<const std::uint8_t> head) { return starts_with(head, "\xff\xd8\xff"); }
bool is_bmp(std::span<const std::uint8_t> head) { return starts_with(head, "BM"); }
bool is_webp(std::span<const std::uint8_t> head) { return starts_with(head, "RIFF") && starts_with(head, "WEBP", 8); }

// ---- Reading

Image read_npy_image(const fs::path& file, const ReadOptions&, bool) {
    Tensor tensor = read_npy(file);
    if (tensor.rank() < 3) {
        throw FileError(file, "expected a tensor (N, C, D1..Dr) of rank >= 3, got shape " + shape_to_string(tensor.shape()));
    }
    return Image::from_tensor(std::move(tensor));
}

Image read_raster_image(const fs::path& file, const ReadOptions& options, bool) { return read_raster_checked(file, options); }

std::optional<Image> decode_png(const fs::path& file, const ReadOptions&, std::string_view, std::uint64_t) { return read_png(file); }
std::optional<Image> decode_jpeg(const fs::path& file, const ReadOptions& options, std::string_view, std::uint64_t) {
    return read_jpeg(file, options.memory);
}
std::optional<Image> decode_tiff(const fs::path& file, const ReadOptions& options, std::string_view, std::uint64_t) {
    return read_tiff(file, options);
}
std::optional<Image> decode_webp(const fs::path& file, const ReadOptions& options, std::string_view, std::uint64_t) {
    return read_webp(file, options);
}
std::optional<Image> decode_bmp(const fs::path& file, const ReadOptions&, std::string_view head, std::uint64_t file_size) {
    return read_plain_bmp(file, head, file_size);
}

// ---- Writing

void write_npy_image(const fs::path& target, const Image& image, const WriteOptions&) { write_npy(target, image.nchw()); }

void write_nifti_image(const fs::path& target, const Image& image, const WriteOptions& options) {
    write_path_atomically(target, [&](const StagedFile& staged) { write_nifti(staged, image, options); });
}

void write_mgh_image(const fs::path& target, const Image& image, const WriteOptions& options) {
    write_path_atomically(target, [&](const StagedFile& staged) { write_mgh(staged, image, options); });
}

void write_mif_image(const fs::path& target, const Image& image, const WriteOptions& options) {
    write_path_atomically(target, [&](const StagedFile& staged) { write_mif(staged, image, options); });
}

void write_itk_image(const fs::path& target, const Image& image, const WriteOptions&) {
    write_path_atomically(target, [&](const StagedFile& staged) {
        write_reporting_failures(staged, [&] { throw_if_failed(itk_backend().write_volume(staged, image)); });
    });
}

// OpenCV's encoder, where gridwarp's own writer (`native`, when given) declines the image.
void write_raster_image(const fs::path& target, const Image& image, const WriteOptions& options,
                        bool (*native)(const StagedFile&, const Image&, const WriteOptions&)) {
    write_path_atomically(target, [&](const StagedFile& staged) {
        if (native && native(staged, image, options)) return;
        write_reporting_failures(staged, [&] { throw_if_failed(raster_backend().write(staged, image, options)); });
    });
}

void write_opencv_image(const fs::path& target, const Image& image, const WriteOptions& options) {
    write_raster_image(target, image, options, nullptr);
}

void write_png_image(const fs::path& target, const Image& image, const WriteOptions& options) {
    write_raster_image(target, image, options, write_png);
}

void write_jpeg_image(const fs::path& target, const Image& image, const WriteOptions& options) {
    write_raster_image(target, image, options, write_jpeg);
}

void write_webp_image(const fs::path& target, const Image& image, const WriteOptions& options) {
    write_raster_image(target, image, options, write_webp);
}

void write_bmp_image(const fs::path& target, const Image& image, const WriteOptions& options) {
    write_raster_image(target, image, options, [](const StagedFile& staged, const Image& pixels, const WriteOptions&) {
        return write_plain_bmp(staged, pixels);
    });
}

void write_tiff_image(const fs::path& target, const Image& image, const WriteOptions& options) {
    if (options.pyramid_levels == 0) {
        write_path_atomically(target, [&](const StagedFile& staged) { write_tiff(staged, image); });
        return;
    }
    // A pyramid is made as tiles are written: the image is handed over tile by tile.
    if (image.batch != 1 || image.spatial.size() != 2) {
        throw FileError(target, "a TIFF pyramid holds one 2-D page, got size " + image_size_text(image.spatial));
    }
    write_whole_by_tiles(target, image, options, write_tiff_tiles);
}

// A NIfTI file holds one image (N = 1) in its mapped pages.
std::optional<MappedOutput> map_one_nifti_output(const StagedFile& staged, const Image& description) {
    if (description.batch != 1) return std::nullopt;
    return map_nifti_output(staged, description);
}

// A NIfTI or NumPy output written a region at a time into its mapped pages.
void write_nifti_tiles(const StagedFile& staged, const Image& description, const WriteOptions&, int threads, const TileProducer& produce,
                       const std::function<void(std::int64_t, std::int64_t)>& done, const TileShare&) {
    write_mapped_tiles(staged, description, map_one_nifti_output(staged, description), threads, produce, done);
}

void write_npy_tiles(const StagedFile& staged, const Image& description, const WriteOptions&, int threads, const TileProducer& produce,
                     const std::function<void(std::int64_t, std::int64_t)>& done, const TileShare&) {
    write_mapped_tiles(staged, description, map_npy_output(staged, description), threads, produce, done);
}

// One row per format. Rows with suffixes come before the row for every other name.
const FormatHandler kFormats[] = {
    {.name = "NumPy", .kind = FileKind::Tensor, .suffixes = {".npy"}, .read = read_npy_image, .write = write_npy_image,
     .map_output = map_npy_output, .open_tiles = open_npy_tiles, .write_tiles = write_npy_tiles},
    {.name = "NIfTI", .kind = FileKind::Volume, .suffixes = {".nii", ".nii.gz", ".hdr", ".hdr.gz", ".img", ".img.gz"},
     .read = read_nifti, .write = write_nifti_image, .files_read = nifti_files_read, .files_written = nifti_files_written,
     .channel_layout = ChannelLayout::Planar, .stores_value_scaling = true, .map_output = map_one_nifti_output, .streams = nifti_output_streams, .stream = stream_nifti_output,
     .open_tiles = open_nifti_tiles, .write_tiles = write_nifti_tiles, .writes_tiles_to = nifti_writes_tiles},
    {.name = "MGH", .kind = FileKind::Volume, .suffixes = {".mgh", ".mgz", ".mgh.gz"}, .read = read_mgh, .write = write_mgh_image,
     .streams = mgh_output_streams, .stream = stream_mgh_output},
    {.name = "NRRD", .kind = FileKind::Volume, .suffixes = {".nrrd", ".nhdr"}, .read = read_itk_volume, .write = write_itk_image,
     .files_read = detached_header_files_read, .files_written = detached_header_files_written},
    {.name = "MetaImage", .kind = FileKind::Volume, .suffixes = {".mha", ".mhd"}, .read = read_itk_volume, .write = write_itk_image,
     .files_read = detached_header_files_read, .files_written = detached_header_files_written},
    {.name = "DICOM", .kind = FileKind::Volume, .suffixes = {".dcm"}, .read = read_dicom_series, .files_read = dicom_files_read},
    {.name = "MRtrix3", .kind = FileKind::Volume, .suffixes = {".mif", ".mif.gz", ".mih"}, .read = read_mif, .write = write_mif_image,
     .files_read = mif_files_read, .files_written = mif_files_written, .stores_value_scaling = true, .map_output = map_mif_output},
    {.name = "OME-Zarr", .kind = FileKind::Volume, .suffixes = {".zarr"}, .read = read_zarr, .write = write_zarr_image,
     .open_tiles = open_zarr_tiles, .write_tiles = write_zarr_tiles, .writes_tile_shares = true, .writes_pyramids = true},
    {.name = "PNG", .kind = FileKind::Raster, .suffixes = {".png"}, .sniff = has_png_signature, .read = read_raster_image,
     .decode = decode_png, .highest_compression_level = 9, .write = write_png_image},
    {.name = "JPEG", .kind = FileKind::Raster, .suffixes = {".jpg", ".jpeg"}, .sniff = is_jpeg, .read = read_raster_image,
     .decode = decode_jpeg, .quality_suffixes = {".jpg", ".jpeg"}, .write = write_jpeg_image},
    {.name = "TIFF", .kind = FileKind::Raster, .suffixes = {".tif", ".tiff"}, .sniff = has_tiff_signature, .read = read_raster_image,
     .decode = decode_tiff, .write = write_tiff_image, .open_tiles = open_tiff_tiles, .write_tiles = write_tiff_tiles,
     .writes_pyramids = true},
    {.name = "BMP", .kind = FileKind::Raster, .suffixes = {".bmp", ".dib"}, .sniff = is_bmp, .read = read_raster_image,
     .decode = decode_bmp, .write = write_bmp_image},
    {.name = "WebP", .kind = FileKind::Raster, .suffixes = {".webp"}, .sniff = is_webp, .read = read_raster_image,
     .decode = decode_webp, .quality_suffixes = {".webp"}, .write = write_webp_image},
    // (".jpe": OpenCV's third name for its JPEG encoder.)
    {.name = "image", .kind = FileKind::Raster, .suffixes = {}, .read = read_raster_image, .quality_suffixes = {".jpe"},
     .write = write_opencv_image},
};

}  // namespace

std::span<const FormatHandler> format_table() { return kFormats; }

const FormatHandler& format_for_path(const fs::path& file) {
    // A DICOM series may be named by its folder, which has no suffix to select its row.
    if (names_dicom_folder(file)) {
        for (const FormatHandler& format : kFormats) {
            if (format.name == "DICOM") return format;
        }
    }
    const std::string name = lowercase_filename(file);
    const FormatHandler* chosen = &kFormats[std::size(kFormats) - 1];
    std::size_t longest = 0;
    for (const FormatHandler& format : kFormats) {
        for (std::string_view suffix : format.suffixes) {
            if (!suffix.empty() && suffix.size() > longest && name.ends_with(suffix)) {
                chosen = &format;
                longest = suffix.size();
            }
        }
    }
    return *chosen;
}

}  // namespace gridwarp::io::detail

namespace gridwarp::io {

std::vector<std::filesystem::path> files_read(const std::filesystem::path& file) {
    const detail::FormatHandler& format = detail::format_for_path(file);
    return format.files_read != nullptr ? format.files_read(file) : std::vector<std::filesystem::path>{file};
}

bool stores_value_scaling(const std::filesystem::path& file) { return detail::format_for_path(file).stores_value_scaling; }

std::vector<std::filesystem::path> files_written(const std::filesystem::path& file) {
    const detail::FormatHandler& format = detail::format_for_path(file);
    return format.files_written != nullptr ? format.files_written(file) : std::vector<std::filesystem::path>{file};
}

}  // namespace gridwarp::io
