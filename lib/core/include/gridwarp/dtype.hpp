// Element types of gridwarp tensors: the ONNX tensor types, plus the storage helpers
// (float16, bfloat16) that the C++ standard library lacks.
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace gridwarp {

enum class DType {
    Float32,
    Float64,
    Float16,
    BFloat16,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Bool,
    Complex64,
    Complex128,
    String,
};

// IEEE 754 binary16, stored as raw bits. Conversions round to nearest, ties to even.
struct float16 {
    std::uint16_t bits = 0;
    float16() = default;
    explicit float16(float value);
    explicit operator float() const;
    static float16 from_bits(std::uint16_t b) { float16 h; h.bits = b; return h; }
};

// bfloat16 (the upper half of a binary32), stored as raw bits. Conversions round to nearest even.
struct bfloat16 {
    std::uint16_t bits = 0;
    bfloat16() = default;
    explicit bfloat16(float value);
    explicit operator float() const;
    static bfloat16 from_bits(std::uint16_t b) { bfloat16 h; h.bits = b; return h; }
};

inline bool operator==(float16 a, float16 b) { return a.bits == b.bits; }
inline bool operator==(bfloat16 a, bfloat16 b) { return a.bits == b.bits; }

// The ONNX name of a type ("float32", "uint8", "string", ...).
std::string_view dtype_name(DType type);
// Parses an ONNX or NumPy style name ("float32", "float", "double", "half", "bool", ...).
// Throws std::invalid_argument naming the accepted names.
DType parse_dtype(std::string_view name);
// Bytes one element occupies in gridwarp's memory (sizeof(std::string) for strings).
std::size_t dtype_size(DType type);
bool is_floating(DType type);  // float16, bfloat16, float32, float64
bool is_integral(DType type);  // signed/unsigned integers and bool
bool is_complex(DType type);

// Maps a C++ storage type to its DType.
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<float16> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<std::int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<std::int16_t> { static constexpr DType value = DType::Int16; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<std::uint16_t> { static constexpr DType value = DType::UInt16; };
template <> struct dtype_of<std::uint32_t> { static constexpr DType value = DType::UInt32; };
template <> struct dtype_of<std::uint64_t> { static constexpr DType value = DType::UInt64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<std::complex<float>> { static constexpr DType value = DType::Complex64; };
template <> struct dtype_of<std::complex<double>> { static constexpr DType value = DType::Complex128; };
template <> struct dtype_of<std::string> { static constexpr DType value = DType::String; };
template <class T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

template <class T> struct type_tag { using type = T; };

// Calls fn(type_tag<T>{}) with the storage type T of `type`: turns a runtime dtype into a
// template argument in one place instead of a switch per call site.
template <class Fn>
decltype(auto) visit_dtype(DType type, Fn&& fn) {
    switch (type) {
        case DType::Float32: return fn(type_tag<float>{});
        case DType::Float64: return fn(type_tag<double>{});
        case DType::Float16: return fn(type_tag<float16>{});
        case DType::BFloat16: return fn(type_tag<bfloat16>{});
        case DType::Int8: return fn(type_tag<std::int8_t>{});
        case DType::Int16: return fn(type_tag<std::int16_t>{});
        case DType::Int32: return fn(type_tag<std::int32_t>{});
        case DType::Int64: return fn(type_tag<std::int64_t>{});
        case DType::UInt8: return fn(type_tag<std::uint8_t>{});
        case DType::UInt16: return fn(type_tag<std::uint16_t>{});
        case DType::UInt32: return fn(type_tag<std::uint32_t>{});
        case DType::UInt64: return fn(type_tag<std::uint64_t>{});
        case DType::Bool: return fn(type_tag<bool>{});
        case DType::Complex64: return fn(type_tag<std::complex<float>>{});
        case DType::Complex128: return fn(type_tag<std::complex<double>>{});
        case DType::String: return fn(type_tag<std::string>{});
    }
    return fn(type_tag<float>{});  // unreachable: every enumerator is handled above
}

}  // namespace gridwarp
