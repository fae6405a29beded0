// gridwarp batch manifests (app/batch_manifest.cpp): CSV with quoting, TSV, and JSON lines.
//
// Input: one selector byte (% 3: .csv, .tsv, .jsonl), then the manifest's text. The columns are
// those of `gridwarp affine`, as far as the parser needs them.
#include <cstdint>
#include <set>
#include <string>

#include "batch_manifest.hpp"
#include "fuzz_support.hpp"

namespace {

const std::set<std::string> kAffineOptions = {"input",  "output", "theta",   "matrix",  "rotate",  "scale",   "shift",
                                              "size",   "mode",   "padding", "align-corners", "fill", "threads",
                                              "quiet",  "verbose", "transform", "help"};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gridwarp::cli;
    if (size < 1) return 0;
    static const char* const kNames[] = {"jobs/fuzz.csv", "jobs/fuzz.tsv", "jobs/fuzz.jsonl"};
    const ManifestColumns columns{[](const std::string& name) { return kAffineOptions.count(name) != 0; },
                                  [](const std::string& name) { return name == "transform"; }};
    try {
        (void)parse_manifest(std::string(gridwarp::fuzz::as_text(data + 1, size - 1)), kNames[data[0] % 3], columns);
    } catch (const BatchSetupError&) {
    }
    return 0;
}
