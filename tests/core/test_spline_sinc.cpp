// The B-splines and windowed sincs of docs/semantics.md, each pinned by a property of the exact
// mathematics (interpolation of the samples, partition of unity) or a weight in closed form.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <numbers>
#include <random>

#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;

namespace {

// Samples a 1-D signal (1, 1, d) at pixel positions u, with align_corners=1 (u = 0 and d-1 are
// -1 and 1, and every u that is a multiple of 1/4 on an axis of 9 is exact in both spaces).
std::vector<double> sample_at(const std::vector<double>& signal, const std::vector<double>& u, SampleOptions options) {
    const auto d = static_cast<std::int64_t>(signal.size());
    std::vector<double> grid;
    for (const double p : u) grid.push_back(2.0 * p / static_cast<double>(d - 1) - 1.0);
    options.align_corners = true;
    const Tensor x = tensor_from(DType::Float64, {1, 1, d}, signal);
    const Tensor g = tensor_from(DType::Float64, {1, static_cast<std::int64_t>(u.size()), 1}, grid);
    return as_doubles(grid_sample(x.view(), g.view(), options).view());
}

SampleOptions bspline(int order, Padding padding = Padding::Reflection) {
    SampleOptions options;
    options.mode = Interpolation::BSpline;
    options.spline_order = order;
    options.padding = padding;
    return options;
}

std::vector<double> random_signal(std::size_t size, unsigned seed) {
    std::mt19937 random(seed);
    std::uniform_real_distribution<double> value(-50.0, 200.0);
    std::vector<double> signal(size);
    for (auto& v : signal) v = value(random);
    return signal;
}

}  // namespace

TEST_CASE("mode names beyond ONNX: ANTs' spellings in any case, aliases, B-spline orders in brackets", "[spline_sinc][names]") {
    CHECK(parse_interpolation_choice("BSpline").mode == Interpolation::BSpline);
    CHECK(parse_interpolation_choice("BSpline").spline_order == 3);
    CHECK(parse_interpolation_choice("bspline[5]").spline_order == 5);
    CHECK(parse_interpolation_choice("BSPLINE[0]").spline_order == 0);
    CHECK(parse_interpolation_choice("LanczosWindowedSinc").mode == Interpolation::LanczosSinc);
    CHECK(parse_interpolation_choice("hamming").mode == Interpolation::HammingSinc);
    CHECK(parse_interpolation_choice("CosineWindowedSinc").mode == Interpolation::CosineSinc);
    CHECK(parse_interpolation_choice("welchwindowedsinc").mode == Interpolation::WelchSinc);
    CHECK(parse_interpolation_choice("Blackman").mode == Interpolation::BlackmanSinc);
    CHECK(parse_interpolation_choice("NearestNeighbor").mode == Interpolation::Nearest);
    CHECK(parse_interpolation_choice("Linear").mode == Interpolation::Linear);
    CHECK(parse_interpolation_choice("bicubic").mode == Interpolation::Cubic);
    CHECK_THROWS_WITH(parse_interpolation_choice("BSpline[6]"), Catch::Contains("0 to 5"));
    CHECK_THROWS_WITH(parse_interpolation_choice("BSpline[x]"), Catch::Contains("0 to 5"));
    CHECK_THROWS_WITH(parse_interpolation_choice("BSpline[3"), Catch::Contains("brackets"));
    CHECK_THROWS_WITH(parse_interpolation_choice("lanczos[2]"), Catch::Contains("takes no order"));
    CHECK_THROWS_WITH(parse_interpolation_choice("area"), Catch::Contains("'area'") && Catch::Contains("LanczosWindowedSinc"));
    // The ONNX attribute stays ONNX's.
    CHECK_THROWS(parse_interpolation("lanczos"));
    for (const auto& kind : interpolation_kinds()) CHECK(interpolation_kind(kind.mode).name == kind.name);
}

TEST_CASE("B-splines pass through the samples, with ITK's mirror boundary", "[spline_sinc]") {
    const std::vector<double> signal = random_signal(9, 7);
    std::vector<double> u;
    for (int i = 0; i < 9; ++i) u.push_back(i);
    for (int order = 0; order <= 5; ++order) {
        INFO("order " << order);
        const auto y = sample_at(signal, u, bspline(order));
        for (std::size_t i = 0; i < u.size(); ++i) CHECK(y[i] == Approx(signal[i]).epsilon(1e-9).margin(1e-9));
    }
}

TEST_CASE("B-splines keep a constant constant (partition of unity), prefiltered or not", "[spline_sinc]") {
    const std::vector<double> signal(9, 37.5);
    const std::vector<double> u = {0.0, 0.25, 1.5, 3.75, 4.5, 7.25, 8.0};
    for (int order = 0; order <= 5; ++order) {
        for (auto padding : {Padding::Border, Padding::Reflection}) {
            INFO("order " << order);
            // (The prefilter truncates its causal start where |z|^n < 1e-10.)
            for (const double value : sample_at(signal, u, bspline(order, padding))) CHECK(value == Approx(37.5).epsilon(1e-9));
        }
    }
}

TEST_CASE("B-splines of order 0 and 1 are nearest with halves up and linear", "[spline_sinc]") {
    const std::vector<double> signal = random_signal(9, 11);
    const auto nearest = sample_at(signal, {2.5, 3.25, 5.75}, bspline(0));
    CHECK(nearest == std::vector<double>{signal[3], signal[3], signal[6]});
    const auto linear = sample_at(signal, {2.5, 3.25}, bspline(1));
    CHECK(linear[0] == Approx(0.5 * signal[2] + 0.5 * signal[3]));
    CHECK(linear[1] == Approx(0.75 * signal[3] + 0.25 * signal[4]));
}

TEST_CASE("cubic B-spline between samples: the coefficients' weighted sum", "[spline_sinc]") {
    // A signal whose coefficients are known: the cubic B-spline of coefficients c has samples
    // (c[i-1] + 4 c[i] + c[i+1]) / 6; with c a mirrored delta at 4 the samples are 1/6, 2/3, 1/6.
    std::vector<double> signal(9, 0.0);
    signal[3] = 1.0 / 6.0;
    signal[4] = 2.0 / 3.0;
    signal[5] = 1.0 / 6.0;
    // At u = 4.5 the coefficient 1 at 4 weighs beta3(0.5) = 23/48.
    const auto y = sample_at(signal, {4.5, 3.0, 6.0}, bspline(3));
    CHECK(y[0] == Approx(23.0 / 48.0).epsilon(1e-9));
    CHECK(y[1] == Approx(1.0 / 6.0).epsilon(1e-9));
    CHECK(y[2] == Approx(0.0).margin(1e-9));
}

TEST_CASE("windowed sincs: a delta gives the weight at its distance, in closed form", "[spline_sinc]") {
    std::vector<double> delta(9, 0.0);
    delta[4] = 1.0;
    const double pi = std::numbers::pi;
    const double sinc_half = 2.0 / pi;  // sin(pi/2) / (pi/2)
    const struct {
        Interpolation mode;
        double window_half;  // the window at x = 0.5
    } kinds[] = {
        {Interpolation::LanczosSinc, 3.0 / pi},  // sin(pi/6) / (pi/6)
        {Interpolation::HammingSinc, 0.54 + 0.46 * std::sqrt(3.0) / 2.0},
        {Interpolation::CosineSinc, std::cos(pi / 12.0)},
        {Interpolation::WelchSinc, 1.0 - 0.25 / 9.0},
        {Interpolation::BlackmanSinc, 0.42 + 0.5 * std::sqrt(3.0) / 2.0 + 0.08 * 0.5},
    };
    for (const auto& kind : kinds) {
        INFO(interpolation_name(kind.mode));
        SampleOptions options;
        options.mode = kind.mode;
        const auto y = sample_at(delta, {3.5, 4.5, 4.0, 3.0}, options);
        CHECK(y[0] == Approx(kind.window_half * sinc_half).epsilon(1e-12));
        CHECK(y[1] == Approx(kind.window_half * sinc_half).epsilon(1e-12));
        CHECK(y[2] == 1.0);  // on the grid: ITK's delta weights
        CHECK(y[3] == 0.0);
    }
}

TEST_CASE("the new kinds refuse what they cannot do", "[spline_sinc]") {
    const Tensor x = tensor_from(DType::Float32, {1, 1, 4, 4}, std::vector<double>(16, 1.0));
    const Tensor g = tensor_from(DType::Float32, {1, 1, 1, 2}, {0.0, 0.0});
    SampleOptions options = bspline(3);
    options.generic_label = true;
    CHECK_THROWS_WITH(grid_sample(x.view(), g.view(), options), Catch::Contains("GenericLabel"));
    options = bspline(7);
    CHECK_THROWS_WITH(grid_sample(x.view(), g.view(), options), Catch::Contains("0 to 5"));
}

TEST_CASE("3-D windowed sincs skip a NaN under a tap of zero weight, inside and near the edge", "[spline_sinc]") {
    // On the grid a windowed sinc weighs one voxel 1 and the others 0, and a tap of zero weight is
    // skipped, so a NaN voxel among the taps leaves the voxel's own value: in the interior, where
    // all taps are read at once, and near an edge, where reflection maps them inside.
    constexpr std::int64_t d = 9;  // align_corners positions p / 4 - 1 are exact
    std::vector<double> volume = random_signal(d * d * d, 11);
    const auto at = [](std::int64_t z, std::int64_t y, std::int64_t x) { return static_cast<std::size_t>((z * d + y) * d + x); };
    volume[at(4, 4, 4)] = std::numeric_limits<double>::quiet_NaN();
    volume[at(0, 4, 1)] = std::numeric_limits<double>::quiet_NaN();
    const std::int64_t points[][3] = {{4, 4, 3}, {4, 2, 4}, {3, 4, 4}, {5, 3, 4},   // interior (x, y, z)
                                      {1, 4, 4}, {0, 4, 0}, {1, 4, 1}, {4, 8, 0}};  // taps reflected at an edge
    std::vector<double> grid;
    for (const auto& p : points) {
        for (const std::int64_t c : p) grid.push_back(static_cast<double>(c) / 4.0 - 1.0);
    }
    const Tensor x = tensor_from(DType::Float32, {1, 1, d, d, d}, volume);
    const Tensor g = tensor_from(DType::Float64, {1, 1, 1, static_cast<std::int64_t>(std::size(points)), 3}, grid);
    for (const Interpolation mode : {Interpolation::LanczosSinc, Interpolation::WelchSinc}) {
        INFO(interpolation_name(mode));
        SampleOptions options;
        options.mode = mode;
        options.padding = Padding::Reflection;
        options.align_corners = true;
        const auto y = as_doubles(grid_sample(x.view(), g.view(), options).view());
        for (std::size_t i = 0; i < std::size(points); ++i) {
            INFO("point " << i);
            const auto expected = static_cast<double>(static_cast<float>(volume[at(points[i][2], points[i][1], points[i][0])]));
            CHECK(y[i] == expected);
        }
    }
}
