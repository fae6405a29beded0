#include "gridwarp/positions.hpp"

#include <algorithm>
#include <stdexcept>
#include <type_traits>
#include <string>

namespace gridwarp {

namespace {

// Calls fn(type_tag<T>{}) for the four dtypes a grid may have.
template <class Fn>
decltype(auto) visit_grid_dtype(DType type, const char* who, Fn&& fn) {
    switch (type) {
        case DType::Float32: return fn(type_tag<float>{});
        case DType::Float64: return fn(type_tag<double>{});
        case DType::Float16: return fn(type_tag<float16>{});
        case DType::BFloat16: return fn(type_tag<bfloat16>{});
        default:
            throw std::invalid_argument(std::string(who) +
                                        ": expected a float16, bfloat16, float32 or float64 tensor, got " +
                                        std::string(dtype_name(type)));
    }
}

template <class Coord, class T>
Coord to_coordinate(T value) {
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        return static_cast<Coord>(static_cast<float>(value));
    } else {
        return static_cast<Coord>(value);
    }
}

// Rounds a double to what a tensor of element type T would store, then widens it to Coord.
template <class Coord, class T>
Coord round_through(double value) {
    if constexpr (std::is_same_v<T, double>) {
        return static_cast<Coord>(value);
    } else if constexpr (std::is_same_v<T, float>) {
        return static_cast<Coord>(static_cast<float>(value));
    } else {
        return static_cast<Coord>(static_cast<float>(T(static_cast<float>(value))));
    }
}

}  // namespace

namespace {
// A window's outer indices are shifted into a buffer on the stack: rows are asked for one at a time.
constexpr std::size_t kMaxWindowOuterAxes = 32;
}  // namespace

PositionWindow::PositionWindow(const PositionSource& whole, Shape start, Shape extent)
    : whole_(whole), start_(std::move(start)), extent_(std::move(extent)) {
    const Shape& shape = whole_.output_shape();
    if (start_.size() != shape.size() || extent_.size() != shape.size() || shape.empty()) {
        throw std::invalid_argument("a position window needs a start and extent per spatial axis (" +
                                    std::to_string(shape.size()) + "), got " + shape_to_string(start_) + " and " +
                                    shape_to_string(extent_));
    }
    if (shape.size() - 1 > kMaxWindowOuterAxes) {
        throw std::invalid_argument("a position window takes at most " + std::to_string(kMaxWindowOuterAxes + 1) +
                                    " spatial axes, got " + std::to_string(shape.size()));
    }
    bool inside = true;
    for (std::size_t k = 0; k < shape.size(); ++k) {
        inside = inside && start_[k] >= 0 && extent_[k] >= 0 && start_[k] <= shape[k] - extent_[k];
    }
    if (!inside) {
        throw std::invalid_argument("position window at " + shape_to_string(start_) + " of extent " + shape_to_string(extent_) +
                                    " does not lie in the output grid " + shape_to_string(shape));
    }
}

const std::int64_t* PositionWindow::shifted(const std::int64_t* outer, std::int64_t* scratch) const {
    for (std::size_t k = 0; k + 1 < start_.size(); ++k) scratch[k] = outer[k] + start_[k];
    return scratch;
}

void PositionWindow::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count, float* xyz) const {
    std::int64_t scratch[kMaxWindowOuterAxes];
    whole_.row(n, shifted(outer, scratch), start_.back() + start, count, xyz);
}

void PositionWindow::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count, double* xyz) const {
    std::int64_t scratch[kMaxWindowOuterAxes];
    whole_.row(n, shifted(outer, scratch), start_.back() + start, count, xyz);
}

const float* PositionWindow::stored_row(std::int64_t n, const std::int64_t* outer, std::int64_t start) const {
    std::int64_t scratch[kMaxWindowOuterAxes];
    return whole_.stored_row(n, shifted(outer, scratch), start_.back() + start);
}

bool PositionWindow::linear_row(std::int64_t n, const std::int64_t* outer, LinearRow* row) const {
    std::int64_t scratch[kMaxWindowOuterAxes];
    if (!whole_.linear_row(n, shifted(outer, scratch), row)) return false;
    row->base += start_.back();
    return true;
}

GridPositions::GridPositions(ConstTensorView grid) : grid_(std::move(grid)) {
    visit_grid_dtype(grid_.dtype, "grid", [](auto) { return 0; });
    if (grid_.rank() < 3) {
        throw std::invalid_argument("grid must have rank >= 3 (N, O1..Or, r), got shape " +
                                    shape_to_string(grid_.shape));
    }
    output_shape_.assign(grid_.shape.begin() + 1, grid_.shape.end() - 1);
    if (grid_.shape.back() != static_cast<std::int64_t>(output_shape_.size())) {
        throw std::invalid_argument("grid's last axis must equal its spatial rank " +
                                    std::to_string(output_shape_.size()) + ", got shape " +
                                    shape_to_string(grid_.shape));
    }
}

namespace {

// One row of grid points into xyz. The rank is a template argument where it is 2 or 3 (0: read it
// from `rank`), so that the component loop unrolls; a dense row of the coordinate type itself is
// one copy.
template <int FixedRank, class Coord, class T>
void copy_grid_row(const T* base, std::int64_t rank, std::int64_t count, std::int64_t point_stride,
                   std::int64_t component_stride, Coord* xyz) {
    const std::int64_t r = FixedRank > 0 ? FixedRank : rank;
    if constexpr (std::is_same_v<Coord, T>) {
        if (component_stride == 1 && point_stride == r) {
            std::copy_n(base, count * r, xyz);
            return;
        }
    }
    for (std::int64_t p = 0; p < count; ++p) {
        const T* point = base + p * point_stride;
        for (std::int64_t k = 0; k < r; ++k) xyz[p * r + k] = to_coordinate<Coord>(point[k * component_stride]);
    }
}

}  // namespace

std::int64_t GridPositions::row_offset(std::int64_t n, const std::int64_t* outer, std::int64_t start) const {
    const auto rank = static_cast<std::int64_t>(output_shape_.size());
    const auto& strides = grid_.strides;
    std::int64_t offset = n * strides[0] + start * strides[rank];
    for (std::int64_t axis = 0; axis + 1 < rank; ++axis) offset += outer[axis] * strides[axis + 1];
    return offset;
}

const float* GridPositions::stored_row(std::int64_t n, const std::int64_t* outer, std::int64_t start) const {
    const auto rank = static_cast<std::int64_t>(output_shape_.size());
    if (grid_.dtype != DType::Float32 || grid_.strides[rank + 1] != 1 || grid_.strides[rank] != rank) return nullptr;
    return grid_.typed<float>() + row_offset(n, outer, start);
}

template <class Coord>
void GridPositions::read_row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                             Coord* xyz) const {
    const auto rank = static_cast<std::int64_t>(output_shape_.size());
    const auto& strides = grid_.strides;
    const std::int64_t offset = row_offset(n, outer, start);
    const std::int64_t point_stride = strides[rank];
    const std::int64_t component_stride = strides[rank + 1];
    visit_grid_dtype(grid_.dtype, "grid", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* base = grid_.typed<T>() + offset;
        switch (rank) {
            case 2: copy_grid_row<2>(base, rank, count, point_stride, component_stride, xyz); break;
            case 3: copy_grid_row<3>(base, rank, count, point_stride, component_stride, xyz); break;
            default: copy_grid_row<0>(base, rank, count, point_stride, component_stride, xyz); break;
        }
        return 0;
    });
}

void GridPositions::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                        float* xyz) const {
    read_row(n, outer, start, count, xyz);
}

void GridPositions::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                        double* xyz) const {
    read_row(n, outer, start, count, xyz);
}

namespace {

// Calls fn with the base-coordinate function (output index -> b) of an axis of `extent` points,
// chosen once, so that loops along the axis do not branch per point.
template <class Fn>
decltype(auto) with_base_coordinate(CoordinateSpace space, bool align_corners, std::int64_t extent, Fn&& fn) {
    if (space == CoordinateSpace::Pixel) return fn([](std::int64_t i) { return static_cast<double>(i); });
    if (align_corners) {
        // A single point sits at the centre (PyTorch); ONNX's function body would give -1 or NaN.
        if (extent == 1) return fn([](std::int64_t) { return 0.0; });
        const double last = static_cast<double>(extent - 1);
        return fn([last](std::int64_t i) { return -1.0 + 2.0 * static_cast<double>(i) / last; });
    }
    const double d = static_cast<double>(extent);
    return fn([d](std::int64_t i) { return (2.0 * static_cast<double>(i) + 1.0) / d - 1.0; });
}

}  // namespace

AffinePositions::AffinePositions(std::vector<double> theta, std::int64_t batch, Shape output_shape,
                                 bool align_corners, DType coordinate_dtype, CoordinateSpace space)
    : theta_(std::move(theta)),
      batch_(batch),
      output_shape_(std::move(output_shape)),
      align_corners_(align_corners),
      coordinate_dtype_(coordinate_dtype),
      space_(space) {
    visit_grid_dtype(coordinate_dtype_, "affine positions", [](auto) { return 0; });
    const auto rank = static_cast<std::int64_t>(output_shape_.size());
    if (rank < 1) throw std::invalid_argument("affine positions need a spatial rank >= 1");
    if (batch_ < 0 || static_cast<std::int64_t>(theta_.size()) != batch_ * rank * (rank + 1)) {
        throw std::invalid_argument("theta must hold N=" + std::to_string(batch_) + " matrices of " +
                                    std::to_string(rank) + "x" + std::to_string(rank + 1) + " values, got " +
                                    std::to_string(theta_.size()) + " values");
    }
    // An outer axis longer than any grid sampled whole (a size a caller is about to refuse) has no
    // table: its rows compute their base coordinates.
    constexpr std::int64_t kMostTabulated = std::int64_t{1} << 24;
    for (std::size_t a = 0; a < output_shape_.size(); ++a) {
        const std::int64_t extent = output_shape_[a];
        std::vector<double>& axis = base_.emplace_back();
        if (a + 1 < output_shape_.size() && extent > kMostTabulated) continue;
        axis.resize(static_cast<std::size_t>(std::max<std::int64_t>(extent, 0)));
        with_base_coordinate(space_, align_corners_, extent, [&](auto base) {
            for (std::int64_t i = 0; i < extent; ++i) axis[static_cast<std::size_t>(i)] = base(i);
            return 0;
        });
    }
}

namespace {

std::vector<double> theta_values(const ConstTensorView& theta, std::int64_t rank) {
    if (theta.rank() != 3 || theta.shape[1] != rank || theta.shape[2] != rank + 1) {
        throw std::invalid_argument("theta must have shape (N, " + std::to_string(rank) + ", " +
                                    std::to_string(rank + 1) + ") for a " + std::to_string(rank) +
                                    "-D size, got shape " + shape_to_string(theta.shape));
    }
    std::vector<double> values;
    values.reserve(static_cast<std::size_t>(theta.numel()));
    visit_grid_dtype(theta.dtype, "theta", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* data = theta.typed<T>();
        for (std::int64_t n = 0; n < theta.shape[0]; ++n)
            for (std::int64_t i = 0; i < theta.shape[1]; ++i)
                for (std::int64_t j = 0; j < theta.shape[2]; ++j)
                    values.push_back(to_coordinate<double>(
                        data[n * theta.strides[0] + i * theta.strides[1] + j * theta.strides[2]]));
        return 0;
    });
    return values;
}

}  // namespace

AffinePositions::AffinePositions(const ConstTensorView& theta, Shape output_shape, bool align_corners)
    : AffinePositions(theta_values(theta, static_cast<std::int64_t>(output_shape.size())),
                      theta.rank() >= 1 ? theta.shape[0] : 0, output_shape, align_corners, theta.dtype) {}

void AffinePositions::row_terms(std::int64_t n, const std::int64_t* outer, double* slope, double* offset) const {
    const auto rank = static_cast<std::int64_t>(output_shape_.size());
    const auto columns = rank + 1;
    const double* matrix = theta_.data() + n * rank * columns;
    // offset[k] holds the outer axes' terms and the translation. outer[] is outermost-first
    // (O1..O(r-1)); base coordinate j (innermost-first) pairs with column j.
    for (std::int64_t k = 0; k < rank; ++k) {
        double sum = matrix[k * columns + rank];
        for (std::int64_t j = 1; j < rank; ++j) {
            const std::int64_t axis = rank - 1 - j;  // position of base coordinate j in outer[]
            const std::vector<double>& table = base_[static_cast<std::size_t>(axis)];
            const std::int64_t index = outer[axis];
            const double base = table.empty() ? with_base_coordinate(space_, align_corners_, output_shape_[static_cast<std::size_t>(axis)],
                                                                     [index](auto coordinate) { return coordinate(index); })
                                              : table[static_cast<std::size_t>(index)];
            sum += matrix[k * columns + j] * base;
        }
        offset[k] = sum;
        slope[k] = matrix[k * columns];
    }
}

bool AffinePositions::linear_row(std::int64_t n, const std::int64_t* outer, LinearRow* row) const {
    const auto rank = static_cast<std::int64_t>(output_shape_.size());
    if (rank > 3 || (coordinate_dtype_ != DType::Float32 && coordinate_dtype_ != DType::Float64)) return false;
    row_terms(n, outer, row->slope, row->offset);
    row->base = base_.back().data();
    return true;
}

template <class Coord>
void AffinePositions::compute_row(std::int64_t n, const std::int64_t* outer, std::int64_t start,
                                  std::int64_t count, Coord* xyz) const {
    const auto rank = static_cast<std::int64_t>(output_shape_.size());
    // Coordinate k of point p is slope[k] * base[p] + offset[k]. For ranks 2 and 3 the terms are
    // local arrays (no heap allocation per row, and the compiler knows the stores to xyz cannot
    // change them, so the loop vectorises); other ranks hold them in a vector.
    const double* base = base_.back().data() + start;
    visit_grid_dtype(coordinate_dtype_, "affine positions", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const auto fill = [&](auto fixed_rank) {
            constexpr int kRank = decltype(fixed_rank)::value;
            if constexpr (kRank > 0) {
                double slope[kRank], offset[kRank];
                row_terms(n, outer, slope, offset);
                for (std::int64_t p = 0; p < count; ++p) {
                    for (int k = 0; k < kRank; ++k) xyz[p * kRank + k] = round_through<Coord, T>(slope[k] * base[p] + offset[k]);
                }
            } else {
                std::vector<double> terms(static_cast<std::size_t>(2 * rank));
                const double* slope = terms.data();
                const double* offset = terms.data() + rank;
                row_terms(n, outer, terms.data(), terms.data() + rank);
                for (std::int64_t p = 0; p < count; ++p) {
                    for (std::int64_t k = 0; k < rank; ++k) xyz[p * rank + k] = round_through<Coord, T>(slope[k] * base[p] + offset[k]);
                }
            }
        };
        switch (rank) {
            case 2: fill(std::integral_constant<int, 2>{}); break;
            case 3: fill(std::integral_constant<int, 3>{}); break;
            default: fill(std::integral_constant<int, 0>{}); break;
        }
        return 0;
    });
}

void AffinePositions::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                          float* xyz) const {
    compute_row(n, outer, start, count, xyz);
}

void AffinePositions::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                          double* xyz) const {
    compute_row(n, outer, start, count, xyz);
}

Tensor affine_grid(const ConstTensorView& theta, const Shape& size, bool align_corners) {
    if (size.size() < 3) {
        throw std::invalid_argument("affine_grid(): size must list (N, C, D1..Dr) with r >= 1, got " +
                                    shape_to_string(size));
    }
    for (auto extent : size) {
        if (extent < 0) throw std::invalid_argument("affine_grid(): size has a negative extent: " + shape_to_string(size));
    }
    const auto rank = static_cast<std::int64_t>(size.size()) - 2;
    Shape output_shape(size.begin() + 2, size.end());
    AffinePositions positions(theta, output_shape, align_corners);
    if (positions.batch() != size[0]) {
        throw std::invalid_argument("affine_grid(): theta's N=" + std::to_string(positions.batch()) +
                                    " does not match size's N=" + std::to_string(size[0]) + " in " +
                                    shape_to_string(size));
    }
    Shape grid_shape{size[0]};
    grid_shape.insert(grid_shape.end(), output_shape.begin(), output_shape.end());
    grid_shape.push_back(rank);
    Tensor grid(theta.dtype, grid_shape);
    const std::int64_t width = output_shape.back();
    const std::int64_t rows = shape_numel(Shape(output_shape.begin(), output_shape.end() - 1));
    std::vector<double> coords(static_cast<std::size_t>(width * rank));
    std::vector<std::int64_t> outer(static_cast<std::size_t>(rank), 0);
    visit_grid_dtype(theta.dtype, "theta", [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* out = grid.data_as<T>();
        for (std::int64_t n = 0; n < size[0]; ++n) {
            for (std::int64_t r = 0; r < rows; ++r) {
                // Unflatten the row number into outer indices (outermost first).
                std::int64_t rest = r;
                for (std::int64_t axis = rank - 2; axis >= 0; --axis) {
                    outer[static_cast<std::size_t>(axis)] = rest % output_shape[static_cast<std::size_t>(axis)];
                    rest /= output_shape[static_cast<std::size_t>(axis)];
                }
                positions.row(n, outer.data(), 0, width, coords.data());
                for (std::int64_t i = 0; i < width * rank; ++i) {
                    *out++ = static_cast<T>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(coords[static_cast<std::size_t>(i)]));
                }
            }
        }
        return 0;
    });
    return grid;
}

}  // namespace gridwarp
