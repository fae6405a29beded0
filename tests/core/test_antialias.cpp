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

namespace {

// The documented two steps, written with the library's other path: the low-passed copy, then
// grid_sample through the same axis-aligned map (pixel space, x first rows).
Tensor lowpass_then_sample(const ConstTensorView& input, const AxisAlignedMap& map, const std::vector<double>& factors,
                           const SampleOptions& options) {
    const std::size_t rank = map.size.size();
    std::vector<double> matrix;
    for (std::size_t k = 0; k < rank; ++k) {  // row k: input coordinate k (x first) from output coordinates
        for (std::size_t j = 0; j < rank; ++j) matrix.push_back(j == k ? map.step[rank - 1 - k] : 0.0);
        matrix.push_back(map.start[rank - 1 - k]);
    }
    std::vector<double> per_batch;
    for (std::int64_t n = 0; n < input.shape[0]; ++n) per_batch.insert(per_batch.end(), matrix.begin(), matrix.end());
    const AffinePositions positions(per_batch, input.shape[0], map.size, options.align_corners, DType::Float64, CoordinateSpace::Pixel);
    const Tensor filtered = lowpass_for_shrink(input, factors, 1);
    Tensor sampled = grid_sample(filtered.view(), positions, options);
    return input.dtype == sampled.dtype() ? std::move(sampled) : convert_to(sampled.view(), input.dtype);
}

}  // namespace

TEST_CASE("shrink_onto_grid equals the low-passed copy sampled, for every kind it serves", "[antialias]") {
    // float64 volume (N=2, C=2), factors 2.6, 1 (not filtered) and 3.1; windows of the output grid.
    Tensor volume(DType::Float64, Shape{2, 2, 13, 9, 31});
    double* values = volume.data_as<double>();
    for (std::int64_t i = 0; i < volume.numel(); ++i) values[i] = std::sin(0.37 * static_cast<double>(i)) * 100 + static_cast<double>(i % 17);
    const AxisAlignedMap map{Shape{5, 9, 10}, {13.0 / 5, 1.0, 3.1}, {(13.0 / 5 - 1) / 2, 0.0, (3.1 - 1) / 2}};
    const std::vector<double> factors{13.0 / 5, 1.0, 3.1};
    for (const Interpolation mode : {Interpolation::Linear, Interpolation::Cubic, Interpolation::LanczosSinc}) {
        for (const Padding padding : {Padding::Border, Padding::Reflection, Padding::Zeros}) {
            SampleOptions options;
            options.mode = mode;
            options.padding = padding;
            options.threads = 2;
            REQUIRE(shrinks_onto_grid(options, DType::Float64));
            const Tensor expected = lowpass_then_sample(volume.view(), map, factors, options);
            Tensor got(DType::Float64, Shape{2, 2, 5, 9, 10});
            shrink_onto_grid(volume.view(), map, factors, options, Shape{0, 0, 0}, got.view());
            for (std::int64_t i = 0; i < got.numel(); ++i) {
                REQUIRE(got.data_as<double>()[i] == Approx(expected.data_as<double>()[i]).margin(1e-9));
            }
            // A window (the writer's blocks): output rows 2..4 of z, all of y and x.
            Tensor window(DType::Float64, Shape{2, 2, 3, 9, 10});
            shrink_onto_grid(volume.view(), map, factors, options, Shape{2, 0, 0}, window.view());
            for (std::int64_t n = 0; n < 2 * 2; ++n) {
                for (std::int64_t i = 0; i < 3 * 90; ++i) {
                    REQUIRE(window.data_as<double>()[n * 270 + i] == got.data_as<double>()[n * 450 + 180 + i]);
                }
            }
        }
    }
}

TEST_CASE("shrink_onto_grid reads interleaved uint8 channels and rounds as the sampler does", "[antialias]") {
    // An RGB photo as the readers give it: (1, 3, H, W) with channel stride 1.
    const std::int64_t height = 37, width = 53;
    std::vector<std::uint8_t> pixels(static_cast<std::size_t>(height * width * 3));
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>((i * 37 + i / 7) % 256);
    const ConstTensorView photo(DType::UInt8, pixels.data(), Shape{1, 3, height, width}, Shape{height * width * 3, 1, width * 3, 3});
    const AxisAlignedMap map{Shape{15, 20}, {37.0 / 15, 53.0 / 20}, {(37.0 / 15 - 1) / 2, (53.0 / 20 - 1) / 2}};
    const std::vector<double> factors{37.0 / 15, 53.0 / 20};
    SampleOptions options;
    options.mode = Interpolation::Cubic;
    options.padding = Padding::Border;
    const Tensor expected = lowpass_then_sample(photo, map, factors, options);
    Tensor got(DType::UInt8, Shape{1, 3, 15, 20});
    shrink_onto_grid(photo, map, factors, options, Shape{0, 0}, got.view());
    int differing = 0;
    for (std::int64_t i = 0; i < got.numel(); ++i) {
        const int difference = std::abs(int(got.data_as<std::uint8_t>()[i]) - int(expected.data_as<std::uint8_t>()[i]));
        REQUIRE(difference <= 1);  // float32 sums in another order: a tie may round the other way
        differing += difference;
    }
    CHECK(differing <= got.numel() / 50);
}

TEST_CASE("shrink_onto_grid refuses what it does not serve", "[antialias]") {
    SampleOptions options;
    options.mode = Interpolation::BSpline;
    CHECK_FALSE(shrinks_onto_grid(options, DType::Float32));
    options.mode = Interpolation::Linear;
    options.fill = 3.0;
    CHECK_FALSE(shrinks_onto_grid(options, DType::Float32));
    options.padding = Padding::Border;
    CHECK(shrinks_onto_grid(options, DType::Float32));
    CHECK_FALSE(shrinks_onto_grid(options, DType::Complex64));
    options.generic_label = true;
    CHECK_FALSE(shrinks_onto_grid(options, DType::Float32));
}
