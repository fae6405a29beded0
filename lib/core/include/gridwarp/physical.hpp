// Sample positions through physical space: an output voxel's index becomes a physical point (the
// reference grid), a chain of point transforms moves it (affine maps and displacement fields, in
// ITK's order), and the moving image's geometry turns the result into a continuous voxel index.
// This is what `gridwarp resample` samples with; see docs/resample.md.
#pragma once

#include <memory>
#include <vector>

#include "gridwarp/positions.hpp"

namespace gridwarp {

// An affine map of points, p' = matrix * p + offset, in `dimension` dimensions.
struct AffineMap {
    std::size_t dimension = 0;
    std::vector<double> matrix;  // dimension x dimension, row-major
    std::vector<double> offset;  // dimension

    static AffineMap identity(std::size_t dimension);
    // index -> point for a grid with this geometry: p = origin + direction * diag(spacing) * index.
    static AffineMap from_geometry(const std::vector<double>& spacing, const std::vector<double>& origin,
                                   const std::vector<double>& direction);

    // Inline for 3-D: every voxel of a 3-D field command passes here, several times.
    void apply(const double* in, double* out) const {
        if (dimension != 3) return apply_any_dimension(in, out);
        const double* m = matrix.data();
        const double* b = offset.data();
        const double x = in[0], y = in[1], z = in[2];
        out[0] = b[0] + m[0] * x + m[1] * y + m[2] * z;
        out[1] = b[1] + m[3] * x + m[4] * y + m[5] * z;
        out[2] = b[2] + m[6] * x + m[7] * y + m[8] * z;
    }
    void apply_any_dimension(const double* in, double* out) const;
    // this(other(p)).
    AffineMap after(const AffineMap& other) const;
    // Throws std::invalid_argument when the matrix is singular.
    AffineMap inverse() const;
};

// A dense displacement field in physical units with its own geometry, as ITK's
// DisplacementFieldTransform uses it: p' = p + d(p), with d interpolated linearly at p's continuous
// index, edge values repeated within half a voxel of the field, and zero displacement beyond.
//
// The same vectors may instead be B-spline coefficients, as ITK's BSplineTransform (and elastix's)
// uses them: d(p) = sum over the (order + 1)^r grid points around p of the tensor-product B-spline
// weights times their vectors, and zero displacement wherever that support would leave the grid
// (ITK's valid region: continuous index in [(order - 1) / 2, size - 1 - (order - 1) / 2)).
class DisplacementField {
public:
    // field: (D1..Dr, r) vectors, innermost-first components, of float32 or float64, any strides;
    // not copied. index_to_point: the field's geometry.
    DisplacementField(ConstTensorView field, AffineMap index_to_point);
    // B-spline coefficients of `order` (1 to 3) on the grid `index_to_point`, shaped as above.
    static DisplacementField bspline(ConstTensorView coefficients, AffineMap index_to_point, int order);

    std::size_t dimension() const { return index_to_point_.dimension; }
    void apply(const double* in, double* out) const;
    // Whether `point` is where the field displaces at all: within half a voxel of a linear field,
    // inside a B-spline's valid region.
    bool covers(const double* point) const;
    const ConstTensorView& vectors() const { return field_; }
    const AffineMap& index_to_point() const { return index_to_point_; }
    int bspline_order() const { return bspline_order_; }  // 0: linear between vectors

private:
    void apply_bspline(const double* index, const double* in, double* out) const;
    bool inside_bspline_region(const double* index) const;

    ConstTensorView field_;
    AffineMap index_to_point_;
    AffineMap point_to_index_;
    int bspline_order_ = 0;
};

// One step of a transform chain.
struct PointTransform {
    std::shared_ptr<const AffineMap> affine;             // either this ...
    std::shared_ptr<const DisplacementField> field;      // ... or this
    void apply(const double* in, double* out) const;
    std::size_t dimension() const { return affine ? affine->dimension : field->dimension(); }
};

// The points of every voxel of a grid (`shape` outermost first) under `index_to_point`, in C order:
// voxels x dimension values, x first.
std::vector<double> grid_points(const AffineMap& index_to_point, const Shape& shape);

// Maps `points` (N x dimension values, x first, physical) through `steps` in the order they act, in place.
void map_points(const std::vector<PointTransform>& steps, std::vector<double>& points, int threads = 0);

// What a field file stores at a grid voxel's point p for a chain: of_mapped(chain(p)) - of_point(p).
// ITK's displacements take both as the identity; positions (MRtrix3, SPM) take of_point as zero;
// another package's frame (RAS, FSL's scaled voxels) folds into the maps.
struct FieldValueMaps {
    AffineMap of_mapped;
    AffineMap of_point;
};

// The chain's field values (FieldValueMaps) at the voxels of a box of a grid (`index_to_point`;
// `start` and `extent` outermost first) into `out`, a (1, dimension, extent...) view of float32 or
// float64 values with any strides (io::WindowSampler's). Rows are shared among `threads`.
void chain_field_values(const std::vector<PointTransform>& steps, const AffineMap& index_to_point, const Shape& start,
                        const Shape& extent, const FieldValueMaps& values, const TensorView& out, int threads = 0);

// How far an inverted chain missed: the largest |chain(x) - y| of the points that converged, the
// points whose fixed-point iteration did not reach the tolerance inside a field (it folds there),
// and those whose iteration left a field's grid: no point of the field reaches them, and, the field
// being zero outside, they stay where they are (ITK's inverse filter likewise zeroes its edge).
struct InversionReport {
    double max_residual = 0.0;
    double mean_residual = 0.0;  // over the points that converged
    std::size_t unconverged = 0;
    std::size_t first_unconverged = 0;  // its index, when unconverged > 0
    std::size_t off_grid = 0;
};
// The inverse of the chain at `points`, in place: the steps undone last to first, an affine map by
// its inverse, a displacement field (y = x + d(x)) by the fixed-point iteration x <- y - d(x) per
// point, as ITK's InvertDisplacementFieldImageFilter iterates, until |x + d(x) - y| <= tolerance (mm).
// Throws std::invalid_argument for a singular affine step.
InversionReport map_points_inverse(const std::vector<PointTransform>& steps, std::vector<double>& points, double tolerance = 1e-6,
                                   int threads = 0);

// The inverse of a displacement field on the field's own grid: at each voxel's point y the vector
// x - y, where x + d(x) = y (map_points_inverse at every voxel). `vectors` are float64, of the
// field's shape; the report says how far the inverse missed and where it did not converge.
struct InvertedField {
    std::shared_ptr<const Tensor> vectors;
    std::shared_ptr<const DisplacementField> field;  // over `vectors`, with the field's geometry
    InversionReport report;
};
InvertedField invert_displacement_field(const DisplacementField& field, double tolerance = 1e-6, int threads = 0);

// The voxels where a displacement field folds: det(I + grad d) <= 0, the gradient of its vectors by
// central differences between neighbouring voxels (one-sided at the edges), in physical units.
std::size_t count_folded_voxels(const DisplacementField& field, int threads = 0);

// The determinant of the chain's spatial Jacobian at every voxel of a grid (`shape` outermost first,
// its voxels' points given by `index_to_point`): each derivative by central differences of the
// mapped points one voxel either side (the chain is evaluated one voxel past the grid's edge, not
// differenced one-sidedly), turned into physical units through the grid's direction and spacing.
// A linear chain gives det(A) everywhere. Float64, of `shape`.
Tensor chain_jacobian_determinant(const std::vector<PointTransform>& steps, const AffineMap& index_to_point, const Shape& shape,
                                  int threads = 0);
// The same into `out`: float32 or float64, contiguous, of `shape` (an output's own pixels).
void chain_jacobian_determinant(const std::vector<PointTransform>& steps, const AffineMap& index_to_point, const Shape& shape,
                                const TensorView& out, int threads = 0);

// Positions in the input's pixel space: for output index x,
//   input_index = point_to_input_index( steps[last]( ... steps[0]( output_index_to_point(x) )))
// `steps` are listed in the order they act (antsApplyTransforms' -t list reversed). When every step
// is affine, the chain collapses into one affine map at construction and rows are evaluated as such.
class TransformChainPositions final : public PositionSource {
public:
    TransformChainPositions(AffineMap output_index_to_point, std::vector<PointTransform> steps,
                            AffineMap point_to_input_index, Shape output_shape);

    std::int64_t batch() const override { return 1; }
    const Shape& output_shape() const override { return output_shape_; }
    DType coordinate_dtype() const override { return DType::Float64; }
    CoordinateSpace space() const override { return CoordinateSpace::Pixel; }
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             float* xyz) const override;
    void row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
             double* xyz) const override;

    // The collapsed map's rows, when the chain is one affine map: the sampler then computes the
    // positions where it needs them (the values row() writes) instead of reading them from a buffer.
    bool linear_row(std::int64_t n, const std::int64_t* outer, LinearRow* row) const override {
        return collapsed_ != nullptr && collapsed_->linear_row(n, outer, row);
    }

    // True when the chain reduced to one affine map (no displacement field).
    bool is_affine() const { return collapsed_ != nullptr; }

private:
    template <class Coord>
    void compute_row(const std::int64_t* outer, std::int64_t start, std::int64_t count, Coord* xyz) const;

    AffineMap output_index_to_point_;
    std::vector<PointTransform> steps_;
    AffineMap point_to_input_index_;
    Shape output_shape_;
    std::unique_ptr<AffinePositions> collapsed_;
};

}  // namespace gridwarp
