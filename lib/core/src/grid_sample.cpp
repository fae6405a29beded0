// GridSample's entry points: the checks of a call, and the choice of the path that samples it.
// The paths are in files of their own: reference_path.cpp (the definition of the results, any
// rank and type), fast_path.cpp (ranks 2 and 3 of the common pixel types, the same bits),
// separable_path.cpp (B-splines and windowed sincs) and gaussian_path.cpp (Gaussian, MultiLabel).
#include "gridwarp/grid_sample.hpp"

#include "bspline_prefilter.hpp"
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

namespace gridwarp {

Padding parse_padding(std::string_view name) {
    if (name == "zeros") return Padding::Zeros;
    if (name == "border") return Padding::Border;
    if (name == "reflection") return Padding::Reflection;
    throw std::invalid_argument("unknown padding mode '" + std::string(name) +
                                "': expected zeros, border or reflection");
}

std::string_view padding_name(Padding padding) {
    switch (padding) {
        case Padding::Zeros: return "zeros";
        case Padding::Border: return "border";
        case Padding::Reflection: return "reflection";
    }
    return "zeros";
}

namespace {

// The policies, geometry and pass interface shared with the interior pass (sampling_policies.hpp, fast_path.hpp).
using namespace detail;

// Gaussian and MultiLabel take their own path, the kinds beyond ONNX the separable one, and the
// ONNX kinds the fast path where it serves the call (exactly), else the reference path.
void sample(const Task& task) {
    const InterpolationKind kind = interpolation_kind(task.options.mode);
    const bool strings = task.input.dtype == DType::String;
    if (!strings && kind.gaussian) {
        sample_gaussian(task);
    } else if (!strings && !kind.onnx && !task.options.generic_label) {
        sample_separable(task);
    } else if (kind.onnx && !task.options.generic_label && !task.options.outside_tap_value && fast_path_serves(task)) {
        sample_by_fast_path(task);
    } else {
        sample_by_reference(task);
    }
}

// B-splines of order 2 and more: the coefficients are sampled in their own (compute) type, straight
// into the output where that is the output's type, else into a copy converted as the samplers store.
void sample_coefficients(const ConstTensorView& input, const PositionSource& positions, const TensorView& output,
                         const SampleOptions& options) {
    const Tensor coefficients = bspline_coefficients(input, options.spline_order, thread_count(options));
    if (coefficients.dtype() == output.dtype) {
        sample(Task{coefficients.view(), positions, output, options});
        return;
    }
    Tensor sampled(coefficients.dtype(), output.shape);
    sample(Task{coefficients.view(), positions, sampled.view(), options});
    copy_elements(convert_to(sampled.view(), output.dtype).view(), output);
}

void check_strides(const char* what, const Shape& strides) {
    for (auto stride : strides) {
        if (stride < 0) {
            throw std::invalid_argument(std::string("grid_sample(): ") + what +
                                        " strides must be non-negative, got " + shape_to_string(strides));
        }
    }
}

}  // namespace

Shape grid_sample_output_shape(const ConstTensorView& input, const PositionSource& positions) {
    if (input.rank() < 3) {
        throw std::invalid_argument("grid_sample(): input must have rank >= 3 (N, C, D1..Dr), got shape " +
                                    shape_to_string(input.shape));
    }
    const Shape& spatial = positions.output_shape();
    const auto rank = input.rank() - 2;
    if (positions.spatial_rank() != rank) {
        throw std::invalid_argument("grid_sample(): positions have spatial rank " +
                                    std::to_string(positions.spatial_rank()) + " (output " +
                                    shape_to_string(spatial) + ") but the input of shape " +
                                    shape_to_string(input.shape) + " has spatial rank " + std::to_string(rank));
    }
    if (positions.batch() != input.shape[0]) {
        throw std::invalid_argument("grid_sample(): positions are given for N=" + std::to_string(positions.batch()) +
                                    " but the input of shape " + shape_to_string(input.shape) + " has N=" +
                                    std::to_string(input.shape[0]));
    }
    Shape shape{input.shape[0], input.shape[1]};
    shape.insert(shape.end(), spatial.begin(), spatial.end());
    return shape;
}

namespace {

// A call's requirements; whether it has any point to sample.
bool check_call(const ConstTensorView& input, const PositionSource& positions, const TensorView& output, const SampleOptions& options) {
    const Shape expected = grid_sample_output_shape(input, positions);
    if (output.dtype != input.dtype || output.shape != expected) {
        throw std::invalid_argument("grid_sample(): output must be " + std::string(dtype_name(input.dtype)) + " " +
                                    shape_to_string(expected) + ", got " + std::string(dtype_name(output.dtype)) +
                                    " " + shape_to_string(output.shape));
    }
    if (input.dtype == DType::String && options.mode != Interpolation::Nearest) {
        throw std::invalid_argument("grid_sample(): " + std::string(interpolation_name(options.mode)) +
                                    " interpolation is not defined for string tensors; use nearest");
    }
    if (options.generic_label && (input.dtype == DType::Complex64 || input.dtype == DType::Complex128 || input.dtype == DType::String)) {
        throw std::invalid_argument("grid_sample(): GenericLabel needs real labels, got " + std::string(dtype_name(input.dtype)));
    }
    if (options.generic_label && !interpolation_kind(options.mode).label_inner) {
        throw std::invalid_argument("grid_sample(): GenericLabel takes linear, nearest, cubic or a windowed sinc, not " +
                                    std::string(interpolation_name(options.mode)));
    }
    if (options.mode == Interpolation::BSpline && (options.spline_order < 0 || options.spline_order > kMaxSplineOrder)) {
        throw std::invalid_argument("grid_sample(): the B-spline order must be 0 to 5, got " + std::to_string(options.spline_order));
    }
    if (interpolation_kind(options.mode).gaussian) {
        check_gaussian_options(options, static_cast<std::int64_t>(input.shape.size()) - 2);
    } else {
        check_taps_per_point(options.mode, options.spline_order, static_cast<std::int64_t>(input.shape.size()) - 2);
    }
    if (options.mode == Interpolation::MultiLabel && (input.dtype == DType::Complex64 || input.dtype == DType::Complex128)) {
        throw std::invalid_argument("grid_sample(): MultiLabel needs real labels, got " + std::string(dtype_name(input.dtype)));
    }
    const DType coordinate = positions.coordinate_dtype();
    if (!is_floating(coordinate)) {
        throw std::invalid_argument("grid_sample(): positions must be float16, bfloat16, float32 or float64, got " +
                                    std::string(dtype_name(coordinate)));
    }
    check_strides("input", input.strides);
    check_strides("output", output.strides);
    return shape_numel(expected) > 0;
}

}  // namespace

void grid_sample(const ConstTensorView& input, const PositionSource& positions, const TensorView& output,
                 const SampleOptions& options) {
    if (!check_call(input, positions, output, options)) return;
    if (needs_prefilter(options.mode, options.spline_order)) {
        sample_coefficients(input, positions, output, options);
        return;
    }
    sample(Task{input, positions, output, options});
}

void grid_sample_in_box(const ConstTensorView& box_pixels, const InputBox& box, const Shape& input_spatial, const PositionSource& positions,
                        const TensorView& output, const SampleOptions& options) {
    const std::size_t rank = input_spatial.size();
    if (box_pixels.rank() != static_cast<std::int64_t>(rank + 2) || box.start.size() != rank || box.extent.size() != rank) {
        throw std::invalid_argument("grid_sample_in_box(): the box's pixels, start and extent must have the input's spatial rank");
    }
    check_strides("input", box_pixels.strides);
    std::int64_t before = 0, box_span = 1;  // elements of a batch item before the box's first voxel, and the box's
    for (std::size_t a = 0; a < rank; ++a) {
        if (box.extent[a] != box_pixels.shape[a + 2] || box.start[a] < 0 || box.extent[a] < 1 || box.start[a] + box.extent[a] > input_spatial[a]) {
            throw std::invalid_argument("grid_sample_in_box(): a box of " + shape_to_string(box_pixels.shape) + " at " +
                                        shape_to_string(box.start) + " is not inside an input of " + shape_to_string(input_spatial));
        }
        before += box.start[a] * box_pixels.strides[a + 2];
        box_span += (box.extent[a] - 1) * box_pixels.strides[a + 2];
    }
    box_span += (box_pixels.shape[1] - 1) * box_pixels.strides[1];
    // The whole input's view of the box's memory: its strides, its origin moved back by the box's
    // start, so that positions, taps and weights are the whole input's; only the box is read.
    Shape shape{box_pixels.shape[0], box_pixels.shape[1]};
    shape.insert(shape.end(), input_spatial.begin(), input_spatial.end());
    const auto origin = reinterpret_cast<std::uintptr_t>(box_pixels.data) - static_cast<std::uintptr_t>(before) * dtype_size(box_pixels.dtype);
    const ConstTensorView whole(box_pixels.dtype, reinterpret_cast<const void*>(origin), shape, box_pixels.strides);
    if (!check_call(whole, positions, output, options)) return;
    const Task task{whole, positions, output, options, before + box_span};
    const InterpolationKind kind = interpolation_kind(options.mode);
    if (kind.onnx && !options.generic_label && !options.outside_tap_value && box_pixels.dtype != DType::String && fast_path_serves(task)) {
        sample_by_fast_path(task);
        return;
    }
    // The other paths see the box alone, the positions moved into it.
    grid_sample(box_pixels, PositionsInBox(positions, input_spatial, options.align_corners, box), output, options);
}

namespace {

// a x b, or 2^64 - 1 where that overflows.
std::uint64_t saturating_product(std::uint64_t a, std::uint64_t b) {
    std::uint64_t product = 0;
    return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

}  // namespace

std::uint64_t taps_per_point(const SampleOptions& options, std::int64_t spatial_rank) {
    std::uint64_t taps = 1;
    if (interpolation_kind(options.mode).gaussian) {
        detail::check_gaussian_options(options, spatial_rank);
        const double alpha = detail::gaussian_alpha(options);
        for (std::int64_t axis = 0; axis < spatial_rank; ++axis) {
            const auto per_axis = gaussian_taps_per_axis(detail::gaussian_sigma(options, static_cast<int>(axis)), alpha);
            taps = saturating_product(taps, static_cast<std::uint64_t>(per_axis));
        }
        return taps;
    }
    const auto per_axis = static_cast<std::uint64_t>(taps_per_axis(options.mode, options.spline_order));
    for (std::int64_t axis = 0; axis < spatial_rank; ++axis) taps = saturating_product(taps, per_axis);
    return taps;
}

std::uint64_t taps_in_all(const SampleOptions& options, const Shape& input_shape, const Shape& output_spatial) {
    if (input_shape.size() < 2) return 0;
    std::uint64_t taps = taps_per_point(options, static_cast<std::int64_t>(input_shape.size()) - 2);
    const auto times = [&](std::int64_t extent) { taps = saturating_product(taps, static_cast<std::uint64_t>(std::max<std::int64_t>(extent, 0))); };
    times(input_shape[0]);
    times(input_shape[1]);
    for (const auto extent : output_spatial) times(extent);
    return taps;
}

std::uint64_t grid_sample_scratch_bytes(DType pixels, std::uint64_t values, std::uint64_t output_values, const SampleOptions& options) {
    if (!needs_prefilter(options.mode, options.spline_order) || pixels == DType::String) return 0;
    const std::uint64_t value_bytes = dtype_size(detail::coefficient_dtype(pixels));
    const std::uint64_t converted = detail::coefficient_dtype(pixels) == pixels ? 0 : output_values;
    const std::uint64_t copies = values > UINT64_MAX - converted ? UINT64_MAX : values + converted;
    return saturating_product(copies, value_bytes);
}

Tensor grid_sample(const ConstTensorView& input, const PositionSource& positions, const SampleOptions& options) {
    Tensor output(input.dtype, grid_sample_output_shape(input, positions));
    grid_sample(input, positions, output.view(), options);
    return output;
}

namespace {

// The ONNX operator's requirements on its grid (N, O1..Or, r).
void check_onnx_grid(const ConstTensorView& input, const ConstTensorView& grid) {
    if (input.rank() < 3) {
        throw std::invalid_argument("grid_sample(): input must have rank >= 3 (N, C, D1..Dr), got shape " +
                                    shape_to_string(input.shape));
    }
    const auto rank = input.rank() - 2;
    if (grid.rank() != input.rank() || grid.shape.back() != rank) {
        throw std::invalid_argument("grid_sample(): grid must have shape (N, O1..O" + std::to_string(rank) + ", " +
                                    std::to_string(rank) + ") for an input of shape " +
                                    shape_to_string(input.shape) + ", got shape " + shape_to_string(grid.shape));
    }
    if (grid.shape[0] != input.shape[0]) {
        throw std::invalid_argument("grid_sample(): grid's N=" + std::to_string(grid.shape[0]) +
                                    " does not match the input's N=" + std::to_string(input.shape[0]) +
                                    " (input shape " + shape_to_string(input.shape) + ", grid shape " +
                                    shape_to_string(grid.shape) + ")");
    }
    check_strides("grid", grid.strides);
}

}  // namespace

Shape grid_sample_output_shape(const ConstTensorView& input, const ConstTensorView& grid) {
    check_onnx_grid(input, grid);
    return grid_sample_output_shape(input, GridPositions(grid));
}

void grid_sample_into(const ConstTensorView& input, const ConstTensorView& grid, const TensorView& output, const SampleOptions& options) {
    check_onnx_grid(input, grid);
    grid_sample(input, GridPositions(grid), output, options);
}

Tensor grid_sample(const ConstTensorView& input, const ConstTensorView& grid, const SampleOptions& options) {
    check_onnx_grid(input, grid);
    return grid_sample(input, GridPositions(grid), options);
}

}  // namespace gridwarp
