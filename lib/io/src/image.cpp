#include "gridwarp/io/image.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "files/file_checks.hpp"
#include "formats/raster_pixels.hpp"
#include "gridwarp/io/error.hpp"
#include "names.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

std::string image_size_text(const Shape& spatial) {
    static constexpr const char* kAxisNames[] = {"W", "H", "D"};
    std::string sizes;
    std::string names;
    for (std::size_t i = 0; i < spatial.size(); ++i) {
        const std::string separator = i == 0 ? "" : " x ";
        sizes += separator + std::to_string(spatial[spatial.size() - 1 - i]);
        names += separator + (i < 3 ? kAxisNames[i] : "axis " + std::to_string(i + 1));
    }
    return sizes + " (" + names + ")";
}

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
    image.properties = prototype.properties;
    image.repetition_time = prototype.repetition_time;
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

Image Image::with_pixels(Tensor new_pixels) const {
    if (new_pixels.shape() != pixels.shape()) {
        throw std::invalid_argument("with_pixels: shape " + shape_to_string(new_pixels.shape()) + ", but the image stores " +
                                    shape_to_string(pixels.shape()));
    }
    Image image;
    image.kind = kind;
    image.format = format;
    image.pixels = std::move(new_pixels);
    image.batch = batch;
    image.channels = channels;
    image.spatial = spatial;
    image.layout = layout;
    image.geometry = geometry;
    image.channel_order = channel_order;
    image.nifti = nifti;
    image.scaling = scaling;
    image.properties = properties;
    image.repetition_time = repetition_time;
    image.warnings = warnings;
    image.exif_orientation = exif_orientation;
    image.pages = pages;
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

std::string lowercase(std::string_view text) {
    std::string lowered(text);
    for (auto& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return lowered;
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

Image decoded_raster(DType dtype, std::int64_t height, std::int64_t width, std::int64_t channels, std::int64_t pages) {
    Image image = raster_description(dtype, height, width, channels, pages);
    image.allocate();
    return image;
}

Image raster_description(DType dtype, std::int64_t height, std::int64_t width, std::int64_t channels, std::int64_t pages) {
    Image image;
    image.kind = FileKind::Raster;
    image.batch = pages;
    image.pages = pages;
    image.channels = channels;
    image.spatial = {height, width};
    image.layout = ChannelLayout::Interleaved;
    if (channels == 3) image.channel_order = "BGR";
    if (channels == 4) image.channel_order = "BGRA";
    image.pixels = Tensor(dtype, Shape{0});
    return image;
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

detail::ScaledStorage detail::scaled_storage(const Image& image) {
    if (!image.scaling) return {image.dtype(), false, false};
    if (image.scaling->pixels_are_stored) return {image.dtype(), false, true};
    const bool converts = is_floating(image.dtype()) && image.scaling->stored != image.dtype();
    return {converts ? image.scaling->stored : image.dtype(), converts, converts};
}

void apply_value_scaling(Image& image) {
    if (!image.scaling || !image.scaling->pixels_are_stored) return;
    Tensor values = convert_to(image.pixels.view(), DType::Float64);
    auto* value = values.data_as<double>();
    const double slope = image.scaling->slope, inter = image.scaling->inter;
    for (std::int64_t i = 0; i < values.numel(); ++i) value[i] = value[i] * slope + inter;
    image.pixels = std::move(values);
    image.scaling->pixels_are_stored = false;
}

Image detail::stored_values(const Image& image, DType stored) {
    Image values;
    values.batch = image.batch;
    values.channels = image.channels;
    values.spatial = image.spatial;
    values.layout = image.layout;
    values.pixels = convert_to(image.pixels.view(), stored, image.scaling->inter, image.scaling->slope);
    return values;
}

}  // namespace gridwarp::io
