// The B-spline prefilter: the coefficients that B-splines of order 2 and more interpolate.
#pragma once

#include "gridwarp/tensor.hpp"

namespace gridwarp::detail {

// The dtype coefficients are held in: the compute type of the pixel type (float32 for 8- and
// 16-bit integers, bool, float16, bfloat16 and float32; float64 for float64 and 32-/64-bit
// integers; complex stays complex).
DType coefficient_dtype(DType pixels);

// ITK's BSplineDecompositionImageFilter along every spatial axis of `input` (N, C, D1..Dr): mirror
// boundaries, causal initialisation to 1e-10, each line filtered in double. A C-ordered tensor of
// coefficient_dtype(input.dtype), the only copy of the image made; lines run on `threads` threads.
Tensor bspline_coefficients(const ConstTensorView& input, int order, int threads);

}  // namespace gridwarp::detail
