// NIfTI-1/-2 headers (nifti_header.cpp): every field check, then both geometry rules on what passed.
#include <algorithm>
#include <cstdint>
#include <span>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/nifti.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gridwarp::io;
    const std::filesystem::path source = "fuzz.nii";
    try {
        const NiftiHeader header = parse_nifti_header(std::span<const std::uint8_t>(data, size), source);
        const auto spatial = static_cast<std::size_t>(std::clamp<std::int64_t>(header.dim[0], 1, 3));
        for (const auto rule : {NiftiGeometryRule::Standard, NiftiGeometryRule::Itk}) {
            try {
                bool used_method_1 = false;
                (void)nifti_geometry(header, spatial, rule, source, &used_method_1);
            } catch (const FileError&) {
            }
        }
    } catch (const FileError&) {
    }
    return 0;
}
