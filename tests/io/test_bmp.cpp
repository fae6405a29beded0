// gridwarp's own BMP reader and writer against OpenCV's (the oracle here, linked into this test
// only): every plain form decodes to the pixels cv::imread gives, every other form is left to
// OpenCV, and what gridwarp writes is byte for byte what cv::imwrite writes.
#include <catch2/catch.hpp>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <cstring>

#include "formats/bmp.hpp"  // lib/io/src: the native codec, called directly to see which files it takes
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;
namespace fs = std::filesystem;

namespace {

void append_le(std::string& bytes, std::uint64_t value, int count) {
    for (int i = 0; i < count; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// A BMP built by hand. Pixel bytes are a fixed pseudo-random pattern; rows padded to 4 bytes
// (the padding filled with junk, which a decoder must skip).
struct BmpSpec {
    std::int32_t width = 5;
    std::int32_t height = 3;  // negative: rows stored top-down
    unsigned bits = 24;
    std::uint32_t info_size = 40;
    std::uint32_t compression = 0;
    std::uint32_t colours_used = 0;
    std::vector<std::array<std::uint8_t, 3>> palette;  // B, G, R
    std::size_t gap = 0;      // bytes between the palette and the pixel rows
    std::size_t trailing = 0; // bytes after the rows
};

std::string make_bmp(const BmpSpec& spec) {
    const std::uint64_t rows = static_cast<std::uint64_t>(spec.height < 0 ? -spec.height : spec.height);
    const std::uint64_t row_bytes = (static_cast<std::uint64_t>(spec.width) * spec.bits + 31) / 32 * 4;
    const std::size_t offset = 14 + spec.info_size + 4 * spec.palette.size() + spec.gap;
    std::string bytes = "BM";
    append_le(bytes, offset + row_bytes * rows + spec.trailing, 4);
    append_le(bytes, 0, 4);
    append_le(bytes, offset, 4);
    append_le(bytes, spec.info_size, 4);
    append_le(bytes, static_cast<std::uint32_t>(spec.width), 4);
    append_le(bytes, static_cast<std::uint32_t>(spec.height), 4);
    append_le(bytes, 1, 2);
    append_le(bytes, spec.bits, 2);
    append_le(bytes, spec.compression, 4);
    append_le(bytes, row_bytes * rows, 4);
    append_le(bytes, 2835, 4);
    append_le(bytes, 2835, 4);
    append_le(bytes, spec.colours_used, 4);
    append_le(bytes, 0, 4);
    bytes.append(spec.info_size - 40, '\0');  // the later headers' masks, colour space, gamma: unused here
    for (const auto& entry : spec.palette) {
        bytes.append(reinterpret_cast<const char*>(entry.data()), 3);
        bytes.push_back('\0');
    }
    bytes.append(spec.gap, '\x5a');
    std::uint32_t state = 12345;
    for (std::uint64_t i = 0; i < row_bytes * rows + spec.trailing; ++i) {
        state = state * 1103515245u + 12345u;
        bytes.push_back(static_cast<char>(state >> 16));
    }
    return bytes;
}

std::vector<std::array<std::uint8_t, 3>> grey_palette(int (*level)(int)) {
    std::vector<std::array<std::uint8_t, 3>> palette;
    for (int i = 0; i < 256; ++i) {
        const auto v = static_cast<std::uint8_t>(level(i));
        palette.push_back({v, v, v});
    }
    return palette;
}

// The image gridwarp read against cv::imread's decoding of the same file.
void require_same_as_opencv(const io::Image& image, const fs::path& file) {
    const cv::Mat expected = cv::imread(file.string(), cv::IMREAD_UNCHANGED);
    REQUIRE_FALSE(expected.empty());
    REQUIRE(expected.depth() == CV_8U);
    CHECK(image.dtype() == DType::UInt8);
    CHECK(image.layout == io::ChannelLayout::Interleaved);
    REQUIRE(image.channels == expected.channels());
    REQUIRE(image.spatial == Shape{expected.rows, expected.cols});
    CHECK(image.channel_order == (expected.channels() == 3 ? "BGR" : expected.channels() == 4 ? "BGRA" : ""));
    const cv::Mat continuous = expected.isContinuous() ? expected : expected.clone();
    CHECK(std::memcmp(image.pixels.data(), continuous.data, continuous.total() * continuous.elemSize()) == 0);
}

}  // namespace

TEST_CASE("BMP: gridwarp's reader decodes every plain BMP as OpenCV does", "[io][images][bmp]") {
    std::vector<std::pair<std::string, BmpSpec>> cases;
    for (std::int32_t width : {1, 2, 3, 4, 5, 7, 64}) {
        for (std::int32_t height : {1, 3, -1, -4}) {
            BmpSpec colour;
            colour.width = width;
            colour.height = height;
            cases.push_back({"24-bit " + std::to_string(width) + "x" + std::to_string(height), colour});
            BmpSpec grey = colour;
            grey.bits = 8;
            grey.palette = grey_palette([](int i) { return i; });
            cases.push_back({"8-bit grey " + std::to_string(width) + "x" + std::to_string(height), grey});
        }
    }
    for (std::uint32_t info_size : {52u, 56u, 108u, 124u}) {
        BmpSpec later;
        later.info_size = info_size;
        cases.push_back({"24-bit, info header of " + std::to_string(info_size) + " bytes", later});
    }
    BmpSpec gaps;
    gaps.gap = 6;
    gaps.trailing = 9;
    cases.push_back({"24-bit, bytes before and after the rows", gaps});
    BmpSpec inverted;
    inverted.bits = 8;
    inverted.colours_used = 256;
    inverted.palette = grey_palette([](int i) { return 255 - i; });
    cases.push_back({"8-bit, an inverted grey palette", inverted});
    BmpSpec coarse = inverted;
    coarse.height = -3;
    coarse.palette = grey_palette([](int i) { return (i / 16) * 17; });
    cases.push_back({"8-bit, a grey palette with repeated levels, top-down", coarse});

    TempDir dir;
    for (const auto& [name, spec] : cases) {
        SECTION(name) {
            const fs::path file = dir / "plain.bmp";
            const std::string bytes = make_bmp(spec);
            write_bytes(file, bytes);
            const auto native = io::detail::read_plain_bmp(file, bytes, bytes.size());
            REQUIRE(native);
            require_same_as_opencv(*native, file);
            CHECK(native->format == "bmp");
            require_same_as_opencv(io::read_image(file), file);
        }
    }
}

TEST_CASE("BMP: the other forms are left to OpenCV and read as it decodes them", "[io][images][bmp]") {
    std::vector<std::pair<std::string, BmpSpec>> cases;
    BmpSpec colour_palette;
    colour_palette.bits = 8;
    for (int i = 0; i < 256; ++i) {
        colour_palette.palette.push_back({static_cast<std::uint8_t>(i), static_cast<std::uint8_t>(255 - i), static_cast<std::uint8_t>(i / 2)});
    }
    cases.push_back({"8-bit with a colour palette", colour_palette});
    BmpSpec short_palette;
    short_palette.bits = 8;
    short_palette.colours_used = 16;
    for (int i = 0; i < 16; ++i) short_palette.palette.push_back({static_cast<std::uint8_t>(i * 16), static_cast<std::uint8_t>(i * 16), static_cast<std::uint8_t>(i * 16)});
    cases.push_back({"8-bit with a 16-entry palette", short_palette});
    BmpSpec four_bit = short_palette;
    four_bit.bits = 4;
    cases.push_back({"4-bit", four_bit});
    BmpSpec thirty_two;
    thirty_two.bits = 32;
    cases.push_back({"32-bit", thirty_two});
    BmpSpec sixteen;
    sixteen.bits = 16;
    cases.push_back({"16-bit", sixteen});

    TempDir dir;
    for (const auto& [name, spec] : cases) {
        SECTION(name) {
            const fs::path file = dir / "other.bmp";
            const std::string bytes = make_bmp(spec);
            write_bytes(file, bytes);
            CHECK_FALSE(io::detail::read_plain_bmp(file, bytes, bytes.size()));
            require_same_as_opencv(io::read_image(file), file);
        }
    }
    SECTION("run-length coded (RLE8)") {
        BmpSpec rle;
        rle.bits = 8;
        rle.compression = 1;
        rle.palette = grey_palette([](int i) { return i; });
        const std::string bytes = make_bmp(rle);
        CHECK_FALSE(io::detail::read_plain_bmp(dir / "rle.bmp", bytes, bytes.size()));
    }
}

TEST_CASE("BMP: a plain BMP cut short is refused before its pixels are read", "[io][images][bmp]") {
    TempDir dir;
    BmpSpec spec;
    spec.width = 9;
    spec.height = 4;
    std::string bytes = make_bmp(spec);
    bytes.resize(bytes.size() - 5);
    write_bytes(dir / "cut.bmp", bytes);
    CHECK_THROWS_WITH(io::detail::read_plain_bmp(dir / "cut.bmp", bytes, bytes.size()), Catch::Contains("truncated"));
    CHECK_THROWS_WITH(io::read_image(dir / "cut.bmp"), Catch::Contains("truncated"));
}

TEST_CASE("BMP: gridwarp writes the bytes OpenCV writes", "[io][images][bmp]") {
    TempDir dir;
    for (int channels : {1, 3, 4}) {
        for (std::int64_t width : {1, 2, 3, 5, 8}) {
            for (std::int64_t height : {1, 2, 3}) {
                const std::string name = std::to_string(channels) + " channels, " + std::to_string(width) + "x" + std::to_string(height);
                SECTION(name) {
                    io::Image image;
                    image.kind = io::FileKind::Raster;
                    image.channels = channels;
                    image.spatial = {height, width};
                    image.layout = io::ChannelLayout::Interleaved;
                    image.pixels = Tensor(DType::UInt8, Shape{height, width, channels});
                    auto* p = image.pixels.data_as<std::uint8_t>();
                    for (std::int64_t i = 0; i < image.pixels.numel(); ++i) p[i] = static_cast<std::uint8_t>(i * 37 + 11);
                    for (const char* extension : {".bmp", ".dib"}) {
                        const fs::path ours = dir / (std::string("ours") + extension), theirs = dir / (std::string("theirs") + extension);
                        io::write_image(ours, image);
                        const cv::Mat mat(static_cast<int>(height), static_cast<int>(width), CV_8UC(channels), p);
                        REQUIRE(cv::imwrite(theirs.string(), mat));
                        CHECK(io::read_file_bytes(ours) == io::read_file_bytes(theirs));
                    }
                }
            }
        }
    }
    SECTION("a planar image is written interleaved") {
        io::Image planar;
        planar.kind = io::FileKind::Tensor;
        planar.channels = 3;
        planar.spatial = {2, 3};
        planar.layout = io::ChannelLayout::Planar;
        planar.pixels = Tensor(DType::UInt8, Shape{1, 3, 2, 3});
        auto* p = planar.pixels.data_as<std::uint8_t>();
        for (int i = 0; i < 18; ++i) p[i] = static_cast<std::uint8_t>(10 * i);
        io::write_image(dir / "planar.bmp", planar);
        const cv::Mat read = cv::imread((dir / "planar.bmp").string(), cv::IMREAD_UNCHANGED);
        REQUIRE(read.channels() == 3);
        for (int y = 0; y < 2; ++y) {
            for (int x = 0; x < 3; ++x) {
                for (int c = 0; c < 3; ++c) CHECK(read.at<cv::Vec3b>(y, x)[c] == p[c * 6 + y * 3 + x]);
            }
        }
    }
}
