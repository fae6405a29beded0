// Data types: the compute type of each storage type, rounding and saturation on store, float16 and
// bfloat16 rounding, complex, bool and string tensors. Expected values are exact binary fractions
// or Keys-kernel sums computed here in double.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;

namespace {

SampleOptions with(Interpolation mode, double fill = 0.0, Padding padding = Padding::Zeros) {
    return options_for(mode, padding, true, fill);
}

// 1-D grid (1, n, 1) in float64 from unnormalized positions u on an axis of size d (align_corners=1).
Tensor positions(const std::vector<double>& u, std::int64_t d) {
    std::vector<double> g;
    for (double v : u) g.push_back(2.0 * v / static_cast<double>(d - 1) - 1.0);
    return tensor_from(DType::Float64, {1, static_cast<std::int64_t>(u.size()), 1}, g);
}

double keys(double s) {
    const double A = -0.75;
    s = std::fabs(s);
    if (s <= 1) return ((A + 2) * s - (A + 3)) * s * s + 1;
    if (s < 2) return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A;
    return 0;
}

double cubic_at(const std::vector<double>& signal, double u) {
    const double first = std::floor(u) - 1;
    double sum = 0;
    for (int k = 0; k < 4; ++k) {
        const auto i = static_cast<std::int64_t>(first) + k;
        if (i >= 0 && i < static_cast<std::int64_t>(signal.size())) sum += keys(u - static_cast<double>(i)) * signal[static_cast<std::size_t>(i)];
    }
    return sum;
}

double round_half_even(double v) {
    const double f = std::floor(v);
    const double diff = v - f;
    if (diff < 0.5) return f;
    if (diff > 0.5) return f + 1;
    return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

}  // namespace

TEST_CASE("float16 and bfloat16 conversions round to nearest even", "[dtype][half]") {
    CHECK(float16(65504.0f).bits == 0x7bff);
    CHECK(float16(65519.0f).bits == 0x7bff);
    CHECK(float16(65520.0f).bits == 0x7c00);          // halfway above the largest half: infinity
    CHECK(float16(-1.0f).bits == 0xbc00);
    CHECK(float16(std::ldexp(1.0f, -24)).bits == 0x0001);  // smallest subnormal
    CHECK(float16(std::ldexp(1.0f, -25)).bits == 0x0000);  // tie to even: 0
    CHECK(float16(std::ldexp(3.0f, -25)).bits == 0x0002);  // 1.5 steps: tie to even 2
    CHECK(float16(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);  // tie between 1 and 1+2^-10: even
    CHECK(float16(1.0f + std::ldexp(3.0f, -11)).bits == 0x3c02);  // tie between odd and even: even
    CHECK(float16(1.0f / 3.0f).bits == 0x3555);
    CHECK(std::isnan(static_cast<float>(float16(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(static_cast<float>(float16::from_bits(0x0001)) == std::ldexp(1.0f, -24));
    CHECK(static_cast<float>(float16::from_bits(0x7bff)) == 65504.0f);
    CHECK(std::isinf(static_cast<float>(float16::from_bits(0xfc00))));

    CHECK(bfloat16(1.0f).bits == 0x3f80);
    CHECK(bfloat16(1.0f + std::ldexp(1.0f, -8)).bits == 0x3f80);   // tie: even
    CHECK(bfloat16(1.0f + std::ldexp(3.0f, -8)).bits == 0x3f82);   // tie: even (up)
    CHECK(bfloat16(3.0e38f).bits == 0x7f62);
    CHECK(bfloat16(3.4e38f).bits == 0x7f80);  // rounds past the largest bfloat16 to infinity
    CHECK(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("integers round half to even and saturate instead of wrapping", "[dtype][integer]") {
    SECTION("uint8 linear midpoints: 1.5 -> 2, 2.5 -> 2") {
        const Tensor x = tensor_from(DType::UInt8, {1, 1, 3}, {1, 2, 3});
        const auto y = as_doubles(grid_sample(x.view(), positions({0.5, 1.5}, 3).view(), with(Interpolation::Linear)).view());
        CHECK(y == std::vector<double>{2.0, 2.0});
    }
    SECTION("uint8 cubic overshoot and undershoot saturate at 255 and 0") {
        const std::vector<double> step{0, 0, 0, 255, 255, 255};
        const Tensor x = tensor_from(DType::UInt8, {1, 1, 6}, step);
        const std::vector<double> u{1.75, 2.25, 2.5, 3.25, 3.75};
        const auto y = as_doubles(grid_sample(x.view(), positions(u, 6).view(), with(Interpolation::Cubic)).view());
        for (std::size_t i = 0; i < u.size(); ++i) {
            const double exact = cubic_at(step, u[i]);
            INFO("u = " << u[i] << ", exact " << exact);
            CHECK(y[i] == std::clamp(round_half_even(exact), 0.0, 255.0));
        }
        CHECK(cubic_at(step, 3.25) > 255.0);  // the case really overshoots
        CHECK(y[3] == 255.0);
        CHECK(cubic_at(step, 1.75) < 0.0);
        CHECK(y[0] == 0.0);
    }
    SECTION("int8 and int16 saturate at both ends") {
        for (auto [type, lo, hi] : {std::tuple{DType::Int8, -128.0, 127.0}, std::tuple{DType::Int16, -32768.0, 32767.0}}) {
            const std::vector<double> step{lo, lo, lo, hi, hi, hi};
            const Tensor x = tensor_from(type, {1, 1, 6}, step);
            const auto y = as_doubles(grid_sample(x.view(), positions({1.75, 3.25}, 6).view(), with(Interpolation::Cubic)).view());
            CHECK(y == std::vector<double>{lo, hi});
        }
    }
    SECTION("int32/int64/uint32/uint64 compute in double") {
        // Midpoint of 2^40 and 2^40 + 3 is 2^40 + 1.5 -> 2^40 + 2 (even); float32 would lose this.
        const double big = std::ldexp(1.0, 40);
        for (DType type : {DType::Int64, DType::UInt64}) {
            const Tensor x = tensor_from(type, {1, 1, 2}, {big, big + 3});
            const auto y = as_doubles(grid_sample(x.view(), positions({0.5}, 2).view(), with(Interpolation::Linear)).view());
            CHECK(y[0] == big + 2);
        }
        const Tensor x32 = tensor_from(DType::Int32, {1, 1, 2}, {2147483000.0, 2147483647.0});
        const auto y32 = as_doubles(grid_sample(x32.view(), positions({0.25}, 2).view(), with(Interpolation::Linear)).view());
        CHECK(y32[0] == round_half_even(0.75 * 2147483000.0 + 0.25 * 2147483647.0));
    }
    SECTION("the fill value is rounded and saturated to the type") {
        const Tensor x = tensor_from(DType::UInt8, {1, 1, 3}, {10, 20, 30});
        for (auto [fill, expected] : {std::pair{-5.0, 0.0}, {300.0, 255.0}, {2.5, 2.0}, {3.5, 4.0}}) {
            for (auto mode : {Interpolation::Nearest, Interpolation::Linear, Interpolation::Cubic}) {
                const auto y = as_doubles(grid_sample(x.view(), positions({-20.0}, 3).view(), with(mode, fill)).view());
                CHECK(y[0] == expected);
            }
        }
    }
}

TEST_CASE("nearest copies values exactly for every type", "[dtype][nearest]") {
    const std::int64_t big = (std::int64_t{1} << 62) + 1;  // not representable in double
    Tensor x(DType::Int64, {1, 1, 3});
    x.data_as<std::int64_t>()[0] = big;
    x.data_as<std::int64_t>()[1] = std::numeric_limits<std::int64_t>::min();
    x.data_as<std::int64_t>()[2] = std::numeric_limits<std::int64_t>::max();
    const Tensor y = grid_sample(x.view(), positions({0.2, 0.9, 2.4}, 3).view(), with(Interpolation::Nearest));
    CHECK(y.data_as<std::int64_t>()[0] == big);
    CHECK(y.data_as<std::int64_t>()[1] == std::numeric_limits<std::int64_t>::min());
    CHECK(y.data_as<std::int64_t>()[2] == std::numeric_limits<std::int64_t>::max());

    Tensor u(DType::UInt64, {1, 1, 1});
    u.data_as<std::uint64_t>()[0] = std::numeric_limits<std::uint64_t>::max();
    CHECK(grid_sample(u.view(), positions({0.0}, 2).view(), with(Interpolation::Nearest)).data_as<std::uint64_t>()[0] ==
          std::numeric_limits<std::uint64_t>::max());

    Tensor f(DType::Float32, {1, 1, 2});
    f.data_as<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    f.data_as<float>()[1] = -0.0f;
    const Tensor fy = grid_sample(f.view(), positions({0.0, 1.0}, 2).view(), with(Interpolation::Nearest));
    CHECK(std::isnan(fy.data_as<float>()[0]));
    CHECK(std::signbit(fy.data_as<float>()[1]));
}

TEST_CASE("64-bit integers on pixel positions are copied under linear and cubic", "[dtype][integer]") {
    // Past 2^53 a double cannot hold these: a weight-1 tap must copy, not convert and round.
    const std::int64_t big = (std::int64_t{1} << 62) + 1;
    Tensor x(DType::Int64, {1, 1, 4});
    const std::int64_t values[4] = {big, std::numeric_limits<std::int64_t>::min() + 1, (std::int64_t{1} << 53) + 1,
                                    std::numeric_limits<std::int64_t>::max()};
    for (int i = 0; i < 4; ++i) x.data_as<std::int64_t>()[i] = values[i];
    Tensor u(DType::UInt64, {1, 1, 4});
    const std::uint64_t unsigned_values[4] = {std::numeric_limits<std::uint64_t>::max(), (std::uint64_t{1} << 63) + 3, 1,
                                              (std::uint64_t{1} << 60) + 7};
    for (int i = 0; i < 4; ++i) u.data_as<std::uint64_t>()[i] = unsigned_values[i];
    for (const auto mode : {Interpolation::Linear, Interpolation::Cubic, Interpolation::LanczosSinc, Interpolation::BlackmanSinc}) {
        for (const auto padding : {Padding::Zeros, Padding::Border, Padding::Reflection}) {
            const Tensor grid = positions({0.0, 1.0, 2.0, 3.0}, 4);
            const Tensor y = grid_sample(x.view(), grid.view(), with(mode, 0.0, padding));
            const Tensor uy = grid_sample(u.view(), grid.view(), with(mode, 0.0, padding));
            for (int i = 0; i < 4; ++i) {
                CHECK(y.data_as<std::int64_t>()[i] == values[i]);
                CHECK(uy.data_as<std::uint64_t>()[i] == unsigned_values[i]);
            }
        }
    }
    // A 3-D identity (the separable path's interior sums) copies too.
    const std::int64_t d = 9;  // d - 1 a power of two: the normalized positions are exact
    Tensor volume(DType::Int64, {1, 1, d, d, d});
    std::vector<double> identity;
    for (std::int64_t i = 0; i < d * d * d; ++i) {
        volume.data_as<std::int64_t>()[i] = (std::int64_t{1} << 61) + 3 * i + 1;
        const std::int64_t z = i / (d * d), y = i / d % d, x = i % d;
        for (const std::int64_t u : {x, y, z}) identity.push_back(2.0 * static_cast<double>(u) / static_cast<double>(d - 1) - 1.0);
    }
    const Tensor identity_grid = tensor_from(DType::Float64, {1, d, d, d, 3}, identity);
    for (const auto mode : {Interpolation::Linear, Interpolation::Cubic, Interpolation::LanczosSinc}) {
        const Tensor same = grid_sample(volume.view(), identity_grid.view(), with(mode, 0.0, Padding::Border));
        std::int64_t differing = 0;
        for (std::int64_t i = 0; i < d * d * d; ++i) differing += same.data_as<std::int64_t>()[i] != volume.data_as<std::int64_t>()[i];
        CHECK(differing == 0);
    }
    // Between pixels the weighted sum in double still applies: halfway between 2^62+1 and 2^62+1.
    Tensor pair(DType::Int64, {1, 1, 2});
    pair.data_as<std::int64_t>()[0] = big;
    pair.data_as<std::int64_t>()[1] = big;
    CHECK(grid_sample(pair.view(), positions({0.5}, 2).view(), with(Interpolation::Linear)).data_as<std::int64_t>()[0] ==
          std::int64_t{1} << 62);
}

TEST_CASE("float16 and bfloat16 compute in float32 and round to nearest even on store", "[dtype][half]") {
    SECTION("float16: the midpoint of 1 and 1+2^-10 is a tie that rounds to 1") {
        const Tensor x = tensor_from(DType::Float16, {1, 1, 3}, {1.0, 1.0 + std::ldexp(1.0, -10), 1.0 + std::ldexp(2.0, -10)});
        const auto y = as_doubles(grid_sample(x.view(), positions({0.5, 1.5}, 3).view(), with(Interpolation::Linear)).view());
        CHECK(y[0] == 1.0);
        CHECK(y[1] == 1.0 + std::ldexp(2.0, -10));  // 1 + 1.5*2^-10: tie between odd and even -> even
    }
    SECTION("bfloat16: midpoints tie to even") {
        const Tensor x = tensor_from(DType::BFloat16, {1, 1, 3}, {1.0, 1.0 + std::ldexp(1.0, -7), 1.0 + std::ldexp(2.0, -7)});
        const auto y = as_doubles(grid_sample(x.view(), positions({0.5, 1.5}, 3).view(), with(Interpolation::Linear)).view());
        CHECK(y[0] == 1.0);
        CHECK(y[1] == 1.0 + std::ldexp(2.0, -7));
    }
    SECTION("float16 and bfloat16 grids are read as their values") {
        const Tensor x = tensor_from(DType::Float32, {1, 1, 5}, {0, 10, 20, 30, 40});
        for (DType grid_dtype : {DType::Float16, DType::BFloat16}) {
            const Tensor grid = tensor_from(grid_dtype, {1, 2, 1}, {-0.25, 0.5});  // u = 1.5 and 3 (align_corners)
            const auto y = as_doubles(grid_sample(x.view(), grid.view(), with(Interpolation::Linear)).view());
            CHECK(y == std::vector<double>{15.0, 30.0});
        }
    }
}

TEST_CASE("complex values interpolate real and imaginary parts with the same weights", "[dtype][complex]") {
    for (DType type : {DType::Complex64, DType::Complex128}) {
        Tensor x(type, {1, 1, 2});
        visit_dtype(type, [&](auto tag) {
            using T = typename decltype(tag)::type;
            if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
                x.data_as<T>()[0] = T(1, 2);
                x.data_as<T>()[1] = T(3, -4);
                const Tensor y = grid_sample(x.view(), positions({0.25, 0.5, 5.0}, 2).view(), with(Interpolation::Linear, 7.0));
                CHECK(y.data_as<T>()[0] == T(1.5, 0.5));
                CHECK(y.data_as<T>()[1] == T(2, -1));
                CHECK(y.data_as<T>()[2] == T(7, 0));  // the fill is real
            }
            return 0;
        });
    }
}

TEST_CASE("bool behaves as an unsigned integer with range [0, 1]", "[dtype][bool]") {
    Tensor x(DType::Bool, {1, 1, 4});
    bool* values = x.data_as<bool>();
    values[0] = false;
    values[1] = true;
    values[2] = true;
    values[3] = false;
    // 0.5 -> 0 (half to even), 0.75 -> 1; cubic overshoot above 1 saturates to true.
    const Tensor y = grid_sample(x.view(), positions({0.5, 0.75, 1.5}, 4).view(), with(Interpolation::Linear));
    CHECK(y.data_as<bool>()[0] == false);
    CHECK(y.data_as<bool>()[1] == true);
    CHECK(y.data_as<bool>()[2] == true);
    const Tensor c = grid_sample(x.view(), positions({1.5}, 4).view(), with(Interpolation::Cubic));
    CHECK(cubic_at({0, 1, 1, 0}, 1.5) > 1.0);
    CHECK(c.data_as<bool>()[0] == true);
    const Tensor n = grid_sample(x.view(), positions({1.2, 7.0}, 4).view(), with(Interpolation::Nearest, 1.0));
    CHECK(n.data_as<bool>()[0] == true);
    CHECK(n.data_as<bool>()[1] == true);  // fill 1 -> true
}

TEST_CASE("strings: nearest only, zeros padding gives the empty string", "[dtype][string]") {
    Tensor x(DType::String, {1, 1, 2, 2});
    auto* s = x.data_as<std::string>();
    s[0] = "cat";
    s[1] = "dog";
    s[2] = "émeu";
    s[3] = "yak";
    const Tensor grid = tensor_from(DType::Float32, {1, 1, 3, 2}, {1, -1, -1, 1, 3, 3});
    SampleOptions nearest = with(Interpolation::Nearest, 5.0);
    const Tensor y = grid_sample(x.view(), grid.view(), nearest);
    CHECK(y.data_as<std::string>()[0] == "dog");
    CHECK(y.data_as<std::string>()[1] == "émeu");
    CHECK(y.data_as<std::string>()[2] == "");
    nearest.padding = Padding::Border;
    CHECK(grid_sample(x.view(), grid.view(), nearest).data_as<std::string>()[2] == "yak");
    CHECK_THROWS_WITH(grid_sample(x.view(), grid.view(), with(Interpolation::Linear)),
                      Catch::Contains("string") && Catch::Contains("nearest"));
    CHECK_THROWS_WITH(grid_sample(x.view(), grid.view(), with(Interpolation::Cubic)),
                      Catch::Contains("string") && Catch::Contains("nearest"));
}

TEST_CASE("every dtype samples through the same body", "[dtype][all]") {
    // A linear blend at u = 0.5 of 2 and 4 is exactly 3 in every numeric type.
    for (DType type : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8, DType::Int16,
                       DType::Int32, DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64}) {
        INFO(dtype_name(type));
        const Tensor x = tensor_from(type, {1, 1, 2}, {2, 4});
        const Tensor y = grid_sample(x.view(), positions({0.5, 1.0, 0.0}, 2).view(), with(Interpolation::Linear));
        CHECK(y.dtype() == type);
        CHECK(as_doubles(y.view()) == std::vector<double>{3, 4, 2});
    }
}

TEST_CASE("copy_elements copies any strided view element by element, strings included", "[dtype][copy]") {
    // A (2, 3, 4) int16 tensor whose element (i, j, k) is 100 i + 10 j + k, viewed as it lies,
    // transposed, as a window, and with a stepped innermost axis.
    Tensor source(DType::Int16, {2, 3, 4});
    auto* value = source.data_as<std::int16_t>();
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 4; ++k) value[(i * 3 + j) * 4 + k] = static_cast<std::int16_t>(100 * i + 10 * j + k);
    const auto expect = [](const Tensor& copy, auto element) {
        const Shape& shape = copy.shape();
        const auto* got = copy.data_as<std::int16_t>();
        std::int64_t n = 0;
        for (std::int64_t a = 0; a < shape[0]; ++a)
            for (std::int64_t b = 0; b < shape[1]; ++b)
                for (std::int64_t c = 0; c < shape[2]; ++c, ++n) {
                    INFO(a << "," << b << "," << c);
                    REQUIRE(got[n] == element(a, b, c));
                }
    };
    const ConstTensorView whole = source.view();
    expect(Tensor::copy_of(whole), [](auto i, auto j, auto k) { return 100 * i + 10 * j + k; });
    // (k, j, i): strides (1, 4, 12).
    expect(Tensor::copy_of(ConstTensorView(DType::Int16, whole.data, {4, 3, 2}, {1, 4, 12})),
           [](auto k, auto j, auto i) { return 100 * i + 10 * j + k; });
    // i = 1, j 1..2, k 1..3.
    expect(Tensor::copy_of(ConstTensorView(DType::Int16, value + 12 + 4 + 1, {1, 2, 3}, {12, 4, 1})),
           [](auto, auto j, auto k) { return 100 + 10 * (j + 1) + (k + 1); });
    // every other k.
    expect(Tensor::copy_of(ConstTensorView(DType::Int16, whole.data, {2, 3, 2}, {12, 4, 2})),
           [](auto i, auto j, auto k) { return 100 * i + 10 * j + 2 * k; });
    // Into a strided destination: the transpose written back gives the source.
    Tensor transposed = Tensor::copy_of(ConstTensorView(DType::Int16, whole.data, {4, 3, 2}, {1, 4, 12}));
    Tensor back(DType::Int16, {2, 3, 4});
    copy_elements(transposed.view(), TensorView(DType::Int16, back.data(), {4, 3, 2}, {1, 4, 12}));
    expect(back, [](auto i, auto j, auto k) { return 100 * i + 10 * j + k; });

    Tensor words(DType::String, {2, 2});
    auto* text = words.data_as<std::string>();
    text[0] = "a", text[1] = "b", text[2] = "c", text[3] = "d";
    const Tensor turned = Tensor::copy_of(ConstTensorView(DType::String, words.data(), {2, 2}, {1, 2}));
    const auto* got = turned.data_as<std::string>();
    CHECK((got[0] == "a" && got[1] == "c" && got[2] == "b" && got[3] == "d"));
}
