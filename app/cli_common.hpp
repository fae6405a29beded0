// What every gridwarp subcommand shares: logging, threads, the sampling options, and the
// conversions from command-line text to library types.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gridwarp/antialias.hpp"
#include "gridwarp/grid_sample.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/transform_io.hpp"

namespace gridwarp::cli {

struct CommonOptions {
    bool verbose = false;
    bool quiet = false;
    int threads = 0;
    bool replace_special_output = false;
};

// -v/--verbose, -q/--quiet, --threads N, --replace-special-output.
void add_common_options(CLI::App& command, CommonOptions& options);
// Applies the log level; call first in every run function.
void apply_common_options(const CommonOptions& options);

struct SamplingFlags {
    std::string mode = "linear";
    SamplingMode parsed_mode = parse_sampling_mode("linear");  // `mode`, parsed once by mode_check
    std::string padding = "zeros";
    bool align_corners = false;
    double fill = 0.0;
    bool explain = false;
    std::string antialias = "auto";
    bool antialias_given = false;  // on the command line (else the command's default)
    std::uint64_t max_taps = kDefaultMaxTaps;
};

// --mode's and --padding's values, checked when the command line is read (a usage error, exit 2, with
// the nearest name where one is near); mode_check keeps the parsed mode in flags.parsed_mode.
CLI::Validator mode_check(SamplingFlags& flags);
CLI::Validator padding_check(bool accepts_itk);

// --mode, --padding, --align-corners, --fill, --max-taps, --explain.
void add_sampling_options(CLI::App& command, SamplingFlags& flags);
// Parses the names (aliases included) into library options; throws std::invalid_argument.
// `--padding itk` (ITK's boundary rule, applied to positions by gridwarp::ItkBoundaryPositions) is
// accepted only where `accepts_itk_padding` says the command applies it; the options then say zeros.
SampleOptions to_sample_options(const SamplingFlags& flags, const CommonOptions& common, bool accepts_itk_padding = false);
// True for --padding itk.
bool itk_padding(const SamplingFlags& flags);
// --mode Gaussian[sigma,alpha] and MultiLabel[sigma,alpha]: sigma is in mm, one value for every axis
// or one per axis x first (ANTs' syntax); this sets options.gaussian_sigma in pixels of an input of
// `spatial_rank` axes with `spacing` (x first; empty: 1 mm pixels). Without a sigma, the library's
// default of one pixel is ANTs' default of one spacing. Other kinds: nothing. Throws std::invalid_argument.
void set_gaussian_sigma(SampleOptions& options, const SamplingFlags& flags, const std::vector<double>& spacing,
                        std::int64_t spatial_rank);

// --antialias auto|on|off: for the commands whose maps may shrink. `resize` filters by default, as
// Pillow, libvips and ImageMagick do; affine, flow and resample sample the input as it is by
// default, as ONNX GridSample, OpenCV's warps and antsApplyTransforms do (docs/semantics.md).
void add_antialias_option(CLI::App& command, SamplingFlags& flags, const std::string& by_default);
// What --antialias does to an input of `input_spatial` and `pixels` type sampled at `positions`
// (docs/semantics.md, "Anti-aliasing"): the shrink factor of each axis, whether the input is
// low-passed (gridwarp::lowpass_for_shrink) before sampling, and why, for --explain. Throws
// std::invalid_argument for a bad value, or for `on` with a mode that is never filtered.
struct AntialiasPlan {
    std::vector<double> factors;
    bool filters = false;
    std::string explanation;
};
AntialiasPlan plan_antialias(const SamplingFlags& flags, const SampleOptions& options, const PositionSource& positions,
                             const Shape& input_spatial, DType pixels);
// The pixels to sample: `input` itself, or its low-passed copy, held in `storage`, where `plan`
// filters. Every copy sampling makes of them (that one, and the B-spline coefficients of all
// channels, or of one volume at a time where `volumes_apart`) must fit `budget` (io::FileError
// naming `file` otherwise).
ConstTensorView input_to_sample(const ConstTensorView& input, const AntialiasPlan& plan, const SampleOptions& options, bool volumes_apart,
                                const std::filesystem::path& file, const io::MemoryBudget& budget, Tensor& storage);
// Gaussian and MultiLabel: the output's values (N x C x points) times the taps per point must stay
// within --max-taps; throws std::invalid_argument naming it. Other kinds read a fixed number of taps.
void check_sampling_work(const SamplingFlags& flags, const SampleOptions& options, const ConstTensorView& input,
                         const Shape& output_spatial);

// --max-memory BYTES bounds every buffer whose size a file or the command line declares rather than
// proves (docs/reliability.md). --max-voxels N, deprecated, bounds values instead; given alone it
// keeps its old meaning (the byte budget off), so that old command lines run as before.
struct MemoryFlags {
    std::uint64_t max_memory = io::kDefaultMaxMemory;
    std::uint64_t max_voxels = 0;
    bool max_memory_given = false;
    bool max_voxels_given = false;
};
void add_memory_options(CLI::App& command, MemoryFlags& flags);
io::MemoryBudget to_memory_budget(const MemoryFlags& flags);

struct VolumeFlags {
    std::string nifti_geometry = "standard";
    int compression_level = -1;
    int quality = -1;
    MemoryFlags memory;
    bool allow_outside_data_files = false;
    bool keep_orientation = false;
};

// --nifti-geometry, --max-memory (and --max-voxels), --allow-outside-data-files, --keep-orientation (reading) and, for
// commands that write, --compression-level.
void add_volume_options(CLI::App& command, VolumeFlags& flags, bool writes);
io::ReadOptions to_read_options(const VolumeFlags& flags, const CommonOptions& common);
io::WriteOptions to_write_options(const VolumeFlags& flags, const CommonOptions& common);
// File descriptor 2 as it was when gridwarp started (main takes it first). lib/io points descriptor
// 2 at a capture file while a decoder runs, so whatever another thread writes there meanwhile would
// become that decoder's error: the log, progress bars and batch's lines are written here instead.
int original_stderr();
// Writes all of `text` to original_stderr(), in one write where the system allows (lines that
// threads write at once do not interleave).
void write_to_original_stderr(std::string_view text);

// On a terminal, a command running longer than about a second shows on stderr which of its phases
// (reading, sampling, writing) it is in, as a bar with the elapsed time, redrawn until it ends.
// Off with --quiet, when stderr is not a terminal, and inside gridwarp batch (whose jobs are quiet).
// GRIDWARP_PROGRESS_AFTER_MS sets the delay (default 1000).
class CommandProgress {
public:
    CommandProgress(const std::string& command, const CommonOptions& options);
    ~CommandProgress();
    CommandProgress(const CommandProgress&) = delete;
    CommandProgress& operator=(const CommandProgress&) = delete;
    // Phase `index` of `count` (0-based) begins.
    void phase(const char* name, int index, int count);
    // Stops drawing and clears the line (the destructor does it too).
    void finish();

private:
    void draw_locked();
    void write_to_terminal(const std::string& text) const;
    void run();

    std::string command_;
    bool active_ = false;
    // original_stderr() when drawing: the bar must not land in a decoder's captured messages.
    int terminal_ = -1;
    std::chrono::steady_clock::time_point start_;
    std::chrono::milliseconds delay_{1000};
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false, drawn_ = false;
    std::string phase_ = "starting";
    int index_ = 0, count_ = 1;
    std::thread thread_;
};

// Samples `input` (N, C, D1..Dr) at `positions` into the output `description` describes, writes
// it to `file` (io::write_sampled: a block of rows at a time where the format allows), and logs
// "wrote FILE (volume int16, spatial (D, H, W))"; tells `progress` (when given) when sampling
// and writing begin. An output of another dtype than the input's is sampled in the input's, then rounded and
// saturated into its own.
void sample_and_write(const std::filesystem::path& file, io::Image description, const io::WriteOptions& write_options,
                      const ConstTensorView& input, const PositionSource& positions, const SampleOptions& options,
                      CommandProgress* progress = nullptr);
// sample_and_write for an anti-aliased axis-aligned map that gridwarp::shrinks_onto_grid serves:
// the output is reduced onto its grid (gridwarp::shrink_onto_grid), no filtered copy of the input made.
void shrink_and_write(const std::filesystem::path& file, io::Image description, const io::WriteOptions& write_options,
                      const ConstTensorView& input, const AxisAlignedMap& map, const std::vector<double>& factors,
                      const SampleOptions& options, CommandProgress* progress = nullptr);
// sample_and_write for a series: each channel of `input` (1, C, D1..Dr), a volume of a 4-D series,
// is sampled on its own into its plane of the output, at `volume_positions[c]` (or, given one,
// `volume_positions[0]` for every volume), in `sample_type`. A volume of another type is converted
// one at a time, and an output of another type is rounded and saturated a volume at a time: the
// series itself is never copied.
void sample_series_and_write(const std::filesystem::path& file, io::Image description, const io::WriteOptions& write_options,
                             const ConstTensorView& input, DType sample_type,
                             const std::vector<const PositionSource*>& volume_positions, const SampleOptions& options,
                             CommandProgress* progress = nullptr);
// Logs what a reader wanted the user to know (a NIfTI file without orientation, ...).
void report_warnings(const io::Image& image);
// Whole numbers "A,B[,C...]" or "AxB[xC...]", exactly `count` of them; throws std::invalid_argument
// naming `option`.
std::vector<std::int64_t> parse_integer_list(const std::string& option, const std::string& text, std::size_t count);
// An image's size as every message gives it, x first: "320 x 240 (W x H)", "64 x 64 x 48 (W x H x D)".
using io::image_size_text;
// One warning line when `image` is an integer image that looks like a label map (few distinct
// values, most voxels equal to their neighbour) and `options` interpolate between values
// (label_map_warning.cpp).
void warn_if_label_map(const std::filesystem::path& file, const io::Image& image, const SampleOptions& options);

// --explain: what a job would read, how it maps output points to input points, how it samples and
// what it would write, printed on stdout instead of doing it.
class Explanation {
public:
    explicit Explanation(std::string command) : command_(std::move(command)) {}
    void add(const std::string& key, const std::string& value) { lines_.emplace_back(key, value); }
    void print() const;

private:
    std::string command_;
    std::vector<std::pair<std::string, std::string>> lines_;
};
std::string describe_image(const io::Image& image);     // "volume int16, 1 channel(s), spatial (D, H, W)"
std::string describe_geometry(const io::Geometry& geometry);
std::string describe_rows(const std::vector<double>& values, std::size_t rows, std::size_t columns);  // "[[a, b], [c, d]]"
std::string describe_sampling(const SampleOptions& options);
// The same, naming `padding` (e.g. "itk") instead of the options' padding.
std::string describe_sampling(const SampleOptions& options, std::string_view padding);

// Refuses an output of `extents` points of `per_point` values of `value_bytes` bytes each, before
// it is allocated: std::invalid_argument naming `origin` (the option or file that sets the size)
// when an extent is not positive, io::FileError naming `output` and `origin` when it passes the budget.
void check_output_size(const std::filesystem::path& output, const std::string& origin, const std::vector<std::int64_t>& extents,
                       std::uint64_t per_point, std::uint64_t value_bytes, const io::MemoryBudget& budget);
// The budget alone, for outputs whose extents were already checked (0 allowed: an empty output).
void check_output_memory(const std::filesystem::path& output, const std::string& origin, const std::vector<std::int64_t>& extents,
                         std::uint64_t per_point, std::uint64_t value_bytes, const io::MemoryBudget& budget);

// Refuses (std::invalid_argument naming the output) outputs that would overwrite an input or one
// another: every file each output writes (a pair by both halves) against every file each input
// reads (a pair by both halves, a detached header's data files), by identity (io::FileIdentity), not
// by spelling.
void check_outputs_differ(const std::vector<std::filesystem::path>& outputs, const std::vector<std::filesystem::path>& inputs);
void check_output_differs(const std::filesystem::path& output, const std::vector<std::filesystem::path>& inputs);

// A --transform value: "FILE[,tag...]" or ANTs' "[FILE,1]" / "[FILE,0]" (io::parse_transform_spec);
// throws std::invalid_argument for another bracketed flag.
using TransformArgument = io::TransformSpec;
TransformArgument parse_transform_argument(std::string text);

// `text` with its control characters written out (\n, \t, \xHH), so that a message naming a file
// whose name holds a newline is still one line.
std::string escape_control_characters(std::string_view text);

// A command's way of ending with an exit status other than 0 or 1 (batch: 2 and 3); an empty
// message prints nothing.
class ExitStatus : public std::runtime_error {
public:
    ExitStatus(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
    int code() const { return code_; }

private:
    int code_;
};

// Makes RUN the action of SUB, whose options write into COMMAND. Every parse starts from the values
// COMMAND holds now (its defaults), so that batch can parse job after job with one CLI::App.
// Sorts a command's options into its --help groups (input and output, the command's own, sampling,
// reading, output format, resources, messages), one table for every command.
void group_options(CLI::App& command);

template <class Command, class Run>
void set_command_action(CLI::App& sub, const std::shared_ptr<Command>& command, Run run) {
    group_options(sub);
    sub.preparse_callback([command, defaults = *command](std::size_t) { *command = defaults; });
    sub.callback([command, run] { run(*command); });
}

// Each subcommand lives in its own file and registers itself here: each adds its subcommand to APP
// and returns the storage its options write into (the subcommand's callback holds it too; a caller
// that replaces the callback must keep it).
std::shared_ptr<void> register_sample_command(CLI::App& app);
std::shared_ptr<void> register_grid_command(CLI::App& app);
std::shared_ptr<void> register_affine_command(CLI::App& app);
std::shared_ptr<void> register_resize_command(CLI::App& app);
std::shared_ptr<void> register_flow_command(CLI::App& app);
std::shared_ptr<void> register_info_command(CLI::App& app);
std::shared_ptr<void> register_resample_command(CLI::App& app);
std::shared_ptr<void> register_batch_command(CLI::App& app);
std::shared_ptr<void> register_convert_transform_command(CLI::App& app);
std::shared_ptr<void> register_help_command(CLI::App& app);

}  // namespace gridwarp::cli
