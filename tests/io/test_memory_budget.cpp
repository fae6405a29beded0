// The memory budget (--max-memory): what the default admits and refuses, the message, the
// deprecated count of values; compressed NIfTI voxels checked against it before they are
// allocated; and a gap before the voxels of a .nii.gz inflated through a small buffer and
// dropped (gunzip_skipping_into against zlib's own streams, read_image against the voxels written).
#include <catch2/catch.hpp>
#include <zlib.h>

#include <array>
#include <cstring>
#include <random>

#include "formats/gzip.hpp"  // lib/io/src: the internal gzip codec
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;
namespace fs = std::filesystem;

namespace {

std::string refusal(const std::function<void()>& action) {
    try {
        action();
    } catch (const io::FileError& e) {
        return e.what();
    }
    return "(no error)";
}

// One gzip member made by zlib (the oracle), at level 6.
std::vector<std::uint8_t> zlib_gzip(std::span<const std::uint8_t> data) {
    z_stream z{};
    REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    std::vector<std::uint8_t> out(deflateBound(&z, static_cast<uLong>(data.size())) + 64);
    z.next_in = const_cast<Bytef*>(data.data());
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
    out.resize(out.size() - z.avail_out);
    deflateEnd(&z);
    return out;
}

std::vector<std::uint8_t> noise(std::size_t size, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> bytes(size);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng() % 7);  // compressible, never constant
    return bytes;
}

// The bytes of a .nii holding `image`, with vox_offset moved to `offset` (zeros in the gap) and
// scl_slope set to `slope` (0: none). The header fields are patched by their NIfTI-1 offsets.
std::vector<std::uint8_t> nii_with_gap(const fs::path& scratch, const io::Image& image, std::uint32_t offset, float slope = 0) {
    io::write_image(scratch, image);
    const std::string written = io::read_file_bytes(scratch);
    float old_offset = 0;
    std::memcpy(&old_offset, written.data() + 108, 4);
    const auto voxels_at = static_cast<std::size_t>(old_offset);
    REQUIRE(offset >= voxels_at);
    std::vector<std::uint8_t> bytes(written.begin(), written.begin() + static_cast<std::ptrdiff_t>(voxels_at));
    bytes.resize(offset, 0);
    bytes.insert(bytes.end(), written.begin() + static_cast<std::ptrdiff_t>(voxels_at), written.end());
    const auto new_offset = static_cast<float>(offset);
    REQUIRE(static_cast<std::uint32_t>(new_offset) == offset);
    std::memcpy(bytes.data() + 108, &new_offset, 4);
    std::memcpy(bytes.data() + 112, &slope, 4);
    return bytes;
}

void write_file(const fs::path& file, std::span<const std::uint8_t> bytes) {
    write_bytes(file, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

io::Image float_volume(std::int64_t d, std::int64_t h, std::int64_t w) {
    io::Image image;
    image.kind = io::FileKind::Volume;
    image.format = "nifti";
    image.spatial = {d, h, w};
    image.layout = io::ChannelLayout::Interleaved;
    image.geometry = io::Geometry::identity(3);
    image.pixels = Tensor(DType::Float32, {d, h, w});
    float* v = image.pixels.data_as<float>();
    for (std::int64_t i = 0; i < image.pixels.numel(); ++i) v[i] = static_cast<float>(i % 1000) - 0.5f;
    return image;
}

}  // namespace

TEST_CASE("the default budget admits a 512^3 float32 volume and its output, and refuses past 2 GiB", "[io][budget]") {
    const io::MemoryBudget budget;  // the default
    CHECK(budget.max_bytes == std::uint64_t{2147483648});
    const std::uint64_t cube = std::uint64_t{512} * 512 * 512;
    CHECK_NOTHROW(io::check_memory_budget("in.nii.gz", "decoding", cube, 4, budget));
    CHECK_NOTHROW(io::check_memory_budget("in.nii.gz", "decoding", cube * 16, 1, budget));  // 2 GiB exactly
    const std::string over = refusal([&] { io::check_memory_budget("bomb.nii.gz", "decoding", cube * 16 + 1, 1, budget); });
    CHECK(over == "bomb.nii.gz: decoding needs 2147483649 bytes (2.0 GiB), more than --max-memory 2147483648 bytes (2 GiB) "
                  "(raise --max-memory; 0: no limit)");
    CHECK(over.find('\n') == std::string::npos);
    // A 4 MB gzip of zeros can declare 2^30 float32 values: refused before anything is allocated.
    CHECK_THAT(refusal([&] { io::check_memory_budget("f.nii.gz", "decoding", std::uint64_t{1} << 30, 4, budget); }),
               Catch::Contains("needs 4294967296 bytes (4 GiB)"));
    // Products past 2^64 are not wrapped.
    CHECK_THAT(refusal([&] { io::check_memory_budget("f", "it", UINT64_MAX, 16, budget); }), Catch::Contains("more than 2^64 bytes"));
}

TEST_CASE("budget: --max-memory 0 lifts the budget up to what can be addressed; --max-voxels counts values", "[io][budget]") {
    const io::MemoryBudget unlimited{0, 0};
    CHECK_NOTHROW(io::check_memory_budget("f", "it", std::uint64_t{1} << 40, 8, unlimited));
    CHECK_THAT(refusal([&] { io::check_memory_budget("f", "it", std::uint64_t{1} << 60, 8, unlimited); }),
               Catch::Contains("more than any machine can allocate"));
    const io::MemoryBudget by_values{0, 1000};
    CHECK_NOTHROW(io::check_memory_budget("f", "it", 1000, 16, by_values));
    CHECK_THAT(refusal([&] { io::check_memory_budget("f", "it", 1001, 1, by_values); }),
               Catch::Contains("f: it is 1001 values, more than --max-voxels 1000"));
    const io::MemoryBudget both{1000, 1000};
    CHECK_THAT(refusal([&] { io::check_memory_budget("f", "it", 200, 8, both); }), Catch::Contains("--max-memory"));
}

TEST_CASE("gunzip_skipping_into drops a gap through a small buffer and keeps what follows", "[io][budget][gzip]") {
    const std::vector<std::uint8_t> data = noise(700000, 5);
    const std::vector<std::uint8_t> whole = zlib_gzip(data);
    // The same bytes as three concatenated members.
    const std::span<const std::uint8_t> all(data);
    std::vector<std::uint8_t> members = zlib_gzip(all.subspan(0, 100000));
    for (auto part : {all.subspan(100000, 300000), all.subspan(400000)}) {
        const auto gz = zlib_gzip(part);
        members.insert(members.end(), gz.begin(), gz.end());
    }
    for (const std::vector<std::uint8_t>* compressed : std::array<const std::vector<std::uint8_t>*, 2>{&whole, &members}) {
        for (std::size_t skip : {std::size_t{0}, std::size_t{1}, std::size_t{65535}, std::size_t{65536}, std::size_t{99999},
                                 std::size_t{100000}, std::size_t{250001}, std::size_t{699999}}) {
            for (std::size_t count : {std::size_t{1}, data.size() - skip}) {
                INFO("skip " << skip << ", count " << count << (compressed == &whole ? ", one member" : ", three members"));
                std::vector<std::uint8_t> out(count);
                gridwarp::io::detail::gunzip_skipping_into(*compressed, skip, out, "x.gz");
                CHECK(std::equal(out.begin(), out.end(), data.begin() + static_cast<std::ptrdiff_t>(skip)));
            }
        }
    }
    std::vector<std::uint8_t> out(200000);
    const std::vector<std::uint8_t> cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() / 2));
    CHECK_THAT(refusal([&] { gridwarp::io::detail::gunzip_skipping_into(cut, 600000, out, "cut.gz"); }),
               Catch::StartsWith("cut.gz: ") && Catch::Contains("truncated") && Catch::Contains("800000 bytes the header describes"));
    std::vector<std::uint8_t> damaged = whole;
    damaged[10] |= 0x06;  // the first block's type: 11, reserved (RFC 1951)
    CHECK_THAT(refusal([&] { gridwarp::io::detail::gunzip_skipping_into(damaged, 1000, out, "bad.gz"); }),
               Catch::StartsWith("bad.gz: corrupt gzip data: "));
    // Data that ends within the gap is short of the voxels too.
    CHECK_THAT(refusal([&] { gridwarp::io::detail::gunzip_skipping_into(whole, data.size() + 10, out, "short.gz"); }),
               Catch::Contains("truncated"));
}

TEST_CASE("a .nii.gz whose voxels lie past a gap reads them exactly; compressed voxels meet the budget", "[io][budget][nifti]") {
    TempDir dir;
    const io::Image image = float_volume(6, 7, 8);
    const std::span<const std::uint8_t> expected(static_cast<const std::uint8_t*>(image.pixels.data()), 6 * 7 * 8 * 4);
    // Gaps kept in the buffer (up to 64 KiB) and skipped (past it), aligned and not.
    for (std::uint32_t offset : {352u, 4000u, 65536u, 65552u, 1000016u, 3000000u}) {
        INFO("vox_offset " << offset);
        const fs::path gz = dir / ("gap" + std::to_string(offset) + ".nii.gz");
        write_file(gz, zlib_gzip(nii_with_gap(dir / "plain.nii", image, offset)));
        const io::Image read = io::read_image(gz);
        REQUIRE(read.pixels.dtype() == DType::Float32);
        REQUIRE(read.pixels.numel() == 6 * 7 * 8);
        CHECK(std::memcmp(read.pixels.data(), expected.data(), expected.size()) == 0);
    }
    const fs::path gz = dir / "v.nii.gz";
    write_file(gz, zlib_gzip(nii_with_gap(dir / "plain.nii", image, 352)));
    io::ReadOptions options;
    options.memory.max_bytes = 6 * 7 * 8 * 4 - 1;
    CHECK_THAT(refusal([&] { (void)io::read_image(gz, options); }),
               Catch::StartsWith(gz.string() + ": decoding 336 float32 values needs 1344 bytes (1.3 KiB), more than --max-memory 1343"));
    options.memory.max_bytes = 6 * 7 * 8 * 4;
    CHECK(io::read_image(gz, options).pixels.numel() == 336);
    // Scaled voxels become float64: eight bytes a value count.
    const fs::path scaled = dir / "scaled.nii.gz";
    write_file(scaled, zlib_gzip(nii_with_gap(dir / "plain.nii", image, 352, 2.0f)));
    options.memory.max_bytes = 6 * 7 * 8 * 8 - 1;
    CHECK_THAT(refusal([&] { (void)io::read_image(scaled, options); }), Catch::Contains("needs 2688 bytes"));
    options.memory.max_bytes = 6 * 7 * 8 * 8;
    const io::Image doubled = io::read_image(scaled, options);
    REQUIRE(doubled.pixels.dtype() == DType::Float64);
    CHECK(doubled.pixels.data_as<double>()[11] == 2.0 * (11 - 0.5));
    // The header alone (a reference grid) inflates nothing, so the budget does not apply.
    options.memory.max_bytes = 1;
    CHECK(io::read_image_header(gz, options).spatial == Shape{6, 7, 8});
}
