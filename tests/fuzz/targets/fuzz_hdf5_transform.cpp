// ITK HDF5 transform files, through read_transform as every command reads them: the structure check
// and ITK's reader run in gridwarp-hdf5-reader's own process, which must refuse the file (one
// FileError here) or hand back transforms; its crashes and hangs become FileErrors too, so a finding
// here is a failure of the isolation itself (or of decoding what the reader hands back).
//
// Input: one selector byte (bit 1: 3-D rather than 2-D images), then the file's bytes.
#include <cstdint>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/transform_io.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const gridwarp::fuzz::ScratchFile h5_file(".h5");
    if (size < 1) return 0;
    const std::size_t dimension = (data[0] & 2) != 0 ? 3 : 2;
    const auto& file = h5_file.write(gridwarp::fuzz::as_text(data + 1, size - 1));
    gridwarp::io::ReadOptions options;
    options.memory.max_bytes = std::uint64_t{256} << 20;
    try {
        (void)gridwarp::io::read_transform(file, dimension, false, options);
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
