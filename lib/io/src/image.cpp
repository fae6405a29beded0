#include "gridwarp/io/image.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "backends.hpp"
#include "bmp.hpp"
#include "png.hpp"
#include "tiff.hpp"
#include "formats.hpp"
#include "shared_files_internal.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/npy.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

std::string_view file_kind_name(FileKind kind) {
    switch (kind) {
        case FileKind::Tensor: return "tensor";
        case FileKind::Raster: return "image";
        case FileKind::Volume: return "volume";
    }
    return "tensor";
}

Geometry Geometry::identity(std::size_t dimension) {
    Geometry geometry;
    geometry.spacing.assign(dimension, 1.0);
    geometry.origin.assign(dimension, 0.0);
    geometry.direction.assign(dimension * dimension, 0.0);
    for (std::size_t i = 0; i < dimension; ++i) geometry.direction[i * dimension + i] = 1.0;
    return geometry;
}

namespace {

Shape nchw_shape(const Image& image) {
    Shape shape{image.batch, image.channels};
    shape.insert(shape.end(), image.spatial.begin(), image.spatial.end());
    return shape;
}

Shape nchw_strides(const Image& image) { return detail::nchw_strides(image.spatial, image.channels, image.layout); }

std::string lowercase(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    return text;
}

}  // namespace

ConstTensorView Image::nchw() const { return ConstTensorView(pixels.dtype(), pixels.data(), nchw_shape(*this), nchw_strides(*this)); }

TensorView Image::nchw() { return TensorView(pixels.dtype(), pixels.data(), nchw_shape(*this), nchw_strides(*this)); }

Image Image::describe_like(const Image& prototype, const Shape& spatial) {
    Image image;
    image.kind = prototype.kind;
    image.format = prototype.format;
    image.batch = prototype.batch;
    image.channels = prototype.channels;
    image.spatial = spatial;
    image.layout = prototype.layout;
    image.channel_order = prototype.channel_order;
    image.nifti = prototype.nifti;
    image.scaling = prototype.scaling;
    image.pixels = Tensor(prototype.dtype(), Shape{0});
    return image;
}

Shape Image::storage_shape() const {
    if (layout == ChannelLayout::Planar) return nchw_shape(*this);
    Shape shape = spatial;
    if (batch != 1) shape.insert(shape.begin(), batch);
    shape.push_back(channels);
    return shape;
}

void Image::allocate() { pixels = Tensor(pixels.dtype(), storage_shape()); }

Image Image::allocate_like(const Image& prototype, const Shape& spatial) {
    Image image = describe_like(prototype, spatial);
    image.allocate();
    return image;
}

Image Image::from_tensor(Tensor tensor) {
    if (tensor.rank() < 3) {
        throw std::invalid_argument("a tensor image needs shape (N, C, D1..Dr), got " + shape_to_string(tensor.shape()));
    }
    Image image;
    image.kind = FileKind::Tensor;
    image.format = "npy";
    image.batch = tensor.shape()[0];
    image.channels = tensor.shape()[1];
    image.spatial.assign(tensor.shape().begin() + 2, tensor.shape().end());
    image.layout = ChannelLayout::Planar;
    image.pixels = std::move(tensor);
    return image;
}

Geometry resampled_geometry(const Geometry& geometry, const Shape& old_spatial, const Shape& new_spatial,
                            bool align_corners) {
    const std::size_t dimension = geometry.dimension();
    Geometry result = geometry;
    std::vector<double> shift(dimension, 0.0);  // origin change along each axis, in millimetres
    for (std::size_t axis = 0; axis < dimension; ++axis) {
        const auto old_size = static_cast<double>(old_spatial[dimension - 1 - axis]);
        const auto new_size = static_cast<double>(new_spatial[dimension - 1 - axis]);
        if (align_corners) {
            if (new_size > 1 && old_size > 1) result.spacing[axis] = geometry.spacing[axis] * (old_size - 1) / (new_size - 1);
        } else {
            result.spacing[axis] = geometry.spacing[axis] * old_size / new_size;
            shift[axis] = 0.5 * (result.spacing[axis] - geometry.spacing[axis]);
        }
    }
    for (std::size_t i = 0; i < dimension; ++i) {
        for (std::size_t j = 0; j < dimension; ++j) result.origin[i] += geometry.direction[i * dimension + j] * shift[j];
    }
    return result;
}

PendingOutput::PendingOutput(fs::path target, Image description, WriteOptions options)
    : target_(std::move(target)), image_(std::move(description)), options_(options) {
    using Mapper = std::optional<detail::MappedOutput> (*)(const fs::path&, const fs::path&, const Image&);
    Mapper map_output = nullptr;
    if (detail::is_nifti_path(target_)) {
        if (image_.batch == 1) map_output = detail::map_nifti_output;
    } else if (kind_for_path(target_) == FileKind::Tensor) {
        map_output = detail::map_npy_output;
    }
    if (map_output) {
        staged_ = detail::stage_mapped_output(target_, [&](const fs::path& file) -> std::optional<detail::FileClosers> {
            auto mapped = map_output(file, target_, image_);
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
        write_image(target_, image_, options_);
        image_.pixels = Tensor();
    }
    committed_ = true;
}

void check_write_options(const fs::path& target, const WriteOptions& options) {
    std::string extension = lowercase(target.extension().string());
    if (!extension.empty()) extension.erase(0, 1);
    const bool lossy = extension == "jpg" || extension == "jpeg" || extension == "jpe" || extension == "webp";
    if (options.quality >= 0 && !lossy) {
        throw FileError(target, "a quality applies to JPEG and WebP outputs, not to a ." + extension + " file");
    }
    if (options.quality == 0 || options.quality > 100) {
        throw FileError(target, "the quality is " + std::to_string(options.quality) + ": JPEG and WebP take 1 to 100");
    }
    if (extension == "png" && options.compression_level > 9) {
        throw FileError(target, "a .png takes compression levels 0 to 9, not " + std::to_string(options.compression_level));
    }
}

void write_sampled(const fs::path& target, Image description, const WriteOptions& options, int sample_threads,
                   const WindowSampler& sample, const std::function<void()>& sampled, ChannelSampling channel_sampling) {
    check_write_options(target, options);
    if (detail::is_nifti_path(target) && detail::nifti_output_streams(target, description)) {
        write_path_atomically(target, [&](const fs::path& temporary) {
            detail::stream_nifti_output(temporary, target, description, options, sample, channel_sampling);
        });
        return;
    }
    PendingOutput output(target, std::move(description), options);
    Image& image = output.image();
    sample(Shape(image.spatial.size(), 0), image.spatial, 0, image.nchw(), sample_threads);
    if (sampled) sampled();
    output.commit();
}

FileKind kind_for_path(const fs::path& file) {
    const std::string name = lowercase(file.filename().string());
    if (detail::ends_with(name, ".npy")) return FileKind::Tensor;
    for (const char* extension : {".nii", ".nii.gz", ".hdr", ".hdr.gz", ".img", ".img.gz", ".nrrd", ".nhdr", ".mha", ".mhd"}) {
        if (detail::ends_with(name, extension)) return FileKind::Volume;
    }
    return FileKind::Raster;
}

namespace detail {

Shape nchw_strides(const Shape& spatial, std::int64_t channels, ChannelLayout layout) {
    Shape storage_shape{channels};
    storage_shape.insert(storage_shape.end(), spatial.begin(), spatial.end());
    if (layout == ChannelLayout::Planar) {
        const Shape strides = contiguous_strides(storage_shape);
        Shape nchw{shape_numel(storage_shape)};
        nchw.insert(nchw.end(), strides.begin(), strides.end());
        return nchw;
    }
    // Storage (spatial..., C) per batch item.
    storage_shape = spatial;
    storage_shape.push_back(channels);
    const Shape storage_strides = contiguous_strides(storage_shape);
    Shape strides{shape_numel(storage_shape), 1};
    strides.insert(strides.end(), storage_strides.begin(), storage_strides.end() - 1);
    return strides;
}

std::string lowercase_filename(const fs::path& file) { return lowercase(file.filename().string()); }

bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void require_readable_file(const fs::path& file) {
    std::error_code error;
    const auto status = fs::status(file, error);
    if (!fs::exists(status)) throw FileError(file, "no such file");
    if (fs::is_directory(status)) throw FileError(file, "is a directory, expected a file");
    // A FIFO or device would block or never end (/dev/zero); only regular files are read.
    if (!fs::is_regular_file(status)) throw FileError(file, "is not a regular file (a device, FIFO or socket)");
}

const void* pixels_in_layout(const Image& image, ChannelLayout layout, Tensor& scratch) {
    if (layout == image.layout) return image.pixels.data();
    const ConstTensorView source = image.nchw();
    Shape storage_shape;  // N first, then the layout's order
    Shape strides;        // of that storage, permuted to (N, C, spatial...)
    if (layout == ChannelLayout::Interleaved) {
        storage_shape = image.spatial;
        storage_shape.insert(storage_shape.begin(), image.batch);
        storage_shape.push_back(image.channels);
        const Shape s = contiguous_strides(storage_shape);
        strides = {s[0], s.back()};
        strides.insert(strides.end(), s.begin() + 1, s.end() - 1);
    } else {
        storage_shape = source.shape;
        strides = contiguous_strides(storage_shape);
    }
    scratch = Tensor(image.pixels.dtype(), storage_shape);
    copy_elements(source, TensorView(scratch.dtype(), scratch.data(), source.shape, strides));
    return scratch.data();
}

Image interleaved(Image image) {
    if (image.layout == ChannelLayout::Interleaved) return image;
    Tensor scratch;
    pixels_in_layout(image, ChannelLayout::Interleaved, scratch);
    Shape shape = image.spatial;
    if (image.batch != 1) shape.insert(shape.begin(), image.batch);
    shape.push_back(image.channels);
    image.pixels = std::move(scratch).reshaped(shape);
    image.layout = ChannelLayout::Interleaved;
    return image;
}

}  // namespace detail

namespace {

// "4294967296 bytes (4 GiB)": exact for the user who sets the option, readable for the others.
std::string describe_bytes(unsigned __int128 bytes) {
    if (bytes > UINT64_MAX) return "more than 2^64 bytes";
    const auto exact = static_cast<std::uint64_t>(bytes);
    static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double scaled = static_cast<double>(exact);
    int unit = -1;
    while (scaled >= 1024 && unit < 5) {
        scaled /= 1024;
        ++unit;
    }
    if (unit < 0) return std::to_string(exact) + " bytes";
    char readable[32];
    std::snprintf(readable, sizeof readable, scaled == std::floor(scaled) ? "%.0f %s" : "%.1f %s", scaled, units[unit]);
    return std::to_string(exact) + " bytes (" + readable + ")";
}

}  // namespace

void check_memory_budget(const fs::path& file, const std::string& what, std::uint64_t values, std::uint64_t value_bytes,
                         const MemoryBudget& budget) {
    const unsigned __int128 bytes = static_cast<unsigned __int128>(values) * value_bytes;
    if (budget.max_bytes != 0 && bytes > budget.max_bytes) {
        throw FileError(file, what + " needs " + describe_bytes(bytes) + ", more than --max-memory " + describe_bytes(budget.max_bytes) +
                                  " (raise --max-memory; 0: no limit)");
    }
    if (budget.max_bytes == 0 && bytes > (static_cast<unsigned __int128>(1) << 62)) {
        throw FileError(file, what + " needs " + describe_bytes(bytes) + ", more than any machine can allocate");
    }
    if (budget.max_values != 0 && values > budget.max_values) {
        throw FileError(file, what + " is " + std::to_string(values) + " values, more than --max-voxels " +
                                  std::to_string(budget.max_values) + " (raise it, or give --max-memory instead)");
    }
}

Image read_image(const fs::path& file, const ReadOptions& options) {
    detail::require_readable_file(file);
    if (detail::is_nifti_path(file)) return detail::read_nifti(file, options, true);
    switch (kind_for_path(file)) {
        case FileKind::Tensor: {
            Tensor tensor = read_npy(file);
            if (tensor.rank() < 3) {
                throw FileError(file, "expected a tensor (N, C, D1..Dr) of rank >= 3, got shape " + shape_to_string(tensor.shape()));
            }
            return Image::from_tensor(std::move(tensor));
        }
        case FileKind::Volume: return detail::read_itk_volume(file, options, true);
        case FileKind::Raster: break;
    }
    return detail::read_raster_checked(file, options);
}

namespace {

// The description of an image without its pixels (an empty tensor of its dtype).
Image header_copy(const Image& image) {
    Image copy = Image::describe_like(image, image.spatial);
    copy.geometry = image.geometry;
    copy.warnings = image.warnings;
    return copy;
}

Image read_header_of(const fs::path& file, const ReadOptions& options);

}  // namespace

Image read_image_header(const fs::path& file, const ReadOptions& options) {
    detail::require_readable_file(file);
    // Many jobs of a batch share a reference grid: read its header once (shared_files.hpp).
    const auto key = detail::shared_file_key(file, "header|" + std::to_string(static_cast<int>(options.nifti_geometry)));
    if (key) {
        if (auto hit = detail::shared_file_find(*key)) return header_copy(*std::any_cast<std::shared_ptr<const Image>>(*hit));
    }
    Image image = read_header_of(file, options);
    if (key && image.pixels.numel() == 0) {
        detail::shared_file_store(*key, std::shared_ptr<const Image>(std::make_shared<Image>(header_copy(image))), 4096);
    }
    return image;
}

namespace {

Image read_header_of(const fs::path& file, const ReadOptions& options) {
    if (detail::is_nifti_path(file)) return detail::read_nifti(file, options, false);
    if (kind_for_path(file) == FileKind::Volume) return detail::read_itk_volume(file, options, false);
    return read_image(file, options);
}

}  // namespace

void write_image(const fs::path& file, const Image& image, const WriteOptions& options) {
    check_write_options(file, options);
    if (detail::is_nifti_path(file)) {
        write_path_atomically(file, [&](const fs::path& temporary) { detail::write_nifti(temporary, file, image, options); });
        return;
    }
    switch (kind_for_path(file)) {
        case FileKind::Tensor:
            write_npy(file, image.nchw());
            return;
        case FileKind::Volume:
            write_path_atomically(file, [&](const fs::path& temporary) {
                detail::write_reporting_failures(temporary, file, [&] { detail::itk_backend().write_volume(temporary, file, image); });
            });
            return;
        case FileKind::Raster:
            write_path_atomically(file, [&](const fs::path& temporary) {
                if (detail::write_plain_bmp(temporary, file, image)) return;
                const std::string name = detail::lowercase_filename(file);
                if (name.ends_with(".png") && detail::write_png(temporary, file, image, options)) return;
                if (name.ends_with(".tif") || name.ends_with(".tiff")) return detail::write_tiff(temporary, file, image);
                detail::write_reporting_failures(temporary, file, [&] { detail::raster_backend().write(temporary, file, image, options); });
            });
            return;
    }
}

}  // namespace gridwarp::io
