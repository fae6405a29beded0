// chain_field_values: a chain's values at a grid's voxels, written into strided views, checked
// against the maps evaluated by hand in exact (small-integer) arithmetic.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
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

TEST_CASE("chain_field_values around one linear field equals the chain mapped point by point", "[physical]") {
    // affine, field, affine (ANTs' warp between two linear maps): the fast path samples the field's
    // vectors with grid_sample; the expectation is map_points, which applies each step to each point
    // in double. Output grids reach beyond the field (zero displacement there) and the 2-D one spans
    // several slabs.
    for (const std::size_t d : {std::size_t{2}, std::size_t{3}}) {
        INFO(d << "-D");
        const Shape field_shape = d == 3 ? Shape{5, 6, 7} : Shape{6, 7};  // outermost first
        Shape vector_shape = field_shape;
        vector_shape.push_back(static_cast<std::int64_t>(d));
        Tensor vectors(DType::Float32, vector_shape);
        std::uint32_t state = 12345;
        for (std::int64_t i = 0; i < vectors.numel(); ++i) {
            state = state * 1664525u + 1013904223u;
            vectors.data_as<float>()[i] = static_cast<float>((state >> 8) % 4001) / 1000.0f - 2.0f;
        }
        const AffineMap field_grid = d == 3 ? map_of({2, 0.1, 0, -0.1, 1.5, 0, 0, 0, 1}, {-3, 1, 2}) : map_of({2, 0.1, -0.1, 1.5}, {-3, 1});
        PointTransform before, field, after;
        before.affine = std::make_shared<const AffineMap>(d == 3 ? map_of({1.01, 0.02, 0, -0.02, 0.99, 0.01, 0, -0.01, 1}, {0.5, -0.25, 0.75})
                                                                 : map_of({1.01, 0.02, -0.02, 0.99}, {0.5, -0.25}));
        field.field = std::make_shared<const DisplacementField>(vectors.view(), field_grid);
        after.affine = std::make_shared<const AffineMap>(d == 3 ? map_of({0.9, 0.1, 0, 0, 1.1, 0, 0.05, 0, 1}, {2, -1, 0.5})
                                                                : map_of({0.9, 0.1, 0, 1.1}, {2, -1}));
        const std::vector<PointTransform> steps{before, field, after};
        const AffineMap index_to_point = d == 3 ? map_of({0.5, 0, 0, 0, 0.4, 0, 0, 0, 0.9}, {-5, -1, 0}) : map_of({0.02, 0, 0, 0.03}, {-6, -2});
        const AffineMap flip = d == 3 ? map_of({-1, 0, 0, 0, -1, 0, 0, 0, 1}, {0, 0, 0}) : map_of({-1, 0, 0, -1}, {0, 0});
        const FieldValueMaps values{flip, flip};
        const Shape start = d == 3 ? Shape{1, 0, 2} : Shape{0, 0};
        const Shape extent = d == 3 ? Shape{8, 9, 11} : Shape{300, 1000};
        Shape out_shape{1, static_cast<std::int64_t>(d)};
        out_shape.insert(out_shape.end(), extent.begin(), extent.end());
        Tensor out(DType::Float32, out_shape);
        chain_field_values(steps, index_to_point, start, extent, values, out.view(), 2);

        const std::int64_t voxels = shape_numel(extent);
        std::vector<double> points(static_cast<std::size_t>(voxels) * d);
        for (std::int64_t v = 0; v < voxels; ++v) {
            double index[3];
            std::int64_t rest = v;
            for (std::size_t a = 0; a < d; ++a) {  // innermost first
                const std::size_t axis = d - 1 - a;
                index[a] = static_cast<double>(start[axis] + rest % extent[axis]);
                rest /= extent[axis];
            }
            index_to_point.apply(index, &points[static_cast<std::size_t>(v) * d]);
        }
        const std::vector<double> original = points;
        map_points(steps, points, 1);
        std::int64_t outside = 0;
        double worst = 0;
        for (std::int64_t v = 0; v < voxels; ++v) {
            double mapped[3], subtrahend[3], field_point[3];
            values.of_mapped.apply(&points[static_cast<std::size_t>(v) * d], mapped);
            values.of_point.apply(&original[static_cast<std::size_t>(v) * d], subtrahend);
            before.affine->apply(&original[static_cast<std::size_t>(v) * d], field_point);
            outside += field.field->covers(field_point) ? 0 : 1;
            for (std::size_t k = 0; k < d; ++k) {
                const double expected = mapped[k] - subtrahend[k];
                const double got = out.data_as<float>()[static_cast<std::int64_t>(k) * voxels + v];
                worst = std::max(worst, std::abs(got - expected) / (1.0 + std::abs(expected)));
            }
        }
        INFO(outside << " of " << voxels << " voxels outside the field");
        CHECK(outside > 0);
        CHECK(outside < voxels);
        CHECK(worst < 1e-6);
    }
}
