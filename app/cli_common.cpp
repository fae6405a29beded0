#include "cli_common.hpp"
#include "suggestions.hpp"

#include <algorithm>
#include <cctype>
#include <spdlog/spdlog.h>

#include "gridwarp/antialias.hpp"
#include "gridwarp/itk_boundary.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/file_identity.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <type_traits>
#include <stdexcept>

namespace gridwarp::cli {

void add_common_options(CLI::App& command, CommonOptions& options) {
    command.add_flag("-v,--verbose", options.verbose, "Report what is read, computed and written");
    command.add_flag("-q,--quiet", options.quiet, "Print errors only");
    command.add_option("--threads", options.threads, "Worker threads (default: every core)")
        ->check(CLI::Range(0, 4096));
    command.add_flag("--replace-special-output", options.replace_special_output,
                     "Replace an output path that is a symbolic link, device or FIFO by a regular file (refused otherwise)");
}

void group_options(CLI::App& command) {
    struct Group {
        const char* name;
        std::initializer_list<const char*> options;  // long names (or the short one where there is none)
    };
    static const Group kGroups[] = {
        {"Input and output", {"--input", "--output", "--reference", "--manifest", "--report", "--output-type", "--output-data-type",
                              "--dtype", "--replace-special-output"}},
        {"Sampling", {"--mode", "--interpolation", "--padding", "--align-corners", "--fill", "--default-value", "--antialias",
                      "--max-taps"}},
        {"Reading", {"--nifti-geometry", "--keep-orientation", "--allow-outside-data-files"}},
        {"Output format", {"--compression-level", "--quality"}},
        {"Resources", {"--threads", "--max-memory", "--max-voxels"}},
        {"Messages", {"--verbose", "--quiet", "--explain"}},
    };
    const std::string name = command.get_name();
    const char* own = name == "info" || name == "batch" || name == "help" ? "Options" : "Transform and grid";
    for (CLI::Option* option : command.get_options()) {
        if (option == command.get_help_ptr()) continue;  // alone at the top, under "Options"
        const std::vector<std::string>& long_names = option->get_lnames();
        const std::string long_name = long_names.empty() ? "" : "--" + long_names.front();
        const char* group = own;
        for (const Group& candidate : kGroups) {
            for (const char* listed : candidate.options) {
                if (long_name == listed) group = candidate.name;
            }
        }
        option->group(group);
    }
}

void apply_common_options(const CommonOptions& options) {
    io::replace_special_outputs(options.replace_special_output);
    if (options.quiet) {
        spdlog::set_level(spdlog::level::err);
    } else if (options.verbose) {
        spdlog::set_level(spdlog::level::debug);
    } else {
        spdlog::set_level(spdlog::level::info);
    }
}

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
        throw std::invalid_argument("--mode " + flags.mode + " reads " + std::to_string(taps_per_point(options, input.rank() - 2)) +
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

void add_volume_options(CLI::App& command, VolumeFlags& flags, bool writes) {
    command.add_option("--nifti-geometry", flags.nifti_geometry,
                       "NIfTI voxel-to-world rule: standard (sform, else qform, else pixdim: nibabel, FSL, SPM, MRtrix3) "
                       "or itk (ITK 5.2, as antsApplyTransforms reads it)")
        ->capture_default_str()
        ->check(CLI::IsMember({"standard", "itk"}));
    add_memory_options(command, flags.memory);
    command.add_flag("--allow-outside-data-files", flags.allow_outside_data_files,
                     "Let a detached header (.nhdr, .mhd, a NIfTI pair's half) bring along data files outside its own folder");
    command.add_flag("--keep-orientation", flags.keep_orientation,
                     "Read an image's stored pixels as they are, not turned by its EXIF orientation as viewers show them");
    if (writes) {
        command.add_option("--compression-level", flags.compression_level,
                           "gzip level for .nii.gz outputs: 0 (stored) to 12 (smallest); default 4, within 1 % of zlib's 6 "
                           "(1 where a trial block shows that 4 buys less than 0.5 %: noise-like data). PNG outputs: "
                           "0 to 9, default 4")
            ->check(CLI::Range(0, 12));
        command.add_option("--quality", flags.quality, "JPEG and WebP outputs: 1 (smallest) to 100 (best); default 95 for JPEG, "
                                                       "lossless for WebP")
            ->check(CLI::Range(1, 100));
    }
}

void add_memory_options(CLI::App& command, MemoryFlags& flags) {
    command.add_option("--max-memory", flags.max_memory,
                       "Most bytes one buffer may take when a file or this command line declares its size rather than "
                       "proves it (compressed voxels, encoded images, outputs): a byte count or 512M, 4G (powers of "
                       "1024); 0: no limit")
        ->check(CLI::Validator(
            [](const std::string& text) {
                // A "-1" would wrap to 2^64 - 1 bytes, silently no limit.
                return text.find('-') == std::string::npos ? std::string() : "expected a byte count, got " + text;
            },
            ""))
        ->transform(CLI::AsSizeValue(false).description(""))
        ->type_name("BYTES")
        ->default_str("2G")
        ->each([&flags](const std::string&) { flags.max_memory_given = true; });
    command.add_option("--max-voxels", flags.max_voxels,
                       "Deprecated: most values (voxels x channels) instead of bytes; alone, it turns --max-memory off")
        ->each([&flags](const std::string&) { flags.max_voxels_given = true; });
}

io::MemoryBudget to_memory_budget(const MemoryFlags& flags) {
    io::MemoryBudget budget;
    budget.max_bytes = flags.max_voxels_given && !flags.max_memory_given ? 0 : flags.max_memory;
    budget.max_values = flags.max_voxels_given ? flags.max_voxels : 0;
    return budget;
}

void check_output_size(const std::filesystem::path& output, const std::string& origin, const std::vector<std::int64_t>& extents,
                       std::uint64_t per_point, std::uint64_t value_bytes, const io::MemoryBudget& budget) {
    for (const auto extent : extents) {
        if (extent < 1) throw std::invalid_argument(origin + ": expected positive sizes, got " + std::to_string(extent));
    }
    check_output_memory(output, origin, extents, per_point, value_bytes, budget);
}

void check_output_memory(const std::filesystem::path& output, const std::string& origin, const std::vector<std::int64_t>& extents,
                         std::uint64_t per_point, std::uint64_t value_bytes, const io::MemoryBudget& budget) {
    // Counted wide and saturated: twenty-digit sizes must reach the budget's message, not wrap.
    unsigned __int128 values = per_point;
    for (const auto extent : extents) {
        values = std::min<unsigned __int128>(values * static_cast<std::uint64_t>(std::max<std::int64_t>(extent, 0)), UINT64_MAX);
    }
    io::check_memory_budget(output, origin + ": the output", static_cast<std::uint64_t>(values), value_bytes, budget);
}

io::ReadOptions to_read_options(const VolumeFlags& flags, const CommonOptions& common) {
    io::ReadOptions options;
    options.threads = common.threads;
    options.nifti_geometry = io::parse_nifti_geometry_rule(flags.nifti_geometry);
    options.memory = to_memory_budget(flags.memory);
    options.allow_outside_data_files = flags.allow_outside_data_files;
    options.keep_orientation = flags.keep_orientation;
    return options;
}

io::WriteOptions to_write_options(const VolumeFlags& flags, const CommonOptions& common) {
    io::WriteOptions options;
    options.compression_level = flags.compression_level;
    options.quality = flags.quality;
    options.threads = common.threads;
    return options;
}

int original_stderr() {
    // Above 2, and not inherited by programs the process may start.
    static const int descriptor = [] {
        const int copy = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
        return copy >= 0 ? copy : 2;
    }();
    return descriptor;
}

void write_to_original_stderr(std::string_view text) {
    const int descriptor = original_stderr();
    while (!text.empty()) {
        const ssize_t n = ::write(descriptor, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

CommandProgress::CommandProgress(const std::string& command, const CommonOptions& options)
    : command_(command), active_(!options.quiet && ::isatty(original_stderr())), start_(std::chrono::steady_clock::now()) {
    if (const char* after = std::getenv("GRIDWARP_PROGRESS_AFTER_MS"); after && *after) delay_ = std::chrono::milliseconds(std::atoi(after));
    if (active_) terminal_ = original_stderr();
    if (terminal_ >= 0) thread_ = std::thread([this] { run(); });
}

CommandProgress::~CommandProgress() { finish(); }

void CommandProgress::finish() {
    if (!active_) return;
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (drawn_) write_to_terminal("\r\033[K");  // the line goes; the command's own messages follow
    active_ = false;
    terminal_ = -1;
}

void CommandProgress::phase(const char* name, int index, int count) {
    if (!active_) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    phase_ = name;
    index_ = index;
    count_ = std::max(1, count);
    if (std::chrono::steady_clock::now() - start_ >= delay_) draw_locked();
}

void CommandProgress::draw_locked() {
    constexpr int kWidth = 20;
    const int filled = kWidth * index_ / count_;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    char line[160];
    std::snprintf(line, sizeof line, "\rgridwarp %s: [%s%s] %s (%d/%d)  %.1f s ", command_.c_str(),
                  std::string(static_cast<std::size_t>(filled), '#').c_str(), std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(),
                  phase_.c_str(), index_ + 1, count_, seconds);
    write_to_terminal(line);
    drawn_ = true;
}

void CommandProgress::write_to_terminal(const std::string& text) const {
    if (terminal_ >= 0) write_to_original_stderr(text);
}

void CommandProgress::run() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (wake_.wait_for(lock, delay_, [this] { return stop_; })) return;
    while (!stop_) {
        draw_locked();
        wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; });
    }
}

namespace {

// Channels first .. first + count - 1 of a (N, C, ...) view, as a (N, count, ...) view of the same elements.
template <class Pointer>
BasicTensorView<Pointer> channel_range(const BasicTensorView<Pointer>& view, std::int64_t first, std::int64_t count) {
    using Byte = std::conditional_t<std::is_const_v<std::remove_pointer_t<Pointer>>, const std::uint8_t, std::uint8_t>;
    BasicTensorView<Pointer> result = view;
    result.data = static_cast<Byte*>(view.data) + first * view.strides[1] * static_cast<std::int64_t>(dtype_size(view.dtype));
    result.shape[1] = count;
    return result;
}

// Samples with `sample` and writes, as write_sampled does, logging "wrote FILE (...)".
void write_windows(const std::filesystem::path& file, io::Image description, const io::WriteOptions& write_options, int threads,
                   const io::WindowSampler& sample, CommandProgress* progress) {
    // (An output written a block at a time is sampled and written together: "sampling" to the end.)
    if (progress) progress->phase("sampling", 1, 3);
    const std::string summary = std::string(io::file_kind_name(description.kind)) + " " + std::string(dtype_name(description.dtype())) +
                                ", size " + image_size_text(description.spatial);
    io::write_sampled(file, std::move(description), write_options, threads, sample, [&] {
        if (progress) progress->phase("writing", 2, 3);
    });
    if (progress) progress->finish();
    spdlog::info("wrote {} ({})", file.string(), summary);
}

}  // namespace

void sample_and_write(const std::filesystem::path& file, io::Image description, const io::WriteOptions& write_options,
                      const ConstTensorView& input, const PositionSource& positions, const SampleOptions& options,
                      CommandProgress* progress) {
    const auto sample = [&](const Shape& start, const Shape& extent, std::int64_t first_channel, const TensorView& pixels, int threads) {
        SampleOptions window_options = options;
        window_options.threads = threads;
        const PositionWindow window(positions, start, extent);
        const ConstTensorView channels = channel_range(input, first_channel, pixels.shape[1]);
        if (pixels.dtype == input.dtype) {
            grid_sample(channels, window, pixels, window_options);
            return;
        }
        const Tensor sampled = grid_sample(channels, window, window_options);
        const Tensor converted = convert_to(sampled.view(), pixels.dtype);
        copy_elements(converted.view(), pixels);
    };
    write_windows(file, std::move(description), write_options, options.threads, sample, progress);
}

void shrink_and_write(const std::filesystem::path& file, io::Image description, const io::WriteOptions& write_options,
                      const ConstTensorView& input, const AxisAlignedMap& map, const std::vector<double>& factors,
                      const SampleOptions& options, CommandProgress* progress) {
    spdlog::debug("anti-aliasing on the output grid: {}", describe_antialias(factors, Shape(input.shape.begin() + 2, input.shape.end())));
    const auto sample = [&](const Shape& start, const Shape&, std::int64_t first_channel, const TensorView& pixels, int threads) {
        SampleOptions window_options = options;
        window_options.threads = threads;
        const ConstTensorView channels = channel_range(input, first_channel, pixels.shape[1]);
        if (pixels.dtype == input.dtype) {
            shrink_onto_grid(channels, map, factors, window_options, start, pixels);
            return;
        }
        Shape shape = pixels.shape;
        Tensor reduced(input.dtype, shape);
        shrink_onto_grid(channels, map, factors, window_options, start, reduced.view());
        copy_elements(convert_to(reduced.view(), pixels.dtype).view(), pixels);
    };
    write_windows(file, std::move(description), write_options, options.threads, sample, progress);
}

void sample_series_and_write(const std::filesystem::path& file, io::Image description, const io::WriteOptions& write_options,
                             const ConstTensorView& input, DType sample_type,
                             const std::vector<const PositionSource*>& volume_positions, const SampleOptions& options,
                             CommandProgress* progress) {
    const std::int64_t volumes = input.shape[1];
    if (volume_positions.size() != 1 && static_cast<std::int64_t>(volume_positions.size()) != volumes) {
        throw std::logic_error("sample_series_and_write: one position source, or one per volume");
    }
    if (progress) progress->phase("sampling", 1, 3);
    const auto sample = [&](const Shape& start, const Shape& extent, std::int64_t first_channel, const TensorView& pixels, int threads) {
        SampleOptions window_options = options;
        window_options.threads = threads;
        for (std::int64_t v = first_channel; v < first_channel + pixels.shape[1]; ++v) {
            const PositionSource& positions = *volume_positions[volume_positions.size() == 1 ? 0 : static_cast<std::size_t>(v)];
            const PositionWindow window(positions, start, extent);
            ConstTensorView volume = channel_range(input, v, 1);
            Tensor converted_volume;
            if (volume.dtype != sample_type) {
                converted_volume = convert_to(volume, sample_type);
                volume = converted_volume.view();
            }
            const TensorView output = channel_range(pixels, v - first_channel, 1);
            if (output.dtype == sample_type) {
                grid_sample(volume, window, output, window_options);
            } else {
                const Tensor sampled = grid_sample(volume, window, window_options);
                copy_elements(convert_to(sampled.view(), output.dtype).view(), output);
            }
        }
    };
    const std::string summary = std::string(io::file_kind_name(description.kind)) + " " + std::string(dtype_name(description.dtype())) +
                                ", " + std::to_string(volumes) + " volume(s), size " + image_size_text(description.spatial);
    io::write_sampled(file, std::move(description), write_options, options.threads, sample, [&] {
        if (progress) progress->phase("writing", 2, 3);
    }, io::ChannelSampling::Apart);
    if (progress) progress->finish();
    spdlog::info("wrote {} ({})", file.string(), summary);
}

void Explanation::print() const {
    // In one piece: the explanations of jobs that gridwarp batch runs side by side do not interleave.
    std::string text = command_ + ":\n";
    for (const auto& [key, value] : lines_) text += "  " + key + ": " + value + "\n";
    std::cout << text << std::flush;
}

std::string describe_image(const io::Image& image) {
    return std::string(io::file_kind_name(image.kind)) + " " + std::string(dtype_name(image.dtype())) + ", " +
           std::to_string(image.channels) + " channel(s), size " + image_size_text(image.spatial);
}

std::string describe_rows(const std::vector<double>& values, std::size_t rows, std::size_t columns) {
    std::ostringstream out;
    out.precision(10);
    out << "[";
    for (std::size_t r = 0; r < rows; ++r) {
        out << (r ? ", [" : "[");
        for (std::size_t c = 0; c < columns; ++c) out << (c ? ", " : "") << values[r * columns + c] + 0.0;
        out << "]";
    }
    out << "]";
    return out.str();
}

std::string describe_geometry(const io::Geometry& geometry) {
    const std::size_t d = geometry.dimension();
    const std::string spacing = describe_rows(geometry.spacing, 1, d), origin = describe_rows(geometry.origin, 1, d);
    return "spacing " + spacing.substr(1, spacing.size() - 2) + " mm, origin " + origin.substr(1, origin.size() - 2) +
           " mm (LPS), direction " + describe_rows(geometry.direction, d, d);
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

std::vector<std::int64_t> parse_integer_list(const std::string& option, const std::string& text, std::size_t count) {
    std::vector<std::int64_t> values;
    std::string item;
    std::istringstream in(text);
    const char separator = text.find(',') != std::string::npos ? ',' : 'x';
    while (std::getline(in, item, separator)) {
        std::size_t used = 0;
        long long value = 0;
        try {
            value = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (item.empty() || used != item.size()) {
            throw std::invalid_argument(option + ": expected whole numbers separated by ',' (or 'x'), got '" + text + "'");
        }
        values.push_back(value);
    }
    if (values.size() != count) {
        throw std::invalid_argument(option + ": expected " + std::to_string(count) + " numbers, got '" + text + "'");
    }
    return values;
}


void report_warnings(const io::Image& image) {
    for (const auto& warning : image.warnings) spdlog::warn("{}", warning);
}

std::string escape_control_characters(std::string_view text) {
    std::string escaped;
    escaped.reserve(text.size());
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '\n') {
            escaped += "\\n";
        } else if (c == '\t') {
            escaped += "\\t";
        } else if (byte < 0x20 || byte == 0x7f) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", byte);
            escaped += hex;
        } else {
            escaped += c;
        }
    }
    return escaped;
}

void check_outputs_differ(const std::vector<std::filesystem::path>& outputs, const std::vector<std::filesystem::path>& inputs) {
    io::FileIdentifier identify;
    struct Known {
        io::FileIdentity identity;
        std::filesystem::path file;   // one file of ...
        std::filesystem::path named;  // ... this path as given
        bool output;
    };
    std::vector<Known> known;
    for (const auto& input : inputs) {
        for (const auto& file : io::files_read(input)) known.push_back({identify(file), file, input, false});
    }
    for (const auto& output : outputs) {
        const auto written = io::files_written(output);
        for (const auto& file : written) {
            const io::FileIdentity identity = identify(file);
            for (const Known& other : known) {
                if (!(other.identity == identity)) continue;
                std::string message = output.string() + ": the output would overwrite " +
                                      (other.output ? "another output " : "the input ") + other.named.string();
                if (file != output || other.file != other.named) {
                    message += " (writing it replaces " + file.string() + ", " +
                               (other.file == other.named ? "that path itself" : "a file of that path") + ")";
                }
                throw std::invalid_argument(message + "; choose another path");
            }
        }
        for (const auto& file : written) known.push_back({identify(file), file, output, true});
    }
}

void check_output_differs(const std::filesystem::path& output, const std::vector<std::filesystem::path>& inputs) {
    check_outputs_differ({output}, inputs);
}

TransformArgument parse_transform_argument(std::string text) {
    return io::parse_transform_spec(std::move(text));
}

}  // namespace gridwarp::cli
