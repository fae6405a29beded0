// ITK's boundary rule, as itk::ResampleImageFilter (and so antsApplyTransforms) applies it,
// expressed through positions so that the ONNX sampler itself is unchanged. See the "ITK's
// boundary rule" section of docs/semantics.md.
#pragma once

#include <vector>

#include "gridwarp/grid_sample.hpp"
#include "gridwarp/positions.hpp"

namespace gridwarp {

// The sampler's options under which ItkBoundaryPositions' positions read as ITK reads, by the
// kind's InterpolationKind::itk_boundary: zeros padding; B-splines mirror (reflection about the
// corner centres); windowed sincs and the Gaussians read 0 past the edge (outside_tap_value).
// Throws std::invalid_argument for a kind ITK has no equal of (cubic convolution).
void apply_itk_boundary(SampleOptions& options);

// The positions of another pixel-space source, rewritten point by point (in double) so that
// sampling them with zeros padding gives what ITK gives at the source's positions:
//  - a point whose continuous index u is outside [-0.5, d - 0.5) on some axis (NaN included)
//    becomes NaN, which the sampler turns into the fill value (ITK's default pixel value);
//  - linear: inside, each coordinate is clamped to [0, d - 1], so taps beyond the edge repeat
//    the edge voxel with weights 1 and 0, as LinearInterpolateImageFunction does;
//  - nearest: inside, each coordinate becomes the whole index ITK picks, rounding halves up
//    (itk::Math::RoundHalfIntegerUp, by x86-64 ITK's formula);
//  - B-splines and windowed sincs: inside, unchanged; their taps beyond the edge follow ITK's
//    boundary condition through the sampler's padding (reflection with align_corners for the
//    B-splines' mirror, zeros with outside_tap_value 0 for the sincs' ConstantBoundaryCondition).
// Cubic is refused: ITK's cubic is a B-spline interpolator, not cubic convolution.
class ItkBoundaryPositions final : public PositionSource {
public:
    // input_shape: the sampled input's spatial shape (D1..Dr), outermost first, one per axis of
    // `source`. Throws std::invalid_argument for cubic, a normalized-space source or a rank
    // mismatch. `source` must outlive this object.
    ItkBoundaryPositions(const PositionSource& source, Shape input_shape, Interpolation mode);

    std::int64_t batch() const override { return source_.batch(); }
    const Shape& output_shape() const override { return source_.output_shape(); }
    DType coordinate_dtype() const override { return source_.coordinate_dtype(); }
    CoordinateSpace space() const override { return CoordinateSpace::Pixel; }
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             float* xyz) const override;
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             double* xyz) const override;

private:
    // Applies the rule to `count` points of r coordinates each, in place.
    void apply(double* xyz, std::int64_t count) const;

    const PositionSource& source_;
    Shape input_shape_;
    Interpolation mode_;
    std::vector<double> upper_;  // per coordinate, innermost first: d - 0.5, where "inside" ends
    std::vector<double> last_;   // d - 1, the last voxel's index
};

}  // namespace gridwarp
