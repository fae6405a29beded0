#include "gridwarp/physical.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "gridwarp/flow.hpp"

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

void AffineMap::apply(const double* in, double* out) const {
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

void DisplacementField::apply(const double* in, double* out) const {
    const std::size_t d = dimension();
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

}  // namespace

void map_points(const std::vector<PointTransform>& steps, std::vector<double>& points, int threads) {
    const auto count = static_cast<std::int64_t>(point_count(steps, points));
    if (count == 0) return;
    const std::size_t dimension = steps.front().dimension();
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads()) if (count > 4096)
    for (std::int64_t p = 0; p < count; ++p) {
        double* point = points.data() + static_cast<std::size_t>(p) * dimension;
        double moved[3];
        for (const PointTransform& step : steps) {
            step.apply(point, moved);
            std::copy_n(moved, dimension, point);
        }
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
    for (std::int64_t v = 0; v < voxels; ++v) {
        double index[8];
        std::int64_t rest = v;
        for (std::size_t a = 0; a < d; ++a) {  // innermost-first
            index[a] = static_cast<double>(rest % shape[d - 1 - a]);
            rest /= shape[d - 1 - a];
        }
        index_to_point.apply(index, points.data() + static_cast<std::size_t>(v) * d);
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

}  // namespace

Tensor chain_jacobian_determinant(const std::vector<PointTransform>& steps, const AffineMap& index_to_point, const Shape& shape,
                                  int threads) {
    const std::size_t d = index_to_point.dimension;
    if (d < 1 || d > 3 || shape.size() != d) throw std::invalid_argument("chain_jacobian_determinant: 1-, 2- or 3-D grids");
    for (const PointTransform& step : steps) {
        if (step.dimension() != d) throw std::invalid_argument("chain_jacobian_determinant: a step of another dimension");
    }
    Tensor result(DType::Float64, shape);
    double* out = result.data_as<double>();
    const std::int64_t voxels = result.numel();
    const double grid_determinant = determinant(index_to_point.matrix.data(), d);
    if (grid_determinant == 0.0) throw std::invalid_argument("chain_jacobian_determinant: the grid's direction and spacing are singular");
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
        std::fill(out, out + voxels, determinant(linear.matrix.data(), d));
        return result;
    }
    auto mapped = [&](const double* index, double* point) {
        double moved[3];
        index_to_point.apply(index, point);
        for (const PointTransform& step : steps) {
            step.apply(point, moved);
            std::copy_n(moved, d, point);
        }
    };
#pragma omp parallel for schedule(dynamic, 256) num_threads(threads > 0 ? threads : omp_get_max_threads()) if (voxels > 4096)
    for (std::int64_t v = 0; v < voxels; ++v) {
        double index[3];
        std::int64_t rest = v;
        for (std::size_t a = 0; a < d; ++a) {  // innermost-first
            index[a] = static_cast<double>(rest % shape[d - 1 - a]);
            rest /= shape[d - 1 - a];
        }
        // Column a: d(mapped point) / d(index a), central differences one voxel either side.
        double by_index[9];
        for (std::size_t a = 0; a < d; ++a) {
            double ahead[3], behind[3], at[3];
            std::copy_n(index, d, at);
            at[a] = index[a] + 1.0;
            mapped(at, ahead);
            at[a] = index[a] - 1.0;
            mapped(at, behind);
            for (std::size_t k = 0; k < d; ++k) by_index[k * d + a] = (ahead[k] - behind[k]) / 2.0;
        }
        // d(point)/d(index) = (direction * spacing): the physical Jacobian's determinant divides by its.
        out[v] = determinant(by_index, d) / grid_determinant;
    }
    return result;
}

}  // namespace gridwarp
