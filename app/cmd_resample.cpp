// gridwarp resample: put a moving image onto a reference grid through physical space, with ITK
// transforms and displacement fields composed in antsApplyTransforms' order.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "cli_common.hpp"
#include "sampling_options.hpp"
#include "file_options.hpp"
#include "image_arguments.hpp"
#include "messages.hpp"
#include "sample_and_write.hpp"
#include "tiled_sampling.hpp"
#include "geometry_options.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/transform_io.hpp"
#include "gridwarp/itk_boundary.hpp"
#include "gridwarp/physical.hpp"

namespace gridwarp::cli {

namespace {

struct ResampleCommand {
    ImageArgument input;
    OutputArgument output;
    ImageArgument reference;
    std::vector<std::string> transforms;
    std::string output_type;
    int dimensionality = 0;  // antsApplyTransforms' -d; 0: not given
    int input_image_type = 0;  // antsApplyTransforms' -e
    bool single_precision = false;  // antsApplyTransforms' --float
    bool modulate = false;
    SamplingFlags sampling;
    VolumeFlags volume;
    TilingFlags tiling;
    CommonOptions common;

    ImageArgument* image_argument(std::string_view option) {
        return option == "input" ? &input : option == "reference" ? &reference : nullptr;
    }
};

io::Geometry geometry_or_identity(const io::Image& image) {
    return image.geometry ? *image.geometry : io::Geometry::identity(image.spatial.size());
}

AffineMap index_to_point(const io::Geometry& geometry) {
    return AffineMap::from_geometry(geometry.spacing, geometry.origin, geometry.direction);
}

// Whether each voxel of `output` lies on the centre of the same voxel of `input` (to 1e-9 voxel).
bool same_voxel_grid(const io::Geometry& output, const io::Geometry& input) {
    if (output.dimension() != input.dimension()) return false;
    AffineMap voxel_map;
    try {
        voxel_map = index_to_point(input).inverse().after(index_to_point(output));
    } catch (const std::invalid_argument&) {
        return false;
    }
    const std::size_t dimension = output.dimension();
    for (std::size_t i = 0; i < dimension; ++i) {
        if (std::abs(voxel_map.offset[i]) > 1e-9) return false;
        for (std::size_t j = 0; j < dimension; ++j) {
            if (std::abs(voxel_map.matrix[i * dimension + j] - (i == j ? 1.0 : 0.0)) > 1e-9) return false;
        }
    }
    return true;
}

void run_resample(const ResampleCommand& command) {
    apply_common_options(command.common);
    CommandProgress progress("resample", command.common);
    progress.phase("reading", 0, 3);
    SampleOptions options = to_sample_options(command.sampling, command.common, /*accepts_itk_padding=*/true);
    if (command.input_image_type == 2) {
        throw std::invalid_argument("-e 2: antsApplyTransforms reorients diffusion tensors, which gridwarp does not; "
                                    "-e 1 resamples their components without reorienting them");
    }
    std::vector<TransformArgument> transforms;
    std::vector<std::filesystem::path> inputs = files_of({&command.input, &command.reference});
    bool per_volume = false;
    for (const auto& text : command.transforms) {
        transforms.push_back(parse_transform_argument(text));
        inputs.push_back(transforms.back().file);
        per_volume = per_volume || transforms.back().per_volume;
    }
    check_output_differs(command.output, inputs);

    const io::ReadOptions read_options = to_read_options(command.volume, command.common);
    // Read from its file, the image is this run's own, and is converted in place where it is sampled
    // in the output type; an image in memory stays its owner's. A scaled volume comes as its stored
    // values, turned into values below unless they are copied as they are.
    io::ReadOptions moving_read_options = read_options;
    moving_read_options.keep_stored_values = true;
    // A tiled input is described from its header first; it is read whole only if it is not sampled by tiles.
    const std::unique_ptr<io::TileSource> tiles = open_input_tiles(command.input, command.output, command.tiling, read_options);
    io::Image read_moving = command.input.in_memory() ? io::Image{}
                            : tiles                   ? tiles->describe()
                                                      : io::read_image(command.input.path, moving_read_options);
    const io::Image& moving = command.input.in_memory() ? *command.input.image : read_moving;
    report_warnings(moving);
    const std::size_t dimension = moving.spatial.size();
    set_gaussian_sigma(options, command.sampling, moving.geometry ? moving.geometry->spacing : std::vector<double>{},
                       static_cast<std::int64_t>(dimension));
    if (moving.batch != 1 || (dimension != 2 && dimension != 3)) {
        throw io::FileError(command.input.path, "resample takes one 2-D or 3-D image, got N=" + std::to_string(moving.batch) +
                                               " of size " + image_size_text(moving.spatial));
    }
    // -d 2 also names a volume one slice deep, as antsApplyTransforms reads it.
    const bool one_slice = dimension == 3 && moving.spatial.front() == 1;
    if (command.dimensionality != 0 && command.dimensionality != static_cast<int>(dimension) &&
        !(command.dimensionality == 2 && one_slice)) {
        throw io::FileError(command.input.path, "-d " + std::to_string(command.dimensionality) + " was given, but the image is " +
                                               std::to_string(dimension) + "-D");
    }
    const std::shared_ptr<const io::Image> reference = command.reference.empty() ? nullptr : load_image_header(command.reference, read_options);
    if (reference) report_warnings(*reference);
    const io::Image& grid = reference ? *reference : moving;
    if (grid.spatial.size() != dimension) {
        throw io::FileError(command.reference.path, "the reference is " + std::to_string(grid.spatial.size()) + "-D but " +
                                                   command.input.string() + " is " + std::to_string(dimension) + "-D");
    }
    const bool moving_type = command.output_type.empty() || command.output_type == "default";
    // Without a transform onto the input's own grid, every output point is an input voxel's centre,
    // where ONNX's interpolations give the voxel itself: the values are copied (stored values and
    // their scaling as they are, where the output keeps a scaling).
    const bool copies_voxels = command.transforms.empty() && !command.modulate && moving_type && interpolation_kind(options.mode).onnx &&
                               grid.spatial == moving.spatial && same_voxel_grid(geometry_or_identity(grid), geometry_or_identity(moving));
    const bool copies_stored_values = copies_voxels && command.output_type.empty() && !command.output.in_memory() &&
                                      io::stores_value_scaling(command.output.path);
    if (!copies_stored_values) io::apply_value_scaling(read_moving);
    warn_if_label_map(command.input.path, moving, options);
    const DType output_type = moving_type ? moving.dtype() : parse_dtype(command.output_type);
    if (output_type == DType::String || is_complex(output_type)) {
        throw std::invalid_argument("--output-type must be a real numeric type, got " + command.output_type);
    }
    // A 4-D series is a volume per channel. One mapping samples every volume at once (each position
    // computed once); a volume at a time is for per-volume lists, and for types converted on the way
    // in or out, so that no copy of the whole series (or its output) in another type is made.
    const std::int64_t volumes = moving.layout == io::ChannelLayout::Planar ? moving.channels : 1;
    const bool one_volume_series = moving.nifti && moving.nifti->dim[0] > 3 && moving.channels == 1;
    if (per_volume && volumes == 1 && !one_volume_series) {
        const auto listed = std::find_if(transforms.begin(), transforms.end(), [](const auto& t) { return t.per_volume; });
        throw io::FileError(listed->file, "a per-volume transform list needs a 4-D series, but " + command.input.string() + " is one " +
                                              std::to_string(dimension) + "-D " +
                                              (moving.channels > 1 ? "image of " + std::to_string(moving.channels) + " interleaved components"
                                                                   : std::string("volume")));
    }
    // An integer image asked for a floating output is sampled in that type, so the output keeps
    // fractions: a series one volume at a time.
    const bool sample_as_output = is_floating(output_type) && !is_floating(moving.dtype()) && moving.dtype() != output_type;
    const bool by_volume = per_volume || (volumes > 1 && output_type != moving.dtype());
    const std::int64_t converted_volumes = by_volume ? 1 : volumes;
    // The output (on the reference's grid, or in another type) and a floating copy of an integer
    // input are sized by the command, not by a file's bytes.
    const io::MemoryBudget budget = to_memory_budget(command.volume.memory);
    check_output_size(command.output.path, command.reference.empty() ? command.input.string() : "resampled onto " + command.reference.string(),
                      std::vector<std::int64_t>(grid.spatial.begin(), grid.spatial.end()), static_cast<std::uint64_t>(moving.channels),
                      dtype_size(output_type), budget);
    if (sample_as_output) {
        io::check_memory_budget(command.input.path, "a " + std::string(dtype_name(output_type)) + " copy of the voxels",
                                static_cast<std::uint64_t>(moving.pixels.numel() / volumes * converted_volumes),
                                dtype_size(output_type), budget);
    }
    const io::Geometry output_geometry = geometry_or_identity(grid);
    const io::Geometry moving_geometry = geometry_or_identity(moving);

    // -t T1 -t T2 ... -t Tn maps a point p to Tn(...T2(T1(p))): T1 acts first, as in
    // antsApplyTransforms; inside one file (an ITK composite) the last listed acts first. A
    // per-volume list puts volume v's transform in its place in volume v's chain.
    const std::size_t chains = per_volume ? static_cast<std::size_t>(volumes) : 1;
    std::vector<std::vector<PointTransform>> volume_steps(chains);
    std::vector<std::shared_ptr<const Tensor>> buffers;
    std::vector<std::string> conventions(transforms.size());  // for --explain, in the listed order
    std::vector<std::string> notes;  // for --explain: inverses' residuals and folds
    for (auto it = transforms.begin(); it != transforms.end(); ++it) {
        io::TransformContext context;
        context.dimension = dimension;
        context.moving = &moving;
        // A per-volume list (head motion) maps the series onto itself.
        context.reference = it->per_volume ? &moving : &grid;
        context.acts_first = it == transforms.begin();
        context.acts_last = it + 1 == transforms.end();
        const std::vector<io::TransformFile> files =
            it->per_volume ? io::read_transform_series(*it, context, read_options)
                           : std::vector<io::TransformFile>{io::read_transform(*it, context, read_options)};
        if (it->per_volume && files.size() != chains) {
            throw io::FileError(it->file, "the per-volume list holds " + std::to_string(files.size()) + " transform(s) but " +
                                              command.input.string() + " has " + std::to_string(chains) + " volume(s)");
        }
        for (const auto& file : files) {
            for (const auto& warning : file.warnings) spdlog::warn("{}", warning);
            notes.insert(notes.end(), file.notes.begin(), file.notes.end());
        }
        conventions[static_cast<std::size_t>(it - transforms.begin())] = io::transform_format_name(files.front().format);
        for (std::size_t v = 0; v < chains; ++v) {
            const io::TransformFile& file = files[files.size() == 1 ? 0 : v];
            volume_steps[v].insert(volume_steps[v].end(), file.steps.rbegin(), file.steps.rend());
        }
        for (const auto& file : files) buffers.insert(buffers.end(), file.buffers.begin(), file.buffers.end());
    }
    const std::vector<PointTransform>& steps = volume_steps.front();
    // --modulate: each output value times the chain's local volume change at its voxel.
    Tensor modulation;
    if (command.modulate) {
        if (!is_floating(output_type)) {
            throw std::invalid_argument("--modulate scales values by the Jacobian's determinant: give a floating --output-type (float or double)");
        }
        if (per_volume) throw std::invalid_argument("--modulate takes one chain for every volume, not a per-volume list");
        check_output_memory(command.output.path, "--modulate's determinants", std::vector<std::int64_t>(grid.spatial.begin(), grid.spatial.end()),
                            1, sizeof(double), budget);
        modulation = chain_jacobian_determinant(steps, index_to_point(output_geometry), grid.spatial, command.common.threads);
    }
    AffineMap point_to_moving_index;
    try {
        point_to_moving_index = index_to_point(moving_geometry).inverse();
    } catch (const std::invalid_argument&) {
        throw io::FileError(command.input.path, "the image's direction and spacing are singular");
    }
    // For --explain: the chain as one affine map from output index to moving index, when it is one.
    std::optional<AffineMap> collapsed = index_to_point(output_geometry);
    for (const auto& step : steps) {
        if (!step.affine) {
            collapsed.reset();
            break;
        }
        collapsed = step.affine->after(*collapsed);
    }
    if (collapsed) collapsed = point_to_moving_index.after(*collapsed);
    std::vector<std::unique_ptr<const TransformChainPositions>> volume_positions;
    for (auto& chain : volume_steps) {
        volume_positions.push_back(std::make_unique<const TransformChainPositions>(index_to_point(output_geometry), std::move(chain),
                                                                                   point_to_moving_index, grid.spatial));
    }
    const TransformChainPositions& positions = *volume_positions.front();
    // --padding itk: ITK's boundary rule, on the positions; the sampler pads with zeros (never reached inside).
    std::vector<std::unique_ptr<const ItkBoundaryPositions>> itk_positions;
    if (itk_padding(command.sampling)) {
        for (const auto& p : volume_positions) itk_positions.push_back(std::make_unique<const ItkBoundaryPositions>(*p, moving.spatial, options.mode));
    }
    auto sampled_positions = [&](std::size_t v) -> const PositionSource& {
        return itk_positions.empty() ? static_cast<const PositionSource&>(*volume_positions[v]) : *itk_positions[v];
    };
    spdlog::debug("resampling {} ({} volume(s)) onto a {} grid through {} transform(s){}", command.input.string(), volumes,
                  image_size_text(grid.spatial), transforms.size(), positions.is_affine() ? " (one affine map)" : "");

    // The whole series in the output type, where every volume is sampled in it.
    const bool convert_all = sample_as_output && converted_volumes == volumes;
    io::Image converted;
    if (convert_all && command.input.in_memory()) converted = moving.with_pixels(convert_to(moving.pixels.view(), output_type));
    if (convert_all && !command.input.in_memory()) read_moving.pixels = convert_to(moving.pixels.view(), output_type);
    const io::Image& moving_to_sample = convert_all && command.input.in_memory() ? converted : moving;
    check_sampling_work(command.sampling, options, moving_to_sample.nchw(), positions.output_shape());
    const AntialiasPlan antialias = plan_antialias(command.sampling, options, positions, moving_to_sample.spatial, moving_to_sample.dtype());
    if (command.sampling.explain) {
        Explanation explanation("resample");
        explanation.add("input", command.input.string() + " (" + describe_image(moving_to_sample) + ")");
        explanation.add("input grid", describe_geometry(moving_geometry));
        std::string chain;
        for (std::size_t i = 0; i < transforms.size(); ++i) {
            chain += (chain.empty() ? "" : ", then ") + transforms[i].file.string() + " (" + conventions[i] +
                     (transforms[i].inverse ? ", inverted" : "") + (transforms[i].per_volume ? ", one per volume)" : ")");
        }
        explanation.add("transforms", chain.empty() ? "none: the two grids' geometry alone"
                                                    : chain + " (listed as given: the first acts first on output points)");
        for (const std::string& note : notes) explanation.add("inverse", note);
        if (collapsed) {
            std::vector<double> rows;
            for (std::size_t i = 0; i < dimension; ++i) {
                for (std::size_t j = 0; j < dimension; ++j) rows.push_back(collapsed->matrix[i * dimension + j]);
                rows.push_back(collapsed->offset[i]);
            }
            explanation.add("mapping", describe_rows(rows, dimension, dimension + 1) + " (output index -> input index, x first" +
                                           (per_volume ? "; volume 0's)" : ")"));
        } else {
            explanation.add("mapping", "through a displacement field: not one affine map");
        }
        if (copies_voxels) {
            explanation.add("sampling", "none: every output voxel is the centre of the same input voxel, whose value is copied");
        } else if (itk_padding(command.sampling)) {
            explanation.add("sampling", describe_sampling(options, "itk (ITK's rule: fill beyond half a voxel outside; taps beyond the edge "
                                                                   "read the edge voxel, the mirror (B-spline) or 0 (windowed sinc))"));
        } else {
            explanation.add("sampling", describe_sampling(options));
        }
        explanation.add("anti-aliasing", antialias.explanation);
        if (command.modulate) explanation.add("modulation", "each value times the determinant of the chain's Jacobian at its voxel");
        explanation.add("output", command.output.string() + " (" + std::string(dtype_name(output_type)) +
                                      (volumes > 1 || one_volume_series ? ", " + std::to_string(volumes) + " volume(s)" : std::string()) + ", size " +
                                      image_size_text(grid.spatial) + ")");
        explanation.add("output grid", describe_geometry(output_geometry) +
                                           (command.reference.empty() ? " (the input's)" : " (" + command.reference.string() + "'s)"));
        explanation.print();
        return;
    }
    io::Image description = io::Image::describe_like(moving_to_sample, grid.spatial);
    description.geometry = output_geometry;
    // A NIfTI output keeps the moving image's header (intent, descrip, units, ...) with the
    // reference's qform and sform codes: they say what the reference's space is.
    if (description.nifti && reference && reference->nifti) {
        auto header = std::make_shared<io::NiftiHeader>(*description.nifti);
        header->qform_code = reference->nifti->qform_code;
        header->sform_code = reference->nifti->sform_code;
        description.nifti = header;
    }
    if (!command.output_type.empty()) description.scaling.reset();  // the values themselves, in that type
    description.pixels = Tensor(output_type, Shape{0});
    if (tiles) {
        if (!command.modulate && !by_volume && volumes == 1 &&
            samples_by_tiles(*tiles, command.tiling, options, output_type, sampled_positions(0))) {
            sample_by_tiles(command.output, command.input.path, *tiles, description, to_write_options(command.volume, command.common),
                            sampled_positions(0), options, antialias, command.tiling, &progress);
            return;
        }
        if (command.tiling.by_tiles == "always") {
            throw std::invalid_argument("--by-tiles always: resample samples by tiles one volume at a time, without --modulate");
        }
        read_moving = io::read_image(command.input.path, moving_read_options);
        if (!copies_stored_values) io::apply_value_scaling(read_moving);
        if (convert_all) read_moving.pixels = convert_to(read_moving.pixels.view(), output_type);
    }
    if (copies_voxels) {
        copy_and_write(command.output, std::move(description), to_write_options(command.volume, command.common), moving_to_sample.nchw(),
                       &progress);
        return;
    }
    const ConstTensorView modulation_view = modulation.view();
    Tensor filtered;
    const ConstTensorView pixels = input_to_sample(moving_to_sample.nchw(), antialias, options, by_volume, command.input.path,
                                                   to_memory_budget(command.volume.memory), filtered);
    if (by_volume) {
        std::vector<const PositionSource*> sources;
        for (std::size_t v = 0; v < volume_positions.size(); ++v) sources.push_back(&sampled_positions(v));
        const DType sample_type = antialias.filters ? pixels.dtype : sample_as_output ? output_type : moving_to_sample.dtype();
        sample_series_and_write(command.output, std::move(description), to_write_options(command.volume, command.common), pixels,
                                sample_type, sources, options, &progress, command.modulate ? &modulation_view : nullptr);
        return;
    }
    sample_and_write(command.output, std::move(description), to_write_options(command.volume, command.common), pixels, sampled_positions(0), options,
                     &progress, command.modulate ? &modulation_view : nullptr);
}

}  // namespace

CommandBinding register_resample_command(CLI::App& app) {
    auto command = std::make_shared<ResampleCommand>();
    CLI::App* sub = app.add_subcommand("resample", "Resample a moving image onto a reference grid in physical space");
    sub->add_option("-i,--input", command->input, "Moving image or volume (.nii[.gz], .nrrd, .mha, ...)")->required();
    sub->add_option("-o,--output", command->output, "Output on the reference grid; its extension picks the format")->required();
    sub->add_option("-r,--reference", command->reference, "Image whose grid (size, spacing, origin, direction) the output takes "
                                                          "(default: the moving image's own)");
    sub->add_option("-t,--transform", command->transforms,
                    "Transform: ITK .tfm/.txt/.mat/.h5, FreeSurfer .lta, AFNI .aff12.1D, a 4x4 LPS text matrix, or a "
                    "displacement field image; "
                    "FILE,inverse (or [FILE,1]) inverts a linear one. Repeatable, in antsApplyTransforms' order: the first "
                    "listed acts first on output points")
        ->take_all()->allow_extra_args(false);
    CLI::Option* output_type = sub->add_option(
        "--output-type", command->output_type, "Output voxel type: uchar, char, ushort, short, uint, int, float, double, ... (default: the moving image's)");
    add_sampling_options(*sub, command->sampling);
    // antsApplyTransforms' spellings, so that a line from an ANTs script runs as it is.
    sub->add_option("-n,--interpolation", command->sampling.mode, "antsApplyTransforms' name for --mode (Linear, BSpline[3], GenericLabel, ...)")
        ->excludes(sub->get_option("--mode"))
        ->check(mode_check(command->sampling));
    sub->add_option("-f,--default-value", command->sampling.fill, "antsApplyTransforms' name for --fill")->excludes(sub->get_option("--fill"));
    sub->add_option("-d,--dimensionality", command->dimensionality,
                    "antsApplyTransforms' -d: 2 or 3, checked against the moving image (the image says it; optional)")
        ->check(CLI::IsMember({2, 3}));
    sub->add_option("-e,--input-image-type", command->input_image_type,
                    "antsApplyTransforms' -e: 0 scalar, 1 vector (each component resampled), 3 time series (each "
                    "volume resampled), 4 multichannel; gridwarp reads what the file holds, so these only document it. "
                    "2 (tensors, reoriented) is refused")
        ->check(CLI::IsMember({0, 1, 2, 3, 4}));
    sub->add_flag("--modulate", command->modulate,
                  "Multiply each output value by the determinant of the chain's Jacobian at its voxel (as mrtransform -modulate "
                  "jac), so that totals are kept; needs a floating --output-type");
    sub->add_flag("--float", command->single_precision,
                  "antsApplyTransforms' --float, accepted: gridwarp already computes float32 and 8/16-bit inputs in "
                  "float32 and keeps the input's type (see --output-type)");
    sub->add_option("-u,--output-data-type", command->output_type,
                    "antsApplyTransforms' name for --output-type (char, uchar, short, int, float, double, default)")
        ->excludes(output_type);
    add_antialias_option(*sub, command->sampling, "off");
    add_volume_options(*sub, command->volume, true);
    add_tiling_options(*sub, command->tiling);
    add_common_options(*sub, command->common);
    // antsApplyTransforms writes "-v 1" and "-v 0": the flag takes an optional value here.
    sub->get_option("--verbose")->expected(0, 1)->check(CLI::IsMember({"0", "1", "true", "false"}));
    sub->footer(
        "Examples:\n"
        "  gridwarp resample -i moving.nii.gz -r fixed.nii.gz -o moved.nii.gz -t affine.mat\n"
        "  gridwarp resample -i moving.nii.gz -r fixed.nii.gz -o moved.nii.gz -t warp.nii.gz -t affine.mat\n"
        "  gridwarp resample -i labels.nii.gz -r fixed.nii.gz -o labels_moved.nii.gz -t affine.tfm,inverse --mode nearest\n"
        "  gridwarp resample -i t1.nii.gz -r template.nii.gz -o t1_in_template.nii.gz --mode cubic --output-type float\n"
        "  gridwarp resample -i moving.nii.gz -r fixed.nii.gz -o moved.nii.gz -t affine.mat --padding itk  # = antsApplyTransforms\n"
        "  gridwarp resample -i moving.nii.gz -r fixed.nii.gz -o moved.nii.gz -t 0GenericAffine.mat -n BSpline[3] -u float "
        "--padding itk");
    return set_command_action(*sub, command, run_resample);
}

}  // namespace gridwarp::cli
