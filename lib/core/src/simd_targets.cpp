#include "simd_targets.hpp"

#include "gridwarp/simd.hpp"

#include <hwy/highway.h>
#include <hwy/targets.h>

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>

namespace gridwarp {

namespace {

std::string lower_case(std::string_view text) {
    std::string lowered(text);
    std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return lowered;
}

// Highway's processor check, from libhwy loaded now rather than at start-up (lib/core's
// CMakeLists.txt says why). Without the library, only the portable target is known to run.
std::int64_t processor_targets() {
    void* library = dlopen(GRIDWARP_HWY_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return HWY_STATIC_TARGET;
    using Query = std::int64_t (*)();
    const auto query = reinterpret_cast<Query>(dlsym(library, "_ZN3hwy16SupportedTargetsEv"));  // hwy::SupportedTargets()
    return query != nullptr ? query() : HWY_STATIC_TARGET;
}

// The compiled targets the processor supports, one bit each. Asked once: Highway 1.0 runs CPUID on
// every SupportedTargets() call, which a virtual machine traps (microseconds per sampling call).
std::int64_t supported_compiled_targets() {
    static const std::int64_t supported = processor_targets() & HWY_TARGETS;
    return supported;
}

// The target GRIDWARP_ISA names ("baseline": the portable fallback; "avx512": AVX3), or 0 for none.
std::int64_t capped_target() {
    const char* setting = std::getenv("GRIDWARP_ISA");
    if (setting == nullptr || *setting == '\0') return 0;
    const std::string wanted = lower_case(setting);
    if (wanted == "baseline") return HWY_STATIC_TARGET;
    if (wanted == "avx512") return HWY_AVX3;
    for (std::int64_t targets = HWY_TARGETS; targets != 0; targets &= targets - 1) {
        const std::int64_t target = targets & -targets;
        if (lower_case(hwy::TargetName(target)) == wanted) return target;
    }
    return 0;
}

}  // namespace

namespace detail {

std::int64_t allowed_simd_targets() {
    const std::int64_t cap = capped_target();
    std::int64_t allowed = supported_compiled_targets();
    // Better targets have lower bits: a cap keeps itself and the bits above it.
    if (cap != 0) allowed &= ~(cap - 1);
    return allowed;
}

}  // namespace detail

std::vector<std::string> simd_targets() {
    std::vector<std::string> names;
    for (std::int64_t targets = supported_compiled_targets(); targets != 0; targets &= targets - 1) {
        names.push_back(lower_case(hwy::TargetName(targets & -targets)));
    }
    return names;
}

std::string simd_target() {
    const std::int64_t allowed = detail::allowed_simd_targets();
    return allowed == 0 ? std::string("scalar") : lower_case(hwy::TargetName(allowed & -allowed));
}

}  // namespace gridwarp
