#include "gridwarp/io/npy.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

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

}  // namespace

Tensor parse_npy(std::string_view bytes, const std::filesystem::path& source) {
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
    const auto* raw = reinterpret_cast<const unsigned char*>(bytes.data());
    std::size_t header_length = 0, header_start = 0;
    if (major == 1) {
        header_length = raw[8] | (std::size_t(raw[9]) << 8);
        header_start = 10;
    } else {
        if (bytes.size() < 12) throw FileError(source, "truncated .npy header");
        header_length = read_u32(raw + 8, false);
        header_start = 12;
    }
    if (header_start + header_length > bytes.size()) {
        throw FileError(source, "truncated: the header says " + std::to_string(header_length) +
                                    " bytes but the file ends first");
    }
    HeaderParser parser(bytes.substr(header_start, header_length), source);
    const auto header = parser.parse();
    const Descr descr = parse_descr(header.descr, source);

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
    if (empty) count = 0;
    const std::size_t data_start = header_start + header_length;
    const std::size_t available = bytes.size() - data_start;
    if (descr.item_size == 0 && count > 0) throw FileError(source, "zero-sized dtype '" + header.descr + "'");
    if (descr.item_size != 0 && count > available / descr.item_size) {
        throw FileError(source, "truncated: shape " + shape_to_string(header.shape) + " of '" + header.descr +
                                    "' needs " + std::to_string(count) + " x " + std::to_string(descr.item_size) +
                                    " bytes of data, found " + std::to_string(available));
    }

    // Fortran-ordered data of shape S is C-ordered data of S reversed; read it so, then transpose.
    Shape file_shape = header.shape;
    if (header.fortran_order) std::reverse(file_shape.begin(), file_shape.end());
    Tensor tensor(descr.dtype, file_shape);
    const unsigned char* data = raw + data_start;

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
        const std::size_t swap_unit = is_complex(descr.dtype) ? descr.item_size / 2 : descr.item_size;
        copy_numeric(data, count, descr.item_size, descr.big_endian, swap_unit,
                     static_cast<unsigned char*>(tensor.data()));
    }

    if (!header.fortran_order || tensor.rank() < 2) return tensor;  // below rank 2 the orders coincide
    Shape strides = contiguous_strides(file_shape);
    std::reverse(strides.begin(), strides.end());
    return Tensor::copy_of(ConstTensorView(tensor.dtype(), tensor.data(), header.shape, strides));
}

Tensor read_npy(const std::filesystem::path& file) { return parse_npy(read_file_bytes(file), file); }

std::string encode_npy(const ConstTensorView& tensor) {
    const Tensor contiguous = Tensor::copy_of(tensor);
    const std::size_t count = static_cast<std::size_t>(contiguous.numel());
    std::string descr;
    std::string payload;
    if (tensor.dtype == DType::String) {
        const auto* strings = contiguous.data_as<std::string>();
        std::vector<std::vector<std::uint32_t>> codes(count);
        std::size_t width = 1;
        for (std::size_t i = 0; i < count; ++i) {
            auto decoded = decode_utf8(strings[i]);
            if (!decoded) throw std::invalid_argument("string element " + std::to_string(i) + " is not valid UTF-8");
            codes[i] = std::move(*decoded);
            width = std::max(width, codes[i].size());
        }
        descr = "<U" + std::to_string(width);
        payload.assign(count * width * 4, '\0');
        for (std::size_t i = 0; i < count; ++i) {
            for (std::size_t k = 0; k < codes[i].size(); ++k) {
                const std::uint32_t code = codes[i][k];
                char* at = payload.data() + (i * width + k) * 4;
                at[0] = static_cast<char>(code & 0xff);
                at[1] = static_cast<char>((code >> 8) & 0xff);
                at[2] = static_cast<char>((code >> 16) & 0xff);
                at[3] = static_cast<char>((code >> 24) & 0xff);
            }
        }
    } else {
        switch (tensor.dtype) {
            case DType::Float16: descr = "<f2"; break;
            case DType::Float32: descr = "<f4"; break;
            case DType::Float64: descr = "<f8"; break;
            case DType::BFloat16: descr = "<V2"; break;
            case DType::Int8: descr = "|i1"; break;
            case DType::Int16: descr = "<i2"; break;
            case DType::Int32: descr = "<i4"; break;
            case DType::Int64: descr = "<i8"; break;
            case DType::UInt8: descr = "|u1"; break;
            case DType::UInt16: descr = "<u2"; break;
            case DType::UInt32: descr = "<u4"; break;
            case DType::UInt64: descr = "<u8"; break;
            case DType::Bool: descr = "|b1"; break;
            case DType::Complex64: descr = "<c8"; break;
            case DType::Complex128: descr = "<c16"; break;
            case DType::String: break;
        }
        const std::size_t item = dtype_size(tensor.dtype);
        payload.resize(count * item);
        if (tensor.dtype == DType::Bool) {
            const bool* values = contiguous.data_as<bool>();
            for (std::size_t i = 0; i < count; ++i) payload[i] = values[i] ? 1 : 0;
        } else {
            const std::size_t swap_unit = is_complex(tensor.dtype) ? item / 2 : item;
            copy_numeric(static_cast<const unsigned char*>(contiguous.data()), count, item, false, swap_unit,
                         reinterpret_cast<unsigned char*>(payload.data()));
        }
    }
    std::string shape_text = "(";
    for (std::size_t i = 0; i < tensor.shape.size(); ++i) {
        shape_text += std::to_string(tensor.shape[i]);
        shape_text += tensor.shape.size() == 1 ? "," : (i + 1 < tensor.shape.size() ? ", " : "");
    }
    shape_text += ")";
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_text + ", }";
    // Pad with spaces so that the data starts on a 64-byte boundary; the header ends in a newline.
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
    out += payload;
    return out;
}

void write_npy(const std::filesystem::path& file, const ConstTensorView& tensor) {
    const std::string bytes = encode_npy(tensor);
    write_file_atomically(file, [&](std::ostream& stream) { stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

}  // namespace gridwarp::io
