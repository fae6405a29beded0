#include "gridwarp/itk_boundary.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gridwarp {

namespace {

// itk::Math::RoundHalfIntegerUp as ITK 5.2 computes it on x86-64 (itkMathDetail.h,
// RoundHalfIntegerUp_64): round 2u + 0.5 half to even, then halve towards minus infinity. For
// |u| < 2^50 this is floor(u + 0.5) computed without the rounding that u + 0.5 itself can suffer.
double round_half_up_as_itk(double u) {
    const double twice = std::nearbyint(2 * u + 0.5);
    return std::floor(twice * 0.5) + 0.0;  // + 0.0: -0 becomes +0
}

// ITK's rule on `count` points of `rank` coordinates (Rank: the same, fixed at compile time so
// the per-coordinate loops unroll; 0 where known only at run time).
template <std::size_t Rank>
void apply_rule(double* xyz, std::int64_t count, std::size_t rank, const double* upper, const double* last, Interpolation mode) {
    if constexpr (Rank > 0) rank = Rank;
    const bool round = mode == Interpolation::Nearest;
    const bool clamp = mode == Interpolation::Linear;
    for (std::int64_t p = 0; p < count; ++p) {
        double* u = xyz + static_cast<std::size_t>(p) * rank;
        // Without short-circuits: points near the edge would make every one a mispredicted branch.
        bool inside = true;
        for (std::size_t k = 0; k < rank; ++k) inside &= (u[k] >= -0.5) & (u[k] < upper[k]);  // NaN: outside
        if (!inside) {
            std::fill(u, u + rank, std::numeric_limits<double>::quiet_NaN());
        } else if (round) {
            for (std::size_t k = 0; k < rank; ++k) u[k] = round_half_up_as_itk(u[k]);
        } else if (clamp) {
            for (std::size_t k = 0; k < rank; ++k) u[k] = std::clamp(u[k], 0.0, last[k]);
        }
    }
}

void check_kind_in_itk(Interpolation mode) {
    if (interpolation_kind(mode).itk_boundary == ItkBoundary::NotInItk) {
        throw std::invalid_argument("ITK's boundary rule has no " + std::string(interpolation_name(mode)) +
                                    " convolution: ITK's cubic is a B-spline interpolator (BSplineInterpolateImageFunction); use BSpline[3]");
    }
}

}  // namespace

void apply_itk_boundary(SampleOptions& options) {
    check_kind_in_itk(options.mode);
    options.padding = Padding::Zeros;
    switch (interpolation_kind(options.mode).itk_boundary) {
        case ItkBoundary::Mirror:
            options.padding = Padding::Reflection;
            options.align_corners = true;
            break;
        case ItkBoundary::ZeroTaps: options.outside_tap_value = 0.0; break;
        case ItkBoundary::NeverReached:
        case ItkBoundary::NotInItk: break;
    }
}

ItkBoundaryPositions::ItkBoundaryPositions(const PositionSource& source, Shape input_shape, Interpolation mode)
    : source_(source), input_shape_(std::move(input_shape)), mode_(mode) {
    check_kind_in_itk(mode);
    if (source.space() != CoordinateSpace::Pixel) {
        throw std::invalid_argument("ITK's boundary rule needs pixel-space positions");
    }
    if (static_cast<std::int64_t>(input_shape_.size()) != source.spatial_rank()) {
        throw std::invalid_argument("ITK's boundary rule: an input of spatial shape " + shape_to_string(input_shape_) +
                                    " for positions of rank " + std::to_string(source.spatial_rank()));
    }
    // Coordinate k indexes axis rank-1-k (innermost first). ITK's IsInsideBuffer takes
    // [start - 0.5, end + 0.5) per axis (itkImageFunction.h and .hxx).
    const std::size_t rank = input_shape_.size();
    for (std::size_t k = 0; k < rank; ++k) {
        const auto extent = static_cast<double>(input_shape_[rank - 1 - k]);
        upper_.push_back(extent - 0.5);
        last_.push_back(extent - 1);
    }
}

void ItkBoundaryPositions::apply(double* xyz, std::int64_t count) const {
    const std::size_t rank = input_shape_.size();
    switch (rank) {
        case 2: apply_rule<2>(xyz, count, rank, upper_.data(), last_.data(), mode_); break;
        case 3: apply_rule<3>(xyz, count, rank, upper_.data(), last_.data(), mode_); break;
        default: apply_rule<0>(xyz, count, rank, upper_.data(), last_.data(), mode_); break;
    }
}

void ItkBoundaryPositions::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                               double* xyz) const {
    source_.row(n, outer, start, count, xyz);
    apply(xyz, count);
}

void ItkBoundaryPositions::row(std::int64_t n, const std::int64_t* outer, std::int64_t start, std::int64_t count,
                               float* xyz) const {
    // The rule decides in double, before the positions are rounded to float.
    const auto values = static_cast<std::size_t>(count) * input_shape_.size();
    std::vector<double> wide(values);
    source_.row(n, outer, start, count, wide.data());
    apply(wide.data(), count);
    for (std::size_t i = 0; i < values; ++i) xyz[i] = static_cast<float>(wide[i]);
}

}  // namespace gridwarp
