// The AVX2 interior pass for float32 pixels (interior_pass_avx2-inl.hpp).
#include "interior_pass_avx2-inl.hpp"

GRIDWARP_INSTANTIATE_AVX2_PASS(float)
