// GridSample (ONNX opsets 16, 20, 22) for any spatial rank and every ONNX dtype.
// The rules, including where gridwarp departs from one implementation or another, are in
// docs/semantics.md.
#pragma once

#include <cstdint>
#include <string_view>

#include "gridwarp/positions.hpp"
#include "gridwarp/tensor.hpp"

namespace gridwarp {

enum class Interpolation { Linear, Nearest, Cubic };
enum class Padding { Zeros, Border, Reflection };

// Accepts the ONNX names and the aliases of opset 16, OpenVINO and PyTorch
// (bilinear, trilinear, bicubic). Throws std::invalid_argument listing the accepted names.
Interpolation parse_interpolation(std::string_view name);
Padding parse_padding(std::string_view name);

// Every point reads taps^rank input values (2 per axis for linear, 4 for cubic); more than 2^20 per
// point is refused (std::invalid_argument): cubic beyond 10 spatial dimensions, linear beyond 20.
void check_taps_per_point(Interpolation mode, std::int64_t spatial_rank);
std::string_view interpolation_name(Interpolation mode);
std::string_view padding_name(Padding padding);

struct SampleOptions {
    Interpolation mode = Interpolation::Linear;
    Padding padding = Padding::Zeros;
    bool align_corners = false;
    // Read instead of 0 for taps outside the input under zeros padding, and written for
    // non-finite positions in every padding mode (converted to the output type: rounded and
    // saturated for integers, the real part for complex, ignored for strings).
    double fill = 0.0;
    // Worker threads; 0 uses every hardware thread.
    int threads = 0;
    // Testing aid: take the dynamic-rank path even where a fixed 2-D/3-D instantiation exists.
    bool force_generic_rank = false;
    // ANTs' GenericLabel[mode]: each output value is the input value (label) whose taps' weights
    // under `mode` sum to the most, as if each label's indicator image were interpolated; ties go
    // to the smaller label, taps outside under zeros padding count as the fill value. Outputs hold
    // only input values (and the fill). Real-valued tensors only.
    bool generic_label = false;
};

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

}  // namespace gridwarp
