// Middlebury .flo: the tag, the declared size against the bytes, and the flow values.
#include <cstdint>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/flow_io.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        (void)gridwarp::io::parse_flo(gridwarp::fuzz::as_text(data, size), "fuzz.flo");
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
