#include "gridwarp/io/flow_io.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string_view>
#include <limits>

#include "files/file_checks.hpp"
#include "formats/raster_pixels.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/npy.hpp"
#include "names.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

namespace {

constexpr char kFloMagic[4] = {'P', 'I', 'E', 'H'};  // the float 202021.25, little endian
constexpr float kFloUnknown = 1e9f;
// Beyond 2^24 a float32 cannot place a sample to the pixel, and no image gridwarp reads is that
// large: a displacement from there up to the unknown mark is a damaged file, not a flow.
constexpr float kFloLargestDisplacement = 16777216.0f;

std::string format_float(float value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
    return text;
}

std::int32_t read_i32(const char* p) {
    std::uint32_t v = static_cast<unsigned char>(p[0]) | (static_cast<std::uint32_t>(static_cast<unsigned char>(p[1])) << 8) |
                      (static_cast<std::uint32_t>(static_cast<unsigned char>(p[2])) << 16) |
                      (static_cast<std::uint32_t>(static_cast<unsigned char>(p[3])) << 24);
    std::int32_t out;
    std::memcpy(&out, &v, 4);
    return out;
}

}  // namespace

FlowField parse_flo(std::string_view bytes, const fs::path& source) {
    if (bytes.size() < 12 || std::memcmp(bytes.data(), kFloMagic, 4) != 0) {
        throw FileError(source, "not a Middlebury .flo file (expected the 'PIEH' tag at the start)");
    }
    const std::int32_t width = read_i32(bytes.data() + 4), height = read_i32(bytes.data() + 8);
    if (width <= 0 || height <= 0 || width > (1 << 20) || height > (1 << 20)) {
        throw FileError(source, "implausible .flo size " + std::to_string(width) + " x " + std::to_string(height));
    }
    const std::size_t count = static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 2;
    if (bytes.size() - 12 != count * 4) {
        throw FileError(source, "truncated or oversized: a " + std::to_string(width) + " x " + std::to_string(height) +
                                    " .flo holds " + std::to_string(count * 4) + " bytes of flow, found " +
                                    std::to_string(bytes.size() - 12));
    }
    FlowField flow;
    flow.format = "flo";
    flow.field = Tensor(DType::Float32, {1, height, width, 2});
    float* out = flow.field.data_as<float>();
    for (std::size_t i = 0; i < count; ++i) {
        const std::int32_t bits = read_i32(bytes.data() + 12 + i * 4);
        std::memcpy(&out[i], &bits, 4);
    }
    for (std::size_t i = 0; i < count; i += 2) {
        const float u = std::fabs(out[i]), v = std::fabs(out[i + 1]);
        if (u < kFloLargestDisplacement && v < kFloLargestDisplacement) continue;  // false for NaN
        // Middlebury's unknown_flow() (flowIO.cpp): a component beyond the mark, infinite, or NaN.
        if (std::isnan(u) || std::isnan(v) || u >= kFloUnknown || v >= kFloUnknown) {
            out[i] = out[i + 1] = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        const std::size_t pixel = i / 2, columns = static_cast<std::size_t>(width);
        throw FileError(source, "pixel (x " + std::to_string(pixel % columns) + ", y " + std::to_string(pixel / columns) +
                                    ") holds the flow (" + format_float(out[i]) + ", " + format_float(out[i + 1]) +
                                    "): expected displacements below 2^24 pixels, or Middlebury's marks for unknown flow "
                                    "(1e9 and more, infinity, NaN)");
    }
    return flow;
}

namespace {

FlowField kitti_from_image(const Image& image, const fs::path& file);

// KITTI: 16-bit RGB PNG, u = (R - 2^15) / 64, v = (G - 2^15) / 64, B = 1 where the flow is valid.
FlowField read_kitti(const fs::path& file, const ReadOptions& options) {
    // OpenCV picks its decoder by the content, not the name: without this check a .png holding a
    // DICOM or TIFF stream would reach that decoder (GDCM allocated what a fuzzed header declared).
    constexpr std::string_view kPngSignature("\x89PNG\r\n\x1a\n", 8);
    char head[8] = {};
    std::ifstream in(file, std::ios::binary);
    if (!in.read(head, sizeof head) || std::string_view(head, sizeof head) != kPngSignature) {
        throw FileError(file, "not a KITTI flow PNG: expected the PNG signature at the start of the file");
    }
    in.close();
    return kitti_from_image(read_image(file, options), file);
}

FlowField kitti_from_image(const Image& image, const fs::path& file) {
    if (image.dtype() != DType::UInt16 || image.channels != 3) {
        throw FileError(file, "not a KITTI flow PNG: expected 16-bit with 3 channels, got " +
                                  std::string(dtype_name(image.dtype())) + " with " + std::to_string(image.channels) +
                                  " channels");
    }
    const std::int64_t height = image.spatial[0], width = image.spatial[1];
    FlowField flow;
    flow.format = "kitti";
    flow.field = Tensor(DType::Float32, {1, height, width, 2});
    const std::uint16_t* bgr = image.pixels.data_as<std::uint16_t>();  // OpenCV order: B, G, R
    float* out = flow.field.data_as<float>();
    for (std::int64_t p = 0; p < height * width; ++p) {
        const bool valid = bgr[p * 3] != 0;
        out[p * 2] = valid ? (static_cast<float>(bgr[p * 3 + 2]) - 32768.0f) / 64.0f : std::numeric_limits<float>::quiet_NaN();
        out[p * 2 + 1] = valid ? (static_cast<float>(bgr[p * 3 + 1]) - 32768.0f) / 64.0f : std::numeric_limits<float>::quiet_NaN();
    }
    return flow;
}

FlowField npy_flow_from_tensor(Tensor tensor, const fs::path& file) {
    const auto rank = tensor.rank();
    const std::int64_t components = rank >= 1 ? tensor.shape().back() : 0;
    if (rank < 2 || components < 1 || (rank != components + 1 && rank != components + 2)) {
        throw FileError(file, "expected a flow of shape (H, W, 2), (D, H, W, 3) or either with a leading N, got " +
                                  shape_to_string(tensor.shape()));
    }
    if (tensor.dtype() == DType::String || is_complex(tensor.dtype())) {
        throw FileError(file, "a flow must hold real numbers, got " + std::string(dtype_name(tensor.dtype())));
    }
    FlowField flow;
    flow.format = "npy";
    if (rank == components + 1) {
        Shape shape = tensor.shape();
        shape.insert(shape.begin(), 1);
        tensor = std::move(tensor).reshaped(shape);
    }
    flow.field = std::move(tensor);
    return flow;
}

FlowField volume_flow_from_image(Image image, const fs::path& file) {
    const auto rank = static_cast<std::int64_t>(image.spatial.size());
    if (image.channels == rank && image.layout == ChannelLayout::Planar) image = detail::interleaved(std::move(image));
    if (image.layout != ChannelLayout::Interleaved || image.channels != rank) {
        throw FileError(file, "expected a vector image with " + std::to_string(rank) +
                                  " components per voxel (one per axis), got " + std::to_string(image.channels) + " channels");
    }
    FlowField flow;
    flow.format = image.format;
    flow.geometry = image.geometry;
    Shape shape{1};
    shape.insert(shape.end(), image.spatial.begin(), image.spatial.end());
    shape.push_back(rank);
    flow.field = std::move(image.pixels).reshaped(shape);
    return flow;
}

}  // namespace

FlowField read_flow(const fs::path& file, const ReadOptions& options) {
    detail::require_readable_file(file);
    const std::string name = detail::lowercase_filename(file);
    if (detail::ends_with(name, ".flo")) return parse_flo(read_file_bytes(file), file);
    if (detail::ends_with(name, ".png")) return read_kitti(file, options);
    switch (kind_for_path(file)) {
        case FileKind::Tensor: return npy_flow_from_tensor(read_npy(file), file);
        case FileKind::Volume: return volume_flow_from_image(read_image(file, options), file);
        case FileKind::Raster: break;
    }
    throw FileError(file, "not a flow format gridwarp reads (expected .flo, KITTI .png, .npy, .nii, .nii.gz, .nrrd, .nhdr, .mha or .mhd)");
}

FlowField flow_from_image(const Image& image, const fs::path& source) {
    switch (image.kind) {
        case FileKind::Tensor: return npy_flow_from_tensor(image.pixels.clone(), source);
        case FileKind::Volume: {
            Image copy = Image::allocate_like(image, image.spatial);
            copy.geometry = image.geometry;
            copy_elements(image.nchw(), copy.nchw());
            return volume_flow_from_image(std::move(copy), source);
        }
        case FileKind::Raster: return kitti_from_image(image, source);
    }
    throw FileError(source, "not an image a flow field can come from");
}

void write_flo(const fs::path& file, const ConstTensorView& field) {
    Shape shape = field.shape;
    if (shape.size() == 4 && shape[0] == 1) shape.erase(shape.begin());
    if (shape.size() != 3 || shape[2] != 2) {
        throw FileError(file, "a .flo file holds a (H, W, 2) flow, got shape " + shape_to_string(field.shape));
    }
    const Tensor values = convert_to(field, DType::Float32);
    const auto height = static_cast<std::int32_t>(shape[0]), width = static_cast<std::int32_t>(shape[1]);
    write_file_atomically(file, [&](std::ostream& out) {
        out.write(kFloMagic, 4);
        auto write_i32 = [&](std::int32_t v) {
            const char b[4] = {static_cast<char>(v & 0xff), static_cast<char>((v >> 8) & 0xff),
                               static_cast<char>((v >> 16) & 0xff), static_cast<char>((v >> 24) & 0xff)};
            out.write(b, 4);
        };
        write_i32(width);
        write_i32(height);
        const float* data = values.data_as<float>();
        for (std::int64_t i = 0; i < values.numel(); ++i) {
            const float v = std::isfinite(data[i]) ? data[i] : 1e10f;  // non-finite: Middlebury's unknown
            std::int32_t bits;
            std::memcpy(&bits, &v, 4);
            write_i32(bits);
        }
    });
}

}  // namespace gridwarp::io
