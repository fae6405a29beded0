// The parallel gzip writer and the inflater of lib/io against zlib (the oracle): whatever the
// block count, thread count, level and split into pieces, the writer's output is one gzip member
// that zlib inflates to exactly the input; a failing sink stops the writer with its exception;
// gunzip_into inflates zlib's own streams into large buffers (faulted in from a second thread), and
// gunzip_at_least_into as much as a stream holds between what is required and the room given.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "formats/gzip.hpp"  // lib/io/src: the internal gzip codec
#include "gridwarp/io/error.hpp"

using namespace gridwarp::io::detail;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Runs of zeros, a ramp and noise: every kind of deflate block appears.
std::vector<std::uint8_t> sample_bytes(std::size_t size, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> bytes(size);
    for (std::size_t i = 0; i < size; ++i) {
        const std::size_t region = (i / 100000) % 3;
        bytes[i] = region == 0 ? 0 : region == 1 ? static_cast<std::uint8_t>(i / 7) : static_cast<std::uint8_t>(rng());
    }
    return bytes;
}

// zlib inflates `gz` as one gzip member that ends exactly where the data ends.
std::vector<std::uint8_t> zlib_gunzip_one_member(const std::vector<std::uint8_t>& gz, std::size_t expected_size) {
    std::vector<std::uint8_t> out(expected_size + 1);
    z_stream z{};
    REQUIRE(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK);
    z.next_in = const_cast<Bytef*>(gz.data());
    z.avail_in = static_cast<uInt>(gz.size());
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    const int status = inflate(&z, Z_FINISH);
    const std::size_t written = out.size() - z.avail_out, left = z.avail_in;
    inflateEnd(&z);
    CHECK(status == Z_STREAM_END);
    CHECK(left == 0);  // one member: nothing after its trailer
    out.resize(written);
    return out;
}

std::vector<std::uint8_t> compress(const std::vector<std::span<const std::uint8_t>>& pieces, int level, int threads) {
    std::vector<std::uint8_t> gz;
    gzip_compress(pieces, level, threads, [&](std::span<const std::uint8_t> bytes) { gz.insert(gz.end(), bytes.begin(), bytes.end()); });
    return gz;
}

}  // namespace

TEST_CASE("the parallel gzip writer makes one member that zlib inflates to the input", "[io][gzip]") {
    const std::vector<std::uint8_t> data = sample_bytes(9 * kMiB + 12345, 11);
    for (std::size_t size : {std::size_t{0}, std::size_t{1}, kMiB, kMiB + 1, data.size()}) {
        const std::span<const std::uint8_t> whole(data.data(), size);
        for (int threads : {1, 2, 3}) {  // 1: a window of 4 blocks, reused over the 10 of the largest size
            for (int level : {0, 1, 4, 12}) {
                INFO("size " << size << " threads " << threads << " level " << level);
                const auto gz = compress({whole}, level, threads);
                const auto back = zlib_gunzip_one_member(gz, size);
                CHECK(std::equal(back.begin(), back.end(), whole.begin(), whole.end()));
            }
        }
    }
}

TEST_CASE("the parallel gzip writer joins pieces that cross block boundaries", "[io][gzip]") {
    const std::vector<std::uint8_t> data = sample_bytes(5 * kMiB + 777, 12);
    // A header-sized piece, a piece ending inside block 2, an empty piece, the rest.
    const std::span<const std::uint8_t> all(data);
    const std::vector<std::span<const std::uint8_t>> pieces{all.subspan(0, 352), all.subspan(352, 2 * kMiB + 5), all.subspan(0, 0),
                                                            all.subspan(352 + 2 * kMiB + 5)};
    const auto gz = compress(pieces, 4, 2);
    const auto back = zlib_gunzip_one_member(gz, data.size());
    CHECK(back == data);
}

TEST_CASE("a sink that fails stops the parallel gzip writer with its exception", "[io][gzip]") {
    const std::vector<std::uint8_t> data = sample_bytes(12 * kMiB, 13);
    for (int threads : {1, 2}) {
        int calls = 0;
        const auto failing_sink = [&](std::span<const std::uint8_t>) {
            if (++calls == 4) throw std::runtime_error("disk full");
        };
        CHECK_THROWS_WITH(gzip_compress({std::span<const std::uint8_t>(data)}, 1, threads, failing_sink), "disk full");
        CHECK(calls == 4);  // nothing more was handed to the sink once it failed
    }
}

TEST_CASE("gunzip_into inflates zlib's gzip streams into large buffers", "[io][gzip]") {
    // 24 MiB: the buffer is faulted in from its far end by a second thread while one inflates.
    const std::vector<std::uint8_t> data = sample_bytes(24 * kMiB + 3, 14);
    std::vector<std::uint8_t> gz(compressBound(static_cast<uLong>(data.size())) + 64);
    z_stream z{};
    REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_in = const_cast<Bytef*>(data.data());
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = gz.data();
    z.avail_out = static_cast<uInt>(gz.size());
    REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
    gz.resize(gz.size() - z.avail_out);
    deflateEnd(&z);
    for (int threads : {1, 2}) {
        std::vector<std::uint8_t> out(data.size());
        gunzip_into(gz, out, "zlib.gz", threads);
        CHECK(out == data);
        // Cut short (no trailer, one byte of data less): refused, naming the file.
        std::vector<std::uint8_t> short_stream(gz.begin(), gz.end() - 9);
        CHECK_THROWS_WITH(gunzip_into(short_stream, out, "zlib.gz", threads), Catch::Contains("zlib.gz"));
    }
}

TEST_CASE("gunzip_at_least_into fills what the data holds between the bytes required and the room given", "[io][gzip]") {
    // A format whose header does not give the length of what follows the voxels (MGH's tags).
    const std::vector<std::uint8_t> first = sample_bytes(300000, 15), second = sample_bytes(5000, 16);
    std::vector<std::uint8_t> data = first;
    data.insert(data.end(), second.begin(), second.end());
    // Two members, as a concatenation of gzip files is.
    std::vector<std::uint8_t> gz = compress({first}, 6, 1);
    const std::vector<std::uint8_t> gz_second = compress({second}, 6, 1);
    gz.insert(gz.end(), gz_second.begin(), gz_second.end());
    for (int threads : {1, 2}) {
        std::vector<std::uint8_t> out(data.size() + 4096);
        CHECK(gunzip_at_least_into(gz, out, first.size() - 10, "two.gz", threads) == data.size());
        CHECK(std::equal(data.begin(), data.end(), out.begin()));
        // Less room than the data: filled, the rest ignored.
        std::vector<std::uint8_t> small(data.size() - 100);
        CHECK(gunzip_at_least_into(gz, small, first.size(), "two.gz", threads) == small.size());
        CHECK(std::equal(small.begin(), small.end(), data.begin()));
        // More required than the data holds: refused, naming the file and the bytes required.
        CHECK_THROWS_WITH(gunzip_at_least_into(gz, out, data.size() + 1, "two.gz", threads),
                          Catch::Contains("two.gz") && Catch::Contains(std::to_string(data.size() + 1)));
    }
}

TEST_CASE("the default gzip level is 1 for noise-like data and 4 where level 4 finds better matches", "[io][gzip]") {
    constexpr std::size_t kValues = kMiB / 2;
    // int16 voxels of Gaussian noise about 300: level 4's longer searches find nothing level 1 misses.
    std::mt19937 rng(7);
    std::normal_distribution<double> noise(300.0, 40.0);
    std::vector<std::uint8_t> noisy(kValues * 2), smooth(kValues * 2);
    for (std::size_t i = 0; i < kValues; ++i) {
        const auto value = static_cast<std::int16_t>(noise(rng));
        std::memcpy(noisy.data() + 2 * i, &value, 2);
    }
    // A smooth 1024 x 512 int16 image: repeats that level 4 finds and level 1 does not.
    for (std::size_t i = 0; i < kValues; ++i) {
        const double x = static_cast<double>(i % 512), y = static_cast<double>(i / 512);
        const auto value = static_cast<std::int16_t>(std::sin(x / 17.0) * std::cos(y / 23.0) * 400.0 + 500.0);
        std::memcpy(smooth.data() + 2 * i, &value, 2);
    }
    CHECK(resolve_compression_level(-1, noisy) == 1);
    CHECK(resolve_compression_level(-1, smooth) == 4);
    CHECK(resolve_compression_level(-1, {}) == 4);  // nothing tried: the default
    for (const int level : {0, 1, 4, 9, 12}) CHECK(resolve_compression_level(level, noisy) == level);
}
