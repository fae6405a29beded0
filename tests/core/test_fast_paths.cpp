// The fast paths of the kernel (ranks 2 and 3; float32, float64 and 8/16-bit integer pixels; the
// generic x86-64 build, the AVX2 build, and the interior pass on every Highway target compiled)
// against the plain reference path, which SampleOptions::force_generic_rank selects. The fast
// paths do the reference path's arithmetic in the same order, so every comparison here is bit for
// bit (compare_exact: memcmp per element, so -0 and +0 differ). Positions are drawn near and
// across every edge, with exact integers and half-integers (tap and rounding boundaries), far and
// non-finite coordinates.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <optional>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "gridwarp/physical.hpp"
#include "gridwarp/positions.hpp"
#include "gridwarp/simd.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;

namespace {

const Interpolation kModes[] = {Interpolation::Linear, Interpolation::Nearest, Interpolation::Cubic};
const Padding kPaddings[] = {Padding::Zeros, Padding::Border, Padding::Reflection};
const DType kFastTypes[] = {DType::Float32, DType::Float64, DType::UInt8, DType::Int8, DType::UInt16, DType::Int16};

// Every SIMD target compiled in that this processor runs (Highway's; gridwarp/simd.hpp), best
// first down to the portable code, each chosen in turn through GRIDWARP_ISA.
const std::vector<std::string> kIsas = gridwarp::simd_targets();

// Selects the kernel's instruction set for its lifetime.
class IsaScope {
public:
    explicit IsaScope(const std::string& isa) {
        if (const char* old = std::getenv("GRIDWARP_ISA")) saved_ = old;
        ::setenv("GRIDWARP_ISA", isa.c_str(), 1);
    }
    ~IsaScope() {
        if (saved_) {
            ::setenv("GRIDWARP_ISA", saved_->c_str(), 1);
        } else {
            ::unsetenv("GRIDWARP_ISA");
        }
    }
    IsaScope(const IsaScope&) = delete;
    IsaScope& operator=(const IsaScope&) = delete;

private:
    std::optional<std::string> saved_;
};

SampleOptions reference_of(SampleOptions options) {
    options.force_generic_rank = true;
    return options;
}

// A pixel position along an axis of size d: mostly near or across the edges, some exact integers
// and half-integers, some well inside, a few far away.
double edge_position(std::int64_t d, std::mt19937& rng) {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const double extent = static_cast<double>(d);
    const double pick = unit(rng);
    if (pick < 0.45) return -3.0 + (extent + 5.0) * unit(rng);                          // [-3, d+2]
    if (pick < 0.60) return std::floor(-3.0 + (extent + 5.0) * unit(rng));              // integers
    if (pick < 0.75) return std::floor(-3.0 + (extent + 5.0) * unit(rng)) + 0.5;        // half-integers
    if (pick < 0.95) return (extent - 1.0) * unit(rng);                                 // inside
    return (unit(rng) < 0.5 ? -1.0 : 1.0) * (extent + 40.0 * unit(rng));                // far
}

double to_normalized(double u, std::int64_t d, bool align_corners, std::mt19937& rng) {
    if (align_corners && d == 1) return std::uniform_real_distribution<double>(-1.5, 1.5)(rng);
    const double extent = static_cast<double>(d);
    return align_corners ? 2.0 * u / (extent - 1.0) - 1.0 : (2.0 * u + 1.0) / extent - 1.0;
}

// A grid (1, O..., r) of normalized positions near and across the edges of an input of spatial
// shape `input_spatial`; with `specials`, some coordinates are NaN, infinite or huge.
Tensor edge_grid(DType dtype, const Shape& input_spatial, const Shape& output_spatial, bool align_corners,
                 bool specials, std::mt19937& rng) {
    const auto rank = static_cast<std::int64_t>(input_spatial.size());
    Shape shape{1};
    shape.insert(shape.end(), output_spatial.begin(), output_spatial.end());
    shape.push_back(rank);
    const std::int64_t points = shape_numel(output_spatial);
    std::vector<double> values(static_cast<std::size_t>(points * rank));
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const double kSpecials[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(), 1e30, -3e38};
    for (std::int64_t p = 0; p < points; ++p) {
        for (std::int64_t k = 0; k < rank; ++k) {  // innermost first: k = 0 is x, the last input axis
            const std::int64_t d = input_spatial[static_cast<std::size_t>(rank - 1 - k)];
            double g = to_normalized(edge_position(d, rng), d, align_corners, rng);
            if (specials && unit(rng) < 0.02) g = kSpecials[static_cast<std::size_t>(unit(rng) * 5.0) % 5];
            values[static_cast<std::size_t>(p * rank + k)] = g;
        }
    }
    return tensor_from(dtype, shape, values);
}

Tensor input_of(DType dtype, const Shape& shape, std::mt19937& rng) {
    switch (dtype) {
        case DType::UInt8: return random_tensor(dtype, shape, 0, 255, rng);
        case DType::Int8: return random_tensor(dtype, shape, -128, 127, rng);
        case DType::UInt16: return random_tensor(dtype, shape, 0, 65535, rng);
        case DType::Int16: return random_tensor(dtype, shape, -32768, 32767, rng);
        default: return random_tensor(dtype, shape, -100, 100, rng);
    }
}

// The pixel-space map `affine` (output spatial shape `out_spatial`) as an explicit grid
// (1, O..., r) of normalized float32 positions on an input of spatial shape `input_spatial`.
Tensor normalized_grid_of(const AffinePositions& affine, const Shape& input_spatial, const Shape& out_spatial, bool align_corners,
                          std::mt19937& rng) {
    const auto rank = static_cast<std::int64_t>(input_spatial.size());
    Shape grid_shape{1};
    grid_shape.insert(grid_shape.end(), out_spatial.begin(), out_spatial.end());
    grid_shape.push_back(rank);
    const std::int64_t points = shape_numel(out_spatial);
    const std::int64_t width = out_spatial.back();
    std::vector<double> pixel(static_cast<std::size_t>(width * rank));
    std::vector<double> grid_values;
    grid_values.reserve(static_cast<std::size_t>(points * rank));
    std::vector<std::int64_t> outer(static_cast<std::size_t>(rank), 0);
    for (std::int64_t row = 0; row < points / width; ++row) {
        std::int64_t rest = row;
        for (std::int64_t axis = rank - 2; axis >= 0; --axis) {
            outer[static_cast<std::size_t>(axis)] = rest % out_spatial[static_cast<std::size_t>(axis)];
            rest /= out_spatial[static_cast<std::size_t>(axis)];
        }
        affine.row(0, outer.data(), 0, width, pixel.data());
        for (std::int64_t p = 0; p < width; ++p) {
            for (std::int64_t k = 0; k < rank; ++k) {
                const std::int64_t d = input_spatial[static_cast<std::size_t>(rank - 1 - k)];
                grid_values.push_back(to_normalized(pixel[static_cast<std::size_t>(p * rank + k)], d, align_corners, rng));
            }
        }
    }
    return tensor_from(DType::Float32, grid_shape, grid_values);
}

// Output spatial shapes per input shape: a few points per input pixel, so that most land near edges.
Shape output_for(const Shape& input_shape) {
    Shape out;
    for (std::size_t a = 2; a < input_shape.size(); ++a) out.push_back(input_shape[a] + 3);
    return out;
}

}  // namespace

TEST_CASE("fast paths equal the reference path near and across edges, every mode, padding and align_corners",
          "[fast][edges]") {
    std::mt19937 rng(515);
    const Shape shapes[] = {Shape{1, 2, 5, 7}, Shape{2, 1, 1, 6}, Shape{1, 1, 3, 2}, Shape{1, 3, 4, 4},
                            Shape{1, 1, 4, 5, 6}, Shape{1, 2, 3, 1, 7}, Shape{2, 1, 2, 2, 3}};
    int round = 0;
    for (const Shape& input_shape : shapes) {
        for (DType dtype : kFastTypes) {
            const Tensor x = input_of(dtype, input_shape, rng);
            const Shape input_spatial(input_shape.begin() + 2, input_shape.end());
            for (DType grid_dtype : {DType::Float32, DType::Float64}) {
                for (bool align_corners : {false, true}) {
                    Tensor grid = edge_grid(grid_dtype, input_spatial, output_for(input_shape), align_corners,
                                            (round++ % 3) == 0, rng);
                    if (input_shape[0] == 2) {  // a second batch item with other positions
                        Tensor other = edge_grid(grid_dtype, input_spatial, output_for(input_shape), align_corners, false, rng);
                        Shape two = grid.shape();
                        two[0] = 2;
                        auto values = as_doubles(grid.view());
                        const auto more = as_doubles(other.view());
                        values.insert(values.end(), more.begin(), more.end());
                        grid = tensor_from(grid_dtype, two, values);
                    }
                    for (auto mode : kModes) {
                        for (auto padding : kPaddings) {
                            for (double fill : {0.0, 1.5}) {
                                const SampleOptions fast = options_for(mode, padding, align_corners, fill);
                                for (const std::string& isa_setting : kIsas) {
                                    IsaScope isa(isa_setting);
                                    INFO(shape_to_string(input_shape) << " " << dtype_name(dtype) << " grid "
                                                                      << dtype_name(grid_dtype) << " " << interpolation_name(mode)
                                                                      << " " << padding_name(padding) << " ac " << align_corners
                                                                      << " fill " << fill << " isa " << isa_setting);
                                    CHECK(compare_exact(grid_sample(x.view(), grid.view(), fast).view(),
                                                        grid_sample(x.view(), grid.view(), reference_of(fast)).view()) == "");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("fast paths equal the reference path in pixel space (fused affine positions)", "[fast][affine]") {
    std::mt19937 rng(77);
    std::uniform_real_distribution<double> entry(-0.4, 0.4);
    for (const Shape& input_shape : {Shape{1, 3, 9, 11}, Shape{1, 2, 5, 6, 7}}) {
        const auto rank = static_cast<std::int64_t>(input_shape.size()) - 2;
        const Shape input_spatial(input_shape.begin() + 2, input_shape.end());
        Shape output_spatial;
        for (std::int64_t a = 0; a < rank; ++a) output_spatial.push_back(input_spatial[static_cast<std::size_t>(a)] + 4);
        // Near-identity maps with a shift of a few pixels: outputs cover the input, its edges and beyond.
        std::vector<double> matrix;
        for (std::int64_t k = 0; k < rank; ++k) {
            for (std::int64_t j = 0; j <= rank; ++j) {
                const double identity = (j == k) ? 1.0 : 0.0;
                matrix.push_back(j == rank ? -2.0 + 4.0 * (entry(rng) + 0.4) : identity + 0.5 * entry(rng));
            }
        }
        for (DType dtype : kFastTypes) {
            const Tensor x = input_of(dtype, input_shape, rng);
            for (DType coordinate : {DType::Float64, DType::Float32}) {
                const AffinePositions positions(matrix, 1, output_spatial, false, coordinate, CoordinateSpace::Pixel);
                for (auto mode : kModes) {
                    for (auto padding : kPaddings) {
                        for (bool align_corners : {false, true}) {
                            const SampleOptions fast = options_for(mode, padding, align_corners);
                            for (const std::string& isa_setting : kIsas) {
                                IsaScope isa(isa_setting);
                                INFO(shape_to_string(input_shape) << " " << dtype_name(dtype) << " positions "
                                                                  << dtype_name(coordinate) << " " << interpolation_name(mode)
                                                                  << " " << padding_name(padding) << " ac " << align_corners
                                                                  << " isa " << isa_setting);
                                CHECK(compare_exact(grid_sample(x.view(), positions, fast).view(),
                                                    grid_sample(x.view(), positions, reference_of(fast)).view()) == "");
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("fast paths read and write interleaved (HWC) and other strided views in place", "[fast][strided]") {
    std::mt19937 rng(4242);
    const std::int64_t h = 37, w = 53, c = 3;
    const Shape out_spatial{41, 60};
    for (DType dtype : {DType::UInt8, DType::Float32, DType::Int16, DType::UInt16}) {
        // An interleaved H x W x C buffer seen as (1, C, H, W).
        const Tensor hwc = input_of(dtype, {h, w, c}, rng);
        const ConstTensorView interleaved(dtype, hwc.data(), {1, c, h, w}, {0, 1, w * c, c});
        // A planar (1, C, W, H) buffer seen transposed as (1, C, H, W): the innermost stride is H.
        const Tensor planar = input_of(dtype, {1, c, w, h}, rng);
        const ConstTensorView transposed(dtype, planar.data(), {1, c, h, w}, {c * w * h, w * h, 1, h});
        for (bool align_corners : {false, true}) {
            const Tensor grid = edge_grid(DType::Float32, {h, w}, out_spatial, align_corners, true, rng);
            for (auto mode : kModes) {
                for (auto padding : kPaddings) {
                    const SampleOptions fast = options_for(mode, padding, align_corners, 7.0);
                    for (const std::string& isa_setting : kIsas) {
                        IsaScope isa(isa_setting);
                        INFO(dtype_name(dtype) << " " << interpolation_name(mode) << " " << padding_name(padding) << " ac "
                                               << align_corners << " isa " << isa_setting);
                        const GridPositions positions(grid.view());
                        // Interleaved in, interleaved out (the OpenCV layout), against the reference.
                        Tensor out_fast(dtype, {out_spatial[0], out_spatial[1], c});
                        Tensor out_ref(dtype, {out_spatial[0], out_spatial[1], c});
                        const Shape out_strides{0, 1, out_spatial[1] * c, c};
                        grid_sample(interleaved, positions, TensorView(dtype, out_fast.data(), {1, c, 41, 60}, out_strides), fast);
                        grid_sample(interleaved, positions, TensorView(dtype, out_ref.data(), {1, c, 41, 60}, out_strides),
                                    reference_of(fast));
                        CHECK(compare_exact(out_fast.view(), out_ref.view()) == "");
                        // The same interleaved input equals its planar copy.
                        const Tensor copy = Tensor::copy_of(interleaved);
                        CHECK(compare_exact(grid_sample(interleaved, positions, fast).view(),
                                            grid_sample(copy.view(), positions, reference_of(fast)).view()) == "");
                        // Transposed input.
                        CHECK(compare_exact(grid_sample(transposed, positions, fast).view(),
                                            grid_sample(transposed, positions, reference_of(fast)).view()) == "");
                    }
                }
            }
        }
    }
}

TEST_CASE("fast paths over many tiles, blocks and threads equal the reference path", "[fast][tiles]") {
    std::mt19937 rng(9);
    // Wider than a tile and a block (256 points), taller than a tile (64 rows); a smooth warp whose
    // blocks are mostly interior, some mixed, some entirely outside.
    const Shape input_shape{2, 2, 90, 310};
    const Shape out_spatial{100, 600};
    for (DType dtype : {DType::Float32, DType::UInt8}) {
        const Tensor x = input_of(dtype, input_shape, rng);
        for (bool align_corners : {false, true}) {
            std::vector<double> values;
            for (std::int64_t n = 0; n < 2; ++n) {
                for (std::int64_t i = 0; i < out_spatial[0]; ++i) {
                    for (std::int64_t j = 0; j < out_spatial[1]; ++j) {
                        const double u = -20.0 + 350.0 * static_cast<double>(j) / 599.0 + 3.0 * std::sin(0.1 * static_cast<double>(i));
                        const double v = -8.0 + 106.0 * static_cast<double>(i) / 99.0 + 2.0 * std::cos(0.05 * static_cast<double>(j + n));
                        values.push_back(to_normalized(u, 310, align_corners, rng));
                        values.push_back(to_normalized(v, 90, align_corners, rng));
                    }
                }
            }
            const Tensor grid = tensor_from(DType::Float32, {2, out_spatial[0], out_spatial[1], 2}, values);
            for (auto mode : kModes) {
                for (auto padding : kPaddings) {
                    for (int threads : {1, 2}) {
                        SampleOptions fast = options_for(mode, padding, align_corners);
                        fast.threads = threads;
                        for (const std::string& isa_setting : kIsas) {
                            IsaScope isa(isa_setting);
                            INFO(dtype_name(dtype) << " " << interpolation_name(mode) << " " << padding_name(padding) << " ac "
                                                   << align_corners << " threads " << threads << " isa " << isa_setting);
                            CHECK(compare_exact(grid_sample(x.view(), grid.view(), fast).view(),
                                                grid_sample(x.view(), grid.view(), reference_of(fast)).view()) == "");
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("fast paths: non-finite pixel values and fill values propagate as in the reference path", "[fast][nonfinite]") {
    std::mt19937 rng(31);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    for (DType dtype : {DType::Float32, DType::Float64}) {
        for (const Shape& input_shape : {Shape{1, 1, 6, 8}, Shape{1, 1, 4, 5, 6}}) {
            const Shape input_spatial(input_shape.begin() + 2, input_shape.end());
            // One kind of non-finite value per input, so that no sum meets two different NaNs.
            for (double special : {nan, inf, -inf}) {
                auto values = as_doubles(input_of(dtype, input_shape, rng).view());
                for (std::size_t i = 0; i < values.size(); i += 7) values[i] = special;
                const Tensor x = tensor_from(dtype, input_shape, values);
                // (float64 positions: the interior pass plans them in double.)
                for (DType grid_dtype : {DType::Float32, DType::Float64}) {
                    const Tensor grid = edge_grid(grid_dtype, input_spatial, output_for(input_shape), false, false, rng);
                    for (auto mode : kModes) {
                        for (auto padding : kPaddings) {
                            for (double fill : {0.0, -0.0, 2.5}) {
                                const SampleOptions fast = options_for(mode, padding, false, fill);
                                for (const std::string& isa_setting : kIsas) {
                                    IsaScope isa(isa_setting);
                                    INFO(shape_to_string(input_shape) << " " << dtype_name(dtype) << " grid " << dtype_name(grid_dtype)
                                                                      << " value " << special << " " << interpolation_name(mode) << " "
                                                                      << padding_name(padding) << " fill " << fill << " isa " << isa_setting);
                                    CHECK(compare_exact(grid_sample(x.view(), grid.view(), fast).view(),
                                                        grid_sample(x.view(), grid.view(), reference_of(fast)).view()) == "");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("fast paths round integer results half to even and saturate as the reference path does", "[fast][rounding]") {
    // Values 1, 2, 3, ... along x, sampled halfway between pixels: linear gives k + 0.5 exactly,
    // which rounds to the even neighbour; cubic overshoots past the type's range at the jumps.
    for (const std::string& isa_setting : kIsas) {
        IsaScope isa(isa_setting);
        // Width 8: the normalized positions (i + 1) / 4 - 1 and the pixel positions i + 0.5 are exact.
        const Tensor x = tensor_from(DType::UInt8, {1, 1, 1, 8}, {1, 2, 3, 4, 255, 0, 10, 20});
        std::vector<double> grid_values;
        for (int i = 0; i < 5; ++i) {
            grid_values.push_back((2.0 * (i + 0.5) + 1.0) / 8.0 - 1.0);  // x = i + 0.5
            grid_values.push_back(0.0);
        }
        const Tensor grid = tensor_from(DType::Float32, {1, 1, 5, 2}, grid_values);
        const SampleOptions linear = options_for(Interpolation::Linear, Padding::Border, false);
        const Tensor result = grid_sample(x.view(), grid.view(), linear);
        CHECK(as_doubles(result.view()) == std::vector<double>{2, 2, 4, 130, 128});  // 1.5 2.5 3.5 129.5 127.5
        CHECK(compare_exact(result.view(), grid_sample(x.view(), grid.view(), reference_of(linear)).view()) == "");
        for (auto padding : kPaddings) {
            const SampleOptions cubic = options_for(Interpolation::Cubic, padding, false);
            INFO(padding_name(padding) << " isa " << isa_setting);
            CHECK(compare_exact(grid_sample(x.view(), grid.view(), cubic).view(),
                                grid_sample(x.view(), grid.view(), reference_of(cubic)).view()) == "");
        }
    }
}

TEST_CASE("the interior pass equals the reference path on large interior regions, 2-D and 3-D",
          "[fast][interior]") {
    // Blocks of 256 points that are entirely interior (the pass alone writes them) next to mixed
    // ones, float32 grids read in place and float32 affine positions computed per row, several
    // channels, and inputs holding -0, NaN and infinities so that signed zeros and non-finite
    // sums are compared bit for bit.
    std::mt19937 rng(2024);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    for (const Shape& input_shape : {Shape{1, 2, 40, 300}, Shape{1, 2, 12, 20, 290}}) {
        const auto rank = static_cast<std::int64_t>(input_shape.size()) - 2;
        const Shape input_spatial(input_shape.begin() + 2, input_shape.end());
        auto values = as_doubles(input_of(DType::Float32, input_shape, rng).view());
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (i % 5 == 0) values[i] = -0.0;
            if (i % 97 == 0) values[i] = 0.0;
            if (i % 1009 == 0) values[i] = (i % 3 == 0) ? nan : (i % 3 == 1 ? inf : -inf);
        }
        const Tensor x = tensor_from(DType::Float32, input_shape, values);
        Shape out_spatial(input_spatial);
        out_spatial.back() = 520;  // two full blocks and a partial one per row
        // A slight rotation and scale in pixel space, innermost-first rows of the matrix.
        std::vector<double> matrix;
        for (std::int64_t k = 0; k < rank; ++k) {
            for (std::int64_t j = 0; j <= rank; ++j) {
                double entry = (j == k) ? (k == 0 ? 0.53 : 0.97) : 0.0;
                if (k == 1 && j == 0) entry = 0.011;
                if (k == 0 && j == 1) entry = -0.02;
                if (j == rank) entry = k == 0 ? 1.25 : 0.5;
                matrix.push_back(entry);
            }
        }
        const AffinePositions affine(matrix, 1, out_spatial, false, DType::Float32, CoordinateSpace::Pixel);
        for (bool align_corners : {false, true}) {
            // The same map as an explicit normalized float32 grid.
            const Tensor grid = normalized_grid_of(affine, input_spatial, out_spatial, align_corners, rng);
            for (auto mode : kModes) {
                for (auto padding : kPaddings) {
                    for (double fill : {0.0, -0.0}) {
                        SampleOptions fast = options_for(mode, padding, align_corners, fill);
                        fast.threads = 2;
                        for (const std::string& isa_setting : kIsas) {
                            IsaScope isa(isa_setting);
                            INFO(shape_to_string(input_shape) << " " << interpolation_name(mode) << " " << padding_name(padding)
                                                              << " ac " << align_corners << " fill " << fill << " isa " << isa_setting);
                            CHECK(compare_exact(grid_sample(x.view(), grid.view(), fast).view(),
                                                grid_sample(x.view(), grid.view(), reference_of(fast)).view()) == "");
                            CHECK(compare_exact(grid_sample(x.view(), affine, fast).view(),
                                                grid_sample(x.view(), affine, reference_of(fast)).view()) == "");
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("the interior pass equals the reference path for int16 volumes and images, 2-D and 3-D", "[fast][interior][int16]") {
    // Whole blocks of interior points next to edge and fill points, int16 extremes (cubic overshoot
    // saturates), fill values that round half to even or saturate, float32 and float64 positions.
    std::mt19937 rng(1606);
    for (const Shape& input_shape : {Shape{1, 2, 40, 300}, Shape{1, 1, 12, 20, 290}}) {
        const auto rank = static_cast<std::int64_t>(input_shape.size()) - 2;
        const Shape input_spatial(input_shape.begin() + 2, input_shape.end());
        auto values = as_doubles(input_of(DType::Int16, input_shape, rng).view());
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (i % 7 == 0) values[i] = (i % 2 == 0) ? 32767 : -32768;
        }
        const Tensor x = tensor_from(DType::Int16, input_shape, values);
        Shape out_spatial(input_spatial);
        out_spatial.back() = 520;  // two full blocks and a partial one per row
        std::vector<double> matrix;
        for (std::int64_t k = 0; k < rank; ++k) {
            for (std::int64_t j = 0; j <= rank; ++j) {
                double entry = (j == k) ? (k == 0 ? 0.53 : 0.97) : 0.0;
                if (k == 1 && j == 0) entry = 0.011;
                if (k == 0 && j == 1) entry = -0.02;
                if (j == rank) entry = k == 0 ? 1.25 : 0.5;
                matrix.push_back(entry);
            }
        }
        for (DType coordinates : {DType::Float32, DType::Float64}) {
            const AffinePositions affine(matrix, 1, out_spatial, false, coordinates, CoordinateSpace::Pixel);
            for (bool align_corners : {false, true}) {
                const Tensor grid = normalized_grid_of(affine, input_spatial, out_spatial, align_corners, rng);
                for (auto mode : kModes) {
                    for (auto padding : kPaddings) {
                        for (double fill : {0.0, 2.5, -40000.0}) {
                            SampleOptions fast = options_for(mode, padding, align_corners, fill);
                            fast.threads = 2;
                            for (const std::string& isa_setting : kIsas) {
                                IsaScope isa(isa_setting);
                                INFO(shape_to_string(input_shape) << " " << dtype_name(coordinates) << " " << interpolation_name(mode)
                                                                  << " " << padding_name(padding) << " ac " << align_corners << " fill "
                                                                  << fill << " isa " << isa_setting);
                                CHECK(compare_exact(grid_sample(x.view(), affine, fast).view(),
                                                    grid_sample(x.view(), affine, reference_of(fast)).view()) == "");
                                if (coordinates == DType::Float32) {
                                    CHECK(compare_exact(grid_sample(x.view(), grid.view(), fast).view(),
                                                        grid_sample(x.view(), grid.view(), reference_of(fast)).view()) == "");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("the interior pass equals the reference path on outputs large enough for streaming stores", "[fast][interior][stream]") {
    // 2-D outputs of 8 MiB and more (float32) are written with streaming stores where a whole
    // 64-byte line holds interior points only. These maps put fill regions, edges and interior
    // runs on every row; the first 2-D case's rows (2040 points, 8160 bytes) start alternately on
    // and half-way into a cache line, so that lines shared by an interior group and any other
    // group occur; the second's (2043 points) start at every 4-byte offset, so that most rows are
    // not 32-byte aligned (and stream nothing) and every row ends in a partial group. The 3-D case
    // (rows of 260 points, at every 16-byte offset) checks that outputs this large take the 3-D
    // pass, which does not stream, unchanged.
    std::mt19937 rng(77);
    struct Case {
        Shape input_shape;
        Shape output_spatial;
    };
    for (const Case& c : {Case{Shape{1, 1, 600, 700}, Shape{1050, 2040}}, Case{Shape{1, 1, 600, 700}, Shape{1030, 2043}},
                          Case{Shape{1, 1, 40, 60, 70}, Shape{64, 128, 260}}}) {
        const auto rank = static_cast<std::int64_t>(c.input_shape.size()) - 2;
        const Shape input_spatial(c.input_shape.begin() + 2, c.input_shape.end());
        REQUIRE(shape_numel(c.output_spatial) * 4 >= (std::int64_t{8} << 20));
        const Tensor x = input_of(DType::Float32, c.input_shape, rng);
        // A rotation of a few degrees and a zoom-out in pixel space (innermost-first rows), so
        // that the input's edges cross the output.
        std::vector<double> matrix;
        for (std::int64_t k = 0; k < rank; ++k) {
            for (std::int64_t j = 0; j <= rank; ++j) {
                double entry = (j == k) ? 0.36 : 0.0;
                if (k == 0 && j == 1) entry = -0.03;
                if (k == 1 && j == 0) entry = 0.03;
                if (k == 2 && j == 1) entry = 0.02;
                if (j == rank) entry = -9.5;
                matrix.push_back(entry);
            }
        }
        const AffinePositions affine(matrix, 1, c.output_spatial, false, DType::Float32, CoordinateSpace::Pixel);
        // The same map as an explicit normalized float32 grid, read in place.
        const Tensor grid = normalized_grid_of(affine, input_spatial, c.output_spatial, false, rng);
        for (auto mode : kModes) {
            for (auto padding : {Padding::Zeros, Padding::Border}) {
                SampleOptions fast = options_for(mode, padding, false);
                fast.threads = 2;
                const Tensor expected_grid = grid_sample(x.view(), grid.view(), reference_of(fast));
                const Tensor expected_affine = grid_sample(x.view(), affine, reference_of(fast));
                for (const std::string& isa_setting : kIsas) {
                    IsaScope isa(isa_setting);
                    INFO(shape_to_string(c.input_shape) << " " << interpolation_name(mode) << " " << padding_name(padding) << " isa "
                                                        << isa_setting);
                    CHECK(compare_exact(grid_sample(x.view(), grid.view(), fast).view(), expected_grid.view()) == "");
                    CHECK(compare_exact(grid_sample(x.view(), affine, fast).view(), expected_affine.view()) == "");
                }
            }
        }
    }
}

TEST_CASE("the interior pass and the interleaved gathers equal the reference path for uint8 and uint16 images",
          "[fast][interior]") {
    // 1 to 4 channels of uint8 and uint16, read and written planar or interleaved (HWC, as OpenCV
    // holds them; 3 and 4 uint8 channels under cubic, and uint16, take the interleaved gathers), with
    // float64 pixel-space affine positions (what `gridwarp affine --matrix` uses) and float32
    // normalized grids; the warp reaches the last pixels of the buffer, where the pass's 8-byte
    // loads would pass its end.
    std::mt19937 rng(808);
    const std::int64_t h = 45, w = 530;
    const Shape out_spatial{47, 540};
    const std::vector<double> matrix = {0.98, -0.03, 4.5, 0.02, 0.97, 1.0};  // x row, then y row
    const AffinePositions affine(matrix, 1, out_spatial, false, DType::Float64, CoordinateSpace::Pixel);
    for (int form = 0; form < 8; ++form) {
        const DType dtype = form < 4 ? DType::UInt8 : DType::UInt16;
        const std::int64_t c = form % 4 + 1;
        const Tensor hwc = input_of(dtype, {h, w, c}, rng);
        const ConstTensorView interleaved(dtype, hwc.data(), {1, c, h, w}, {0, 1, w * c, c});
        const Tensor planar = Tensor::copy_of(interleaved);
        for (bool align_corners : {false, true}) {
            const Tensor grid = edge_grid(DType::Float32, {h, w}, out_spatial, align_corners, false, rng);
            const GridPositions grid_positions(grid.view());
            for (auto mode : kModes) {
                for (auto padding : kPaddings) {
                    SampleOptions fast = options_for(mode, padding, align_corners, 3.0);
                    fast.threads = 2;
                    for (const std::string& isa_setting : kIsas) {
                        IsaScope isa(isa_setting);
                        for (const PositionSource* positions : {static_cast<const PositionSource*>(&affine),
                                                                static_cast<const PositionSource*>(&grid_positions)}) {
                            INFO(dtype_name(dtype) << " " << c << " channels " << interpolation_name(mode) << " " << padding_name(padding) << " ac "
                                   << align_corners << " isa " << isa_setting << " positions "
                                   << (positions == &affine ? "affine float64" : "grid float32"));
                            const Tensor expected = grid_sample(planar.view(), *positions, reference_of(fast));
                            CHECK(compare_exact(grid_sample(planar.view(), *positions, fast).view(), expected.view()) == "");
                            // Interleaved in and out.
                            Tensor out_hwc(dtype, {out_spatial[0], out_spatial[1], c});
                            const TensorView out_view(dtype, out_hwc.data(), {1, c, out_spatial[0], out_spatial[1]},
                                                      {0, 1, out_spatial[1] * c, c});
                            grid_sample(interleaved, *positions, out_view, fast);
                            CHECK(compare_exact(Tensor::copy_of(ConstTensorView(out_view.dtype, out_view.data, out_view.shape,
                                                                                out_view.strides))
                                                    .view(),
                                                expected.view()) == "");
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("affine rows: the interior run the interior pass plans without tests ends where the reference's does",
          "[fast][interior][affine]") {
    // Along an affine row the pass finds the run of interior points by bisection and plans it
    // without per-point tests; under zeros padding it also finds the run of points within reach
    // of the input and writes the groups outside it as fill without planning them. These rows put
    // positions exactly on the boundaries of those runs (integers: linear's last interior position
    // d - 1 is not interior, -1 and d bound the reach; half-integers: nearest's ties and its bound
    // d - 0.5) at many places along rows longer than a block, in both directions, in pixel and
    // normalized space, with float32 and float64 coordinates. In the second case the reach begins
    // exactly at a group's first point (u = -1 at x = 8), and its first rows are out of reach.
    std::mt19937 rng(4242);
    struct Case {
        Shape input_shape, out_spatial;
        CoordinateSpace space;
        std::vector<double> matrix;  // rows innermost-first: x, y (, z); columns x, y (, z), constant
    };
    const Case cases[] = {
        {{1, 2, 24, 301}, {30, 600}, CoordinateSpace::Pixel, {1, 0, -7, 0, 1, -3}},
        {{1, 2, 24, 301}, {30, 600}, CoordinateSpace::Pixel, {1, 0, -9, 0, 1, -3}},
        {{1, 2, 24, 301}, {30, 600}, CoordinateSpace::Pixel, {-0.5, 0, 160.25, 0.125, 0.75, -2.5}},
        {{1, 2, 24, 301}, {30, 600}, CoordinateSpace::Pixel, {0.5, 0.0625, -3.5, 0, 1, 0.5}},
        {{1, 1, 24, 301}, {30, 600}, CoordinateSpace::Pixel, {1.0 + 1e-7, 0, -0.5, 0.01, -1, 25}},
        {{1, 2, 24, 301}, {30, 600}, CoordinateSpace::Normalized, {1.25, 0, 0.0078125, 0, 1.1, -0.03125}},
        {{1, 2, 24, 301}, {30, 600}, CoordinateSpace::Normalized, {-2, 0.02, 0, 0, 1, 0}},
        {{1, 1, 5, 9, 150}, {6, 11, 300}, CoordinateSpace::Pixel, {1, 0, 0, -4, 0, 1, 0, -1, 0, 0.5, 1, -1}},
        {{1, 1, 5, 9, 150}, {6, 11, 300}, CoordinateSpace::Normalized, {-1.5, 0, 0.01, 0, 0, 1.2, 0, 0, 0, 0, 1.25, 0}},
    };
    for (const Case& c : cases) {
        const Tensor x = input_of(DType::Float32, c.input_shape, rng);
        const Tensor x8 = input_of(DType::UInt8, c.input_shape, rng);
        for (DType coordinate : {DType::Float64, DType::Float32}) {
            for (bool base_corners : {false, true}) {
                if (c.space == CoordinateSpace::Pixel && base_corners) continue;  // pixel space has no base convention
                const AffinePositions positions(c.matrix, 1, c.out_spatial, base_corners, coordinate, c.space);
                for (bool align_corners : {false, true}) {
                    for (auto mode : kModes) {
                        for (auto padding : {Padding::Zeros, Padding::Border}) {
                            const SampleOptions fast = options_for(mode, padding, align_corners, 0.5);
                            for (const Tensor* input : {&x, &x8}) {
                                INFO(shape_to_string(c.input_shape) << " " << dtype_name(input->dtype()) << " positions "
                                                                    << dtype_name(coordinate) << " matrix " << c.matrix[0] << ", "
                                                                    << c.matrix[2] << " base ac " << base_corners << " "
                                                                    << interpolation_name(mode) << " " << padding_name(padding)
                                                                    << " ac " << align_corners);
                                CHECK(compare_exact(grid_sample(input->view(), positions, fast).view(),
                                                    grid_sample(input->view(), positions, reference_of(fast)).view()) == "");
                            }
                        }
                    }
                }
            }
        }
    }
}

namespace {

// A position source that gives even rows in place (stored_row) or as affine terms (linear_row)
// and odd rows only through row(), as the interface allows: the tiles of the fast path then hold
// rows of both kinds.
class EvenRowsOnly final : public PositionSource {
public:
    explicit EvenRowsOnly(const PositionSource& inner) : inner_(inner) {}
    std::int64_t batch() const override { return inner_.batch(); }
    const Shape& output_shape() const override { return inner_.output_shape(); }
    DType coordinate_dtype() const override { return inner_.coordinate_dtype(); }
    CoordinateSpace space() const override { return inner_.space(); }
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count, float* xyz) const override {
        inner_.row(n, outer, start, count, xyz);
    }
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count, double* xyz) const override {
        inner_.row(n, outer, start, count, xyz);
    }
    const float* stored_row(std::int64_t n, const std::int64_t* outer, std::int64_t start) const override {
        return even(outer) ? inner_.stored_row(n, outer, start) : nullptr;
    }
    bool linear_row(std::int64_t n, const std::int64_t* outer, LinearRow* row) const override {
        return even(outer) && inner_.linear_row(n, outer, row);
    }

private:
    bool even(const std::int64_t* outer) const { return outer[spatial_rank() - 2] % 2 == 0; }
    const PositionSource& inner_;
};

}  // namespace

TEST_CASE("fast paths equal the reference path where a tile's rows are of mixed kinds (in place, affine, copied)",
          "[fast][rows]") {
    std::mt19937 rng(77);
    const Shape input_shape{1, 2, 40, 300};
    const Shape out_spatial{70, 520};  // several tiles across and down
    const std::vector<double> matrix{0.53, -0.02, 3.0, 0.011, 0.97, -1.5};  // pixel space, innermost-first rows
    const AffinePositions affine(matrix, 1, out_spatial, false, DType::Float64, CoordinateSpace::Pixel);
    std::vector<double> grid_values;
    std::vector<float> pixel(static_cast<std::size_t>(out_spatial[1] * 2));
    for (std::int64_t y = 0; y < out_spatial[0]; ++y) {
        const std::int64_t outer[1] = {y};
        affine.row(0, outer, 0, out_spatial[1], pixel.data());
        for (std::int64_t p = 0; p < out_spatial[1]; ++p) {
            grid_values.push_back((2.0 * pixel[static_cast<std::size_t>(2 * p)] + 1.0) / 300.0 - 1.0);
            grid_values.push_back((2.0 * pixel[static_cast<std::size_t>(2 * p + 1)] + 1.0) / 40.0 - 1.0);
        }
    }
    const Tensor grid = tensor_from(DType::Float32, {1, out_spatial[0], out_spatial[1], 2}, grid_values);
    const GridPositions stored(grid.view());
    const Tensor x = input_of(DType::Float32, input_shape, rng);
    const Tensor x8 = input_of(DType::UInt8, input_shape, rng);
    for (const PositionSource* inner : {static_cast<const PositionSource*>(&stored), static_cast<const PositionSource*>(&affine)}) {
        const EvenRowsOnly mixed(*inner);
        for (auto mode : kModes) {
            for (auto padding : {Padding::Zeros, Padding::Border}) {
                SampleOptions fast = options_for(mode, padding, false, 0.5);
                fast.threads = 2;
                for (const Tensor* input : {&x, &x8}) {
                    INFO((inner == &stored ? "grid" : "affine") << " " << dtype_name(input->dtype()) << " "
                                                                << interpolation_name(mode) << " " << padding_name(padding));
                    const Tensor expected = grid_sample(input->view(), *inner, reference_of(fast));
                    CHECK(compare_exact(grid_sample(input->view(), mixed, fast).view(), expected.view()) == "");
                    CHECK(compare_exact(grid_sample(input->view(), mixed, reference_of(fast)).view(), expected.view()) == "");
                }
            }
        }
    }
}

namespace {

// A rotation about all three axes with a shift, from output voxel index to input voxel index
// through physical space (two geometries), as `gridwarp resample` builds it: rows cross the
// input's edges at both ends.
TransformChainPositions rigid_chain(const Shape& output_spatial) {
    const std::size_t rank = output_spatial.size();
    const double c = std::cos(0.12), s = std::sin(0.12);
    AffineMap rotation = AffineMap::identity(rank);
    rotation.matrix = rank == 3 ? std::vector<double>{c, -s, 0.05, s, c, -0.08, -0.05, 0.08, 1.0} : std::vector<double>{c, -s, s, c};
    rotation.offset = rank == 3 ? std::vector<double>{3.5, -2.25, 1.75} : std::vector<double>{3.5, -2.25};
    PointTransform step;
    step.affine = std::make_shared<const AffineMap>(rotation);
    std::vector<double> spacing(rank, 1.25), origin(rank, -4.0), direction(rank * rank, 0.0);
    for (std::size_t k = 0; k < rank; ++k) direction[k * rank + k] = 1.0;
    const AffineMap output_index_to_point = AffineMap::from_geometry(spacing, origin, direction);
    const AffineMap point_to_input_index = AffineMap::from_geometry(std::vector<double>(rank, 1.0), std::vector<double>(rank, 0.0), direction).inverse();
    return TransformChainPositions(output_index_to_point, {step}, point_to_input_index, output_spatial);
}

}  // namespace

TEST_CASE("an affine transform chain samples through the interior pass as the reference path does", "[fast][chain]") {
    // The chain hands its rows to the passes as linear rows (computed where needed); the reference
    // path reads them through row().
    std::mt19937 rng(2311);
    for (const Shape& input_shape : {Shape{1, 1, 14, 40, 300}, Shape{1, 2, 60, 310}}) {
        const Shape input_spatial(input_shape.begin() + 2, input_shape.end());
        const TransformChainPositions chain = rigid_chain(input_spatial);
        REQUIRE(chain.is_affine());
        LinearRow row;
        const std::int64_t outer[2] = {1, 1};
        REQUIRE(chain.linear_row(0, outer, &row));
        for (DType dtype : {DType::Float32, DType::Int16, DType::UInt8}) {
            const Tensor x = input_of(dtype, input_shape, rng);
            for (auto mode : kModes) {
                for (auto padding : kPaddings) {
                    SampleOptions fast = options_for(mode, padding, false);
                    fast.threads = 2;
                    for (const std::string& isa_setting : kIsas) {
                        IsaScope isa(isa_setting);
                        INFO(shape_to_string(input_shape) << " " << dtype_name(dtype) << " " << interpolation_name(mode) << " "
                                                          << padding_name(padding) << " isa " << isa_setting);
                        CHECK(compare_exact(grid_sample(x.view(), chain, fast).view(),
                                            grid_sample(x.view(), chain, reference_of(fast)).view()) == "");
                    }
                }
            }
        }
    }
}

TEST_CASE("a position window samples the box of the whole output it covers", "[fast][window]") {
    std::mt19937 rng(2511);
    struct Box {
        Shape start, extent;
    };
    for (const Shape& input_shape : {Shape{1, 1, 14, 40, 300}, Shape{1, 2, 60, 310}}) {
        const Shape spatial(input_shape.begin() + 2, input_shape.end());
        const std::int64_t rank = static_cast<std::int64_t>(spatial.size());
        const TransformChainPositions chain = rigid_chain(spatial);
        std::vector<double> matrix;
        for (std::int64_t k = 0; k < rank; ++k) {
            for (std::int64_t j = 0; j <= rank; ++j) matrix.push_back(j == k ? 0.9 : j == rank ? 1.5 : 0.03);
        }
        const AffinePositions affine(matrix, 1, spatial, false, DType::Float32, CoordinateSpace::Pixel);
        const Tensor grid = normalized_grid_of(affine, spatial, spatial, false, rng);
        const GridPositions stored(grid.view());
        std::vector<Box> boxes;
        if (rank == 3) {
            boxes = {{{0, 0, 0}, {5, 40, 300}}, {{5, 0, 0}, {9, 40, 300}}, {{13, 7, 0}, {1, 20, 300}}, {{2, 39, 0}, {1, 1, 300}},
                     {{3, 5, 17}, {4, 30, 101}}, {{0, 0, 299}, {14, 40, 1}}};
        } else {
            boxes = {{{0, 0}, {17, 310}}, {{17, 0}, {43, 310}}, {{59, 0}, {1, 310}}, {{9, 33}, {20, 64}}, {{0, 1}, {60, 309}}};
        }
        const Tensor x = input_of(DType::Float32, input_shape, rng);
        const std::vector<std::pair<const char*, const PositionSource*>> sources = {
            {"chain", &chain}, {"affine", &affine}, {"grid", &stored}};
        for (const auto& [name, source] : sources) {
            for (auto mode : kModes) {
                const SampleOptions options = options_for(mode, Padding::Zeros, false);
                const Tensor whole = grid_sample(x.view(), *source, reference_of(options));
                for (const Box& box : boxes) {
                    INFO(name << " " << shape_to_string(input_shape) << " " << interpolation_name(mode) << " box at "
                              << shape_to_string(box.start) << " extent " << shape_to_string(box.extent));
                    const PositionWindow window(*source, box.start, box.extent);
                    REQUIRE(window.output_shape() == box.extent);
                    const Tensor part = grid_sample(x.view(), window, options);
                    // The box of the whole output: the same strides, moved to the box's start.
                    ConstTensorView cut = whole.view();
                    cut.shape = part.shape();
                    std::int64_t offset = 0;
                    for (std::int64_t a = 0; a < rank; ++a) offset += box.start[static_cast<std::size_t>(a)] * cut.strides[static_cast<std::size_t>(a + 2)];
                    cut.data = static_cast<const float*>(cut.data) + offset;
                    CHECK(compare_exact(part.view(), cut) == "");
                }
            }
        }
        // Boxes outside the grid are refused.
        const Shape origin(spatial.size(), 0);
        Shape too_deep = spatial;
        too_deep[0] += 1;
        Shape too_wide = spatial;
        too_wide.back() += 1;
        Shape shifted_row = origin;
        shifted_row.back() = 1;
        CHECK_THROWS_AS(PositionWindow(chain, origin, too_deep), std::invalid_argument);
        CHECK_THROWS_AS(PositionWindow(chain, origin, too_wide), std::invalid_argument);
        CHECK_THROWS_AS(PositionWindow(chain, shifted_row, spatial), std::invalid_argument);
        CHECK_THROWS_AS(PositionWindow(chain, Shape{0}, Shape{1}), std::invalid_argument);
    }
}

// ---------------------------------------------------------------------------------------------
// The zero-weight rule: the fast paths add zero-weight taps and sum again without them where a
// float sum came out NaN; the reference path skips them. Both must give the same bits.

TEST_CASE("zero-weight taps: fast paths equal the reference path where weights are exactly zero and values are not finite",
          "[fast][zero-weight]") {
    // Pixel-space maps whose positions are integers and half-integers (identity, integer and half
    // shifts, a zoom by 2), so that linear and cubic weights of 0 meet infinities and NaN all over
    // whole groups and runs of interior points, and at the edges (a NaN fill value). One kind of
    // non-finite value per input, so that no sum meets two different NaNs. float32 (interior
    // passes) and float64 (generic dense pass) pixels; float32 and float64 coordinates, and the
    // same maps as explicit normalized grids.
    std::mt19937 rng(3636);
    const double specials[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity()};
    struct Map {
        double x_scale, x_shift, other_scale, other_shift;
    };
    const Map maps[] = {{1, 0, 1, 0}, {1, 0.5, 1, -1}, {1, 3, 1, 2}, {0.5, 0, 0.5, 0}};
    for (const Shape& input_shape : {Shape{1, 2, 24, 300}, Shape{1, 1, 8, 12, 290}}) {
        const auto rank = static_cast<std::int64_t>(input_shape.size()) - 2;
        const Shape spatial(input_shape.begin() + 2, input_shape.end());
        for (DType dtype : {DType::Float32, DType::Float64}) {
            for (std::size_t m = 0; m < std::size(maps); ++m) {
                const Map& map = maps[m];
                const double special = specials[m % 3];
                auto values = as_doubles(input_of(dtype, input_shape, rng).view());
                for (std::size_t i = 7; i < values.size(); i += 97) values[i] = special;
                const Tensor x = tensor_from(dtype, input_shape, values);
                std::vector<double> matrix;  // rows innermost-first: x, y (, z)
                for (std::int64_t k = 0; k < rank; ++k) {
                    for (std::int64_t j = 0; j <= rank; ++j) {
                        if (j == rank) matrix.push_back(k == 0 ? map.x_shift : map.other_shift);
                        else matrix.push_back(j == k ? (k == 0 ? map.x_scale : map.other_scale) : 0.0);
                    }
                }
                const bool align_corners = m % 2 == 1;
                const AffinePositions affine32(matrix, 1, spatial, false, DType::Float32, CoordinateSpace::Pixel);
                const AffinePositions affine64(matrix, 1, spatial, false, DType::Float64, CoordinateSpace::Pixel);
                const Tensor grid = normalized_grid_of(affine64, spatial, spatial, align_corners, rng);
                const GridPositions stored(grid.view());
                for (auto mode : kModes) {
                    for (auto padding : kPaddings) {
                        for (double fill : {0.0, std::numeric_limits<double>::quiet_NaN()}) {
                            SampleOptions fast = options_for(mode, padding, align_corners, fill);
                            fast.threads = 2;
                            for (const PositionSource* positions : {static_cast<const PositionSource*>(&affine32),
                                                                    static_cast<const PositionSource*>(&affine64),
                                                                    static_cast<const PositionSource*>(&stored)}) {
                                const Tensor expected = grid_sample(x.view(), *positions, reference_of(fast));
                                for (const std::string& isa_setting : kIsas) {
                                    IsaScope isa(isa_setting);
                                    INFO(shape_to_string(input_shape) << " " << dtype_name(dtype) << " map " << m << " value "
                                                                      << special << " " << interpolation_name(mode) << " "
                                                                      << padding_name(padding) << " ac " << align_corners << " fill "
                                                                      << fill << " isa " << isa_setting << " positions "
                                                                      << (positions == &stored ? "grid float32"
                                                                          : positions == &affine32 ? "affine float32"
                                                                                                   : "affine float64"));
                                    CHECK(compare_exact(grid_sample(x.view(), *positions, fast).view(), expected.view()) == "");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

namespace {

// A buffer of `bytes` readable bytes inside a reservation that faults on any access to the
// `before` bytes before them or the `after` bytes after them (beyond the page the buffer shares
// with its readable neighbours: the buffer ends at a page's end, or starts at a page's start).
class GuardedBuffer {
public:
    GuardedBuffer(std::size_t before, std::size_t bytes, std::size_t after, bool flush_with_end) {
        const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
        const auto pages = [&](std::size_t n) { return (n + page - 1) / page * page; };
        const std::size_t readable_at = pages(before) + page, readable = pages(bytes);
        size_ = readable_at + readable + pages(after) + page;
        void* reserved = mmap(nullptr, size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(reserved != MAP_FAILED);
        base_ = static_cast<std::uint8_t*>(reserved);
        REQUIRE(mprotect(base_ + readable_at, readable, PROT_READ | PROT_WRITE) == 0);
        data_ = base_ + readable_at + (flush_with_end ? readable - bytes : 0);
    }
    ~GuardedBuffer() { munmap(base_, size_); }
    GuardedBuffer(const GuardedBuffer&) = delete;
    GuardedBuffer& operator=(const GuardedBuffer&) = delete;
    std::uint8_t* data() const { return data_; }

private:
    std::uint8_t* base_ = nullptr;
    std::uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
};

// (N, C, spatial) strides of pixels stored channel after channel of each voxel (as tiles are).
Shape interleaved_strides(std::int64_t channels, const Shape& spatial) {
    Shape strides(spatial.size() + 2);
    std::int64_t stride = channels;
    for (std::size_t a = spatial.size(); a-- > 0;) {
        strides[a + 2] = stride;
        stride *= spatial[a];
    }
    strides[1] = 1;
    strides[0] = stride;
    return strides;
}

}  // namespace

TEST_CASE("a box of the input read alone samples as the whole input, and nothing outside it is read", "[fast][box]") {
    std::mt19937 rng(6301);
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    for (const std::string& isa : kIsas) {
        const IsaScope scope(isa);
        for (const Shape& spatial : {Shape{12, 30, 50}, Shape{40, 70}}) {
            const auto rank = static_cast<std::int64_t>(spatial.size());
            const std::int64_t channels = rank == 2 ? 3 : 1;
            std::vector<double> matrix;  // turned, shrunk a little, moved so that some points fall outside
            for (std::int64_t k = 0; k < rank; ++k) {
                for (std::int64_t j = 0; j <= rank; ++j) matrix.push_back(j == k ? 0.93 : j == rank ? -2.5 + k : (j + k) % 2 ? 0.21 : -0.17);
            }
            const AffinePositions affine32(matrix, 1, spatial, false, DType::Float32, CoordinateSpace::Pixel);
            const AffinePositions affine64(matrix, 1, spatial, false, DType::Float64, CoordinateSpace::Pixel);
            Tensor grid = normalized_grid_of(affine32, spatial, spatial, false, rng);
            float* g = grid.view().typed<float>();
            const std::int64_t points = shape_numel(spatial);
            for (const double special : {nan, inf, -inf, 1e30, -1.0, 1.0, nan}) {
                g[std::uniform_int_distribution<std::int64_t>(0, points * rank - 1)(rng)] = static_cast<float>(special);
            }
            const GridPositions stored(grid.view());
            const std::vector<std::pair<const char*, const PositionSource*>> sources = {
                {"affine float32", &affine32}, {"affine float64", &affine64}, {"grid", &stored}};
            for (const DType dtype : {DType::UInt8, DType::Int16, DType::Float32, DType::Float64}) {
                Shape stored_shape{1};
                stored_shape.insert(stored_shape.end(), spatial.begin(), spatial.end());
                stored_shape.push_back(channels);
                const Tensor values = input_of(dtype, stored_shape, rng);
                Shape shape{1, channels};
                shape.insert(shape.end(), spatial.begin(), spatial.end());
                const ConstTensorView whole(dtype, values.view().data, shape, interleaved_strides(channels, spatial));
                const std::size_t element = dtype_size(dtype);
                for (const auto& [name, source] : sources) {
                    for (const auto mode : kModes) {
                        for (const auto padding : kPaddings) {
                            const SampleOptions options = options_for(mode, padding, false);
                            int window_count = 0;
                            for (std::int64_t z = 0; z < (rank == 3 ? spatial[0] : 1); z += 5) {
                                for (std::int64_t y = 0; y < spatial[rank - 2]; y += 17) {
                                    for (std::int64_t x = 0; x < spatial[rank - 1]; x += 23) {
                                        Shape start{y, x}, extent{std::min<std::int64_t>(17, spatial[rank - 2] - y), std::min<std::int64_t>(23, spatial[rank - 1] - x)};
                                        if (rank == 3) {
                                            start.insert(start.begin(), z);
                                            extent.insert(extent.begin(), std::min<std::int64_t>(5, spatial[0] - z));
                                        }
                                        INFO(isa << " " << name << " " << dtype_name(dtype) << " " << interpolation_name(mode) << " "
                                                 << padding_name(padding) << " window at " << shape_to_string(start));
                                        const PositionWindow window(*source, start, extent);
                                        const Tensor expected = grid_sample(whole, window, options);
                                        const InputBox box = input_box_read(window, spatial, options);
                                        // The box alone, with the whole input's bytes before and after it out of reach.
                                        const Shape box_strides = interleaved_strides(channels, box.extent);
                                        const std::size_t box_bytes = static_cast<std::size_t>(box_strides[0]) * element;
                                        std::size_t before = 0;
                                        for (std::int64_t a = 0; a < rank; ++a) before += static_cast<std::size_t>(box.start[a] * box_strides[a + 2]) * element;
                                        const GuardedBuffer buffer(before, box_bytes, static_cast<std::size_t>(whole.strides[0]) * element, ++window_count % 2 == 0);
                                        Shape box_shape{1, channels};
                                        box_shape.insert(box_shape.end(), box.extent.begin(), box.extent.end());
                                        const TensorView box_pixels(dtype, buffer.data(), box_shape, box_strides);
                                        ConstTensorView source_box = whole;
                                        source_box.shape = box_shape;
                                        std::int64_t offset = 0;
                                        for (std::int64_t a = 0; a < rank; ++a) offset += box.start[a] * whole.strides[a + 2];
                                        source_box.data = static_cast<const std::uint8_t*>(whole.data) + offset * static_cast<std::int64_t>(element);
                                        copy_elements(source_box, box_pixels);
                                        Tensor part(dtype, expected.shape());
                                        grid_sample_in_box(box_pixels, box, spatial, window, part.view(), options);
                                        CHECK(compare_exact(part.view(), expected.view()) == "");
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
