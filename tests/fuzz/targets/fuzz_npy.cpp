// .npy: the header's Python dict, dtypes, shapes (rank, overflow), and the data the bytes must hold.
#include <cstdint>
#include <stdexcept>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/npy.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const gridwarp::Tensor tensor = gridwarp::io::parse_npy(gridwarp::fuzz::as_text(data, size), "fuzz.npy");
        // What was accepted must be a tensor that can be written back (every element is touched);
        // the writer refuses byte strings that are not UTF-8, as documented.
        try {
            (void)gridwarp::io::encode_npy(tensor.view());
        } catch (const std::invalid_argument&) {
        }
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
