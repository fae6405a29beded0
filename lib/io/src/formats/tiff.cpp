#include "formats/tiff.hpp"

#include <tiffio.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include <libdeflate.h>

#include "files/output_file.hpp"
#include "formats/halving.hpp"
#include "formats/raster_pixels.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/tiles.hpp"
#include "names.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

// The first error libtiff reports, and the first warning while pixels are decoded. Warnings about
// directories concern tags (unknown ones, odd counts) and are dropped; a codec warns of damaged
// data (CCITT's premature end of line, libjpeg's corrupt data), which refuses the file.
struct TiffReport {
    std::string error;
    bool decoding = false;
    std::string decoding_warning;
};

int on_tiff_error(TIFF*, void* user_data, const char* module, const char* format, va_list arguments) {
    auto* report = static_cast<TiffReport*>(user_data);
    if (report->error.empty()) {
        char text[512];
        std::vsnprintf(text, sizeof text, format, arguments);
        report->error = text;
        if (report->error.empty() && module) report->error = module;
    }
    return 1;
}

int on_tiff_warning(TIFF*, void* user_data, const char* module, const char* format, va_list arguments) {
    auto* report = static_cast<TiffReport*>(user_data);
    if (report->decoding && report->decoding_warning.empty()) {
        char text[512];
        std::vsnprintf(text, sizeof text, format, arguments);
        report->decoding_warning = text;
        if (report->decoding_warning.empty()) report->decoding_warning = module ? module : "a warning";
    }
    return 1;
}

struct OpenOptions {
    TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
    ~OpenOptions() { TIFFOpenOptionsFree(options); }
};

struct TiffHandle {
    TIFF* tif = nullptr;
    ~TiffHandle() {
        if (tif) TIFFClose(tif);
    }
};

void set_handlers(OpenOptions& options, TiffReport& report, std::uint64_t max_allocation) {
    if (!options.options) throw std::bad_alloc();
    TIFFOpenOptionsSetErrorHandlerExtR(options.options, on_tiff_error, &report);
    TIFFOpenOptionsSetWarningHandlerExtR(options.options, on_tiff_warning, &report);
    const auto limit = static_cast<tmsize_t>(std::min<std::uint64_t>(max_allocation, INT64_MAX));
    TIFFOpenOptionsSetMaxSingleMemAlloc(options.options, limit);
}

enum class Photometric { Grey, InvertedGrey, Colour, Palette };

// A page as stored, and what it becomes in the image.
struct PageLayout {
    std::uint32_t width = 0, height = 0;
    std::uint16_t samples = 1, bits = 8, planar = PLANARCONFIG_CONTIG;
    Photometric photometric = Photometric::Grey;
    bool tiled = false;
    std::uint32_t chunk_width = 0, chunk_height = 0;  // a tile's, or a strip's (width x rows per strip)
    int orientation = 0;  // the page's tag; 0: none (shown as stored, as 1)
    DType dtype = DType::UInt8;  // of each value in the image (1/2/4-bit samples become uint8)
    int channels = 1;            // in the image
    std::array<const std::uint16_t*, 3> colour_map{};  // red, green, blue (palette pages)

    std::size_t sample_bytes() const { return bits < 8 ? 1 : bits / 8; }
    std::string describe() const {
        return std::to_string(width) + "x" + std::to_string(height) + " " + std::string(dtype_name(dtype)) + " with " +
               std::to_string(channels) + (channels == 1 ? " channel" : " channels");
    }
    bool same_image_as(const PageLayout& other) const {
        return width == other.width && height == other.height && dtype == other.dtype && channels == other.channels;
    }
};

std::optional<DType> sample_dtype(std::uint16_t format, std::uint16_t bits) {
    switch (format) {
        case SAMPLEFORMAT_UINT:
        case SAMPLEFORMAT_VOID:
            switch (bits) {
                case 1: case 2: case 4: case 8: return DType::UInt8;
                case 16: return DType::UInt16;
                case 32: return DType::UInt32;
                case 64: return DType::UInt64;
                default: return std::nullopt;
            }
        case SAMPLEFORMAT_INT:
            switch (bits) {
                case 8: return DType::Int8;
                case 16: return DType::Int16;
                case 32: return DType::Int32;
                case 64: return DType::Int64;
                default: return std::nullopt;
            }
        case SAMPLEFORMAT_IEEEFP:
            switch (bits) {
                case 16: return DType::Float16;
                case 32: return DType::Float32;
                case 64: return DType::Float64;
                default: return std::nullopt;
            }
        default: return std::nullopt;
    }
}

bool is_alpha(std::uint16_t extra) { return extra == EXTRASAMPLE_ASSOCALPHA || extra == EXTRASAMPLE_UNASSALPHA; }

// The current directory's layout; nullopt for the forms left to OpenCV. Sets JPEG-compressed YCbCr
// pages to decode as RGB, so it is called again whenever a directory is (re)read.
std::optional<PageLayout> page_layout(TIFF* tif) {
    PageLayout page;
    std::uint16_t photometric = 0, sample_format = SAMPLEFORMAT_UINT, compression = COMPRESSION_NONE, extra_count = 0;
    std::uint16_t* extras = nullptr;
    std::uint16_t orientation = 0;
    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &page.width) || !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &page.height) ||
        !TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric)) {
        return std::nullopt;
    }
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &page.samples);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &page.bits);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &sample_format);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &page.planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
    TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, &extra_count, &extras);
    if (TIFFGetField(tif, TIFFTAG_ORIENTATION, &orientation) && orientation >= 1 && orientation <= 8) page.orientation = orientation;
    const auto dtype = sample_dtype(sample_format, page.bits);
    if (!dtype || page.width == 0 || page.height == 0) return std::nullopt;
    page.dtype = *dtype;
    const bool sub_byte = page.bits < 8;
    const bool alpha = extra_count == 1 && extras && is_alpha(extras[0]);
    switch (photometric) {
        case PHOTOMETRIC_MINISBLACK:
        case PHOTOMETRIC_MINISWHITE:
            page.photometric = photometric == PHOTOMETRIC_MINISBLACK ? Photometric::Grey : Photometric::InvertedGrey;
            if (page.photometric == Photometric::InvertedGrey && sample_format != SAMPLEFORMAT_UINT && sample_format != SAMPLEFORMAT_VOID) {
                return std::nullopt;
            }
            if (page.samples == 1) {
                page.channels = 1;
            } else if (page.samples == 2 && !sub_byte) {
                page.channels = alpha ? 4 : 2;  // grey and alpha as BGRA, as PNG's grey and alpha
            } else {
                return std::nullopt;
            }
            break;
        case PHOTOMETRIC_YCBCR:
            if (compression != COMPRESSION_JPEG || page.bits != 8 || page.samples != 3) return std::nullopt;
            if (!TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB)) return std::nullopt;
            [[fallthrough]];
        case PHOTOMETRIC_RGB:
            if (sub_byte || (page.samples != 3 && page.samples != 4)) return std::nullopt;
            page.photometric = Photometric::Colour;
            page.channels = page.samples;
            break;
        case PHOTOMETRIC_PALETTE:
            if (page.samples != 1 || page.bits > 8 || page.dtype != DType::UInt8) return std::nullopt;
            if (!TIFFGetField(tif, TIFFTAG_COLORMAP, &page.colour_map[0], &page.colour_map[1], &page.colour_map[2])) return std::nullopt;
            page.photometric = Photometric::Palette;
            page.channels = 3;
            break;
        default: return std::nullopt;
    }
    page.tiled = TIFFIsTiled(tif) != 0;
    if (page.tiled) {
        if (!TIFFGetField(tif, TIFFTAG_TILEWIDTH, &page.chunk_width) || !TIFFGetField(tif, TIFFTAG_TILELENGTH, &page.chunk_height)) {
            return std::nullopt;
        }
    } else {
        page.chunk_width = page.width;
        TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &page.chunk_height);
        page.chunk_height = std::clamp<std::uint32_t>(page.chunk_height, 1, page.height);
    }
    if (page.chunk_width == 0 || page.chunk_height == 0) return std::nullopt;
    return page;
}

// Each strip or tile must lie inside the file (libtiff would find out only when the pixels are
// already allocated).
void check_chunks_inside(TIFF* tif, const fs::path& file, std::uint64_t file_size, std::size_t page) {
    const std::uint32_t chunks = TIFFNumberOfStrips(tif);  // tiles too, for a tiled page
    for (std::uint32_t chunk = 0; chunk < chunks; ++chunk) {
        const std::uint64_t offset = TIFFGetStrileOffset(tif, chunk), size = TIFFGetStrileByteCount(tif, chunk);
        if (offset > file_size || size > file_size - offset) {
            throw FileError(file, "truncated TIFF: page " + std::to_string(page + 1) + "'s " + (TIFFIsTiled(tif) ? "tile " : "strip ") +
                                      std::to_string(chunk) + " runs past the end of the file");
        }
    }
}

// Widens `count` samples of `bits` bits (1, 2 or 4), packed from the most significant bit, to bytes.
void unpack_samples(const std::uint8_t* packed, std::uint32_t count, std::uint16_t bits, std::uint8_t* out) {
    const unsigned mask = (1u << bits) - 1;
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::size_t bit = std::size_t{i} * bits;
        out[i] = static_cast<std::uint8_t>((packed[bit / 8] >> (8 - bits - bit % 8)) & mask);
    }
}

template <class T>
void interleave_sample_of(const std::uint8_t* plane, std::size_t pixels, std::uint16_t sample, std::uint16_t samples, std::uint8_t* out) {
    const auto* from = reinterpret_cast<const T*>(plane);
    auto* to = reinterpret_cast<T*>(out) + sample;
    for (std::size_t i = 0; i < pixels; ++i) to[i * samples] = from[i];
}

// Sets one sample's plane of `pixels` values among the pixels' samples in `out` (PlanarConfiguration 2).
void interleave_sample(const std::uint8_t* plane, std::size_t pixels, std::size_t sample_bytes, std::uint16_t sample,
                       std::uint16_t samples, std::uint8_t* out) {
    switch (sample_bytes) {
        case 1: interleave_sample_of<std::uint8_t>(plane, pixels, sample, samples, out); break;
        case 2: interleave_sample_of<std::uint16_t>(plane, pixels, sample, samples, out); break;
        case 4: interleave_sample_of<std::uint32_t>(plane, pixels, sample, samples, out); break;
        default: interleave_sample_of<std::uint64_t>(plane, pixels, sample, samples, out); break;
    }
}

// Decodes the current page's samples as stored (one byte per sub-byte sample), pixel after pixel,
// into `out`. False on a decoder error (in the report) or a chunk that decodes short.
bool decode_samples(TIFF* tif, const PageLayout& page, std::uint8_t* out) {
    const std::size_t sample_bytes = page.sample_bytes();
    const std::size_t pixel_bytes = sample_bytes * page.samples;
    const std::size_t row_bytes = pixel_bytes * page.width;
    const bool whole_rows = !page.tiled && page.planar == PLANARCONFIG_CONTIG && page.bits >= 8;
    if (whole_rows) {  // each strip decodes straight into its rows
        for (std::uint32_t y = 0; y < page.height; y += page.chunk_height) {
            const std::uint32_t rows = std::min(page.chunk_height, page.height - y);
            const auto want = static_cast<tmsize_t>(row_bytes * rows);
            if (TIFFReadEncodedStrip(tif, TIFFComputeStrip(tif, y, 0), out + row_bytes * y, want) != want) return false;
        }
        return true;
    }
    const std::uint16_t planes = page.planar == PLANARCONFIG_SEPARATE ? page.samples : 1;
    const tmsize_t chunk_size = page.tiled ? TIFFTileSize(tif) : TIFFStripSize(tif);
    const tmsize_t chunk_row_bytes = page.tiled ? TIFFTileRowSize(tif) : TIFFScanlineSize(tif);
    if (chunk_size <= 0 || chunk_row_bytes <= 0) return false;
    std::vector<std::uint8_t> chunk(static_cast<std::size_t>(chunk_size));
    std::vector<std::uint8_t> unpacked(page.bits < 8 ? page.chunk_width : 0);
    for (std::uint16_t plane = 0; plane < planes; ++plane) {
        for (std::uint32_t y0 = 0; y0 < page.height; y0 += page.chunk_height) {
            for (std::uint32_t x0 = 0; x0 < page.width; x0 += page.chunk_width) {
                const std::uint32_t rows = std::min(page.chunk_height, page.height - y0);
                const std::uint32_t columns = std::min(page.chunk_width, page.width - x0);
                const tmsize_t got = page.tiled ? TIFFReadEncodedTile(tif, TIFFComputeTile(tif, x0, y0, 0, plane), chunk.data(), chunk_size)
                                                : TIFFReadEncodedStrip(tif, TIFFComputeStrip(tif, y0, plane), chunk.data(), chunk_size);
                // A strip at the bottom holds only the rows left; a tile is always whole.
                const tmsize_t need = page.tiled ? chunk_size : chunk_row_bytes * rows;
                if (got < need) return false;
                for (std::uint32_t r = 0; r < rows; ++r) {
                    const std::uint8_t* source = chunk.data() + static_cast<std::size_t>(chunk_row_bytes) * r;
                    std::uint8_t* target = out + row_bytes * (y0 + r) + pixel_bytes * x0;
                    if (page.bits < 8) {  // one sample per pixel
                        unpack_samples(source, columns, page.bits, unpacked.data());
                        source = unpacked.data();
                    }
                    if (planes == 1) {
                        std::memcpy(target, source, pixel_bytes * columns);
                        continue;
                    }
                    interleave_sample(source, columns, sample_bytes, plane, page.samples, target);
                }
            }
        }
    }
    return true;
}

template <class T>
void swap_first_and_third_of(std::uint8_t* bytes, std::size_t pixels, std::size_t channels) {
    auto* values = reinterpret_cast<T*>(bytes);
    for (std::size_t i = 0; i < pixels; ++i) std::swap(values[i * channels], values[i * channels + 2]);
}

// RGB(A) <-> BGR(A): the first and third samples of each of `pixels` pixels swapped in place.
void swap_first_and_third(std::uint8_t* bytes, std::size_t pixels, std::size_t channels, std::size_t value_bytes) {
    switch (value_bytes) {
        case 1: swap_first_and_third_of<std::uint8_t>(bytes, pixels, channels); break;
        case 2: swap_first_and_third_of<std::uint16_t>(bytes, pixels, channels); break;
        case 4: swap_first_and_third_of<std::uint32_t>(bytes, pixels, channels); break;
        default: swap_first_and_third_of<std::uint64_t>(bytes, pixels, channels); break;
    }
}

// Turns the samples of `pixels` pixels decoded at the start of `page_pixels` (a page, or a tile of
// one) into the image's pixels: grey inverted and widened, palette indices looked up, grey and
// alpha spread to BGRA, RGB swapped to BGR. The wider forms are filled from the last pixel back,
// so that no sample is overwritten unread.
void present_pixels(const PageLayout& page, std::uint8_t* page_pixels, std::size_t pixels) {
    const std::size_t value_bytes = dtype_size(page.dtype);
    switch (page.photometric) {
        case Photometric::Grey:
        case Photometric::InvertedGrey: {
            if (page.dtype == DType::UInt8 && (page.bits < 8 || page.photometric == Photometric::InvertedGrey)) {
                const unsigned largest = (1u << page.bits) - 1;
                const std::size_t values = pixels * page.samples;
                for (std::size_t i = 0; i < values; ++i) {
                    const bool grey_sample = page.samples == 1 || i % 2 == 0;
                    unsigned value = page_pixels[i];
                    if (grey_sample && page.photometric == Photometric::InvertedGrey) value = largest - std::min(value, largest);
                    page_pixels[i] = static_cast<std::uint8_t>(value * 255 / largest);
                }
            } else if (page.photometric == Photometric::InvertedGrey) {  // uint16 to uint64
                for (std::size_t i = 0; i < pixels * page.samples; i += page.samples) {
                    std::uint8_t* value = page_pixels + i * value_bytes;
                    for (std::size_t b = 0; b < value_bytes; ++b) value[b] = static_cast<std::uint8_t>(~value[b]);
                }
            }
            if (page.channels == 4) {  // grey, alpha -> grey, grey, grey, alpha
                for (std::size_t i = pixels; i-- > 0;) {
                    std::uint8_t stored[16];
                    std::memcpy(stored, page_pixels + i * 2 * value_bytes, 2 * value_bytes);
                    std::uint8_t* target = page_pixels + i * 4 * value_bytes;
                    for (int c = 0; c < 3; ++c) std::memcpy(target + c * value_bytes, stored, value_bytes);
                    std::memcpy(target + 3 * value_bytes, stored + value_bytes, value_bytes);
                }
            }
            return;
        }
        case Photometric::Palette: {
            // Colour maps hold 16-bit values; some writers store 8-bit ones (every entry below 256),
            // which libtiff's own RGBA reader takes as they are.
            const std::size_t entries = std::size_t{1} << page.bits;
            bool eight_bit_map = true;
            for (std::size_t e = 0; e < entries && eight_bit_map; ++e) {
                for (const std::uint16_t* map : page.colour_map) eight_bit_map = eight_bit_map && map[e] < 256;
            }
            const int shift = eight_bit_map ? 0 : 8;
            for (std::size_t i = pixels; i-- > 0;) {
                const std::size_t index = std::min<std::size_t>(page_pixels[i], entries - 1);
                std::uint8_t* target = page_pixels + i * 3;
                for (int c = 0; c < 3; ++c) target[c] = static_cast<std::uint8_t>(page.colour_map[2 - c][index] >> shift);
            }
            return;
        }
        case Photometric::Colour:
            swap_first_and_third(page_pixels, pixels, page.samples, value_bytes);
            return;
    }
}

// ---- OME-TIFF: the OME-XML in the first page's ImageDescription.

// The elements named `name` (any namespace prefix) in [from, to) of `xml`, each its text from
// '<' to '>'; at most `most`.
std::vector<std::string_view> xml_elements(std::string_view xml, std::string_view name, std::size_t most, std::size_t from = 0,
                                           std::size_t to = std::string_view::npos) {
    std::vector<std::string_view> found;
    to = std::min(to, xml.size());
    for (std::size_t at = xml.find('<', from); at < to && found.size() < most; at = xml.find('<', at + 1)) {
        std::size_t end = at + 1;
        while (end < xml.size() && (std::isalnum(static_cast<unsigned char>(xml[end])) || xml[end] == ':' || xml[end] == '_' || xml[end] == '-')) ++end;
        std::string_view tag = xml.substr(at + 1, end - at - 1);
        if (const std::size_t colon = tag.rfind(':'); colon != std::string_view::npos) tag.remove_prefix(colon + 1);
        if (tag != name) continue;
        const std::size_t close = xml.find('>', end);
        found.push_back(xml.substr(at, close == std::string_view::npos ? std::string_view::npos : close - at));
    }
    return found;
}

// The value of attribute `name` of an element's text, its character entities replaced.
std::optional<std::string> xml_attribute(std::string_view element, std::string_view name) {
    for (std::size_t from = 0;;) {
        const std::size_t found = element.find(name, from);
        if (found == std::string_view::npos) return std::nullopt;
        from = found + name.size();
        const bool whole_name = found > 0 && std::isspace(static_cast<unsigned char>(element[found - 1])) && element.substr(from).starts_with("=");
        if (!whole_name || from + 1 >= element.size()) continue;
        const char quote = element[from + 1];
        if (quote != '"' && quote != '\'') continue;
        const std::size_t close = element.find(quote, from + 2);
        if (close == std::string_view::npos) return std::nullopt;
        const std::string_view raw = element.substr(from + 2, close - from - 2);
        static const std::pair<std::string_view, char> kEntities[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
        std::string value;
        for (std::size_t i = 0; i < raw.size(); ++i) {
            bool replaced = false;
            for (const auto& [entity, c] : kEntities) {
                if (raw.substr(i).starts_with(entity)) {
                    value += c;
                    i += entity.size() - 1;
                    replaced = true;
                    break;
                }
            }
            if (!replaced) value += raw[i];
        }
        return value;
    }
}

// The value of attribute `name` of the first <Pixels> element of an OME-XML document.
std::optional<std::string> ome_pixels_attribute(std::string_view xml, std::string_view name) {
    const auto pixels = xml_elements(xml, "Pixels", 1);
    return pixels.empty() ? std::nullopt : xml_attribute(pixels.front(), name);
}

// Whether an ImageDescription holds OME-XML.
bool is_ome_xml(std::string_view text) { return text.find("<OME") != std::string_view::npos || text.find(":OME") != std::string_view::npos; }

// How an OME-TIFF's first image lays its planes over `pages` pages of `samples` interleaved samples
// (SizeZ, SizeC, SizeT, DimensionOrder and its channels' names), as "ome:" properties an OME-TIFF
// output writes back; none where the OME-XML does not describe these pages.
std::vector<std::pair<std::string, std::string>> ome_plane_properties(std::string_view xml, std::int64_t pages, std::int64_t samples) {
    const auto count = [&](std::string_view name) {
        std::int64_t value = 1;
        const auto text = ome_pixels_attribute(xml, name);
        if (text && (std::from_chars(text->data(), text->data() + text->size(), value).ec != std::errc() || value < 1 || value > (1 << 20))) value = 0;
        return value;
    };
    const std::int64_t z = count("SizeZ"), c = count("SizeC"), t = count("SizeT");
    const std::string order = ome_pixels_attribute(xml, "DimensionOrder").value_or("XYCZT");
    static const std::string_view kOrders[] = {"XYZCT", "XYZTC", "XYCTZ", "XYCZT", "XYTCZ", "XYTZC"};
    if (z == 0 || c == 0 || t == 0 || c % samples != 0 || z * (c / samples) * t != pages ||
        std::find(std::begin(kOrders), std::end(kOrders), order) == std::end(kOrders)) {
        return {};
    }
    std::vector<std::pair<std::string, std::string>> properties{
        {"ome:SizeZ", std::to_string(z)}, {"ome:SizeC", std::to_string(c)}, {"ome:SizeT", std::to_string(t)}, {"ome:DimensionOrder", order}};
    const std::size_t first_pixels = xml.find("Pixels");
    const std::size_t next_pixels = first_pixels == std::string_view::npos ? first_pixels : xml.find("<Pixels", first_pixels + 6);
    const auto channels = xml_elements(xml, "Channel", static_cast<std::size_t>(c / samples), first_pixels == std::string_view::npos ? 0 : first_pixels, next_pixels);
    for (std::size_t i = 0; i < channels.size(); ++i) {
        if (const auto name = xml_attribute(channels[i], "Name")) properties.emplace_back("ome:Channel:" + std::to_string(i) + ":Name", *name);
    }
    return properties;
}

// Millimetres per unit of OME's UnitsLength that a pixel size is given in.
std::optional<double> ome_millimetres_per(std::string_view unit) {
    static const std::pair<std::string_view, double> kUnits[] = {
        {"m", 1e3}, {"dm", 1e2}, {"cm", 1e1}, {"mm", 1.0}, {"\xC2\xB5m", 1e-3}, {"\xCE\xBCm", 1e-3}, {"um", 1e-3}, {"nm", 1e-6}, {"pm", 1e-9}, {"\xC3\x85", 1e-7}};
    for (const auto& [name, millimetres] : kUnits) {
        if (unit == name) return millimetres;
    }
    return std::nullopt;
}

// The pixel size an OME-TIFF's first image states (PhysicalSizeX/Y, micrometres unless a unit is
// given), as a 2-D geometry in millimetres; nullopt for a TIFF without OME-XML or without a size.
// A size that cannot be used (an unknown unit, not a positive number, an image of another size
// than the page) is left out with a warning.
std::optional<Geometry> ome_pixel_geometry(TIFF* tif, const PageLayout& page, std::vector<std::string>& warnings) {
    const char* description = nullptr;
    if (!TIFFGetField(tif, TIFFTAG_IMAGEDESCRIPTION, &description) || description == nullptr) return std::nullopt;
    const std::string_view xml(description);
    if (!is_ome_xml(xml)) return std::nullopt;
    const auto size_x = ome_pixels_attribute(xml, "PhysicalSizeX"), size_y = ome_pixels_attribute(xml, "PhysicalSizeY");
    if (!size_x && !size_y) return std::nullopt;
    const auto left_out = [&](const std::string& why) {
        warnings.push_back("its OME-XML pixel size is left out: " + why);
        return std::nullopt;
    };
    if (!size_x || !size_y) return left_out("it gives PhysicalSize" + std::string(size_x ? "X" : "Y") + " alone");
    const auto whole_number = [](const std::optional<std::string>& text) {
        std::int64_t value = -1;
        if (text) std::from_chars(text->data(), text->data() + text->size(), value);
        return value;
    };
    const std::int64_t width = whole_number(ome_pixels_attribute(xml, "SizeX")), height = whole_number(ome_pixels_attribute(xml, "SizeY"));
    if (width != page.width || height != page.height) {
        return left_out("it describes a " + std::to_string(width) + " x " + std::to_string(height) + " image, the page is " +
                        std::to_string(page.width) + " x " + std::to_string(page.height));
    }
    Geometry geometry = Geometry::identity(2);
    const std::pair<const std::optional<std::string>&, const char*> sizes[] = {{size_x, "X"}, {size_y, "Y"}};
    for (std::size_t axis = 0; axis < 2; ++axis) {
        const auto& [text, name] = sizes[axis];
        double value = 0;
        const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
        if (error != std::errc() || end != text->data() + text->size() || !std::isfinite(value) || value <= 0) {
            return left_out(std::string("PhysicalSize") + name + " is '" + *text + "', not a positive number");
        }
        const std::string unit = ome_pixels_attribute(xml, std::string("PhysicalSize") + name + "Unit").value_or("\xC2\xB5m");
        const auto millimetres = ome_millimetres_per(unit);
        if (!millimetres) return left_out("the unit '" + unit + "' is not a length gridwarp knows");
        geometry.spacing[axis] = value * *millimetres;
    }
    return geometry;
}

bool is_reduced_resolution(TIFF* tif) {
    std::uint32_t subfile_type = 0;
    return TIFFGetField(tif, TIFFTAG_SUBFILETYPE, &subfile_type) && (subfile_type & FILETYPE_REDUCEDIMAGE) != 0;
}

}  // namespace

bool has_tiff_signature(std::span<const std::uint8_t> head) {
    if (head.size() < 4) return false;
    const bool little = head[0] == 'I' && head[1] == 'I' && head[3] == 0 && (head[2] == 42 || head[2] == 43);
    const bool big = head[0] == 'M' && head[1] == 'M' && head[2] == 0 && (head[3] == 42 || head[3] == 43);
    return little || big;
}

std::optional<Image> read_tiff(const fs::path& file, const ReadOptions& options) {
    std::error_code size_error;
    const std::uint64_t file_size = fs::file_size(file, size_error);
    if (size_error) throw FileError(file, "cannot read its size: " + size_error.message());
    TiffReport report;
    OpenOptions open_options;
    set_handlers(open_options, report, options.memory.max_bytes);
    TiffHandle handle;
    // "m": read(2), not a mapping, so that a file cut short while it is read cannot raise SIGBUS.
    handle.tif = TIFFOpenExt(file.c_str(), "rm", open_options.options);
    const auto damaged = [&](const std::string& what) {
        return FileError(file, "cannot read the TIFF: " + what + (report.error.empty() ? "" : " (" + report.error + ")"));
    };
    if (!handle.tif) throw damaged("not a readable TIFF");
    TIFF* tif = handle.tif;

    // The pages: every directory but the reduced-resolution ones, each of the first page's image.
    std::vector<tdir_t> directories;
    std::optional<PageLayout> first;
    std::optional<Geometry> ome_geometry;
    std::vector<std::string> ome_warnings;
    std::string ome_xml;
    for (tdir_t directory = 0;; ++directory) {
        if (!is_reduced_resolution(tif)) {
            const std::size_t number = directories.size() + 1;
            const auto page = page_layout(tif);
            if (!page) {
                if (directories.empty()) return std::nullopt;
                throw FileError(file, "page " + std::to_string(number) + " is stored in a form that gridwarp reads only as a single page");
            }
            if (first && (!page->same_image_as(*first) || (!options.keep_orientation && std::max(page->orientation, 1) != std::max(first->orientation, 1)))) {
                throw FileError(file, "page " + std::to_string(number) + " is " + page->describe() + " (orientation " +
                                          std::to_string(page->orientation) + "), page 1 " + first->describe() + " (orientation " +
                                          std::to_string(first->orientation) + "): the pages of a TIFF are read as one stack");
            }
            check_chunks_inside(tif, file, file_size, directories.size());
            // A strip or tile is decoded whole into a buffer of its own: a header can declare any size.
            const std::uint64_t chunk_bytes = page->tiled ? TIFFTileSize64(tif) : TIFFStripSize64(tif);
            check_memory_budget(file, "a strip or tile of page " + std::to_string(directories.size() + 1), chunk_bytes, 1, options.memory);
            if (!first) {
                first = page;
                ome_geometry = ome_pixel_geometry(tif, *page, ome_warnings);
                const char* description = nullptr;
                if (TIFFGetField(tif, TIFFTAG_IMAGEDESCRIPTION, &description) && description != nullptr && is_ome_xml(description)) {
                    ome_xml = description;
                }
            }
            directories.push_back(directory);
        }
        report.error.clear();  // what libtiff said and then recovered from concerns no later call
        if (!TIFFReadDirectory(tif)) {
            if (!report.error.empty()) throw damaged("its directory after page " + std::to_string(directories.size()) + " is damaged");
            break;
        }
    }
    if (directories.empty()) throw FileError(file, "the TIFF holds only reduced-resolution images");

    const auto pages = static_cast<std::int64_t>(directories.size());
    // Each product is checked: 32-bit sizes, samples and pages together can pass 2^64.
    const std::string described = "a " + first->describe() + " TIFF of " + std::to_string(pages) + (pages == 1 ? " page" : " pages");
    const unsigned __int128 all_bytes = static_cast<unsigned __int128>(first->width) * first->height *
                                        static_cast<std::uint64_t>(first->channels) * static_cast<std::uint64_t>(pages) *
                                        dtype_size(first->dtype);
    if (all_bytes > (static_cast<unsigned __int128>(1) << 62)) throw FileError(file, described + " needs more memory than any machine can allocate");
    const std::uint64_t page_values = std::uint64_t{first->width} * first->height * static_cast<std::uint64_t>(first->channels);
    check_memory_budget(file, described, page_values * static_cast<std::uint64_t>(pages), dtype_size(first->dtype), options.memory);

    Image image = decoded_raster(first->dtype, first->height, first->width, first->channels, pages);
    image.exif_orientation = first->orientation;
    // An OME-TIFF's pixel size, for pages as they are stored (a turned page's axes differ), and its planes.
    if (options.keep_orientation || first->orientation <= 1) {
        image.geometry = ome_geometry;
        image.warnings = ome_warnings;
    }
    if (!ome_xml.empty()) image.properties = ome_plane_properties(ome_xml, pages, first->channels);
    auto* pixels = static_cast<std::uint8_t*>(image.pixels.data());
    const std::size_t page_bytes = page_values * dtype_size(first->dtype);
    // Read again from the first directory, in order: libtiff finds a directory by walking the chain.
    if (!TIFFSetDirectory(tif, 0)) throw damaged("cannot return to its first directory");
    tdir_t directory = 0;
    for (std::size_t p = 0; p < directories.size(); ++p) {
        for (; directory < directories[p]; ++directory) {
            if (!TIFFReadDirectory(tif)) throw damaged("cannot return to page " + std::to_string(p + 1));
        }
        const auto page = page_layout(tif);
        if (!page || !page->same_image_as(*first)) throw damaged("page " + std::to_string(p + 1) + " changed while it was read");
        report.error.clear();
        report.decoding = true;
        const bool decoded = decode_samples(tif, *page, pixels + page_bytes * p);
        report.decoding = false;
        const std::string whose = pages == 1 ? std::string("its") : "page " + std::to_string(p + 1) + "'s";
        if (!decoded) throw damaged(whose + " image data is truncated or corrupt");
        if (!report.decoding_warning.empty()) {
            throw FileError(file, "cannot read the TIFF: " + whose + " image data is damaged (libtiff: " + report.decoding_warning + ")");
        }
        present_pixels(*page, pixels + page_bytes * p, std::size_t{page->width} * page->height);
    }
    return image;
}

int read_tiff_orientation(const fs::path& file) {
    TiffReport report;
    OpenOptions open_options;
    set_handlers(open_options, report, std::uint64_t{1} << 26);
    TiffHandle handle;
    handle.tif = TIFFOpenExt(file.c_str(), "rm", open_options.options);
    if (!handle.tif) return 0;
    // A bounded walk: a directory chain can loop or run long, and a preview is rarely past the second.
    for (int directory = 0; directory < 64; ++directory) {
        if (!is_reduced_resolution(handle.tif)) {
            std::uint16_t orientation = 0;
            if (!TIFFGetField(handle.tif, TIFFTAG_ORIENTATION, &orientation)) return 0;
            return orientation >= 1 && orientation <= 8 ? orientation : 0;
        }
        if (!TIFFReadDirectory(handle.tif)) return 0;
    }
    return 0;
}

namespace {

// A TIFF being written, in memory: libtiff seeks back to link its directories, and the file is then
// written in one piece, its errors reported as every other output's.
struct MemoryFile {
    std::vector<std::uint8_t> bytes;
    std::uint64_t at = 0;
};

tmsize_t memory_read(thandle_t handle, void* out, tmsize_t size) {
    auto* file = static_cast<MemoryFile*>(handle);
    if (size < 0 || file->at >= file->bytes.size()) return 0;
    const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(size), file->bytes.size() - file->at);
    std::memcpy(out, file->bytes.data() + file->at, count);
    file->at += count;
    return static_cast<tmsize_t>(count);
}

tmsize_t memory_write(thandle_t handle, void* data, tmsize_t size) {
    auto* file = static_cast<MemoryFile*>(handle);
    if (size < 0) return -1;
    try {
        const auto end = file->at + static_cast<std::uint64_t>(size);
        if (end > file->bytes.size()) file->bytes.resize(end);
        std::memcpy(file->bytes.data() + file->at, data, static_cast<std::size_t>(size));
        file->at = end;
    } catch (const std::bad_alloc&) {
        return -1;
    }
    return size;
}

toff_t memory_seek(thandle_t handle, toff_t offset, int whence) {
    auto* file = static_cast<MemoryFile*>(handle);
    const std::uint64_t base = whence == SEEK_CUR ? file->at : whence == SEEK_END ? file->bytes.size() : 0;
    file->at = base + offset;
    return file->at;
}

int memory_close(thandle_t) { return 0; }
toff_t memory_size(thandle_t handle) { return static_cast<MemoryFile*>(handle)->bytes.size(); }
int memory_map(thandle_t, void**, toff_t*) { return 0; }
void memory_unmap(thandle_t, void*, toff_t) {}

std::optional<std::uint16_t> tiff_sample_format(DType type) {
    switch (type) {
        case DType::UInt8: case DType::UInt16: case DType::UInt32: case DType::UInt64: return SAMPLEFORMAT_UINT;
        case DType::Int8: case DType::Int16: case DType::Int32: case DType::Int64: return SAMPLEFORMAT_INT;
        case DType::Float32: case DType::Float64: return SAMPLEFORMAT_IEEEFP;
        default: return std::nullopt;
    }
}

constexpr std::size_t kStripBytes = std::size_t{256} << 10;

// The tags of a page's pixels every writer sets: size, samples, type, contiguous layout, grey or
// RGB, top-left orientation, and the extra sample of 2 and 4 channels (unassociated alpha for 4).
bool set_pixel_tags(TIFF* tif, std::uint32_t width, std::uint32_t height, std::uint16_t channels, std::size_t value_bytes,
                    std::uint16_t sample_format) {
    const std::uint16_t extra = channels == 2 ? EXTRASAMPLE_UNSPECIFIED : EXTRASAMPLE_UNASSALPHA;
    const bool set = TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, width) && TIFFSetField(tif, TIFFTAG_IMAGELENGTH, height) &&
                     TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, channels) &&
                     TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, static_cast<std::uint16_t>(value_bytes * 8)) &&
                     TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, sample_format) && TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG) &&
                     TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, channels >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK) &&
                     TIFFSetField(tif, TIFFTAG_ORIENTATION, ORIENTATION_TOPLEFT);
    return set && (channels % 2 == 1 || TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, 1, &extra));
}

// The shortest text that reads back as `value`.
std::string shortest(double value) {
    char text[32];
    const auto [end, error] = std::to_chars(text, text + sizeof text, value);
    return error == std::errc() ? std::string(text, end) : std::to_string(value);
}

std::string xml_escaped(std::string_view text) {
    std::string out;
    for (const char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

// The OME-XML of an OME-TIFF output (named .ome.tif or .ome.tiff), for its first page's
// ImageDescription: size, channels (interleaved samples of one plane), type, the pixel size in
// micrometres where the image has one, and a plane per page; "" for any other name.
std::string ome_xml_for(const fs::path& target, const Image& image, std::int64_t pages) {
    const std::string name = lowercase_filename(target.filename());
    const std::size_t suffix = name.ends_with(".ome.tif") ? 8 : name.ends_with(".ome.tiff") ? 9 : 0;
    if (suffix == 0) return {};
    const char* type = nullptr;
    switch (image.dtype()) {
        case DType::UInt8: type = "uint8"; break;
        case DType::Int8: type = "int8"; break;
        case DType::UInt16: type = "uint16"; break;
        case DType::Int16: type = "int16"; break;
        case DType::UInt32: type = "uint32"; break;
        case DType::Int32: type = "int32"; break;
        case DType::Float32: type = "float"; break;
        case DType::Float64: type = "double"; break;
        default:
            throw FileError(target, "an OME-TIFF cannot hold " + std::string(dtype_name(image.dtype())) + " pixels (write .tif, .npy or .nii)");
    }
    const std::string title = target.filename().string().substr(0, target.filename().string().size() - suffix);
    std::string physical;
    if (image.geometry && image.geometry->dimension() == 2) {
        physical = " PhysicalSizeX=\"" + shortest(image.geometry->spacing[0] * 1e3) + "\" PhysicalSizeXUnit=\"\xC2\xB5m\" PhysicalSizeY=\"" +
                   shortest(image.geometry->spacing[1] * 1e3) + "\" PhysicalSizeYUnit=\"\xC2\xB5m\"";
    }
    // The planes as the input's OME-XML laid them out, where they still fit the pages; else a plane per page along T.
    // (Only a TIFF's: another format's header fields could carry any key.)
    const bool from_tiff = image.format == "tif" || image.format == "tiff";
    const auto property = [&](std::string_view key) -> std::string {
        for (const auto& [name, value] : from_tiff ? image.properties : std::vector<std::pair<std::string, std::string>>{}) {
            if (name == key) return value;
        }
        return {};
    };
    std::string size_z = "1", size_c = std::to_string(image.channels), size_t_ = std::to_string(pages), order = "XYCZT";
    std::int64_t planes_c = 1;
    const auto count = [&](std::string_view key) {
        const std::string text = property(key);
        std::int64_t value = 0;
        if (std::from_chars(text.data(), text.data() + text.size(), value).ec != std::errc() || value < 1 || value > (1 << 20)) value = 0;
        return value;
    };
    if (const std::int64_t z = count("ome:SizeZ"), c = count("ome:SizeC"), t = count("ome:SizeT"); z > 0 && c > 0 && t > 0) {
        if (c % image.channels == 0 && z * (c / image.channels) * t == pages) {
            size_z = std::to_string(z), size_c = std::to_string(c), size_t_ = std::to_string(t), order = property("ome:DimensionOrder");
            planes_c = c / image.channels;
        }
    }
    std::string channel_elements;
    for (std::int64_t i = 0; i < planes_c; ++i) {
        const std::string name = property("ome:Channel:" + std::to_string(i) + ":Name");
        channel_elements += "<Channel ID=\"Channel:0:" + std::to_string(i) + "\"" + (name.empty() ? "" : " Name=\"" + xml_escaped(name) + "\"") +
                            " SamplesPerPixel=\"" + std::to_string(image.channels) + "\"><LightPath/></Channel>";
    }
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
           "<OME xmlns=\"http://www.openmicroscopy.org/Schemas/OME/2016-06\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
           "xsi:schemaLocation=\"http://www.openmicroscopy.org/Schemas/OME/2016-06 http://www.openmicroscopy.org/Schemas/OME/2016-06/ome.xsd\" "
           "Creator=\"gridwarp\">"
           "<Image ID=\"Image:0\" Name=\"" + xml_escaped(title) + "\">"
           "<Pixels ID=\"Pixels:0\" DimensionOrder=\"" + order + "\" Type=\"" + type + "\" SizeX=\"" + std::to_string(image.spatial[1]) +
           "\" SizeY=\"" + std::to_string(image.spatial[0]) + "\" SizeC=\"" + size_c + "\" SizeZ=\"" + size_z + "\" SizeT=\"" + size_t_ + "\"" +
           physical + ">" + channel_elements +
           "<TiffData IFD=\"0\" PlaneCount=\"" + std::to_string(pages) + "\"/>"
           "</Pixels></Image></OME>";
}

}  // namespace

void write_tiff(const StagedFile& staged, const Image& image) {
    const std::string extension = lowercase_filename(staged.target.extension());
    if (image.spatial.size() != 2) {
        throw FileError(staged.target, "a TIFF holds 2-D pages, got size " + image_size_text(image.spatial) + " (write .npy or a volume format)");
    }
    const auto sample_format = tiff_sample_format(image.dtype());
    if (!sample_format) {
        throw FileError(staged.target, "a " + extension + " staged.file cannot hold " + std::string(dtype_name(image.dtype())) +
                                    " pixels (write .npy or .nii for other types)");
    }
    if (image.channels < 1 || image.channels > 4) {
        throw FileError(staged.target, "image files hold 1 to 4 channels, got " + std::to_string(image.channels));
    }
    Tensor scratch;
    const auto* pixels = static_cast<const std::uint8_t*>(pixels_in_layout(image, ChannelLayout::Interleaved, scratch));
    const auto width = static_cast<std::uint32_t>(image.spatial[1]), height = static_cast<std::uint32_t>(image.spatial[0]);
    const auto channels = static_cast<std::uint16_t>(image.channels);
    const std::size_t value_bytes = dtype_size(image.dtype());
    const std::size_t row_bytes = std::size_t{width} * channels * value_bytes;
    const std::size_t page_bytes = row_bytes * height;
    const auto rows_per_strip = static_cast<std::uint32_t>(std::clamp<std::size_t>(kStripBytes / std::max<std::size_t>(row_bytes, 1), 1, height));

    TiffReport report;
    OpenOptions open_options;
    set_handlers(open_options, report, 0);
    MemoryFile memory;
    // Classic TIFF offsets are 32-bit; LZW can outgrow its input, so larger images go to BigTIFF.
    const bool big = page_bytes * static_cast<std::size_t>(image.batch) > (std::size_t{3} << 30);
    TiffHandle handle;
    handle.tif = TIFFClientOpenExt(staged.target.c_str(), big ? "w8" : "w", &memory, memory_read, memory_write, memory_seek, memory_close,
                                   memory_size, memory_map, memory_unmap, open_options.options);
    const auto failed = [&] { return FileError(staged.target, "cannot write the TIFF: " + (report.error.empty() ? "libtiff failed" : report.error)); };
    if (!handle.tif) throw failed();
    TIFF* tif = handle.tif;
    const bool colour = channels >= 3;
    std::vector<std::uint8_t> strip(row_bytes * rows_per_strip);
    const std::string ome_xml = ome_xml_for(staged.target, image, image.batch);
    for (std::int64_t page = 0; page < image.batch; ++page) {
        bool set = set_pixel_tags(tif, width, height, channels, value_bytes, *sample_format) &&
                   TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_LZW) &&
                   TIFFSetField(tif, TIFFTAG_PREDICTOR, *sample_format == SAMPLEFORMAT_IEEEFP ? PREDICTOR_NONE : PREDICTOR_HORIZONTAL) &&
                   TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, rows_per_strip);
        if (image.batch > 1) {
            set = set && TIFFSetField(tif, TIFFTAG_SUBFILETYPE, FILETYPE_PAGE) &&
                  TIFFSetField(tif, TIFFTAG_PAGENUMBER, static_cast<std::uint16_t>(std::min<std::int64_t>(page, 65535)),
                               static_cast<std::uint16_t>(std::min<std::int64_t>(image.batch, 65535)));
        }
        if (page == 0 && !ome_xml.empty()) set = set && TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, ome_xml.c_str());
        if (!set) throw failed();
        const std::uint8_t* page_pixels = pixels + page_bytes * static_cast<std::size_t>(page);
        for (std::uint32_t y = 0; y < height; y += rows_per_strip) {
            const std::uint32_t rows = std::min(rows_per_strip, height - y);
            const std::size_t bytes = row_bytes * rows;
            std::memcpy(strip.data(), page_pixels + row_bytes * y, bytes);
            if (colour) swap_first_and_third(strip.data(), bytes / (value_bytes * channels), channels, value_bytes);  // BGR(A) -> RGB(A)
            // libtiff differences and compresses the buffer it is given in place.
            if (TIFFWriteEncodedStrip(tif, TIFFComputeStrip(tif, y, 0), strip.data(), static_cast<tmsize_t>(bytes)) < 0) throw failed();
        }
        if (!TIFFWriteDirectory(tif)) throw failed();
    }
    TIFFClose(tif);
    handle.tif = nullptr;
    if (!report.error.empty()) throw failed();
    OutputFile out(staged);
    out.write(std::span<const std::uint8_t>(memory.bytes.data(), memory.bytes.size()));
    out.close();
}

namespace {

// An open handle on the page the tiles come from; a TIFF handle serves one thread at a time.
struct TilePageHandle {
    TiffReport report;
    OpenOptions options;
    TiffHandle handle;
};

class TiffTileSource final : public TileSource {
public:
    TiffTileSource(fs::path file, const PageLayout& page, std::uint64_t max_allocation, std::optional<Geometry> geometry,
                   std::vector<std::string> warnings, std::vector<std::pair<std::string, std::string>> properties)
        : file_(std::move(file)),
          page_(page),
          max_allocation_(max_allocation),
          geometry_(std::move(geometry)),
          warnings_(std::move(warnings)),
          properties_(std::move(properties)) {
        layout_.spatial = {page.height, page.width};
        layout_.tile = {page.chunk_height, page.chunk_width};
        layout_.channels = page.channels;
        layout_.dtype = page.dtype;
    }

    void adopt(std::unique_ptr<TilePageHandle> handle) const {
        const std::lock_guard lock(mutex_);
        idle_.push_back(std::move(handle));
    }

    Image describe() const override {
        Image image = raster_description(page_.dtype, page_.height, page_.width, page_.channels);
        image.format = "tiff";
        image.geometry = geometry_;
        image.warnings = warnings_;
        image.properties = properties_;
        return image;
    }

    void read_tile(const Shape& index, std::uint8_t* out) const override {
        std::unique_ptr<TilePageHandle> open = take_handle();
        const auto y0 = static_cast<std::uint32_t>(index[0] * layout_.tile[0]), x0 = static_cast<std::uint32_t>(index[1] * layout_.tile[1]);
        const auto tile_pixels = static_cast<std::size_t>(layout_.tile[0] * layout_.tile[1]);
        const std::string where = "tile at row " + std::to_string(y0) + ", column " + std::to_string(x0);
        if (page_.planar == PLANARCONFIG_SEPARATE) {
            // Each sample's plane decoded on its own, then set among the pixels' other samples.
            const std::size_t sample_bytes = page_.sample_bytes();
            std::vector<std::uint8_t> plane(tile_pixels * sample_bytes);
            for (std::uint16_t sample = 0; sample < page_.samples; ++sample) {
                decode_chunk(*open, x0, y0, sample, plane.data(), tile_pixels * sample_bytes, where);
                interleave_sample(plane.data(), tile_pixels, sample_bytes, sample, page_.samples, out);
            }
        } else {
            decode_chunk(*open, x0, y0, 0, out, tile_pixels * page_.samples * page_.sample_bytes(), where);
        }
        present_pixels(page_, out, tile_pixels);
        adopt(std::move(open));
    }

    // A handle on the page, its layout set up as page_layout sets it (JPEG's colour mode).
    std::unique_ptr<TilePageHandle> open_handle() const {
        auto open = std::make_unique<TilePageHandle>();
        set_handlers(open->options, open->report, max_allocation_);
        open->handle.tif = TIFFOpenExt(file_.c_str(), "rm", open->options.options);
        if (!open->handle.tif || !page_layout(open->handle.tif)) {
            throw FileError(file_, "cannot read the TIFF again" + (open->report.error.empty() ? "" : " (" + open->report.error + ")"));
        }
        return open;
    }

private:
    // Decodes the tile, or the strip, at (x0, y0) of `plane` into `out` (`tile_bytes`: the rows of a
    // strip past the page's bottom are zeros).
    void decode_chunk(TilePageHandle& open, std::uint32_t x0, std::uint32_t y0, std::uint16_t plane, std::uint8_t* out,
                      std::size_t tile_bytes, const std::string& where) const {
        TIFF* tif = open.handle.tif;
        open.report.error.clear();
        open.report.decoding_warning.clear();
        open.report.decoding = true;
        tmsize_t got = 0, need = 0;
        if (page_.tiled) {
            need = static_cast<tmsize_t>(tile_bytes);
            got = TIFFReadEncodedTile(tif, TIFFComputeTile(tif, x0, y0, 0, plane), out, need);
        } else {
            const std::uint32_t rows = std::min<std::uint32_t>(page_.chunk_height, page_.height - y0);
            need = static_cast<tmsize_t>(tile_bytes / page_.chunk_height * rows);
            got = TIFFReadEncodedStrip(tif, TIFFComputeStrip(tif, y0, plane), out, need);
            std::memset(out + need, 0, tile_bytes - static_cast<std::size_t>(need));
        }
        open.report.decoding = false;
        if (got < need) {
            throw FileError(file_, "cannot read the TIFF: its " + where + " is truncated or corrupt" +
                                       (open.report.error.empty() ? "" : " (" + open.report.error + ")"));
        }
        if (!open.report.decoding_warning.empty()) {
            throw FileError(file_, "cannot read the TIFF: its " + where + " is damaged (libtiff: " + open.report.decoding_warning + ")");
        }
    }

    std::unique_ptr<TilePageHandle> take_handle() const {
        {
            const std::lock_guard lock(mutex_);
            if (!idle_.empty()) {
                std::unique_ptr<TilePageHandle> open = std::move(idle_.back());
                idle_.pop_back();
                return open;
            }
        }
        return open_handle();
    }

    fs::path file_;
    PageLayout page_;
    std::uint64_t max_allocation_;
    std::optional<Geometry> geometry_;
    std::vector<std::string> warnings_;
    std::vector<std::pair<std::string, std::string>> properties_;
    mutable std::mutex mutex_;
    mutable std::vector<std::unique_ptr<TilePageHandle>> idle_;
};

// Strips larger than this are no tiles: such a file is read whole.
constexpr std::uint64_t kLargestTileBytes = std::uint64_t{64} << 20;

}  // namespace

std::unique_ptr<TileSource> open_tiff_tiles(const fs::path& file, const ReadOptions& options) {
    std::error_code size_error;
    const std::uint64_t file_size = fs::file_size(file, size_error);
    if (size_error) return nullptr;
    auto first = std::make_unique<TilePageHandle>();
    set_handlers(first->options, first->report, options.memory.max_bytes);
    first->handle.tif = TIFFOpenExt(file.c_str(), "rm", first->options.options);
    if (!first->handle.tif) return nullptr;
    TIFF* tif = first->handle.tif;
    if (is_reduced_resolution(tif)) return nullptr;
    const auto page = page_layout(tif);
    // The forms read_tiff gives as decoded, sample for sample: bytes and wider, one page; samples
    // together or in planes (not JPEG's YCbCr, which libtiff turns into RGB only when together).
    std::uint16_t photometric = 0;
    TIFFGetFieldDefaulted(tif, TIFFTAG_PHOTOMETRIC, &photometric);
    if (!page || page->bits < 8) return nullptr;
    if (page->planar != PLANARCONFIG_CONTIG && (page->planar != PLANARCONFIG_SEPARATE || photometric == PHOTOMETRIC_YCBCR)) return nullptr;
    if (!options.keep_orientation && page->orientation > 1) return nullptr;
    const std::uint64_t chunk_bytes = page->tiled ? TIFFTileSize64(tif) : TIFFStripSize64(tif);
    const std::uint64_t tile_bytes = std::uint64_t{page->chunk_width} * page->chunk_height * static_cast<std::uint64_t>(page->channels) *
                                     dtype_size(page->dtype);
    if (chunk_bytes == 0 || chunk_bytes > kLargestTileBytes || tile_bytes > kLargestTileBytes) return nullptr;
    check_chunks_inside(tif, file, file_size, 0);
    std::vector<std::string> warnings;
    std::optional<Geometry> geometry = ome_pixel_geometry(tif, *page, warnings);
    std::vector<std::pair<std::string, std::string>> properties;
    const char* description = nullptr;
    if (TIFFGetField(tif, TIFFTAG_IMAGEDESCRIPTION, &description) && description != nullptr && is_ome_xml(description)) {
        properties = ome_plane_properties(description, 1, page->channels);
    }
    // A second page makes the file a stack, which is read whole.
    for (tdir_t directory = 1; directory < 64; ++directory) {
        if (!TIFFReadDirectory(tif)) break;
        if (!is_reduced_resolution(tif)) return nullptr;
    }
    if (!TIFFSetDirectory(tif, 0) || !page_layout(tif)) return nullptr;
    auto source = std::make_unique<TiffTileSource>(file, *page, options.memory.max_bytes, std::move(geometry), std::move(warnings),
                                                   std::move(properties));
    source->adopt(std::move(first));
    return source;
}

namespace {

// libdeflate's zlib stream, as TIFF's Adobe Deflate compression stores a tile.
struct TileCompressor {
    libdeflate_compressor* compressor = nullptr;
    explicit TileCompressor(int level) : compressor(libdeflate_alloc_compressor(level)) {
        if (!compressor) throw std::bad_alloc();
    }
    ~TileCompressor() { libdeflate_free_compressor(compressor); }
    TileCompressor(const TileCompressor&) = delete;
    TileCompressor& operator=(const TileCompressor&) = delete;
};

// Horizontal differencing (TIFF predictor 2) of integer samples, row by row, in place.
template <class T>
void difference_rows(std::uint8_t* bytes, std::size_t rows, std::size_t row_values, std::size_t channels) {
    auto* values = reinterpret_cast<T*>(bytes);
    for (std::size_t r = 0; r < rows; ++r) {
        T* row = values + r * row_values;
        for (std::size_t i = row_values; i-- > channels;) row[i] = static_cast<T>(row[i] - row[i - channels]);
    }
}

void difference_tile(DType dtype, std::uint8_t* bytes, std::size_t rows, std::size_t row_values, std::size_t channels) {
    switch (dtype_size(dtype)) {
        case 1: difference_rows<std::uint8_t>(bytes, rows, row_values, channels); break;
        case 2: difference_rows<std::uint16_t>(bytes, rows, row_values, channels); break;
        case 4: difference_rows<std::uint32_t>(bytes, rows, row_values, channels); break;
        default: difference_rows<std::uint64_t>(bytes, rows, row_values, channels); break;
    }
}

constexpr std::uint32_t kWrittenTileSide = 512;
constexpr int kDefaultTileLevel = 4;

// One level of a tiled page: its size and its tiles' grid.
struct TiledLevel {
    std::uint32_t width = 0, height = 0;
    std::int64_t columns = 0, rows = 0;
    explicit TiledLevel(std::uint32_t w, std::uint32_t h)
        : width(w), height(h), columns((w + kWrittenTileSide - 1) / kWrittenTileSide), rows((h + kWrittenTileSide - 1) / kWrittenTileSide) {}
};

// The full page and the halved levels asked for (--pyramid: until a level fits in one tile; a
// count: that many, fewer where the page runs out of pixels to halve first).
std::vector<TiledLevel> tiled_levels(std::uint32_t width, std::uint32_t height, int pyramid_levels) {
    std::vector<TiledLevel> levels{TiledLevel(width, height)};
    for (int made = 0; pyramid_levels < 0 ? levels.back().columns * levels.back().rows > 1 : made < pyramid_levels; ++made) {
        const TiledLevel& last = levels.back();
        if (last.width == 1 && last.height == 1) break;
        levels.emplace_back((last.width + 1) / 2, (last.height + 1) / 2);
    }
    return levels;
}

// The reduced levels of a tiled page, made as its tiles are: a tile of level l + 1 holds the 2x2
// means of the four tiles of level l under it, made once they are in, encoded at once and kept in
// a spill file (a level of a large page does not fit in memory), from which the levels' SubIFDs
// are copied in order once the page is written.
class TiffPyramid {
public:
    using Encode = std::function<std::span<const std::uint8_t>(std::uint8_t* tile)>;

    TiffPyramid(std::vector<TiledLevel> levels, DType dtype, std::uint16_t channels, const fs::path& spill, const fs::path& target)
        : levels_(std::move(levels)), dtype_(dtype), channels_(channels), target_(target), tiles_(levels_.size()) {
        for (std::size_t l = 1; l < levels_.size(); ++l) tiles_[l].resize(static_cast<std::size_t>(levels_[l].columns * levels_[l].rows));
        if (levels_.size() > 1) {
            spill_ = ::open(spill.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (spill_ < 0) throw FileError(target_, "cannot create the pyramid's spill file: " + std::string(std::strerror(errno)));
            ::unlink(spill.c_str());  // kept open: gone with the process whatever happens
        }
    }
    ~TiffPyramid() {
        if (spill_ >= 0) ::close(spill_);
    }
    TiffPyramid(const TiffPyramid&) = delete;
    TiffPyramid& operator=(const TiffPyramid&) = delete;

    std::size_t reduced_levels() const { return levels_.size() - 1; }

    // Tile (row, column) of `level`, finished (side x side, channels interleaved, zero past the
    // level's edges), into its quarter of the tile above; `encode` (the calling thread's) encodes a
    // tile of a reduced level in place.
    void add(std::size_t level, std::int64_t row, std::int64_t column, const std::uint8_t* tile, const Encode& encode) {
        if (level + 1 >= levels_.size()) return;
        const TiledLevel& from = levels_[level];
        const TiledLevel& to = levels_[level + 1];
        const std::int64_t side = kWrittenTileSide;
        const std::int64_t parent_row = row / 2, parent_column = column / 2, parent = parent_row * to.columns + parent_column;
        const std::int64_t parts = (std::min<std::int64_t>(2 * parent_row + 2, from.rows) - 2 * parent_row) *
                                   (std::min<std::int64_t>(2 * parent_column + 2, from.columns) - 2 * parent_column);
        std::shared_ptr<Pending> pending;
        {
            const std::lock_guard lock(mutex_);
            auto& slot = pending_[{level + 1, parent}];
            if (!slot) slot = std::make_shared<Pending>(Pending{std::vector<std::uint8_t>(tile_bytes(), 0), 0});
            pending = slot;
        }
        HalvedBlock block;
        block.in[1] = std::min<std::int64_t>(side, from.height - row * side);
        block.in[2] = std::min<std::int64_t>(side, from.width - column * side);
        block.in_chunk[1] = block.out_chunk[1] = side;
        block.in_chunk[2] = block.out_chunk[2] = side;
        block.step[1] = from.height == 1 ? 1 : 2;
        block.step[2] = from.width == 1 ? 1 : 2;
        block.offset[1] = block.step[1] == 2 ? (row % 2) * (side / 2) : 0;
        block.offset[2] = block.step[2] == 2 ? (column % 2) * (side / 2) : 0;
        visit_dtype(dtype_, [&](auto tag) {
            using T = typename decltype(tag)::type;
            if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, float16>) {
                halve_block<T>(block, channels_, reinterpret_cast<const T*>(tile), reinterpret_cast<T*>(pending->pixels.data()));
            }
        });
        {
            const std::lock_guard lock(mutex_);
            if (++pending->parts < parts) return;
            pending_.erase({level + 1, parent});
        }
        add(level + 1, parent_row, parent_column, pending->pixels.data(), encode);
        const std::span<const std::uint8_t> encoded = encode(pending->pixels.data());
        const std::lock_guard lock(spill_mutex_);
        write_spill(encoded);
        tiles_[level + 1][static_cast<std::size_t>(parent)] = {spill_end_, encoded.size()};
        spill_end_ += encoded.size();
    }

    // The reduced levels as SubIFDs of the page just written (`tags` sets a level's tags).
    void write_levels(TIFF* tif, const std::function<bool(const TiledLevel&)>& tags, const std::function<FileError()>& failed) const {
        std::vector<std::uint8_t> bytes;
        for (std::size_t l = 1; l < levels_.size(); ++l) {
            if (!tags(levels_[l]) || !TIFFSetField(tif, TIFFTAG_SUBFILETYPE, FILETYPE_REDUCEDIMAGE)) throw failed();
            for (std::size_t t = 0; t < tiles_[l].size(); ++t) {
                const auto [offset, size] = tiles_[l][t];
                if (size == 0) throw std::logic_error("a tile of a TIFF pyramid level was never made");
                bytes.resize(size);
                if (::pread(spill_, bytes.data(), size, static_cast<off_t>(offset)) != static_cast<ssize_t>(size)) {
                    throw FileError(target_, "cannot read the pyramid's spill file back: " + std::string(std::strerror(errno)));
                }
                if (TIFFWriteRawTile(tif, static_cast<std::uint32_t>(t), bytes.data(), static_cast<tmsize_t>(size)) < 0) throw failed();
            }
            if (!TIFFWriteDirectory(tif)) throw failed();
        }
    }

private:
    struct Pending {
        std::vector<std::uint8_t> pixels;
        std::int64_t parts = 0;
    };

    std::size_t tile_bytes() const { return std::size_t{kWrittenTileSide} * kWrittenTileSide * channels_ * dtype_size(dtype_); }

    void write_spill(std::span<const std::uint8_t> bytes) {
        std::size_t done = 0;
        while (done < bytes.size()) {
            const ssize_t wrote = ::pwrite(spill_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(spill_end_ + done));
            if (wrote <= 0) throw FileError(target_, "cannot write the pyramid's spill file: " + std::string(std::strerror(errno)));
            done += static_cast<std::size_t>(wrote);
        }
    }

    std::vector<TiledLevel> levels_;
    DType dtype_;
    std::uint16_t channels_;
    fs::path target_;
    int spill_ = -1;
    std::uint64_t spill_end_ = 0;
    std::vector<std::vector<std::pair<std::uint64_t, std::size_t>>> tiles_;  // per level: each tile's place in the spill
    std::mutex mutex_, spill_mutex_;
    std::map<std::pair<std::size_t, std::int64_t>, std::shared_ptr<Pending>> pending_;
};

}  // namespace

void write_tiff_tiles(const StagedFile& staged, const Image& description, const WriteOptions& options, int threads,
                      const TileProducer& produce, const std::function<void(std::int64_t, std::int64_t)>& done, const TileShare&) {
    const std::string extension = lowercase_filename(staged.target.extension());
    if (description.spatial.size() != 2 || description.batch != 1) {
        throw FileError(staged.target, std::string(options.pyramid_levels != 0 ? "a TIFF pyramid" : "a TIFF written by tiles") +
                                           " holds one 2-D page, got size " + image_size_text(description.spatial));
    }
    const DType dtype = description.dtype();
    const auto sample_format = tiff_sample_format(dtype);
    if (!sample_format) {
        throw FileError(staged.target, "a " + extension + " file cannot hold " + std::string(dtype_name(dtype)) +
                                           " pixels (write .npy or .nii for other types)");
    }
    if (description.channels < 1 || description.channels > 4) {
        throw FileError(staged.target, "image files hold 1 to 4 channels, got " + std::to_string(description.channels));
    }
    const auto width = static_cast<std::uint32_t>(description.spatial[1]), height = static_cast<std::uint32_t>(description.spatial[0]);
    const auto channels = static_cast<std::uint16_t>(description.channels);
    const std::size_t value_bytes = dtype_size(dtype);
    const std::uint32_t side = kWrittenTileSide;
    const std::size_t tile_row_values = std::size_t{side} * channels;
    const std::size_t tile_bytes = tile_row_values * side * value_bytes;
    const int level = options.compression_level < 0 ? kDefaultTileLevel : std::min(options.compression_level, 12);
    const bool compressed = level > 0;
    const bool integers = *sample_format != SAMPLEFORMAT_IEEEFP;
    TiffPyramid pyramid(tiled_levels(width, height, options.pyramid_levels), dtype, channels,
                        staged.file.parent_path() / (staged.file.filename().string() + ".levels"), staged.target);
    std::uint64_t all_bytes = 0;
    for (std::uint32_t w = width, h = height, l = 0; l <= pyramid.reduced_levels(); ++l, w = (w + 1) / 2, h = (h + 1) / 2) {
        all_bytes += std::uint64_t{w} * h * channels * value_bytes;
    }

    TiffReport report;
    OpenOptions open_options;
    set_handlers(open_options, report, 0);
    TiffHandle handle;
    const bool big = all_bytes > (std::uint64_t{3} << 30);
    handle.tif = TIFFOpenExt(staged.file.c_str(), big ? "w8" : "w", open_options.options);
    const auto failed = [&] { return FileError(staged.target, "cannot write the TIFF: " + (report.error.empty() ? "libtiff failed" : report.error)); };
    if (!handle.tif) throw failed();
    TIFF* tif = handle.tif;
    const bool colour = channels >= 3;
    const auto set_level_tags = [&](const TiledLevel& at) {
        bool set = set_pixel_tags(tif, at.width, at.height, channels, value_bytes, *sample_format) &&
                   TIFFSetField(tif, TIFFTAG_COMPRESSION, compressed ? COMPRESSION_ADOBE_DEFLATE : COMPRESSION_NONE) &&
                   TIFFSetField(tif, TIFFTAG_TILEWIDTH, side) && TIFFSetField(tif, TIFFTAG_TILELENGTH, side);
        if (compressed) set = set && TIFFSetField(tif, TIFFTAG_PREDICTOR, integers ? PREDICTOR_HORIZONTAL : PREDICTOR_NONE);
        return set;
    };
    const std::string ome_xml = ome_xml_for(staged.target, description, 1);
    if (!set_level_tags(TiledLevel(width, height)) || (!ome_xml.empty() && !TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, ome_xml.c_str()))) {
        throw failed();
    }
    // The reduced levels go into SubIFDs of the page (as OME-TIFF and GDAL keep a pyramid): libtiff
    // links the directories written after the page to it and fills in their offsets.
    std::vector<toff_t> subifd_offsets(pyramid.reduced_levels(), 0);
    if (!subifd_offsets.empty() && !TIFFSetField(tif, TIFFTAG_SUBIFD, static_cast<std::uint16_t>(subifd_offsets.size()), subifd_offsets.data())) {
        throw failed();
    }

    const std::int64_t tile_columns = (width + side - 1) / side, tile_rows = (height + side - 1) / side;
    const std::vector<std::int64_t> order = tiles_in_z_order(Shape{tile_rows, tile_columns});
    const auto tiles = static_cast<std::int64_t>(order.size());
    // Tiles are written in the order taken whatever order they finish in, so that the file's bytes do not
    // depend on the threads; a thread ahead of the writer by more than a few tiles per thread waits.
    const int workers = std::max(1, std::min<int>(threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()),
                                                  static_cast<int>(std::min<std::int64_t>(tiles, 256))));
    const std::int64_t most_ahead = 4 * static_cast<std::int64_t>(workers);
    std::mutex mutex;
    std::condition_variable progressed;
    std::map<std::int64_t, std::vector<std::uint8_t>> finished;
    std::int64_t next_tile = 0, next_written = 0;
    std::exception_ptr error;
    const auto work = [&] {
        try {
            TileCompressor compressor(std::max(level, 1));
            std::vector<std::uint8_t> encoded_buffer;
            // A finished tile as stored, in place: BGR(A) -> RGB(A), differenced, deflated.
            const TiffPyramid::Encode encode = [&](std::uint8_t* tile) -> std::span<const std::uint8_t> {
                if (colour) swap_first_and_third(tile, tile_bytes / (value_bytes * channels), channels, value_bytes);
                if (!compressed) return {tile, tile_bytes};
                if (integers) difference_tile(dtype, tile, side, tile_row_values, channels);
                encoded_buffer.resize(libdeflate_zlib_compress_bound(compressor.compressor, tile_bytes));
                const std::size_t size = libdeflate_zlib_compress(compressor.compressor, tile, tile_bytes, encoded_buffer.data(), encoded_buffer.size());
                if (size == 0) throw std::runtime_error("deflate failed");
                return {encoded_buffer.data(), size};
            };
            std::vector<std::uint8_t> buffer(tile_bytes);
            for (;;) {
                std::int64_t index = 0;
                {
                    std::unique_lock lock(mutex);
                    progressed.wait(lock, [&] { return error || next_tile >= tiles || next_tile < next_written + most_ahead; });
                    if (error || next_tile >= tiles) return;
                    index = next_tile++;
                }
                const std::int64_t tile = order[static_cast<std::size_t>(index)];
                const std::int64_t y = tile / tile_columns * side, x = tile % tile_columns * side;
                const std::int64_t rows = std::min<std::int64_t>(side, height - y), columns = std::min<std::int64_t>(side, width - x);
                if (rows < side || columns < side) std::fill(buffer.begin(), buffer.end(), std::uint8_t{0});  // past the edge: zero
                const TensorView pixels(dtype, buffer.data(), Shape{1, channels, rows, columns},
                                        Shape{static_cast<std::int64_t>(tile_row_values) * rows, 1, static_cast<std::int64_t>(tile_row_values), channels});
                produce(Shape{y, x}, pixels);
                pyramid.add(0, tile / tile_columns, tile % tile_columns, buffer.data(), encode);
                const std::span<const std::uint8_t> bytes = encode(buffer.data());
                std::vector<std::uint8_t> encoded(bytes.begin(), bytes.end());
                std::unique_lock lock(mutex);
                finished.emplace(index, std::move(encoded));
                while (!finished.empty() && finished.begin()->first == next_written) {
                    std::vector<std::uint8_t>& written = finished.begin()->second;
                    if (TIFFWriteRawTile(tif, static_cast<std::uint32_t>(order[static_cast<std::size_t>(next_written)]), written.data(),
                                         static_cast<tmsize_t>(written.size())) < 0) {
                        throw failed();
                    }
                    finished.erase(finished.begin());
                    ++next_written;
                    if (done) done(next_written, tiles);
                }
                progressed.notify_all();
            }
        } catch (...) {
            const std::lock_guard lock(mutex);
            if (!error) error = std::current_exception();
            progressed.notify_all();
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < workers; ++t) pool.emplace_back(work);
    work();
    for (auto& thread : pool) thread.join();
    if (error) std::rethrow_exception(error);
    if (!TIFFWriteDirectory(tif)) throw failed();
    pyramid.write_levels(tif, set_level_tags, failed);
    TIFFClose(tif);
    handle.tif = nullptr;
    if (!report.error.empty()) throw failed();
}

}  // namespace gridwarp::io::detail
