// The rules of docs/semantics.md, each pinned by a case whose expected value is worked out here
// independently (index arithmetic, exact binary fractions, or a direct 1-D formula).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include "gridwarp/positions.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;

namespace {

// Samples a 1-D signal (1, 1, d) at normalized coordinates given in double.
std::vector<double> sample_1d(const std::vector<double>& signal, const std::vector<double>& coords,
                              const SampleOptions& options, DType dtype = DType::Float64,
                              DType grid_dtype = DType::Float64) {
    const Tensor x = tensor_from(dtype, {1, 1, static_cast<std::int64_t>(signal.size())}, signal);
    const Tensor grid = tensor_from(grid_dtype, {1, static_cast<std::int64_t>(coords.size()), 1}, coords);
    return as_doubles(grid_sample(x.view(), grid.view(), options).view());
}

// Normalized coordinate of (fractional) pixel position u on an axis of size d.
double normalized(double u, std::int64_t d, bool align_corners) {
    return align_corners ? 2.0 * u / static_cast<double>(d - 1) - 1.0 : (2.0 * u + 1.0) / static_cast<double>(d) - 1.0;
}

// The identity grid (N, O..., r) built directly from the base-coordinate formulas.
Tensor identity_grid(std::int64_t batch, const Shape& spatial, bool align_corners, DType dtype) {
    const auto rank = static_cast<std::int64_t>(spatial.size());
    Shape shape{batch};
    shape.insert(shape.end(), spatial.begin(), spatial.end());
    shape.push_back(rank);
    std::vector<double> values;
    const std::int64_t points = shape_numel(spatial);
    for (std::int64_t n = 0; n < batch; ++n) {
        for (std::int64_t p = 0; p < points; ++p) {
            std::int64_t rest = p;
            std::vector<double> coords(static_cast<std::size_t>(rank));
            for (std::int64_t axis = rank - 1; axis >= 0; --axis) {
                const auto d = spatial[static_cast<std::size_t>(axis)];
                coords[static_cast<std::size_t>(rank - 1 - axis)] = normalized(static_cast<double>(rest % d), d, align_corners);
                rest /= d;
            }
            values.insert(values.end(), coords.begin(), coords.end());
        }
    }
    return tensor_from(dtype, shape, values);
}

const Interpolation kModes[] = {Interpolation::Linear, Interpolation::Nearest, Interpolation::Cubic};
const Padding kPaddings[] = {Padding::Zeros, Padding::Border, Padding::Reflection};

}  // namespace

TEST_CASE("mode and padding names, with the opset-16 / OpenVINO / PyTorch aliases", "[semantics][names]") {
    CHECK(parse_interpolation("linear") == Interpolation::Linear);
    CHECK(parse_interpolation("bilinear") == Interpolation::Linear);
    CHECK(parse_interpolation("trilinear") == Interpolation::Linear);
    CHECK(parse_interpolation("nearest") == Interpolation::Nearest);
    CHECK(parse_interpolation("cubic") == Interpolation::Cubic);
    CHECK(parse_interpolation("bicubic") == Interpolation::Cubic);
    CHECK(parse_padding("zeros") == Padding::Zeros);
    CHECK(parse_padding("border") == Padding::Border);
    CHECK(parse_padding("reflection") == Padding::Reflection);
    CHECK_THROWS_WITH(parse_interpolation("area"), Catch::Contains("'area'") && Catch::Contains("linear, nearest or cubic"));
    CHECK_THROWS_WITH(parse_padding("wrap"), Catch::Contains("'wrap'") && Catch::Contains("zeros, border or reflection"));
}

TEST_CASE("identity grids reproduce the input exactly, every mode, padding and rank", "[semantics][identity]") {
    // Sizes whose base coordinates are exact binary fractions (d for align_corners=0, d-1 for 1 a
    // power of two), so the unnormalized positions are exact integers.
    std::mt19937 rng(7);
    for (bool align_corners : {false, true}) {
        const std::int64_t a = align_corners ? 9 : 8, b = align_corners ? 5 : 4, c = align_corners ? 3 : 2;
        for (const Shape& spatial : {Shape{a}, Shape{b, a}, Shape{c, b, a}, Shape{c, c, b, b}}) {
            Shape input_shape{2, 3};
            input_shape.insert(input_shape.end(), spatial.begin(), spatial.end());
            for (DType dtype : {DType::Float32, DType::Float64, DType::UInt8, DType::Int16}) {
                const Tensor x = random_tensor(dtype, input_shape, -50, 250, rng);
                for (DType grid_dtype : {DType::Float32, DType::Float64}) {
                    const Tensor grid = identity_grid(2, spatial, align_corners, grid_dtype);
                    for (auto mode : kModes) {
                        for (auto padding : kPaddings) {
                            INFO("rank " << spatial.size() << " " << dtype_name(dtype) << " grid " << dtype_name(grid_dtype)
                                         << " " << interpolation_name(mode) << " " << padding_name(padding)
                                         << " align_corners " << align_corners);
                            const Tensor y = grid_sample(x.view(), grid.view(), options_for(mode, padding, align_corners));
                            CHECK(compare_exact(y.view(), x.view()) == "");
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("integer shifts are exact and pad as each padding mode says", "[semantics][shift]") {
    // A 2-D image (1, 1, 4, 8) shifted by (dy, dx) whole pixels; align_corners=0 with power-of-two sizes.
    const std::int64_t h = 4, w = 8;
    std::vector<double> pixels(static_cast<std::size_t>(h * w));
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<double>(i * 3 + 1);
    const Tensor x = tensor_from(DType::Float32, {1, 1, h, w}, pixels);
    auto reflect = [](std::int64_t i, std::int64_t d) {  // about -0.5 and d-0.5, repeatedly
        while (i < 0 || i >= d) i = i < 0 ? -1 - i : 2 * d - 1 - i;
        return i;
    };
    for (auto [dy, dx] : {std::pair<std::int64_t, std::int64_t>{0, 3}, {-1, 0}, {2, -5}, {-3, 9}, {5, -17}}) {
        std::vector<double> coords;
        for (std::int64_t i = 0; i < h; ++i) {
            for (std::int64_t j = 0; j < w; ++j) {
                coords.push_back(normalized(static_cast<double>(j + dx), w, false));
                coords.push_back(normalized(static_cast<double>(i + dy), h, false));
            }
        }
        const Tensor grid = tensor_from(DType::Float32, {1, h, w, 2}, coords);
        for (auto mode : kModes) {
            for (auto padding : kPaddings) {
                std::vector<double> expected;
                for (std::int64_t i = 0; i < h; ++i) {
                    for (std::int64_t j = 0; j < w; ++j) {
                        std::int64_t si = i + dy, sj = j + dx;
                        if (padding == Padding::Zeros && (si < 0 || si >= h || sj < 0 || sj >= w)) {
                            expected.push_back(0.0);
                            continue;
                        }
                        if (padding == Padding::Border) {
                            si = std::clamp<std::int64_t>(si, 0, h - 1);
                            sj = std::clamp<std::int64_t>(sj, 0, w - 1);
                        } else if (padding == Padding::Reflection) {
                            si = reflect(si, h);
                            sj = reflect(sj, w);
                        }
                        expected.push_back(pixels[static_cast<std::size_t>(si * w + sj)]);
                    }
                }
                INFO("shift (" << dy << ", " << dx << ") " << interpolation_name(mode) << " " << padding_name(padding));
                const Tensor y = grid_sample(x.view(), grid.view(), options_for(mode, padding, false));
                CHECK(compare_exact(y.view(), tensor_from(DType::Float32, {1, 1, h, w}, expected).view()) == "");
            }
        }
    }
}

TEST_CASE("90-degree rotations through AffineGrid are exact", "[semantics][rotation]") {
    // theta = [[0, -1, 0], [1, 0, 0]] sends output (i, j) to input row j, column d-1-i.
    const std::int64_t d = 8;
    std::mt19937 rng(11);
    const Tensor x = random_tensor(DType::Float32, {1, 2, d, d}, -1, 1, rng);
    const auto pixels = as_doubles(x.view());
    const Tensor theta = tensor_from(DType::Float32, {1, 2, 3}, {0, -1, 0, 1, 0, 0});
    std::vector<double> expected;
    for (std::int64_t c = 0; c < 2; ++c)
        for (std::int64_t i = 0; i < d; ++i)
            for (std::int64_t j = 0; j < d; ++j) expected.push_back(pixels[static_cast<std::size_t>((c * d + j) * d + (d - 1 - i))]);
    const Tensor expected_tensor = tensor_from(DType::Float32, {1, 2, d, d}, expected);
    const Tensor grid = affine_grid(theta.view(), {1, 2, d, d}, false);
    for (auto mode : kModes) {
        for (auto padding : kPaddings) {
            INFO(interpolation_name(mode) << " " << padding_name(padding));
            const Tensor y = grid_sample(x.view(), grid.view(), options_for(mode, padding, false));
            CHECK(compare_exact(y.view(), expected_tensor.view()) == "");
        }
    }
}

TEST_CASE("one axis: taps and weights of each mode", "[semantics][taps]") {
    const std::vector<double> signal{1.0, 10.0, 100.0, 1000.0, 10000.0};
    const std::int64_t d = 5;
    SECTION("nearest rounds half to even") {
        // u = 0.5, 1.5, 2.5, 3.5 round to 0, 2, 2, 4; u = 1.25 -> 1.
        const auto y = sample_1d(signal, {normalized(0.5, d, true), normalized(1.5, d, true), normalized(2.5, d, true),
                                          normalized(3.5, d, true), normalized(1.25, d, true)},
                                 options_for(Interpolation::Nearest, Padding::Zeros, true));
        CHECK(y == std::vector<double>{1.0, 100.0, 100.0, 10000.0, 10.0});
    }
    SECTION("nearest ties on float32 grids, align_corners=0") {
        // d = 4, g = -0.5 gives u = 0.5 exactly; g = 0.5 gives u = 2.5; g = 0 gives u = 1.5.
        const auto y = sample_1d({1, 2, 3, 4}, {-0.5, 0.0, 0.5}, options_for(Interpolation::Nearest, Padding::Zeros, false),
                                 DType::Float32, DType::Float32);
        CHECK(y == std::vector<double>{1.0, 3.0, 3.0});
    }
    SECTION("linear weights (1-t, t)") {
        const auto y = sample_1d(signal, {normalized(1.25, d, true)}, options_for(Interpolation::Linear, Padding::Zeros, true));
        CHECK(y[0] == Approx(0.75 * 10.0 + 0.25 * 100.0).epsilon(1e-15));
    }
    SECTION("cubic: Keys kernel with A = -0.75 on four taps") {
        const double t = 0.25, A = -0.75;
        auto kernel = [A](double s) {  // the convolution kernel itself, |s| <= 2
            s = std::fabs(s);
            return s <= 1 ? ((A + 2) * s - (A + 3)) * s * s + 1 : ((A * s - 5 * A) * s + 8 * A) * s - 4 * A;
        };
        const double expected = kernel(1 + t) * 1.0 + kernel(t) * 10.0 + kernel(1 - t) * 100.0 + kernel(2 - t) * 1000.0;
        const auto y = sample_1d(signal, {normalized(1.25, d, true)}, options_for(Interpolation::Cubic, Padding::Zeros, true));
        CHECK(y[0] == Approx(expected).epsilon(1e-14));
    }
    SECTION("zeros padding: outside taps contribute 0, weights are not renormalized") {
        // u = -0.25: taps -1 (0.25, outside) and 0 (0.75).
        const auto y = sample_1d(signal, {normalized(-0.25, d, true)}, options_for(Interpolation::Linear, Padding::Zeros, true));
        CHECK(y[0] == Approx(0.75 * 1.0).epsilon(1e-15));
    }
    SECTION("fill value is read for outside taps under zeros padding") {
        const auto y = sample_1d(signal, {normalized(-0.25, d, true), normalized(-7.0, d, true), normalized(2.0, d, true)},
                                 options_for(Interpolation::Linear, Padding::Zeros, true, 40.0));
        CHECK(y[0] == Approx(0.25 * 40.0 + 0.75 * 1.0).epsilon(1e-15));
        CHECK(y[1] == 40.0);
        CHECK(y[2] == 100.0);
    }
    SECTION("a point whose taps all miss an axis is exactly the fill value") {
        // Between 1 and 6 pixels outside, the taps are planned; the result must still be the fill
        // itself, not a float sum of weight * fill.
        for (auto mode : kModes) {
            std::vector<double> coords;
            for (int i = 0; i < 200; ++i) {
                const double outside = 2.0 + 3.9 * i / 200.0;  // 2 to 5.9 pixels past an edge
                coords.push_back(normalized(-outside, 4, false));
                coords.push_back(normalized(3.0 + outside, 4, false));
            }
            const auto y = sample_1d({1.0, 2.0, 3.0, 4.0}, coords, options_for(mode, Padding::Zeros, false, -3.25),
                                     DType::Float32, DType::Float32);
            for (double v : y) CHECK(v == -3.25);
        }
    }
    SECTION("fill does not apply to border and reflection") {
        for (auto padding : {Padding::Border, Padding::Reflection}) {
            const auto y = sample_1d(signal, {normalized(-3.0, d, true)}, options_for(Interpolation::Linear, padding, true, 40.0));
            CHECK(y[0] == (padding == Padding::Border ? 1.0 : 1000.0));
        }
    }
}

TEST_CASE("cubic + border clamps every tap (PyTorch, ONNX Runtime), not the coordinate", "[semantics][cubic]") {
    // u = -0.5 on a 4-sample signal: taps -2, -1, 0, 1 clamp to 0, 0, 0, 1 with t = 0.5.
    // Clamping the coordinate first (the ONNX reference) would give u = 0 and exactly x[0].
    const std::vector<double> signal{2.0, 6.0, 0.0, 0.0};
    const double A = -0.75, t = 0.5;
    const double w0 = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
    const double w1 = ((A + 2) * t - (A + 3)) * t * t + 1;
    const double w2 = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
    const double w3 = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
    const double expected = (w0 + w1 + w2) * 2.0 + w3 * 6.0;
    const auto y = sample_1d(signal, {normalized(-0.5, 4, true)}, options_for(Interpolation::Cubic, Padding::Border, true));
    CHECK(y[0] == Approx(expected).epsilon(1e-14));
    CHECK(y[0] != Approx(2.0));
}

TEST_CASE("reflection reflects each tap index about lo/hi repeatedly", "[semantics][reflection]") {
    const std::vector<double> signal{1.0, 2.0, 4.0, 8.0, 16.0};
    const std::int64_t d = 5;
    for (bool align_corners : {false, true}) {
        // Reflect an integer index by walking the spec's rule, one reflection at a time.
        auto reflect = [&](std::int64_t i) {
            const double lo = align_corners ? 0.0 : -0.5, hi = align_corners ? d - 1.0 : d - 0.5;
            double v = static_cast<double>(i);
            while (v < lo || v > hi) v = v < lo ? 2 * lo - v : 2 * hi - v;
            return static_cast<std::int64_t>(v);
        };
        std::vector<double> coords, expected;
        for (double u : {-0.5, -1.0, -3.0, 5.0, 6.0, 9.0, 13.0, -17.0, 4.0, 0.0, 22.0}) {
            coords.push_back(normalized(u, d, align_corners));
            expected.push_back(signal[static_cast<std::size_t>(reflect(static_cast<std::int64_t>(std::nearbyint(u))))]);
        }
        INFO("align_corners " << align_corners);
        CHECK(sample_1d(signal, coords, options_for(Interpolation::Nearest, Padding::Reflection, align_corners)) == expected);
        // Linear between two reflected taps: u = -2.25 has taps -3 (0.25) and -2 (0.75).
        const auto y = sample_1d(signal, {normalized(-2.25, d, align_corners)},
                                 options_for(Interpolation::Linear, Padding::Reflection, align_corners));
        CHECK(y[0] == Approx(0.25 * signal[static_cast<std::size_t>(reflect(-3))] +
                             0.75 * signal[static_cast<std::size_t>(reflect(-2))]).epsilon(1e-14));
    }
    SECTION("nearest + reflection rounds first, then reflects (ONNX), at a tie outside the image") {
        // align_corners=0, d=4 (exact coordinates): u = -1.5 rounds to -2 (even), which reflects
        // to 1. PyTorch reflects -1.5 to 0.5 first and rounds to 0.
        const auto y = sample_1d({1.0, 2.0, 4.0, 8.0}, {normalized(-1.5, 4, false)},
                                 options_for(Interpolation::Nearest, Padding::Reflection, false));
        CHECK(y[0] == 2.0);
    }
    SECTION("an axis of size 1 maps every tap to index 0") {
        for (auto mode : kModes) {
            for (bool align_corners : {false, true}) {
                const auto y = sample_1d({7.0}, {-5.0, -1.0, 0.3, 2.0, 11.5}, options_for(mode, Padding::Reflection, align_corners));
                for (double v : y) CHECK(v == Approx(7.0).epsilon(1e-15));
            }
        }
    }
}

TEST_CASE("non-finite coordinates give the fill value in every padding mode", "[semantics][nonfinite]") {
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    // A 2-D input with 2 channels; one coordinate of the pair is non-finite.
    const Tensor x = tensor_from(DType::Float32, {1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    for (DType grid_dtype : {DType::Float32, DType::Float64, DType::Float16}) {
        const Tensor grid = tensor_from(grid_dtype, {1, 1, 4, 2}, {nan, 0.0, 0.0, inf, -inf, 0.5, nan, nan});
        for (auto mode : kModes) {
            for (auto padding : kPaddings) {
                for (double fill : {0.0, -3.5}) {
                    INFO(dtype_name(grid_dtype) << " " << interpolation_name(mode) << " " << padding_name(padding) << " fill " << fill);
                    const auto y = as_doubles(grid_sample(x.view(), grid.view(), options_for(mode, padding, false, fill)).view());
                    REQUIRE(y.size() == 8);
                    for (double v : y) CHECK(v == fill);
                }
            }
        }
    }
}

TEST_CASE("huge finite coordinates are safe: fill, edge value, or folded position", "[semantics][huge]") {
    const std::vector<double> signal{3.0, 5.0, 7.0, 11.0};
    for (bool align_corners : {false, true}) {
        for (auto mode : kModes) {
            const std::vector<double> huge{1e30, -1e30, 3e38, -3e38, 1e300, -1e300};
            for (DType grid_dtype : {DType::Float32, DType::Float64}) {
                std::vector<double> coords;
                for (double g : huge) {
                    if (grid_dtype == DType::Float32 && std::fabs(g) > 3.4e38) continue;
                    coords.push_back(g);
                }
                INFO(interpolation_name(mode) << " grid " << dtype_name(grid_dtype) << " align_corners " << align_corners);
                const auto zeros = sample_1d(signal, coords, options_for(mode, Padding::Zeros, align_corners, 9.0),
                                             DType::Float64, grid_dtype);
                for (double v : zeros) CHECK(v == 9.0);
                const auto border = sample_1d(signal, coords, options_for(mode, Padding::Border, align_corners),
                                              DType::Float64, grid_dtype);
                for (std::size_t i = 0; i < coords.size(); ++i) CHECK(border[i] == (coords[i] > 0 ? 11.0 : 3.0));
                const auto reflected = sample_1d(signal, coords, options_for(mode, Padding::Reflection, align_corners),
                                                 DType::Float64, grid_dtype);
                for (double v : reflected) CHECK(std::isfinite(v));
            }
        }
    }
    SECTION("reflection folds with period 4 in normalized units") {
        // g = 2^42 + 0.5 folds to 0.5; for d = 4, align_corners=0 that is u = 2.5.
        const double g = std::ldexp(1.0, 42) + 0.5;
        const auto y = sample_1d(signal, {g, -g}, options_for(Interpolation::Linear, Padding::Reflection, false));
        CHECK(y[0] == Approx(0.5 * 7.0 + 0.5 * 11.0).epsilon(1e-15));
        // -g folds to -0.5: u = 0.5.
        CHECK(y[1] == Approx(0.5 * 3.0 + 0.5 * 5.0).epsilon(1e-15));
    }
}

TEST_CASE("size-1 axes and zero-sized axes", "[semantics][sizes]") {
    SECTION("size-1 axis under border behaves as a constant") {
        for (auto mode : kModes) {
            const auto y = sample_1d({4.0}, {-2.0, -0.3, 0.0, 0.9, 3.0}, options_for(mode, Padding::Border, false));
            for (double v : y) CHECK(v == Approx(4.0).epsilon(1e-15));
        }
    }
    SECTION("size-1 axis under zeros: only the tap at 0 is inside") {
        // align_corners=0, d=1: u = g/2; g = 0.5 -> u = 0.25: taps 0 (0.75) and 1 (0.25, outside).
        const auto y = sample_1d({4.0}, {0.5}, options_for(Interpolation::Linear, Padding::Zeros, false));
        CHECK(y[0] == Approx(3.0).epsilon(1e-15));
    }
    SECTION("zero-sized N, C or output axes give an empty output") {
        const Tensor grid = tensor_from(DType::Float32, {0, 3, 2}, {});
        const Tensor x0 = Tensor(DType::Float32, {0, 2, 5});
        auto y = grid_sample(x0.view(), Tensor(DType::Float32, {0, 3, 1}).view(), {});
        CHECK(y.shape() == Shape{0, 2, 3});
        const Tensor x1 = Tensor(DType::Float32, {1, 0, 5, 5});
        y = grid_sample(x1.view(), Tensor(DType::Float32, {1, 4, 4, 2}).view(), {});
        CHECK(y.shape() == Shape{1, 0, 4, 4});
        const Tensor x2 = Tensor(DType::UInt8, {1, 3, 5, 5});
        y = grid_sample(x2.view(), Tensor(DType::Float32, {1, 0, 7, 2}).view(), {});
        CHECK(y.shape() == Shape{1, 3, 0, 7});
    }
    SECTION("a zero-sized input axis with a non-empty output gives the fill value everywhere") {
        const Tensor x = Tensor(DType::Float32, {1, 1, 0, 4});
        const Tensor grid = tensor_from(DType::Float32, {1, 1, 2, 2}, {0, 0, 0.5, -0.5});
        for (auto mode : kModes) {
            for (auto padding : kPaddings) {
                const auto y = as_doubles(grid_sample(x.view(), grid.view(), options_for(mode, padding, false, 2.0)).view());
                CHECK(y == std::vector<double>{2.0, 2.0});
            }
        }
    }
}

TEST_CASE("shape errors name both shapes", "[semantics][errors]") {
    const Tensor x = Tensor(DType::Float32, {1, 1, 4, 4});
    CHECK_THROWS_WITH(grid_sample(x.view(), Tensor(DType::Float32, {1, 5, 5}).view(), {}),
                      Catch::Contains("(1, 1, 4, 4)") && Catch::Contains("(1, 5, 5)"));
    CHECK_THROWS_WITH(grid_sample(x.view(), Tensor(DType::Float32, {1, 5, 5, 3}).view(), {}),
                      Catch::Contains("(1, 1, 4, 4)") && Catch::Contains("(1, 5, 5, 3)"));
    CHECK_THROWS_WITH(grid_sample(x.view(), Tensor(DType::Float32, {2, 5, 5, 2}).view(), {}),
                      Catch::Contains("N=2") && Catch::Contains("N=1") && Catch::Contains("(2, 5, 5, 2)"));
    CHECK_THROWS_WITH(grid_sample(Tensor(DType::Float32, {4, 4}).view(), Tensor(DType::Float32, {1, 5, 5, 2}).view(), {}),
                      Catch::Contains("rank >= 3") && Catch::Contains("(4, 4)"));
    CHECK_THROWS_WITH(grid_sample(x.view(), Tensor(DType::Int32, {1, 5, 5, 2}).view(), {}),
                      Catch::Contains("int32"));
    Tensor wrong_output(DType::Float64, {1, 1, 5, 5});
    const Tensor grid(DType::Float32, {1, 5, 5, 2});
    const GridPositions positions(grid.view());
    CHECK_THROWS_WITH(grid_sample(x.view(), positions, wrong_output.view(), {}),
                      Catch::Contains("float32 (1, 1, 5, 5)") && Catch::Contains("float64"));
}

TEST_CASE("fixed-rank paths equal the generic N-D path on random data", "[semantics][rank]") {
    std::mt19937 rng(2024);
    for (const Shape& input_shape : {Shape{2, 3, 7, 9}, Shape{1, 2, 5, 4, 6}}) {
        const auto rank = static_cast<std::int64_t>(input_shape.size()) - 2;
        Shape grid_shape{input_shape[0]};
        for (std::int64_t a = 0; a < rank; ++a) grid_shape.push_back(5 + a);
        grid_shape.push_back(rank);
        for (DType dtype : {DType::Float32, DType::Float64, DType::UInt8, DType::Complex64}) {
            const Tensor x = random_tensor(dtype, input_shape, -100, 300, rng);
            for (DType grid_dtype : {DType::Float32, DType::Float64}) {
                const Tensor grid = random_tensor(grid_dtype, grid_shape, -1.6, 1.6, rng);
                for (auto mode : kModes) {
                    for (auto padding : kPaddings) {
                        for (bool align_corners : {false, true}) {
                            SampleOptions fixed = options_for(mode, padding, align_corners, 1.5);
                            SampleOptions generic = fixed;
                            generic.force_generic_rank = true;
                            INFO("rank " << rank << " " << dtype_name(dtype) << " " << dtype_name(grid_dtype) << " "
                                         << interpolation_name(mode) << " " << padding_name(padding) << " ac " << align_corners);
                            CHECK(compare_exact(grid_sample(x.view(), grid.view(), fixed).view(),
                                                grid_sample(x.view(), grid.view(), generic).view()) == "");
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("thread count does not change results, and strided views are read in place", "[semantics][threads]") {
    std::mt19937 rng(5);
    const Tensor x = random_tensor(DType::Float32, {1, 2, 33, 47}, 0, 1, rng);
    const Tensor grid = random_tensor(DType::Float32, {1, 40, 300, 2}, -1.2, 1.2, rng);
    SampleOptions one;
    one.threads = 1;
    SampleOptions two;
    two.threads = 2;
    CHECK(compare_exact(grid_sample(x.view(), grid.view(), one).view(), grid_sample(x.view(), grid.view(), two).view()) == "");

    // The same input as an HWC buffer viewed as NCHW through strides.
    const auto values = as_doubles(x.view());
    std::vector<double> interleaved(values.size());
    for (std::int64_t c = 0; c < 2; ++c)
        for (std::int64_t p = 0; p < 33 * 47; ++p)
            interleaved[static_cast<std::size_t>(p * 2 + c)] = values[static_cast<std::size_t>(c * 33 * 47 + p)];
    const Tensor hwc = tensor_from(DType::Float32, {33, 47, 2}, interleaved);
    const ConstTensorView strided(DType::Float32, hwc.data(), {1, 2, 33, 47}, {0, 1, 47 * 2, 2});
    CHECK(compare_exact(grid_sample(strided, grid.view(), one).view(), grid_sample(x.view(), grid.view(), one).view()) == "");
}

// ---------------------------------------------------------------------------------------------
// The zero-weight rule: a tap of weight exactly zero contributes nothing, so infinities and NaN
// reach only the outputs that give them weight.

namespace {

// Values in [-100, 100] with +inf, -inf and NaN scattered among them (and no -0, which a sum that
// starts at +0 returns as +0).
std::vector<double> values_with_nonfinite(std::int64_t count, std::mt19937& rng) {
    std::uniform_real_distribution<double> value(-100.0, 100.0);
    std::vector<double> values(static_cast<std::size_t>(count));
    for (double& v : values) v = value(rng);
    const double specials[] = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::quiet_NaN()};
    for (std::int64_t i = 5; i < count; i += 23) values[static_cast<std::size_t>(i)] = specials[(i / 23) % 3];
    return values;
}

}  // namespace

TEST_CASE("zero-weight taps: identity grids return infinities and NaN in place, every mode and padding",
          "[semantics][zero-weight]") {
    // Linear and cubic taps at integer positions have weights 1, 0 (linear) and 0, 1, 0, 0
    // (cubic): 0 * inf would be NaN in every neighbour. A NaN fill value is read only by taps
    // outside, which have weight 0 here. Sizes as in the identity case above (exact positions);
    // 64 or 65 wide, so that the interior pass take whole groups.
    std::mt19937 rng(36);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (bool align_corners : {false, true}) {
        const std::int64_t a = align_corners ? 65 : 64, b = align_corners ? 9 : 8, c = align_corners ? 5 : 4;
        for (const Shape& spatial : {Shape{a}, Shape{b, a}, Shape{c, b, a}, Shape{c, c, b, b}}) {
            Shape input_shape{1, 2};
            input_shape.insert(input_shape.end(), spatial.begin(), spatial.end());
            for (DType dtype : {DType::Float32, DType::Float64}) {
                const Tensor x = tensor_from(dtype, input_shape, values_with_nonfinite(shape_numel(input_shape), rng));
                for (DType grid_dtype : {DType::Float32, DType::Float64}) {
                    const Tensor grid = identity_grid(1, spatial, align_corners, grid_dtype);
                    for (auto mode : kModes) {
                        for (auto padding : kPaddings) {
                            for (double fill : {0.0, nan}) {
                                SampleOptions options = options_for(mode, padding, align_corners, fill);
                                for (bool reference : {false, true}) {
                                    options.force_generic_rank = reference;
                                    INFO("rank " << spatial.size() << " " << dtype_name(dtype) << " grid " << dtype_name(grid_dtype)
                                                 << " " << interpolation_name(mode) << " " << padding_name(padding) << " align_corners "
                                                 << align_corners << " fill " << fill << " reference " << reference);
                                    CHECK(compare_exact(grid_sample(x.view(), grid.view(), options).view(), x.view()) == "");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("zero-weight taps: complex values keep infinities and NaN in place under an identity grid", "[semantics][zero-weight]") {
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    Tensor x(DType::Complex64, {1, 1, 4, 8});
    auto* values = x.data_as<std::complex<float>>();
    for (std::int64_t i = 0; i < 32; ++i) values[i] = {static_cast<float>(i) + 0.25f, static_cast<float>(-i)};
    values[9] = {static_cast<float>(inf), 1.0f};
    values[18] = {2.0f, static_cast<float>(nan)};
    values[27] = {static_cast<float>(-inf), static_cast<float>(inf)};
    const Tensor grid = identity_grid(1, {4, 8}, false, DType::Float32);
    for (auto mode : kModes) {
        INFO(interpolation_name(mode));
        CHECK(compare_exact(grid_sample(x.view(), grid.view(), options_for(mode, Padding::Border, false)).view(), x.view()) == "");
    }
}

TEST_CASE("zero-weight taps: a half-pixel shift spreads infinities and NaN only along the axis that weighs them",
          "[semantics][zero-weight]") {
    // x moves by half a pixel: linear weighs taps i, i+1 by 1/2 each, cubic taps i-1 .. i+2 by
    // -3/32, 19/32, 19/32, -3/32; the other axes sit on integers, where only their own tap has
    // weight. Expected values from those taps alone, in double.
    std::mt19937 rng(37);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (bool align_corners : {false, true}) {
        const std::int64_t a = align_corners ? 65 : 64, b = align_corners ? 9 : 8, c = align_corners ? 5 : 4;
        for (const Shape& spatial : {Shape{b, a}, Shape{c, b, a}}) {
            const auto rank = static_cast<std::int64_t>(spatial.size());
            const std::int64_t width = spatial.back();
            const std::int64_t rows = shape_numel(spatial) / width;
            Shape input_shape{1, 2};
            input_shape.insert(input_shape.end(), spatial.begin(), spatial.end());
            // Positions: x + 1/2 along x, the others as they are.
            const Tensor identity = identity_grid(1, spatial, align_corners, DType::Float64);
            auto coords = as_doubles(identity.view());
            for (std::int64_t p = 0; p < shape_numel(spatial); ++p) {
                coords[static_cast<std::size_t>(p * rank)] = normalized(static_cast<double>(p % width) + 0.5, width, align_corners);
            }
            for (DType dtype : {DType::Float32, DType::Float64}) {
                const auto values = values_with_nonfinite(shape_numel(input_shape), rng);
                const Tensor x = tensor_from(dtype, input_shape, values);
                for (DType grid_dtype : {DType::Float32, DType::Float64}) {
                    const Tensor grid = tensor_from(grid_dtype, identity.shape(), coords);
                    for (auto mode : {Interpolation::Linear, Interpolation::Cubic}) {
                        const std::vector<double> weights = mode == Interpolation::Linear
                                                                ? std::vector<double>{0.5, 0.5}
                                                                : std::vector<double>{-3.0 / 32, 19.0 / 32, 19.0 / 32, -3.0 / 32};
                        const std::int64_t first = mode == Interpolation::Linear ? 0 : -1;
                        for (auto padding : {Padding::Zeros, Padding::Border}) {
                            for (double fill : {0.0, nan}) {
                                std::vector<double> expected;
                                for (std::int64_t channel_row = 0; channel_row < 2 * rows; ++channel_row) {
                                    for (std::int64_t i = 0; i < width; ++i) {
                                        double sum = 0.0;
                                        for (std::size_t k = 0; k < weights.size(); ++k) {
                                            std::int64_t j = i + first + static_cast<std::int64_t>(k);
                                            double value = fill;
                                            if (padding == Padding::Border) j = std::clamp<std::int64_t>(j, 0, width - 1);
                                            if (j >= 0 && j < width) value = values[static_cast<std::size_t>(channel_row * width + j)];
                                            sum += weights[k] * value;
                                        }
                                        expected.push_back(sum);
                                    }
                                }
                                SampleOptions options = options_for(mode, padding, align_corners, fill);
                                for (bool reference : {false, true}) {
                                    options.force_generic_rank = reference;
                                    INFO("rank " << rank << " " << dtype_name(dtype) << " grid " << dtype_name(grid_dtype) << " "
                                                 << interpolation_name(mode) << " " << padding_name(padding) << " align_corners "
                                                 << align_corners << " fill " << fill << " reference " << reference);
                                    CHECK(compare(grid_sample(x.view(), grid.view(), options).view(),
                                                  tensor_from(dtype, input_shape, expected).view(), 1e-5, 1e-4) == "");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
