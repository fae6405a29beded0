// Force-included (-include) into the ITK module when the fuzz build compiles it with clang: Debian's
// ITK 5.2 headers were generated for GCC only and stop with "Unsupported compiler" otherwise. The
// detection header is read once as if by GCC 12 (whose C++ features clang 14 has: ITK only asks
// which of C++11/14's it may use); its include guard keeps ITK's own #include from reading it again.
#pragma once
#pragma push_macro("__clang__")
#pragma push_macro("__GNUC__")
#pragma push_macro("__GNUC_MINOR__")
#undef __clang__
#undef __GNUC__
#undef __GNUC_MINOR__
#define __GNUC__ 12
#define __GNUC_MINOR__ 2
#include <itk_compiler_detection.h>
#pragma pop_macro("__GNUC_MINOR__")
#pragma pop_macro("__GNUC__")
#pragma pop_macro("__clang__")
