// Gaussian and MultiLabel (ITK's GaussianInterpolateImageFunction and
// LabelImageGaussianInterpolateImageFunction) against the rule of docs/semantics.md written out
// here with std::erf: the voxels within sigma * alpha of the point, clipped to the input, weighted
// by the Gaussian's integral over each voxel and renormalised; MultiLabel's label of most weight.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <numbers>

#include "gridwarp/itk_boundary.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;

namespace {

SampleOptions gaussian(Interpolation mode, std::vector<double> sigma, std::optional<double> alpha) {
    SampleOptions options;
    options.mode = mode;
    options.gaussian_sigma = std::move(sigma);
    options.gaussian_alpha = alpha;
    options.align_corners = true;
    return options;
}

// Per axis: the voxels a point at pixel position u reads on an axis of d voxels and their weights.
std::map<std::int64_t, double> expected_weights(double u, std::int64_t d, double sigma, double alpha) {
    const double cut = sigma * alpha;
    const auto first = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(u + 0.5 - cut)));
    const auto end = std::min<std::int64_t>(d, static_cast<std::int64_t>(std::ceil(u + 0.5 + cut)));
    const double s = 1.0 / (std::numbers::sqrt2 * sigma);
    std::map<std::int64_t, double> weights;
    for (std::int64_t i = first; i < end; ++i) weights[i] = std::erf((i + 0.5 - u) * s) - std::erf((i - 0.5 - u) * s);
    return weights;
}

double expected_value(const std::vector<double>& signal, double u, double sigma, double alpha) {
    double weighted = 0.0, total = 0.0;
    for (const auto& [i, w] : expected_weights(u, static_cast<std::int64_t>(signal.size()), sigma, alpha)) {
        weighted += w * signal[static_cast<std::size_t>(i)];
        total += w;
    }
    return weighted / total;
}

// A 1-D signal (1, 1, d) sampled at pixel positions u (align_corners=1: u = 0 and d-1 are -1 and 1).
std::vector<double> sample_1d(DType type, const std::vector<double>& signal, const std::vector<double>& u, const SampleOptions& options) {
    const auto d = static_cast<std::int64_t>(signal.size());
    std::vector<double> grid;
    for (const double p : u) grid.push_back(2.0 * p / static_cast<double>(d - 1) - 1.0);
    const Tensor x = tensor_from(type, {1, 1, d}, signal);
    const Tensor g = tensor_from(DType::Float64, {1, static_cast<std::int64_t>(u.size()), 1}, grid);
    return as_doubles(grid_sample(x.view(), g.view(), options).view());
}

const std::vector<double> kSignal{12.0, -3.0, 40.0, 7.5, 0.0, 100.0, 55.0, -20.0, 9.0};
const std::vector<double> kPositions{0.0, 0.25, 0.5, 1.75, 3.0, 4.5, 6.25, 7.75, 8.0};

}  // namespace

TEST_CASE("Gaussian and MultiLabel names take ANTs' [sigma,alpha]", "[gaussian][names]") {
    CHECK(parse_interpolation_choice("Gaussian").mode == Interpolation::Gaussian);
    CHECK(parse_interpolation_choice("Gaussian").sigma.empty());
    CHECK_FALSE(parse_interpolation_choice("Gaussian").alpha);
    const InterpolationChoice both = parse_interpolation_choice("gaussian[1.5,2]");
    CHECK(both.sigma == std::vector<double>{1.5});
    CHECK(both.alpha == 2.0);
    const InterpolationChoice per_axis = parse_interpolation_choice("MultiLabel[1x2x0.5]");
    CHECK(per_axis.mode == Interpolation::MultiLabel);
    CHECK(per_axis.sigma == std::vector<double>{1.0, 2.0, 0.5});
    CHECK_FALSE(per_axis.alpha);
    CHECK(parse_interpolation_choice("MULTILABEL[,3]").alpha == 3.0);
    CHECK(parse_interpolation_choice("MULTILABEL[,3]").sigma.empty());
    CHECK_THROWS_WITH(parse_interpolation_choice("Gaussian[0]"), Catch::Contains("sigma must be a positive number"));
    CHECK_THROWS_WITH(parse_interpolation_choice("Gaussian[1,-1]"), Catch::Contains("alpha must be a positive number"));
    CHECK_THROWS_WITH(parse_interpolation_choice("Gaussian[1,2,3]"), Catch::Contains("[sigma,alpha]"));
    CHECK_THROWS_WITH(parse_interpolation_choice("Gaussian[1x]"), Catch::Contains("sigma"));
    CHECK_THROWS_WITH(parse_interpolation_choice("BSpline[1,2]"), Catch::Contains("0 to 5"));
    CHECK_THROWS_WITH(parse_interpolation_choice("Linear[1]"), Catch::Contains("takes no order"));
}

TEST_CASE("A mode's text is parsed once; sigmas in mm become pixels once the spacing is known", "[gaussian][names]") {
    const SamplingMode mode = parse_sampling_mode("Gaussian[2x6x1,3]");
    CHECK(mode.choice.mode == Interpolation::Gaussian);
    SampleOptions options;
    apply_sampling_mode(options, mode);
    CHECK(options.mode == Interpolation::Gaussian);
    CHECK(options.gaussian_alpha == 3.0);
    // Spacing x first (1, 3, 0.5 mm); the library's sigmas run outermost first, in pixels.
    resolve_gaussian_sigma(options, mode, {1.0, 3.0, 0.5}, 3);
    CHECK(options.gaussian_sigma == std::vector<double>{2.0, 2.0, 2.0});
    CHECK_THROWS_WITH(resolve_gaussian_sigma(options, mode, {1.0, 1.0}, 2), Catch::Contains("3 sigmas for an input of 2 spatial axes"));

    const SamplingMode label = parse_sampling_mode("genericlabel[Lanczos]");
    CHECK(label.generic_label);
    CHECK(label.choice.mode == Interpolation::LanczosSinc);
    CHECK_THROWS_WITH(parse_sampling_mode("GenericLabel[BSpline]"), Catch::Contains("GenericLabel takes"));
    SampleOptions linear;
    apply_sampling_mode(linear, parse_sampling_mode("GenericLabel"));
    CHECK(linear.generic_label);
    CHECK(linear.mode == Interpolation::Linear);
}

TEST_CASE("ITK's boundary rule sets each kind's boundary condition (docs/semantics.md)", "[gaussian][names]") {
    const auto under_itk = [](const char* text) {
        SampleOptions options;
        options.padding = Padding::Border;
        apply_sampling_mode(options, parse_sampling_mode(text));
        apply_itk_boundary(options);
        return options;
    };
    // Linear and nearest: their positions are clamped or rounded inside, zeros padding otherwise.
    for (const char* text : {"Linear", "NearestNeighbor"}) {
        const SampleOptions options = under_itk(text);
        CHECK(options.padding == Padding::Zeros);
        CHECK_FALSE(options.outside_tap_value);
    }
    // B-splines: ITK mirrors the image about its edge voxels' centres.
    const SampleOptions spline = under_itk("BSpline[3]");
    CHECK(spline.padding == Padding::Reflection);
    CHECK(spline.align_corners);
    // Windowed sincs (ConstantBoundaryCondition) and the Gaussians: 0 past the edge.
    for (const char* text : {"LanczosWindowedSinc", "WelchWindowedSinc", "Gaussian", "MultiLabel"}) {
        const SampleOptions options = under_itk(text);
        CHECK(options.padding == Padding::Zeros);
        CHECK(options.outside_tap_value == 0.0);
    }
    CHECK_THROWS_WITH(under_itk("cubic"), Catch::Contains("use BSpline[3]"));
}

TEST_CASE("Gaussian: erf weights over the voxels within the cut-off, clipped to the input, renormalised", "[gaussian]") {
    for (const double sigma : {0.4, 1.0, 1.7}) {
        for (const double alpha : {1.0, 2.5}) {
            const auto got = sample_1d(DType::Float64, kSignal, kPositions, gaussian(Interpolation::Gaussian, {sigma}, alpha));
            for (std::size_t p = 0; p < kPositions.size(); ++p) {
                INFO("sigma " << sigma << " alpha " << alpha << " u " << kPositions[p]);
                CHECK(got[p] == Approx(expected_value(kSignal, kPositions[p], sigma, alpha)).epsilon(1e-12));
            }
        }
    }
    // Defaults: sigma 1 pixel, alpha 1.
    const auto got = sample_1d(DType::Float64, kSignal, kPositions, gaussian(Interpolation::Gaussian, {}, std::nullopt));
    for (std::size_t p = 0; p < kPositions.size(); ++p) CHECK(got[p] == Approx(expected_value(kSignal, kPositions[p], 1.0, 1.0)).epsilon(1e-12));
}

TEST_CASE("Gaussian in 2-D: the weight is the product over axes, sigma given per axis outermost first", "[gaussian]") {
    // (1, 1, 4, 5): H = 4 rows, W = 5 columns; sigma 0.6 along H, 1.3 along W.
    std::vector<double> image(20);
    for (std::size_t i = 0; i < image.size(); ++i) image[i] = std::sin(1.7 * static_cast<double>(i)) * 50.0 + static_cast<double>(i);
    const std::vector<std::array<double, 2>> points{{1.2, 2.6}, {0.0, 0.0}, {3.0, 4.0}, {2.5, 1.25}};  // (row, column)
    std::vector<double> grid;
    for (const auto& [row, column] : points) {
        grid.push_back(2.0 * column / 4.0 - 1.0);  // x: the last axis
        grid.push_back(2.0 * row / 3.0 - 1.0);
    }
    const Tensor x = tensor_from(DType::Float32, {1, 1, 4, 5}, image);
    const Tensor g = tensor_from(DType::Float64, {1, 1, static_cast<std::int64_t>(points.size()), 2}, grid);
    const auto got = as_doubles(grid_sample(x.view(), g.view(), gaussian(Interpolation::Gaussian, {0.6, 1.3}, 1.5)).view());
    for (std::size_t p = 0; p < points.size(); ++p) {
        double weighted = 0.0, total = 0.0;
        for (const auto& [i, wi] : expected_weights(points[p][0], 4, 0.6, 1.5)) {
            for (const auto& [j, wj] : expected_weights(points[p][1], 5, 1.3, 1.5)) {
                weighted += wi * wj * static_cast<double>(static_cast<float>(image[static_cast<std::size_t>(i * 5 + j)]));
                total += wi * wj;
            }
        }
        CHECK(got[p] == Approx(weighted / total).epsilon(1e-6));
    }
}

TEST_CASE("Gaussian: integers round, points beyond the extent take the fill under zeros", "[gaussian]") {
    const std::vector<double> signal{100.0, 120.0, 127.0, 127.0, 90.0};
    const std::vector<double> u{0.3, 1.6, 2.5, 3.2};
    const auto got = sample_1d(DType::Int8, signal, u, gaussian(Interpolation::Gaussian, {0.8}, 2.0));
    for (std::size_t p = 0; p < u.size(); ++p) CHECK(got[p] == std::nearbyint(expected_value(signal, u[p], 0.8, 2.0)));

    SampleOptions options = gaussian(Interpolation::Gaussian, {1.0}, 1.0);
    options.align_corners = false;
    options.fill = -7.0;
    // Normalized -1 and 1 are the outer edges (u = -0.5 and d - 0.5): inside; beyond them, the fill.
    const Tensor x = tensor_from(DType::Float64, {1, 1, 5}, signal);
    const Tensor g = tensor_from(DType::Float64, {1, 4, 1}, {-1.0, 1.0, -1.01, 1.01});
    const auto edge = as_doubles(grid_sample(x.view(), g.view(), options).view());
    CHECK(edge[0] == Approx(expected_value(signal, -0.5, 1.0, 1.0)).epsilon(1e-12));
    CHECK(edge[1] == Approx(expected_value(signal, 4.5, 1.0, 1.0)).epsilon(1e-12));
    CHECK(edge[2] == -7.0);
    CHECK(edge[3] == -7.0);
    // Border clamps the point to the extent; the taps stay inside either way.
    options.padding = Padding::Border;
    const auto border = as_doubles(grid_sample(x.view(), g.view(), options).view());
    CHECK(border[2] == Approx(expected_value(signal, -0.5, 1.0, 1.0)).epsilon(1e-12));
    CHECK(border[3] == Approx(expected_value(signal, 4.5, 1.0, 1.0)).epsilon(1e-12));
}

TEST_CASE("MultiLabel: the label of most summed weight, ties to the label complete first, x fastest", "[gaussian]") {
    const std::vector<double> labels{4.0, 4.0, 31.0, 31.0, 31.0, -2.0, 4.0, 4.0, 900.0};
    for (const double sigma : {0.5, 1.0, 2.0}) {
        const auto got = sample_1d(DType::Int16, labels, kPositions, gaussian(Interpolation::MultiLabel, {sigma}, std::nullopt));
        for (std::size_t p = 0; p < kPositions.size(); ++p) {
            std::map<double, double> sums;
            for (const auto& [i, w] : expected_weights(kPositions[p], 9, sigma, 4.0)) sums[labels[static_cast<std::size_t>(i)]] += w;
            double best = 0.0, best_sum = -1.0;
            for (const auto& [label, sum] : sums) {
                if (sum > best_sum) best = label, best_sum = sum;
            }
            INFO("sigma " << sigma << " u " << kPositions[p]);
            CHECK(got[p] == best);
        }
    }
    // Halfway between two voxels the two labels weigh the same: the first in order wins.
    CHECK(sample_1d(DType::Int16, {7.0, 3.0}, {0.5}, gaussian(Interpolation::MultiLabel, {1.0}, 4.0))[0] == 7.0);
    CHECK(sample_1d(DType::Int16, {3.0, 7.0}, {0.5}, gaussian(Interpolation::MultiLabel, {1.0}, 4.0))[0] == 3.0);
}

TEST_CASE("Gaussian and MultiLabel refuse what they cannot do", "[gaussian]") {
    const Tensor x = tensor_from(DType::Float32, {1, 1, 4, 4}, std::vector<double>(16, 1.0));
    const Tensor g = tensor_from(DType::Float32, {1, 1, 1, 2}, {0.0, 0.0});
    CHECK_THROWS_WITH(grid_sample(x.view(), g.view(), gaussian(Interpolation::Gaussian, {1.0}, 1.0)), Catch::Contains("one sigma per spatial axis"));
    CHECK_THROWS_WITH(grid_sample(x.view(), g.view(), gaussian(Interpolation::Gaussian, {1.0, -1.0}, 1.0)), Catch::Contains("positive sigma"));
    CHECK_THROWS_WITH(grid_sample(x.view(), g.view(), gaussian(Interpolation::MultiLabel, {1e4, 1e4}, 4.0)), Catch::Contains("2^20"));
    const Tensor complex(DType::Complex64, {1, 1, 4, 4});
    CHECK_THROWS_WITH(grid_sample(complex.view(), g.view(), gaussian(Interpolation::MultiLabel, {}, std::nullopt)), Catch::Contains("real labels"));
}
