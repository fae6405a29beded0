// gridwarp jacobian: the determinant of a transform chain's spatial Jacobian at every voxel of a
// reference grid, for morphometry (local volume change: > 1 grows, < 1 shrinks, <= 0 folds).
#include <spdlog/spdlog.h>

#include <cmath>
#include <memory>
#include <optional>

#include "cli_common.hpp"
#include "file_options.hpp"
#include "geometry_options.hpp"
#include "messages.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/physical.hpp"

namespace gridwarp::cli {

namespace {

struct JacobianCommand {
    std::vector<std::string> transforms;
    ImageArgument reference;
    ImageArgument moving;
    OutputArgument output;
    bool log = false;
    VolumeFlags volume;
    CommonOptions common;

    ImageArgument* image_argument(std::string_view option) {
        return option == "reference" ? &reference : option == "moving" ? &moving : nullptr;
    }
};

void run_jacobian(const JacobianCommand& command) {
    apply_common_options(command.common);
    std::vector<std::filesystem::path> inputs = files_of({&command.reference, &command.moving});
    for (const auto& text : command.transforms) inputs.push_back(parse_transform_argument(text).file);
    check_output_differs(command.output, inputs);

    const io::ReadOptions read_options = to_read_options(command.volume, command.common);
    const std::shared_ptr<const io::Image> reference_header = load_image_header(command.reference, read_options);
    const io::Image& reference = *reference_header;
    report_warnings(reference);
    const std::size_t dimension = reference.spatial.size();
    if (reference.batch != 1 || (dimension != 2 && dimension != 3)) {
        throw io::FileError(command.reference.path, "the reference must be one 2-D or 3-D image, got size " + image_size_text(reference.spatial));
    }
    std::shared_ptr<const io::Image> moving;
    if (!command.moving.empty()) moving = load_image_header(command.moving, read_options);
    const io::Geometry geometry = reference.geometry ? *reference.geometry : io::Geometry::identity(dimension);
    check_output_size(command.output.path, command.reference.string(), std::vector<std::int64_t>(reference.spatial.begin(), reference.spatial.end()), 1,
                      sizeof(float), to_memory_budget(command.volume.memory));
    std::vector<std::shared_ptr<const Tensor>> buffers;
    const std::vector<PointTransform> steps =
        read_transform_chain(command.transforms, dimension, moving.get(), &reference, read_options, buffers);

    io::Image description;
    description.kind = io::FileKind::Volume;
    description.format = reference.format;
    description.spatial = reference.spatial;
    description.geometry = geometry;
    description.pixels = Tensor(DType::Float32, Shape{0});
    // The determinants are made in the output's own pixels (a plain .nii's mapped pages).
    std::optional<io::PendingOutput> pending;
    io::Image in_memory;
    if (command.output.in_memory()) {
        in_memory = io::Image::allocate_like(description, description.spatial);
        in_memory.geometry = geometry;
    } else {
        pending.emplace(command.output.path, std::move(description), to_write_options(command.volume, command.common));
    }
    io::Image& output = pending ? pending->image() : in_memory;
    const TensorView values(DType::Float32, output.pixels.data(), reference.spatial);
    try {
        chain_jacobian_determinant(steps, AffineMap::from_geometry(geometry.spacing, geometry.origin, geometry.direction),
                                   reference.spatial, values, command.common.threads);
    } catch (const std::invalid_argument& e) {
        throw io::FileError(command.reference.path, e.what());
    }
    float* determinants = output.pixels.data_as<float>();
    const std::int64_t voxels = shape_numel(reference.spatial);
    std::int64_t folded = 0;
    for (std::int64_t v = 0; v < voxels; ++v) {
        folded += determinants[v] <= 0.0f ? 1 : 0;
        // log of a fold (a non-positive determinant) is not a number: NaN marks it.
        if (command.log) determinants[v] = determinants[v] > 0.0f ? std::log(determinants[v]) : std::nanf("");
    }
    if (pending) {
        pending->commit();
    } else {
        *command.output.result = std::move(in_memory);
    }
    if (folded > 0) {
        spdlog::warn("{} of {} voxels have a non-positive determinant: the chain folds there", folded, voxels);
    }
    spdlog::info("wrote {} ({} of the Jacobian's determinant, {} voxels, {} non-positive)", command.output.string(),
                 command.log ? "the log" : "float32", voxels, folded);
}

}  // namespace

CommandBinding register_jacobian_command(CLI::App& app) {
    auto command = std::make_shared<JacobianCommand>();
    CLI::App* sub = app.add_subcommand("jacobian", "The determinant of a transform chain's Jacobian at every voxel of a reference grid");
    sub->add_option("-t,--transform", command->transforms, "Transform files as resample takes them, the first acting first")
        ->take_all()
        ->allow_extra_args(false)
        ->required();
    sub->add_option("-r,--reference", command->reference, "The grid: the determinant is written at its voxels")->required();
    sub->add_option("-i,--moving", command->moving, "The moving image, for transforms defined through it (FSL, LTA)");
    sub->add_option("-o,--output", command->output, "Output volume (float32, the reference's grid)")->required();
    sub->add_flag("--log", command->log, "Write the natural log of the determinant (NaN where it is not positive)");
    add_volume_options(*sub, command->volume, true);
    add_common_options(*sub, command->common);
    sub->footer(
        "Examples:\n"
        "  gridwarp jacobian -t 1Warp.nii.gz -t 0GenericAffine.mat -r template.nii.gz -o jacobian.nii.gz\n"
        "  gridwarp jacobian -t warp.nii.gz -r fixed.nii.gz -o logjac.nii.gz --log");
    return set_command_action(*sub, command, run_jacobian);
}

}  // namespace gridwarp::cli
