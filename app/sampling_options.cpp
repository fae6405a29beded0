// --mode, --padding, --antialias and the rest of the sampling options, turned into library options.
#include "sampling_options.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "gridwarp/antialias.hpp"
#include "gridwarp/itk_boundary.hpp"
#include "suggestions.hpp"

namespace gridwarp::cli {

CLI::Validator mode_check(SamplingFlags& flags) {
    return CLI::Validator(
        [&flags](const std::string& text) -> std::string {
            try {
                flags.parsed_mode = parse_sampling_mode(text);
                return "";
            } catch (const std::invalid_argument& e) {
                std::vector<std::string> names{"GenericLabel"};
                for (const InterpolationKind& kind : interpolation_kinds()) {
                    names.emplace_back(kind.name);
                    for (std::size_t at = 0; at < kind.aliases.size();) {
                        const std::size_t end = std::min(kind.aliases.find(' ', at), kind.aliases.size());
                        names.emplace_back(kind.aliases.substr(at, end - at));
                        at = end + 1;
                    }
                }
                const std::string word = text.substr(0, text.find('['));
                const std::string hint = did_you_mean(word, names);
                return hint.empty() ? std::string(e.what()) : "unknown interpolation mode '" + text + "'" + hint;
            }
        },
        "MODE");
}

CLI::Validator padding_check(bool accepts_itk) {
    return CLI::Validator(
        [accepts_itk](const std::string& text) -> std::string {
            std::vector<std::string> names{"zeros", "border", "reflection"};
            if (accepts_itk) names.emplace_back("itk");
            if (std::find(names.begin(), names.end(), text) != names.end()) return "";
            std::string list;
            for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
            return "unknown padding '" + text + "'" + did_you_mean(text, names) + ": expected " + list;
        },
        "PADDING");
}

void add_sampling_options(CLI::App& command, SamplingFlags& flags) {
    command.add_option("--mode", flags.mode,
                       "Interpolation: linear, nearest, cubic, BSpline[0-5], LanczosWindowedSinc (and the other sincs), "
                       "Gaussian[sigma,alpha]; for label maps GenericLabel[kind], MultiLabel. All: gridwarp help modes")
        ->capture_default_str()
        ->check(mode_check(flags));
    command.add_option("--padding", flags.padding,
                       "Outside the input: zeros, border or reflection; resample also takes itk (ITK's boundary rule)")
        ->capture_default_str()
        ->check(padding_check(true));
    command.add_flag("--align-corners", flags.align_corners,
                     "-1 and 1 are the centres of the corner pixels (default: their outer edges)");
    command.add_option("--fill", flags.fill, "Value read outside the input under zeros padding (default 0)");
    command.add_option("--max-taps", flags.max_taps,
                       "Gaussian and MultiLabel: most input values read in all (output values x taps per point, which "
                       "grow with sigma and alpha); 0: no limit")
        ->default_str("2^34");
    command.add_flag("--explain", flags.explain,
                     "Print what would be read, the mapping, the sampling and the output grid; write nothing");
}

void check_sampling_work(const SamplingFlags& flags, const SampleOptions& options, const ConstTensorView& input,
                         const Shape& output_spatial) {
    if (!interpolation_kind(options.mode).gaussian || flags.max_taps == 0 || input.rank() < 2) return;
    const std::uint64_t taps = taps_in_all(options, input.shape, output_spatial);
    if (taps > flags.max_taps) {
        throw std::invalid_argument("--mode " + flags.parsed_mode.text + " reads " + std::to_string(taps_per_point(options, input.rank() - 2)) +
                                    " values per output value, " + std::to_string(taps) + " in all: more than --max-taps " +
                                    std::to_string(flags.max_taps) + "; lower sigma or alpha, or raise --max-taps (0: no limit)");
    }
}

bool itk_padding(const SamplingFlags& flags) { return flags.padding == "itk"; }

void add_antialias_option(CLI::App& command, SamplingFlags& flags, const std::string& by_default) {
    flags.antialias = by_default;
    command.add_option("--antialias", flags.antialias,
                       "auto or on: low-pass the input along the axes the map shrinks before sampling (never for nearest "
                       "and label modes); off: sample the input as it is")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str()
        ->each([&flags](const std::string&) { flags.antialias_given = true; });
}

namespace {

// Label modes, nearest and types without a blend must keep input values: never filtered.
bool keeps_input_values(const SampleOptions& options, DType pixels) {
    return options.generic_label || interpolation_kind(options.mode).keeps_values ||
           (options.mode == Interpolation::BSpline && options.spline_order == 0) || pixels == DType::Bool || pixels == DType::String;
}

// Off by the command's default: one info line where the map shrinks an axis 2x or more, which
// aliases visibly, naming the flag that filters.
void note_unfiltered_shrink(const SampleOptions& options, const PositionSource& positions, const Shape& input_spatial, DType pixels) {
    if (keeps_input_values(options, pixels)) return;
    const std::vector<double> factors = shrink_factors(positions, input_spatial, options.align_corners);
    double largest = 0.0;
    for (std::size_t axis = 0; axis < factors.size(); ++axis) {
        if (input_spatial[axis] >= 2) largest = std::max(largest, factors[axis]);
    }
    if (largest >= 2.0) {
        spdlog::info("the map shrinks the input {:.3g}x without a low-pass, as antsApplyTransforms and OpenCV sample; "
                     "--antialias on filters it first", largest);
    }
}

}  // namespace

AntialiasPlan plan_antialias(const SamplingFlags& flags, const SampleOptions& options, const PositionSource& positions,
                             const Shape& input_spatial, DType pixels) {
    AntialiasPlan plan;
    if (flags.antialias == "off") {
        plan.explanation = flags.antialias_given ? "off" : "off (the default here; --antialias on filters where the map shrinks)";
        if (!flags.antialias_given) note_unfiltered_shrink(options, positions, input_spatial, pixels);
        return plan;
    }
    if (itk_padding(flags) && flags.antialias == "auto") {
        plan.explanation = "off: --padding itk reproduces antsApplyTransforms, which does not filter (--antialias on would)";
        return plan;
    }
    // Labels and nearest values must stay input values; a blend of them means nothing.
    const bool label_like = keeps_input_values(options, pixels);
    if (label_like) {
        if (flags.antialias == "on") {
            throw std::invalid_argument("--antialias on: " + describe_sampling(options) +
                                        " keeps input values, which a low-pass would blend; use --antialias auto or off");
        }
        plan.explanation = "none: " + std::string(pixels == DType::Bool || pixels == DType::String ? "this type" : "this mode") +
                           " keeps input values";
        return plan;
    }
    plan.factors = shrink_factors(positions, input_spatial, options.align_corners);
    plan.filters = any_axis_shrunk(plan.factors, input_spatial);
    plan.explanation = describe_antialias(plan.factors, input_spatial);
    return plan;
}

ConstTensorView input_to_sample(const ConstTensorView& input, const AntialiasPlan& plan, const SampleOptions& options, bool volumes_apart,
                                const std::filesystem::path& file, const io::MemoryBudget& budget, Tensor& storage) {
    const auto values = static_cast<std::uint64_t>(input.numel());
    const DType sampled_type = plan.filters ? lowpass_dtype(input.dtype) : input.dtype;
    const std::uint64_t copied_values = volumes_apart && input.rank() >= 2 && input.shape[1] > 0 ? values / static_cast<std::uint64_t>(input.shape[1]) : values;
    const std::uint64_t scratch = grid_sample_scratch_bytes(sampled_type, copied_values, 0, options);
    if (scratch != 0) io::check_memory_budget(file, "the B-spline coefficient copy", scratch, 1, budget);
    if (!plan.filters) return input;
    io::check_memory_budget(file, "the anti-aliasing copy (none with --antialias off)", values, dtype_size(sampled_type), budget);
    spdlog::debug("anti-aliasing: {}", plan.explanation);
    storage = lowpass_for_shrink(input, plan.factors, options.threads);
    return storage.view();
}

void set_gaussian_sigma(SampleOptions& options, const SamplingFlags& flags, const std::vector<double>& spacing,
                        std::int64_t spatial_rank) {
    try {
        resolve_gaussian_sigma(options, flags.parsed_mode, spacing, spatial_rank);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("--mode: ") + e.what());
    }
}

SampleOptions to_sample_options(const SamplingFlags& flags, const CommonOptions& common, bool accepts_itk_padding) {
    SampleOptions options;
    apply_sampling_mode(options, flags.parsed_mode);
    if (itk_padding(flags)) {
        if (!accepts_itk_padding) {
            throw std::invalid_argument("--padding itk: only resample applies ITK's boundary rule; use zeros, border or reflection here");
        }
        // The rule is applied to the positions (ItkBoundaryPositions); the sampler's options make
        // the taps past the edge read as ITK's boundary condition for the kind does.
        try {
            apply_itk_boundary(options);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(std::string("--padding itk: ") + e.what());
        }
    } else {
        try {
            options.padding = parse_padding(flags.padding);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(std::string("--padding: ") + e.what() + (accepts_itk_padding ? ", or itk" : ""));
        }
    }
    options.align_corners = options.align_corners || flags.align_corners;
    options.fill = flags.fill;
    options.threads = common.threads;
    return options;
}

std::string describe_sampling(const SampleOptions& options) { return describe_sampling(options, padding_name(options.padding)); }

std::string describe_sampling(const SampleOptions& options, std::string_view padding) {
    std::ostringstream out;
    if (options.generic_label) {
        out << "GenericLabel[" << interpolation_name(options.mode) << "]";
    } else {
        out << interpolation_name(options.mode);
        if (interpolation_kind(options.mode).ordered) out << "[" << options.spline_order << "]";
        if (interpolation_kind(options.mode).gaussian) {
            out << "[sigma ";
            if (options.gaussian_sigma.empty()) {
                out << "1";
            } else {
                for (std::size_t k = options.gaussian_sigma.size(); k-- > 0;) out << options.gaussian_sigma[k] << (k > 0 ? "x" : "");
            }
            out << " pixels (x first), alpha "
                << options.gaussian_alpha.value_or(options.mode == Interpolation::Gaussian ? kDefaultGaussianAlpha : kDefaultMultiLabelAlpha)
                << "]";
        }
    }
    out << ", padding " << padding << ", align_corners " << (options.align_corners ? 1 : 0)
        << ", fill " << options.fill;
    return out.str();
}

}  // namespace gridwarp::cli
