// Internal: the 2x2(x2) means that make each level of a pyramid from the one below.
#pragma once

#include <cstdint>
#include <type_traits>

#include "gridwarp/dtype.hpp"

namespace gridwarp::io::detail {

// A block of a level (its valid part `in` of a chunk laid out `in_chunk`, channels interleaved)
// halved into its part of a chunk of the next level (laid out `out_chunk`, at `offset`), as three
// axes, outermost first; an axis with `step` 1 is not halved.
struct HalvedBlock {
    std::int64_t in[3] = {1, 1, 1}, in_chunk[3] = {1, 1, 1}, out_chunk[3] = {1, 1, 1}, offset[3] = {0, 0, 0}, step[3] = {1, 1, 1};
};

// Each value of the halved block is the mean of the values it covers (fewer at an odd edge); an
// integer mean is rounded to the nearest value, ties to even.
template <class T>
void halve_block(const HalvedBlock& block, std::int64_t channels, const T* child, T* parent) {
    const auto& [in, in_chunk, out_chunk, offset, step] = block;
    std::int64_t out[3];
    for (int k = 0; k < 3; ++k) out[k] = (in[k] + step[k] - 1) / step[k];
    using Sum = std::conditional_t<std::is_floating_point_v<T> || std::is_same_v<T, float16>, double, __int128>;
    for (std::int64_t z = 0; z < out[0]; ++z) {
        for (std::int64_t y = 0; y < out[1]; ++y) {
            for (std::int64_t x = 0; x < out[2]; ++x) {
                T* target = parent + (((offset[0] + z) * out_chunk[1] + offset[1] + y) * out_chunk[2] + offset[2] + x) * channels;
                for (std::int64_t c = 0; c < channels; ++c) {
                    Sum sum = 0;
                    std::int64_t count = 0;
                    for (std::int64_t dz = 0; dz < step[0] && z * step[0] + dz < in[0]; ++dz) {
                        for (std::int64_t dy = 0; dy < step[1] && y * step[1] + dy < in[1]; ++dy) {
                            for (std::int64_t dx = 0; dx < step[2] && x * step[2] + dx < in[2]; ++dx) {
                                const T value = child[(((z * step[0] + dz) * in_chunk[1] + y * step[1] + dy) * in_chunk[2] + x * step[2] + dx) * channels + c];
                                if constexpr (std::is_same_v<T, float16>) {
                                    sum += static_cast<double>(static_cast<float>(value));
                                } else {
                                    sum += static_cast<Sum>(value);
                                }
                                ++count;
                            }
                        }
                    }
                    if constexpr (std::is_same_v<Sum, double>) {
                        const double mean = sum / static_cast<double>(count);
                        if constexpr (std::is_same_v<T, float16>) {
                            target[c] = float16(static_cast<float>(mean));
                        } else {
                            target[c] = static_cast<T>(mean);
                        }
                    } else {
                        Sum quotient = sum / count, remainder = sum % count;
                        if (remainder < 0) {  // floor division
                            quotient -= 1;
                            remainder += count;
                        }
                        if (2 * remainder > count || (2 * remainder == count && (quotient & 1) != 0)) quotient += 1;
                        target[c] = static_cast<T>(quotient);
                    }
                }
            }
        }
    }
}

}  // namespace gridwarp::io::detail
