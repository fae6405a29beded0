// KITTI flow PNGs (16-bit, 3 channels) through read_flow: gridwarp's PNG chunk check, OpenCV's
// decoder (the gridwarp_opencv module, loaded from the build tree) and the flow conversion.
//
// The first byte picks whether the harness repairs the chunks' CRCs before writing the file:
// libFuzzer cannot compute a CRC, so without the repair nearly every mutation would stop at the
// chunk check and the decoder behind it would never be reached.
#include <zlib.h>

#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/flow_io.hpp"

namespace {

std::uint32_t big_endian_u32(const std::string& bytes, std::size_t at) {
    return (std::uint32_t(std::uint8_t(bytes[at])) << 24) | (std::uint32_t(std::uint8_t(bytes[at + 1])) << 16) |
           (std::uint32_t(std::uint8_t(bytes[at + 2])) << 8) | std::uint32_t(std::uint8_t(bytes[at + 3]));
}

// Rewrites the CRC of every chunk that lies wholly inside the bytes.
void repair_chunk_crcs(std::string& png) {
    std::size_t position = 8;  // after the signature
    while (png.size() - position >= 12 && position < png.size()) {
        const std::uint32_t length = big_endian_u32(png, position);
        if (length > png.size() - position - 12) return;
        const auto* type_and_body = reinterpret_cast<const Bytef*>(png.data() + position + 4);
        const auto crc = static_cast<std::uint32_t>(crc32(crc32(0L, Z_NULL, 0), type_and_body, length + 4));
        const std::size_t at = position + 8 + length;
        for (int k = 0; k < 4; ++k) png[at + static_cast<std::size_t>(k)] = static_cast<char>(crc >> (24 - 8 * k));
        position = at + 4;
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const gridwarp::fuzz::ScratchFile scratch(".png");
    if (size < 1) return 0;
    std::string png(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (data[0] % 2 == 0) repair_chunk_crcs(png);
    try {
        (void)gridwarp::io::read_flow(scratch.write(png));
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
