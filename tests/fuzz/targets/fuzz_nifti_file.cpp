// Whole NIfTI files through read_image: header, extensions, vox_offset, the data the file must hold,
// byte swapping, scaling and gzip (gzip.cpp).
//
// Input: see fuzz_gzip_variants.hpp.
#include "fuzz_gzip_variants.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const gridwarp::fuzz::ScratchFile plain(".nii"), compressed(".nii.gz");
    gridwarp::fuzz::read_gzip_variant(data, size, plain, compressed);
    return 0;
}
