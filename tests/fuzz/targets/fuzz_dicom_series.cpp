// DICOM series through read_image: a folder of two files, each a mutation of a Part 10 file, read
// as one series (the file meta group gridwarp walks itself, then GDCM's header and pixel
// parsers, the series checks, the pixel sizes). GDCM runs in the ITK module, loaded as for the
// command.
//
// Input: one byte giving where the input splits (its share of the rest, of 255), then the two
// files' bytes.
#include <cstdint>
#include <filesystem>
#include <string>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const gridwarp::fuzz::ScratchFile folder("-dicom");
    if (size < 1) return 0;
    std::error_code error;
    std::filesystem::create_directories(folder.path(), error);
    const std::string_view bytes = gridwarp::fuzz::as_text(data + 1, size - 1);
    const std::size_t split = bytes.size() * data[0] / 255;
    gridwarp::fuzz::write_file(folder.path() / "a.dcm", bytes.substr(0, split));
    gridwarp::fuzz::write_file(folder.path() / "b.dcm", bytes.substr(split));
    try {
        gridwarp::io::ReadOptions options;
        options.memory.max_bytes = std::uint64_t{256} << 20;
        const gridwarp::io::Image image = gridwarp::io::read_image(folder.path(), options);
        gridwarp::fuzz::read_every_pixel(image);
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
