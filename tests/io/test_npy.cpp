// The .npy reader and writer (lib/io/src/formats/npy.cpp) against files NumPy wrote.
//
// Expected values come from tests/data/npy/expected.json, written together with the .npy files by
// tests/fixtures/make_npy_fixtures.py (NumPy is the oracle), or from simple formulas here.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/npy.hpp"
#include "support/support.hpp"

using namespace gridwarp;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;

static_assert(std::endian::native == std::endian::little, "the expected bytes in expected.json are little endian");

namespace {

const std::vector<DType> kAllDTypes = {
    DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,   DType::Int16,
    DType::Int32,   DType::Int64,   DType::UInt8,   DType::UInt16,   DType::UInt32, DType::UInt64,
    DType::Bool,    DType::Complex64, DType::Complex128, DType::String,
};

fs::path npy_dir() { return test::data_dir() / "npy"; }

const json& expected_json() {
    static const json parsed = json::parse(io::read_file_bytes(npy_dir() / "expected.json"));
    return parsed;
}

std::string from_hex(const std::string& hex) {
    REQUIRE(hex.size() % 2 == 0);
    std::string out;
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    }
    return out;
}

Shape shape_of(const json& entry) { return entry.at("shape").get<Shape>(); }

// The tensor a fixture entry describes, built from expected.json alone.
Tensor expected_tensor(const json& entry) {
    const DType type = parse_dtype(entry.at("dtype").get<std::string>());
    Tensor tensor(type, shape_of(entry));
    const auto count = static_cast<std::size_t>(tensor.numel());
    if (type == DType::String) {
        const auto& strings = entry.at("strings_hex");
        REQUIRE(strings.size() == count);
        for (std::size_t i = 0; i < count; ++i) tensor.data_as<std::string>()[i] = from_hex(strings[i].get<std::string>());
    } else if (type == DType::Bool) {
        const std::string bytes = from_hex(entry.at("data_hex").get<std::string>());
        REQUIRE(bytes.size() == count);
        for (std::size_t i = 0; i < count; ++i) tensor.data_as<bool>()[i] = bytes[i] != 0;
    } else {
        const std::string bytes = from_hex(entry.at("data_hex").get<std::string>());
        REQUIRE(bytes.size() == tensor.nbytes());
        if (!bytes.empty()) std::memcpy(tensor.data(), bytes.data(), bytes.size());
    }
    return tensor;
}

std::string file_bytes(const fs::path& file) { return io::read_file_bytes(file); }

// What a call threw: only FileError counts; anything else fails the test.
struct Outcome {
    bool threw = false;
    std::string message;
    fs::path file;
};

Outcome outcome_of(const std::function<void()>& fn) {
    Outcome result;
    try {
        fn();
    } catch (const io::FileError& error) {
        result.threw = true;
        result.message = error.what();
        result.file = error.file();
    }
    return result;
}

// Requires a FileError whose message starts with the file and names the problem.
void require_file_error(const std::function<void()>& fn, const fs::path& file, const std::string& problem) {
    const Outcome outcome = outcome_of(fn);
    INFO("expected a FileError mentioning: " << problem);
    REQUIRE(outcome.threw);
    INFO("message: " << outcome.message);
    CHECK(outcome.file == file);
    CHECK_THAT(outcome.message, StartsWith(file.string() + ": "));
    CHECK_THAT(outcome.message, Contains(problem));
}

// A .npy file with this header dict, padded as the format asks, then `data`.
std::string npy_file(const std::string& dict, const std::string& data = "", int major = 1, int minor = 0) {
    const std::size_t prefix = major == 1 ? 10 : 12;
    std::string header = dict;
    header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string out("\x93NUMPY", 6);
    out += static_cast<char>(major);
    out += static_cast<char>(minor);
    for (std::size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return out + header + data;
}

std::string dict(const std::string& descr, const std::string& shape, const std::string& order = "False") {
    return "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
}

// The parts of a version 1.0 or 2.0 .npy file's header.
struct HeaderParts {
    std::string prefix;  // magic and version
    std::size_t header_length = 0;
    std::string dict;     // the dict literal, up to and including '}'
    std::size_t spaces = 0;
    std::size_t total = 0;  // bytes before the data
    bool well_formed = false;
};

HeaderParts split_header(const std::string& file) {
    HeaderParts parts;
    if (file.size() < 12) return parts;
    parts.prefix = file.substr(0, 8);
    const bool v1 = file[6] == 1;
    const std::size_t start = v1 ? 10 : 12;
    const auto* raw = reinterpret_cast<const unsigned char*>(file.data());
    parts.header_length = v1 ? raw[8] | (std::size_t(raw[9]) << 8)
                             : raw[8] | (std::size_t(raw[9]) << 8) | (std::size_t(raw[10]) << 16) | (std::size_t(raw[11]) << 24);
    parts.total = start + parts.header_length;
    if (parts.total > file.size() || parts.header_length == 0) return parts;
    const std::string text = file.substr(start, parts.header_length);
    const auto close = text.rfind('}');
    if (close == std::string::npos || text.back() != '\n') return parts;
    parts.dict = text.substr(0, close + 1);
    const std::string padding = text.substr(close + 1, text.size() - close - 2);
    parts.spaces = padding.size();
    parts.well_formed = padding.find_first_not_of(' ') == std::string::npos;
    return parts;
}

// gridwarp's encoding `ours` against numpy's `theirs` for the same array: same magic, version and
// header dict, the data 64-byte aligned with the fewest spaces (numpy may add more: its 21-character
// growth reserve, or a whole 64 when already aligned), and the same data bytes after the header.
void check_like_numpy(const std::string& ours, const std::string& theirs, bool compare_data = true) {
    const HeaderParts a = split_header(ours);
    const HeaderParts b = split_header(theirs);
    REQUIRE(b.well_formed);
    REQUIRE(a.well_formed);
    CHECK(a.prefix == b.prefix);
    CHECK(a.dict == b.dict);
    CHECK(a.total % 64 == 0);
    CHECK(a.spaces < 64);
    CHECK(a.total <= b.total);
    CHECK((b.total - a.total) % 64 == 0);
    if (a.total == b.total) CHECK(ours.substr(0, a.total) == theirs.substr(0, b.total));
    if (compare_data) CHECK(ours.substr(a.total) == theirs.substr(b.total));
}

template <class T>
T from_bits(std::uint64_t bits) {
    T value;
    std::memcpy(&value, &bits, sizeof(T));
    return value;
}

template <class T>
std::uint64_t bits_of(T value) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    return bits;
}

// A tensor of random bytes (any bit pattern: NaN payloads, subnormals, -0, extremes); bools 0/1.
Tensor random_bits(DType type, const Shape& shape, std::mt19937_64& rng) {
    Tensor tensor(type, shape);
    if (type == DType::Bool) {
        for (std::int64_t i = 0; i < tensor.numel(); ++i) tensor.data_as<bool>()[i] = (rng() & 1) != 0;
    } else {
        auto* bytes = static_cast<unsigned char*>(tensor.data());
        for (std::size_t i = 0; i < tensor.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(rng());
    }
    return tensor;
}

// Special values of each numeric dtype, as raw bits.
Tensor special_values(DType type) {
    std::vector<std::uint64_t> bits;
    switch (type) {
        case DType::Float16:
        case DType::BFloat16:
            bits = {0x0000, 0x8000, 0x0001, 0x8001, 0x7c00, 0xfc00, 0x7e00, 0x7f80, 0xff80, 0x7fc0, 0x7d01, 0xffff, 0x3c00};
            break;
        case DType::Float32:
            bits = {0x00000000, 0x80000000, 0x00000001, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001,
                    0xffc12345, 0x7f7fffff, 0x3f800000};
            break;
        case DType::Float64:
            bits = {0, 0x8000000000000000, 1, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000,
                    0x7ff0000000000001, 0xfff8000000000123, 0x7fefffffffffffff, 0x3ff0000000000000};
            break;
        case DType::Complex64:
            bits = {0x80000000, 0x7fc00001, 0x7f800000, 0x00000001, 0xff800000, 0x80000000};
            break;
        case DType::Complex128:
            bits = {0x8000000000000000, 0x7ff8000000000001, 0x7ff0000000000000, 1, 0xfff0000000000000, 0};
            break;
        default:  // integers: 0, 1, all ones, the sign bit alone, the largest positive, a byte pattern
        {
            const std::size_t width = dtype_size(type) * 8;
            const std::uint64_t all = width == 64 ? ~0ull : (1ull << width) - 1;
            bits = {0, 1, all, 1ull << (width - 1), all >> 1, 0x0123456789abcdefull & all};
        }
    }
    const std::size_t unit = is_complex(type) ? dtype_size(type) / 2 : dtype_size(type);
    Tensor tensor(type, Shape{static_cast<std::int64_t>(bits.size() * unit / dtype_size(type))});
    auto* out = static_cast<unsigned char*>(tensor.data());
    for (std::size_t i = 0; i < bits.size(); ++i) std::memcpy(out + i * unit, &bits[i], unit);
    return tensor;
}

std::set<std::string> listing(const fs::path& dir) {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
    return names;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reading numpy's files
// ---------------------------------------------------------------------------------------------

TEST_CASE("npy: every fixture numpy wrote reads back as expected.json says", "[io][npy]") {
    const auto& files = expected_json().at("files");
    REQUIRE(files.size() >= 50);
    std::set<DType> seen;
    for (const auto& entry : files) {
        const std::string name = entry.at("file").get<std::string>();
        INFO(name << ": " << entry.at("what").get<std::string>());
        const Tensor expected = expected_tensor(entry);
        const Tensor actual = io::read_npy(npy_dir() / name);
        CHECK(actual.dtype() == expected.dtype());
        CHECK(actual.shape() == expected.shape());
        CHECK(test::compare_exact(actual.view(), expected.view()) == "");
        seen.insert(actual.dtype());
    }
    CHECK(seen.size() == kAllDTypes.size());  // every dtype gridwarp knows is covered
}

namespace {

// Whether `address` lies in a mapping of `file` (from /proc/self/maps): the reader's zero-copy path.
bool mapped_from(const void* address, const fs::path& file) {
    const std::string canonical = fs::canonical(file).string();
    const std::string maps = io::read_file_bytes("/proc/self/maps");
    const auto at = reinterpret_cast<std::uintptr_t>(address);
    std::size_t start = 0;
    while (start < maps.size()) {
        std::size_t end = maps.find('\n', start);
        if (end == std::string::npos) end = maps.size();
        const std::string line = maps.substr(start, end - start);
        start = end + 1;
        if (line.size() < canonical.size() || line.compare(line.size() - canonical.size(), canonical.size(), canonical) != 0) continue;
        const std::uintptr_t low = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
        const std::uintptr_t high = std::stoull(line.substr(line.find('-') + 1, line.find(' ') - line.find('-') - 1), nullptr, 16);
        if (at >= low && at < high) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("npy: the mapped reader equals the buffered parser on every fixture", "[io][npy]") {
    std::size_t zero_copy = 0;
    for (const auto& entry : expected_json().at("files")) {
        const std::string name = entry.at("file").get<std::string>();
        INFO(name);
        const fs::path file = npy_dir() / name;
        const std::string before = file_bytes(file);
        const Tensor mapped = io::read_npy(file);
        const Tensor buffered = io::parse_npy(before, file);
        CHECK(mapped.dtype() == buffered.dtype());
        CHECK(mapped.shape() == buffered.shape());
        CHECK(test::compare_exact(mapped.view(), buffered.view()) == "");
        CHECK(file_bytes(file) == before);  // a byte swap in place never reaches the file
        // Numbers in this machine's byte order and C order are read where they lie in the file.
        const std::string head = before.substr(0, 200);
        const bool native = head.find("'descr': '>") == std::string::npos;
        const bool c_order = head.find("'fortran_order': False") != std::string::npos || mapped.rank() < 2;
        const bool numbers = mapped.dtype() != DType::String && mapped.dtype() != DType::Bool;
        if (native && c_order && numbers && mapped.numel() > 0) {
            CHECK(mapped_from(mapped.data(), file));
            ++zero_copy;
        }
    }
    CHECK(zero_copy >= 15);
}

TEST_CASE("npy: data at an offset its elements cannot be aligned to is copied, exactly", "[io][npy]") {
    // numpy aligns the data to 64 bytes; another writer may not. Header length 118: the data of
    // this float64 array starts at byte 128 + 2 = 130.
    test::TempDir dir;
    const double values[] = {1.5, -2.25, 1e300, -0.0};
    std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }";
    header.append(120 - header.size() - 1, ' ');
    header += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes += static_cast<char>(header.size());
    bytes += '\0';
    bytes += header;
    REQUIRE(bytes.size() % 8 != 0);
    bytes.append(reinterpret_cast<const char*>(values), sizeof values);
    const fs::path file = dir / "unaligned.npy";
    io::write_file_atomically(file, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
    const Tensor tensor = io::read_npy(file);
    REQUIRE(tensor.shape() == Shape{4});
    for (int i = 0; i < 4; ++i) CHECK(std::bit_cast<std::uint64_t>(tensor.data_as<double>()[i]) == std::bit_cast<std::uint64_t>(values[i]));
}

TEST_CASE("npy: the fixtures are the layouts their names say", "[io][npy]") {
    // Guards the fixture set itself: big endian, Fortran order and versions really occur.
    for (const auto& entry : expected_json().at("files")) {
        const std::string name = entry.at("file").get<std::string>();
        INFO(name);
        const std::string bytes = file_bytes(npy_dir() / name);
        REQUIRE(bytes.size() >= 12);
        const std::string head = bytes.substr(0, 200);
        const char major = name.rfind("v2_", 0) == 0 ? 2 : name.rfind("v3_", 0) == 0 ? 3 : 1;
        CHECK(static_cast<int>(bytes[6]) == major);
        CHECK(bytes[7] == 0);
        const bool fortran = name.find("fortran") != std::string::npos;
        CHECK((head.find("'fortran_order': True") != std::string::npos) == fortran);
        if (name.find("be_") != std::string::npos) {
            CHECK_THAT(head, Contains("'descr': '>"));
        }
    }
}

TEST_CASE("npy: values by formula", "[io][npy]") {
    SECTION("Fortran order rank 2 and 3 are transposed into C order") {
        const Tensor a = io::read_npy(npy_dir() / "fortran_f4_2d.npy");
        REQUIRE(a.dtype() == DType::Float32);
        REQUIRE(a.shape() == Shape{2, 3});
        for (int i = 0; i < 6; ++i) CHECK(a.data_as<float>()[i] == static_cast<float>(i));

        const Tensor b = io::read_npy(npy_dir() / "fortran_i2_3d.npy");
        REQUIRE(b.dtype() == DType::Int16);
        REQUIRE(b.shape() == Shape{2, 3, 4});
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 3; ++j)
                for (int k = 0; k < 4; ++k) CHECK(b.data_as<std::int16_t>()[i * 12 + j * 4 + k] == i * 12 + j * 4 + k);

        const Tensor c = io::read_npy(npy_dir() / "fortran_be_f8_3d.npy");
        REQUIRE(c.dtype() == DType::Float64);
        REQUIRE(c.shape() == Shape{3, 4, 5});
        for (int i = 0; i < 60; ++i) CHECK(c.data_as<double>()[i] == i * 0.25 - 3);

        const Tensor v2 = io::read_npy(npy_dir() / "v2_fortran_i4.npy");
        REQUIRE(v2.shape() == Shape{3, 4});
        for (int i = 0; i < 12; ++i) CHECK(v2.data_as<std::int32_t>()[i] == i);

        const Tensor strings = io::read_npy(npy_dir() / "fortran_U_2d.npy");
        REQUIRE(strings.shape() == Shape{2, 3});
        CHECK(strings.data_as<std::string>()[1] == "a");
        CHECK(strings.data_as<std::string>()[3] == "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e");  // 日本語

        const Tensor one_d = io::read_npy(npy_dir() / "fortran_1d.npy");
        REQUIRE(one_d.shape() == Shape{5});
        for (int i = 0; i < 5; ++i) CHECK(one_d.data_as<float>()[i] == static_cast<float>(i));

        const Tensor empty = io::read_npy(npy_dir() / "fortran_empty.npy");
        CHECK(empty.shape() == Shape{3, 0});
    }
    SECTION("format versions 2.0 and 3.0") {
        const Tensor v2 = io::read_npy(npy_dir() / "v2_f4.npy");
        REQUIRE(v2.shape() == Shape{2, 3});
        for (int i = 0; i < 6; ++i) CHECK(v2.data_as<float>()[i] == static_cast<float>(i) - 2.5f);
        const Tensor v3 = io::read_npy(npy_dir() / "v3_f8.npy");
        REQUIRE(v3.shape() == Shape{5});
        for (int i = 0; i < 5; ++i) CHECK(v3.data_as<double>()[i] == i / 8.0);
        const Tensor v3u = io::read_npy(npy_dir() / "v3_U.npy");
        CHECK(v3u.data_as<std::string>()[2] == "h\xc3\xa9llo");
    }
    SECTION("0-d, empty and 1-D arrays") {
        const Tensor f = io::read_npy(npy_dir() / "scalar_f8.npy");
        CHECK(f.rank() == 0);
        CHECK(f.numel() == 1);
        CHECK(f.data_as<double>()[0] == 3.5);
        const Tensor i = io::read_npy(npy_dir() / "scalar_i4.npy");
        CHECK(i.rank() == 0);
        CHECK(i.data_as<std::int32_t>()[0] == -7);
        CHECK(io::read_npy(npy_dir() / "scalar_b1.npy").data_as<bool>()[0]);
        CHECK(io::read_npy(npy_dir() / "scalar_c16.npy").data_as<std::complex<double>>()[0] ==
              std::complex<double>(1.25, -0.5));
        CHECK(io::read_npy(npy_dir() / "scalar_U.npy").data_as<std::string>()[0] == "\xc3\xbc\xc3\x9f");  // üß

        CHECK(io::read_npy(npy_dir() / "empty_f4.npy").shape() == Shape{0});
        CHECK(io::read_npy(npy_dir() / "empty_i4_3d.npy").shape() == Shape{2, 0, 3});
        CHECK(io::read_npy(npy_dir() / "empty_b1.npy").shape() == Shape{0, 0});
        const Tensor empty_strings = io::read_npy(npy_dir() / "empty_U.npy");
        CHECK(empty_strings.dtype() == DType::String);
        CHECK(empty_strings.numel() == 0);

        CHECK_THAT(file_bytes(npy_dir() / "vector_i8.npy"), Contains("'shape': (5,)"));
        const Tensor v = io::read_npy(npy_dir() / "vector_i8.npy");
        REQUIRE(v.shape() == Shape{5});
        for (int k = 0; k < 5; ++k) CHECK(v.data_as<std::int64_t>()[k] == k);

        const Tensor r5 = io::read_npy(npy_dir() / "rank5_u2.npy");
        REQUIRE(r5.shape() == Shape{1, 2, 1, 3, 2});
        for (int k = 0; k < 12; ++k) CHECK(r5.data_as<std::uint16_t>()[k] == k);
    }
    SECTION("special float bits survive, little and big endian") {
        for (const char* name : {"f4.npy", "be_f4.npy"}) {
            INFO(name);
            const Tensor t = io::read_npy(npy_dir() / name);
            REQUIRE(t.numel() == 12);
            const float* v = t.data_as<float>();
            CHECK(bits_of(v[1]) == 0x80000000u);   // -0
            CHECK(bits_of(v[6]) == 0x00000001u);   // smallest subnormal
            CHECK(std::isinf(v[7]));
            CHECK(bits_of(v[10]) == 0x7fc12345u);  // NaN payload kept
            CHECK(bits_of(v[11]) == 0xffc00000u);  // negative NaN
        }
        const Tensor c = io::read_npy(npy_dir() / "be_c8.npy");
        const auto* z = c.data_as<std::complex<float>>();
        CHECK(z[0] == std::complex<float>(1.0f, 2.0f));
        CHECK(std::isinf(z[2].real()));
        CHECK(std::isnan(z[2].imag()));
        CHECK(z[3].imag() == -3.5f);
    }
    SECTION("strings: unicode (little and big endian) and bytes") {
        for (const char* name : {"U.npy", "be_U.npy"}) {
            INFO(name);
            const Tensor t = io::read_npy(npy_dir() / name);
            REQUIRE(t.dtype() == DType::String);
            const auto* s = t.data_as<std::string>();
            CHECK(s[0].empty());
            CHECK(s[1] == "a");
            CHECK(s[4] == "emoji \xf0\x9f\x98\x80");
        }
        const Tensor b = io::read_npy(npy_dir() / "S.npy");
        REQUIRE(b.shape() == Shape{5});
        const auto* s = b.data_as<std::string>();
        CHECK(s[0].empty());
        CHECK(s[1] == "abc");
        CHECK(s[2] == std::string("a\0b", 3));  // an embedded NUL stays; trailing ones go, as in numpy
        CHECK(s[3] == "\xff\xfe");              // bytes need not be UTF-8
    }
    SECTION("bfloat16 from '<V2', numpy's '|V2' and 'bfloat16'") {
        const std::uint16_t bits[] = {0x3f80, 0xc000, 0x3f00, 0x4049, 0x7f80, 0xff80, 0x7fc0, 0x8000, 0x0001, 0x7f7f};
        for (const char* name : {"bf16_V2.npy", "bf16_pipe_V2.npy", "bf16_name.npy"}) {
            INFO(name);
            const Tensor t = io::read_npy(npy_dir() / name);
            REQUIRE(t.dtype() == DType::BFloat16);
            REQUIRE(t.shape() == Shape{2, 5});
            for (int k = 0; k < 10; ++k) CHECK(t.data_as<bfloat16>()[k].bits == bits[k]);
        }
    }
}

TEST_CASE("npy: dtypes numpy writes that gridwarp cannot hold are refused", "[io][npy]") {
    const auto& cases = expected_json().at("unsupported");
    REQUIRE(cases.size() >= 6);
    for (const auto& entry : cases) {
        const fs::path file = npy_dir() / entry.at("file").get<std::string>();
        INFO(entry.at("what").get<std::string>());
        require_file_error([&] { io::read_npy(file); }, file, entry.at("error").get<std::string>());
    }
}

// ---------------------------------------------------------------------------------------------
// Writing: numpy's bytes, round trips
// ---------------------------------------------------------------------------------------------

TEST_CASE("npy: the writer's headers match numpy's", "[io][npy]") {
    int identical = 0, padded_more_by_numpy = 0;
    for (const auto& entry : expected_json().at("headers")) {
        const DType type = parse_dtype(entry.at("dtype").get<std::string>());
        const Shape shape = shape_of(entry);
        INFO(dtype_name(type) << " " << shape_to_string(shape));
        const std::string numpy_header = from_hex(entry.at("header_hex").get<std::string>());
        const Tensor zeros(type, shape);
        const std::string ours = io::encode_npy(zeros.view());
        check_like_numpy(ours, numpy_header, /*compare_data=*/false);
        const HeaderParts parts = split_header(ours);
        // The data: every element zero (strings: '' in a '<U1').
        const std::size_t item = type == DType::String ? 4 : dtype_size(type);
        CHECK(ours.size() == parts.total + static_cast<std::size_t>(zeros.numel()) * item);
        CHECK(ours.substr(parts.total).find_first_not_of('\0') == std::string::npos);
        if (parts.total == numpy_header.size()) ++identical;
        else ++padded_more_by_numpy;
    }
    // (1,) * 16 and (1,) * 21: numpy's growth reserve pushes its header to 192 bytes.
    CHECK(padded_more_by_numpy == 2);
    CHECK(identical >= 20);
}

TEST_CASE("npy: re-encoding numpy's canonical files gives numpy's bytes", "[io][npy]") {
    int count = 0;
    for (const auto& entry : expected_json().at("files")) {
        if (!entry.at("canonical").get<bool>()) continue;
        const fs::path file = npy_dir() / entry.at("file").get<std::string>();
        INFO(file.filename().string());
        const std::string theirs = file_bytes(file);
        const std::string ours = io::encode_npy(expected_tensor(entry).view());
        check_like_numpy(ours, theirs);
        CHECK(ours == theirs);  // these fixtures all have numpy's minimal padding too
        ++count;
    }
    CHECK(count >= 25);
}

TEST_CASE("npy: write then read is exact for every dtype", "[io][npy]") {
    std::mt19937_64 rng(20240601);
    test::TempDir dir;
    const std::vector<Shape> shapes = {{}, {0}, {1}, {5}, {2, 3}, {3, 0, 2}, {1, 2, 1, 3}, {2, 2, 2, 2, 2}};
    for (DType type : kAllDTypes) {
        if (type == DType::String) continue;  // below
        for (const Shape& shape : shapes) {
            INFO(dtype_name(type) << " " << shape_to_string(shape));
            const Tensor original = random_bits(type, shape, rng);
            const std::string bytes = io::encode_npy(original.view());
            CHECK(test::compare_exact(io::parse_npy(bytes, "memory.npy").view(), original.view()) == "");
            const fs::path file = dir / (std::string(dtype_name(type)) + ".npy");
            io::write_npy(file, original.view());
            CHECK(file_bytes(file) == bytes);
            CHECK(test::compare_exact(io::read_npy(file).view(), original.view()) == "");
        }
        if (type == DType::Bool) continue;
        INFO(dtype_name(type) << " special values");
        const Tensor specials = special_values(type);
        CHECK(test::compare_exact(io::parse_npy(io::encode_npy(specials.view()), "s.npy").view(), specials.view()) == "");
    }
}

TEST_CASE("npy: an output computed in its mapped file equals write_npy's", "[io][npy]") {
    std::mt19937_64 rng(20261128);
    test::TempDir dir;
    for (DType type : kAllDTypes) {
        for (const Shape& shape : std::vector<Shape>{{2, 3, 4, 5}, {1, 1, 0, 3}, {3}}) {
            INFO(dtype_name(type) << " " << shape_to_string(shape));
            Tensor original = type == DType::String ? Tensor(type, shape) : random_bits(type, shape, rng);
            if (type == DType::String) {
                for (std::int64_t i = 0; i < original.numel(); ++i) original.data_as<std::string>()[i] = std::string(i % 3, 'a') + "\xc3\xbc";
            }
            const fs::path file = dir / "pending.npy";
            {
                io::PendingNpy output(file, type, shape);
                copy_elements(original.view(), output.tensor());
                CHECK_FALSE(fs::exists(file));  // nothing is published before commit()
                output.commit();
            }
            CHECK(file_bytes(file) == io::encode_npy(original.view()));
            fs::remove(file);
        }
    }
    SECTION("an output dropped before commit() leaves nothing behind") {
        {
            io::PendingNpy output(dir / "dropped.npy", DType::Float32, Shape{1, 1, 64, 64});
            static_cast<float*>(output.tensor().data)[0] = 1.0f;
        }
        CHECK(fs::is_empty(dir.path()));
    }
}

TEST_CASE("npy: the writer's descr, shape text and data layout", "[io][npy]") {
    const std::pair<DType, const char*> descrs[] = {
        {DType::Float16, "'<f2'"},   {DType::Float32, "'<f4'"},  {DType::Float64, "'<f8'"},
        {DType::BFloat16, "'<V2'"},  {DType::Int8, "'|i1'"},     {DType::Int16, "'<i2'"},
        {DType::Int32, "'<i4'"},     {DType::Int64, "'<i8'"},    {DType::UInt8, "'|u1'"},
        {DType::UInt16, "'<u2'"},    {DType::UInt32, "'<u4'"},   {DType::UInt64, "'<u8'"},
        {DType::Bool, "'|b1'"},      {DType::Complex64, "'<c8'"}, {DType::Complex128, "'<c16'"},
        {DType::String, "'<U1'"},
    };
    for (const auto& [type, descr] : descrs) {
        INFO(dtype_name(type));
        CHECK_THAT(io::encode_npy(Tensor(type, {2}).view()), Contains(std::string("{'descr': ") + descr + ", "));
    }
    CHECK_THAT(io::encode_npy(Tensor(DType::Float32, {}).view()), Contains("'shape': (), }"));
    CHECK_THAT(io::encode_npy(Tensor(DType::Float32, {5}).view()), Contains("'shape': (5,), }"));
    CHECK_THAT(io::encode_npy(Tensor(DType::Float32, {4, 0, 3}).view()), Contains("'shape': (4, 0, 3), }"));

    SECTION("a strided view is written in C order") {
        Tensor base(DType::Int32, {2, 3});
        for (int i = 0; i < 6; ++i) base.data_as<std::int32_t>()[i] = i;  // [[0 1 2] [3 4 5]]
        const ConstTensorView transposed(DType::Int32, base.data(), {3, 2}, {1, 3});
        const std::string bytes = io::encode_npy(transposed);
        const HeaderParts parts = split_header(bytes);
        CHECK(parts.dict == dict("<i4", "(3, 2)"));
        const std::int32_t want[] = {0, 3, 1, 4, 2, 5};
        REQUIRE(bytes.size() == parts.total + sizeof want);
        CHECK(std::memcmp(bytes.data() + parts.total, want, sizeof want) == 0);
    }
    SECTION("strings are '<U' as wide as the longest in code points, little endian UTF-32") {
        Tensor strings(DType::String, {3});
        strings.data_as<std::string>()[0] = "ab";
        strings.data_as<std::string>()[1] = "\xe2\x82\xac\xf0\x9f\x98\x80";  // € 😀: 7 bytes, 2 code points
        strings.data_as<std::string>()[2] = "";
        const std::string bytes = io::encode_npy(strings.view());
        const HeaderParts parts = split_header(bytes);
        CHECK(parts.dict == dict("<U2", "(3,)"));
        const std::string want("a\0\0\0b\0\0\0\xac\x20\0\0\x00\xf6\x01\0\0\0\0\0\0\0\0\0", 24);
        CHECK(bytes.substr(parts.total) == want);
    }
    SECTION("a header longer than 65535 bytes switches to version 2.0") {
        const Shape many_ones(22000, 1);  // "1, " x 22000: 66000 characters
        Tensor t(DType::UInt8, many_ones);
        t.data_as<std::uint8_t>()[0] = 42;
        const std::string bytes = io::encode_npy(t.view());
        REQUIRE(bytes.size() > 65536);
        CHECK(bytes[6] == 2);
        CHECK(bytes[7] == 0);
        const HeaderParts parts = split_header(bytes);
        CHECK(parts.well_formed);
        CHECK(parts.total % 64 == 0);
        CHECK(parts.spaces < 64);
        CHECK(bytes.size() == parts.total + 1);
        // The reader takes at most 32 dimensions (NumPy 1.x's limit; a rank this large only makes work).
        CHECK_THROWS_WITH(io::parse_npy(bytes, "long.npy"), Contains("more than 32 dimensions"));

        const Shape fewer(21000, 1);  // 63000 characters: still version 1.0
        CHECK(io::encode_npy(Tensor(DType::UInt8, fewer).view())[6] == 1);
    }
}

TEST_CASE("npy: strings round trip, and invalid UTF-8 is refused when writing", "[io][npy]") {
    Tensor strings(DType::String, {2, 4});
    const std::string values[] = {
        "", "plain", "h\xc3\xa9llo", "\xe6\x97\xa5\xe6\x9c\xac",   // é, 日本
        "\xf0\x9f\x98\x80", std::string("a\0b", 3),                  // 😀, an embedded NUL
        "\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf",                  // U+0080 U+07FF U+0800 U+FFFF
        "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf",                          // U+10000 U+10FFFF
    };
    for (int i = 0; i < 8; ++i) strings.data_as<std::string>()[i] = values[i];
    test::TempDir dir;
    io::write_npy(dir / "s.npy", strings.view());
    CHECK(test::compare_exact(io::read_npy(dir / "s.npy").view(), strings.view()) == "");

    SECTION("trailing NULs are not kept (numpy's fixed-width strings drop them too)") {
        Tensor t(DType::String, {1});
        t.data_as<std::string>()[0] = std::string("ab\0\0", 4);
        CHECK(io::parse_npy(io::encode_npy(t.view()), "t.npy").data_as<std::string>()[0] == "ab");
    }
    SECTION("invalid UTF-8") {
        const std::string invalid[] = {
            "\x80",                  // a lone continuation byte
            "\xe6\x97",              // truncated sequence
            "a\xff",                 // not a lead byte
            "\xc0\x80",              // overlong NUL
            "\xe0\x80\xaf",          // overlong '/'
            "\xf0\x80\x80\x80",      // overlong
            "\xed\xa0\x80",          // a UTF-16 surrogate, U+D800
            "\xed\xbf\xbf",          // U+DFFF
            "\xf4\x90\x80\x80",      // U+110000, above the last code point
            "\xf7\xbf\xbf\xbf",      // U+1FFFFF
        };
        for (const auto& bad : invalid) {
            INFO("bytes of length " << bad.size() << " starting " << int(static_cast<unsigned char>(bad[0])));
            Tensor t(DType::String, {2});
            t.data_as<std::string>()[1] = bad;
            CHECK_THROWS_AS(io::encode_npy(t.view()), std::invalid_argument);
            CHECK_THROWS_AS(io::write_npy(dir / "bad.npy", t.view()), std::invalid_argument);
        }
        CHECK(listing(dir.path()) == std::set<std::string>{"s.npy"});
    }
}

// ---------------------------------------------------------------------------------------------
// Corrupt input
// ---------------------------------------------------------------------------------------------

TEST_CASE("npy: corrupt input is refused with a FileError naming the file and the problem", "[io][npy]") {
    const fs::path source = "some/dir/corrupt.npy";
    auto refused = [&](const std::string& bytes, const std::string& problem) {
        require_file_error([&] { io::parse_npy(bytes, source); }, source, problem);
    };
    const std::string f4_data(24, '\0');
    const std::string valid = npy_file(dict("<f4", "(2, 3)"), f4_data);
    REQUIRE(io::parse_npy(valid, source).shape() == Shape{2, 3});

    SECTION("wrong magic") {
        refused("", "magic");
        refused("hello, world", "magic");
        refused(std::string("\x93NUMPZ\x01\x00", 8) + valid.substr(8), "magic");
        refused("PK\x03\x04 this is a zip (.npz)", "magic");
        std::string lower = valid;
        lower[1] = 'n';
        refused(lower, "magic");
    }
    SECTION("unknown version") {
        for (const auto& [major, minor] : {std::pair{0, 0}, {4, 0}, {255, 0}, {1, 1}, {2, 5}, {3, 255}}) {
            std::string bytes = valid;
            bytes[6] = static_cast<char>(major);
            bytes[7] = static_cast<char>(minor);
            refused(bytes, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor));
        }
    }
    SECTION("truncated header") {
        refused(valid.substr(0, 8), "");  // some FileError; the magic alone is not a file
        refused(valid.substr(0, 9), "truncated");
        refused(valid.substr(0, 10), "truncated");
        refused(valid.substr(0, 60), "truncated");
        refused(valid.substr(0, 127), "truncated");
        const std::string v2 = npy_file(dict("<f4", "(2, 3)"), f4_data, 2);
        refused(v2.substr(0, 11), "truncated");
        refused(v2.substr(0, 100), "truncated");
        std::string long_length = valid;
        long_length[8] = '\xff';
        long_length[9] = '\xff';
        refused(long_length, "truncated");
        std::string huge_v2 = v2;
        huge_v2[8] = huge_v2[9] = huge_v2[10] = huge_v2[11] = '\xff';
        refused(huge_v2, "truncated");
    }
    SECTION("truncated data") {
        refused(valid.substr(0, valid.size() - 1), "truncated");
        refused(valid.substr(0, 128), "truncated");
        refused(npy_file(dict("<U3", "(2,)"), std::string(23, 'a')), "truncated");
        const std::string numpys = file_bytes(npy_dir() / "c16.npy");
        refused(numpys.substr(0, numpys.size() - 8), "truncated");
        // Trailing bytes after the data are ignored, as numpy.load does.
        CHECK(io::parse_npy(valid + "extra", source).shape() == Shape{2, 3});
    }
    SECTION("header not a dict, keys missing or unknown") {
        refused(npy_file("['descr', '<f4']", f4_data), "expected '{'");
        refused(npy_file("{'descr': '<f4', 'fortran_order': False, }", f4_data), "'descr', 'fortran_order' and 'shape'");
        refused(npy_file("{'descr': '<f4', 'shape': (2, 3), }", f4_data), "'descr', 'fortran_order' and 'shape'");
        refused(npy_file("{'fortran_order': False, 'shape': (2, 3), }", f4_data), "'descr', 'fortran_order' and 'shape'");
        refused(npy_file("{}", f4_data), "'descr', 'fortran_order' and 'shape'");
        refused(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1, }", f4_data),
                "unexpected key 'extra'");
        refused(npy_file("{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)}", f4_data), "");
        refused(npy_file("{'descr': '<f4", f4_data), "unterminated string");
        refused(npy_file("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2, 3), }", f4_data),
                "fortran_order must be True or False");
        refused(npy_file("{descr: '<f4', 'fortran_order': False, 'shape': (2, 3), }", f4_data), "expected a quoted string");
        refused(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", f4_data), "expected '('");
        refused(npy_file("{'descr': '<f4' 'fortran_order': False 'shape': (2, 3)", f4_data), "");
    }
    SECTION("structured dtypes") {
        refused(npy_file("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (3,), }",
                         std::string(24, '\0')),
                "structured");
    }
    SECTION("unsupported descr") {
        for (const std::string descr : {"<f16", "|O", "<f3", "<i3", "<u16", "|b2", "<c4", "<c32", "|V4", "|V2x",
                                        "<M8[ns]", "<m8", "f4", "", "x", "<", "<z4", "*f4", "<f", "<f4 ",
                                        "<f99999999999999999999"}) {
            INFO("descr '" << descr << "'");
            refused(npy_file(dict(descr, "(2, 3)"), std::string(400, '\0')), "unsupported dtype '" + descr + "'");
        }
        // Zero-width strings cannot hold elements.
        refused(npy_file(dict("<U0", "(2,)")), "zero-sized dtype");
        refused(npy_file(dict("|S0", "(2,)")), "zero-sized dtype");
        CHECK(io::parse_npy(npy_file(dict("|S0", "(0,)")), source).numel() == 0);
    }
    SECTION("negative, non-integer and malformed shapes") {
        for (const std::string shape : {"(-1, 3)", "(2, -3)", "(2.5,)", "(2, 3.0)", "('2', 3)", "(2, None)",
                                        "(1e3,)", "(0x10,)", "(2 3)", "(,)", "(2,,)", "(2", "(+2,)"}) {
            INFO("shape " << shape);
            refused(npy_file(dict("<f4", shape), std::string(4096, '\0')), "shape");
        }
    }
    SECTION("huge shapes that would overflow") {
        refused(npy_file(dict("<f4", "(99999999999999999999,)")), "too large");
        refused(npy_file(dict("<f4", "(9223372036854775808,)")), "too large");
        refused(npy_file(dict("<f4", "(9223372036854775807,)")), "truncated");
        refused(npy_file(dict("<f4", "(4294967296, 4294967296, 4294967296)")), "too large");
        refused(npy_file(dict("<f8", "(3037000500, 3037000500)")), "");  // over 2^63 elements
        refused(npy_file(dict("<f4", "(4294967296, 4294967297)")), "");  // fits in 64 bits, not in the file
        refused(npy_file(dict("<U1000000000", "(1000000000,)")), "truncated");
        // An empty array whose other extents multiply past 64 bits is refused too (numpy says
        // "array is too big"), rather than overflowing while the tensor is made.
        refused(npy_file(dict("<f4", "(9223372036854775807, 9223372036854775807, 0)")), "too large");
        refused(npy_file(dict("<f4", "(0, 4294967296, 4294967296, 4294967296)"), "", 1), "too large");
        refused(npy_file(dict("<f4", "(4294967296, 4294967296, 0)", "True")), "too large");
        // ... but big extents beside a zero are fine when their product fits.
        CHECK(io::parse_npy(npy_file(dict("<f4", "(0, 9223372036854775807)")), source).shape() ==
              Shape{0, std::numeric_limits<std::int64_t>::max()});
        CHECK(io::parse_npy(npy_file(dict("<f4", "(3037000499, 0, 3037000499)", "True")), source).numel() == 0);
    }
    SECTION("invalid UTF-32 code points") {
        auto u32 = [](std::uint32_t code, bool big) {
            std::string out(4, '\0');
            for (int i = 0; i < 4; ++i) out[big ? 3 - i : i] = static_cast<char>((code >> (8 * i)) & 0xff);
            return out;
        };
        for (std::uint32_t code : {0x110000u, 0xd800u, 0xdbffu, 0xdc00u, 0xdfffu, 0xffffffffu, 0x80000000u}) {
            INFO("code point " << code);
            refused(npy_file(dict("<U2", "(2,)"), u32('a', false) + u32(0, false) + u32('b', false) + u32(code, false)),
                    "invalid unicode code point in string element 1");
            refused(npy_file(dict(">U1", "(1,)"), u32(code, true)), "invalid unicode code point in string element 0");
        }
        // The last valid code points read fine.
        const Tensor ok = io::parse_npy(npy_file(dict("<U2", "(1,)"), u32(0xd7ff, false) + u32(0x10ffff, false)), source);
        CHECK(ok.data_as<std::string>()[0] == "\xed\x9f\xbf\xf4\x8f\xbf\xbf");
    }
    SECTION("read_npy: missing files and directories") {
        test::TempDir dir;
        require_file_error([&] { io::read_npy(dir / "absent.npy"); }, dir / "absent.npy", "no such file");
        require_file_error([&] { io::read_npy(dir.path()); }, dir.path(), "directory");
    }
}

TEST_CASE("npy: every truncation of a valid file is refused", "[io][npy]") {
    int prefixes = 0;
    for (const auto& entry : expected_json().at("files")) {
        const std::string name = entry.at("file").get<std::string>();
        const std::string bytes = file_bytes(npy_dir() / name);
        REQUIRE_NOTHROW(io::parse_npy(bytes, name));
        for (std::size_t length = 0; length < bytes.size(); ++length) {
            const Outcome outcome = outcome_of([&] { io::parse_npy(std::string_view(bytes).substr(0, length), name); });
            if (!outcome.threw) FAIL_CHECK(name << " cut to " << length << " bytes was accepted");
            ++prefixes;
        }
    }
    CHECK(prefixes > 9000);
}

TEST_CASE("npy: random byte changes either parse or throw FileError", "[io][npy]") {
    // Deterministic: a fixed seed. Half the changes land in the header, where the parser works.
    std::mt19937 rng(12345);
    const char* names[] = {"f4.npy", "U.npy", "be_c16.npy", "fortran_i2_3d.npy", "v2_fortran_i4.npy",
                           "v3_U.npy", "scalar_f8.npy", "empty_i4_3d.npy", "S.npy", "bf16_name.npy"};
    int parsed = 0, refused = 0;
    for (const char* name : names) {
        const std::string original = file_bytes(npy_dir() / name);
        const std::size_t header_end = split_header(original).total;
        REQUIRE(header_end > 0);
        for (int trial = 0; trial < 300; ++trial) {
            std::string bytes = original;
            const int changes = 1 + static_cast<int>(rng() % 3);
            for (int c = 0; c < changes; ++c) {
                const std::size_t at = rng() % 2 ? rng() % header_end : rng() % bytes.size();
                bytes[at] = static_cast<char>(trial % 4 == 0 ? bytes[at] ^ (1 << (rng() % 8)) : rng());
            }
            if (trial % 10 == 9) bytes.resize(rng() % bytes.size());  // and sometimes cut it short
            try {
                const Tensor t = io::parse_npy(bytes, name);
                CHECK(t.numel() >= 0);
                ++parsed;
            } catch (const io::FileError& error) {
                CHECK_THAT(std::string(error.what()), StartsWith(std::string(name) + ": "));
                ++refused;
            }
        }
    }
    CHECK(parsed + refused == 3000);
    CHECK(parsed > 0);
    CHECK(refused > 0);
}

// ---------------------------------------------------------------------------------------------
// Atomic writes
// ---------------------------------------------------------------------------------------------

TEST_CASE("npy: write_npy is atomic", "[io][npy]") {
    test::TempDir dir;
    Tensor t(DType::Float64, {3});
    for (int i = 0; i < 3; ++i) t.data_as<double>()[i] = i + 0.5;

    SECTION("into a missing directory: FileError, and nothing is left") {
        const fs::path target = dir / "missing" / "out.npy";
        require_file_error([&] { io::write_npy(target, t.view()); }, target, "cannot create");
        CHECK_FALSE(fs::exists(dir / "missing"));
        CHECK(listing(dir.path()).empty());
    }
    SECTION("a successful write leaves only the file; overwriting too") {
        const fs::path target = dir / "out.npy";
        io::write_npy(target, t.view());
        CHECK(listing(dir.path()) == std::set<std::string>{"out.npy"});
        CHECK(test::compare_exact(io::read_npy(target).view(), t.view()) == "");

        Tensor other(DType::Int16, {2, 2});
        io::write_npy(target, other.view());
        CHECK(listing(dir.path()) == std::set<std::string>{"out.npy"});
        CHECK(io::read_npy(target).dtype() == DType::Int16);

        const fs::path dotted = dir / "grid.v2.npy";
        io::write_npy(dotted, t.view());
        CHECK(listing(dir.path()) == std::set<std::string>{"out.npy", "grid.v2.npy"});
    }
    SECTION("onto a directory: FileError, the directory stays, no temporary is left") {
        fs::create_directory(dir / "taken.npy");
        require_file_error([&] { io::write_npy(dir / "taken.npy", t.view()); }, dir / "taken.npy", "is a directory");
        CHECK(fs::is_directory(dir / "taken.npy"));
        CHECK(listing(dir.path()) == std::set<std::string>{"taken.npy"});
    }
    SECTION("a failed encode leaves the old file as it was") {
        const fs::path target = dir / "keep.npy";
        io::write_npy(target, t.view());
        const std::string before = file_bytes(target);
        Tensor bad(DType::String, {1});
        bad.data_as<std::string>()[0] = "\xff";
        CHECK_THROWS_AS(io::write_npy(target, bad.view()), std::invalid_argument);
        CHECK(file_bytes(target) == before);
        CHECK(listing(dir.path()) == std::set<std::string>{"keep.npy"});
    }
}
