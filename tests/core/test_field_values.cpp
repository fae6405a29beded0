// chain_field_values: a chain's values at a grid's voxels, written into strided views, checked
// against the maps evaluated by hand in exact (small-integer) arithmetic.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "gridwarp/physical.hpp"
#include "gridwarp/tensor.hpp"

using namespace gridwarp;

namespace {

AffineMap map_of(std::vector<double> matrix, std::vector<double> offset) {
    AffineMap map;
    map.dimension = offset.size();
    map.matrix = std::move(matrix);
    map.offset = std::move(offset);
    return map;
}

}  // namespace

TEST_CASE("chain_field_values writes of_mapped(chain(p)) - of_point(p) into any layout", "[physical]") {
    // grid: p = (2 i + 1, 3 j - 2, k + 5); chain: an integer affine; values in a RAS-like frame.
    const AffineMap index_to_point = map_of({2, 0, 0, 0, 3, 0, 0, 0, 1}, {1, -2, 5});
    PointTransform step;
    step.affine = std::make_shared<const AffineMap>(map_of({1, 1, 0, 0, 2, 0, 1, 0, 1}, {4, -1, 2}));
    const FieldValueMaps values{map_of({-1, 0, 0, 0, -1, 0, 0, 0, 1}, {0, 0, 0}), map_of({-1, 0, 0, 0, -1, 0, 0, 0, 1}, {0, 0, 0})};
    const Shape start{1, 0, 2};   // (k, j, i) outermost first
    const Shape extent{2, 3, 4};
    const auto expected = [&](std::int64_t k, std::int64_t j, std::int64_t i, int c) {
        const double p[3] = {2.0 * static_cast<double>(start[2] + i) + 1, 3.0 * static_cast<double>(start[1] + j) - 2,
                             static_cast<double>(start[0] + k) + 5};
        const double q[3] = {p[0] + p[1] + 4, 2 * p[1] - 1, p[0] + p[2] + 2};
        const double sign[3] = {-1, -1, 1};
        return sign[c] * (q[c] - p[c]);
    };
    for (const bool planar : {true, false}) {
        Tensor out(DType::Float64, Shape{1, 3, 2, 3, 4});
        Shape strides = contiguous_strides(out.shape());
        if (!planar) strides = {72, 1, 36, 12, 3};  // components adjacent, as interleaved vectors
        const TensorView view(DType::Float64, out.data(), out.shape(), strides);
        chain_field_values({step}, index_to_point, start, extent, values, view, 1);
        const double* data = out.data_as<double>();
        for (std::int64_t k = 0; k < 2; ++k)
            for (std::int64_t j = 0; j < 3; ++j)
                for (std::int64_t i = 0; i < 4; ++i)
                    for (int c = 0; c < 3; ++c) {
                        const std::int64_t at = c * strides[1] + k * strides[2] + j * strides[3] + i * strides[4];
                        REQUIRE(data[at] == expected(k, j, i, c));
                    }
    }
}

TEST_CASE("chain_field_values refuses an output of the wrong shape", "[physical]") {
    PointTransform step;
    step.affine = std::make_shared<const AffineMap>(AffineMap::identity(2));
    const FieldValueMaps values{AffineMap::identity(2), AffineMap::identity(2)};
    Tensor out(DType::Float32, Shape{1, 2, 3, 5});
    REQUIRE_THROWS_AS(chain_field_values({step}, AffineMap::identity(2), {0, 0}, {3, 4}, values, out.view(), 1), std::invalid_argument);
    Tensor ints(DType::Int32, Shape{1, 2, 3, 4});
    REQUIRE_THROWS_AS(chain_field_values({step}, AffineMap::identity(2), {0, 0}, {3, 4}, values, ints.view(), 1), std::invalid_argument);
}
