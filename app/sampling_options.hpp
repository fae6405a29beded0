// --mode, --padding, --antialias and the other sampling options, and what they make of the library's options.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cli_common.hpp"
#include "gridwarp/antialias.hpp"
#include "gridwarp/grid_sample.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::cli {

struct SamplingFlags {
    std::string mode = "linear";  // what CLI11 stores; everything else reads parsed_mode
    SamplingMode parsed_mode = parse_sampling_mode("linear");  // --mode, parsed once by mode_check
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

// --explain's sampling line: the mode with its parameters, the padding, align_corners, the fill.
std::string describe_sampling(const SampleOptions& options);
// The same, naming `padding` (e.g. "itk") instead of the options' padding.
std::string describe_sampling(const SampleOptions& options, std::string_view padding);

}  // namespace gridwarp::cli
