// BMP files through read_image: the declared size checked against the file and --max-memory
// (read_guards.cpp), gridwarp's own reader of plain BMPs (bmp.cpp), and for the other forms
// OpenCV's decoder through the gridwarp_opencv module. Every pixel accepted is read.
#include <cstdint>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const gridwarp::fuzz::ScratchFile file(".bmp");
    gridwarp::io::ReadOptions options;
    options.memory.max_bytes = std::uint64_t{1} << 24;  // small decodes keep the runs fast; the budget is under test too
    try {
        const gridwarp::io::Image image = gridwarp::io::read_image(file.write(gridwarp::fuzz::as_text(data, size)), options);
        gridwarp::fuzz::read_every_pixel(image);
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
