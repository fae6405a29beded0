// Whole MRtrix3 images through read_image: the text header (dim, vox, layout, datatype, transform,
// scaling, file), the data the file must hold where the header puts it, strides and byte order,
// and gzip.
//
// Input: see fuzz_gzip_variants.hpp.
#include "fuzz_gzip_variants.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const gridwarp::fuzz::ScratchFile plain(".mif"), compressed(".mif.gz");
    gridwarp::io::ReadOptions options;
    options.memory.max_bytes = std::uint64_t{256} << 20;
    gridwarp::fuzz::read_gzip_variant(data, size, plain, compressed, options);
    return 0;
}
