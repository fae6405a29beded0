// A sampling mode's text (the CLI's --mode, the Python package's mode=) turned into SampleOptions.
#include "gridwarp/grid_sample.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>

namespace gridwarp {

SamplingMode parse_sampling_mode(std::string_view text) {
    SamplingMode mode{std::string(text), {}, false};
    std::string kind(text);
    std::string lowered = kind;
    std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::string kGenericLabel = "genericlabel";
    if (lowered.rfind(kGenericLabel, 0) == 0) {
        std::string inner = kind.substr(kGenericLabel.size());
        if (inner.empty()) {
            inner = "linear";
        } else if (inner.size() >= 2 && inner.front() == '[' && inner.back() == ']') {
            inner = inner.substr(1, inner.size() - 2);
        } else {
            throw std::invalid_argument("'" + kind + "': expected GenericLabel or GenericLabel[Linear], [NearestNeighbor], [Cubic] or [a windowed sinc]");
        }
        mode.generic_label = true;
        kind = inner;
    }
    mode.choice = parse_interpolation_choice(kind);
    if (mode.generic_label && !interpolation_kind(mode.choice.mode).label_inner) {
        throw std::invalid_argument("GenericLabel[" + kind + "]: GenericLabel takes Linear, NearestNeighbor, Cubic or a windowed sinc");
    }
    return mode;
}

void apply_sampling_mode(SampleOptions& options, const SamplingMode& mode) {
    options.generic_label = mode.generic_label;
    options.mode = mode.choice.mode;
    options.spline_order = mode.choice.spline_order;
    options.gaussian_alpha = mode.choice.alpha;
}

void resolve_gaussian_sigma(SampleOptions& options, const SamplingMode& mode, const std::vector<double>& spacing,
                            std::int64_t spatial_rank) {
    if (!interpolation_kind(options.mode).gaussian) return;
    const std::vector<double>& sigma = mode.choice.sigma;
    if (sigma.empty()) return;
    const auto rank = static_cast<std::size_t>(std::max<std::int64_t>(spatial_rank, 0));
    if (sigma.size() != 1 && sigma.size() != rank) {
        throw std::invalid_argument("'" + mode.text + "': " + std::to_string(sigma.size()) + " sigmas for an input of " +
                                    std::to_string(rank) + " spatial axes; give one, or one per axis (x first)");
    }
    options.gaussian_sigma.assign(rank, 0.0);
    for (std::size_t k = 0; k < rank; ++k) {  // k: x first; the library's axes run outermost first
        options.gaussian_sigma[rank - 1 - k] = sigma[sigma.size() == 1 ? 0 : k] / (k < spacing.size() ? spacing[k] : 1.0);
    }
}

}  // namespace gridwarp
