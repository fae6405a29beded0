// gridwarp reorient: a volume's voxel axes permuted and flipped to point RAS, LPS, ... or as another
// image's do: the same values at the same world positions, nothing interpolated.
#include <spdlog/spdlog.h>

#include <memory>

#include "cli_common.hpp"
#include "file_options.hpp"
#include "image_arguments.hpp"
#include "messages.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/reorient.hpp"

namespace gridwarp::cli {

namespace {

struct ReorientCommand {
    ImageArgument input;
    OutputArgument output;
    std::string to;
    VolumeFlags volume;
    CommonOptions common;

    ImageArgument* image_argument(std::string_view option) { return option == "input" ? &input : nullptr; }
};

void run_reorient(const ReorientCommand& command) {
    apply_common_options(command.common);
    const std::string like_prefix = "like:";
    const bool like = command.to.rfind(like_prefix, 0) == 0;
    const std::filesystem::path like_file = like ? std::filesystem::path(command.to.substr(like_prefix.size())) : std::filesystem::path();
    std::vector<std::filesystem::path> inputs = files_of({&command.input});
    if (like) inputs.push_back(like_file);
    check_output_differs(command.output, inputs);
    const io::ReadOptions read_options = to_read_options(command.volume, command.common);
    std::string code = command.to;
    if (like) {
        const io::Image reference = io::read_image_header(like_file, read_options);
        if (reference.spatial.size() != 3 || !reference.geometry) {
            throw io::FileError(like_file, "--to like:FILE takes a 3-D volume's orientation; this is not one");
        }
        code = io::orientation_code(*reference.geometry);
    }
    const std::shared_ptr<const io::Image> input = load_image(command.input, read_options);
    report_warnings(*input);
    if (input->spatial.size() != 3 || !input->geometry || input->batch != 1) {
        throw io::FileError(command.input.path, "reorient takes a 3-D volume (or a 4-D series) with a geometry, got size " +
                                                    image_size_text(input->spatial));
    }
    const std::string from = io::orientation_code(*input->geometry);
    io::AxisReorder reorder;
    try {
        reorder = io::reorder_to(*input->geometry, code);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("--to: ") + e.what());
    }
    io::Image result = io::reoriented(*input, reorder);
    const std::string to = io::orientation_code(*result.geometry);
    if (command.output.in_memory()) {
        *command.output.result = std::move(result);
    } else {
        io::write_image(command.output.path, result, to_write_options(command.volume, command.common));
    }
    spdlog::info("wrote {} ({} -> {}{})", command.output.string(), from, to,
                 reorder.identity() ? ", already so: the voxels as they were" : ": voxel axes permuted and flipped, nothing interpolated");
}

}  // namespace

CommandBinding register_reorient_command(CLI::App& app) {
    auto command = std::make_shared<ReorientCommand>();
    CLI::App* sub = app.add_subcommand("reorient", "Permute and flip a volume's voxel axes to RAS, LPS, ... (lossless, no interpolation)");
    sub->add_option("-i,--input", command->input, "Input volume (3-D, or a 4-D series)")->required();
    sub->add_option("-o,--output", command->output, "Output volume")->required();
    sub->add_option("--to", command->to,
                    "Orientation: three letters, the direction each voxel axis points towards (RAS, LPS, LIA, ...), or like:FILE "
                    "for another volume's")
        ->required();
    add_volume_options(*sub, command->volume, true);
    add_common_options(*sub, command->common);
    sub->footer(
        "Examples:\n"
        "  gridwarp reorient -i t1.nii.gz -o t1_ras.nii.gz --to RAS\n"
        "  gridwarp reorient -i dwi.nii.gz -o dwi_like_t1.nii.gz --to like:t1.nii.gz");
    return set_command_action(*sub, command, run_reorient);
}

}  // namespace gridwarp::cli
