// The harness the whole-file volume targets share (NIfTI, MGH, MRtrix3): one selector byte, then a
// file written three ways. Selector % 3: 0 writes the bytes under the plain name; 1 under the
// gzipped name as they are (fuzzing the gzip member itself); 2 gzips them first, so that mutations
// of the header and data reach the compressed path.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::fuzz {

inline std::string gzipped(std::string_view bytes) {
    z_stream stream{};
    if (deflateInit2(&stream, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
    std::string out(deflateBound(&stream, static_cast<uLong>(bytes.size())), '\0');
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    stream.avail_in = static_cast<uInt>(bytes.size());
    stream.next_out = reinterpret_cast<Bytef*>(out.data());
    stream.avail_out = static_cast<uInt>(out.size());
    if (deflate(&stream, Z_FINISH) != Z_STREAM_END) std::abort();
    out.resize(stream.total_out);
    deflateEnd(&stream);
    return out;
}

// Writes the input as the selector says and reads it with read_image under `options`; every
// accepted voxel is read.
inline void read_gzip_variant(const std::uint8_t* data, std::size_t size, const ScratchFile& plain, const ScratchFile& compressed,
                              const io::ReadOptions& options = {}) {
    if (size < 1) return;
    const std::string_view bytes = as_text(data + 1, size - 1);
    const int mode = data[0] % 3;
    try {
        const auto& file = mode == 0 ? plain.write(bytes) : compressed.write(mode == 1 ? std::string(bytes) : gzipped(bytes));
        const io::Image image = io::read_image(file, options);
        read_every_pixel(image);
    } catch (const io::FileError&) {
    }
}

}  // namespace gridwarp::fuzz
