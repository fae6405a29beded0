// The fast path's vectorised stages (fast_stages.hpp), compiled once per Highway target and chosen
// per call like every other kernel (simd_targets.hpp). They are scalar loops that the compiler
// vectorises; each target's copy is compiled with that target's instructions. SSE4 is left out: it
// gives these loops nothing over the portable code's SSE2, and would only add compile time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "fast_stages.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "fast_stages.hpp"
#include "simd_targets.hpp"

HWY_BEFORE_NAMESPACE();
namespace gridwarp::detail {
namespace HWY_NAMESPACE {

#if HWY_TARGET != HWY_SSE4 || HWY_TARGET == HWY_STATIC_TARGET

#if HWY_TARGET == HWY_STATIC_TARGET && HWY_TARGETS != HWY_STATIC_TARGET && !defined(__clang__)
// The portable copy runs only where the processor has none of the other targets: GCC compiles it
// at -O2 in half of -O3's time or less (docs/performance.md, "Build"), where speed matters least.
#pragma GCC optimize("O2")
#endif
#if HWY_TARGET == HWY_AVX3
// 256-bit vectors on AVX-512 too: these loops gather a tap per lane, and the wider gathers made
// the whole call slower (docs/performance.md, "Tuning choices").
#pragma GCC target("prefer-vector-width=256")
#endif

template <class C, class Interp, class Pad, int Rank>
void FastPlan(const C* xyz, std::int64_t count, const InputGeometry& geometry, FastBlock<C>& block) {
    fast_plan_body<C, Interp, Pad, Rank>(xyz, count, geometry, block);
}

// (Functions of their own: GCC vectorises where the restrict pointers are the parameters of a
// function that is not inlined.)
template <bool WithTapWeights, class S, class C, int K, int Rank>
GRIDWARP_NOINLINE void DenseGatherChannel(std::int64_t count, const std::int32_t* __restrict base,
                                          const std::int32_t* __restrict tap_offset, const C* __restrict axis_weight,
                                          const typename real_of<typename compute_type<S>::type>::type* __restrict tap_weights,
                                          const S* __restrict in, S* __restrict out, std::int64_t out_stride) {
    dense_gather_body<WithTapWeights, S, C, K, Rank>(count, base, tap_offset, axis_weight, tap_weights, in, out, out_stride);
}

template <class R, class C, int K, int Rank>
GRIDWARP_NOINLINE void TapWeights(std::int64_t count, const C* __restrict axis_weight, R* __restrict tap_weights) {
    tap_weights_body<R, C, K, Rank>(count, axis_weight, tap_weights);
}

template <class C>
FastPlanFunction<C> SelectFastPlanner(Interpolation mode, Padding padding, int rank) {
    return visit_interpolation(mode, [&](auto interp) {
        return visit_padding(padding, [&](auto pad) -> FastPlanFunction<C> {
            using I = typename decltype(interp)::type;
            using P = typename decltype(pad)::type;
            return rank == 2 ? &FastPlan<C, I, P, 2> : &FastPlan<C, I, P, 3>;
        });
    });
}

template <class S, class C, int K, int Rank>
DenseKernels<S, C> DenseKernelsOf() {
    using R = typename real_of<typename compute_type<S>::type>::type;
    DenseKernels<S, C> kernels;
    kernels.computing_weights = &DenseGatherChannel<false, S, C, K, Rank>;
    if constexpr (K > 1) {
        kernels.with_tap_weights = &DenseGatherChannel<true, S, C, K, Rank>;
        kernels.tap_weights = &TapWeights<R, C, K, Rank>;
    }
    return kernels;
}

template <class S, class C>
DenseKernels<S, C> SelectDenseKernels(Interpolation mode, int rank) {
    return visit_interpolation(mode, [&](auto interp) {
        constexpr int K = decltype(interp)::type::taps;
        return rank == 2 ? DenseKernelsOf<S, C, K, 2>() : DenseKernelsOf<S, C, K, 3>();
    });
}

#endif

}  // namespace HWY_NAMESPACE
}  // namespace gridwarp::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gridwarp::detail {

// The function of the best allowed target in the table; the portable code's where no target is
// allowed (Highway's processor check could not be loaded).
template <class Function, std::size_t N>
Function best_or_portable(const TargetFunction<Function> (&table)[N]) {
    const Function best = best_allowed_function(table);
    return best != nullptr ? best : table[N - 1].function;
}

template <class C>
FastPlanFunction<C> select_fast_planner(Interpolation mode, Padding padding, int rank) {
    using Select = FastPlanFunction<C> (*)(Interpolation, Padding, int);
    const TargetFunction<Select> table[] = {
#if HWY_TARGETS & HWY_AVX3
        {HWY_AVX3, &N_AVX3::SelectFastPlanner<C>},
#endif
#if HWY_TARGETS & HWY_AVX2
        {HWY_AVX2, &N_AVX2::SelectFastPlanner<C>},
#endif
#if (HWY_TARGETS & HWY_NEON) && HWY_STATIC_TARGET != HWY_NEON
        {HWY_NEON, &N_NEON::SelectFastPlanner<C>},
#endif
        {HWY_STATIC_TARGET, &HWY_STATIC_DISPATCH(SelectFastPlanner)<C>},
    };
    return best_or_portable(table)(mode, padding, rank);
}

template <class S, class C>
DenseKernels<S, C> select_dense_kernels(Interpolation mode, int rank) {
    using Select = DenseKernels<S, C> (*)(Interpolation, int);
    const TargetFunction<Select> table[] = {
#if HWY_TARGETS & HWY_AVX3
        {HWY_AVX3, &N_AVX3::SelectDenseKernels<S, C>},
#endif
#if HWY_TARGETS & HWY_AVX2
        {HWY_AVX2, &N_AVX2::SelectDenseKernels<S, C>},
#endif
#if (HWY_TARGETS & HWY_NEON) && HWY_STATIC_TARGET != HWY_NEON
        {HWY_NEON, &N_NEON::SelectDenseKernels<S, C>},
#endif
        {HWY_STATIC_TARGET, &HWY_STATIC_DISPATCH(SelectDenseKernels)<S, C>},
    };
    return best_or_portable(table)(mode, rank);
}

template FastPlanFunction<float> select_fast_planner<float>(Interpolation, Padding, int);
template FastPlanFunction<double> select_fast_planner<double>(Interpolation, Padding, int);

#define GRIDWARP_INSTANTIATE_DENSE_KERNELS(S)                                                   \
    template DenseKernels<S, float> select_dense_kernels<S, float>(Interpolation, int);         \
    template DenseKernels<S, double> select_dense_kernels<S, double>(Interpolation, int);
GRIDWARP_INSTANTIATE_DENSE_KERNELS(float)
GRIDWARP_INSTANTIATE_DENSE_KERNELS(double)
GRIDWARP_INSTANTIATE_DENSE_KERNELS(std::uint8_t)
GRIDWARP_INSTANTIATE_DENSE_KERNELS(std::int8_t)
GRIDWARP_INSTANTIATE_DENSE_KERNELS(std::uint16_t)
GRIDWARP_INSTANTIATE_DENSE_KERNELS(std::int16_t)

}  // namespace gridwarp::detail
#endif  // HWY_ONCE
