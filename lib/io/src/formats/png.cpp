#include "formats/png.hpp"

#include <png.h>

#include <libdeflate.h>

#include <algorithm>
#include <array>
#include <bit>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "files/output_file.hpp"
#include "formats/gzip.hpp"
#include "formats/raster_pixels.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "names.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

constexpr std::uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

void put_big_endian_32(std::uint8_t* p, std::uint32_t value) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(value >> (24 - 8 * i));
}

bool has_valid_crc(std::span<const std::uint8_t> bytes, std::size_t chunk_at, std::uint32_t length) {
    const auto crc = static_cast<std::uint32_t>(libdeflate_crc32(0, bytes.data() + chunk_at + 4, std::size_t{length} + 4));
    return crc == big_endian_32(bytes.data() + chunk_at + 8 + length);
}

FileError crc_error(const fs::path& file, std::string_view type) {
    return FileError(file, "corrupt PNG: CRC error in its " + std::string(type) + " chunk");
}

// Whether check_png_chunks checks the IDAT chunks' CRCs too, or leaves them to the decoder that
// reads each chunk once (the image data is most of the file).
enum class ImageDataCrc { checked, left_to_decoder };

// Every chunk up to IEND must lie inside the file and each critical chunk must carry its CRC
// (what libpng treats as an error), so that these are reported with the chunk they concern. The
// header is one 13-byte IHDR, first, as libpng requires: the size guard (read_guards.cpp) and both
// decoders then read the same one.
void check_png_chunks(const fs::path& file, std::span<const std::uint8_t> bytes, ImageDataCrc image_data = ImageDataCrc::checked) {
    std::size_t at = sizeof kSignature;
    for (;;) {
        if (bytes.size() - at < 12) throw FileError(file, "truncated PNG: the file ends before its IEND chunk");
        const std::uint32_t length = big_endian_32(bytes.data() + at);
        const std::string type(reinterpret_cast<const char*>(bytes.data() + at + 4), 4);
        if (std::size_t{length} > bytes.size() - at - 12) {
            throw FileError(file, "truncated PNG: its " + type + " chunk runs past the end of the file");
        }
        const bool first = at == sizeof kSignature;
        if (first && (type != "IHDR" || length != 13)) throw FileError(file, "corrupt PNG: it does not start with a 13-byte IHDR chunk");
        if (!first && type == "IHDR") throw FileError(file, "corrupt PNG: a second IHDR chunk");
        const bool critical = (bytes[at + 4] & 0x20) == 0;  // IHDR, PLTE, IDAT, IEND
        if (critical && !(type == "IDAT" && image_data == ImageDataCrc::left_to_decoder) && !has_valid_crc(bytes, at, length)) {
            throw crc_error(file, type);
        }
        at += std::size_t{length} + 12;
        if (type == "IEND") return;
    }
}

// What libpng's hooks collect. The error hook must not return, so it keeps the message in a
// fixed buffer and jumps back to the setjmp of the stage that called libpng.
struct PngReport {
    char error[256] = {};
    std::vector<std::string> warnings;
};

[[noreturn]] void on_png_error(png_structp png, png_const_charp message) {
    auto* report = static_cast<PngReport*>(png_get_error_ptr(png));
    std::snprintf(report->error, sizeof report->error, "%s", message ? message : "unknown error");
    png_longjmp(png, 1);
}

void on_png_warning(png_structp png, png_const_charp message) {
    auto* report = static_cast<PngReport*>(png_get_error_ptr(png));
    try {
        if (report->warnings.size() < 8) report->warnings.emplace_back(message ? message : "");
    } catch (...) {  // a warning lost to a failed allocation
    }
}

struct MemorySource {
    const std::uint8_t* data;
    std::size_t size;
    std::size_t at;
};

void read_from_memory(png_structp png, png_bytep out, png_size_t count) {
    auto* source = static_cast<MemorySource*>(png_get_io_ptr(png));
    if (count > source->size - source->at) png_error(png, "the file ends inside a chunk");
    std::memcpy(out, source->data + source->at, count);
    source->at += count;
}

struct PngLayout {
    png_uint_32 width = 0, height = 0;
    int channels = 0;
    bool sixteen_bits = false;
    png_size_t row_bytes = 0;
};

// The stages that call libpng hold only plain values, so that its longjmp skips no destructor.
// OpenCV's rules for IMREAD_UNCHANGED: colour with transparency, or any alpha, gives four channels.
bool read_png_layout(png_structp png, png_infop info, PngLayout& layout) {
    if (setjmp(png_jmpbuf(png))) return false;
    png_read_info(png, info);
    int bit_depth = 0, color_type = 0;
    png_get_IHDR(png, info, &layout.width, &layout.height, &bit_depth, &color_type, nullptr, nullptr, nullptr);
    const bool transparency = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    switch (color_type) {
        case PNG_COLOR_TYPE_RGB:
        case PNG_COLOR_TYPE_PALETTE: layout.channels = transparency ? 4 : 3; break;
        case PNG_COLOR_TYPE_GRAY_ALPHA:
        case PNG_COLOR_TYPE_RGB_ALPHA: layout.channels = 4; break;
        default: layout.channels = 1; break;
    }
    layout.sixteen_bits = bit_depth == 16;
    if (layout.sixteen_bits) {
        const std::uint16_t probe = 1;
        if (*reinterpret_cast<const std::uint8_t*>(&probe) == 1) png_set_swap(png);
    }
    if (layout.channels < 4) {
        png_set_strip_alpha(png);
    } else {
        png_set_tRNS_to_alpha(png);
    }
    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if ((color_type & PNG_COLOR_MASK_COLOR) == 0 && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (layout.channels > 1) {
        if (color_type & PNG_COLOR_MASK_COLOR) {
            png_set_bgr(png);
        } else {
            png_set_gray_to_rgb(png);
        }
    }
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    layout.row_bytes = png_get_rowbytes(png, info);
    return true;
}

bool read_png_rows(png_structp png, png_bytepp rows) {
    if (setjmp(png_jmpbuf(png))) return false;
    png_read_image(png, rows);
    png_read_end(png, nullptr);
    return true;
}

// PNG's row filters (ISO 15948, 9.2): each byte less its prediction from the byte one pixel to the
// left (a), the byte above (b) and the one above-left (c), all 0 outside the image.
enum Filter : std::uint8_t { kNone = 0, kSub = 1, kUp = 2, kAverage = 3, kPaeth = 4 };

// One row's filter undone, for pixels of B bytes: `in` holds its filtered bytes, `above` the row
// above unfiltered (zeros for the first row), and `out` may overlap `in` from below. Left and
// above-left values are carried in locals, and Paeth's choice is made with masks: with a branch,
// noisy photographs mispredict on about every other byte.
template <std::size_t B>
void unfilter_row(Filter filter, const std::uint8_t* in, const std::uint8_t* above, std::size_t row_bytes, std::uint8_t* out) {
    switch (filter) {
        case kNone: std::memmove(out, in, row_bytes); return;
        case kSub: {
            std::uint8_t left[B] = {};
            for (std::size_t i = 0; i < row_bytes; i += B) {
                for (std::size_t k = 0; k < B; ++k) out[i + k] = left[k] = static_cast<std::uint8_t>(in[i + k] + left[k]);
            }
            return;
        }
        case kUp:
            for (std::size_t i = 0; i < row_bytes; ++i) out[i] = static_cast<std::uint8_t>(in[i] + above[i]);
            return;
        case kAverage: {
            std::uint8_t left[B] = {};
            for (std::size_t i = 0; i < row_bytes; i += B) {
                for (std::size_t k = 0; k < B; ++k) {
                    out[i + k] = left[k] = static_cast<std::uint8_t>(in[i + k] + ((left[k] + above[i + k]) >> 1));
                }
            }
            return;
        }
        case kPaeth: {
            int left[B] = {}, above_left[B] = {};
            for (std::size_t i = 0; i < row_bytes; i += B) {
                for (std::size_t k = 0; k < B; ++k) {
                    const int a = left[k], b = above[i + k], c = above_left[k];
                    const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
                    const int b_or_c = c ^ ((b ^ c) & -static_cast<int>(pb <= pc));
                    const int predicted = b_or_c ^ ((a ^ b_or_c) & -static_cast<int>((pa <= pb) & (pa <= pc)));
                    left[k] = static_cast<std::uint8_t>(in[i + k] + predicted);
                    out[i + k] = static_cast<std::uint8_t>(left[k]);
                    above_left[k] = b;
                }
            }
            return;
        }
    }
}

// Where each byte of a stored pixel of B bytes goes in memory: PNG stores RGB(A) and big-endian
// 16-bit values, gridwarp keeps BGR(A), as OpenCV does, in the machine's byte order. B names the
// form: grey 8 or 16 bits (1, 2), RGB or RGBA 8 bits (3, 4) or 16 bits (6, 8).
template <std::size_t B>
constexpr std::array<std::uint8_t, B> stored_to_native() {
    constexpr bool swap_bytes = std::endian::native == std::endian::little;
    std::array<std::uint8_t, B> from{};
    for (std::size_t k = 0; k < B; ++k) from[k] = static_cast<std::uint8_t>(k);
    const std::size_t value_bytes = B == 2 || B >= 6 ? 2 : 1, channels = B / value_bytes;
    if (channels >= 3) {
        for (std::size_t b = 0; b < value_bytes; ++b) std::swap(from[b], from[2 * value_bytes + b]);
    }
    if (value_bytes == 2 && swap_bytes) {
        for (std::size_t k = 0; k < B; k += 2) std::swap(from[k], from[k + 1]);
    }
    return from;
}

template <std::size_t B>
void reorder_row(std::uint8_t* row, std::size_t row_bytes) {
    constexpr std::array<std::uint8_t, B> from = stored_to_native<B>();
    bool identity = true;
    for (std::size_t k = 0; k < B; ++k) identity = identity && from[k] == k;
    if (identity) return;
    for (std::size_t i = 0; i < row_bytes; i += B) {
        std::uint8_t stored[B];
        std::memcpy(stored, row + i, B);
        for (std::size_t k = 0; k < B; ++k) row[i + k] = stored[from[k]];
    }
}

// The filters undone in place: `rows` rows of `row_bytes`, each stored after its filter type
// byte, so that row r's filtered bytes start r + 1 bytes after where its pixels go. Writing pixel
// byte i only ever overwrites filtered bytes already read. Each row is put in memory order once
// the row below no longer needs it, while it is still in cache. False for an unknown filter type.
template <std::size_t B>
bool unfilter_rows_in_place(std::uint8_t* buffer, std::size_t rows, std::size_t row_bytes) {
    const std::vector<std::uint8_t> zeros(row_bytes, 0);
    const std::uint8_t* above = zeros.data();
    for (std::size_t r = 0; r < rows; ++r) {
        const std::uint8_t* in = buffer + r * (row_bytes + 1) + 1;
        std::uint8_t* out = buffer + r * row_bytes;
        const std::uint8_t filter = in[-1];
        if (filter > kPaeth) return false;
        unfilter_row<B>(static_cast<Filter>(filter), in, above, row_bytes, out);
        if (r > 0) reorder_row<B>(out - row_bytes, row_bytes);
        above = out;
    }
    if (rows > 0) reorder_row<B>(buffer + (rows - 1) * row_bytes, row_bytes);
    return true;
}

// The pixels unfiltered and in memory order (stored_to_native), for pixels of 1, 2, 3, 4, 6 or 8 bytes.
bool unfilter_rows_in_place(std::uint8_t* buffer, std::size_t rows, std::size_t row_bytes, std::size_t pixel_bytes) {
    switch (pixel_bytes) {
        case 1: return unfilter_rows_in_place<1>(buffer, rows, row_bytes);
        case 2: return unfilter_rows_in_place<2>(buffer, rows, row_bytes);
        case 3: return unfilter_rows_in_place<3>(buffer, rows, row_bytes);
        case 4: return unfilter_rows_in_place<4>(buffer, rows, row_bytes);
        case 6: return unfilter_rows_in_place<6>(buffer, rows, row_bytes);
        case 8: return unfilter_rows_in_place<8>(buffer, rows, row_bytes);
        default: return false;
    }
}

// The common forms (8- or 16-bit grey, RGB or RGBA, not interlaced, no transparency chunk) decoded
// without libpng: the image data inflated by libdeflate straight into the pixel buffer and
// unfiltered there. nullopt for every other form and for anything libdeflate or the filters
// refuse, which libpng then reads (and reports).
std::optional<Image> read_common_png(const fs::path& file, std::span<std::uint8_t> bytes, bool& moved) {
    const std::uint8_t* header = bytes.data() + sizeof kSignature + 8;  // the one IHDR (check_png_chunks)
    const std::uint32_t width = big_endian_32(header), height = big_endian_32(header + 4);
    const int depth = header[8], colour = header[9], interlace = header[12];
    const int channels = colour == 0 ? 1 : colour == 2 ? 3 : colour == 6 ? 4 : 0;
    // PNG's sizes are below 2^31 (libpng refuses the rest): the products below fit in 64 bits.
    constexpr std::uint32_t kMostExtent = 0x7fffffff;
    if (channels == 0 || (depth != 8 && depth != 16) || interlace != 0 || width == 0 || height == 0 || width > kMostExtent ||
        height > kMostExtent) {
        return std::nullopt;
    }
    const std::size_t value_bytes = depth / 8, pixel_bytes = value_bytes * static_cast<std::size_t>(channels);
    const std::size_t row_bytes = pixel_bytes * width;
    if (static_cast<unsigned __int128>(row_bytes + 1) * height > (std::uint64_t{1} << 62)) return std::nullopt;
    const std::size_t filtered_bytes = (row_bytes + 1) * height;
    for (std::size_t at = sizeof kSignature; at + 12 <= bytes.size();) {
        const std::string_view type(reinterpret_cast<const char*>(bytes.data() + at + 4), 4);
        if (type == "tRNS") return std::nullopt;
        if (type == "IEND") break;
        at += std::size_t{big_endian_32(bytes.data() + at)} + 12;
    }
    // The zlib stream: the IDAT chunks' data joined where the file's bytes are, each moved down over
    // the chunk headers and other chunks before it (the first IDAT follows the IHDR, so the stream
    // never overwrites a chunk not yet walked): no second buffer of the stream's size. The chunks
    // were checked (check_png_chunks) and the header read above; each IDAT's CRC is checked here,
    // just before its bytes move; `moved` tells the caller that the bytes are no longer the file's.
    constexpr std::size_t kStreamStart = sizeof kSignature + 25;  // after the IHDR chunk
    std::size_t stream_bytes = 0;
    for (std::size_t at = sizeof kSignature; at + 12 <= bytes.size();) {
        const std::uint32_t length = big_endian_32(bytes.data() + at);
        const std::string_view type(reinterpret_cast<const char*>(bytes.data() + at + 4), 4);
        if (type == "IEND") break;
        const std::size_t next = at + std::size_t{length} + 12;
        if (type == "IDAT") {
            if (!has_valid_crc(bytes, at, length)) throw crc_error(file, type);
            std::memmove(bytes.data() + kStreamStart + stream_bytes, bytes.data() + at + 8, length);
            stream_bytes += length;
            moved = true;
        }
        at = next;
    }
    const std::span<const std::uint8_t> stream(bytes.data() + kStreamStart, stream_bytes);

    // Owned as the pixels' storage; the last `height` bytes are left over after unfiltering. A
    // tensor's storage, for its huge pages: inflating into 4 KiB pages faults on every one.
    const auto storage = std::make_shared<Tensor>(DType::UInt8, Shape{static_cast<std::int64_t>(filtered_bytes)});
    const std::shared_ptr<std::uint8_t> buffer(storage, storage->data_as<std::uint8_t>());
    // One per thread, kept: a batch of small files would otherwise allocate one per file.
    thread_local const std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> decompressor(
        libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
    if (!decompressor) throw std::bad_alloc();
    std::size_t inflated = 0;
    if (libdeflate_zlib_decompress(decompressor.get(), stream.data(), stream.size(), buffer.get(), filtered_bytes, &inflated) !=
            LIBDEFLATE_SUCCESS ||
        inflated != filtered_bytes) {
        return std::nullopt;
    }
    if (!unfilter_rows_in_place(buffer.get(), height, row_bytes, pixel_bytes)) return std::nullopt;
    Image image = raster_description(value_bytes == 2 ? DType::UInt16 : DType::UInt8, height, width, channels);
    image.pixels = Tensor::adopt(image.dtype(), image.storage_shape(), std::shared_ptr<void>(buffer, buffer.get()));
    return image;
}

struct ReadStructs {
    png_structp png = nullptr;
    png_infop info = nullptr;
    ~ReadStructs() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

}  // namespace

bool has_png_signature(std::span<const std::uint8_t> head) {
    return head.size() >= sizeof kSignature && std::memcmp(head.data(), kSignature, sizeof kSignature) == 0;
}

Image read_png(const fs::path& file) {
    FileBuffer file_bytes = read_file_buffer(file);
    std::span<std::uint8_t> bytes(file_bytes.data.get(), file_bytes.size);
    if (!has_png_signature(bytes)) throw FileError(file, "not a PNG: it does not start with the PNG signature");
    check_png_chunks(file, bytes, ImageDataCrc::left_to_decoder);
    bool moved = false;
    if (auto image = read_common_png(file, bytes, moved)) return std::move(*image);
    if (moved) {  // libpng reads the file as it is, not the joined stream
        file_bytes = read_file_buffer(file);
        bytes = std::span<std::uint8_t>(file_bytes.data.get(), file_bytes.size);
        if (!has_png_signature(bytes)) throw FileError(file, "not a PNG: it does not start with the PNG signature");
    }
    check_png_chunks(file, bytes);

    PngReport report;
    ReadStructs structs;
    structs.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &report, on_png_error, on_png_warning);
    if (structs.png) structs.info = png_create_info_struct(structs.png);
    if (!structs.png || !structs.info) throw std::bad_alloc();
    MemorySource source{bytes.data(), bytes.size(), 0};
    png_set_read_fn(structs.png, &source, read_from_memory);
    const auto failed = [&] { return FileError(file, std::string("cannot read the PNG: ") + report.error); };

    PngLayout layout;
    if (!read_png_layout(structs.png, structs.info, layout)) throw failed();
    const std::size_t value_bytes = layout.sixteen_bits ? 2 : 1;
    const std::size_t row_bytes = std::size_t{layout.width} * static_cast<std::size_t>(layout.channels) * value_bytes;
    if (layout.row_bytes != row_bytes) throw FileError(file, "cannot read the PNG: its rows decode to an unexpected size");

    Image image = decoded_raster(layout.sixteen_bits ? DType::UInt16 : DType::UInt8, layout.height, layout.width, layout.channels);
    std::vector<png_bytep> rows(layout.height);
    auto* first = static_cast<png_bytep>(image.pixels.data());
    for (std::size_t y = 0; y < rows.size(); ++y) rows[y] = first + y * row_bytes;
    if (!read_png_rows(structs.png, rows.data())) throw failed();
    for (const std::string& warning : report.warnings) {
        // libpng only warns when the image data fails its checksum after the last row, but then the
        // rows are damaged; data beyond the image leaves them whole.
        const bool damaged_data = warning.starts_with("IDAT") && warning.find("Too much image data") == std::string::npos &&
                                  warning.find("Extra compressed data") == std::string::npos;
        if (damaged_data) throw FileError(file, "cannot read the PNG: " + warning);
        image.warnings.push_back(file.string() + ": libpng: " + warning);
    }
    return image;
}

namespace {

// Each filter is a loop of its own, without branches, so that the compiler vectorises it.
constexpr int kFilterCount = 5;

void filter_sub(const std::uint8_t* row, std::size_t size, std::size_t pixel_bytes, std::uint8_t* out) {
    std::memcpy(out, row, std::min(size, pixel_bytes));
    for (std::size_t i = pixel_bytes; i < size; ++i) out[i] = static_cast<std::uint8_t>(row[i] - row[i - pixel_bytes]);
}

void filter_up(const std::uint8_t* row, const std::uint8_t* above, std::size_t size, std::uint8_t* out) {
    for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<std::uint8_t>(row[i] - above[i]);
}

void filter_average(const std::uint8_t* row, const std::uint8_t* above, std::size_t size, std::size_t pixel_bytes, std::uint8_t* out) {
    const std::size_t first = std::min(size, pixel_bytes);
    for (std::size_t i = 0; i < first; ++i) out[i] = static_cast<std::uint8_t>(row[i] - (above[i] >> 1));
    for (std::size_t i = pixel_bytes; i < size; ++i) {
        out[i] = static_cast<std::uint8_t>(row[i] - ((row[i - pixel_bytes] + above[i]) >> 1));
    }
}

void filter_paeth(const std::uint8_t* row, const std::uint8_t* above, std::size_t size, std::size_t pixel_bytes, std::uint8_t* out) {
    const std::size_t first = std::min(size, pixel_bytes);
    for (std::size_t i = 0; i < first; ++i) out[i] = static_cast<std::uint8_t>(row[i] - above[i]);  // a = c = 0: b
    for (std::size_t i = pixel_bytes; i < size; ++i) {
        const std::int16_t a = row[i - pixel_bytes], b = above[i], c = above[i - pixel_bytes];
        const std::int16_t pa = static_cast<std::int16_t>(std::abs(b - c)), pb = static_cast<std::int16_t>(std::abs(a - c)),
                           pc = static_cast<std::int16_t>(std::abs(a + b - 2 * c));
        const std::int16_t predicted = (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
        out[i] = static_cast<std::uint8_t>(row[i] - predicted);
    }
}

// The filter libpng's heuristic would pick: the least sum of the filtered bytes read as signed.
std::uint64_t signed_magnitude(const std::uint8_t* bytes, std::size_t size) {
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < size; ++i) {
        const auto value = static_cast<std::int8_t>(bytes[i]);
        sum += static_cast<std::uint8_t>(value < 0 ? -value : value);
    }
    return sum;
}

// One image row as PNG stores it: RGB(A) order, 16-bit values big-endian.
void stored_row(const std::uint8_t* pixels, std::size_t width, int channels, bool sixteen_bits, std::uint8_t* out) {
    const std::size_t value_bytes = sixteen_bits ? 2 : 1, pixel_bytes = value_bytes * static_cast<std::size_t>(channels);
    for (std::size_t x = 0; x < width; ++x) {
        const std::uint8_t* in = pixels + x * pixel_bytes;
        std::uint8_t* to = out + x * pixel_bytes;
        for (int c = 0; c < channels; ++c) {
            const int from = channels >= 3 && c < 3 ? 2 - c : c;  // BGR(A) -> RGB(A)
            if (sixteen_bits) {
                std::uint16_t value;
                std::memcpy(&value, in + 2 * from, 2);
                to[2 * c] = static_cast<std::uint8_t>(value >> 8);
                to[2 * c + 1] = static_cast<std::uint8_t>(value);
            } else {
                to[c] = in[from];
            }
        }
    }
}

class ChunkWriter {
public:
    explicit ChunkWriter(OutputFile& out) : out_(out) {}
    void chunk(const char* type, std::span<const std::uint8_t> data) {
        std::uint8_t head[8];
        put_big_endian_32(head, static_cast<std::uint32_t>(data.size()));
        std::memcpy(head + 4, type, 4);
        auto crc = libdeflate_crc32(0, head + 4, 4);
        if (!data.empty()) crc = libdeflate_crc32(crc, data.data(), data.size());  // (a null buffer restarts it)
        std::uint8_t tail[4];
        put_big_endian_32(tail, static_cast<std::uint32_t>(crc));
        out_.write(head);
        out_.write(data);
        out_.write(tail);
    }

private:
    OutputFile& out_;
};

}  // namespace

bool write_png(const StagedFile& staged, const Image& image, const WriteOptions& options) {
    const DType dtype = image.dtype();
    const bool sixteen_bits = dtype == DType::UInt16;
    if ((dtype != DType::UInt8 && !sixteen_bits) || image.batch != 1 || image.spatial.size() != 2) return false;
    if (image.channels != 1 && image.channels != 3 && image.channels != 4) return false;
    if (image.spatial[0] < 1 || image.spatial[1] < 1 || image.spatial[0] > 0x7fffffff || image.spatial[1] > 0x7fffffff) return false;
    const auto height = static_cast<std::uint64_t>(image.spatial[0]), width = static_cast<std::uint64_t>(image.spatial[1]);
    const int channels = static_cast<int>(image.channels);
    const std::size_t pixel_bytes = (sixteen_bits ? 2u : 1u) * static_cast<std::size_t>(channels);
    const std::size_t row_bytes = static_cast<std::size_t>(width) * pixel_bytes;

    Tensor scratch;
    const auto* pixels = static_cast<const std::uint8_t*>(pixels_in_layout(image, ChannelLayout::Interleaved, scratch));
    const int level = options.compression_level >= 0 ? options.compression_level : kDefaultPngLevel;

    // Blocks of whole filtered rows (a filter byte, then the row), each filtered by the thread that
    // compresses it; a block's first row is predicted from the row above it as in any other.
    const std::uint64_t rows_per_block = std::max<std::uint64_t>(1, kGzipBlockBytes / (row_bytes + 1));
    BlockSource source;
    for (std::uint64_t y = 0; y < height; y += rows_per_block) source.sizes.push_back(std::min(rows_per_block, height - y) * (row_bytes + 1));
    source.bytes = [&](std::uint64_t b, std::vector<std::uint8_t>& filtered) -> std::span<const std::uint8_t> {
        const std::uint64_t first = b * rows_per_block, last = std::min(height, first + rows_per_block);
        filtered.resize(static_cast<std::size_t>(last - first) * (row_bytes + 1));
        std::vector<std::uint8_t> above(row_bytes), candidates(kFilterCount * row_bytes);
        if (first > 0) stored_row(pixels + (first - 1) * row_bytes, width, channels, sixteen_bits, above.data());
        for (std::uint64_t y = first; y < last; ++y) {
            std::uint8_t* out = filtered.data() + static_cast<std::size_t>(y - first) * (row_bytes + 1);
            stored_row(pixels + y * row_bytes, width, channels, sixteen_bits, out + 1);
            Filter best = kNone;
            if (level > 0) {
                // The first row has no row above: Up is None, Average and Paeth lean on Sub's byte alone.
                if (y == 0) std::fill(above.begin(), above.end(), std::uint8_t{0});
                std::uint8_t* candidate[kFilterCount] = {out + 1};
                for (int f = 1; f < kFilterCount; ++f) candidate[f] = candidates.data() + static_cast<std::size_t>(f) * row_bytes;
                filter_sub(out + 1, row_bytes, pixel_bytes, candidate[kSub]);
                filter_up(out + 1, above.data(), row_bytes, candidate[kUp]);
                filter_average(out + 1, above.data(), row_bytes, pixel_bytes, candidate[kAverage]);
                filter_paeth(out + 1, above.data(), row_bytes, pixel_bytes, candidate[kPaeth]);
                std::uint64_t least = UINT64_MAX;
                for (int f = 0; f < kFilterCount; ++f) {
                    const std::uint64_t magnitude = signed_magnitude(candidate[f], row_bytes);
                    if (magnitude < least) {
                        least = magnitude;
                        best = static_cast<Filter>(f);
                    }
                }
                std::memcpy(above.data(), out + 1, row_bytes);
                if (best != kNone) std::memcpy(out + 1, candidate[best], row_bytes);
            }
            out[0] = best;
        }
        return filtered;
    };

    OutputFile out(staged);
    out.write(kSignature);
    ChunkWriter chunks(out);
    std::uint8_t header[13];
    put_big_endian_32(header, static_cast<std::uint32_t>(width));
    put_big_endian_32(header + 4, static_cast<std::uint32_t>(height));
    header[8] = sixteen_bits ? 16 : 8;
    header[9] = channels == 1 ? PNG_COLOR_TYPE_GRAY : channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGB_ALPHA;
    header[10] = header[11] = header[12] = 0;  // deflate, adaptive filtering, not interlaced
    chunks.chunk("IHDR", header);
    // The zlib stream in IDAT chunks of at least kIdatBytes (the last one shorter).
    std::vector<std::uint8_t> pending;
    deflate_compress(source, level, options.threads, DeflateContainer::Zlib, [&](std::span<const std::uint8_t> bytes) {
        pending.insert(pending.end(), bytes.begin(), bytes.end());
        if (pending.size() >= kIdatBytes) {
            chunks.chunk("IDAT", pending);
            pending.clear();
        }
    });
    if (!pending.empty()) chunks.chunk("IDAT", pending);
    chunks.chunk("IEND", {});
    out.close();
    return true;
}

}  // namespace gridwarp::io::detail
