// The interpolation kinds: ONNX GridSample's three and ANTs' (ITK's) B-splines and windowed sincs.
// Each kind is one entry of interpolation_kinds(); docs/semantics.md gives their weights, support,
// boundary and prefilter.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace gridwarp {

enum class Interpolation {
    Linear,
    Nearest,
    Cubic,
    BSpline,       // order 0-5 (SampleOptions::spline_order), ITK's BSplineInterpolateImageFunction
    LanczosSinc,   // the windowed sincs of radius 3, ITK's WindowedSincInterpolateImageFunction
    HammingSinc,
    CosineSinc,
    WelchSinc,
    BlackmanSinc,
};

struct InterpolationKind {
    Interpolation mode;
    std::string_view name;     // as messages, --explain and ANTs (beyond ONNX) spell it
    std::string_view aliases;  // further names accepted by parse_interpolation_choice, space-separated, lower case
    bool onnx;                 // an ONNX GridSample mode: exact results, served by the fast paths
    bool ordered;              // takes an order in brackets (B-spline: 0-5, default 3)
    bool label_inner;          // may be GenericLabel's interpolator (weights of the samples themselves)
};

// One entry per kind, in the order of the enum.
std::span<const InterpolationKind> interpolation_kinds();
const InterpolationKind& interpolation_kind(Interpolation mode);

constexpr int kMaxSplineOrder = 5;
constexpr int kDefaultSplineOrder = 3;
constexpr int kSincRadius = 3;

// A kind and, for B-splines, its order.
struct InterpolationChoice {
    Interpolation mode = Interpolation::Linear;
    int spline_order = kDefaultSplineOrder;
};

// A kind's name or alias in any case, with "[order]" for B-splines: "BSpline[5]", "lanczos",
// "bilinear". Throws std::invalid_argument listing the accepted names.
InterpolationChoice parse_interpolation_choice(std::string_view text);

// The ONNX attribute: linear, nearest or cubic and the aliases of opset 16, OpenVINO and PyTorch
// (bilinear, trilinear, bicubic), exactly as spelled. Throws std::invalid_argument.
Interpolation parse_interpolation(std::string_view name);

std::string_view interpolation_name(Interpolation mode);
// Taps read along each axis: 1 nearest, 2 linear, 4 cubic, order + 1 B-spline, 6 windowed sinc.
int taps_per_axis(Interpolation mode, int spline_order = kDefaultSplineOrder);
// B-splines of order 2 and more interpolate coefficients computed from the image first.
bool needs_prefilter(Interpolation mode, int spline_order);

// Every point reads taps_per_axis^rank input values; more than 2^20 per point is refused
// (std::invalid_argument): cubic beyond 10 spatial dimensions, linear beyond 20.
void check_taps_per_point(Interpolation mode, int spline_order, std::int64_t spatial_rank);

}  // namespace gridwarp
