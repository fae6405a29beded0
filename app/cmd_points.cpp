// gridwarp points: map points (landmarks, electrodes, seeds) through a transform chain, as resample
// maps a reference point into the moving image, or the other way with --from-moving.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "cli_common.hpp"
#include "file_options.hpp"
#include "geometry_options.hpp"
#include "messages.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/points_io.hpp"
#include "gridwarp/io/transform_io.hpp"
#include "gridwarp/physical.hpp"

namespace gridwarp::cli {

namespace {

struct PointsCommand {
    std::filesystem::path input;
    std::filesystem::path output;
    std::vector<std::string> transforms;
    std::filesystem::path reference;
    std::filesystem::path moving;
    std::string space = "ras";
    bool from_moving = false;
    double tolerance = 1e-5;
    VolumeFlags volume;
    CommonOptions common;
};

void run_points(const PointsCommand& command) {
    apply_common_options(command.common);
    if (!(command.tolerance > 0) || !std::isfinite(command.tolerance)) throw std::invalid_argument("--tolerance must be a positive number of mm");
    std::vector<std::filesystem::path> inputs{command.input};
    for (const auto& text : command.transforms) inputs.push_back(parse_transform_argument(text).file);
    if (!command.reference.empty()) inputs.push_back(command.reference);
    if (!command.moving.empty()) inputs.push_back(command.moving);
    check_output_differs(command.output, inputs);
    const std::string input_format = io::point_format_of(command.input), output_format = io::point_format_of(command.output);
    if (output_format == "gifti" && input_format != "gifti") {
        throw io::FileError(command.output, "a GIFTI surface is written only from a GIFTI input, whose triangles and metadata it keeps");
    }
    // GIFTI stores RAS coordinates whatever the command line says; LPS would be a silent flip.
    if ((input_format == "gifti" || output_format == "gifti") && command.space != "ras") {
        throw std::invalid_argument("--space " + command.space + ": GIFTI surfaces hold RAS coordinates; leave --space out");
    }

    io::PointSet points = io::read_points(command.input, command.common.threads);
    const io::ReadOptions read_options = to_read_options(command.volume, command.common);
    std::optional<io::Image> reference, moving;
    if (!command.reference.empty()) reference = io::read_image_header(command.reference, read_options);
    if (!command.moving.empty()) moving = io::read_image_header(command.moving, read_options);
    for (const std::optional<io::Image>* image : {&reference, &moving}) {
        if (*image && (*image)->spatial.size() != points.dimension) {
            throw io::FileError(image == &reference ? command.reference : command.moving,
                                "the image is " + std::to_string((*image)->spatial.size()) + "-D but the points are " +
                                    std::to_string(points.dimension) + "-D");
        }
    }
    std::vector<std::shared_ptr<const Tensor>> buffers;
    const std::vector<PointTransform> steps = read_transform_chain(command.transforms, points.dimension, moving ? &*moving : nullptr,
                                                                   reference ? &*reference : nullptr, read_options, buffers);
    InversionReport report;
    try {
        report = map_point_coordinates(steps, points.coordinates, points.dimension, command.space == "ras", command.from_moving,
                                       command.tolerance, command.common.threads);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("--from-moving: the chain has no inverse: ") + e.what());
    }
    if (report.unconverged > 0) {
        throw io::FileError(command.input, std::to_string(report.unconverged) + " point(s), the first point " +
                                               std::to_string(report.first_unconverged) + " (0-based), do not invert within --tolerance " +
                                               std::to_string(command.tolerance) + " mm (the field folds or runs off there)");
    }
    if (report.off_grid > 0) {
        spdlog::warn("{} point(s) are reached from no point of a displacement field's grid: they stay where they are there "
                     "(the field is zero off its grid)", report.off_grid);
    }
    if (command.from_moving) spdlog::info("inverted the chain at {} point(s): largest residual {:.3g} mm", points.size(), report.max_residual);
    io::write_points(command.output, points, command.common.threads);
    spdlog::info("wrote {} ({} {}-D point(s), {})", command.output.string(), points.size(), points.dimension, command.space);
}

}  // namespace

CommandBinding register_points_command(CLI::App& app) {
    auto command = std::make_shared<PointsCommand>();
    CLI::App* sub = app.add_subcommand("points", "Map points through a transform chain, as resample maps reference points");
    sub->add_option("-i,--input", command->input, "Points: .csv or .tsv with x,y[,z] columns (others kept), .npy (N, 2|3), or a GIFTI surface .gii (RAS)")->required();
    sub->add_option("-o,--output", command->output, "Output points (.csv, .tsv, .npy, or .gii from a .gii input)")->required();
    sub->add_option("-t,--transform", command->transforms,
                    "Transform files as resample takes them, the first acting first on reference points (FILE, FILE,inverse, [FILE,1])")
        ->take_all()
        ->allow_extra_args(false);
    sub->add_option("-r,--reference", command->reference, "The reference image, for transforms defined on its grid (FSL, LTA)");
    sub->add_option("--moving", command->moving, "The moving image, for transforms defined on its grid (FSL, LTA)");
    sub->add_option("--space", command->space, "ras (world coordinates as NIfTI and nibabel give them) or lps (ITK's, ANTs' CSV)")
        ->check(CLI::IsMember({"ras", "lps"}))
        ->capture_default_str();
    sub->add_flag("--from-moving", command->from_moving,
                  "The points are in the moving image's space: map them into the reference's (the chain inverted, fields by "
                  "fixed-point iteration)");
    sub->add_option("--tolerance", command->tolerance, "--from-moving: largest |chain(x) - point| accepted, in mm")->capture_default_str();
    add_volume_options(*sub, command->volume, false);
    add_common_options(*sub, command->common);
    sub->footer(
        "Examples:\n"
        "  gridwarp points -i electrodes.csv -o in_template.csv -t warp.nii.gz -t affine.mat --space lps  # = antsApplyTransformsToPoints\n"
        "  gridwarp points -i seeds.tsv -o moved.tsv -t affine.mat --from-moving   # moving-image points into the reference\n"
        "  gridwarp points -i lh.white.surf.gii -o lh.white_moved.surf.gii -t warp.nii.gz -t affine.mat  # a surface's vertices");
    return set_command_action(*sub, command, run_points);
}

}  // namespace gridwarp::cli
