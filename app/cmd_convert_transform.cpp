// gridwarp convert-transform: a chain of transforms, read in any package's convention, written as
// one matrix in another's, or as one displacement field on a reference grid.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
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
    std::filesystem::path moving;
    std::filesystem::path reference;
    VolumeFlags volume;
    CommonOptions common;
};

// A volume file name (.nii[.gz], .nrrd, .nhdr, .mha, .mhd): the chain is written as a displacement field.
bool names_a_volume(const std::filesystem::path& file) {
    try {
        return io::kind_for_path(file) == io::FileKind::Volume;
    } catch (const std::exception&) {
        return false;
    }
}

// Whether a volume file name is NIfTI's (.nii, .nii.gz, .hdr, .img, .img.gz).
bool names_nifti(const std::filesystem::path& file) {
    std::string name = file.filename().string();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const char* extension : {".nii", ".nii.gz", ".hdr", ".img", ".img.gz"}) {
        const std::string_view tail(extension);
        if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0) return true;
    }
    return false;
}

// The chain as ITK's displacement field on the reference grid (as antsApplyTransforms -o [FIELD,1]
// writes it): at each voxel's point p the vector chain(p) - p, LPS millimetres, float32 vectors.
// A NIfTI file stores the components a volume apart: the vectors are made in that layout (named a
// vector field by ITK's intent, which a new file's header gets) and, for a plain .nii, in the
// file's mapped pages, so that no buffer is copied. Not streamed a block at a time as resample's
// outputs are: one evaluation of the chain gives a voxel's every component, a volume apart.
void write_displacement_field(const std::filesystem::path& file, const std::vector<PointTransform>& steps, const io::Image& reference,
                              const ConvertTransformCommand& command) {
    const std::size_t dimension = reference.spatial.size();
    const io::Geometry geometry = reference.geometry ? *reference.geometry : io::Geometry::identity(dimension);
    check_output_size(file, command.reference.string(), std::vector<std::int64_t>(reference.spatial.begin(), reference.spatial.end()),
                      dimension, sizeof(float), to_memory_budget(command.volume.memory));
    io::Image field;
    field.kind = io::FileKind::Volume;
    field.format = "nifti";
    field.spatial = reference.spatial;
    field.channels = static_cast<std::int64_t>(dimension);
    field.layout = io::ChannelLayout::Interleaved;
    field.geometry = geometry;
    if (names_nifti(file)) {
        auto header = std::make_shared<io::NiftiHeader>();  // what a new file's header holds: mm and s, both transforms
        header->xyzt_units = 2 | 8;
        header->qform_code = header->sform_code = 1;
        header->pixdim = {1, 1, 1, 1, 1, 1, 1, 1};
        header->intent_code = 1007;
        field.nifti = header;
        field.layout = io::ChannelLayout::Planar;
    }
    field.pixels = Tensor(DType::Float32, Shape{0});  // a description: the output makes the voxels
    io::PendingOutput output(file, std::move(field), to_write_options(command.volume, command.common));
    io::Image& vectors = output.image();
    chain_displacements(steps, AffineMap::from_geometry(geometry.spacing, geometry.origin, geometry.direction), Shape(dimension, 0),
                        vectors.spatial, 0, vectors.nchw(), command.common.threads);
    output.commit();
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
    const bool field_output = names_a_volume(output.file) &&
                              (output.format == io::TransformFormat::Detect || output.format == io::TransformFormat::Itk);
    if (names_a_volume(output.file) && !field_output) {
        throw std::invalid_argument("-o " + command.output + ": a displacement field is written in ITK's convention (LPS millimetres); "
                                    "drop the tag or give ,itk");
    }
    const std::optional<io::TransformFormat> format =
        field_output ? std::optional<io::TransformFormat>(io::TransformFormat::Itk) : io::transform_output_format(output.file, output.format);
    if (!format) {
        throw std::invalid_argument("-o " + output.file.string() + ": the name does not say which package's format to write; add a tag: " +
                                    output.file.string() + ",TAG with TAG one of " + format_tags());
    }
    std::vector<std::filesystem::path> inputs;
    std::vector<io::TransformSpec> specs;
    for (const auto& text : command.transforms) {
        specs.push_back(io::parse_transform_spec(text));
        inputs.push_back(specs.back().file);
    }
    if (!command.moving.empty()) inputs.push_back(command.moving);
    if (!command.reference.empty()) inputs.push_back(command.reference);
    check_output_differs(output.file, inputs);

    const io::ReadOptions read_options = to_read_options(command.volume, command.common);
    std::optional<io::Image> moving, reference;
    if (!command.moving.empty()) moving = io::read_image_header(command.moving, read_options);
    if (!command.reference.empty()) reference = io::read_image_header(command.reference, read_options);
    const std::size_t dimension = moving ? moving->spatial.size() : reference ? reference->spatial.size() : 3;
    io::TransformContext context;
    context.dimension = dimension;
    context.moving = moving ? &*moving : nullptr;
    context.reference = reference ? &*reference : nullptr;
    context.moving_file = command.moving;
    context.reference_file = command.reference;

    // -t T1 -t T2 ... maps a point p to ...T2(T1(p)), as resample applies them; inside a file the
    // last step acts first.
    std::vector<PointTransform> steps;  // in the order they act
    std::vector<std::shared_ptr<const Tensor>> buffers;
    for (auto spec = specs.begin(); spec != specs.end(); ++spec) {
        context.acts_first = spec == specs.begin();
        context.acts_last = spec + 1 == specs.end();
        const io::TransformFile file = io::read_transform(*spec, context, read_options);
        for (const auto& warning : file.warnings) spdlog::warn("{}", warning);
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
        write_displacement_field(output.file, steps, *reference, command);
        spdlog::info("wrote {} (ITK displacement field, LPS mm, on {}'s grid)", output.file.string(), command.reference.string());
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
    CLI::App* sub = app.add_subcommand("convert-transform", "Write a chain of linear transforms as one matrix in another package's format");
    sub->add_option("-t,--transform", command->transforms,
                    "Transform FILE[,tag...] (as resample takes it); repeat for a chain, the first acting first")
        ->required();
    sub->add_option("-o,--output", command->output,
                    "Output FILE[,format]: itk (.tfm/.txt, .mat is ITK's Matlab), fsl, lta, afni, niftyreg, ras, lps; .tfm, .lta and "
                    ".1D say it themselves")
        ->required();
    sub->add_option("-i,--moving", command->moving, "The moving image (FSL, LTA and AFNI conventions are defined through it)");
    sub->add_option("-r,--reference", command->reference, "The reference image (the grid resample would sample onto)");
    add_volume_options(*sub, command->volume, false);
    add_common_options(*sub, command->common);
    sub->footer(
        "Examples:\n"
        "  gridwarp convert-transform -t bold2t1.mat,fsl -i bold.nii.gz -r t1.nii.gz -o bold2t1.tfm\n"
        "  gridwarp convert-transform -t 0GenericAffine.mat -i moving.nii.gz -r fixed.nii.gz -o reg.lta\n"
        "  gridwarp convert-transform -t reg.lta -t motion.tfm -o combined.txt,itk");
    return set_command_action(*sub, command, run_convert_transform);
}

}  // namespace gridwarp::cli
