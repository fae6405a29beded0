#include "formats/webp.hpp"

#include <webp/decode.h>
#include <webp/encode.h>

#include <memory>
#include <string>

#include "files/output_file.hpp"
#include "formats/raster_pixels.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

// VP8 and VP8L limit each side to 14 bits.
constexpr std::int64_t kMaxWebpSide = 16383;

std::string status_text(VP8StatusCode status) {
    switch (status) {
        case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
        case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
        case VP8_STATUS_BITSTREAM_ERROR: return "corrupt bitstream";
        case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
        case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated";
        default: return "status " + std::to_string(static_cast<int>(status));
    }
}

}  // namespace

std::optional<Image> read_webp(const fs::path& file, const ReadOptions& options) {
    const std::string bytes = read_file_bytes(file);
    const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
    WebPBitstreamFeatures features;
    const VP8StatusCode status = WebPGetFeatures(data, bytes.size(), &features);
    if (status != VP8_STATUS_OK) throw FileError(file, "cannot read the WebP: " + status_text(status));
    if (features.has_animation) return std::nullopt;
    if (features.width <= 0 || features.height <= 0) throw FileError(file, "cannot read the WebP: it declares an empty image");
    const int channels = features.has_alpha ? 4 : 3;
    const auto values = static_cast<std::uint64_t>(features.width) * static_cast<std::uint64_t>(features.height) * channels;
    check_memory_budget(file, "a " + std::to_string(features.width) + "x" + std::to_string(features.height) + " WebP", values, 1,
                        options.memory);
    Image image = decoded_raster(DType::UInt8, features.height, features.width, channels);
    auto* pixels = static_cast<std::uint8_t*>(image.pixels.data());
    const int stride = features.width * channels;
    const std::size_t size = static_cast<std::size_t>(values);
    const std::uint8_t* decoded = features.has_alpha ? WebPDecodeBGRAInto(data, bytes.size(), pixels, size, stride)
                                                     : WebPDecodeBGRInto(data, bytes.size(), pixels, size, stride);
    if (!decoded) throw FileError(file, "cannot read the WebP: its image data is truncated or corrupt");
    return image;
}

bool write_webp(const StagedFile& staged, const Image& image, const WriteOptions& options) {
    const std::int64_t channels = image.channels;
    if (image.dtype() != DType::UInt8 || image.batch != 1 || image.spatial.size() != 2 ||
        (channels != 1 && channels != 3 && channels != 4)) {
        return false;
    }
    const std::int64_t height = image.spatial[0], width = image.spatial[1];
    if (height > kMaxWebpSide || width > kMaxWebpSide) {
        throw FileError(staged.target, "a WebP holds at most 16383 x 16383 pixels, got " + std::to_string(width) + " x " + std::to_string(height));
    }
    Tensor scratch;
    const auto* pixels = static_cast<const std::uint8_t*>(pixels_in_layout(image, ChannelLayout::Interleaved, scratch));
    std::unique_ptr<std::uint8_t[]> grey_as_bgr;
    if (channels == 1) {  // as OpenCV: grey is written as colour
        const auto count = static_cast<std::size_t>(width * height);
        grey_as_bgr.reset(new std::uint8_t[count * 3]);
        for (std::size_t i = 0; i < count; ++i) grey_as_bgr[3 * i] = grey_as_bgr[3 * i + 1] = grey_as_bgr[3 * i + 2] = pixels[i];
        pixels = grey_as_bgr.get();
    }
    const int w = static_cast<int>(width), h = static_cast<int>(height);
    const bool alpha = channels == 4;
    const int stride = w * (alpha ? 4 : 3);
    const bool lossless = options.quality < 0;
    const auto quality = static_cast<float>(options.quality);
    std::uint8_t* encoded = nullptr;
    const std::size_t size = lossless ? (alpha ? WebPEncodeLosslessBGRA(pixels, w, h, stride, &encoded)
                                               : WebPEncodeLosslessBGR(pixels, w, h, stride, &encoded))
                                      : (alpha ? WebPEncodeBGRA(pixels, w, h, stride, quality, &encoded)
                                               : WebPEncodeBGR(pixels, w, h, stride, quality, &encoded));
    const std::unique_ptr<std::uint8_t, void (*)(void*)> owner(encoded, WebPFree);
    if (size == 0) throw FileError(staged.target, "cannot write the WebP: libwebp's encoder failed");
    OutputFile out(staged);
    out.write(std::span<const std::uint8_t>(encoded, size));
    out.close();
    return true;
}

}  // namespace gridwarp::io::detail
