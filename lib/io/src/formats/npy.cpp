#include "gridwarp/io/npy.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "files/file_checks.hpp"
#include "files/mapped_file.hpp"
#include "files/output_file.hpp"
#include "formats/mapped_output.hpp"
#include "gridwarp/io/tiles.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// NumPy 1.x's NPY_MAXDIMS. Beyond it no array NumPy writes fits, and the rank alone (a shape of
// ones costs nothing to declare) would drive the sampler's per-point work.
constexpr std::size_t kMaxRank = 32;

enum class StringKind { None, Unicode, Bytes };

struct Descr {
    DType dtype = DType::Float32;
    bool big_endian = false;
    std::size_t item_size = 0;          // bytes per element in the file
    StringKind strings = StringKind::None;
};

// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// This reads exactly that subset of Python syntax.
class HeaderParser {
public:
    HeaderParser(std::string_view text, const std::filesystem::path& source) : text_(text), source_(source) {}

    struct Header {
        std::string descr;
        bool fortran_order = false;
        Shape shape;
    };

    Header parse() {
        Header header;
        bool have_descr = false, have_order = false, have_shape = false;
        expect('{');
        while (true) {
            skip_space();
            if (peek() == '}') break;
            const std::string key = string_literal();
            expect(':');
            skip_space();
            if (key == "descr") {
                if (peek() == '[') fail("structured dtypes (a list descr) are not supported; expected a plain array");
                header.descr = string_literal();
                have_descr = true;
            } else if (key == "fortran_order") {
                header.fortran_order = boolean();
                have_order = true;
            } else if (key == "shape") {
                header.shape = tuple();
                have_shape = true;
            } else {
                fail("unexpected key '" + key + "' in the header");
            }
            skip_space();
            if (peek() == ',') ++pos_;
        }
        if (!have_descr || !have_order || !have_shape) {
            fail("the header must have 'descr', 'fortran_order' and 'shape'");
        }
        return header;
    }

private:
    [[noreturn]] void fail(const std::string& problem) const {
        throw FileError(source_, "not a valid .npy header: " + problem);
    }
    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
    void skip_space() {
        while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    }
    void expect(char c) {
        skip_space();
        if (peek() != c) fail(std::string("expected '") + c + "' at offset " + std::to_string(pos_));
        ++pos_;
    }
    std::string string_literal() {
        skip_space();
        const char quote = peek();
        if (quote != '\'' && quote != '"') fail("expected a quoted string at offset " + std::to_string(pos_));
        const auto end = text_.find(quote, pos_ + 1);
        if (end == std::string_view::npos) fail("unterminated string");
        std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
        pos_ = end + 1;
        return value;
    }
    bool boolean() {
        if (text_.substr(pos_, 4) == "True") { pos_ += 4; return true; }
        if (text_.substr(pos_, 5) == "False") { pos_ += 5; return false; }
        fail("fortran_order must be True or False");
    }
    Shape tuple() {
        expect('(');
        Shape shape;
        while (true) {
            skip_space();
            if (peek() == ')') { ++pos_; break; }
            if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("shape must be a tuple of non-negative integers");
            std::int64_t value = 0;
            while (std::isdigit(static_cast<unsigned char>(peek()))) {
                const int digit = text_[pos_++] - '0';
                if (value > (std::numeric_limits<std::int64_t>::max() - digit) / 10) fail("shape extent too large");
                value = value * 10 + digit;
            }
            if (peek() == 'L') ++pos_;  // Python 2 long suffix
            if (shape.size() == kMaxRank) fail("shape has more than " + std::to_string(kMaxRank) + " dimensions");
            shape.push_back(value);
            skip_space();
            if (peek() == ',') ++pos_;
            else if (peek() != ')') fail("shape must be a tuple of non-negative integers");
        }
        return shape;
    }

    std::string_view text_;
    const std::filesystem::path& source_;
    std::size_t pos_ = 0;
};

Descr parse_descr(const std::string& descr, const std::filesystem::path& source) {
    Descr result;
    if (descr == "bfloat16") {
        result.dtype = DType::BFloat16;
        result.item_size = 2;
        return result;
    }
    if (descr.size() < 3) throw FileError(source, "unsupported dtype '" + descr + "'");
    const char order = descr[0];
    if (order != '<' && order != '>' && order != '|' && order != '=') {
        throw FileError(source, "unsupported dtype '" + descr + "': expected a byte-order character first");
    }
    result.big_endian = order == '>' || (order == '=' && std::endian::native == std::endian::big);
    const char kind = descr[1];
    std::size_t size = 0;
    for (std::size_t i = 2; i < descr.size(); ++i) {
        if (!std::isdigit(static_cast<unsigned char>(descr[i])) || size > 1'000'000'000) {
            throw FileError(source, "unsupported dtype '" + descr + "'");
        }
        size = size * 10 + static_cast<std::size_t>(descr[i] - '0');
    }
    result.item_size = size;
    auto pick = [&](std::initializer_list<std::pair<std::size_t, DType>> options) {
        for (const auto& [bytes, type] : options) {
            if (bytes == size) { result.dtype = type; return; }
        }
        throw FileError(source, "unsupported dtype '" + descr + "'");
    };
    switch (kind) {
        case 'f': pick({{2, DType::Float16}, {4, DType::Float32}, {8, DType::Float64}}); break;
        case 'i': pick({{1, DType::Int8}, {2, DType::Int16}, {4, DType::Int32}, {8, DType::Int64}}); break;
        case 'u': pick({{1, DType::UInt8}, {2, DType::UInt16}, {4, DType::UInt32}, {8, DType::UInt64}}); break;
        case 'b': pick({{1, DType::Bool}}); break;
        case 'c': pick({{8, DType::Complex64}, {16, DType::Complex128}}); break;
        case 'V': pick({{2, DType::BFloat16}}); break;  // how ml_dtypes' bfloat16 arrays are saved
        case 'U':
            result.dtype = DType::String;
            result.strings = StringKind::Unicode;
            result.item_size = size * 4;
            break;
        case 'S':
            result.dtype = DType::String;
            result.strings = StringKind::Bytes;
            break;
        default: throw FileError(source, "unsupported dtype '" + descr + "'");
    }
    return result;
}

void append_utf8(std::string& out, std::uint32_t code) {
    if (code < 0x80) {
        out += static_cast<char>(code);
    } else if (code < 0x800) {
        out += static_cast<char>(0xc0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
        out += static_cast<char>(0xe0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (code & 0x3f));
    }
}

// Decodes UTF-8 into code points; returns nothing for invalid input.
std::optional<std::vector<std::uint32_t>> decode_utf8(std::string_view text) {
    std::vector<std::uint32_t> codes;
    for (std::size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        int extra = lead < 0x80 ? 0 : (lead >> 5) == 0x6 ? 1 : (lead >> 4) == 0xe ? 2 : (lead >> 3) == 0x1e ? 3 : -1;
        if (extra < 0 || i + static_cast<std::size_t>(extra) >= text.size()) return std::nullopt;
        std::uint32_t code = extra == 0 ? lead : lead & (0x3f >> extra);
        for (int k = 1; k <= extra; ++k) {
            const auto next = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
            if ((next & 0xc0) != 0x80) return std::nullopt;
            code = (code << 6) | (next & 0x3f);
        }
        // Overlong forms, UTF-16 surrogates and values past U+10FFFF are not UTF-8 (and the
        // reader refuses such code points in a '<U' file).
        constexpr std::uint32_t kShortest[] = {0, 0x80, 0x800, 0x10000};
        if (code < kShortest[extra] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return std::nullopt;
        codes.push_back(code);
        i += static_cast<std::size_t>(extra) + 1;
    }
    return codes;
}

std::uint32_t read_u32(const unsigned char* p, bool big_endian) {
    return big_endian ? (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3]
                      : (std::uint32_t(p[3]) << 24) | (std::uint32_t(p[2]) << 16) | (std::uint32_t(p[1]) << 8) | p[0];
}

// Copies `count` elements of `item_size` bytes, reversing the bytes of each `swap_unit` group
// when the file's byte order differs from this machine's.
void copy_numeric(const unsigned char* in, std::size_t count, std::size_t item_size, bool file_big_endian,
                  std::size_t swap_unit, unsigned char* out) {
    const bool swap = swap_unit > 1 && file_big_endian != (std::endian::native == std::endian::big);
    if (!swap) {
        std::memcpy(out, in, count * item_size);
        return;
    }
    for (std::size_t i = 0; i < count * item_size; i += swap_unit) {
        std::reverse_copy(in + i, in + i + swap_unit, out + i);
    }
}

// What a .npy header says, checked against the size of the file.
struct NpyLayout {
    Descr descr;
    bool fortran_order = false;
    Shape shape;
    std::size_t count = 0;        // elements
    std::size_t data_offset = 0;  // bytes before the data
};

// Where the header dict lies, from the magic, version and HEADER_LEN at the start of `prefix`;
// nullopt when `prefix` is too short to say.
struct HeaderSpan {
    std::size_t start = 0, length = 0;
};
std::optional<HeaderSpan> npy_header_span(std::string_view prefix) {
    if (prefix.size() < 10) return std::nullopt;
    const auto* raw = reinterpret_cast<const unsigned char*>(prefix.data());
    if (raw[6] == 1) return HeaderSpan{10, std::size_t{raw[8]} | (std::size_t{raw[9]} << 8)};
    if (prefix.size() < 12) return std::nullopt;
    return HeaderSpan{12, std::size_t{read_u32(raw + 8, false)}};
}

// `bytes` holds the file's header (at least); `file_size` is the whole file's.
NpyLayout parse_npy_layout(std::string_view bytes, std::size_t file_size, const std::filesystem::path& source) {
    if (bytes.substr(0, 6) != kMagic) {
        throw FileError(source, "not a .npy file (expected the \\x93NUMPY magic at the start)");
    }
    if (bytes.size() < 10) throw FileError(source, "truncated .npy header");
    const auto major = static_cast<unsigned char>(bytes[6]);
    const auto minor = static_cast<unsigned char>(bytes[7]);
    if (major < 1 || major > 3 || minor != 0) {
        throw FileError(source, "unsupported .npy format version " + std::to_string(major) + "." +
                                    std::to_string(minor) + " (expected 1.0, 2.0 or 3.0)");
    }
    const auto span = npy_header_span(bytes);
    if (!span) throw FileError(source, "truncated .npy header");
    const auto [header_start, header_length] = *span;
    if (header_start + header_length > bytes.size()) {
        throw FileError(source, "truncated: the header says " + std::to_string(header_length) +
                                    " bytes but the file ends first");
    }
    HeaderParser parser(bytes.substr(header_start, header_length), source);
    const auto header = parser.parse();
    NpyLayout layout;
    layout.descr = parse_descr(header.descr, source);
    layout.fortran_order = header.fortran_order;
    layout.shape = header.shape;

    // Count the elements without overflow before trusting the shape. The nonzero extents must
    // multiply within int64 even when another extent is zero (numpy refuses such shapes too):
    // the tensor's element count and strides are int64 products of them.
    std::size_t count = 1;
    bool empty = false;
    for (auto extent : header.shape) {
        if (extent == 0) {
            empty = true;
            continue;
        }
        if (count > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()) / static_cast<std::size_t>(extent)) {
            throw FileError(source, "shape " + shape_to_string(header.shape) + " is too large");
        }
        count *= static_cast<std::size_t>(extent);
    }
    layout.count = empty ? 0 : count;
    layout.data_offset = header_start + header_length;
    const std::size_t available = file_size - layout.data_offset;
    const std::size_t item_size = layout.descr.item_size;
    if (item_size == 0 && layout.count > 0) throw FileError(source, "zero-sized dtype '" + header.descr + "'");
    if (item_size != 0 && layout.count > available / item_size) {
        throw FileError(source, "truncated: shape " + shape_to_string(header.shape) + " of '" + header.descr + "' needs " +
                                    std::to_string(layout.count) + " x " + std::to_string(item_size) + " bytes of data, found " +
                                    std::to_string(available));
    }
    return layout;
}

// Bytes per unit of byte order: a complex number's parts are swapped apart.
std::size_t swap_unit(DType dtype, std::size_t item_size) { return is_complex(dtype) ? item_size / 2 : item_size; }

bool needs_swap(const NpyLayout& layout) {
    return layout.descr.big_endian != (std::endian::native == std::endian::big) && swap_unit(layout.descr.dtype, layout.descr.item_size) > 1;
}

// The C-ordered strides, in elements, of a Fortran-ordered array of `shape`.
Shape fortran_strides(const Shape& shape) {
    Shape reversed(shape.rbegin(), shape.rend());
    Shape strides = contiguous_strides(reversed);
    std::reverse(strides.begin(), strides.end());
    return strides;
}

// Copies the data at `data` into a new C-ordered tensor.
Tensor decode_npy_data(const NpyLayout& layout, const unsigned char* data, const std::filesystem::path& source) {
    const Descr& descr = layout.descr;
    const std::size_t count = layout.count;
    // Fortran-ordered data of shape S is C-ordered data of S reversed; read it so, then transpose.
    Shape file_shape = layout.shape;
    if (layout.fortran_order) std::reverse(file_shape.begin(), file_shape.end());
    Tensor tensor(descr.dtype, file_shape);

    if (descr.dtype == DType::String) {
        auto* strings = tensor.data_as<std::string>();
        for (std::size_t i = 0; i < count; ++i) {
            const unsigned char* item = data + i * descr.item_size;
            std::string value;
            if (descr.strings == StringKind::Bytes) {
                std::size_t length = descr.item_size;
                while (length > 0 && item[length - 1] == 0) --length;
                value.assign(reinterpret_cast<const char*>(item), length);
            } else {
                std::size_t length = descr.item_size / 4;
                while (length > 0 && read_u32(item + (length - 1) * 4, descr.big_endian) == 0) --length;
                for (std::size_t k = 0; k < length; ++k) {
                    const std::uint32_t code = read_u32(item + k * 4, descr.big_endian);
                    if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
                        throw FileError(source, "invalid unicode code point in string element " + std::to_string(i));
                    }
                    append_utf8(value, code);
                }
            }
            strings[i] = std::move(value);
        }
    } else if (descr.dtype == DType::Bool) {
        auto* out = tensor.data_as<bool>();
        for (std::size_t i = 0; i < count; ++i) out[i] = data[i] != 0;
    } else {
        copy_numeric(data, count, descr.item_size, descr.big_endian, swap_unit(descr.dtype, descr.item_size),
                     static_cast<unsigned char*>(tensor.data()));
    }

    if (!layout.fortran_order || tensor.rank() < 2) return tensor;  // below rank 2 the orders coincide
    return Tensor::copy_of(ConstTensorView(tensor.dtype(), tensor.data(), layout.shape, fortran_strides(layout.shape)));
}

}  // namespace

Tensor parse_npy(std::string_view bytes, const std::filesystem::path& source) {
    const NpyLayout layout = parse_npy_layout(bytes, bytes.size(), source);
    return decode_npy_data(layout, reinterpret_cast<const unsigned char*>(bytes.data()) + layout.data_offset, source);
}

Tensor read_npy(const std::filesystem::path& file) {
    detail::require_readable_file(file);
    auto mapped = std::make_shared<detail::MappedFile>(file);
    const std::vector<std::uint8_t> start = mapped->read_prefix(12);
    const auto span = npy_header_span(std::string_view(reinterpret_cast<const char*>(start.data()), start.size()));
    // A file too short to say is parsed as it is, and refused with the parser's message.
    const std::vector<std::uint8_t> prefix = span ? mapped->read_prefix(span->start + span->length) : start;
    const NpyLayout layout =
        parse_npy_layout(std::string_view(reinterpret_cast<const char*>(prefix.data()), prefix.size()), mapped->size(), file);
    const DType dtype = layout.descr.dtype;
    if (layout.count == 0 || dtype == DType::String || dtype == DType::Bool) {
        // Strings are decoded; bytes other than 0 and 1 are not valid bools in memory.
        if (layout.count == 0) return decode_npy_data(layout, prefix.data() + layout.data_offset, file);
        return decode_npy_data(layout, mapped->map(false) + layout.data_offset, file);
    }
    std::uint8_t* data = mapped->map(false) + layout.data_offset;
    const std::size_t unit = swap_unit(dtype, layout.descr.item_size);
    if (layout.data_offset % unit != 0) return decode_npy_data(layout, data, file);
    // The mapping is private: fixing the byte order in place copies only the pages it touches.
    if (needs_swap(layout)) detail::swap_elements(data, layout.count * layout.descr.item_size / unit, unit);
    if (layout.fortran_order && layout.shape.size() >= 2) {
        return Tensor::copy_of(ConstTensorView(dtype, data, layout.shape, fortran_strides(layout.shape)));
    }
    // Zero copy: the sampler reads the file's pages, faulting them in from its threads.
    return Tensor::adopt(dtype, layout.shape, std::shared_ptr<void>(mapped, data));
}

namespace {

std::string npy_descr(DType dtype) {
    switch (dtype) {
        case DType::Float16: return "<f2";
        case DType::Float32: return "<f4";
        case DType::Float64: return "<f8";
        case DType::BFloat16: return "<V2";
        case DType::Int8: return "|i1";
        case DType::Int16: return "<i2";
        case DType::Int32: return "<i4";
        case DType::Int64: return "<i8";
        case DType::UInt8: return "|u1";
        case DType::UInt16: return "<u2";
        case DType::UInt32: return "<u4";
        case DType::UInt64: return "<u8";
        case DType::Bool: return "|b1";
        case DType::Complex64: return "<c8";
        case DType::Complex128: return "<c16";
        case DType::String: break;
    }
    throw std::logic_error("npy_descr: strings have a width of their own");
}

// The bytes before the data: magic, version, and the header dict padded so that the data starts
// on a 64-byte boundary.
std::string npy_prefix(const std::string& descr, const Shape& shape) {
    std::string shape_text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        shape_text += std::to_string(shape[i]);
        shape_text += shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : "");
    }
    shape_text += ")";
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_text + ", }";
    const bool version2 = header.size() + 11 > 65535;
    const std::size_t prefix = version2 ? 12 : 10;
    const std::size_t total = ((prefix + header.size() + 1 + 63) / 64) * 64;
    header.append(total - prefix - header.size() - 1, ' ');
    header += '\n';
    std::string out(kMagic);
    out += static_cast<char>(version2 ? 2 : 1);
    out += '\0';
    const std::size_t length = header.size();
    out += static_cast<char>(length & 0xff);
    out += static_cast<char>((length >> 8) & 0xff);
    if (version2) {
        out += static_cast<char>((length >> 16) & 0xff);
        out += static_cast<char>((length >> 24) & 0xff);
    }
    out += header;
    return out;
}

// Numbers whose bytes in memory are the file's: stored as they are, without a copy.
bool stored_as_in_memory(DType dtype) { return dtype != DType::String && std::endian::native == std::endian::little; }

}  // namespace

std::string encode_npy(const ConstTensorView& tensor) {
    const Tensor contiguous = Tensor::copy_of(tensor);
    const std::size_t count = static_cast<std::size_t>(contiguous.numel());
    if (tensor.dtype != DType::String) {
        std::string out = npy_prefix(npy_descr(tensor.dtype), tensor.shape);
        const std::size_t item = dtype_size(tensor.dtype);
        const std::size_t start = out.size();
        out.resize(start + count * item);
        auto* payload = reinterpret_cast<unsigned char*>(out.data() + start);
        if (tensor.dtype == DType::Bool) {
            const bool* values = contiguous.data_as<bool>();
            for (std::size_t i = 0; i < count; ++i) payload[i] = values[i] ? 1 : 0;
        } else {
            copy_numeric(static_cast<const unsigned char*>(contiguous.data()), count, item, false, swap_unit(tensor.dtype, item), payload);
        }
        return out;
    }
    const auto* strings = contiguous.data_as<std::string>();
    std::vector<std::vector<std::uint32_t>> codes(count);
    std::size_t width = 1;
    for (std::size_t i = 0; i < count; ++i) {
        auto decoded = decode_utf8(strings[i]);
        if (!decoded) throw std::invalid_argument("string element " + std::to_string(i) + " is not valid UTF-8");
        codes[i] = std::move(*decoded);
        width = std::max(width, codes[i].size());
    }
    std::string out = npy_prefix("<U" + std::to_string(width), tensor.shape);
    const std::size_t start = out.size();
    out.resize(start + count * width * 4, '\0');
    for (std::size_t i = 0; i < count; ++i) {
        for (std::size_t k = 0; k < codes[i].size(); ++k) {
            const std::uint32_t code = codes[i][k];
            char* at = out.data() + start + (i * width + k) * 4;
            at[0] = static_cast<char>(code & 0xff);
            at[1] = static_cast<char>((code >> 8) & 0xff);
            at[2] = static_cast<char>((code >> 16) & 0xff);
            at[3] = static_cast<char>((code >> 24) & 0xff);
        }
    }
    return out;
}

void write_npy(const std::filesystem::path& file, const ConstTensorView& tensor) {
    if (!stored_as_in_memory(tensor.dtype)) {
        const std::string bytes = encode_npy(tensor);
        write_file_atomically(file, [&](std::ostream& stream) { stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
        return;
    }
    // The header, then the elements straight from memory (a C-ordered copy only when the view is
    // strided).
    Tensor contiguous;
    const void* data = tensor.data;
    if (!is_c_ordered(tensor)) {
        contiguous = Tensor::copy_of(tensor);
        data = contiguous.data();
    }
    const std::string prefix = npy_prefix(npy_descr(tensor.dtype), tensor.shape);
    const std::size_t data_bytes = static_cast<std::size_t>(shape_numel(tensor.shape)) * dtype_size(tensor.dtype);
    write_path_atomically(file, [&](const StagedFile& staged) {
        detail::OutputFile out(staged);
        out.write(std::span(reinterpret_cast<const std::uint8_t*>(prefix.data()), prefix.size()));
        out.write(std::span(static_cast<const std::uint8_t*>(data), data_bytes));
        out.close();
    });
}

namespace {

// The file of `shape` mapped at `file`, its header written; `data` is where the elements go.
struct MappedNpy {
    detail::MappedOutputFile file;
    std::uint8_t* data = nullptr;
};

std::optional<MappedNpy> map_npy_file(const StagedFile& staged, DType dtype,
                                      const Shape& shape) {
    if (!stored_as_in_memory(dtype)) return std::nullopt;
    const std::string prefix = npy_prefix(npy_descr(dtype), shape);
    const std::size_t size = prefix.size() + static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
    auto mapping = detail::create_mapped_output(staged, size);
    if (!mapping) return std::nullopt;
    std::uint8_t* bytes = mapping->bytes.get();
    std::memcpy(bytes, prefix.data(), prefix.size());
    return MappedNpy{std::move(*mapping), bytes + prefix.size()};
}

}  // namespace

PendingNpy::PendingNpy(std::filesystem::path target, DType dtype, const Shape& shape) : target_(std::move(target)) {
    staged_ = detail::stage_mapped_output(target_, [&](const StagedFile& staged) -> std::optional<detail::FileClosers> {
        auto mapped = map_npy_file(staged, dtype, shape);
        if (!mapped) return std::nullopt;
        tensor_ = Tensor::adopt(dtype, shape, std::shared_ptr<void>(mapped->file.bytes, mapped->data));
        return std::move(mapped->file.closers);
    });
    if (!staged_) tensor_ = Tensor(dtype, shape);
}

PendingNpy::~PendingNpy() {
    tensor_ = Tensor();  // unmaps before the staged file is removed
}

void PendingNpy::commit() {
    if (committed_) return;
    if (staged_) {
        tensor_ = Tensor();  // unmaps: the data is in the file's pages
        staged_->publish(target_);
        staged_.reset();
    } else {
        write_npy(target_, tensor_.view());
        tensor_ = Tensor();
    }
    committed_ = true;
}

namespace detail {

std::optional<MappedOutput> map_npy_output(const StagedFile& staged, const Image& description) {
    Shape shape{description.batch, description.channels};
    shape.insert(shape.end(), description.spatial.begin(), description.spatial.end());
    auto mapped = map_npy_file(staged, description.dtype(), shape);
    if (!mapped) return std::nullopt;
    MappedOutput output;
    output.image = Image::describe_like(description, description.spatial);
    output.image.geometry = description.geometry;
    output.image.layout = ChannelLayout::Planar;  // a .npy stores (N, C, spatial...)
    output.image.pixels = Tensor::adopt(description.dtype(), shape, std::shared_ptr<void>(mapped->file.bytes, mapped->data));
    output.closers = std::move(mapped->file.closers);
    return output;
}

}  // namespace detail

namespace detail {

namespace {

// A .npy tensor (1, C, D1..Dr) of numbers, little-endian in C order, as tiles copied out of its
// memory map, channels interleaved.
class NpyTileSource final : public TileSource {
public:
    NpyTileSource(std::shared_ptr<MappedFile> file, const std::uint8_t* data, Shape shape, DType dtype)
        : file_(std::move(file)), data_(data), shape_(std::move(shape)) {
        layout_.spatial.assign(shape_.begin() + 2, shape_.end());
        layout_.tile = Shape(layout_.spatial.size(), layout_.spatial.size() == 2 ? 512 : 128);
        for (std::size_t a = 0; a < layout_.spatial.size(); ++a) layout_.tile[a] = std::min(layout_.tile[a], layout_.spatial[a]);
        layout_.channels = shape_[1];
        layout_.dtype = dtype;
    }

    Image describe() const override {
        Image image;
        image.kind = FileKind::Tensor;
        image.format = "npy";
        image.batch = 1;
        image.channels = shape_[1];
        image.spatial = layout_.spatial;
        image.layout = ChannelLayout::Planar;
        image.pixels = Tensor(layout_.dtype, Shape{0});
        return image;
    }

    void read_tile(const Shape& index, std::uint8_t* out) const override {
        const std::size_t value_bytes = dtype_size(layout_.dtype);
        const auto channels = static_cast<std::size_t>(layout_.channels);
        const auto plane = static_cast<std::size_t>(shape_numel(layout_.spatial));
        for_each_tile_row(layout_, index, out, [&](std::size_t in_file, std::size_t in_tile, std::size_t voxels) {
            for (std::size_t c = 0; c < channels; ++c) {
                const std::uint8_t* from = data_ + (c * plane + in_file) * value_bytes;
                std::uint8_t* to = out + (in_tile * channels + c) * value_bytes;
                if (channels == 1) {
                    std::memcpy(to, from, voxels * value_bytes);
                    continue;
                }
                for (std::size_t x = 0; x < voxels; ++x) std::memcpy(to + x * channels * value_bytes, from + x * value_bytes, value_bytes);
            }
        });
    }

private:
    std::shared_ptr<MappedFile> file_;
    const std::uint8_t* data_;
    Shape shape_;
};

}  // namespace

std::unique_ptr<TileSource> open_npy_tiles(const std::filesystem::path& file, const ReadOptions&) {
    require_readable_file(file);
    auto mapped = std::make_shared<MappedFile>(file);
    const std::vector<std::uint8_t> start = mapped->read_prefix(12);
    const auto span = npy_header_span(std::string_view(reinterpret_cast<const char*>(start.data()), start.size()));
    if (!span) return nullptr;  // read_image says what is wrong
    const std::vector<std::uint8_t> prefix = mapped->read_prefix(span->start + span->length);
    const NpyLayout layout = parse_npy_layout(std::string_view(reinterpret_cast<const char*>(prefix.data()), prefix.size()), mapped->size(), file);
    const DType dtype = layout.descr.dtype;
    const std::size_t rank = layout.shape.size();
    if (rank < 4 || rank > 5 || layout.shape[0] != 1 || layout.count == 0 || layout.fortran_order || needs_swap(layout) ||
        dtype == DType::String || dtype == DType::Bool || is_complex(dtype) || layout.data_offset % swap_unit(dtype, layout.descr.item_size) != 0) {
        return nullptr;
    }
    const std::uint8_t* data = mapped->map(false) + layout.data_offset;
    return std::make_unique<NpyTileSource>(std::move(mapped), data, layout.shape, dtype);
}

}  // namespace detail

}  // namespace gridwarp::io
