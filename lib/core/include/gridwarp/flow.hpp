// Sample positions from a dense field: optical flow, a displacement field, or absolute positions,
// and the exact conversion between pixel-space affine matrices and AffineGrid's theta.
#pragma once

#include <vector>

#include "gridwarp/positions.hpp"

namespace gridwarp {

enum class FlowUnits { Pixels, Normalized };

// A field (N, O1..Or, r) of a real dtype whose last axis lists components innermost-first
// (u/x, v/y, w/z). Backward warping: the output at pixel x samples the input at x + field(x).
//  - Pixels, displacement: input pixel position x + field(x) (pixel centres at integers).
//  - Pixels, absolute: input pixel position field(x).
//  - Normalized, displacement: normalized position base(x) + field(x), with base the identity
//    grid of AffineGrid for the output size and align_corners.
//  - Normalized, absolute: field(x) is a GridSample grid.
// NaN components (invalid flow) give the fill value. The view is not copied.
class FlowPositions final : public PositionSource {
public:
    FlowPositions(ConstTensorView field, FlowUnits units, bool absolute, bool align_corners);

    std::int64_t batch() const override { return field_.shape.front(); }
    const Shape& output_shape() const override { return output_shape_; }
    DType coordinate_dtype() const override { return DType::Float64; }
    CoordinateSpace space() const override {
        return units_ == FlowUnits::Pixels ? CoordinateSpace::Pixel : CoordinateSpace::Normalized;
    }
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             float* xyz) const override;
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             double* xyz) const override;

private:
    template <class Coord>
    void compute_row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                     Coord* xyz) const;
    double base(std::int64_t index, std::int64_t extent) const;

    ConstTensorView field_;
    Shape output_shape_;
    FlowUnits units_;
    bool absolute_;
    bool align_corners_;
};

// Converts a pixel-space affine map (r rows of r+1 numbers, innermost-first: x, y, z; output pixel
// index -> input pixel index) into AffineGrid's normalized theta for these input and output
// spatial shapes (outermost-first, as tensors list them). Exact up to double rounding; see
// docs/cli.md for the formula.
std::vector<double> pixel_matrix_to_theta(const std::vector<double>& matrix, const Shape& input_spatial,
                                          const Shape& output_spatial, bool align_corners);

// Inverts an affine map given as r rows of r+1 numbers. Throws std::invalid_argument when it is
// singular (or nearly: the condition is checked against the matrix's scale).
std::vector<double> invert_affine(const std::vector<double>& matrix, std::int64_t rank);

}  // namespace gridwarp
