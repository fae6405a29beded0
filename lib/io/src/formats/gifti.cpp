#include "formats/gifti.hpp"

#include <libdeflate.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <limits>
#include <optional>
#include <ostream>
#include <span>
#include <string_view>
#include <vector>

#include "formats/gzip.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace gifti {

// GIFTI nests four elements deep (GIFTI, DataArray, MetaData, MD); a document much deeper is not
// one, and the scanner's stack of open elements stays small.
constexpr std::size_t kMaxDepth = 64;
// A DataArray has about ten attributes; the limit bounds the duplicate check, which is quadratic.
constexpr std::size_t kMaxAttributes = 64;
constexpr std::size_t kCoordinatesPerPoint = 3;
// zlib's default, which nibabel, FreeSurfer and Workbench write with; libdeflate's level 6 is its match.
constexpr int kZlibCompressionLevel = 6;

struct Attribute {
    std::string_view name;
    std::string_view value;
};

struct DataArrayElement {
    std::size_t index = 0;  // 0-based, in document order, as nibabel's darrays number them
    std::size_t tag_offset = 0;
    std::vector<Attribute> attributes;
    bool has_data = false;
    std::size_t data_begin = 0;  // the <Data> element's content: document[data_begin, data_end)
    std::size_t data_end = 0;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == ':' ||
           static_cast<unsigned char>(c) >= 0x80;
}

std::string_view trimmed(std::string_view text) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return text;
}

// The error messages' line numbers, counted only when an error is raised.
std::size_t line_at(std::string_view document, std::size_t offset) {
    return 1 + static_cast<std::size_t>(std::count(document.begin(), document.begin() + static_cast<std::ptrdiff_t>(std::min(offset, document.size())), '\n'));
}

// A well-formedness scan of the subset of XML that GIFTI files use (declarations, a DOCTYPE,
// comments, CDATA in metadata, elements with attributes, text), which records every top-level
// DataArray's attributes and where its <Data> text lies.
class Scanner {
public:
    Scanner(std::string_view document, const fs::path& file) : document_(document), file_(file) {}

    std::vector<DataArrayElement> data_arrays() {
        std::vector<std::string_view> open;  // the elements open, from the root down
        std::vector<DataArrayElement> arrays;
        bool root_seen = false;
        bool in_data = false;  // inside the last DataArray's <Data>
        std::size_t at = document_.starts_with("\xEF\xBB\xBF") ? 3 : 0;
        while (true) {
            const std::size_t tag = document_.find('<', at);
            const std::string_view text = document_.substr(at, (tag == std::string_view::npos ? document_.size() : tag) - at);
            if (open.empty() && !trimmed(text).empty()) fail(at, "text outside the <GIFTI> element");
            if (tag == std::string_view::npos) break;
            const std::string_view rest = document_.substr(tag);
            if (in_data && !rest.starts_with("</")) {
                fail(tag, "the <Data> of DataArray " + std::to_string(arrays.back().index) + " holds markup; expected only its encoded values");
            }
            if (rest.starts_with("<?")) {
                at = past(tag, "?>", "a processing instruction is not closed");
            } else if (rest.starts_with("<!--")) {
                at = past(tag, "-->", "a comment is not closed");
            } else if (rest.starts_with("<![CDATA[")) {
                if (open.empty()) fail(tag, "a CDATA section outside the <GIFTI> element");
                at = past(tag, "]]>", "a CDATA section is not closed");
            } else if (rest.starts_with("<!")) {
                if (root_seen) fail(tag, "a declaration inside the document");
                at = past_declaration(tag);
            } else if (rest.starts_with("</")) {
                std::size_t end = tag + 2;
                const std::string_view name = read_name(end);
                while (end < document_.size() && is_space(document_[end])) ++end;
                if (name.empty() || end >= document_.size() || document_[end] != '>') fail(tag, "a malformed end tag");
                if (open.empty() || open.back() != name) {
                    fail(tag, "</" + std::string(name) + "> where " + (open.empty() ? std::string("no element is open") : "</" + std::string(open.back()) + "> was expected"));
                }
                if (in_data) {
                    arrays.back().data_end = tag;
                    in_data = false;
                }
                open.pop_back();
                at = end + 1;
            } else {
                bool self_closing = false;
                std::vector<Attribute> attributes;
                std::size_t end = tag + 1;
                const std::string_view name = read_start_tag(end, attributes, self_closing);
                if (open.empty()) {
                    if (root_seen) fail(tag, "a second root element <" + std::string(name) + "> after <GIFTI>");
                    if (name != "GIFTI") fail(tag, "not a GIFTI file: the root element is <" + std::string(name) + ">, expected <GIFTI>");
                    root_seen = true;
                } else if (name == "DataArray" && open.size() == 1) {
                    arrays.push_back({arrays.size(), tag, std::move(attributes), false, 0, 0});
                } else if (name == "Data" && open.size() == 2 && open.back() == "DataArray") {
                    DataArrayElement& array = arrays.back();
                    if (array.has_data) fail(tag, "DataArray " + std::to_string(array.index) + " has a second <Data>");
                    array.has_data = true;
                    array.data_begin = array.data_end = end;
                    in_data = !self_closing;
                }
                if (!self_closing) {
                    if (open.size() == kMaxDepth) fail(tag, "elements nest more than " + std::to_string(kMaxDepth) + " deep");
                    open.push_back(name);
                }
                at = end;
            }
        }
        if (!root_seen) fail(document_.size(), "not a GIFTI file: no <GIFTI> element");
        if (!open.empty()) fail(document_.size(), "the document ends inside <" + std::string(open.back()) + ">: the file is truncated");
        return arrays;
    }

    [[noreturn]] void fail(std::size_t offset, const std::string& problem) const {
        throw FileError(file_, "line " + std::to_string(line_at(document_, offset)) + ": " + problem);
    }

private:
    std::size_t past(std::size_t from, std::string_view terminator, const char* problem) const {
        const std::size_t end = document_.find(terminator, from + 2);
        if (end == std::string_view::npos) fail(from, problem);
        return end + terminator.size();
    }

    // <!DOCTYPE ...>, with an internal subset in brackets and quoted literals that may hold '>'.
    std::size_t past_declaration(std::size_t from) const {
        int brackets = 0;
        for (std::size_t at = from + 2; at < document_.size(); ++at) {
            const char c = document_[at];
            if (c == '"' || c == '\'') {
                at = document_.find(c, at + 1);
                if (at == std::string_view::npos) break;
            } else if (c == '[') {
                ++brackets;
            } else if (c == ']') {
                --brackets;
            } else if (c == '>' && brackets <= 0) {
                return at + 1;
            }
        }
        fail(from, "a declaration is not closed");
    }

    std::string_view read_name(std::size_t& at) const {
        const std::size_t begin = at;
        while (at < document_.size() && is_name_char(document_[at])) ++at;
        return document_.substr(begin, at - begin);
    }

    // The tag from `at` (just past its '<') to its '>', which `at` is left past.
    std::string_view read_start_tag(std::size_t& at, std::vector<Attribute>& attributes, bool& self_closing) const {
        const std::size_t tag = at - 1;
        const std::string_view name = read_name(at);
        if (name.empty()) fail(tag, "a '<' that starts no tag");
        while (true) {
            const std::size_t before_space = at;
            while (at < document_.size() && is_space(document_[at])) ++at;
            const bool spaced = at > before_space;
            if (at >= document_.size()) fail(tag, "the tag <" + std::string(name) + "> is not closed");
            if (document_[at] == '>') {
                ++at;
                return name;
            }
            if (document_.substr(at).starts_with("/>")) {
                at += 2;
                self_closing = true;
                return name;
            }
            const std::string_view attribute = read_name(at);
            if (attribute.empty() || !spaced) fail(tag, "a malformed attribute in <" + std::string(name) + ">");
            while (at < document_.size() && is_space(document_[at])) ++at;
            if (at >= document_.size() || document_[at] != '=') fail(tag, "attribute " + std::string(attribute) + " of <" + std::string(name) + "> has no value");
            ++at;
            while (at < document_.size() && is_space(document_[at])) ++at;
            if (at >= document_.size() || (document_[at] != '"' && document_[at] != '\'')) {
                fail(tag, "attribute " + std::string(attribute) + " of <" + std::string(name) + "> has no quoted value");
            }
            const std::size_t close = document_.find(document_[at], at + 1);
            if (close == std::string_view::npos) fail(tag, "attribute " + std::string(attribute) + " of <" + std::string(name) + ">: its quote is not closed");
            if (attributes.size() == kMaxAttributes) fail(tag, "<" + std::string(name) + "> has more than " + std::to_string(kMaxAttributes) + " attributes");
            for (const Attribute& earlier : attributes) {
                if (earlier.name == attribute) fail(tag, "<" + std::string(name) + "> has two " + std::string(attribute) + " attributes");
            }
            attributes.push_back({attribute, document_.substr(at + 1, close - at - 1)});
            at = close + 1;
        }
    }

    std::string_view document_;
    const fs::path& file_;
};

// What is wrong with base64 text (white space skipped, '=' padding only at its end), or nullptr
// with `decoded_size` set.
const char* base64_problem(std::string_view text, std::size_t& decoded_size) {
    std::size_t symbols = 0, padding = 0;
    for (const char c : text) {
        if (is_space(c)) continue;
        if (c == '=') {
            ++padding;
        } else if (padding > 0) {
            return "the base64 data continue after their '=' padding";
        } else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/')) {
            return "the base64 data hold a character that is not base64";
        }
        ++symbols;
    }
    if (symbols % 4 != 0 || padding > 2) return "the base64 data are not whole groups of four characters (truncated?)";
    decoded_size = symbols / 4 * 3 - padding;
    return nullptr;
}

// Decodes text that base64_decoded_size accepted into `out`, which holds exactly that many bytes.
void decode_base64(std::string_view text, std::span<std::uint8_t> out) {
    static constexpr auto kValues = [] {
        std::array<std::uint8_t, 256> values{};
        constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (std::size_t k = 0; k < kAlphabet.size(); ++k) values[static_cast<unsigned char>(kAlphabet[k])] = static_cast<std::uint8_t>(k);
        return values;
    }();
    std::uint32_t bits = 0;
    int held = 0;
    std::size_t written = 0;
    for (const char c : text) {
        if (is_space(c) || c == '=') continue;
        bits = (bits << 6) | kValues[static_cast<unsigned char>(c)];
        held += 6;
        if (held >= 8) {
            held -= 8;
            if (written < out.size()) out[written++] = static_cast<std::uint8_t>(bits >> held);
        }
    }
}

std::string encode_base64(std::span<const std::uint8_t> bytes) {
    constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string text;
    text.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t k = 0;
    for (; k + 3 <= bytes.size(); k += 3) {
        const std::uint32_t group = std::uint32_t{bytes[k]} << 16 | std::uint32_t{bytes[k + 1]} << 8 | bytes[k + 2];
        for (int shift = 18; shift >= 0; shift -= 6) text += kAlphabet[(group >> shift) & 63];
    }
    if (k < bytes.size()) {
        const std::size_t left = bytes.size() - k;
        const std::uint32_t group = std::uint32_t{bytes[k]} << 16 | (left == 2 ? std::uint32_t{bytes[k + 1]} << 8 : 0);
        text += kAlphabet[(group >> 18) & 63];
        text += kAlphabet[(group >> 12) & 63];
        text += left == 2 ? kAlphabet[(group >> 6) & 63] : '=';
        text += '=';
    }
    return text;
}

// The i-th value (storage order) of a float32 or float64 array in the file's byte order.
template <class Float>
double load_value(const std::uint8_t* bytes, std::size_t i, bool swap) {
    std::array<std::uint8_t, sizeof(Float)> value;
    std::memcpy(value.data(), bytes + i * sizeof(Float), sizeof(Float));
    if (swap) std::reverse(value.begin(), value.end());
    return static_cast<double>(std::bit_cast<Float>(value));
}

template <class Float>
void store_value(std::uint8_t* bytes, std::size_t i, double value, bool swap) {
    auto stored = std::bit_cast<std::array<std::uint8_t, sizeof(Float)>>(static_cast<Float>(value));
    if (swap) std::reverse(stored.begin(), stored.end());
    std::memcpy(bytes + i * sizeof(Float), stored.data(), sizeof(Float));
}

// Where point `point`'s coordinate `axis` lies among the stored values.
std::size_t storage_index(const GiftiPointData& data, std::size_t count, std::size_t point, std::size_t axis) {
    return data.column_major ? axis * count + point : point * kCoordinatesPerPoint + axis;
}

template <class Float>
bool parse_ascii_value(std::string_view token, double& value) {
    Float parsed{};
    const char* begin = token.data() + (token.starts_with('+') ? 1 : 0);
    const auto [stop, error] = std::from_chars(begin, token.data() + token.size(), parsed);
    value = static_cast<double>(parsed);
    return error == std::errc() && stop == token.data() + token.size();
}

template <class Float>
void append_ascii_value(std::string& text, double value) {
    char digits[64];
    const auto result = std::to_chars(digits, digits + sizeof digits, static_cast<Float>(value));
    text.append(digits, result.ptr);
}

std::optional<std::string_view> attribute_of(const DataArrayElement& array, std::string_view name) {
    for (const Attribute& attribute : array.attributes) {
        if (attribute.name == name) return trimmed(attribute.value);
    }
    return std::nullopt;
}

bool host_is_big_endian() { return std::endian::native == std::endian::big; }

PointSet read(std::string document, const fs::path& file) {
    const std::string_view text = document;
    Scanner scanner(text, file);
    const std::vector<DataArrayElement> arrays = scanner.data_arrays();
    const DataArrayElement* pointset = nullptr;
    for (const DataArrayElement& array : arrays) {
        if (attribute_of(array, "Intent") != "NIFTI_INTENT_POINTSET") continue;
        if (pointset) scanner.fail(array.tag_offset, "a second NIFTI_INTENT_POINTSET DataArray; gridwarp maps a surface with one");
        pointset = &array;
    }
    if (!pointset) throw FileError(file, "no DataArray has Intent NIFTI_INTENT_POINTSET: the file holds no surface vertices to map");
    const std::string where = "DataArray " + std::to_string(pointset->index) + " (NIFTI_INTENT_POINTSET): ";
    const auto fail = [&](const std::string& problem) { scanner.fail(pointset->tag_offset, where + problem); };
    const auto required = [&](std::string_view name) {
        const std::optional<std::string_view> value = attribute_of(*pointset, name);
        if (!value) fail("it has no " + std::string(name) + " attribute");
        return *value;
    };
    const auto count_attribute = [&](std::string_view name) {
        const std::string_view value = required(name);
        std::uint64_t count = 0;
        const auto [stop, error] = std::from_chars(value.data(), value.data() + value.size(), count);
        if (value.empty() || error != std::errc() || stop != value.data() + value.size()) {
            fail(std::string(name) + " is '" + std::string(value) + "', not a count");
        }
        return count;
    };

    PointSet points;
    points.format = "gifti";
    points.dimension = kCoordinatesPerPoint;
    GiftiPointData& data = points.gifti_data;
    const std::string_view encoding = required("Encoding");
    if (encoding == "ASCII") {
        data.encoding = GiftiPointData::Encoding::Ascii;
    } else if (encoding == "Base64Binary") {
        data.encoding = GiftiPointData::Encoding::Base64Binary;
    } else if (encoding == "GZipBase64Binary") {
        data.encoding = GiftiPointData::Encoding::GZipBase64Binary;
    } else if (encoding == "ExternalFileBinary") {
        fail("the coordinates are in an external file (ExternalFileBinary), which gridwarp does not read; save the surface with "
             "Base64Binary or GZipBase64Binary data");
    } else {
        fail("Encoding '" + std::string(encoding) + "' is not ASCII, Base64Binary, GZipBase64Binary or ExternalFileBinary");
    }
    const std::string_view data_type = required("DataType");
    if (data_type == "NIFTI_TYPE_FLOAT32") {
        data.dtype = DType::Float32;
    } else if (data_type == "NIFTI_TYPE_FLOAT64") {
        data.dtype = DType::Float64;
    } else {
        fail("DataType '" + std::string(data_type) + "': vertex coordinates must be NIFTI_TYPE_FLOAT32 or NIFTI_TYPE_FLOAT64");
    }
    const std::string_view order = required("ArrayIndexingOrder");
    if (order != "RowMajorOrder" && order != "ColumnMajorOrder") fail("ArrayIndexingOrder '" + std::string(order) + "' is not RowMajorOrder or ColumnMajorOrder");
    data.column_major = order == "ColumnMajorOrder";
    // nibabel reads ASCII text as rows of the matrix whatever the order, gifticlib as the values in
    // the order stated: for column-major ASCII the two disagree, and gridwarp takes neither side.
    if (data.column_major && data.encoding == GiftiPointData::Encoding::Ascii) {
        fail("ASCII data in ColumnMajorOrder are read differently by nibabel and gifticlib; save the surface in RowMajorOrder");
    }
    if (data.encoding != GiftiPointData::Encoding::Ascii) {
        const std::string_view endian = required("Endian");
        if (endian != "LittleEndian" && endian != "BigEndian") fail("Endian '" + std::string(endian) + "' is not LittleEndian or BigEndian");
        data.big_endian = endian == "BigEndian";
    }
    if (required("Dimensionality") != "2") fail("Dimensionality is " + std::string(required("Dimensionality")) + ", expected 2 (points x coordinates)");
    const std::uint64_t count = count_attribute("Dim0");
    if (count_attribute("Dim1") != kCoordinatesPerPoint) fail("Dim1 is " + std::string(required("Dim1")) + ", expected 3 (x, y, z)");
    if (!pointset->has_data) fail("it has no <Data> element");

    const std::string_view encoded = trimmed(text.substr(pointset->data_begin, pointset->data_end - pointset->data_begin));
    data.text_begin = static_cast<std::size_t>(encoded.data() - text.data());
    data.text_end = data.text_begin + encoded.size();
    const std::size_t value_size = data.dtype == DType::Float32 ? 4 : 8;
    // The counts the attributes claim are checked against the data before anything is allocated
    // for them: a file of a few bytes may claim 10^18 points.
    const std::size_t max_count = std::numeric_limits<std::size_t>::max() / (kCoordinatesPerPoint * value_size);
    if (count > max_count) fail("Dim0 is " + std::to_string(count) + ", more points than any file holds");
    const std::size_t value_count = static_cast<std::size_t>(count) * kCoordinatesPerPoint;
    const std::string claim = "Dim0 x Dim1 = " + std::to_string(count) + " x 3 values";
    const auto data_fail = [&](const std::string& problem) { scanner.fail(data.text_begin, where + problem); };

    std::vector<double> values;  // in storage order
    if (data.encoding == GiftiPointData::Encoding::Ascii) {
        values.reserve(std::min(value_count, encoded.size() / 2 + 1));
        std::size_t at = 0;
        while (true) {
            while (at < encoded.size() && is_space(encoded[at])) ++at;
            if (at == encoded.size()) break;
            std::size_t end = at;
            while (end < encoded.size() && !is_space(encoded[end])) ++end;
            const std::string_view token = encoded.substr(at, end - at);
            if (values.size() == value_count) data_fail("the ASCII data hold more than the " + claim);
            double value = 0;
            const bool parsed = data.dtype == DType::Float32 ? parse_ascii_value<float>(token, value) : parse_ascii_value<double>(token, value);
            if (!parsed) data_fail("the ASCII data hold '" + std::string(token.substr(0, 40)) + "', not a number");
            values.push_back(value);
            at = end;
        }
        if (values.size() != value_count) data_fail("the ASCII data hold " + std::to_string(values.size()) + " values, " + claim);
    } else {
        const std::size_t byte_count = value_count * value_size;
        const std::string claim_bytes = claim + " of " + std::to_string(value_size) + " bytes take " + std::to_string(byte_count) + " bytes";
        std::size_t decoded_size = 0;
        if (const char* problem = base64_problem(encoded, decoded_size)) data_fail(problem);
        std::vector<std::uint8_t> bytes;
        if (data.encoding == GiftiPointData::Encoding::Base64Binary) {
            if (decoded_size != byte_count) data_fail(claim_bytes + ", the data hold " + std::to_string(decoded_size));
            bytes.resize(byte_count);
            decode_base64(encoded, bytes);
        } else {
            std::vector<std::uint8_t> compressed(decoded_size);
            decode_base64(encoded, compressed);
            // Deflate expands at most kMaxDeflateRatio-fold: a claim beyond it is refused unallocated.
            if (byte_count / kMaxDeflateRatio > compressed.size()) {
                data_fail(claim_bytes + ", more than " + std::to_string(compressed.size()) + " compressed bytes can hold");
            }
            bytes.resize(byte_count);
            const std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> decompressor(
                libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
            if (!decompressor) throw std::bad_alloc();
            std::size_t inflated = 0;
            const libdeflate_result status =
                libdeflate_zlib_decompress(decompressor.get(), compressed.data(), compressed.size(), bytes.data(), bytes.size(), &inflated);
            if (status == LIBDEFLATE_INSUFFICIENT_SPACE) data_fail(claim_bytes + ", the compressed data inflate to more");
            if (status != LIBDEFLATE_SUCCESS) data_fail("the GZipBase64Binary data are not a whole zlib stream (corrupt or truncated)");
            if (inflated != byte_count) data_fail(claim_bytes + ", the compressed data inflate to " + std::to_string(inflated));
        }
        const bool swap = data.big_endian != host_is_big_endian();
        values.resize(value_count);
        for (std::size_t k = 0; k < value_count; ++k) {
            values[k] = data.dtype == DType::Float32 ? load_value<float>(bytes.data(), k, swap) : load_value<double>(bytes.data(), k, swap);
        }
    }
    points.coordinates.resize(value_count);
    for (std::size_t point = 0; point < count; ++point) {
        for (std::size_t axis = 0; axis < kCoordinatesPerPoint; ++axis) {
            const double value = values[storage_index(data, count, point, axis)];
            if (!std::isfinite(value)) data_fail("point " + std::to_string(point) + " holds a non-finite coordinate (NaN or infinity)");
            points.coordinates[point * kCoordinatesPerPoint + axis] = value;
        }
    }
    points.gifti_document = std::move(document);
    return points;
}

void write(const fs::path& file, const PointSet& points) {
    const GiftiPointData& data = points.gifti_data;
    const std::size_t count = points.size();
    const std::size_t value_count = count * kCoordinatesPerPoint;
    std::string encoded;
    if (count == 0) {
        // No values to write; the text as read also covers a self-closing <Data/>.
        encoded = points.gifti_document.substr(data.text_begin, data.text_end - data.text_begin);
    } else if (data.encoding == GiftiPointData::Encoding::Ascii) {
        for (std::size_t point = 0; point < count; ++point) {
            for (std::size_t axis = 0; axis < kCoordinatesPerPoint; ++axis) {
                const double value = points.coordinates[point * kCoordinatesPerPoint + axis];
                if (data.dtype == DType::Float32) {
                    append_ascii_value<float>(encoded, value);
                } else {
                    append_ascii_value<double>(encoded, value);
                }
                encoded += axis + 1 < kCoordinatesPerPoint ? ' ' : '\n';
            }
        }
        encoded.pop_back();
    } else {
        const std::size_t value_size = data.dtype == DType::Float32 ? 4 : 8;
        const bool swap = data.big_endian != host_is_big_endian();
        std::vector<std::uint8_t> bytes(value_count * value_size);
        for (std::size_t point = 0; point < count; ++point) {
            for (std::size_t axis = 0; axis < kCoordinatesPerPoint; ++axis) {
                const double value = points.coordinates[point * kCoordinatesPerPoint + axis];
                const std::size_t slot = storage_index(data, count, point, axis);
                if (data.dtype == DType::Float32) {
                    store_value<float>(bytes.data(), slot, value, swap);
                } else {
                    store_value<double>(bytes.data(), slot, value, swap);
                }
            }
        }
        if (data.encoding == GiftiPointData::Encoding::GZipBase64Binary) {
            libdeflate_compressor* compressor = thread_compressor(kZlibCompressionLevel);
            std::vector<std::uint8_t> compressed(libdeflate_zlib_compress_bound(compressor, bytes.size()));
            compressed.resize(libdeflate_zlib_compress(compressor, bytes.data(), bytes.size(), compressed.data(), compressed.size()));
            bytes = std::move(compressed);
        }
        encoded = encode_base64(bytes);
    }
    const std::string_view document = points.gifti_document;
    write_file_atomically(file, [&](std::ostream& out) {
        out << document.substr(0, data.text_begin) << encoded << document.substr(data.text_end);
    });
}

}  // namespace gifti

PointSet read_gifti_points(std::string document, const fs::path& file) { return gifti::read(std::move(document), file); }

void write_gifti_points(const fs::path& file, const PointSet& points) { gifti::write(file, points); }

}  // namespace gridwarp::io::detail
