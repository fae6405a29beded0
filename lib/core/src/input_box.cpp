// The box of input voxels a sampling reads, and a view that places such a box in the whole input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gridwarp/grid_sample.hpp"

namespace gridwarp {

bool reads_near_positions(const SampleOptions& options) {
    const InterpolationKind& kind = interpolation_kind(options.mode);
    if (kind.gaussian) return false;
    if (options.mode == Interpolation::BSpline) return options.spline_order <= 1;
    return kind.taps > 0;
}

InputBox input_box_read(const PositionSource& positions, const Shape& input_spatial, const SampleOptions& options) {
    if (!reads_near_positions(options)) {
        throw std::invalid_argument("input_box_read: " + std::string(interpolation_name(options.mode)) +
                                    " reads beyond a fixed reach of its positions");
    }
    const auto rank = static_cast<std::size_t>(positions.spatial_rank());
    if (input_spatial.size() != rank) throw std::invalid_argument("input_box_read: the input's rank differs from the positions'");
    const Shape& shape = positions.output_shape();
    std::vector<double> low(rank, INFINITY), high(rank, -INFINITY);
    const std::int64_t width = shape.back();
    std::vector<double> xyz(static_cast<std::size_t>(width) * rank);
    std::vector<std::int64_t> outer(rank > 1 ? rank - 1 : 1, 0);
    std::int64_t rows = 1;
    for (std::size_t a = 0; a + 1 < rank; ++a) rows *= shape[a];
    const bool normalized = positions.space() == CoordinateSpace::Normalized;
    for (std::int64_t r = 0; r < rows && width > 0; ++r) {
        std::int64_t rest = r;
        for (std::size_t a = rank - 1; a-- > 0;) {
            outer[a] = rest % shape[a];
            rest /= shape[a];
        }
        // Along an affine row each coordinate is monotone: its ends bound it (before any rounding
        // of the coordinates to float32, which the voxel of margin below covers).
        LinearRow linear;
        std::int64_t points = width;
        if (width > 2 && positions.linear_row(0, outer.data(), &linear)) {
            for (std::size_t k = 0; k < rank; ++k) {
                xyz[k] = linear.slope[k] * linear.base[0] + linear.offset[k];
                xyz[rank + k] = linear.slope[k] * linear.base[width - 1] + linear.offset[k];
            }
            points = 2;
        } else {
            positions.row(0, outer.data(), 0, width, xyz.data());
        }
        for (std::int64_t p = 0; p < points; ++p) {
            for (std::size_t k = 0; k < rank; ++k) {  // x first
                const std::size_t axis = rank - 1 - k;
                double u = xyz[static_cast<std::size_t>(p) * rank + k];
                if (normalized) {
                    const auto d = static_cast<double>(input_spatial[axis]);
                    u = options.align_corners ? (u + 1) / 2 * (d - 1) : ((u + 1) * d - 1) / 2;
                }
                // The samplers read a non-finite position's stand-in at an edge: NaN and -inf at
                // the first voxel, +inf at the last.
                if (!std::isfinite(u)) u = u > 0 ? static_cast<double>(input_spatial[axis]) : -1.0;
                low[axis] = std::min(low[axis], u);
                high[axis] = std::max(high[axis], u);
            }
        }
    }
    // Taps run from floor(u) - taps/2 + 1 to floor(u) + taps/2 (nearest: the rounded u); one more
    // voxel on each side covers coordinates that float32 rounding moves across a voxel edge.
    const int taps = std::max(interpolation_kind(options.mode).taps, 2);
    const double reach = taps / 2 + 1;
    InputBox box{Shape(rank), Shape(rank)};
    for (std::size_t axis = 0; axis < rank; ++axis) {
        const std::int64_t d = input_spatial[axis];
        std::int64_t first = 0, end = d;
        if (low[axis] <= high[axis]) {
            const double lo = std::floor(low[axis]) - reach, hi = std::floor(high[axis]) + reach + 1;
            const bool beyond = lo < 0 || hi > static_cast<double>(d);
            // Reflection folds a position beyond an edge back anywhere along the axis.
            if (!(beyond && options.padding == Padding::Reflection)) {
                first = static_cast<std::int64_t>(std::clamp(lo, 0.0, static_cast<double>(d - 1)));
                end = static_cast<std::int64_t>(std::clamp(hi, static_cast<double>(first + 1), static_cast<double>(d)));
                // A position beyond an edge reads (border) or weighs by zero (zeros) the voxels at
                // that edge: they are kept, so that the box's edge is the input's there.
                const auto edge_voxels = static_cast<std::int64_t>(reach) + 1;
                if (lo < 0) end = std::max(end, std::min(d, edge_voxels));
                if (hi > static_cast<double>(d)) first = std::min(first, std::max<std::int64_t>(0, d - edge_voxels));
            }
        } else {
            end = std::min<std::int64_t>(d, 1);
        }
        // An even start: nearest's ties round half to even, which a shift by an odd count would flip.
        first -= first % 2;
        box.start[axis] = first;
        box.extent[axis] = end - first;
    }
    return box;
}

PositionsInBox::PositionsInBox(const PositionSource& whole, Shape input_spatial, bool align_corners, InputBox box)
    : whole_(whole), input_spatial_(std::move(input_spatial)), align_corners_(align_corners), box_(std::move(box)) {
    const auto rank = static_cast<std::size_t>(whole_.spatial_rank());
    if (input_spatial_.size() != rank || box_.start.size() != rank || box_.extent.size() != rank) {
        throw std::invalid_argument("PositionsInBox: the input and the box must have the positions' spatial rank");
    }
}

template <class Coord>
void PositionsInBox::place(std::int64_t count, Coord* xyz) const {
    const std::size_t rank = input_spatial_.size();
    const bool normalized = whole_.space() == CoordinateSpace::Normalized;
    for (std::size_t k = 0; k < rank; ++k) {  // x first
        const std::size_t axis = rank - 1 - k;
        const auto extent = static_cast<Coord>(input_spatial_[axis]);
        const auto start = static_cast<Coord>(box_.start[axis]);
        for (std::int64_t p = 0; p < count; ++p) {
            Coord& u = xyz[static_cast<std::size_t>(p) * rank + k];
            // unnormalize's arithmetic (sampling_policies.hpp), term for term.
            if (normalized) u = align_corners_ ? (u + Coord(1)) / Coord(2) * (extent - Coord(1)) : ((u + Coord(1)) * extent - Coord(1)) / Coord(2);
            u -= start;
        }
    }
}

void PositionsInBox::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count, float* xyz) const {
    whole_.row(n, outer, start, count, xyz);
    place(count, xyz);
}

void PositionsInBox::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count, double* xyz) const {
    whole_.row(n, outer, start, count, xyz);
    place(count, xyz);
}

}  // namespace gridwarp
