// Which of the compiled Highway targets a call may use (gridwarp/simd.hpp), and picking a
// function from a table with one entry per target.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gridwarp::detail {

// Highway target bits (HWY_AVX2, ...) that are compiled, supported by the processor, and at or
// below GRIDWARP_ISA's cap; read on every call, so a test may change the variable between calls.
std::int64_t allowed_simd_targets();

template <class Function>
struct TargetFunction {
    std::int64_t target = 0;
    Function function = nullptr;  // nullptr: nothing compiled for this target
};

// The function of the best allowed target in the table (Highway numbers better targets lower),
// or nullptr where no allowed target has one.
template <class Function, std::size_t N>
Function best_allowed_function(const TargetFunction<Function> (&table)[N]) {
    const std::int64_t allowed = allowed_simd_targets();
    Function best = nullptr;
    std::int64_t best_target = 0;
    for (const auto& entry : table) {
        if (entry.function == nullptr || (allowed & entry.target) == 0) continue;
        if (best == nullptr || entry.target < best_target) {
            best = entry.function;
            best_target = entry.target;
        }
    }
    return best;
}

}  // namespace gridwarp::detail
