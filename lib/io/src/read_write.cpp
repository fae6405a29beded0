// Reading and writing images by file: each call finds the file's row in the format table
// (formats/format_table.hpp) and runs what the row names.
#include <algorithm>
#include <cctype>
#include <span>
#include <string_view>

#include "files/file_checks.hpp"
#include "files/shared_files_internal.hpp"
#include "formats/dicom.hpp"
#include "formats/format_table.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "modules/backends.hpp"
#include "names.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

namespace {

// The description of an image without its pixels (an empty tensor of its dtype).
Image header_copy(const Image& image) {
    Image copy = Image::describe_like(image, image.spatial);
    copy.geometry = image.geometry;
    copy.warnings = image.warnings;
    return copy;
}

// Inputs are regular files, except a folder that names a DICOM series or holds a store (OME-Zarr),
// whose readers check each of its files.
void require_readable_input(const fs::path& file) {
    if (names_dicom_folder(file)) return;
    if (detail::format_for_path(file).open_tiles && detail::lowercase_filename(file).ends_with(".zarr")) {
        std::error_code error;
        if (!fs::exists(file, error)) throw FileError(file, "no such file or folder");
        return;
    }
    detail::require_readable_file(file);
}

}  // namespace

FileKind kind_for_path(const fs::path& file) { return detail::format_for_path(file).kind; }

ChannelLayout stored_channel_layout(const fs::path& file) { return detail::format_for_path(file).channel_layout; }

Image read_image(const fs::path& file, const ReadOptions& options) {
    require_readable_input(file);
    return detail::format_for_path(file).read(file, options, true);
}

Image read_image_header(const fs::path& file, const ReadOptions& options) {
    require_readable_input(file);
    // Many jobs of a batch share a reference grid: read its header once (shared_files.hpp).
    const auto key = detail::shared_file_key(file, "header|" + std::to_string(static_cast<int>(options.nifti_geometry)));
    if (key) {
        if (auto hit = detail::shared_file_find(*key)) return header_copy(*std::any_cast<std::shared_ptr<const Image>>(*hit));
    }
    Image image = detail::format_for_path(file).read(file, options, false);
    if (key && image.pixels.numel() == 0) {
        detail::shared_file_store(*key, std::shared_ptr<const Image>(std::make_shared<Image>(header_copy(image))), 4096);
    }
    return image;
}

namespace {

bool named_with_one_of(const fs::path& file, std::span<const std::string_view> suffixes) {
    const std::string name = detail::lowercase_filename(file);
    return std::any_of(suffixes.begin(), suffixes.end(), [&](std::string_view s) { return !s.empty() && name.ends_with(s); });
}

void check_write_options(const fs::path& target, const detail::FormatHandler& format, const WriteOptions& options) {
    if (!format.write) {
        throw FileError(target, "gridwarp reads " + std::string(format.name) + " but does not write it (write .nii or .nii.gz)");
    }
    std::string extension = detail::lowercase(target.extension().string());
    if (!extension.empty()) extension.erase(0, 1);
    if (options.quality >= 0 && !named_with_one_of(target, format.quality_suffixes)) {
        throw FileError(target, "a quality applies to JPEG and WebP outputs, not to a ." + extension + " file");
    }
    if (options.quality == 0 || options.quality > 100) {
        throw FileError(target, "the quality is " + std::to_string(options.quality) + ": JPEG and WebP take 1 to 100");
    }
    if (format.highest_compression_level > 0 && options.compression_level > format.highest_compression_level) {
        throw FileError(target, "a ." + extension + " takes compression levels 0 to " + std::to_string(format.highest_compression_level) +
                                    ", not " + std::to_string(options.compression_level));
    }
    if (options.pyramid_levels != 0 && !format.writes_pyramids) {
        throw FileError(target, "a pyramid is written into OME-Zarr stores (.zarr) and TIFFs (.tif), not a ." + extension + " file");
    }
    // Names no row of the format table claims go to OpenCV: refused here, before any work, where it
    // has no encoder either, listing what gridwarp writes.
    const auto opencv_writes = [&] {
        bool has = false;
        detail::throw_if_failed(detail::raster_backend().has_writer(target, has));
        return has;
    };
    if (std::all_of(format.suffixes.begin(), format.suffixes.end(), [](std::string_view s) { return s.empty(); }) && !opencv_writes()) {
        std::string known;
        for (const detail::FormatHandler& row : detail::format_table()) {
            if (!row.write) continue;
            for (std::string_view suffix : row.suffixes) {
                if (suffix.empty()) continue;
                if (!known.empty()) known += ' ';
                known += suffix;
            }
        }
        const std::string named = extension.empty() ? std::string("a name without an extension") : "'." + extension + "'";
        throw FileError(target, "no format is written as " + named + ": name it with one of " + known +
                                    " (or another extension OpenCV writes: .pgm, .ppm, .exr, ...)");
    }
}

// The row of `target`, with `options` checked against it.
const detail::FormatHandler& checked_format(const fs::path& target, const WriteOptions& options) {
    const detail::FormatHandler& format = detail::format_for_path(target);
    check_write_options(target, format, options);
    return format;
}

bool holds_stored_values(const Image& image) { return image.scaling && image.scaling->pixels_are_stored; }

// An output to be sampled as stored values needs a format that records their scaling.
void require_scaling_stored(const fs::path& target, const detail::FormatHandler& format, const Image& description) {
    if (holds_stored_values(description) && !format.stores_value_scaling) {
        throw std::logic_error(target.string() + ": stored values for a format that keeps no scaling (" + std::string(format.name) + ")");
    }
}

}  // namespace

void check_write_options(const fs::path& target, const WriteOptions& options) {
    check_write_options(target, detail::format_for_path(target), options);
}

void write_image(const fs::path& file, const Image& image, const WriteOptions& options) {
    const detail::FormatHandler& format = checked_format(file, options);
    if (holds_stored_values(image) && !format.stores_value_scaling) {
        Image values = image.with_pixels(image.pixels.clone());
        apply_value_scaling(values);
        format.write(file, values, options);
        return;
    }
    format.write(file, image, options);
}

PendingOutput::PendingOutput(fs::path target, Image description, WriteOptions options)
    : PendingOutput(target, std::move(description), options, checked_format(target, options)) {}

PendingOutput::PendingOutput(fs::path target, Image description, WriteOptions options, const detail::FormatHandler& format)
    : target_(std::move(target)), image_(std::move(description)), options_(options), format_(&format) {
    require_scaling_stored(target_, format, image_);
    const auto map_output = format.map_output;
    if (map_output) {
        staged_ = detail::stage_mapped_output(target_, [&](const StagedFile& staged) -> std::optional<detail::FileClosers> {
            auto mapped = map_output(staged, image_);
            if (!mapped) return std::nullopt;
            image_ = std::move(mapped->image);
            return std::move(mapped->closers);
        });
        if (staged_) return;
    }
    image_.allocate();
}

PendingOutput::~PendingOutput() {
    image_.pixels = Tensor();  // unmaps before the staged file is removed
}

void PendingOutput::commit() {
    if (committed_) return;
    if (staged_) {
        image_.pixels = Tensor();  // unmaps: the data is in the file's pages
        staged_->publish(target_);
        staged_.reset();
    } else {
        format_->write(target_, image_, options_);
        image_.pixels = Tensor();
    }
    committed_ = true;
}

void write_sampled(const fs::path& target, Image description, const WriteOptions& options, int sample_threads,
                   const WindowSampler& sample, const std::function<void()>& sampled, ChannelSampling channel_sampling) {
    const detail::FormatHandler& format = checked_format(target, options);
    require_scaling_stored(target, format, description);
    if (format.streams && format.streams(target, description)) {
        write_path_atomically(target, [&](const StagedFile& staged) {
            format.stream(staged, description, options, sample, channel_sampling);
        });
        return;
    }
    PendingOutput output(target, std::move(description), options, format);
    Image& image = output.image();
    sample(Shape(image.spatial.size(), 0), image.spatial, 0, image.nchw(), sample_threads);
    if (sampled) sampled();
    output.commit();
}

}  // namespace gridwarp::io
