// Raster images through OpenCV: the forms gridwarp's own codecs leave to it (CMYK JPEG and TIFF,
// 4-channel JPEG outputs, uncommon BMPs, PGM, ...).
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <iostream>
#include <cstring>
#include <fstream>

#include "files/output_file.hpp"
#include "formats/raster_pixels.hpp"
#include "formats/read_guards.hpp"
#include "gridwarp/io/error.hpp"
#include "modules/module_functions.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

// OpenCV reports decoder trouble on stderr itself; gridwarp reports it once, as a FileError.
void silence_opencv() {
    static const bool silenced = [] {
        cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
        return true;
    }();
    (void)silenced;
}

std::string extension_of(const fs::path& file) {
    std::string extension = file.extension().string();
    if (!extension.empty()) extension.erase(0, 1);
    std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return std::tolower(c); });
    return extension;
}

DType dtype_for_depth(int depth, const fs::path& file) {
    switch (depth) {
        case CV_8U: return DType::UInt8;
        case CV_8S: return DType::Int8;
        case CV_16U: return DType::UInt16;
        case CV_16S: return DType::Int16;
        case CV_32S: return DType::Int32;
        case CV_32F: return DType::Float32;
        case CV_64F: return DType::Float64;
        case CV_16F: return DType::Float16;
        default: throw FileError(file, "unsupported OpenCV pixel depth " + std::to_string(depth));
    }
}

int depth_for_dtype(DType type) {
    switch (type) {
        case DType::UInt8: return CV_8U;
        case DType::Int8: return CV_8S;
        case DType::UInt16: return CV_16U;
        case DType::Int16: return CV_16S;
        case DType::Int32: return CV_32S;
        case DType::Float32: return CV_32F;
        case DType::Float64: return CV_64F;
        case DType::Float16: return CV_16F;
        default: return -1;
    }
}

// Whether a common format can store pixels of `type`; nullopt for the formats left to OpenCV to judge.
std::optional<bool> format_holds(const std::string& extension, DType type) {
    if (extension == "png") return type == DType::UInt8 || type == DType::UInt16;
    if (extension == "jpg" || extension == "jpeg" || extension == "jpe" || extension == "bmp" || extension == "webp" ||
        extension == "pbm" || extension == "pgm" || extension == "ppm" || extension == "ras" || extension == "sr") {
        return type == DType::UInt8;
    }
    return std::nullopt;
}

std::string first_line(const std::string& text) {
    const auto start = text.find_first_not_of(" \t\r\n");
    if (start == std::string::npos) return "";
    const auto end = text.find_first_of("\r\n", start);
    return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

Image read_raster(const fs::path& file) {
    silence_opencv();
    cv::Mat mat;
    std::string decoder_messages;
    try {
        if (!cv::haveImageReader(file.string())) {
            throw FileError(file, "not a recognised image format (expected PNG, JPEG, TIFF, BMP, WebP, ... "
                                  "or .npy, .nii, .nii.gz, .nrrd, .nhdr, .mha, .mhd)");
        }
        decoder_messages = capture_stderr([&] { mat = cv::imread(file.string(), cv::IMREAD_UNCHANGED); });
    } catch (const cv::Exception& e) {
        throw FileError(file, "cannot read the image: " + std::string(e.err));
    }
    if (mat.empty()) {
        const std::string reason = first_line(decoder_messages);
        throw FileError(file, "cannot read the image: " + (reason.empty() ? "corrupt, truncated or unsupported" : reason));
    }
    // libjpeg decodes a cut-off file to the end with grey filler and only warns.
    for (const char* damage : {"Premature end of JPEG file", "Corrupt JPEG data"}) {
        if (decoder_messages.find(damage) != std::string::npos) {
            throw FileError(file, "cannot read the image: truncated or corrupt JPEG (" + std::string(damage) + ")");
        }
    }
    if (!mat.isContinuous()) mat = mat.clone();

    Image image;
    image.kind = FileKind::Raster;
    image.format = extension_of(file);
    image.channels = mat.channels();
    image.spatial = {mat.rows, mat.cols};
    image.layout = ChannelLayout::Interleaved;
    if (image.channels == 3) image.channel_order = "BGR";
    if (image.channels == 4) image.channel_order = "BGRA";
    const DType dtype = dtype_for_depth(mat.depth(), file);
    // Keep OpenCV's buffer: the tensor shares it instead of copying.
    auto owner = std::make_shared<cv::Mat>(std::move(mat));
    image.pixels = Tensor::adopt(dtype, {owner->rows, owner->cols, image.channels}, std::shared_ptr<void>(owner, owner->data));
    if (image.format == "tif" || image.format == "tiff") {
        // A page count the decoder cannot give (its messages are caught, not printed) leaves one page.
        std::size_t pages = 1;
        try {
            capture_stderr([&] { pages = cv::imcount(file.string(), cv::IMREAD_UNCHANGED); });
        } catch (const std::exception&) {
            pages = 1;
        }
        image.pages = std::max<std::int64_t>(1, static_cast<std::int64_t>(pages));
        if (image.pages > 1) {
            image.warnings.push_back(file.string() + ": " + std::to_string(image.pages) + " pages; the first is read");
        }
    }
    return image;
}

bool has_raster_writer(const fs::path& file) {
    silence_opencv();
    return cv::haveImageWriter(file.string());
}

void write_raster(const StagedFile& staged, const Image& image, const WriteOptions& options) {
    silence_opencv();
    if (image.batch != 1 || image.spatial.size() != 2) {
        throw FileError(staged.target, "an image file holds one 2-D image, got " + std::to_string(image.batch) + " item(s) of size " +
                                    image_size_text(image.spatial) + " (write .npy or a volume format)");
    }
    const int depth = depth_for_dtype(image.dtype());
    const std::string extension = extension_of(staged.target);
    if (depth < 0 || !format_holds(extension, image.dtype()).value_or(true)) {
        throw FileError(staged.target, "a ." + extension + " file cannot hold " + std::string(dtype_name(image.dtype())) +
                                    " pixels (write .tif, .npy or .nii for other types)");
    }
    if (image.channels < 1 || image.channels > 4) {
        throw FileError(staged.target, "image files hold 1 to 4 channels, got " + std::to_string(image.channels));
    }
    Tensor scratch;
    const void* data = pixels_in_layout(image, ChannelLayout::Interleaved, scratch);
    const cv::Mat mat(static_cast<int>(image.spatial[0]), static_cast<int>(image.spatial[1]),
                      CV_MAKETYPE(depth, static_cast<int>(image.channels)), const_cast<void*>(data));
    std::vector<int> parameters;
    const auto set = [&](int parameter, int value) {
        parameters.push_back(parameter);
        parameters.push_back(value);
    };
    if (options.quality >= 0) set(extension == "webp" ? cv::IMWRITE_WEBP_QUALITY : cv::IMWRITE_JPEG_QUALITY, options.quality);
    if (options.compression_level >= 0 && extension == "png") set(cv::IMWRITE_PNG_COMPRESSION, options.compression_level);
    // Encoded in memory and written here, so that a failing write or close is reported with its
    // cause (a full disk, a quota, an I/O error); imwrite would only say that it failed.
    std::vector<unsigned char> encoded;
    bool encodes = false;
    try {
        encodes = cv::imencode("." + extension, mat, encoded, parameters);
    } catch (const cv::Exception& e) {
        throw FileError(staged.target, "cannot write the image: " + std::string(e.err));
    }
    if (!encodes) throw FileError(staged.target, "cannot write the image (OpenCV has no writer for this format and pixel type)");
    OutputFile out(staged);
    out.write(std::span<const std::uint8_t>(encoded.data(), encoded.size()));
    out.close();
}

}  // namespace gridwarp::io::detail
