// FileWriteQueue and write_file_unbuffered (lib/io internals): files of every length around the
// 4 KiB blocks written past the page cache, from aligned buffers and from unaligned spans, read
// back byte for byte; a write that fails is reported by the queue, naming the output, and stops it.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <random>

#include <unistd.h>

#include "files/file_write_queue.hpp"
#include "gridwarp/io/error.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::io::detail;
namespace fs = std::filesystem;

namespace {

std::vector<std::uint8_t> file_bytes(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::uint8_t> random_bytes(std::size_t size, unsigned seed) {
    std::mt19937 random(seed);
    std::vector<std::uint8_t> bytes(size);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(random());
    return bytes;
}

const std::size_t kSizes[] = {0, 1, 511, 4095, 4096, 4097, 8192, 3 * 1024 * 1024 + 17};

}  // namespace

TEST_CASE("files written through the queue hold their bytes", "[io][write_queue]") {
    test::TempDir dir;
    FileWriteQueue queue(3);
    std::vector<std::vector<std::uint8_t>> expected;
    unsigned seed = 1;
    for (const bool atomically : {false, true}) {
        for (const auto size : kSizes) {
            auto bytes = random_bytes(size, seed++);
            auto buffer = queue.take(size);
            REQUIRE(buffer.capacity >= size);
            REQUIRE(reinterpret_cast<std::uintptr_t>(buffer.data.get()) % 4096 == 0);
            std::copy(bytes.begin(), bytes.end(), buffer.data.get());
            const fs::path file = dir.path() / ("f" + std::to_string(expected.size()));
            queue.write(file, file, std::move(buffer), size, atomically);
            expected.push_back(std::move(bytes));
        }
    }
    queue.finish();
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(file_bytes(dir.path() / ("f" + std::to_string(i))) == expected[i]);
}

TEST_CASE("write_file_unbuffered writes unaligned spans and replaces a longer file", "[io][write_queue]") {
    test::TempDir dir;
    const fs::path file = dir.path() / "out.bin";
    const auto long_bytes = random_bytes(20000, 7);
    write_file_unbuffered(file, file, long_bytes);
    CHECK(file_bytes(file) == long_bytes);
    for (const auto size : kSizes) {
        const auto bytes = random_bytes(size + 3, static_cast<unsigned>(size));
        const std::span<const std::uint8_t> unaligned = std::span<const std::uint8_t>(bytes).subspan(3);
        write_file_unbuffered(file, file, unaligned);
        CHECK(file_bytes(file) == std::vector<std::uint8_t>(unaligned.begin(), unaligned.end()));
    }
}

TEST_CASE("write_file_unbuffered writes into tmpfs, which kernels before 6.6 refuse O_DIRECT on", "[io][write_queue]") {
    const fs::path shm = "/dev/shm";
    std::error_code error;
    if (!fs::is_directory(shm, error)) return;
    FileWriteQueue queue(1);
    const std::size_t size = 3 * 4096 + 5;
    const auto bytes = random_bytes(size, 11);
    auto buffer = queue.take(size);
    std::copy(bytes.begin(), bytes.end(), buffer.data.get());
    const fs::path file = shm / ("gridwarp-write-queue-" + std::to_string(::getpid()));
    queue.write(file, file, std::move(buffer), size, false);
    queue.finish();
    CHECK(file_bytes(file) == bytes);
    fs::remove(file, error);
}

TEST_CASE("a failed write stops the queue and names the output", "[io][write_queue]") {
    test::TempDir dir;
    FileWriteQueue queue(2);
    const fs::path target = dir.path() / "store.zarr";
    auto buffer = queue.take(100);
    queue.write(dir.path() / "missing" / "chunk", target, std::move(buffer), 100, false);
    try {
        queue.finish();
        FAIL("finish did not report the failed write");
    } catch (const io::FileError& e) {
        CHECK_THAT(e.what(), Catch::Contains("store.zarr"));
    }
    CHECK_THROWS_AS(queue.take(10), io::FileError);
}
