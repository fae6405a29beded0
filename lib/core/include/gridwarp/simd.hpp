// The SIMD targets the sampler was compiled for (Highway's), and the one it uses. The environment
// variable GRIDWARP_ISA caps the choice at a target, by name ("avx2", "sse4", ...; "baseline" for
// the portable code), so that tests and benchmarks can run every target a processor has.
#pragma once

#include <string>
#include <vector>

namespace gridwarp {

// The compiled targets this processor runs, best first, by Highway's names in lower case
// ("avx3", "avx2", "sse4", "neon", "scalar", ...), ignoring GRIDWARP_ISA.
std::vector<std::string> simd_targets();
// The target the sampler uses now: the best of simd_targets() at or below GRIDWARP_ISA's cap.
std::string simd_target();

}  // namespace gridwarp
