#include "gridwarp/interpolation.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>

namespace gridwarp {

namespace {

constexpr std::array kKinds{
    InterpolationKind{.mode = Interpolation::Linear, .name = "linear", .aliases = "bilinear trilinear", .onnx = true,
                      .label_inner = true, .taps = 2, .itk_boundary = ItkBoundary::NeverReached,
                      .summary = "ONNX GridSample's mode, exact."},
    InterpolationKind{.mode = Interpolation::Nearest, .name = "nearest", .aliases = "nearestneighbor nearestneighbour",
                      .onnx = true, .label_inner = true, .keeps_values = true, .taps = 1,
                      .itk_boundary = ItkBoundary::NeverReached,
                      .summary = "ONNX GridSample's mode, exact. Outputs input values only (label maps)."},
    InterpolationKind{.mode = Interpolation::Cubic, .name = "cubic", .aliases = "bicubic", .onnx = true, .label_inner = true,
                      .taps = 4, .itk_boundary = ItkBoundary::NotInItk, .summary = "ONNX GridSample's mode, exact."},
    InterpolationKind{.mode = Interpolation::BSpline, .name = "BSpline", .aliases = "spline", .ordered = true,
                      .itk_boundary = ItkBoundary::Mirror,
                      .summary = "B-spline of order 0-5, default 3 (2 and up prefilter the image)."},
    InterpolationKind{.mode = Interpolation::LanczosSinc, .name = "LanczosWindowedSinc", .aliases = "lanczos",
                      .label_inner = true, .taps = 2 * kSincRadius, .summary = ""},
    InterpolationKind{.mode = Interpolation::HammingSinc, .name = "HammingWindowedSinc", .aliases = "hamming",
                      .label_inner = true, .taps = 2 * kSincRadius, .summary = ""},
    InterpolationKind{.mode = Interpolation::CosineSinc, .name = "CosineWindowedSinc", .aliases = "cosine",
                      .label_inner = true, .taps = 2 * kSincRadius, .summary = ""},
    InterpolationKind{.mode = Interpolation::WelchSinc, .name = "WelchWindowedSinc", .aliases = "welch",
                      .label_inner = true, .taps = 2 * kSincRadius, .summary = ""},
    InterpolationKind{.mode = Interpolation::BlackmanSinc, .name = "BlackmanWindowedSinc", .aliases = "blackman",
                      .label_inner = true, .taps = 2 * kSincRadius, .summary = ""},
    InterpolationKind{.mode = Interpolation::Gaussian, .name = "Gaussian", .aliases = "", .gaussian = true,
                      .summary = "sigma in mm (one, or one per axis joined by x; default the spacing), alpha the cut-off in sigmas."},
    InterpolationKind{.mode = Interpolation::MultiLabel, .name = "MultiLabel", .aliases = "", .gaussian = true,
                      .keeps_values = true,
                      .summary = "sigma in mm (one, or one per axis joined by x; default the spacing), alpha the cut-off in "
                                 "sigmas. Outputs input values only (label maps)."},
};

std::string lower(std::string_view text) {
    std::string result(text);
    std::transform(result.begin(), result.end(), result.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return result;
}

bool kind_is_named(const InterpolationKind& kind, std::string_view name) {
    if (lower(kind.name) == name) return true;
    std::string_view rest = kind.aliases;
    while (!rest.empty()) {
        const std::size_t end = std::min(rest.find(' '), rest.size());
        if (rest.substr(0, end) == name) return true;
        rest.remove_prefix(std::min(end + 1, rest.size()));
    }
    return false;
}

std::string accepted_names() {
    std::string names;
    for (const auto& kind : kKinds) {
        names += (names.empty() ? "" : ", ") + std::string(kind.name) + (kind.ordered ? "[0-5]" : "") +
                 (kind.gaussian ? "[sigma,alpha]" : "");
    }
    return names;
}

// A positive finite number, all of `text`.
double parse_positive(std::string_view whole, std::string_view text, const char* what) {
    double value = 0.0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value <= 0.0) {
        throw std::invalid_argument("'" + std::string(whole) + "': " + what + " must be a positive number, got '" + std::string(text) + "'");
    }
    return value;
}

// ANTs' "[sigma,alpha]": sigma one number or several joined by 'x' (one per axis), either may be
// empty or left out.
void parse_sigma_alpha(std::string_view whole, std::string_view bracket, InterpolationChoice& choice) {
    const std::size_t comma = bracket.find(',');
    const std::string_view sigma = bracket.substr(0, comma);
    if (comma != std::string_view::npos) {
        const std::string_view alpha = bracket.substr(comma + 1);
        if (alpha.find(',') != std::string_view::npos) {
            throw std::invalid_argument("'" + std::string(whole) + "': expected [sigma,alpha]");
        }
        if (!alpha.empty()) choice.alpha = parse_positive(whole, alpha, "alpha");
    }
    std::string_view rest = sigma;
    while (!rest.empty()) {
        const std::size_t end = std::min(rest.find('x'), rest.size());
        choice.sigma.push_back(parse_positive(whole, rest.substr(0, end), "sigma"));
        if (end == rest.size()) break;
        rest.remove_prefix(end + 1);
        if (rest.empty()) throw std::invalid_argument("'" + std::string(whole) + "': sigma must be a positive number, got ''");
    }
}

}  // namespace

std::span<const InterpolationKind> interpolation_kinds() { return kKinds; }

const InterpolationKind& interpolation_kind(Interpolation mode) {
    for (const auto& kind : kKinds) {
        if (kind.mode == mode) return kind;
    }
    return kKinds.front();
}

InterpolationChoice parse_interpolation_choice(std::string_view text) {
    std::string name = lower(text);
    std::string bracket;
    bool has_bracket = false;
    if (const std::size_t open = name.find('['); open != std::string::npos) {
        if (name.back() != ']') {
            throw std::invalid_argument("'" + std::string(text) + "': parameters are written in brackets, as in BSpline[3] or Gaussian[1,1]");
        }
        bracket = name.substr(open + 1, name.size() - open - 2);
        has_bracket = true;
        name.resize(open);
    }
    for (const auto& kind : kKinds) {
        if (!kind_is_named(kind, name)) continue;
        InterpolationChoice choice{kind.mode, kDefaultSplineOrder, {}, {}};
        if (!has_bracket) return choice;
        if (kind.gaussian) {
            parse_sigma_alpha(text, bracket, choice);
            return choice;
        }
        if (!kind.ordered) throw std::invalid_argument("'" + std::string(text) + "': " + std::string(kind.name) + " takes no order");
        const auto [end, error] = std::from_chars(bracket.data(), bracket.data() + bracket.size(), choice.spline_order);
        if (error != std::errc() || end != bracket.data() + bracket.size() || choice.spline_order < 0 ||
            choice.spline_order > kMaxSplineOrder) {
            throw std::invalid_argument("'" + std::string(text) + "': the B-spline order must be 0 to 5");
        }
        return choice;
    }
    throw std::invalid_argument("unknown interpolation mode '" + std::string(text) + "': expected " + accepted_names() +
                                " (any case; aliases bilinear, trilinear, bicubic, NearestNeighbor, lanczos, hamming, "
                                "cosine, welch, blackman)");
}

Interpolation parse_interpolation(std::string_view name) {
    if (name == "linear" || name == "bilinear" || name == "trilinear") return Interpolation::Linear;
    if (name == "nearest") return Interpolation::Nearest;
    if (name == "cubic" || name == "bicubic") return Interpolation::Cubic;
    throw std::invalid_argument("unknown interpolation mode '" + std::string(name) +
                                "': expected linear, nearest or cubic (or bilinear, trilinear, bicubic)");
}

std::string_view interpolation_name(Interpolation mode) { return interpolation_kind(mode).name; }

int taps_per_axis(Interpolation mode, int spline_order) {
    switch (mode) {
        case Interpolation::BSpline: return spline_order + 1;
        case Interpolation::Gaussian: return static_cast<int>(gaussian_taps_per_axis(1.0, kDefaultGaussianAlpha));
        case Interpolation::MultiLabel: return static_cast<int>(gaussian_taps_per_axis(1.0, kDefaultMultiLabelAlpha));
        default: return interpolation_kind(mode).taps;
    }
}

// A point's region along an axis runs from floor(x - cut) to ceil(x + cut) - 1 (x = u + 1/2): fewer
// than 2 cut + 2 voxels.
std::int64_t gaussian_taps_per_axis(double sigma_pixels, double alpha) {
    if (!(std::isfinite(sigma_pixels) && sigma_pixels > 0.0 && std::isfinite(alpha) && alpha > 0.0)) {
        throw std::invalid_argument("Gaussian interpolation needs a positive sigma and alpha, got sigma " + std::to_string(sigma_pixels) +
                                    " pixels, alpha " + std::to_string(alpha));
    }
    const double taps = std::ceil(2.0 * sigma_pixels * alpha) + 1.0;
    if (taps > double(1 << 20)) {
        throw std::invalid_argument("Gaussian interpolation with sigma " + std::to_string(sigma_pixels) + " pixels and alpha " +
                                    std::to_string(alpha) + " reads " + std::to_string(static_cast<std::int64_t>(std::min(taps, 1e18))) +
                                    " values along an axis, more than the 2^20 supported");
    }
    return static_cast<std::int64_t>(taps);
}

bool needs_prefilter(Interpolation mode, int spline_order) { return mode == Interpolation::BSpline && spline_order >= 2; }

// The taps of a point are planned in a table (offsets and weights): past 2^20 per point the table
// alone would take gigabytes per chunk of points.
void check_taps_per_point(Interpolation mode, int spline_order, std::int64_t spatial_rank) {
    const std::int64_t per_axis = taps_per_axis(mode, spline_order);
    std::int64_t taps_per_point = 1;
    for (std::int64_t axis = 0; axis < spatial_rank && taps_per_point <= (std::int64_t{1} << 20); ++axis) taps_per_point *= per_axis;
    if (taps_per_point > (std::int64_t{1} << 20)) {
        throw std::invalid_argument(std::string(interpolation_name(mode)) + " interpolation in " + std::to_string(spatial_rank) +
                                    " spatial dimensions reads " + std::to_string(per_axis) + "^" + std::to_string(spatial_rank) +
                                    " values per point, more than the 2^20 supported");
    }
}

}  // namespace gridwarp
