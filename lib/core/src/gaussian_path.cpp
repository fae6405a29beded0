// Gaussian and MultiLabel: ITK's GaussianInterpolateImageFunction and
// LabelImageGaussianInterpolateImageFunction. Along each axis a point reads the voxels i within the
// cut-off, clipped to the input, each weighted by the Gaussian's integral over the voxel,
// erf((i + 1/2 - u) s) - erf((i - 1/2 - u) s) with s = 1 / (sqrt(2) sigma), summed incrementally
// as ITK does; a voxel's weight is the product over axes.
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

double gaussian_alpha(const SampleOptions& options) {
    return options.gaussian_alpha.value_or(options.mode == Interpolation::Gaussian ? kDefaultGaussianAlpha : kDefaultMultiLabelAlpha);
}

double gaussian_sigma(const SampleOptions& options, int axis) {
    return options.gaussian_sigma.empty() ? 1.0 : options.gaussian_sigma[static_cast<std::size_t>(axis)];
}

namespace {

// The padding applied to the point itself (the taps never leave the input): zeros, a point beyond
// the input's extent [-1/2, d - 1/2] takes the fill; border clamps it to that extent; reflection
// folds it into it (or into [0, d - 1] with align_corners).
bool gaussian_bound(double& u, std::int64_t d, Padding padding, bool align_corners) {
    if (!std::isfinite(u) || d == 0) return false;
    const double low = align_corners && padding == Padding::Reflection ? 0.0 : -0.5;
    const double high = static_cast<double>(d) - 1.0 - low;
    switch (padding) {
        case Padding::Zeros: return u >= -0.5 && u <= static_cast<double>(d) - 0.5;
        case Padding::Border: u = std::clamp(u, low, high); return true;
        case Padding::Reflection: {
            const double span = high - low;
            if (span <= 0.0) {
                u = low;
                return true;
            }
            const double distance = std::fabs(u - low);
            const double flips = std::floor(distance / span);
            const double rest = distance - flips * span;
            u = std::fmod(flips, 2.0) == 0.0 ? low + rest : high - rest;
            return true;
        }
    }
    return false;
}

struct GaussianAxes {
    std::vector<std::int64_t> taps;     // per axis, the most voxels a point reads
    std::vector<std::int64_t> place;    // per axis, where its weights start within a point's
    std::int64_t weights_per_point = 0;
    std::vector<double> cut;            // per axis, sigma * alpha in pixels
    std::vector<double> scale;          // per axis, 1 / (sqrt(2) sigma)
};

GaussianAxes gaussian_axes(const SampleOptions& options, int rank) {
    GaussianAxes axes;
    const double alpha = gaussian_alpha(options);
    for (int a = 0; a < rank; ++a) {
        const double sigma = gaussian_sigma(options, a);
        axes.place.push_back(axes.weights_per_point);
        axes.taps.push_back(gaussian_taps_per_axis(sigma, alpha));
        axes.weights_per_point += axes.taps.back();
        axes.cut.push_back(sigma * alpha);
        axes.scale.push_back(1.0 / (std::numbers::sqrt2 * sigma));
    }
    return axes;
}

template <class C>
struct GaussianPlan {
    std::vector<std::int64_t> first;   // points x rank: the first voxel read along each axis
    std::vector<std::int64_t> count;   // points x rank: how many
    std::vector<double> weight;        // points x weights_per_point
    std::vector<unsigned char> fill;   // per point: 1 when the whole point is the fill value
};

template <class C>
void plan_gaussian(const C* xyz, std::int64_t count, const InputGeometry& geometry, const GaussianAxes& axes, Padding padding,
                   GaussianPlan<C>& plan) {
    const int rank = geometry.rank;
    for (std::int64_t p = 0; p < count; ++p) {
        const C* coords = xyz + p * rank;
        bool inside = true;
        for (int a = 0; a < rank && inside; ++a) {
            const std::int64_t d = geometry.extent[a];
            const C g = coords[rank - 1 - a];
            double u = geometry.space == CoordinateSpace::Normalized && std::isfinite(g) && d > 0
                           ? static_cast<double>(unnormalize(g, d, geometry.align_corners))
                           : static_cast<double>(g);
            inside = gaussian_bound(u, d, padding, geometry.align_corners);
            if (!inside) break;
            // ITK's ComputeInterpolationRegion and ComputeErrorFunctionArray, operation for operation.
            const double begin_at = u + 0.5 - axes.cut[static_cast<std::size_t>(a)];
            const double end_at = u + 0.5 + axes.cut[static_cast<std::size_t>(a)];
            const std::int64_t first = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(begin_at)));
            const std::int64_t last = std::min<std::int64_t>(d, static_cast<std::int64_t>(std::ceil(end_at)));
            const std::int64_t taps = std::min(last - first, axes.taps[static_cast<std::size_t>(a)]);
            inside = taps > 0;
            plan.first[static_cast<std::size_t>(p * rank + a)] = first;
            plan.count[static_cast<std::size_t>(p * rank + a)] = taps;
            const double scale = axes.scale[static_cast<std::size_t>(a)];
            double* weight = plan.weight.data() + p * axes.weights_per_point + axes.place[static_cast<std::size_t>(a)];
            double t = (-0.5 - u + static_cast<double>(first)) * scale;
            double e_last = std::erf(t);
            for (std::int64_t k = 0; k < taps; ++k) {
                t += scale;
                const double e_now = std::erf(t);
                weight[k] = e_now - e_last;
                e_last = e_now;
            }
        }
        plan.fill[static_cast<std::size_t>(p)] = inside ? 0 : 1;
    }
}

// Calls visit(offset, weight) for each voxel of a planned point, in ITK's order (x fastest), the
// weight multiplied over the axes x first as ITK multiplies it.
template <class C, class Visit>
void for_each_gaussian_tap(const GaussianPlan<C>& plan, const GaussianAxes& axes, const InputGeometry& geometry, std::int64_t p,
                           std::int64_t* position, Visit visit) {
    const int rank = geometry.rank;
    const std::int64_t* first = plan.first.data() + p * rank;
    const std::int64_t* count = plan.count.data() + p * rank;
    const double* weights = plan.weight.data() + p * axes.weights_per_point;
    std::fill(position, position + rank, 0);
    while (true) {
        std::int64_t offset = 0;
        double weight = 1.0;
        for (int a = rank; a-- > 0;) {
            offset += (first[a] + position[a]) * geometry.stride[a];
            weight *= weights[axes.place[static_cast<std::size_t>(a)] + position[a]];
        }
        visit(offset, weight);
        int a = rank - 1;
        while (a >= 0 && ++position[a] == count[a]) position[a--] = 0;
        if (a < 0) return;
    }
}

template <class S, class C>
void run_gaussian(const Task& task) {
    const auto& input = task.input;
    const auto& output = task.output;
    const auto& options = task.options;
    const int rank = static_cast<int>(input.rank()) - 2;
    const std::int64_t channels = input.shape[1];
    const std::int64_t width = task.positions.output_shape().back();
    constexpr std::int64_t kChunk = 256;
    const std::int64_t chunk = std::min(kChunk, std::max<std::int64_t>(width, 1));
    const InputGeometry geometry{rank, input.shape.data() + 2, input.strides.data() + 2, options.align_corners,
                                 task.positions.space()};
    const GaussianAxes axes = gaussian_axes(options, rank);
    const bool labels = options.mode == Interpolation::MultiLabel;
    const Fill<S> fill(options.fill);
    using V = typename compute_type<S>::type;
    using Sum = std::conditional_t<std::is_arithmetic_v<V>, double, std::complex<double>>;
    // float16 and bfloat16 labels compare as float; the other types as they are.
    using Key = std::conditional_t<std::is_arithmetic_v<S>, S, float>;
    const S* in_data = input.typed<S>();
    S* out_data = output.typed<S>();

    struct Scratch {
        GaussianPlan<C> plan;
        std::vector<C> xyz;
        std::vector<std::int64_t> position;
        std::vector<S> labels;
        std::vector<double> sums;
    };
    const auto make_scratch = [&] {
        Scratch scratch;
        scratch.plan.first.resize(static_cast<std::size_t>(chunk * rank));
        scratch.plan.count.resize(static_cast<std::size_t>(chunk * rank));
        scratch.plan.weight.resize(static_cast<std::size_t>(chunk * axes.weights_per_point));
        scratch.plan.fill.resize(static_cast<std::size_t>(chunk));
        scratch.xyz.resize(static_cast<std::size_t>(chunk * rank));
        scratch.position.resize(static_cast<std::size_t>(rank));
        return scratch;
    };
    // ITK's rule: the label whose running sum first exceeds every sum before it; so of labels with
    // equal totals, the one whose total was complete first in that order.
    const auto label_point = [&](Scratch& scratch, const S* channel_in, std::int64_t p) -> S {
        if constexpr (std::is_same_v<S, std::complex<float>> || std::is_same_v<S, std::complex<double>>) {
            return fill.stored;  // refused by grid_sample()
        } else {
        scratch.labels.clear();
        scratch.sums.clear();
        double best_sum = 0.0;
        std::optional<S> best;
        for_each_gaussian_tap(scratch.plan, axes, geometry, p, scratch.position.data(), [&](std::int64_t offset, double weight) {
            const S& value = channel_in[offset];
            std::size_t at = 0;
            while (at < scratch.labels.size() && !(static_cast<Key>(scratch.labels[at]) == static_cast<Key>(value))) ++at;
            if (at == scratch.labels.size()) {
                scratch.labels.push_back(value);
                scratch.sums.push_back(0.0);
            }
            scratch.sums[at] += weight;
            if (scratch.sums[at] > best_sum) {
                best_sum = scratch.sums[at];
                best = value;
            }
        });
        return best ? *best : fill.stored;
        }
    };
    const auto value_point = [&](Scratch& scratch, const S* channel_in, std::int64_t p) -> S {
        Sum weighted = Sum(0);
        double total = 0.0;
        for_each_gaussian_tap(scratch.plan, axes, geometry, p, scratch.position.data(), [&](std::int64_t offset, double weight) {
            weighted += Sum(load<V>(channel_in[offset])) * weight;
            total += weight;
        });
        if (!(total > 0.0)) return fill.stored;
        return store<S>(static_cast<V>(weighted / total));
    };
    for_each_chunk(task, chunk, make_scratch, [&](Scratch& scratch, std::int64_t n, const std::int64_t* outer, std::int64_t start,
                                                  std::int64_t count, std::int64_t out_offset) {
        task.positions.row(n, outer, start, count, scratch.xyz.data());
        plan_gaussian(scratch.xyz.data(), count, geometry, axes, options.padding, scratch.plan);
        const std::int64_t out_stride = output.strides[rank + 1];
        for (std::int64_t c = 0; c < channels; ++c) {
            const S* channel_in = in_data + n * input.strides[0] + c * input.strides[1];
            S* channel_out = out_data + out_offset + c * output.strides[1];
            for (std::int64_t p = 0; p < count; ++p) {
                S& out = channel_out[p * out_stride];
                if (scratch.plan.fill[static_cast<std::size_t>(p)]) {
                    out = fill.stored;
                } else if (labels) {
                    out = label_point(scratch, channel_in, p);
                } else {
                    out = value_point(scratch, channel_in, p);
                }
            }
        }
    });
}

}  // namespace

void sample_gaussian(const Task& task) {
    visit_sample_types(task, [&](auto pixel, auto coordinate) {
        using S = typename decltype(pixel)::type;
        if constexpr (!std::is_same_v<S, std::string>) run_gaussian<S, typename decltype(coordinate)::type>(task);
    });
}

// Gaussian and MultiLabel: one sigma per spatial axis (or none), and at most 2^20 voxels per point.
void check_gaussian_options(const SampleOptions& options, std::int64_t spatial_rank) {
    const std::string kind(interpolation_name(options.mode));
    if (!options.gaussian_sigma.empty() && static_cast<std::int64_t>(options.gaussian_sigma.size()) != spatial_rank) {
        throw std::invalid_argument("grid_sample(): " + kind + " takes one sigma per spatial axis (" + std::to_string(spatial_rank) +
                                    "), got " + std::to_string(options.gaussian_sigma.size()));
    }
    const double alpha = gaussian_alpha(options);
    double taps_per_point = 1.0;
    for (std::int64_t axis = 0; axis < spatial_rank; ++axis) {
        taps_per_point *= static_cast<double>(gaussian_taps_per_axis(gaussian_sigma(options, static_cast<int>(axis)), alpha));
    }
    if (taps_per_point > double(std::int64_t{1} << 20)) {
        throw std::invalid_argument("grid_sample(): " + kind + " with these sigma and alpha reads up to " +
                                    std::to_string(static_cast<std::int64_t>(std::min(taps_per_point, 1e18))) +
                                    " values per point, more than the 2^20 supported; lower sigma or alpha");
    }
}

}  // namespace gridwarp::detail
