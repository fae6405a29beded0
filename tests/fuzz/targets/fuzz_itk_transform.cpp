// ITK transform files: the text (.tfm) and Matlab v4 (.mat) readers that check every file before
// ITK may see it. A file they pass on to ITK (a linear kind they do not compute) is then read
// through read_transform, ITK included, which must refuse it or read it without harm.
//
// Input: one selector byte (bit 0: Matlab rather than text; bit 1: 3-D rather than 2-D images),
// then the file's bytes.
#include <cstdint>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/transform_io.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using gridwarp::io::ItkTransformEncoding;
    static const gridwarp::fuzz::ScratchFile text_file(".tfm"), matlab_file(".mat");
    if (size < 1) return 0;
    const bool matlab = (data[0] & 1) != 0;
    const std::size_t dimension = (data[0] & 2) != 0 ? 3 : 2;
    const std::string_view bytes = gridwarp::fuzz::as_text(data + 1, size - 1);
    const auto encoding = matlab ? ItkTransformEncoding::Matlab : ItkTransformEncoding::Text;
    try {
        const auto steps = gridwarp::io::parse_itk_transform(bytes, encoding, matlab ? "fuzz.mat" : "fuzz.tfm", dimension);
        if (!steps) {
            const auto& file = matlab ? matlab_file.write(bytes) : text_file.write(bytes);
            (void)gridwarp::io::read_transform(file, dimension, false);
        }
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
