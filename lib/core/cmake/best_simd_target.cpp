// Configure-time probe (lib/core/CMakeLists.txt): prints the name of the best Highway target among
// those gridwarp compiles that this processor runs, or nothing when it runs none of them.
#include <hwy/targets.h>

#include <cstdint>
#include <cstdio>

int main() {
    const std::int64_t compiled = HWY_AVX3 | HWY_AVX2 | HWY_SSE4 | HWY_NEON;
    const std::int64_t supported = hwy::SupportedTargets() & compiled;
    // Better targets have lower bits.
    if (supported != 0) std::printf("%s", hwy::TargetName(supported & -supported));
    return 0;
}
