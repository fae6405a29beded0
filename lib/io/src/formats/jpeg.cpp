#include "formats/jpeg.hpp"

// jpeglib.h needs size_t and FILE declared first.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <string>

#include "files/output_file.hpp"
#include "formats/raster_pixels.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

// libjpeg's error manager, extended with where to jump and what was said. error_exit must not
// return: it keeps the message and jumps back to the setjmp of the stage that called libjpeg.
struct ErrorManager {
    jpeg_error_mgr base;
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX] = {};
    bool warned = false;
};

[[noreturn]] void on_jpeg_error(j_common_ptr info) {
    auto* manager = reinterpret_cast<ErrorManager*>(info->err);
    manager->base.format_message(info, manager->message);
    std::longjmp(manager->jump, 1);
}

// Level -1 is a warning (damaged data); the first is kept. Trace messages (levels above 0) are dropped.
void on_jpeg_message(j_common_ptr info, int level) {
    auto* manager = reinterpret_cast<ErrorManager*>(info->err);
    if (level != -1 || manager->warned) return;
    manager->warned = true;
    manager->base.format_message(info, manager->message);
}

struct JpegLayout {
    JDIMENSION width = 0, height = 0;
    int components = 0;
    int precision = 0;
    bool decodable = false;  // by this reader (else left to OpenCV)
};

// The stages that call libjpeg hold only plain values, so that its longjmp skips no destructor.
bool read_jpeg_header(jpeg_decompress_struct* info, ErrorManager* errors, const unsigned char* bytes, unsigned long size,
                      JpegLayout* layout) {
    if (setjmp(errors->jump)) return false;
    jpeg_mem_src(info, bytes, size);
    jpeg_read_header(info, TRUE);
    layout->width = info->image_width;
    layout->height = info->image_height;
    layout->components = info->num_components;
    layout->precision = info->data_precision;
    layout->decodable = (info->num_components == 1 || info->num_components == 3) && info->data_precision == 8;
    return true;
}

// Allocates the decoder's buffers (whole coefficient planes for a progressive file): called once
// the declared size has passed the memory budget.
bool start_jpeg_decompress(jpeg_decompress_struct* info, ErrorManager* errors, JpegLayout* layout) {
    if (setjmp(errors->jump)) return false;
    // OpenCV's choice for IMREAD_UNCHANGED: grey stays grey, three components become BGR.
    info->out_color_space = info->num_components == 1 ? JCS_GRAYSCALE : JCS_EXT_BGR;
    jpeg_start_decompress(info);
    layout->width = info->output_width;
    layout->height = info->output_height;
    return true;
}

bool read_jpeg_rows(jpeg_decompress_struct* info, ErrorManager* errors, unsigned char* first, std::size_t row_bytes) {
    if (setjmp(errors->jump)) return false;
    while (info->output_scanline < info->output_height) {
        JSAMPROW row = first + std::size_t{info->output_scanline} * row_bytes;
        jpeg_read_scanlines(info, &row, 1);
    }
    jpeg_finish_decompress(info);
    return true;
}

bool compress_jpeg(jpeg_compress_struct* info, ErrorManager* errors, const unsigned char* pixels, JDIMENSION width, JDIMENSION height,
                   int components, int quality, unsigned char** out, unsigned long* out_size) {
    if (setjmp(errors->jump)) return false;
    jpeg_mem_dest(info, out, out_size);
    info->image_width = width;
    info->image_height = height;
    info->input_components = components;
    info->in_color_space = components == 3 ? JCS_EXT_BGR : JCS_GRAYSCALE;
    jpeg_set_defaults(info);
    jpeg_set_quality(info, quality, TRUE);
    jpeg_start_compress(info, TRUE);
    const std::size_t row_bytes = std::size_t{width} * static_cast<std::size_t>(components);
    while (info->next_scanline < info->image_height) {
        JSAMPROW row = const_cast<unsigned char*>(pixels + std::size_t{info->next_scanline} * row_bytes);
        jpeg_write_scanlines(info, &row, 1);
    }
    jpeg_finish_compress(info);
    return true;
}

struct Compressor {
    jpeg_compress_struct info {};
    ErrorManager errors;
    unsigned char* encoded = nullptr;  // jpeg_mem_dest's buffer (malloc)
    unsigned long encoded_size = 0;
    Compressor() {
        info.err = jpeg_std_error(&errors.base);
        errors.base.error_exit = on_jpeg_error;
        errors.base.emit_message = on_jpeg_message;
        jpeg_create_compress(&info);
    }
    ~Compressor() {
        jpeg_destroy_compress(&info);
        std::free(encoded);
    }
    Compressor(const Compressor&) = delete;
    Compressor& operator=(const Compressor&) = delete;
};

struct Decompressor {
    jpeg_decompress_struct info {};
    ErrorManager errors;
    Decompressor() {
        info.err = jpeg_std_error(&errors.base);
        errors.base.error_exit = on_jpeg_error;
        errors.base.emit_message = on_jpeg_message;
        jpeg_create_decompress(&info);
    }
    ~Decompressor() { jpeg_destroy_decompress(&info); }
    Decompressor(const Decompressor&) = delete;
    Decompressor& operator=(const Decompressor&) = delete;
};

}  // namespace

std::optional<Image> read_jpeg(const fs::path& file, const MemoryBudget& budget) {
    const std::string bytes = read_file_bytes(file);
    Decompressor decompressor;
    const auto failed = [&] { return FileError(file, std::string("cannot read the JPEG: ") + decompressor.errors.message); };
    JpegLayout layout;
    const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
    if (!read_jpeg_header(&decompressor.info, &decompressor.errors, data, static_cast<unsigned long>(bytes.size()), &layout)) throw failed();
    if (layout.width == 0 || layout.height == 0) throw FileError(file, "cannot read the JPEG: it declares an empty image");
    // The frame libjpeg found is the one checked here, whatever the size guard saw before it.
    const std::string shape = std::to_string(layout.width) + "x" + std::to_string(layout.height);
    check_memory_budget(file, "a " + shape + " JPEG with " + std::to_string(layout.components) + " channels",
                        std::uint64_t{layout.width} * layout.height * static_cast<std::uint64_t>(layout.components),
                        layout.precision > 8 ? 2 : 1, budget);
    if (decompressor.errors.warned) throw FileError(file, std::string("cannot read the image: corrupt JPEG (") + decompressor.errors.message + ")");
    if (!layout.decodable) return std::nullopt;
    if (!start_jpeg_decompress(&decompressor.info, &decompressor.errors, &layout)) throw failed();

    Image image = decoded_raster(DType::UInt8, layout.height, layout.width, layout.components);
    const std::size_t row_bytes = std::size_t{layout.width} * static_cast<std::size_t>(layout.components);
    if (!read_jpeg_rows(&decompressor.info, &decompressor.errors, static_cast<unsigned char*>(image.pixels.data()), row_bytes)) {
        throw failed();
    }
    // libjpeg decodes a cut-off or corrupt file to the end (grey filler) and only warns.
    if (decompressor.errors.warned) throw FileError(file, std::string("cannot read the image: truncated or corrupt JPEG (") + decompressor.errors.message + ")");
    return image;
}

bool write_jpeg(const StagedFile& staged, const Image& image, const WriteOptions& options) {
    if (image.dtype() != DType::UInt8 || (image.channels != 1 && image.channels != 3) || image.batch != 1 || image.spatial.size() != 2) {
        return false;
    }
    Tensor scratch;
    const auto* pixels = static_cast<const unsigned char*>(pixels_in_layout(image, ChannelLayout::Interleaved, scratch));
    Compressor compressor;
    const int quality = options.quality >= 0 ? options.quality : kDefaultJpegQuality;
    if (!compress_jpeg(&compressor.info, &compressor.errors, pixels, static_cast<JDIMENSION>(image.spatial[1]),
                       static_cast<JDIMENSION>(image.spatial[0]), static_cast<int>(image.channels), quality, &compressor.encoded,
                       &compressor.encoded_size)) {
        throw FileError(staged.target, std::string("cannot write the JPEG: ") + compressor.errors.message);
    }
    OutputFile out(staged);
    out.write(std::span<const std::uint8_t>(compressor.encoded, compressor.encoded_size));
    out.close();
    return true;
}

}  // namespace gridwarp::io::detail
