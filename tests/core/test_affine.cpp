// AffineGrid, and sampling through positions computed on the fly.
#include <catch2/catch.hpp>

#include "gridwarp/positions.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;

namespace {

double base(std::int64_t i, std::int64_t n, bool align_corners) {
    if (align_corners) return n == 1 ? 0.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1);
    return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n) - 1.0;
}

// grid[n, o..., k] = sum_j theta[n, k, j] * b_j + theta[n, k, r], written out per rank.
std::vector<double> expected_grid(const std::vector<double>& theta, const Shape& size, bool align_corners) {
    const auto rank = static_cast<std::int64_t>(size.size()) - 2;
    const Shape spatial(size.begin() + 2, size.end());
    std::vector<double> out;
    for (std::int64_t n = 0; n < size[0]; ++n) {
        for (std::int64_t p = 0; p < shape_numel(spatial); ++p) {
            std::vector<double> b(static_cast<std::size_t>(rank));  // innermost first
            std::int64_t rest = p;
            for (std::int64_t j = 0; j < rank; ++j) {
                const auto extent = spatial[static_cast<std::size_t>(rank - 1 - j)];
                b[static_cast<std::size_t>(j)] = base(rest % extent, extent, align_corners);
                rest /= extent;
            }
            for (std::int64_t k = 0; k < rank; ++k) {
                const double* row = theta.data() + (n * rank + k) * (rank + 1);
                double sum = row[rank];
                for (std::int64_t j = 0; j < rank; ++j) sum += row[j] * b[static_cast<std::size_t>(j)];
                out.push_back(sum);
            }
        }
    }
    return out;
}

}  // namespace

TEST_CASE("affine_grid matches the formula for ranks 1 to 5", "[affine]") {
    std::mt19937 rng(3);
    for (const Shape& size : {Shape{2, 1, 7}, Shape{2, 3, 5, 6}, Shape{1, 1, 4, 5, 6}, Shape{2, 1, 3, 2, 4, 3},
                             Shape{1, 2, 2, 3, 2, 2, 3}}) {
        const auto rank = static_cast<std::int64_t>(size.size()) - 2;
        for (DType dtype : {DType::Float32, DType::Float64}) {
            const Tensor theta = random_tensor(dtype, {size[0], rank, rank + 1}, -1.5, 1.5, rng);
            for (bool align_corners : {false, true}) {
                INFO("size " << shape_to_string(size) << " " << dtype_name(dtype) << " align_corners " << align_corners);
                const Tensor grid = affine_grid(theta.view(), size, align_corners);
                Shape expected_shape{size[0]};
                expected_shape.insert(expected_shape.end(), size.begin() + 2, size.end());
                expected_shape.push_back(rank);
                const Tensor expected =
                    tensor_from(dtype, expected_shape, expected_grid(as_doubles(theta.view()), size, align_corners));
                // Computed in double, stored in theta's type: at most one rounding apart.
                CHECK(compare(grid.view(), expected.view(), dtype == DType::Float32 ? 2e-7 : 1e-15, 1e-7) == "");
            }
        }
    }
}

TEST_CASE("affine_grid: a single point with align_corners=1 sits at 0 (PyTorch)", "[affine]") {
    const Tensor theta = tensor_from(DType::Float32, {1, 2, 3}, {1, 0, 0, 0, 1, 0});
    const Tensor grid = affine_grid(theta.view(), {1, 1, 1, 1}, true);
    CHECK(as_doubles(grid.view()) == std::vector<double>{0.0, 0.0});
    const Tensor grid0 = affine_grid(theta.view(), {1, 1, 1, 1}, false);
    CHECK(as_doubles(grid0.view()) == std::vector<double>{0.0, 0.0});
}

TEST_CASE("affine_grid errors name the shapes", "[affine][errors]") {
    const Tensor theta(DType::Float32, {1, 2, 3});
    CHECK_THROWS_WITH(affine_grid(theta.view(), {1, 1, 4, 4, 4}, false), Catch::Contains("(N, 3, 4)") && Catch::Contains("(1, 2, 3)"));
    CHECK_THROWS_WITH(affine_grid(theta.view(), {2, 1, 4, 4}, false), Catch::Contains("N=1") && Catch::Contains("N=2"));
    CHECK_THROWS_WITH(affine_grid(theta.view(), {1, 1}, false), Catch::Contains("size"));
    CHECK_THROWS_WITH(affine_grid(Tensor(DType::Int32, {1, 2, 3}).view(), {1, 1, 4, 4}, false), Catch::Contains("int32"));
}

TEST_CASE("sampling through AffinePositions equals sampling the AffineGrid tensor, bit for bit", "[affine][fused]") {
    std::mt19937 rng(17);
    for (const Shape& input_shape : {Shape{2, 3, 13, 17}, Shape{1, 2, 6, 7, 5}}) {
        const auto rank = static_cast<std::int64_t>(input_shape.size()) - 2;
        Shape size{input_shape[0], input_shape[1]};
        for (std::int64_t a = 0; a < rank; ++a) size.push_back(9 + 2 * a);
        for (DType dtype : {DType::Float32, DType::UInt8}) {
            const Tensor x = random_tensor(dtype, input_shape, 0, 255, rng);
            for (DType theta_dtype : {DType::Float32, DType::Float64}) {
                const Tensor theta = random_tensor(theta_dtype, {input_shape[0], rank, rank + 1}, -1.2, 1.2, rng);
                for (auto mode : {Interpolation::Linear, Interpolation::Nearest, Interpolation::Cubic}) {
                    for (auto padding : {Padding::Zeros, Padding::Border, Padding::Reflection}) {
                        for (bool align_corners : {false, true}) {
                            SampleOptions options;
                            options.mode = mode;
                            options.padding = padding;
                            options.align_corners = align_corners;
                            const Tensor grid = affine_grid(theta.view(), size, align_corners);
                            const AffinePositions fused(theta.view(), Shape(size.begin() + 2, size.end()), align_corners);
                            INFO(shape_to_string(input_shape) << " " << dtype_name(dtype) << " theta " << dtype_name(theta_dtype)
                                                              << " " << interpolation_name(mode) << " " << padding_name(padding));
                            CHECK(compare_exact(grid_sample(x.view(), fused, options).view(),
                                                grid_sample(x.view(), grid.view(), options).view()) == "");
                        }
                    }
                }
            }
        }
    }
}
