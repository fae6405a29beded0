// The interpolation kinds: ONNX GridSample's three and ANTs' (ITK's) B-splines and windowed sincs.
// Each kind is one entry of interpolation_kinds(); docs/semantics.md gives their weights, support,
// boundary and prefilter.
#pragma once

#include <cstdint>
#include <span>
#include <optional>
#include <string_view>
#include <vector>

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
    Gaussian,      // ITK's GaussianInterpolateImageFunction (SampleOptions::gaussian_sigma, gaussian_alpha)
    MultiLabel,    // ITK's LabelImageGaussianInterpolateImageFunction: the label of most Gaussian weight
};

// How ITK's boundary rule (itk_boundary.hpp, docs/semantics.md) treats a kind's taps past the edge
// of an image, for the points it leaves inside.
enum class ItkBoundary {
    NeverReached,  // linear and nearest: the positions are clamped or rounded, no tap falls outside
    Mirror,        // B-splines: the image mirrored about its edge voxels' centres
    ZeroTaps,      // windowed sincs and the Gaussians: taps outside read 0
    NotInItk,      // no ITK interpolator equals it (cubic convolution): refused under the rule
};

struct InterpolationKind {
    Interpolation mode;
    std::string_view name;     // as messages, --explain and ANTs (beyond ONNX) spell it
    std::string_view aliases;  // further names accepted by parse_interpolation_choice, space-separated, lower case
    bool onnx = false;         // an ONNX GridSample mode: exact results, served by the fast paths
    bool ordered = false;      // takes an order in brackets (B-spline: 0-5, default 3)
    bool label_inner = false;  // may be GenericLabel's interpolator (weights of the samples themselves)
    bool gaussian = false;     // takes [sigma,alpha] in brackets (Gaussian, MultiLabel)
    bool keeps_values = false; // outputs only input values (nearest, MultiLabel): never low-passed first
    int taps = 0;              // read along each axis; 0: from the order or from sigma and alpha
    ItkBoundary itk_boundary = ItkBoundary::ZeroTaps;
    std::string_view summary;  // what `gridwarp help modes` says of it, after its parameters
};

// One entry per kind, in the order of the enum.
std::span<const InterpolationKind> interpolation_kinds();
const InterpolationKind& interpolation_kind(Interpolation mode);

constexpr int kMaxSplineOrder = 5;
constexpr int kDefaultSplineOrder = 3;
constexpr int kSincRadius = 3;
// ANTs' default cut-offs, in sigmas: antsApplyTransforms' Gaussian[sigma,1] and MultiLabel[sigma,4].
constexpr double kDefaultGaussianAlpha = 1.0;
constexpr double kDefaultMultiLabelAlpha = 4.0;

// A kind and, for B-splines, its order; for Gaussian and MultiLabel, sigma and alpha as written.
struct InterpolationChoice {
    Interpolation mode = Interpolation::Linear;
    int spline_order = kDefaultSplineOrder;
    std::vector<double> sigma;     // in mm, one value for every axis or one per axis x first; empty: the spacing
    std::optional<double> alpha;   // the cut-off in sigmas; unset: the kind's default
};

// A kind's name or alias in any case, with "[order]" for B-splines and ANTs' "[sigma,alpha]" for
// Gaussian and MultiLabel (sigma one number or one per axis joined by 'x', both optional):
// "BSpline[5]", "lanczos", "bilinear", "Gaussian[1.5,2]", "MultiLabel[1x1x2]". Throws
// std::invalid_argument listing the accepted names.
InterpolationChoice parse_interpolation_choice(std::string_view text);

// The ONNX attribute: linear, nearest or cubic and the aliases of opset 16, OpenVINO and PyTorch
// (bilinear, trilinear, bicubic), exactly as spelled. Throws std::invalid_argument.
Interpolation parse_interpolation(std::string_view name);

std::string_view interpolation_name(Interpolation mode);
// Taps read along each axis: 1 nearest, 2 linear, 4 cubic, order + 1 B-spline, 6 windowed sinc
// (Gaussian and MultiLabel: gaussian_taps_per_axis).
int taps_per_axis(Interpolation mode, int spline_order = kDefaultSplineOrder);
// Gaussian and MultiLabel: the most voxels a point reads along an axis where the cut-off is
// sigma * alpha pixels, ceil(2 sigma alpha) + 1. Throws std::invalid_argument unless sigma and alpha
// are positive and finite and the count is at most 2^20.
std::int64_t gaussian_taps_per_axis(double sigma_pixels, double alpha);
// B-splines of order 2 and more interpolate coefficients computed from the image first.
bool needs_prefilter(Interpolation mode, int spline_order);

// Every point reads taps_per_axis^rank input values; more than 2^20 per point is refused
// (std::invalid_argument): cubic beyond 10 spatial dimensions, linear beyond 20.
void check_taps_per_point(Interpolation mode, int spline_order, std::int64_t spatial_rank);

}  // namespace gridwarp
