// gridwarp convert-transform: a chain of transforms, read in any package's convention, written as
// one matrix in another's, or as one displacement field on a reference grid.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "cli_common.hpp"
#include "file_options.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/nifti.hpp"
#include "gridwarp/io/transform_io.hpp"
#include "gridwarp/physical.hpp"

namespace gridwarp::cli {

namespace {

struct ConvertTransformCommand {
    std::vector<std::string> transforms;
    std::string output;
    ImageArgument moving;
    ImageArgument reference;
    VolumeFlags volume;
    CommonOptions common;

    ImageArgument* image_argument(std::string_view option) {
        return option == "reference" ? &reference : option == "moving" ? &moving : nullptr;
    }
};

// A volume file name (.nii[.gz], .nrrd, .nhdr, .mha, .mhd): the chain is written as a displacement field.
bool names_a_volume(const std::filesystem::path& file) {
    try {
        return io::kind_for_path(file) == io::FileKind::Volume;
    } catch (const std::exception&) {
        return false;
    }
}

// The chain as FORMAT's dense field sampled at the reference's voxel centres, its values made
// once, in the file's layout (for a plain .nii, in the file's mapped pages). Not streamed a block
// at a time as resample's outputs are: one evaluation of the chain gives every component of a
// voxel, and the file stores them a volume apart.
void write_displacement_field(const std::filesystem::path& file, io::TransformFormat format, const std::vector<PointTransform>& steps,
                              const io::Image& reference, const io::TransformContext& context, const ConvertTransformCommand& command) {
    const std::size_t dimension = reference.spatial.size();
    const io::Geometry geometry = reference.geometry ? *reference.geometry : io::Geometry::identity(dimension);
    check_output_size(file, command.reference.string(), std::vector<std::int64_t>(reference.spatial.begin(), reference.spatial.end()),
                      dimension, sizeof(float), to_memory_budget(command.volume.memory));
    io::DisplacementFieldLayout layout;
    try {
        layout = io::displacement_field_layout(format, reference, context, file);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("-o " + file.string() + ": " + e.what());
    }
    io::PendingOutput output(file, std::move(layout.description), to_write_options(command.volume, command.common));
    io::Image& field = output.image();
    chain_field_values(steps, AffineMap::from_geometry(geometry.spacing, geometry.origin, geometry.direction), Shape(dimension, 0),
                       field.spatial, layout.values, field.nchw(), command.common.threads);
    output.commit();
}

std::string field_format_tags() {
    std::string tags;
    for (const io::TransformFormat format : io::displacement_field_formats()) tags += (tags.empty() ? "" : ", ") + io::transform_format_name(format);
    return tags;
}

std::string format_tags() {
    std::string tags;
    for (const auto& [tag, format] : io::transform_format_tags()) tags += (tags.empty() ? "" : ", ") + tag;
    return tags;
}

void run_convert_transform(const ConvertTransformCommand& command) {
    apply_common_options(command.common);
    const io::TransformSpec output = io::parse_transform_spec(command.output);
    if (output.inverse || output.per_volume || !output.source.empty() || !output.reference.empty()) {
        throw std::invalid_argument("-o " + command.output + ": an output takes a format tag only (" + format_tags() + ")");
    }
    const bool field_output = names_a_volume(output.file);
    const io::TransformFormat field_format = output.format == io::TransformFormat::Detect ? io::TransformFormat::Itk : output.format;
    if (field_output) {
        const auto formats = io::displacement_field_formats();
        if (std::find(formats.begin(), formats.end(), field_format) == formats.end()) {
            throw std::invalid_argument("-o " + command.output + ": " + io::transform_format_name(field_format) +
                                        " has no displacement field layout; a field is written as one of " + field_format_tags());
        }
    }
    const std::optional<io::TransformFormat> format =
        field_output ? std::optional<io::TransformFormat>(field_format) : io::transform_output_format(output.file, output.format);
    if (!format) {
        throw std::invalid_argument("-o " + output.file.string() + ": the name does not say which package's format to write; add a tag: " +
                                    output.file.string() + ",TAG with TAG one of " + format_tags());
    }
    if (!field_output && !io::writes_matrices(*format)) {
        throw std::invalid_argument("-o " + command.output + ": " + io::transform_format_name(*format) +
                                    " writes displacement fields: name a volume file (.nii.gz) and give -r");
    }
    std::vector<std::filesystem::path> inputs;
    std::vector<io::TransformSpec> specs;
    for (const auto& text : command.transforms) {
        specs.push_back(io::parse_transform_spec(text));
        inputs.push_back(specs.back().file);
    }
    for (const auto& file : files_of({&command.moving, &command.reference})) inputs.push_back(file);
    check_output_differs(output.file, inputs);
    const io::ReadOptions read_options = to_read_options(command.volume, command.common);
    std::shared_ptr<const io::Image> moving, reference;
    if (!command.moving.empty()) moving = load_image_header(command.moving, read_options);
    if (!command.reference.empty()) reference = load_image_header(command.reference, read_options);
    const std::size_t dimension = moving ? moving->spatial.size() : reference ? reference->spatial.size() : 3;
    io::TransformContext context;
    context.dimension = dimension;
    context.moving = moving.get();
    context.reference = reference.get();
    context.moving_file = command.moving.path;
    context.reference_file = command.reference.path;

    // -t T1 -t T2 ... maps a point p to ...T2(T1(p)), as resample applies them; inside a file the
    // last step acts first.
    std::vector<PointTransform> steps;  // in the order they act
    std::vector<std::shared_ptr<const Tensor>> buffers;
    for (auto spec = specs.begin(); spec != specs.end(); ++spec) {
        context.acts_first = spec == specs.begin();
        context.acts_last = spec + 1 == specs.end();
        const io::TransformFile file = io::read_transform(*spec, context, read_options);
        for (const auto& warning : file.warnings) spdlog::warn("{}", warning);
        for (const auto& note : file.notes) spdlog::info("{}", note);
        if (!field_output) {
            for (const auto& step : file.steps) {
                if (!step.affine) {
                    throw io::FileError(spec->file, "a displacement field cannot be written as a matrix; write the chain as a field "
                                                    "on the reference's grid: -o FIELD.nii.gz -r REF");
                }
            }
        }
        steps.insert(steps.end(), file.steps.rbegin(), file.steps.rend());
        buffers.insert(buffers.end(), file.buffers.begin(), file.buffers.end());
    }
    if (field_output) {
        if (!reference) throw std::invalid_argument("-o " + output.file.string() + ": a displacement field is written on the reference's grid: give -r REF");
        write_displacement_field(output.file, *format, steps, *reference, context, command);
        spdlog::info("wrote {} ({} displacement field on {}'s grid)", output.file.string(), io::transform_format_name(*format),
                     command.reference.string());
        return;
    }
    AffineMap chain = AffineMap::identity(dimension);
    for (const auto& step : steps) chain = step.affine->after(chain);
    io::write_affine_transform(output.file, *format, chain, context);
    spdlog::info("wrote {} ({})", output.file.string(), io::transform_format_name(*format));
}

}  // namespace

CommandBinding register_convert_transform_command(CLI::App& app) {
    auto command = std::make_shared<ConvertTransformCommand>();
    CLI::App* sub = app.add_subcommand("convert-transform", "Write a chain of transforms as one matrix, or one displacement field, in another package's format");
    sub->add_option("-t,--transform", command->transforms,
                    "Transform FILE[,tag...] (as resample takes it); repeat for a chain, the first acting first")
        ->required();
    sub->add_option("-o,--output", command->output,
                    "Output FILE[,format]: a matrix as itk (.tfm/.txt, .mat is ITK's Matlab), fsl, lta, afni, niftyreg, ras, lps (.tfm, "
                    ".lta and .1D say it themselves); a volume (.nii.gz, ...) as a field on -r's grid: itk (the default), fsl, mrtrix, "
                    "spm, world")
        ->required();
    sub->add_option("-i,--moving", command->moving, "The moving image (FSL, LTA and AFNI conventions are defined through it)");
    sub->add_option("-r,--reference", command->reference, "The reference image (the grid resample would sample onto)");
    add_volume_options(*sub, command->volume, false);
    add_common_options(*sub, command->common);
    sub->footer(
        "Examples:\n"
        "  gridwarp convert-transform -t bold2t1.mat,fsl -i bold.nii.gz -r t1.nii.gz -o bold2t1.tfm\n"
        "  gridwarp convert-transform -t 0GenericAffine.mat -i moving.nii.gz -r fixed.nii.gz -o reg.lta\n"
        "  gridwarp convert-transform -t reg.lta -t motion.tfm -o combined.txt,itk\n"
        "  gridwarp convert-transform -t affine.mat -t warp.nii.gz -r fixed.nii.gz -i moving.nii.gz -o warp_fnirt.nii.gz,fsl");
    return set_command_action(*sub, command, run_convert_transform);
}

}  // namespace gridwarp::cli
