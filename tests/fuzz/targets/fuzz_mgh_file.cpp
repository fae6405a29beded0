// Whole FreeSurfer MGH files through read_image: the header's sizes, type and geometry, the data
// the file must hold, the scan parameters after it, byte order and gzip (gzip.cpp, with the room a
// gzip trailer claims).
//
// Input: see fuzz_gzip_variants.hpp.
#include "fuzz_gzip_variants.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const gridwarp::fuzz::ScratchFile plain(".mgh"), compressed(".mgz");
    gridwarp::io::ReadOptions options;
    options.memory.max_bytes = std::uint64_t{256} << 20;
    gridwarp::fuzz::read_gzip_variant(data, size, plain, compressed, options);
    return 0;
}
