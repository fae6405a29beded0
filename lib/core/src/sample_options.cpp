// A sampling mode's text (the CLI's --mode, the Python package's mode=) turned into SampleOptions.
#include "gridwarp/grid_sample.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>

namespace gridwarp {

void set_sampling_mode(SampleOptions& options, std::string_view text) {
    std::string kind(text);
    std::string lowered = kind;
    std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::string kGenericLabel = "genericlabel";
    bool generic_label = false;
    if (lowered.rfind(kGenericLabel, 0) == 0) {
        std::string inner = kind.substr(kGenericLabel.size());
        if (inner.empty()) {
            inner = "linear";
        } else if (inner.size() >= 2 && inner.front() == '[' && inner.back() == ']') {
            inner = inner.substr(1, inner.size() - 2);
        } else {
            throw std::invalid_argument("'" + kind + "': expected GenericLabel or GenericLabel[Linear], [NearestNeighbor], [Cubic] or [a windowed sinc]");
        }
        generic_label = true;
        kind = inner;
    }
    const InterpolationChoice choice = parse_interpolation_choice(kind);
    if (generic_label && !interpolation_kind(choice.mode).label_inner) {
        throw std::invalid_argument("GenericLabel[" + kind + "]: GenericLabel takes Linear, NearestNeighbor, Cubic or a windowed sinc");
    }
    options.generic_label = generic_label;
    options.mode = choice.mode;
    options.spline_order = choice.spline_order;
    options.gaussian_alpha = choice.alpha;
}

void set_gaussian_sigma(SampleOptions& options, std::string_view text, const std::vector<double>& spacing,
                        std::int64_t spatial_rank) {
    if (!interpolation_kind(options.mode).gaussian) return;
    const InterpolationChoice choice = parse_interpolation_choice(text);
    if (choice.sigma.empty()) return;
    const auto rank = static_cast<std::size_t>(std::max<std::int64_t>(spatial_rank, 0));
    if (choice.sigma.size() != 1 && choice.sigma.size() != rank) {
        throw std::invalid_argument("'" + std::string(text) + "': " + std::to_string(choice.sigma.size()) + " sigmas for an input of " +
                                    std::to_string(rank) + " spatial axes; give one, or one per axis (x first)");
    }
    options.gaussian_sigma.assign(rank, 0.0);
    for (std::size_t k = 0; k < rank; ++k) {  // k: x first; the library's axes run outermost first
        const double sigma = choice.sigma[choice.sigma.size() == 1 ? 0 : k];
        options.gaussian_sigma[rank - 1 - k] = sigma / (k < spacing.size() ? spacing[k] : 1.0);
    }
}

}  // namespace gridwarp
