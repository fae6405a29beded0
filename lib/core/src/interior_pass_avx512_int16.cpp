// The AVX-512 interior pass for int16 pixels (interior_pass_avx512-inl.hpp).
#include "interior_pass_avx512-inl.hpp"

GRIDWARP_INSTANTIATE_AVX512_PASS(std::int16_t)
