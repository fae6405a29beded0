// Anti-aliasing (docs/semantics.md): shrink factors measured from positions against the row norms of
// the maps' matrices, and the low-pass against its kernel written out in closed form.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <numbers>

#include "gridwarp/antialias.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;

TEST_CASE("shrink factors are the row norms of an affine map's linear part", "[antialias]") {
    // Pixel space, x first: input x = 3 cos(t) ox - 3 sin(t) oy, input y = 0.5 oy.
    const double t = 0.3;
    const std::vector<double> theta = {3 * std::cos(t), -3 * std::sin(t), 4.0, 0.0, 0.5, 1.0};
    const AffinePositions positions(theta, 1, Shape{40, 50}, false, DType::Float64, CoordinateSpace::Pixel);
    const std::vector<double> factors = shrink_factors(positions, Shape{30, 200}, false);
    REQUIRE(factors.size() == 2);
    CHECK(factors[0] == Approx(0.5).epsilon(1e-12));  // y
    CHECK(factors[1] == Approx(3.0).epsilon(1e-12));  // x
    CHECK(any_axis_shrunk(factors, Shape{30, 200}));
    CHECK_FALSE(any_axis_shrunk(factors, Shape{30, 1}));
}

TEST_CASE("shrink factors of normalized positions count input voxels", "[antialias]") {
    // The identity in normalized space from a 100-wide input onto 25 columns steps 4 input
    // voxels per output voxel (align_corners 0), 99/24 with align_corners 1.
    const std::vector<double> identity = {1, 0, 0, 0, 1, 0};
    for (const bool align_corners : {false, true}) {
        const AffinePositions positions(identity, 1, Shape{10, 25}, align_corners, DType::Float64);
        const std::vector<double> factors = shrink_factors(positions, Shape{10, 100}, align_corners);
        CHECK(factors[0] == Approx(1.0).epsilon(1e-12));
        CHECK(factors[1] == Approx(align_corners ? 99.0 / 24.0 : 4.0).epsilon(1e-12));
    }
}

TEST_CASE("shrink factors skip points without finite positions", "[antialias]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> grid;
    for (int y = 0; y < 4; ++y) {
        for (int x = 0; x < 4; ++x) {
            const bool lost = x == 3 && y == 3;
            grid.push_back(lost ? nan : -0.9 + 0.6 * x);  // 0.6 normalized = 3 voxels of 10
            grid.push_back(lost ? nan : -0.9 + 0.2 * y);  // 0.2 normalized = 1 voxel of 10
        }
    }
    const Tensor g = tensor_from(DType::Float64, {1, 4, 4, 2}, grid);
    const GridPositions positions(g.view());
    const std::vector<double> factors = shrink_factors(positions, Shape{10, 10}, false);
    CHECK(factors[0] == Approx(1.0).epsilon(1e-9));
    CHECK(factors[1] == Approx(3.0).epsilon(1e-9));
}

TEST_CASE("the low-pass is the stretched Lanczos-3 kernel, renormalised at the edges", "[antialias]") {
    const auto sinc = [](double x) { return x == 0 ? 1.0 : std::sin(std::numbers::pi * x) / (std::numbers::pi * x); };
    const std::int64_t n = 23;
    std::vector<double> signal(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) signal[static_cast<std::size_t>(i)] = std::cos(0.9 * static_cast<double>(i)) + 0.01 * static_cast<double>(i * i);
    const double k = 2.5;
    const Tensor x = tensor_from(DType::Float64, {1, 1, 1, n}, signal);
    const std::vector<double> got = as_doubles(lowpass_for_shrink(x.view(), {1.0, k}, 2).view());
    for (std::int64_t i = 0; i < n; ++i) {
        double sum = 0, weights = 0;
        for (std::int64_t j = 0; j < n; ++j) {
            const double d = static_cast<double>(j - i) / k;
            if (std::fabs(d) >= 3) continue;
            const double w = sinc(d) * sinc(d / 3);
            sum += w * signal[static_cast<std::size_t>(j)];
            weights += w;
        }
        CHECK(got[static_cast<std::size_t>(i)] == Approx(sum / weights).epsilon(1e-12));
    }
    // The unshrunk axis (factor 1, and of extent 1) is untouched; a float32 copy for int16.
    const Tensor labels = tensor_from(DType::Int16, {1, 1, 3, 1}, {1, 5, 9});
    const Tensor copy = lowpass_for_shrink(labels.view(), {1.0, 4.0}, 1);
    CHECK(copy.dtype() == DType::Float32);
    CHECK(as_doubles(copy.view()) == std::vector<double>{1, 5, 9});
}

TEST_CASE("a map that shrinks an axis to a point is filtered as kMaxLowpassFactor", "[antialias]") {
    std::vector<double> signal(64);
    for (std::size_t i = 0; i < signal.size(); ++i) signal[i] = static_cast<double>(i % 7);
    const Tensor x = tensor_from(DType::Float32, {1, 1, 64}, signal);
    const Tensor huge = lowpass_for_shrink(x.view(), {1e300}, 1);
    const Tensor capped = lowpass_for_shrink(x.view(), {kMaxLowpassFactor}, 1);
    CHECK(as_doubles(huge.view()) == as_doubles(capped.view()));
    CHECK(describe_antialias({1e300}, Shape{64}) == "Lanczos-3 low-pass along x (factor 1e+300, filtered as 32)");
}
