// The interior pass for float32 pixels and float64 coordinates (interior_pass-inl.h), once per
// Highway target: one translation unit per pixel and coordinate type, so that they build in parallel.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "interior_pass_float32_f64.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "interior_pass-inl.h"

#if HWY_ONCE
GRIDWARP_INSTANTIATE_INTERIOR_PASS(float, double)
#endif
