// The separable path: the kinds beyond ONNX (B-splines, windowed sincs), any rank and type. Their
// supports are wide (up to 6^3 taps), so a point keeps its taps per axis (the input offset along
// the axis, -1 outside under zeros padding, and the weight) instead of their tensor product, and is
// summed nested, innermost axis first. A tap whose weight along some axis is zero is skipped (the
// zero-weight rule, per axis).
#include "sampler_task.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gridwarp::detail {

namespace {

template <class C>
struct AxisTaps {
    int taps = 0;                       // per axis
    bool offsets_of_interior = true;    // false: interior points get only base and weights
    std::vector<std::int64_t> offset;   // points x rank x taps; -1: outside, read the fill value
    std::vector<C> weight;              // points x rank x taps
    std::vector<unsigned char> fill;    // per point: 1 when the whole point is the fill value
    // per point: kInteriorTaps, kInsideTaps or kTapsByRule
    std::vector<unsigned char> interior;
    std::vector<std::int64_t> base;     // per interior point: the offset of its first tap
};

constexpr unsigned char kTapsByRule = 0;    // some tap outside: summed by the padding rule
constexpr unsigned char kInteriorTaps = 1;  // every tap inside, consecutive along each axis
constexpr unsigned char kInsideTaps = 2;    // every tap inside, mapped there by the padding rule

template <class C>
using AxisPlanFunction = void (*)(const C* xyz, std::int64_t count, const InputGeometry& geometry, AxisTaps<C>& plan);

// Points planned at once by plan_interior_lanes.
constexpr int kInteriorLanes = 4;

template <class C>
C pixel_coordinate(C g, std::int64_t extent, const InputGeometry& geometry) {
    return geometry.space == CoordinateSpace::Normalized ? unnormalize(g, extent, geometry.align_corners) : g;
}

// The index of the first tap of pixel coordinate u where all the kind's taps lie inside an axis of
// `extent`, so that no padding rule applies; -1 where they do not (a NaN included). Kinds with a
// tap origin are checked on the origin itself, where truncation is floor.
template <class C, class Interp>
std::int64_t interior_first_tap(C u, std::int64_t extent) {
    constexpr int K = Interp::taps;
    if constexpr (requires { Interp::taps_before; }) {
        const C origin = Interp::tap_origin(u);
        const bool interior = origin >= C(Interp::taps_before) && origin < static_cast<C>(extent - K + Interp::taps_before + 1);
        return interior ? static_cast<std::int64_t>(origin) - Interp::taps_before : -1;
    } else {
        const C first = Interp::first_tap(u);
        return first >= C(0) && first <= static_cast<C>(extent - K) ? static_cast<std::int64_t>(first) : -1;
    }
}

// The taps of a point whose taps lie inside the input along every axis, where no padding rule
// applies: weights and the first tap's offset only. False where some axis is not interior.
template <class C, class Interp>
bool plan_interior_point(const C* coords, const InputGeometry& geometry, C* weight, std::int64_t& base) {
    constexpr int K = Interp::taps;
    const int rank = geometry.rank;
    base = 0;
    for (int a = 0; a < rank; ++a) {
        const std::int64_t d = geometry.extent[a];
        const C u = pixel_coordinate(coords[rank - 1 - a], d, geometry);
        const std::int64_t first = interior_first_tap<C, Interp>(u, d);
        if (first < 0) return false;
        Interp::weights(u, static_cast<C>(first), weight + a * K);
        base += first * geometry.stride[a];
    }
    return true;
}

// Every tap of one point, padding rules applied per axis where the taps leave the input.
template <class C, class Interp, class Pad>
void plan_point(const C* coords, const InputGeometry& geometry, AxisTaps<C>& plan, std::int64_t p) {
    constexpr int K = Interp::taps;
    const int rank = geometry.rank;
    std::int64_t* offset = plan.offset.data() + p * rank * K;
    C* weight = plan.weight.data() + p * rank * K;
    bool inside = true;
    bool interior = true;
    std::int64_t base = 0;
    for (int a = 0; a < rank; ++a) {
        const std::int64_t d = geometry.extent[a];
        const C g = coords[rank - 1 - a];
        // Taps all inside the axis: no padding rule applies, so the taps and weights are axis_taps'
        // without its folding, bounds and per-tap mapping.
        const C u = pixel_coordinate(g, d, geometry);
        const std::int64_t first = interior_first_tap<C, Interp>(u, d);
        if (first >= 0) {
            Interp::weights(u, static_cast<C>(first), weight + a * K);
            const std::int64_t first_offset = first * geometry.stride[a];
            for (int k = 0; k < K; ++k) offset[a * K + k] = first_offset + k * geometry.stride[a];
            base += first_offset;
            continue;
        }
        interior = false;
        inside = axis_taps<C, Interp, Pad>(g, d, geometry.align_corners, geometry.space, offset + a * K, weight + a * K);
        // (Where it returns false, the later axes' taps are left as an earlier point had them.)
        if (!inside) break;
        for (int k = 0; k < K; ++k) offset[a * K + k] = offset[a * K + k] < 0 ? -1 : offset[a * K + k] * geometry.stride[a];
    }
    bool taps_inside = inside;
    for (int t = 0; t < rank * K && taps_inside; ++t) taps_inside = offset[t] >= 0;
    plan.fill[static_cast<std::size_t>(p)] = inside ? 0 : 1;
    plan.interior[static_cast<std::size_t>(p)] = !taps_inside ? kTapsByRule : interior ? kInteriorTaps : kInsideTaps;
    plan.base[static_cast<std::size_t>(p)] = base;
}

// plan_interior_point for kLanes points of a 3-D input at once, where the kind computes weights
// lane by lane; false, with nothing written, where some point is not interior.
template <class C, class Interp>
bool plan_interior_lanes(const C* xyz, const InputGeometry& geometry, C* weight, std::int64_t* base) {
    constexpr int K = Interp::taps;
    constexpr int kRank = 3;
    constexpr int N = kInteriorLanes;
    C u[kRank][N], first[kRank][N], w[kRank][K * N];
    std::int64_t first_index[kRank][N];
    bool interior = true;
    for (int a = 0; a < kRank; ++a) {
        const std::int64_t d = geometry.extent[a];
        for (int b = 0; b < N; ++b) u[a][b] = pixel_coordinate(xyz[b * kRank + kRank - 1 - a], d, geometry);
        for (int b = 0; b < N; ++b) {
            first_index[a][b] = interior_first_tap<C, Interp>(u[a][b], d);
            interior &= first_index[a][b] >= 0;
        }
    }
    if (!interior) return false;
    for (int a = 0; a < kRank; ++a) {
        for (int b = 0; b < N; ++b) first[a][b] = static_cast<C>(first_index[a][b]);
        Interp::template weights_of_lanes<N>(u[a], first[a], w[a]);
    }
    for (int b = 0; b < N; ++b) {
        base[b] = first_index[0][b] * geometry.stride[0] + first_index[1][b] * geometry.stride[1] + first_index[2][b] * geometry.stride[2];
        for (int a = 0; a < kRank; ++a) {
            for (int k = 0; k < K; ++k) weight[(b * kRank + a) * K + k] = w[a][k * N + b];
        }
    }
    return true;
}

template <class C, class Interp, class Pad>
void plan_axis_taps(const C* xyz, std::int64_t count, const InputGeometry& geometry, AxisTaps<C>& plan) {
    const int rank = geometry.rank;
    constexpr int K = Interp::taps;
    bool lanes = false;
    if constexpr (requires { &Interp::template weights_of_lanes<kInteriorLanes, C>; }) {
        lanes = !plan.offsets_of_interior && rank == 3;
    }
    std::int64_t p = 0;
    while (p < count) {
        // Blocks of kInteriorLanes points at once where all are interior, else point by point.
        const std::int64_t block_end = lanes ? std::min<std::int64_t>(p + kInteriorLanes, count) : count;
        if constexpr (requires { &Interp::template weights_of_lanes<kInteriorLanes, C>; }) {
            if (lanes && block_end - p == kInteriorLanes &&
                plan_interior_lanes<C, Interp>(xyz + p * rank, geometry, plan.weight.data() + p * rank * K, plan.base.data() + p)) {
                std::fill_n(plan.fill.begin() + p, kInteriorLanes, 0);
                std::fill_n(plan.interior.begin() + p, kInteriorLanes, kInteriorTaps);
                p = block_end;
                continue;
            }
        }
        for (; p < block_end; ++p) {
            const C* coords = xyz + p * rank;
            if constexpr (requires { Interp::taps_before; }) {
                if (!plan.offsets_of_interior &&
                    plan_interior_point<C, Interp>(coords, geometry, plan.weight.data() + p * rank * K, plan.base[static_cast<std::size_t>(p)])) {
                    plan.fill[static_cast<std::size_t>(p)] = 0;
                    plan.interior[static_cast<std::size_t>(p)] = kInteriorTaps;
                    continue;
                }
            }
            plan_point<C, Interp, Pad>(coords, geometry, plan, p);
        }
    }
}

template <class C>
using PointPlanFunction = void (*)(const C* coords, const InputGeometry& geometry, AxisTaps<C>& plan, std::int64_t p);

template <class C>
struct AxisPlanners {
    AxisPlanFunction<C> row;
    PointPlanFunction<C> point;  // one point with every offset, for the sums by the rule
};

template <class C>
AxisPlanners<C> select_axis_planners(const SampleOptions& options) {
    return visit_any_interpolation(options.mode, options.spline_order, [&](auto interp) {
        return visit_padding(options.padding, [&](auto pad) -> AxisPlanners<C> {
            using Interp = typename decltype(interp)::type;
            using Pad = typename decltype(pad)::type;
            return {&plan_axis_taps<C, Interp, Pad>, &plan_point<C, Interp, Pad>};
        });
    });
}

// The nested sum over axes axis..rank-1 from `base`; `outside`: an outer tap is outside the input.
// Taps and Rank are 0 where known only at run time (`taps`, `rank`); fixed, the loops unroll.
template <int Taps, int Rank, class V, class S, class C>
V separable_sum(const S* input, const std::int64_t* offset, const C* weight, int taps, int rank, int axis, std::int64_t base,
                bool outside, V fill_value) {
    using R = typename real_of<V>::type;
    if constexpr (Taps > 0) taps = Taps;
    if constexpr (Rank > 0) rank = Rank;
    const std::int64_t* axis_offset = offset + axis * taps;
    const C* axis_weight = weight + axis * taps;
    V sum = V(0);
    for (int k = 0; k < taps; ++k) {
        const R w = static_cast<R>(axis_weight[k]);
        if (w == R(0)) continue;
        const bool tap_outside = outside || axis_offset[k] < 0;
        if (axis == rank - 1) {
            sum += w * (tap_outside ? fill_value : load<V>(input[base + axis_offset[k]]));
        } else {
            sum += w * separable_sum<Taps, Rank, V>(input, offset, weight, taps, rank, axis + 1,
                                                    tap_outside ? base : base + axis_offset[k], tap_outside, fill_value);
        }
    }
    return sum;
}

template <class V>
bool is_nan(const V& value) {
    if constexpr (std::is_arithmetic_v<V>) {
        return std::isnan(value);
    } else {
        return std::isnan(value.real()) || std::isnan(value.imag());
    }
}

// An interior point of a 3-D input: the same nested sum with K taps per axis fixed and no per-tap
// test, which the compiler unrolls. Taps of zero weight are summed too: where that gives NaN the
// caller sums again by the rule (as the fast paths do, sampling_policies.hpp).
template <int K, class V, class S, class C>
V separable_interior_3d(const S* input, std::int64_t base, const std::int64_t* stride, const C* weight) {
    using R = typename real_of<V>::type;
    R w[3 * K];
    for (int t = 0; t < 3 * K; ++t) w[t] = static_cast<R>(weight[t]);
    if constexpr (std::is_arithmetic_v<V>) {
        if (stride[2] == 1) {
            // Contiguous rows: one sum per innermost tap and plane, each a short independent chain the
            // compiler keeps in vector registers, instead of one long dependent chain of scalars.
            V column[K] = {};
            for (int k = 0; k < K; ++k) {
                V plane[K] = {};
                for (int j = 0; j < K; ++j) {
                    const S* line = input + base + k * stride[0] + j * stride[1];
                    for (int i = 0; i < K; ++i) plane[i] += w[K + j] * load<V>(line[i]);
                }
                for (int i = 0; i < K; ++i) column[i] += w[k] * plane[i];
            }
            V sum = V(0);
            for (int i = 0; i < K; ++i) sum += w[2 * K + i] * column[i];
            return sum;
        }
    }
    V sum = V(0);
    for (int k = 0; k < K; ++k) {
        V plane = V(0);
        for (int j = 0; j < K; ++j) {
            const S* line = input + base + k * stride[0] + j * stride[1];
            V row = V(0);
            for (int i = 0; i < K; ++i) row += w[2 * K + i] * load<V>(line[i * stride[2]]);
            plane += w[K + j] * row;
        }
        sum += w[k] * plane;
    }
    return sum;
}

// The same for float32 input with 4 taps per axis: a row of taps is one vector of 4 floats, and the
// sums are short independent chains. GCC's vector extension, not Highway: this file is compiled once,
// where Highway 1.0's portable target is scalar; the extension gives SSE2 on x86-64, NEON on ARM.
template <class C>
float separable_interior_3d_f32x4(const float* input, std::int64_t base, const std::int64_t* stride, const C* weight) {
    using Float4 = float __attribute__((vector_size(16)));
    Float4 column = {};
    for (int k = 0; k < 4; ++k) {
        Float4 plane = {};
        for (int j = 0; j < 4; ++j) {
            Float4 row;
            std::memcpy(&row, input + base + k * stride[0] + j * stride[1], sizeof row);
            plane += static_cast<float>(weight[4 + j]) * row;
        }
        column += static_cast<float>(weight[k]) * plane;
    }
    const Float4 along_x = {static_cast<float>(weight[8]), static_cast<float>(weight[9]), static_cast<float>(weight[10]),
                            static_cast<float>(weight[11])};
    const Float4 terms = column * along_x;
    return ((terms[0] + terms[1]) + terms[2]) + terms[3];
}

// A point of a 3-D input whose taps are all inside but not consecutive (mapped by the padding
// rule near an edge): the nested sum of separable_sum without its per-tap tests, NaN as above.
template <int K, class V, class S, class C>
V separable_inside_3d(const S* input, const std::int64_t* offset, const C* weight) {
    using R = typename real_of<V>::type;
    V sum = V(0);
    for (int k = 0; k < K; ++k) {
        V plane = V(0);
        for (int j = 0; j < K; ++j) {
            const S* line = input + offset[k] + offset[K + j];
            V row = V(0);
            for (int i = 0; i < K; ++i) row += static_cast<R>(weight[2 * K + i]) * load<V>(line[offset[2 * K + i]]);
            plane += static_cast<R>(weight[K + j]) * row;
        }
        sum += static_cast<R>(weight[k]) * plane;
    }
    return sum;
}

template <class S, class C>
void run_separable(const Task& task) {
    const auto& input = task.input;
    const auto& output = task.output;
    const auto& options = task.options;
    const int rank = static_cast<int>(input.rank()) - 2;
    const std::int64_t channels = input.shape[1];
    const std::int64_t width = task.positions.output_shape().back();
    const int taps = taps_per_axis(options.mode, options.spline_order);
    constexpr std::int64_t kChunk = 256;
    const std::int64_t chunk = std::min(kChunk, std::max<std::int64_t>(width, 1));

    const InputGeometry geometry{rank, input.shape.data() + 2, input.strides.data() + 2, options.align_corners,
                                 task.positions.space()};
    const AxisPlanners<C> planners = select_axis_planners<C>(options);
    // A point on a pixel copies a 64-bit integer (a double holds them exactly only up to 2^53):
    // its weights are then one 1 per axis, read with every offset planned.
    constexpr bool kCopiesOnPixel = std::is_same_v<S, std::int64_t> || std::is_same_v<S, std::uint64_t>;
    // The interior sums below take base and weights; the sums by the rule take offsets.
    const bool interior_sums = !kCopiesOnPixel && rank == 3 && (taps == 4 || taps == 6);
    const Fill<S> fill(options.fill);
    const auto fill_value = Fill<S>(options.outside_tap_value.value_or(options.fill)).value;
    using V = typename compute_type<S>::type;
    const S* in_data = input.typed<S>();
    S* out_data = output.typed<S>();

    struct Scratch {
        AxisTaps<C> plan;
        std::vector<C> xyz;
    };
    const auto make_scratch = [&] {
        Scratch scratch;
        scratch.plan.taps = taps;
        scratch.plan.offsets_of_interior = !interior_sums;
        scratch.plan.offset.resize(static_cast<std::size_t>(chunk * rank * taps));
        scratch.plan.weight.resize(static_cast<std::size_t>(chunk * rank * taps));
        scratch.plan.fill.resize(static_cast<std::size_t>(chunk));
        scratch.plan.interior.resize(static_cast<std::size_t>(chunk));
        scratch.plan.base.resize(static_cast<std::size_t>(chunk));
        scratch.xyz.resize(static_cast<std::size_t>(chunk * rank));
        return scratch;
    };
    const auto sum_point = [&](const S* channel_in, Scratch& scratch, std::int64_t p) -> V {
        AxisTaps<C>& plan = scratch.plan;
        const std::int64_t* offset = plan.offset.data() + p * rank * taps;
        const C* weight = plan.weight.data() + p * rank * taps;
        if (interior_sums && plan.interior[static_cast<std::size_t>(p)] == kInsideTaps) {
            const V sum = taps == 4 ? separable_inside_3d<4, V>(channel_in, offset, weight) : separable_inside_3d<6, V>(channel_in, offset, weight);
            if (!is_nan(sum)) return sum;
        }
        if (interior_sums && plan.interior[static_cast<std::size_t>(p)] == kInteriorTaps) {
            const std::int64_t base = plan.base[static_cast<std::size_t>(p)];
            V sum;
            if constexpr (std::is_same_v<S, float>) {
                sum = taps == 4 && geometry.stride[2] == 1 ? separable_interior_3d_f32x4(channel_in, base, geometry.stride, weight)
                      : taps == 4                          ? separable_interior_3d<4, V>(channel_in, base, geometry.stride, weight)
                                                           : separable_interior_3d<6, V>(channel_in, base, geometry.stride, weight);
            } else {
                sum = taps == 4 ? separable_interior_3d<4, V>(channel_in, base, geometry.stride, weight)
                                : separable_interior_3d<6, V>(channel_in, base, geometry.stride, weight);
            }
            if (!is_nan(sum)) return sum;
            planners.point(scratch.xyz.data() + p * rank, geometry, plan, p);
        }
        if (rank == 3 && taps == 4) return separable_sum<4, 3, V>(channel_in, offset, weight, taps, rank, 0, 0, false, fill_value);
        if (rank == 3 && taps == 6) return separable_sum<6, 3, V>(channel_in, offset, weight, taps, rank, 0, 0, false, fill_value);
        return separable_sum<0, 0, V>(channel_in, offset, weight, taps, rank, 0, 0, false, fill_value);
    };
    const auto pixel_of_point = [&](const S* channel_in, const AxisTaps<C>& plan, std::int64_t p) -> const S* {
        const std::int64_t* offset = plan.offset.data() + p * rank * taps;
        const C* weight = plan.weight.data() + p * rank * taps;
        std::int64_t at = 0;
        for (int a = 0; a < rank; ++a) {
            int only = -1;
            for (int k = 0; k < taps; ++k) {
                if (weight[a * taps + k] == C(0)) continue;
                if (only != -1 || weight[a * taps + k] != C(1)) return nullptr;
                only = k;
            }
            if (only < 0 || offset[a * taps + only] < 0) return nullptr;
            at += offset[a * taps + only];
        }
        return channel_in + at;
    };
    for_each_chunk(task, chunk, make_scratch, [&](Scratch& scratch, std::int64_t n, const std::int64_t* outer, std::int64_t start,
                                                  std::int64_t count, std::int64_t out_offset) {
        task.positions.row(n, outer, start, count, scratch.xyz.data());
        planners.row(scratch.xyz.data(), count, geometry, scratch.plan);
        const std::int64_t out_stride = output.strides[rank + 1];
        for (std::int64_t c = 0; c < channels; ++c) {
            const S* channel_in = in_data + n * input.strides[0] + c * input.strides[1];
            S* channel_out = out_data + out_offset + c * output.strides[1];
            for (std::int64_t p = 0; p < count; ++p) {
                if constexpr (kCopiesOnPixel) {
                    if (!scratch.plan.fill[static_cast<std::size_t>(p)]) {
                        if (const S* pixel = pixel_of_point(channel_in, scratch.plan, p)) {
                            channel_out[p * out_stride] = *pixel;
                            continue;
                        }
                    }
                }
                channel_out[p * out_stride] = scratch.plan.fill[static_cast<std::size_t>(p)]
                                                  ? fill.stored
                                                  : store<S>(sum_point(channel_in, scratch, p));
            }
        }
    });
}

}  // namespace

void sample_separable(const Task& task) {
    visit_sample_types(task, [&](auto pixel, auto coordinate) {
        using S = typename decltype(pixel)::type;
        if constexpr (!std::is_same_v<S, std::string>) run_separable<S, typename decltype(coordinate)::type>(task);
    });
}

}  // namespace gridwarp::detail
