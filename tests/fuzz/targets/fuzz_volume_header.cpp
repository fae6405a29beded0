// NRRD and MetaImage headers as gridwarp checks them before ITK sees them (volume_header_check.cpp):
// every field, the size product, numbered data-file patterns and LISTs. Selector byte % 4 picks the
// name the header is parsed under: .nrrd, .nhdr, .mha, .mhd (attached or detached, NRRD or MetaIO).
#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "formats/volume_header_check.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    static const char* const names[] = {"/fuzz/volume.nrrd", "/fuzz/volume.nhdr", "/fuzz/volume.mha", "/fuzz/volume.mhd"};
    const std::filesystem::path file = names[data[0] % 4];
    const std::string_view header = gridwarp::fuzz::as_text(data + 1, size - 1);
    try {
        const auto volume = gridwarp::io::detail::parse_volume_header(header, header.size(), file);
        // What the caller relies on: a size product that fits, and at least one data file.
        if (volume.values == 0 || volume.component_bytes == 0 || volume.data_files.empty()) __builtin_trap();
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
