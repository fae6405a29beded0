// GridSample (ONNX opsets 16, 20, 22) for any spatial rank and every ONNX dtype.
// The rules, including where gridwarp departs from one implementation or another, are in
// docs/semantics.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gridwarp/interpolation.hpp"
#include "gridwarp/positions.hpp"
#include "gridwarp/tensor.hpp"

namespace gridwarp {

enum class Padding { Zeros, Border, Reflection };

Padding parse_padding(std::string_view name);
std::string_view padding_name(Padding padding);

struct SampleOptions {
    Interpolation mode = Interpolation::Linear;
    int spline_order = kDefaultSplineOrder;  // Interpolation::BSpline only
    Padding padding = Padding::Zeros;
    bool align_corners = false;
    // Read instead of 0 for taps outside the input under zeros padding, and written for
    // non-finite positions in every padding mode (converted to the output type: rounded and
    // saturated for integers, the real part for complex, ignored for strings).
    double fill = 0.0;
    // Read instead of `fill` by the taps outside the input under zeros padding, where set: ITK's
    // windowed sinc reads 0 there (ConstantBoundaryCondition) whatever its default pixel value.
    std::optional<double> outside_tap_value;
    // Worker threads; 0 uses every hardware thread.
    int threads = 0;
    // Testing aid: take the dynamic-rank path even where a fixed 2-D/3-D instantiation exists.
    bool force_generic_rank = false;
    // ANTs' GenericLabel[mode]: each output value is the input value (label) whose taps' weights
    // under `mode` sum to the most, as if each label's indicator image were interpolated; ties go
    // to the smaller label, taps outside under zeros padding count as the fill value. Outputs hold
    // only input values (and the fill). Real-valued tensors only; not with prefiltered kinds.
    bool generic_label = false;
    // Gaussian and MultiLabel: sigma in pixels along each spatial axis D1..Dr (outermost first; empty:
    // 1 pixel on every axis, ANTs' default of one spacing) and the cut-off in sigmas (unset: 1 for
    // Gaussian, 4 for MultiLabel). Taps are the voxels within sigma * alpha pixels, never outside the input.
    std::vector<double> gaussian_sigma;
    std::optional<double> gaussian_alpha;
};

// A mode as the CLI's --mode and the Python package's mode= spell it, parsed once: an interpolation
// kind's name or alias in any case ("linear", "bilinear", "BSpline[3]", "Gaussian[1.5,2]"), or
// GenericLabel[kind] (GenericLabel alone: Linear). Gaussian sigmas stay in the units written (mm)
// until resolve_gaussian_sigma knows the input's spacing.
struct SamplingMode {
    std::string text;  // as written, for messages
    InterpolationChoice choice;
    bool generic_label = false;
};
// Throws std::invalid_argument naming the accepted names.
SamplingMode parse_sampling_mode(std::string_view text);
// Sets options' mode, spline_order, generic_label and gaussian_alpha.
void apply_sampling_mode(SampleOptions& options, const SamplingMode& mode);
// For Gaussian and MultiLabel whose text gives sigmas (one, or one per axis x first, in the units of
// `spacing`, x first; without a spacing, pixels): options.gaussian_sigma in pixels for an input of
// `spatial_rank` axes. Other kinds, or no sigma: nothing. Throws std::invalid_argument.
void resolve_gaussian_sigma(SampleOptions& options, const SamplingMode& mode, const std::vector<double>& spacing,
                            std::int64_t spatial_rank);

// Input values each output point reads along all `spatial_rank` axes under these options (for
// Gaussian and MultiLabel, from their sigma and alpha; saturated at 2^64 - 1). Throws
// std::invalid_argument for options grid_sample would refuse.
std::uint64_t taps_per_point(const SampleOptions& options, std::int64_t spatial_rank);
// Input values sampling an input of shape (N, C, D1..Dr) at `output_spatial` points reads in all:
// N x C x points x taps_per_point (saturated at 2^64 - 1).
std::uint64_t taps_in_all(const SampleOptions& options, const Shape& input_shape, const Shape& output_spatial);
// The default bound on taps_in_all for Gaussian and MultiLabel, whose kernels widen with sigma and
// alpha (the command's --max-taps, the Python package's max_taps=).
inline constexpr std::uint64_t kDefaultMaxTaps = std::uint64_t{1} << 34;
// Bytes grid_sample allocates besides its output to sample `values` input values of `pixels`: the
// B-spline coefficients of prefiltered kinds (and their sampled copy when the output type
// differs: at most `output_values` of it); 0 for the kinds that read the input itself.
std::uint64_t grid_sample_scratch_bytes(DType pixels, std::uint64_t values, std::uint64_t output_values, const SampleOptions& options);

// Output shape (N, C, O1..Or) for an input and a position source; checks that they fit.
Shape grid_sample_output_shape(const ConstTensorView& input, const PositionSource& positions);

// Samples `input` (N, C, D1..Dr) at the positions of `positions` into `output` (N, C, O1..Or),
// which must have the input's dtype. Neither input nor output need be C-ordered.
void grid_sample(const ConstTensorView& input, const PositionSource& positions, const TensorView& output,
                 const SampleOptions& options = {});

// Allocating forms.
Tensor grid_sample(const ConstTensorView& input, const PositionSource& positions, const SampleOptions& options = {});
// The ONNX operator: grid (N, O1..Or, r) of float16, bfloat16, float32 or float64.
Tensor grid_sample(const ConstTensorView& input, const ConstTensorView& grid, const SampleOptions& options = {});
// The same into `output`, (N, C, O1..Or) of the input's dtype, and that shape.
void grid_sample_into(const ConstTensorView& input, const ConstTensorView& grid, const TensorView& output, const SampleOptions& options = {});
Shape grid_sample_output_shape(const ConstTensorView& input, const ConstTensorView& grid);

// Whether input_box_read can bound what sampling under `options` reads: every kind whose taps lie
// within a fixed reach of the position (not the prefiltered B-splines, not Gaussian or MultiLabel).
bool reads_near_positions(const SampleOptions& options);
// The input voxels that sampling `positions` (batch item 0) from an input of spatial shape
// `input_spatial` under `options` can read, with a voxel to spare for rounding; never empty (a
// voxel when every point is fill). Sampling the box alone at PositionsInBox writes what sampling the
// whole input writes, under zeros and border padding (and reflection for pixel positions). Throws
// std::invalid_argument where reads_near_positions is false.
InputBox input_box_read(const PositionSource& positions, const Shape& input_spatial, const SampleOptions& options);
// grid_sample of the whole input from `box_pixels` (N, C, box extents), the voxels of `box` in an
// input of spatial shape `input_spatial`: `positions` are the whole input's, and only the box is
// read, so it must hold every voxel they read (input_box_read's box does). The output equals
// sampling the whole input bit for bit.
void grid_sample_in_box(const ConstTensorView& box_pixels, const InputBox& box, const Shape& input_spatial, const PositionSource& positions,
                        const TensorView& output, const SampleOptions& options);

}  // namespace gridwarp
