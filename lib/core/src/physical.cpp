#include "gridwarp/physical.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <stdexcept>
#include <string>

#include "gridwarp/flow.hpp"
#include "gridwarp/grid_sample.hpp"

namespace gridwarp {

namespace {

// Headers store geometry in single precision, and composing a grid's map with its inverse leaves
// rounding residue: a voxel position within this distance of a whole voxel is taken as that voxel,
// so identical grids and whole-voxel shifts reproduce voxels exactly.
constexpr double kSnapVoxels = 1e-6;

double snap(double value) {
    const double nearest = std::nearbyint(value);
    return std::fabs(value - nearest) <= kSnapVoxels ? nearest : value;
}

void check_dimension(const AffineMap& map, std::size_t dimension, const char* what) {
    if (map.dimension != dimension) {
        throw std::invalid_argument(std::string(what) + " is " + std::to_string(map.dimension) + "-D, expected " +
                                    std::to_string(dimension) + "-D");
    }
}

}  // namespace

AffineMap AffineMap::identity(std::size_t dimension) {
    AffineMap map;
    map.dimension = dimension;
    map.matrix.assign(dimension * dimension, 0.0);
    map.offset.assign(dimension, 0.0);
    for (std::size_t i = 0; i < dimension; ++i) map.matrix[i * dimension + i] = 1.0;
    return map;
}

AffineMap AffineMap::from_geometry(const std::vector<double>& spacing, const std::vector<double>& origin,
                                   const std::vector<double>& direction) {
    const std::size_t d = spacing.size();
    if (origin.size() != d || direction.size() != d * d) {
        throw std::invalid_argument("geometry needs " + std::to_string(d) + " origin values and a " + std::to_string(d) +
                                    "x" + std::to_string(d) + " direction");
    }
    AffineMap map;
    map.dimension = d;
    map.matrix.resize(d * d);
    for (std::size_t i = 0; i < d; ++i)
        for (std::size_t j = 0; j < d; ++j) map.matrix[i * d + j] = direction[i * d + j] * spacing[j];
    map.offset = origin;
    return map;
}

void AffineMap::apply_any_dimension(const double* in, double* out) const {
    for (std::size_t i = 0; i < dimension; ++i) {
        double sum = offset[i];
        for (std::size_t j = 0; j < dimension; ++j) sum += matrix[i * dimension + j] * in[j];
        out[i] = sum;
    }
}

AffineMap AffineMap::after(const AffineMap& other) const {
    check_dimension(other, dimension, "the inner affine map");
    AffineMap result;
    result.dimension = dimension;
    result.matrix.assign(dimension * dimension, 0.0);
    result.offset = offset;
    for (std::size_t i = 0; i < dimension; ++i) {
        for (std::size_t k = 0; k < dimension; ++k) {
            const double a = matrix[i * dimension + k];
            for (std::size_t j = 0; j < dimension; ++j) result.matrix[i * dimension + j] += a * other.matrix[k * dimension + j];
            result.offset[i] += a * other.offset[k];
        }
    }
    return result;
}

AffineMap AffineMap::inverse() const {
    std::vector<double> rows(dimension * (dimension + 1));
    for (std::size_t i = 0; i < dimension; ++i) {
        for (std::size_t j = 0; j < dimension; ++j) rows[i * (dimension + 1) + j] = matrix[i * dimension + j];
        rows[i * (dimension + 1) + dimension] = offset[i];
    }
    const std::vector<double> inverted = invert_affine(rows, static_cast<std::int64_t>(dimension));
    AffineMap result;
    result.dimension = dimension;
    result.matrix.resize(dimension * dimension);
    result.offset.resize(dimension);
    for (std::size_t i = 0; i < dimension; ++i) {
        for (std::size_t j = 0; j < dimension; ++j) result.matrix[i * dimension + j] = inverted[i * (dimension + 1) + j];
        result.offset[i] = inverted[i * (dimension + 1) + dimension];
    }
    return result;
}

DisplacementField::DisplacementField(ConstTensorView field, AffineMap index_to_point)
    : field_(std::move(field)), index_to_point_(std::move(index_to_point)), point_to_index_(index_to_point_.inverse()) {
    const std::size_t d = index_to_point_.dimension;
    if (field_.shape.size() != d + 1 || field_.shape.back() != static_cast<std::int64_t>(d)) {
        throw std::invalid_argument("a " + std::to_string(d) + "-D displacement field must have shape (D1..D" +
                                    std::to_string(d) + ", " + std::to_string(d) + "), got " + shape_to_string(field_.shape));
    }
    if (field_.dtype != DType::Float32 && field_.dtype != DType::Float64) {
        throw std::invalid_argument("a displacement field must hold float32 or float64 vectors, got " +
                                    std::string(dtype_name(field_.dtype)));
    }
    for (std::size_t a = 0; a < d; ++a) {
        if (field_.shape[a] < 1) throw std::invalid_argument("a displacement field must not be empty, got " + shape_to_string(field_.shape));
    }
}

bool DisplacementField::covers(const double* point) const {
    const std::size_t d = dimension();
    double index[8];
    point_to_index_.apply(point, index);
    if (bspline_order_ > 0) return inside_bspline_region(index);
    for (std::size_t a = 0; a < d; ++a) {
        if (!(index[a] >= -0.5 && index[a] < static_cast<double>(field_.shape[d - 1 - a]) - 0.5)) return false;
    }
    return true;
}

namespace {

// DisplacementField::apply with the dimension and component type known to the compiler: the loops
// over axes and corners unroll and the type test leaves the corner loop. The sums, their order and
// their rounding are the general code's, so results do not depend on which one ran.
template <std::size_t D, class Component>
void displace(const ConstTensorView& field, const AffineMap& point_to_index, const double* in, double* out) {
    double index[D];
    point_to_index.apply(in, index);  // innermost-first continuous index
    for (std::size_t a = 0; a < D; ++a) {
        const auto extent = static_cast<double>(field.shape[D - 1 - a]);
        if (!(index[a] >= -0.5 && index[a] < extent - 0.5)) {  // outside (or NaN): no displacement
            std::copy(in, in + D, out);
            return;
        }
    }
    std::int64_t low[D], high[D];
    double t[D];
    for (std::size_t a = 0; a < D; ++a) {
        const std::int64_t last = field.shape[D - 1 - a] - 1;
        const double f = std::floor(index[a]);
        t[a] = index[a] - f;
        low[a] = std::clamp<std::int64_t>(static_cast<std::int64_t>(f), 0, last) * field.strides[D - 1 - a];
        high[a] = std::clamp<std::int64_t>(static_cast<std::int64_t>(f) + 1, 0, last) * field.strides[D - 1 - a];
    }
    const Component* vectors = field.typed<Component>();
    const std::int64_t component_stride = field.strides[D];
    double displacement[D] = {};
    for (std::uint32_t corner = 0; corner < (1u << D); ++corner) {
        double weight = 1.0;
        std::int64_t offset = 0;
        for (std::size_t a = 0; a < D; ++a) {
            const bool upper = (corner >> a) & 1u;
            weight *= upper ? t[a] : 1.0 - t[a];
            offset += upper ? high[a] : low[a];
        }
        if (weight == 0.0) continue;
        for (std::size_t k = 0; k < D; ++k) {
            displacement[k] += weight * static_cast<double>(vectors[offset + static_cast<std::int64_t>(k) * component_stride]);
        }
    }
    for (std::size_t k = 0; k < D; ++k) out[k] = in[k] + displacement[k];
}

}  // namespace

void DisplacementField::apply(const double* in, double* out) const {
    const std::size_t d = dimension();
    if (bspline_order_ == 0 && d == 3) {
        return field_.dtype == DType::Float32 ? displace<3, float>(field_, point_to_index_, in, out)
                                              : displace<3, double>(field_, point_to_index_, in, out);
    }
    if (bspline_order_ == 0 && d == 2) {
        return field_.dtype == DType::Float32 ? displace<2, float>(field_, point_to_index_, in, out)
                                              : displace<2, double>(field_, point_to_index_, in, out);
    }
    double index[8];
    point_to_index_.apply(in, index);  // innermost-first continuous index
    if (bspline_order_ > 0) return apply_bspline(index, in, out);
    for (std::size_t a = 0; a < d; ++a) {
        const auto extent = static_cast<double>(field_.shape[d - 1 - a]);
        if (!(index[a] >= -0.5 && index[a] < extent - 0.5)) {  // outside (or NaN): no displacement
            std::copy(in, in + d, out);
            return;
        }
    }
    // N-linear interpolation over the 2^d corners, corner indices clamped to the field.
    std::int64_t low[8], high[8];
    double t[8];
    for (std::size_t a = 0; a < d; ++a) {
        const std::int64_t last = field_.shape[d - 1 - a] - 1;
        const double f = std::floor(index[a]);
        t[a] = index[a] - f;
        low[a] = std::clamp<std::int64_t>(static_cast<std::int64_t>(f), 0, last);
        high[a] = std::clamp<std::int64_t>(static_cast<std::int64_t>(f) + 1, 0, last);
    }
    double displacement[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (std::uint32_t corner = 0; corner < (1u << d); ++corner) {
        double weight = 1.0;
        std::int64_t offset = 0;
        for (std::size_t a = 0; a < d; ++a) {
            const bool upper = (corner >> a) & 1u;
            weight *= upper ? t[a] : 1.0 - t[a];
            offset += (upper ? high[a] : low[a]) * field_.strides[d - 1 - a];
        }
        if (weight == 0.0) continue;
        for (std::size_t k = 0; k < d; ++k) {
            const std::int64_t at = offset + static_cast<std::int64_t>(k) * field_.strides[d];
            const double component = field_.dtype == DType::Float32 ? static_cast<double>(field_.typed<float>()[at])
                                                                    : field_.typed<double>()[at];
            displacement[k] += weight * component;
        }
    }
    for (std::size_t k = 0; k < d; ++k) out[k] = in[k] + displacement[k];
}

void PointTransform::apply(const double* in, double* out) const {
    if (affine) {
        affine->apply(in, out);
    } else {
        field->apply(in, out);
    }
}

TransformChainPositions::TransformChainPositions(AffineMap output_index_to_point, std::vector<PointTransform> steps,
                                                 AffineMap point_to_input_index, Shape output_shape)
    : output_index_to_point_(std::move(output_index_to_point)),
      steps_(std::move(steps)),
      point_to_input_index_(std::move(point_to_input_index)),
      output_shape_(std::move(output_shape)) {
    const std::size_t d = output_shape_.size();
    if (d < 1 || d > 8) throw std::invalid_argument("transform chains support 1 to 8 dimensions, got " + std::to_string(d));
    check_dimension(output_index_to_point_, d, "the output grid");
    check_dimension(point_to_input_index_, d, "the input grid");
    for (const auto& step : steps_) {
        if ((step.affine == nullptr) == (step.field == nullptr)) {
            throw std::invalid_argument("a transform step must be either an affine map or a displacement field");
        }
        if (step.dimension() != d) {
            throw std::invalid_argument("a " + std::to_string(step.dimension()) + "-D transform cannot map a " +
                                        std::to_string(d) + "-D grid");
        }
    }
    if (std::none_of(steps_.begin(), steps_.end(), [](const PointTransform& s) { return s.field != nullptr; })) {
        AffineMap total = output_index_to_point_;
        for (const auto& step : steps_) total = step.affine->after(total);
        total = point_to_input_index_.after(total);
        std::vector<double> rows;
        for (std::size_t i = 0; i < d; ++i) {
            for (std::size_t j = 0; j < d; ++j) rows.push_back(snap(total.matrix[i * d + j]));
            rows.push_back(snap(total.offset[i]));
        }
        collapsed_ = std::make_unique<AffinePositions>(rows, 1, output_shape_, false, DType::Float64, CoordinateSpace::Pixel);
    }
}

template <class Coord>
void TransformChainPositions::compute_row(const std::int64_t* outer, std::int64_t start, std::int64_t count,
                                          Coord* xyz) const {
    const std::size_t d = output_shape_.size();
    double index[8], point[8], moved[8], input_index[8];
    for (std::size_t k = 1; k < d; ++k) index[k] = static_cast<double>(outer[d - 1 - k]);
    for (std::int64_t p = 0; p < count; ++p) {
        index[0] = static_cast<double>(start + p);
        output_index_to_point_.apply(index, point);
        for (const auto& step : steps_) {
            step.apply(point, moved);
            std::copy(moved, moved + d, point);
        }
        point_to_input_index_.apply(point, input_index);
        for (std::size_t k = 0; k < d; ++k) xyz[static_cast<std::size_t>(p) * d + k] = static_cast<Coord>(snap(input_index[k]));
    }
}

void TransformChainPositions::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                                  float* xyz) const {
    if (collapsed_) return collapsed_->row(n, outer, start, count, xyz);
    compute_row(outer, start, count, xyz);
}

void TransformChainPositions::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                                  double* xyz) const {
    if (collapsed_) return collapsed_->row(n, outer, start, count, xyz);
    compute_row(outer, start, count, xyz);
}

namespace {

std::size_t point_count(const std::vector<PointTransform>& steps, const std::vector<double>& points) {
    if (steps.empty()) return 0;
    const std::size_t dimension = steps.front().dimension();
    if (points.size() % dimension != 0) throw std::invalid_argument("points: not a whole number of " + std::to_string(dimension) + "-D points");
    return points.size() / dimension;
}

constexpr int kMaxInverseIterations = 1000;

// `point` (D coordinates; D = 0: `dimension`) moved through the chain, in place. With D known to the
// compiler a point is copied by three moves, where a copy of a run-time length calls memmove.
template <std::size_t D>
void apply_chain(const std::vector<PointTransform>& steps, std::size_t dimension, double* point) {
    const std::size_t d = D != 0 ? D : dimension;
    double moved[8];
    for (const PointTransform& step : steps) {
        step.apply(point, moved);
        std::copy_n(moved, d, point);
    }
}

template <std::size_t D>
void map_points_of_dimension(const std::vector<PointTransform>& steps, std::size_t dimension, std::vector<double>& points,
                             std::int64_t count, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads()) if (count > 4096)
    for (std::int64_t p = 0; p < count; ++p) apply_chain<D>(steps, dimension, points.data() + static_cast<std::size_t>(p) * dimension);
}

}  // namespace

void map_points(const std::vector<PointTransform>& steps, std::vector<double>& points, int threads) {
    const auto count = static_cast<std::int64_t>(point_count(steps, points));
    if (count == 0) return;
    const std::size_t dimension = steps.front().dimension();
    if (dimension == 3) return map_points_of_dimension<3>(steps, dimension, points, count, threads);
    if (dimension == 2) return map_points_of_dimension<2>(steps, dimension, points, count, threads);
    map_points_of_dimension<0>(steps, dimension, points, count, threads);
}

namespace {

template <class Component, std::size_t D>
void write_chain_field_values(const std::vector<PointTransform>& steps, const AffineMap& index_to_point, const Shape& start,
                              const Shape& extent, const FieldValueMaps& values, const TensorView& out, int threads) {
    const std::size_t d = D != 0 ? D : index_to_point.dimension;
    const std::int64_t columns = extent[d - 1];
    std::int64_t lines = 1;
    for (std::size_t a = 0; a + 1 < d; ++a) lines *= extent[a];
    Component* const base = static_cast<Component*>(out.data);
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads()) if (lines * columns > 4096)
    for (std::int64_t line = 0; line < lines; ++line) {
        double index[8], point[8], value[8], subtrahend[8];
        std::int64_t line_offset = 0, rest = line;
        for (std::size_t a = 1; a < d; ++a) {  // innermost-first, the innermost axis aside
            const std::int64_t at = rest % extent[d - 1 - a];
            rest /= extent[d - 1 - a];
            index[a] = static_cast<double>(start[d - 1 - a] + at);
            line_offset += at * out.strides[1 + d - a];
        }
        for (std::int64_t column = 0; column < columns; ++column) {
            index[0] = static_cast<double>(start[d - 1] + column);
            index_to_point.apply(index, point);
            values.of_point.apply(point, subtrahend);
            apply_chain<D>(steps, d, point);
            values.of_mapped.apply(point, value);
            Component* voxel = base + line_offset + column * out.strides[1 + d];
            for (std::size_t k = 0; k < d; ++k) {
                voxel[static_cast<std::int64_t>(k) * out.strides[1]] = static_cast<Component>(value[k] - subtrahend[k]);
            }
        }
    }
}

// write_field_line and jacobian_line_interior_3d work on blocks of columns: the values converted
// into doubles, the arithmetic in a function of its own (one per dimension, not one per field and
// output type), the results converted back. The compiler vectorizes each of these loops, where a
// loop mixing float and double stays scalar. Conversions of `count` elements `step` apart; the
// contiguous case is written apart, its step known.
constexpr std::int64_t kLineBlock = 64;

template <class T>
void to_doubles(const T* from, std::int64_t step, std::int64_t count, double* to) {
    if (step == 1) {
        for (std::int64_t i = 0; i < count; ++i) to[i] = static_cast<double>(from[i]);
    } else {
        for (std::int64_t i = 0; i < count; ++i) to[i] = static_cast<double>(from[i * step]);
    }
}

template <class T>
void from_doubles(const double* from, std::int64_t count, T* to, std::int64_t step) {
    if (step == 1) {
        for (std::int64_t i = 0; i < count; ++i) to[i] = static_cast<T>(from[i]);
    } else {
        for (std::int64_t i = 0; i < count; ++i) to[i * step] = static_cast<T>(from[i]);
    }
}

// value[k][i] = value0[k] + (first_column + i) * value_step[k] + sum over j of matrix[k][j] * vector[j][i].
template <std::size_t D>
[[gnu::noinline]] void field_values_of_block(const double (*vector)[kLineBlock], std::int64_t count, double first_column,
                                             const double* value0, const double* value_step, const double* matrix,
                                             double (*value)[kLineBlock]) {
    for (std::int64_t i = 0; i < count; ++i) {
        // Exactly first_column + i; a 32-bit integer converts in a vector, a 64-bit one does not before AVX-512.
        const double c = first_column + static_cast<double>(static_cast<std::int32_t>(i));
        for (std::size_t k = 0; k < D; ++k) {
            double sum = value0[k] + c * value_step[k];
            for (std::size_t j = 0; j < D; ++j) sum += matrix[k * D + j] * vector[j][i];
            value[k][i] = sum;
        }
    }
}

// One line of write_field_values_by_sampling: column c's value is value0 + c * value_step + matrix
// times its sampled vector, the vector taken as zero where the field index field0 + c * field_step
// leaves [-0.5, high). The field index is monotonic in c, so the columns inside are one run, found
// from both ends; the loops over a run have no branch.
template <std::size_t D, class Vector, class Component>
void write_field_line(const Vector* vectors, std::int64_t vector_channel, std::int64_t columns, const double* value0,
                      const double* value_step, const double* field0, const double* field_step, const double* high,
                      const double* matrix, Component* out, std::int64_t column_stride, std::int64_t component_stride) {
    const auto inside = [&](std::int64_t column) {
        const auto c = static_cast<double>(column);
        bool within = true;
        for (std::size_t a = 0; a < D; ++a) {
            const double at = field0[a] + c * field_step[a];
            within &= (at >= -0.5) & (at < high[a]);
        }
        return within;
    };
    double m[D * D], v0[D], step[D];
    std::copy_n(matrix, D * D, m);
    std::copy_n(value0, D, v0);
    std::copy_n(value_step, D, step);
    const auto write_run = [&](std::int64_t begin, std::int64_t end, bool with_vectors) {
        double vector[D][kLineBlock], value[D][kLineBlock];
        for (std::int64_t block = begin; block < end; block += kLineBlock) {
            const std::int64_t count = std::min(kLineBlock, end - block);
            for (std::size_t k = 0; k < D; ++k) {
                if (with_vectors) to_doubles(vectors + block + static_cast<std::int64_t>(k) * vector_channel, 1, count, vector[k]);
                else std::fill_n(vector[k], count, 0.0);
            }
            field_values_of_block<D>(vector, count, static_cast<double>(block), v0, step, m, value);
            for (std::size_t k = 0; k < D; ++k) {
                from_doubles(value[k], count, out + block * column_stride + static_cast<std::int64_t>(k) * component_stride, column_stride);
            }
        }
    };
    std::int64_t first = 0, last = columns;
    while (first < columns && !inside(first)) ++first;
    while (last > first && !inside(last - 1)) --last;
    write_run(0, first, false);
    write_run(first, last, true);
    write_run(last, columns, false);
}

// A chain of affine maps around one linear displacement field (ANTs' warp and affine) on a 2-D or
// 3-D grid: the field's vectors are sampled a slab of the box at a time by grid_sample, where the
// field's index is an affine function of the output index (border padding repeats the edge
// vectors within half a voxel of the field, as DisplacementField::apply does; beyond, the vector
// is zeroed after), then each voxel's value is made from its point and its vector. Returns false
// for any other chain. The vectors are interpolated in the field's own type.
template <class Component, class Vector>
bool write_field_values_by_sampling(const std::vector<PointTransform>& steps, const AffineMap& index_to_point, const Shape& start,
                                    const Shape& extent, const FieldValueMaps& values, const TensorView& out, int threads) {
    const std::size_t d = index_to_point.dimension;
    if (d != 2 && d != 3) return false;
    std::size_t field_step = steps.size();
    for (std::size_t i = 0; i < steps.size(); ++i) {
        if (steps[i].affine) continue;
        if (field_step != steps.size() || steps[i].field->bspline_order() != 0) return false;
        field_step = i;
    }
    if (field_step == steps.size()) return false;
    const DisplacementField& field = *steps[field_step].field;
    const ConstTensorView& vectors = field.vectors();
    if (vectors.dtype != dtype_of<Vector>::value) return false;

    AffineMap before_field = index_to_point;  // output index -> the point the field displaces
    for (std::size_t i = 0; i < field_step; ++i) before_field = steps[i].affine->after(before_field);
    AffineMap after_field = values.of_mapped;  // the displaced point -> the value's first term
    for (std::size_t i = steps.size(); i-- > field_step + 1;) after_field = after_field.after(*steps[i].affine);
    AffineMap to_field_index;
    try {
        to_field_index = field.index_to_point().inverse().after(before_field);
    } catch (const std::invalid_argument&) {
        return false;
    }

    // The field as a (1, d, D1..Dd) image, its components the channels.
    Shape field_shape{1, static_cast<std::int64_t>(d)}, field_strides{0, vectors.strides[d]};
    for (std::size_t a = 0; a < d; ++a) {
        field_shape.push_back(vectors.shape[a]);
        field_strides.push_back(vectors.strides[a]);
    }
    const ConstTensorView field_image(vectors.dtype, vectors.data, field_shape, field_strides);
    SampleOptions options;
    options.mode = Interpolation::Linear;
    options.padding = Padding::Border;
    options.threads = 1;  // each worker samples its own slabs

    // Slabs of whole planes (outermost axis), about 2^16 voxels each: the sampled vectors stay in cache.
    std::int64_t plane = 1;
    for (std::size_t a = 1; a < d; ++a) plane *= extent[a];
    const std::int64_t slab_planes = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / std::max<std::int64_t>(plane, 1));
    Shape slab_shape{1, static_cast<std::int64_t>(d)};
    slab_shape.insert(slab_shape.end(), extent.begin(), extent.end());
    slab_shape[2] = std::min(slab_planes, extent[0]);
    // Each thread takes whole slabs, sampled and finished on its own (no barrier per slab).
    const std::int64_t slabs = (extent[0] + slab_planes - 1) / slab_planes;
    const int workers = static_cast<int>(std::min<std::int64_t>(threads > 0 ? threads : omp_get_max_threads(), slabs));
    std::vector<Tensor> scratch;
    for (int w = 0; w < workers; ++w) scratch.emplace_back(vectors.dtype, slab_shape);
    Component* const base = static_cast<Component*>(out.data);
    // One slab: its vectors sampled into `sampled`, then its values written.
    const auto finish_slab = [&](std::int64_t slab_number, Tensor& sampled) {
        const std::int64_t first = slab_number * slab_planes;
        const std::int64_t planes = std::min(slab_planes, extent[0] - first);
        Shape window{planes};
        window.insert(window.end(), extent.begin() + 1, extent.end());
        // theta: the field index of slab index o, innermost first, o + (start + first, ...) mapped.
        std::vector<double> theta(d * (d + 1));
        for (std::size_t i = 0; i < d; ++i) {
            double offset = to_field_index.offset[i];
            for (std::size_t j = 0; j < d; ++j) {
                const double m = to_field_index.matrix[i * d + j];
                theta[i * (d + 1) + j] = m;
                // innermost-first axis j is outermost-first axis d - 1 - j of start
                offset += m * static_cast<double>(start[d - 1 - j] + (j == d - 1 ? first : 0));
            }
            theta[i * (d + 1) + d] = offset;
        }
        const AffinePositions positions(std::move(theta), 1, window, false, DType::Float64, CoordinateSpace::Pixel);
        TensorView slab = sampled.view();
        slab.shape[2] = planes;
        grid_sample(field_image, positions, slab, options);

        std::int64_t lines = planes;
        for (std::size_t a = 1; a + 1 < d; ++a) lines *= extent[a];
        const std::int64_t columns = extent[d - 1];
        const std::int64_t slab_channel = slab.strides[1];
        const auto* slab_vectors = static_cast<const Vector*>(sampled.data());
        for (std::int64_t line = 0; line < lines; ++line) {
            // Along a line every map is affine in the column: each voxel's value is
            // value0 + column * step + after_field's matrix times its vector.
            double index[3] = {0, 0, 0}, next[3];
            std::int64_t line_offset = 0, rest = line;
            for (std::size_t a = 1; a < d; ++a) {  // innermost-first, the innermost axis aside
                const std::size_t axis = d - 1 - a;  // outermost-first
                const std::int64_t size = axis == 0 ? planes : extent[axis];
                const std::int64_t at = rest % size;
                rest /= size;
                const std::int64_t whole = axis == 0 ? first + at : at;
                index[a] = static_cast<double>(start[axis] + whole);
                line_offset += whole * out.strides[2 + axis];
            }
            index[0] = static_cast<double>(start[d - 1]);
            std::copy(index, index + 3, next);
            next[0] += 1.0;
            double value0[3], value1[3], field0[3], field1[3];
            const auto value_at = [&](const double* at, double* value) {
                double moved[3], point[3], subtrahend[3];
                before_field.apply(at, moved);
                after_field.apply(moved, value);
                index_to_point.apply(at, point);
                values.of_point.apply(point, subtrahend);
                for (std::size_t k = 0; k < d; ++k) value[k] -= subtrahend[k];
            };
            value_at(index, value0);
            value_at(next, value1);
            to_field_index.apply(index, field0);
            to_field_index.apply(next, field1);
            double value_step[3], field_step_of[3], high[3];
            for (std::size_t k = 0; k < d; ++k) {
                value_step[k] = value1[k] - value0[k];
                field_step_of[k] = field1[k] - field0[k];
                high[k] = static_cast<double>(vectors.shape[d - 1 - k]) - 0.5;
            }
            const Vector* line_vectors = slab_vectors + line * columns;  // the slab is C-ordered
            Component* line_out = base + line_offset;
            if (d == 3) {
                write_field_line<3>(line_vectors, slab_channel, columns, value0, value_step, field0, field_step_of, high,
                                    after_field.matrix.data(), line_out, out.strides[1 + d], out.strides[1]);
            } else {
                write_field_line<2>(line_vectors, slab_channel, columns, value0, value_step, field0, field_step_of, high,
                                    after_field.matrix.data(), line_out, out.strides[1 + d], out.strides[1]);
            }
        }
    };
    std::exception_ptr failure;  // an exception may not leave an OpenMP region
#pragma omp parallel for schedule(dynamic) num_threads(workers)
    for (std::int64_t slab_number = 0; slab_number < slabs; ++slab_number) {
        try {
            finish_slab(slab_number, scratch[static_cast<std::size_t>(omp_get_thread_num())]);
        } catch (...) {
#pragma omp critical(gridwarp_field_values_failure)
            if (!failure) failure = std::current_exception();
        }
    }
    if (failure) std::rethrow_exception(failure);
    return true;
}

template <class Component>
void write_chain_field_values(const std::vector<PointTransform>& steps, const AffineMap& index_to_point, const Shape& start,
                              const Shape& extent, const FieldValueMaps& values, const TensorView& out, int threads) {
    const std::size_t d = index_to_point.dimension;
    if (write_field_values_by_sampling<Component, float>(steps, index_to_point, start, extent, values, out, threads) ||
        write_field_values_by_sampling<Component, double>(steps, index_to_point, start, extent, values, out, threads)) {
        return;
    }
    if (d == 3) return write_chain_field_values<Component, 3>(steps, index_to_point, start, extent, values, out, threads);
    if (d == 2) return write_chain_field_values<Component, 2>(steps, index_to_point, start, extent, values, out, threads);
    write_chain_field_values<Component, 0>(steps, index_to_point, start, extent, values, out, threads);
}

}  // namespace

void chain_field_values(const std::vector<PointTransform>& steps, const AffineMap& index_to_point, const Shape& start,
                        const Shape& extent, const FieldValueMaps& values, const TensorView& out, int threads) {
    const std::size_t d = index_to_point.dimension;
    if (d < 1 || d > 8 || start.size() != d || extent.size() != d || out.shape.size() != d + 2 || out.shape[0] != 1 ||
        out.shape[1] != static_cast<std::int64_t>(d) || values.of_mapped.dimension != d || values.of_point.dimension != d) {
        throw std::invalid_argument("chain_field_values: a (1, " + std::to_string(d) + ", extent...) output and maps of a " +
                                    std::to_string(d) + "-D chain");
    }
    for (std::size_t a = 0; a < d; ++a) {
        if (out.shape[2 + a] != extent[a]) throw std::invalid_argument("chain_field_values: the output's shape is not the box's");
    }
    for (const PointTransform& step : steps) {
        if (step.dimension() != d) throw std::invalid_argument("chain_field_values: a step of another dimension");
    }
    if (shape_numel(extent) == 0) return;
    if (out.dtype == DType::Float32) {
        write_chain_field_values<float>(steps, index_to_point, start, extent, values, out, threads);
    } else if (out.dtype == DType::Float64) {
        write_chain_field_values<double>(steps, index_to_point, start, extent, values, out, threads);
    } else {
        throw std::invalid_argument("chain_field_values: float32 or float64 output, got " + std::string(dtype_name(out.dtype)));
    }
}

InversionReport map_points_inverse(const std::vector<PointTransform>& steps, std::vector<double>& points, double tolerance, int threads) {
    InversionReport report;
    const auto count = static_cast<std::int64_t>(point_count(steps, points));
    if (count == 0) return report;
    const std::size_t dimension = steps.front().dimension();
    std::vector<AffineMap> inverses(steps.size());
    for (std::size_t k = 0; k < steps.size(); ++k) {
        if (steps[k].affine) inverses[k] = steps[k].affine->inverse();
    }
    std::vector<double> residuals(static_cast<std::size_t>(count), 0.0);
    enum Outcome : char { Converged, Unconverged, OffGrid };
    std::vector<char> outcomes(static_cast<std::size_t>(count), Converged);
#pragma omp parallel for schedule(dynamic, 1024) num_threads(threads > 0 ? threads : omp_get_max_threads()) if (count > 4096)
    for (std::int64_t p = 0; p < count; ++p) {
        double* point = points.data() + static_cast<std::size_t>(p) * dimension;
        double target[3], x[3], moved[3];
        for (std::size_t k = steps.size(); k-- > 0;) {
            if (steps[k].affine) {
                inverses[k].apply(point, moved);
                std::copy_n(moved, dimension, point);
                continue;
            }
            std::copy_n(point, dimension, target);
            std::copy_n(point, dimension, x);
            double residual = 0.0;
            bool reached = false, left_the_grid = false;
            for (int iteration = 0; iteration < kMaxInverseIterations; ++iteration) {
                left_the_grid = left_the_grid || !steps[k].field->covers(x);
                steps[k].field->apply(x, moved);  // x + d(x)
                residual = 0.0;
                for (std::size_t i = 0; i < dimension; ++i) residual += (moved[i] - target[i]) * (moved[i] - target[i]);
                residual = std::sqrt(residual);
                if (residual <= tolerance) {
                    reached = true;
                    break;
                }
                for (std::size_t i = 0; i < dimension; ++i) x[i] -= moved[i] - target[i];  // x <- y - d(x)
            }
            char& outcome = outcomes[static_cast<std::size_t>(p)];
            if (!reached && left_the_grid) {
                if (outcome == Converged) outcome = OffGrid;
                continue;  // the point stays: the field is zero off its grid
            }
            std::copy_n(x, dimension, point);
            if (!reached) outcome = Unconverged;
            if (reached) residuals[static_cast<std::size_t>(p)] = std::max(residuals[static_cast<std::size_t>(p)], residual);
        }
    }
    double sum = 0.0;
    for (std::int64_t p = 0; p < count; ++p) {
        report.max_residual = std::max(report.max_residual, residuals[static_cast<std::size_t>(p)]);
        const char outcome = outcomes[static_cast<std::size_t>(p)];
        if (outcome == Converged) sum += residuals[static_cast<std::size_t>(p)];
        if (outcome == OffGrid) ++report.off_grid;
        if (outcome == Unconverged) {
            if (report.unconverged == 0) report.first_unconverged = static_cast<std::size_t>(p);
            ++report.unconverged;
        }
    }
    const std::size_t converged = static_cast<std::size_t>(count) - report.unconverged - report.off_grid;
    report.mean_residual = converged > 0 ? sum / static_cast<double>(converged) : 0.0;
    return report;
}

std::vector<double> grid_points(const AffineMap& index_to_point, const Shape& shape) {
    const std::size_t d = shape.size();
    std::int64_t voxels = 1;
    for (const std::int64_t extent : shape) voxels *= extent;
    std::vector<double> points(static_cast<std::size_t>(voxels) * d);
    if (voxels == 0 || d == 0) return points;
    // Line by line along the innermost axis: a division per line, not per coordinate. (On one
    // thread: the callers' thread count does not reach here.)
    const std::int64_t columns = shape[d - 1];
    const std::int64_t lines = voxels / columns;
    for (std::int64_t line = 0; line < lines; ++line) {
        double index[8];
        std::int64_t rest = line;
        for (std::size_t a = 1; a < d; ++a) {  // innermost-first, the innermost axis aside
            index[a] = static_cast<double>(rest % shape[d - 1 - a]);
            rest /= shape[d - 1 - a];
        }
        double* out = points.data() + static_cast<std::size_t>(line * columns) * d;
        for (std::int64_t column = 0; column < columns; ++column) {
            index[0] = static_cast<double>(column);
            index_to_point.apply(index, out + static_cast<std::size_t>(column) * d);
        }
    }
    return points;
}

InvertedField invert_displacement_field(const DisplacementField& field, double tolerance, int threads) {
    const Shape& shape = field.vectors().shape;  // (D1..Dd, d), outermost first
    const std::vector<double> targets = grid_points(field.index_to_point(), Shape(shape.begin(), shape.end() - 1));
    std::vector<double> sources = targets;
    InvertedField inverted;
    inverted.report = map_points_inverse({PointTransform{nullptr, std::shared_ptr<const DisplacementField>(&field, [](const DisplacementField*) {})}},
                                         sources, tolerance, threads);
    auto vectors = std::make_shared<Tensor>(DType::Float64, shape);
    double* out = vectors->data_as<double>();
    for (std::size_t k = 0; k < sources.size(); ++k) out[k] = sources[k] - targets[k];
    inverted.vectors = vectors;
    inverted.field = std::make_shared<const DisplacementField>(vectors->view(), field.index_to_point());
    return inverted;
}

namespace {

double determinant(const double* m, std::size_t d) {  // row-major d x d, d <= 3
    if (d == 1) return m[0];
    if (d == 2) return m[0] * m[3] - m[1] * m[2];
    return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6]);
}

// Whether the voxels of the grid (`index_to_point`, `shape`) are the field's own voxels: each grid
// point within kSnapVoxels of the field voxel of the same index, as the sampler snaps positions.
bool on_the_fields_grid(const DisplacementField& field, const AffineMap& index_to_point, const Shape& shape) {
    const std::size_t d = shape.size();
    const Shape& vectors = field.vectors().shape;
    if (field.dimension() != d || !std::equal(shape.begin(), shape.end(), vectors.begin())) return false;
    const AffineMap grid_to_field = field.index_to_point().inverse().after(index_to_point);
    for (std::size_t i = 0; i < d; ++i) {
        double reach = std::fabs(grid_to_field.offset[i]);  // the largest miss, at a corner of the grid
        for (std::size_t j = 0; j < d; ++j) {
            const double deviation = grid_to_field.matrix[i * d + j] - (i == j ? 1.0 : 0.0);
            reach += std::fabs(deviation) * static_cast<double>(shape[d - 1 - j] - 1);
        }
        if (!(reach <= kSnapVoxels)) return false;
    }
    return true;
}

// determinant[i] of the 3 x 3 matrix whose row k is grid_step's row k plus the central differences
// (along_x[k][i + 2] - along_x[k][i]) / 2, (ahead_y - behind_y)[k][i] / 2, (ahead_z - behind_z)[k][i] / 2,
// divided by grid_determinant.
[[gnu::noinline]] void jacobian_determinants_of_block(const double (*along_x)[kLineBlock + 2], const double (*ahead_y)[kLineBlock],
                                                      const double (*behind_y)[kLineBlock], const double (*ahead_z)[kLineBlock],
                                                      const double (*behind_z)[kLineBlock], std::int64_t count, const double* grid_step,
                                                      double grid_determinant, double* determinants) {
    for (std::int64_t i = 0; i < count; ++i) {
        double m[9];
        for (std::size_t k = 0; k < 3; ++k) {
            m[k * 3 + 0] = grid_step[k * 3 + 0] + (along_x[k][i + 2] - along_x[k][i]) / 2.0;
            m[k * 3 + 1] = grid_step[k * 3 + 1] + (ahead_y[k][i] - behind_y[k][i]) / 2.0;
            m[k * 3 + 2] = grid_step[k * 3 + 2] + (ahead_z[k][i] - behind_z[k][i]) / 2.0;
        }
        determinants[i] = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6]);
    }
    for (std::int64_t i = 0; i < count; ++i) determinants[i] /= grid_determinant;
}

// One line of field_jacobian_determinant's 3-D case, the line's first and last voxels aside:
// `row[k]` is component k's line, `ahead[a][k]` and `behind[a][k]` its neighbours along axis a = 1, 2
// (a line of zeros past the edge). The same operations in the same order as the general case, on
// blocks of columns copied into doubles.
template <class Component, class Value>
void jacobian_line_interior_3d(const Component* const row[3], const Component* const ahead[3][3], const Component* const behind[3][3],
                               std::int64_t step, std::int64_t columns, const double* grid_step, double grid_determinant,
                               Value* out) {
    double along_x[3][kLineBlock + 2], ahead_y[3][kLineBlock], behind_y[3][kLineBlock], ahead_z[3][kLineBlock], behind_z[3][kLineBlock];
    double determinants[kLineBlock];
    for (std::int64_t begin = 1; begin + 1 < columns; begin += kLineBlock) {
        const std::int64_t count = std::min(kLineBlock, columns - 1 - begin), at = begin * step;
        for (std::size_t k = 0; k < 3; ++k) {
            to_doubles(row[k] + at - step, step, count + 2, along_x[k]);
            to_doubles(ahead[1][k] + at, step, count, ahead_y[k]);
            to_doubles(behind[1][k] + at, step, count, behind_y[k]);
            to_doubles(ahead[2][k] + at, step, count, ahead_z[k]);
            to_doubles(behind[2][k] + at, step, count, behind_z[k]);
        }
        jacobian_determinants_of_block(along_x, ahead_y, behind_y, ahead_z, behind_z, count, grid_step, grid_determinant, determinants);
        from_doubles(determinants, count, out + begin, 1);
    }
}

// chain_jacobian_determinant of one displacement field on its own grid: each voxel's mapped point
// is its point plus its vector, so a derivative is the grid's step plus the central difference of
// the stored vectors, read where they lie (one voxel past the edge the field displaces nothing).
template <class Component, class Value>
void field_jacobian_determinant(const ConstTensorView& vectors, const AffineMap& index_to_point, const Shape& shape,
                                double grid_determinant, Value* out, int threads) {
    const std::size_t d = shape.size();
    std::int64_t extent[3], stride[3];  // innermost-first
    for (std::size_t a = 0; a < d; ++a) {
        extent[a] = shape[d - 1 - a];
        stride[a] = vectors.strides[d - 1 - a];
    }
    const std::int64_t component_stride = vectors.strides[d];
    const Component* base = vectors.typed<Component>();
    const double* grid_step = index_to_point.matrix.data();  // d(point k) / d(index a) at [k * d + a]
    const std::int64_t columns = extent[0];
    std::int64_t lines = 1;
    for (std::size_t a = 1; a < d; ++a) lines *= extent[a];
    // Read with a line's own stride in place of a neighbour past the edge: every element zero.
    const std::vector<Component> zero_line(static_cast<std::size_t>(columns * std::max<std::int64_t>(stride[0], 1)), Component(0));
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads()) if (lines * columns > 4096)
    for (std::int64_t line = 0; line < lines; ++line) {
        std::int64_t index[3] = {0, 0, 0};
        std::int64_t line_offset = 0, rest = line;
        for (std::size_t a = 1; a < d; ++a) {
            index[a] = rest % extent[a];
            rest /= extent[a];
            line_offset += index[a] * stride[a];
        }
        const bool interior_by_lines = d == 3 && columns > 2 && stride[0] > 0;
        if (interior_by_lines) {
            const Component* row[3];
            const Component* ahead[3][3];
            const Component* behind[3][3];
            const Component* zeros = zero_line.data();
            for (std::size_t k = 0; k < 3; ++k) {
                row[k] = base + line_offset + static_cast<std::int64_t>(k) * component_stride;
                for (std::size_t a = 1; a < 3; ++a) {
                    ahead[a][k] = index[a] + 1 < extent[a] ? row[k] + stride[a] : zeros;
                    behind[a][k] = index[a] > 0 ? row[k] - stride[a] : zeros;
                }
            }
            jacobian_line_interior_3d(row, ahead, behind, stride[0], columns, grid_step, grid_determinant, out + line * columns);
        }
        for (std::int64_t column = 0; column < columns; ++column) {
            if (interior_by_lines && column == 1) column = columns - 1;
            index[0] = column;
            const std::int64_t offset = line_offset + column * stride[0];
            double by_index[9];
            for (std::size_t a = 0; a < d; ++a) {
                const bool has_ahead = index[a] + 1 < extent[a], has_behind = index[a] > 0;
                for (std::size_t k = 0; k < d; ++k) {
                    const std::int64_t component = offset + static_cast<std::int64_t>(k) * component_stride;
                    const double ahead = has_ahead ? static_cast<double>(base[component + stride[a]]) : 0.0;
                    const double behind = has_behind ? static_cast<double>(base[component - stride[a]]) : 0.0;
                    by_index[k * d + a] = grid_step[k * d + a] + (ahead - behind) / 2.0;
                }
            }
            out[line * columns + column] = static_cast<Value>(determinant(by_index, d) / grid_determinant);
        }
    }
}

}  // namespace

namespace {

template <class Value>
void write_jacobian_determinant(const std::vector<PointTransform>& steps, const AffineMap& index_to_point, const Shape& shape,
                                Value* out, int threads) {
    const std::size_t d = index_to_point.dimension;
    const std::int64_t voxels = shape_numel(shape);
    const double grid_determinant = determinant(index_to_point.matrix.data(), d);
    // A linear chain: one matrix for every voxel.
    AffineMap linear = AffineMap::identity(d);
    bool all_linear = true;
    for (const PointTransform& step : steps) {
        if (!step.affine) {
            all_linear = false;
            break;
        }
        linear = step.affine->after(linear);
    }
    if (all_linear) {
        std::fill(out, out + voxels, static_cast<Value>(determinant(linear.matrix.data(), d)));
        return;
    }
    if (steps.size() == 1 && steps.front().field && on_the_fields_grid(*steps.front().field, index_to_point, shape)) {
        const ConstTensorView& vectors = steps.front().field->vectors();
        if (vectors.dtype == DType::Float32) {
            field_jacobian_determinant<float>(vectors, index_to_point, shape, grid_determinant, out, threads);
        } else {
            field_jacobian_determinant<double>(vectors, index_to_point, shape, grid_determinant, out, threads);
        }
        return;
    }
    auto mapped = [&](const double* index, double* point) {
        double moved[3];
        index_to_point.apply(index, point);
        for (const PointTransform& step : steps) {
            step.apply(point, moved);
            std::copy_n(moved, d, point);
        }
    };
    // Every derivative differences the mapped points of two neighbouring voxels, so the chain is
    // evaluated once per voxel (and once per point one voxel past the edge), a slice of the
    // outermost axis at a time, and each slice kept while the slices beside it need it. The
    // differences are those of evaluating the chain at each neighbour, bit for bit.
    const std::size_t outer = d - 1;                    // innermost-first axis numbering
    const std::int64_t slices = shape[0];
    const std::int64_t rows = d == 3 ? shape[1] : 1;    // the slice's axis 1, when there is one
    const std::int64_t columns = d >= 2 ? shape[d - 1] : 1;
    const std::int64_t padded_rows = d == 3 ? rows + 2 : 1;
    const std::int64_t padded_columns = d >= 2 ? columns + 2 : 1;
    const auto slice_values = static_cast<std::size_t>(padded_rows * padded_columns) * d;
    auto map_slice = [&](std::int64_t slice, double* points) {
        double index[3];
        index[outer] = static_cast<double>(slice);
        for (std::int64_t row = 0; row < padded_rows; ++row) {
            if (d == 3) index[1] = static_cast<double>(row - 1);
            for (std::int64_t column = 0; column < padded_columns; ++column) {
                if (d >= 2) index[0] = static_cast<double>(column - 1);
                mapped(index, points + static_cast<std::size_t>(row * padded_columns + column) * d);
            }
        }
    };
    const int team = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel num_threads(team) if (voxels > 4096)
    {
        // Each thread takes a run of whole slices: it maps the two slices bordering its run again.
        const std::int64_t parts = omp_get_num_threads(), part = omp_get_thread_num();
        const std::int64_t first = slices * part / parts, last = slices * (part + 1) / parts;
        std::vector<double> ring(first < last ? 3 * slice_values : 0);
        auto slot = [&](std::int64_t slice) { return ring.data() + static_cast<std::size_t>((slice + 3) % 3) * slice_values; };
        if (first < last) {
            map_slice(first - 1, slot(first - 1));
            map_slice(first, slot(first));
        }
        for (std::int64_t slice = first; slice < last; ++slice) {
            map_slice(slice + 1, slot(slice + 1));
            const double* behind = slot(slice - 1);
            const double* here = slot(slice);
            const double* ahead = slot(slice + 1);
            for (std::int64_t row = 0; row < rows; ++row) {
                Value* out_row = out + (slice * rows + row) * columns;
                for (std::int64_t column = 0; column < columns; ++column) {
                    // The voxel's place in the padded slice, and its neighbours' along each axis.
                    const std::int64_t at = (d == 3 ? row + 1 : 0) * padded_columns + (d >= 2 ? column + 1 : 0);
                    const std::int64_t step[3] = {1, padded_columns, 0};
                    // Column a: d(mapped point) / d(index a), central differences one voxel either side.
                    double by_index[9];
                    for (std::size_t a = 0; a < d; ++a) {
                        const double* ahead_point = a == outer ? ahead + at * d : here + (at + step[a]) * d;
                        const double* behind_point = a == outer ? behind + at * d : here + (at - step[a]) * d;
                        for (std::size_t k = 0; k < d; ++k) by_index[k * d + a] = (ahead_point[k] - behind_point[k]) / 2.0;
                    }
                    // d(point)/d(index) = (direction * spacing): the physical Jacobian's determinant divides by its.
                    out_row[column] = static_cast<Value>(determinant(by_index, d) / grid_determinant);
                }
            }
        }
    }
}

}  // namespace

void chain_jacobian_determinant(const std::vector<PointTransform>& steps, const AffineMap& index_to_point, const Shape& shape,
                                const TensorView& out, int threads) {
    const std::size_t d = index_to_point.dimension;
    if (d < 1 || d > 3 || shape.size() != d) throw std::invalid_argument("chain_jacobian_determinant: 1-, 2- or 3-D grids");
    for (const PointTransform& step : steps) {
        if (step.dimension() != d) throw std::invalid_argument("chain_jacobian_determinant: a step of another dimension");
    }
    if (out.shape != shape || out.strides != contiguous_strides(shape)) {
        throw std::invalid_argument("chain_jacobian_determinant: a contiguous output of the grid's shape " + shape_to_string(shape));
    }
    if (determinant(index_to_point.matrix.data(), d) == 0.0) {
        throw std::invalid_argument("chain_jacobian_determinant: the grid's direction and spacing are singular");
    }
    if (out.dtype == DType::Float32) {
        write_jacobian_determinant(steps, index_to_point, shape, static_cast<float*>(out.data), threads);
    } else if (out.dtype == DType::Float64) {
        write_jacobian_determinant(steps, index_to_point, shape, static_cast<double*>(out.data), threads);
    } else {
        throw std::invalid_argument("chain_jacobian_determinant: float32 or float64 output, got " + std::string(dtype_name(out.dtype)));
    }
}

Tensor chain_jacobian_determinant(const std::vector<PointTransform>& steps, const AffineMap& index_to_point, const Shape& shape,
                                  int threads) {
    Tensor result(DType::Float64, shape);
    chain_jacobian_determinant(steps, index_to_point, shape, result.view(), threads);
    return result;
}

}  // namespace gridwarp
