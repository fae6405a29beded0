// Anti-aliasing before shrinking (docs/semantics.md, "Anti-aliasing"): where sampling positions
// step over more than one input voxel per output voxel along an input axis, the input is first
// low-passed along that axis, so that what the output grid cannot represent does not fold back.
#pragma once

#include <string>
#include <vector>

#include "gridwarp/grid_sample.hpp"
#include "gridwarp/positions.hpp"
#include "gridwarp/tensor.hpp"

namespace gridwarp {

// An axis counts as shrunk when its factor exceeds this: rotations and round-off give 1 exactly
// or within 1e-12, and a shrink of under 1 % moves too little energy past Nyquist to matter.
inline constexpr double kShrinkTolerance = 1.01;

// The shrink factor of each input spatial axis (outermost first, as the input's shape): the median,
// over a lattice of at most 17 output points per axis, of the length of the Jacobian's row for that
// axis (input voxels moved per output voxel stepped, over all output axes). Exactly the row norm of
// an affine map's linear part. Output points without a finite neighbour, and output axes of extent 1,
// contribute nothing; an axis with no measurement gets factor 1.
std::vector<double> shrink_factors(const PositionSource& positions, const Shape& input_spatial, bool align_corners);

// The widest low-pass: a larger factor is filtered as this one, which bounds the kernel (6 k taps)
// and so the time a map that shrinks an axis to a point can take.
inline constexpr double kMaxLowpassFactor = 32.0;

// True where some axis of an input of `input_spatial` is shrunk by more than kShrinkTolerance.
bool any_axis_shrunk(const std::vector<double>& factors, const Shape& input_spatial);

// The dtype the low-passed copy is held in: float32 for 8- and 16-bit integers, bool, float16,
// bfloat16 and float32; float64 for float64 and 32-/64-bit integers; complex stays complex.
DType lowpass_dtype(DType pixels);

// A copy of `input` (N, C, D1..Dr) in lowpass_dtype(input.dtype), filtered along each spatial axis
// whose factor k exceeds kShrinkTolerance by the Lanczos-3 kernel stretched by k (at most
// kMaxLowpassFactor):
//   w(d) = sinc(d / k) sinc(d / (3 k)) for integer offsets |d| < 3 k,
// taps outside the input dropped and the rest normalised to sum 1. Other axes are untouched.
// Throws std::invalid_argument for string tensors. `threads` 0 uses every hardware thread.
Tensor lowpass_for_shrink(const ConstTensorView& input, const std::vector<double>& factors, int threads);

// A map that moves along the input's axes only, in pixel coordinates: output index j along spatial
// axis a (outermost first) reads input position step[a] * j + start[a] (resize's maps).
struct AxisAlignedMap {
    Shape size;  // output spatial extents, outermost first
    std::vector<double> step, start;
};

// True where shrink_onto_grid serves these options and pixels: linear, cubic and the windowed sincs
// (not the prefiltered or smoothing kinds, nor GenericLabel), border or reflection padding or zeros
// with fill 0, real types.
bool shrinks_onto_grid(const SampleOptions& options, DType pixels);

// lowpass_for_shrink followed by grid_sample through `map`, computed on the output grid: along each
// axis, one row of weights per output index composes the kind's taps (padding applied) with the
// low-pass rows they read, and the axes are reduced outermost first, each thread holding one input
// slice in the compute type. Equal to the two steps up to rounding in the compute type. Writes the
// output window that starts at spatial index `window_start` into `output` (N, C, window extents);
// `input` is (N, C, D1..Dr). Throws std::invalid_argument where shrinks_onto_grid is false.
void shrink_onto_grid(const ConstTensorView& input, const AxisAlignedMap& map, const std::vector<double>& factors,
                      const SampleOptions& options, const Shape& window_start, const TensorView& output);

// The box of an input of `input_spatial` that shrink_onto_grid reads for the output window at
// `window_start` of `window_extent` (an axis read nowhere has extent 0), and shrink_onto_grid
// computed from that box alone: `input` (N, C, box extents) holds the input's voxels from
// `box_start` on. The weights are the whole input's, so the values equal the whole computation's.
InputBox shrink_input_box(const Shape& input_spatial, const AxisAlignedMap& map, const std::vector<double>& factors, const SampleOptions& options,
                          const Shape& window_start, const Shape& window_extent);
void shrink_onto_grid_in_box(const ConstTensorView& input, const Shape& box_start, const Shape& input_spatial, const AxisAlignedMap& map,
                             const std::vector<double>& factors, const SampleOptions& options, const Shape& window_start, const TensorView& output);

// "Lanczos-3 low-pass along y (factor 4), x (factor 4)" or "none: no axis is shrunk", for --explain.
std::string describe_antialias(const std::vector<double>& factors, const Shape& input_spatial);

}  // namespace gridwarp
