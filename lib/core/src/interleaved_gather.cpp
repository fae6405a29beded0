// Compiled once per Highway target (foreach_target.h re-includes this file); the gather itself
// only for targets with hardware gathers, where one gather per tap beats a load per channel.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "interleaved_gather.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "interleaved_gather.hpp"
#include "simd_targets.hpp"

#include <cstddef>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace gridwarp::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

template <class S, int Channels, int T>
std::int64_t InterleavedGather(std::int64_t count, const std::int32_t* HWY_RESTRICT base, const std::int32_t* HWY_RESTRICT tap_offset,
                               const float* HWY_RESTRICT tap_weights, std::int64_t weight_stride, const S* HWY_RESTRICT in,
                               S* HWY_RESTRICT out, std::int64_t out_point_stride, std::int64_t out_channel_stride) {
    static_assert(std::is_same_v<S, std::uint8_t> || std::is_same_v<S, std::uint16_t>);
    const hn::ScalableTag<std::int32_t> di;
    const hn::Rebind<float, decltype(di)> df;
    const hn::Rebind<S, decltype(di)> ds;
    using FloatVec = hn::Vec<decltype(df)>;
    constexpr int kPerWord = 4 / static_cast<int>(sizeof(S));
    constexpr int kWords = (Channels + kPerWord - 1) / kPerWord;
    constexpr int kBits = 8 * static_cast<int>(sizeof(S));
    const auto value_mask = hn::Set(di, (1 << kBits) - 1);
    const auto element_bytes = hn::Set(di, static_cast<std::int32_t>(sizeof(S)));
    const auto lanes = static_cast<std::int64_t>(hn::Lanes(di));
    constexpr std::size_t kMaxLanes = 64 / sizeof(std::int32_t);
    HWY_ALIGN S values[kMaxLanes];
    std::int64_t p = 0;
    for (; p + lanes <= count; p += lanes) {
        const auto first = hn::LoadU(di, base + p);
        FloatVec sum[Channels];
        for (int c = 0; c < Channels; ++c) sum[c] = hn::Zero(df);
#pragma GCC unroll 64
        for (int t = 0; t < T; ++t) {
            const auto byte_offset = hn::Mul(hn::Add(first, hn::Set(di, tap_offset[t])), element_bytes);
            const auto weight = hn::LoadU(df, tap_weights + t * weight_stride + p);
            for (int w = 0; w < kWords; ++w) {
                // (A gather of 32-bit words from a byte address: the words need no alignment.)
                const auto words = hn::GatherOffset(di, reinterpret_cast<const std::int32_t*>(in + w * kPerWord), byte_offset);
                for (int k = 0; k < kPerWord && w * kPerWord + k < Channels; ++k) {
                    const auto value = hn::ConvertTo(df, hn::And(hn::ShiftRightSame(words, kBits * k), value_mask));
                    sum[w * kPerWord + k] = hn::Add(sum[w * kPerWord + k], hn::Mul(weight, value));
                }
            }
        }
        for (int c = 0; c < Channels; ++c) {
            // NearestInt rounds half to even; DemoteTo saturates to the pixel type.
            hn::Store(hn::DemoteTo(ds, hn::NearestInt(sum[c])), ds, values);
            S* o = out + c * out_channel_stride + p * out_point_stride;
            for (std::int64_t i = 0; i < lanes; ++i) o[i * out_point_stride] = values[i];
        }
    }
    return p;
}

#endif

}  // namespace HWY_NAMESPACE
}  // namespace gridwarp::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gridwarp::detail {

namespace {

template <class S, int Channels, int T>
InterleavedGatherFunction<S> best_interleaved_gather() {
    const TargetFunction<InterleavedGatherFunction<S>> table[] = {
#if HWY_TARGETS & HWY_AVX3
        {HWY_AVX3, &N_AVX3::InterleavedGather<S, Channels, T>},
#endif
#if HWY_TARGETS & HWY_AVX2
        {HWY_AVX2, &N_AVX2::InterleavedGather<S, Channels, T>},
#endif
        {0, nullptr},
    };
    return best_allowed_function(table);
}

template <class S, int Channels>
InterleavedGatherFunction<S> for_taps(int taps) {
    switch (taps) {
        case 4: return best_interleaved_gather<S, Channels, 4>();
        case 8: return best_interleaved_gather<S, Channels, 8>();
        case 16: return best_interleaved_gather<S, Channels, 16>();
        case 64: return best_interleaved_gather<S, Channels, 64>();
        default: return nullptr;
    }
}

}  // namespace

template <class S>
InterleavedGatherFunction<S> select_interleaved_gather(std::int64_t channels, int taps) {
    switch (channels) {
        case 2: return for_taps<S, 2>(taps);
        case 3: return for_taps<S, 3>(taps);
        case 4: return for_taps<S, 4>(taps);
        default: return nullptr;
    }
}

template InterleavedGatherFunction<std::uint8_t> select_interleaved_gather<std::uint8_t>(std::int64_t, int);
template InterleavedGatherFunction<std::uint16_t> select_interleaved_gather<std::uint16_t>(std::int64_t, int);

}  // namespace gridwarp::detail
#endif  // HWY_ONCE
