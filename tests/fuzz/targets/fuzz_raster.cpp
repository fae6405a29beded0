// Encoded images through read_image, as a command reads them: the size guard's header walk
// (read_guards.cpp: one PNG IHDR first, the JPEG frame wherever the markers put it, TIFF size
// products) and the decoder behind it, gridwarp's own (png.cpp, jpeg.cpp, tiff.cpp) or OpenCV's
// through the gridwarp_opencv module. Every pixel accepted is read.
//
// Input: one selector byte (% 3: .png, .jpg, .tif), then the file's bytes.
#include <cstdint>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using gridwarp::fuzz::ScratchFile;
    static const ScratchFile files[3] = {ScratchFile(".png"), ScratchFile(".jpg"), ScratchFile(".tif")};
    if (size < 1) return 0;
    gridwarp::io::ReadOptions options;
    options.memory.max_bytes = std::uint64_t{1} << 24;  // small decodes keep the runs fast; the budget is under test too
    try {
        const auto& file = files[data[0] % 3].write(gridwarp::fuzz::as_text(data + 1, size - 1));
        const gridwarp::io::Image image = gridwarp::io::read_image(file, options);
        gridwarp::fuzz::read_every_pixel(image);
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
