// Whole MRtrix3 images through read_image: the text header (dim, vox, layout, datatype, transform,
// scaling, file), the data the file must hold where the header puts it, strides and byte order,
// and gzip.
//
// Input: one selector byte, then the file. Selector % 3: 0 writes the bytes as a .mif; 1 as a
// .mif.gz as they are (fuzzing the gzip member itself); 2 gzips them first and writes a .mif.gz, so
// that mutations of the header and data reach the compressed path.
#include <zlib.h>

#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"

namespace {

std::string gzipped(std::string_view bytes) {
    std::string out(compressBound(static_cast<uLong>(bytes.size())) + 32, '\0');
    z_stream stream{};
    if (deflateInit2(&stream, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    stream.avail_in = static_cast<uInt>(bytes.size());
    stream.next_out = reinterpret_cast<Bytef*>(out.data());
    stream.avail_out = static_cast<uInt>(out.size());
    if (deflate(&stream, Z_FINISH) != Z_STREAM_END) std::abort();
    out.resize(stream.total_out);
    deflateEnd(&stream);
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const gridwarp::fuzz::ScratchFile plain(".mif"), compressed(".mif.gz");
    if (size < 1) return 0;
    const std::string_view bytes = gridwarp::fuzz::as_text(data + 1, size - 1);
    const int mode = data[0] % 3;
    try {
        const auto& file = mode == 0 ? plain.write(bytes) : compressed.write(mode == 1 ? std::string(bytes) : gzipped(bytes));
        gridwarp::io::ReadOptions options;
        options.memory.max_bytes = std::uint64_t{256} << 20;
        const gridwarp::io::Image image = gridwarp::io::read_image(file, options);
        gridwarp::fuzz::read_every_pixel(image);
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
