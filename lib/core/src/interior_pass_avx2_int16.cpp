// The AVX2 interior pass for int16 pixels (interior_pass_avx2-inl.hpp).
#include "interior_pass_avx2-inl.hpp"

GRIDWARP_INSTANTIATE_AVX2_PASS(std::int16_t)
