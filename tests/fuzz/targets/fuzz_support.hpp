// What the fuzz targets share: scratch files for readers that take a path, and a quiet, single-
// threaded process (libFuzzer runs one input at a time; idle OpenMP workers would only spin).
#pragma once

#include <sanitizer/common_interface_defs.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <numeric>

#include "gridwarp/io/image.hpp"

namespace gridwarp::fuzz {

// Call from LLVMFuzzerInitialize.
inline void prepare_process() {
    ::setenv("OMP_NUM_THREADS", "1", 0);
    // Image decoders run with stderr pointed at a capture file (raster_io.cpp); sanitizer reports go
    // to a copy of the real stderr so that they are never captured with the decoder's messages.
    static const int real_stderr = ::dup(2);
    if (real_stderr >= 0) __sanitizer_set_report_fd(reinterpret_cast<void*>(static_cast<std::intptr_t>(real_stderr)));
}

// A file in memory-backed /dev/shm (else the temporary folder) that this process reuses for every
// input: `<prefix>-<pid><extension>`. Removed when the process exits normally.
class ScratchFile {
public:
    explicit ScratchFile(std::string_view extension) {
        std::error_code error;
        const std::filesystem::path folder =
            std::filesystem::is_directory("/dev/shm", error) ? std::filesystem::path("/dev/shm") : std::filesystem::temp_directory_path();
        path_ = folder / ("gridwarp-fuzz-" + std::to_string(::getpid()) + std::string(extension));
    }
    ~ScratchFile() {
        std::error_code error;
        std::filesystem::remove_all(path_, error);
    }
    ScratchFile(const ScratchFile&) = delete;
    ScratchFile& operator=(const ScratchFile&) = delete;

    const std::filesystem::path& write(std::string_view bytes) const;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

// Writes `bytes` to `path`, or stops the run: the harness itself failed.
inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) std::abort();
}

// Reads every byte of an accepted image's pixels, so that the sanitizers see any the decoder left
// unwritten or out of bounds.
inline void read_every_pixel(const io::Image& image) {
    const auto* pixels = static_cast<const std::uint8_t*>(image.pixels.data());
    const auto bytes = static_cast<std::size_t>(image.pixels.numel()) * dtype_size(image.dtype());
    volatile unsigned sum = std::accumulate(pixels, pixels + bytes, 0u);
    (void)sum;
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

inline const std::filesystem::path& ScratchFile::write(std::string_view bytes) const {
    write_file(path_, bytes);
    return path_;
}

}  // namespace gridwarp::fuzz
