// Plain-text matrices (--theta, --matrix, resample -t of a non-ITK text file).
#include <cstdint>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/text_matrix.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto matrix = gridwarp::io::parse_text_matrix(gridwarp::fuzz::as_text(data, size), "fuzz.txt");
        if (matrix.values.size() != matrix.rows * matrix.columns) __builtin_trap();
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
