#include "gridwarp/dtype.hpp"

#include <cmath>
#include <stdexcept>

namespace gridwarp {

float16::float16(float value) {
    std::uint32_t f;
    std::memcpy(&f, &value, sizeof f);
    const auto sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
    std::uint32_t magnitude = f & 0x7fffffffu;
    if (magnitude >= 0x7f800000u) {  // infinity or NaN (NaN keeps its top payload bits, stays quiet)
        bits = sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x0200u | ((magnitude >> 13) & 0x03ffu) : 0u);
        return;
    }
    if (magnitude >= 0x477ff000u) {  // >= 65520: halfway above the largest half (65504) rounds to inf
        bits = sign | 0x7c00u;
        return;
    }
    if (magnitude < 0x38800000u) {  // below 2^-14: a half subnormal, count of 2^-24 steps
        const float scaled = std::fabs(value) * 16777216.0f;  // exact: a power-of-two scale
        bits = sign | static_cast<std::uint16_t>(std::nearbyint(scaled));
        return;
    }
    magnitude += 0x0fffu + ((magnitude >> 13) & 1u);  // round to nearest, ties to even
    bits = sign | static_cast<std::uint16_t>((magnitude - 0x38000000u) >> 13);  // rebias 127 -> 15
}

float16::operator float() const {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1fu;
    const std::uint32_t mantissa = bits & 0x03ffu;
    std::uint32_t f;
    if (exponent == 0) {
        const float value = static_cast<float>(mantissa) * 5.9604644775390625e-08f;  // 2^-24
        return sign ? -value : value;
    }
    if (exponent == 31) {
        f = sign | 0x7f800000u | (mantissa << 13);
    } else {
        f = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    }
    float out;
    std::memcpy(&out, &f, sizeof out);
    return out;
}

bfloat16::bfloat16(float value) {
    std::uint32_t f;
    std::memcpy(&f, &value, sizeof f);
    if ((f & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it a quiet NaN
        bits = static_cast<std::uint16_t>((f >> 16) | 0x0040u);
        return;
    }
    f += 0x7fffu + ((f >> 16) & 1u);  // round to nearest, ties to even
    bits = static_cast<std::uint16_t>(f >> 16);
}

bfloat16::operator float() const {
    const std::uint32_t f = static_cast<std::uint32_t>(bits) << 16;
    float out;
    std::memcpy(&out, &f, sizeof out);
    return out;
}

std::string_view dtype_name(DType type) {
    switch (type) {
        case DType::Float32: return "float32";
        case DType::Float64: return "float64";
        case DType::Float16: return "float16";
        case DType::BFloat16: return "bfloat16";
        case DType::Int8: return "int8";
        case DType::Int16: return "int16";
        case DType::Int32: return "int32";
        case DType::Int64: return "int64";
        case DType::UInt8: return "uint8";
        case DType::UInt16: return "uint16";
        case DType::UInt32: return "uint32";
        case DType::UInt64: return "uint64";
        case DType::Bool: return "bool";
        case DType::Complex64: return "complex64";
        case DType::Complex128: return "complex128";
        case DType::String: return "string";
    }
    return "unknown";
}

DType parse_dtype(std::string_view name) {
    struct Alias { std::string_view name; DType type; };
    static constexpr Alias aliases[] = {
        {"float32", DType::Float32}, {"float", DType::Float32},
        {"float64", DType::Float64}, {"double", DType::Float64},
        {"float16", DType::Float16}, {"half", DType::Float16},
        {"bfloat16", DType::BFloat16},
        {"int8", DType::Int8}, {"char", DType::Int8},
        {"int16", DType::Int16}, {"short", DType::Int16},
        {"int32", DType::Int32}, {"int", DType::Int32},
        {"int64", DType::Int64}, {"long", DType::Int64},
        {"uint8", DType::UInt8}, {"uchar", DType::UInt8},
        {"uint16", DType::UInt16}, {"ushort", DType::UInt16},
        {"uint32", DType::UInt32}, {"uint", DType::UInt32},
        {"uint64", DType::UInt64}, {"ulong", DType::UInt64},
        {"bool", DType::Bool},
        {"complex64", DType::Complex64}, {"complex128", DType::Complex128},
        {"string", DType::String},
    };
    for (const auto& alias : aliases) {
        if (alias.name == name) return alias.type;
    }
    throw std::invalid_argument("unknown data type '" + std::string(name) +
                                "': expected one of float32, float64, float16, bfloat16, int8, int16, int32, "
                                "int64, uint8, uint16, uint32, uint64, bool, complex64, complex128, string");
}

std::size_t dtype_size(DType type) {
    return visit_dtype(type, [](auto tag) { return sizeof(typename decltype(tag)::type); });
}

bool is_floating(DType type) {
    return type == DType::Float32 || type == DType::Float64 || type == DType::Float16 ||
           type == DType::BFloat16;
}

bool is_integral(DType type) {
    switch (type) {
        case DType::Int8: case DType::Int16: case DType::Int32: case DType::Int64:
        case DType::UInt8: case DType::UInt16: case DType::UInt32: case DType::UInt64:
        case DType::Bool:
            return true;
        default:
            return false;
    }
}

bool is_complex(DType type) { return type == DType::Complex64 || type == DType::Complex128; }

}  // namespace gridwarp
