// Where the sampler reads its sample positions from. A position source hands out normalized
// coordinates (-1 and 1 at the input's edges, see docs/semantics.md) one output row at a time, so
// that positions computed on the fly (an affine map, a displacement field) never need a full grid
// tensor in memory.
#pragma once

#include <cstdint>
#include <vector>

#include "gridwarp/tensor.hpp"

namespace gridwarp {

// What a position's numbers mean. Normalized: -1 and 1 are the input's edges (or corner
// centres with align_corners), as in ONNX. Pixel: input indices, pixel centres at integers, so an
// identity or an integer shift is exact in any arithmetic.
enum class CoordinateSpace { Normalized, Pixel };

// A row of positions along which coordinate k of the point at innermost output index i is
// slope[k] * base[i] + offset[k], computed in double (a product, then a sum: no fused
// multiply-add), then rounded to float for float32 coordinates (coordinate_dtype()). base[i] is
// AffineGrid's base coordinate of i along the innermost axis (i itself in pixel space). row()
// writes exactly these values.
struct LinearRow {
    const double* base = nullptr;  // one value per output index of the innermost axis
    double slope[3] = {0, 0, 0};
    double offset[3] = {0, 0, 0};
};

class PositionSource {
public:
    virtual ~PositionSource() = default;

    // N: the batch size the positions are given for.
    virtual std::int64_t batch() const = 0;
    // (O1..Or): the output's spatial shape; its length is the spatial rank r.
    virtual const Shape& output_shape() const = 0;
    // The dtype of the grid the positions stand for (float16, bfloat16, float32 or float64).
    // It decides the arithmetic: float64 positions are unnormalized in double, others in float.
    virtual DType coordinate_dtype() const = 0;
    virtual CoordinateSpace space() const { return CoordinateSpace::Normalized; }

    // Writes `count` points of the row (n, outer[0..r-2], start .. start+count-1) as r coordinates
    // each, innermost axis first (x, y, z, ...), to xyz[0 .. count*r-1].
    virtual void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                     float* xyz) const = 0;
    virtual void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                     double* xyz) const = 0;

    // Where the positions of a row already lie in memory as row() would write them for float
    // (count * r floats, point after point), if they do: an explicit float32 grid whose points and
    // coordinates are dense. nullptr otherwise. The sampler then reads them in place.
    virtual const float* stored_row(std::int64_t /*n*/, const std::int64_t* /*outer*/, std::int64_t /*start*/) const {
        return nullptr;
    }

    // Where the positions of a row are an affine function of the innermost output index, as
    // LinearRow describes: fills *row and returns true (spatial ranks 1 to 3). The sampler then
    // computes them where it needs them instead of reading them from a buffer.
    virtual bool linear_row(std::int64_t /*n*/, const std::int64_t* /*outer*/, LinearRow* /*row*/) const {
        return false;
    }

    std::int64_t spatial_rank() const { return static_cast<std::int64_t>(output_shape().size()); }
};

// The positions of a box of another source's output grid: output index (o1..or) of the window
// is index (start1 + o1, ..., startr + or) of `whole`, given exactly as `whole` gives it. Sampling a
// window writes the same values as sampling the whole grid and cutting the box out, which lets an
// output be sampled and written a block of rows, or a tile, at a time. `whole` must outlive the window.
class PositionWindow final : public PositionSource {
public:
    // start and extent: outermost first, one per spatial axis. Throws std::invalid_argument for a
    // box outside the grid.
    PositionWindow(const PositionSource& whole, Shape start, Shape extent);

    std::int64_t batch() const override { return whole_.batch(); }
    const Shape& output_shape() const override { return extent_; }
    DType coordinate_dtype() const override { return whole_.coordinate_dtype(); }
    CoordinateSpace space() const override { return whole_.space(); }
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             float* xyz) const override;
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             double* xyz) const override;
    const float* stored_row(std::int64_t n, const std::int64_t* outer, std::int64_t start) const override;
    bool linear_row(std::int64_t n, const std::int64_t* outer, LinearRow* row) const override;

private:
    // The outer indices of `whole` for the window's outer indices `outer` (rank - 1 of them).
    const std::int64_t* shifted(const std::int64_t* outer, std::int64_t* scratch) const;

    const PositionSource& whole_;
    Shape start_;
    Shape extent_;
};

// A box of input voxels: start and extent along each spatial axis, outermost first.
struct InputBox {
    Shape start, extent;
};

// The positions of `whole` as pixel positions in `box` of an input of spatial shape
// `input_spatial`: normalized coordinates unnormalized for the whole input, then the box's start
// subtracted, in the arithmetic the sampler unnormalizes in (float, or double for float64
// positions). The subtraction of a whole number below the coordinate is exact, so each point's
// first tap and weights are those it has in the whole input; an even box start keeps nearest's
// ties (rounded half to even) where they fall in the whole input. `whole` must outlive this object.
class PositionsInBox final : public PositionSource {
public:
    PositionsInBox(const PositionSource& whole, Shape input_spatial, bool align_corners, InputBox box);

    std::int64_t batch() const override { return whole_.batch(); }
    const Shape& output_shape() const override { return whole_.output_shape(); }
    DType coordinate_dtype() const override { return whole_.coordinate_dtype(); }
    CoordinateSpace space() const override { return CoordinateSpace::Pixel; }
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             float* xyz) const override;
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             double* xyz) const override;

private:
    template <class Coord>
    void place(std::int64_t count, Coord* xyz) const;

    const PositionSource& whole_;
    Shape input_spatial_;
    bool align_corners_;
    InputBox box_;
};

// Positions read from an explicit grid tensor (N, O1..Or, r), as the ONNX operator takes them.
// The view is not copied: the grid must outlive this object.
class GridPositions final : public PositionSource {
public:
    explicit GridPositions(ConstTensorView grid);

    std::int64_t batch() const override { return grid_.shape.front(); }
    const Shape& output_shape() const override { return output_shape_; }
    DType coordinate_dtype() const override { return grid_.dtype; }
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             float* xyz) const override;
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             double* xyz) const override;
    const float* stored_row(std::int64_t n, const std::int64_t* outer, std::int64_t start) const override;

private:
    std::int64_t row_offset(std::int64_t n, const std::int64_t* outer, std::int64_t start) const;
    template <class Coord>
    void read_row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                  Coord* xyz) const;

    ConstTensorView grid_;
    Shape output_shape_;
};

// Positions of an affine map, computed on the fly: position[n, o..., :] = theta[n] @ [b_x, b_y,
// (b_z, ...) 1], in double, rounded to `coordinate_dtype`.
//  - In normalized space the b are the base coordinates of torch.nn.functional.affine_grid /
//    ONNX AffineGrid, so sampling through this source equals sampling the grid that affine_grid()
//    returns, bit for bit.
//  - In pixel space the b are the output indices themselves and theta maps output pixel indices
//    to input pixel indices (OpenCV's warpAffine with WARP_INVERSE_MAP).
class AffinePositions final : public PositionSource {
public:
    // theta: N matrices of r rows and r+1 columns, row-major, in double.
    AffinePositions(std::vector<double> theta, std::int64_t batch, Shape output_shape, bool align_corners,
                    DType coordinate_dtype = DType::Float32, CoordinateSpace space = CoordinateSpace::Normalized);
    // theta: a tensor (N, r, r+1) of a floating dtype, which also becomes the coordinate dtype.
    AffinePositions(const ConstTensorView& theta, Shape output_shape, bool align_corners);

    std::int64_t batch() const override { return batch_; }
    const Shape& output_shape() const override { return output_shape_; }
    DType coordinate_dtype() const override { return coordinate_dtype_; }
    CoordinateSpace space() const override { return space_; }
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             float* xyz) const override;
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             double* xyz) const override;
    // Float32 and float64 coordinates, ranks 1 to 3.
    bool linear_row(std::int64_t n, const std::int64_t* outer, LinearRow* row) const override;

private:
    // slope[k] and offset[k] of the row (n, outer): LinearRow's terms for any rank.
    void row_terms(std::int64_t n, const std::int64_t* outer, double* slope, double* offset) const;
    template <class Coord>
    void compute_row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                     Coord* xyz) const;

    std::vector<double> theta_;
    std::int64_t batch_;
    Shape output_shape_;
    bool align_corners_;
    DType coordinate_dtype_;
    CoordinateSpace space_;
    // The base coordinate of every index of each axis, outermost first: rows look their terms up
    // (a tiled output asks for every row's terms several times).
    std::vector<std::vector<double>> base_;
};

// ONNX AffineGrid: theta (N, 2, 3) with size (N, C, H, W), theta (N, 3, 4) with size
// (N, C, D, H, W), and as an extension theta (N, r, r+1) with an (r+2)-long size.
// Returns the grid (N, O1..Or, r) in theta's dtype.
Tensor affine_grid(const ConstTensorView& theta, const Shape& size, bool align_corners);

}  // namespace gridwarp
