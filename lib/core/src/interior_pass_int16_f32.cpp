// The interior pass for int16 pixels and float32 coordinates (interior_pass-inl.h), once per
// Highway target: one translation unit per pixel and coordinate type, so that they build in parallel.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "interior_pass_int16_f32.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "interior_pass-inl.h"

#if HWY_ONCE
GRIDWARP_INSTANTIATE_INTERIOR_PASS(std::int16_t, float)
#endif
