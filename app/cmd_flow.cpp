// gridwarp flow: backward-warp an image or volume by a flow / displacement field.
#include <spdlog/spdlog.h>

#include <memory>

#include "cli_common.hpp"
#include "sampling_options.hpp"
#include "file_options.hpp"
#include "image_arguments.hpp"
#include "messages.hpp"
#include "sample_and_write.hpp"
#include "tiled_sampling.hpp"
#include "gridwarp/flow.hpp"
#include "gridwarp/io/flow_io.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::cli {

namespace {

struct FlowCommand {
    ImageArgument input;
    ImageArgument flow;
    OutputArgument output;
    std::string units = "pixels";
    bool absolute = false;
    SamplingFlags sampling;
    TilingFlags tiling;
    VolumeFlags volume;
    CommonOptions common;

    ImageArgument* image_argument(std::string_view option) {
        return option == "input" ? &input : option == "flow" ? &flow : nullptr;
    }
};

FlowUnits parse_units(const std::string& name) {
    if (name == "pixels" || name == "voxels") return FlowUnits::Pixels;
    if (name == "normalized") return FlowUnits::Normalized;
    throw std::invalid_argument("unknown --units '" + name + "': expected pixels (or voxels) or normalized");
}

// One field for every item of a stack (the pages of a TIFF, the items of a .npy): item 0's
// positions given for each of `batch` items.
class PositionsForEveryItem final : public PositionSource {
public:
    PositionsForEveryItem(const PositionSource& one, std::int64_t batch) : one_(one), batch_(batch) {}
    std::int64_t batch() const override { return batch_; }
    const Shape& output_shape() const override { return one_.output_shape(); }
    DType coordinate_dtype() const override { return one_.coordinate_dtype(); }
    CoordinateSpace space() const override { return one_.space(); }
    void row(std::int64_t, const std::int64_t* outer, std::int64_t start, std::int64_t count, float* xyz) const override {
        one_.row(0, outer, start, count, xyz);
    }
    void row(std::int64_t, const std::int64_t* outer, std::int64_t start, std::int64_t count, double* xyz) const override {
        one_.row(0, outer, start, count, xyz);
    }
    const float* stored_row(std::int64_t, const std::int64_t* outer, std::int64_t start) const override {
        return one_.stored_row(0, outer, start);
    }
    bool linear_row(std::int64_t, const std::int64_t* outer, LinearRow* row) const override { return one_.linear_row(0, outer, row); }

private:
    const PositionSource& one_;
    std::int64_t batch_;
};

void run_flow(const FlowCommand& command) {
    apply_common_options(command.common);
    CommandProgress progress("flow", command.common);
    progress.phase("reading", 0, 3);
    SampleOptions options = to_sample_options(command.sampling, command.common);
    const FlowUnits units = parse_units(command.units);
    check_output_differs(command.output, files_of({&command.input, &command.flow}));

    const io::ReadOptions read_options = to_read_options(command.volume, command.common);
    // A tiled input is described from its header first; it is read whole only if it is not sampled by tiles.
    const std::unique_ptr<io::TileSource> tiles = open_input_tiles(command.input, command.output, command.tiling, read_options);
    const std::shared_ptr<const io::Image> loaded_input =
        tiles ? std::make_shared<const io::Image>(tiles->describe()) : load_image(command.input, read_options);
    const io::Image& input = *loaded_input;
    report_warnings(input);
    warn_if_label_map(command.input.path, input, options);
    const io::FlowField flow = load_flow(command.flow, read_options);
    const auto rank = static_cast<std::int64_t>(input.spatial.size());
    set_gaussian_sigma(options, command.sampling, input.geometry ? input.geometry->spacing : std::vector<double>{}, rank);
    const Shape& field_shape = flow.field.shape();
    if (static_cast<std::int64_t>(field_shape.size()) != rank + 2 || field_shape.back() != rank) {
        throw std::invalid_argument(command.flow.string() + ": a " + std::to_string(rank) + "-D input (" +
                                    command.input.string() + ", size " + image_size_text(input.spatial) +
                                    ") needs a flow with " + std::to_string(rank) + " components per point, got shape " +
                                    shape_to_string(field_shape));
    }
    if (field_shape[0] != input.batch && field_shape[0] != 1) {
        throw std::invalid_argument(command.flow.string() + ": the flow holds N=" + std::to_string(field_shape[0]) +
                                    " fields but " + command.input.string() + " has N=" + std::to_string(input.batch));
    }
    // A raw GridSample grid (normalized, absolute) is read as `gridwarp sample` reads it, in the
    // grid's own precision (float32 grids are unnormalized in float), so that the two agree bit for bit.
    std::unique_ptr<PositionSource> source;
    if (units == FlowUnits::Normalized && command.absolute && is_floating(flow.field.dtype())) {
        source = std::make_unique<GridPositions>(flow.field.view());
    } else {
        source = std::make_unique<FlowPositions>(flow.field.view(), units, command.absolute, options.align_corners);
    }
    std::unique_ptr<PositionSource> for_every_item;
    if (field_shape[0] != input.batch) for_every_item = std::make_unique<PositionsForEveryItem>(*source, input.batch);
    const PositionSource& positions = for_every_item ? *for_every_item : *source;
    const Shape output_spatial = positions.output_shape();

    // The output takes the flow's size: a small flow file can ask for any size.
    check_output_memory(command.output.path, "warping " + command.input.string() + " by " + command.flow.string(),
                        std::vector<std::int64_t>(output_spatial.begin(), output_spatial.end()),
                        static_cast<std::uint64_t>(input.batch * input.channels), dtype_size(input.dtype()),
                        to_memory_budget(command.volume.memory));
    io::Image description = io::Image::describe_like(input, output_spatial);
    // Output pixel i samples input pixel i + flow(i): the output grid is the input's grid, resized.
    if (input.geometry) description.geometry = input.geometry;
    check_sampling_work(command.sampling, options, input.nchw(), positions.output_shape());
    const AntialiasPlan antialias = plan_antialias(command.sampling, options, positions, input.spatial, input.dtype());
    if (command.sampling.explain) {
        Explanation explanation("flow");
        explanation.add("input", command.input.string() + " (" + describe_image(input) + ")");
        explanation.add("mapping", command.flow.string() + " (" + flow.format + ", field " + shape_to_string(flow.field.shape()) + ", " +
                                       command.units + (command.absolute ? ", absolute positions" : ", displacements") + ")");
        explanation.add("sampling", describe_sampling(options));
        explanation.add("anti-aliasing", antialias.explanation);
        if (tiles) {
            const bool by_tiles = samples_by_tiles(*tiles, command.tiling, options, input.dtype(), positions);
            explanation.add("tiles", by_tiles ? "the output a tile at a time, within --working-memory" : "none: the input is read whole");
        }
        explanation.add("output", command.output.string() + ", size " + image_size_text(output_spatial));
        explanation.print();
        return;
    }
    if (tiles && samples_by_tiles(*tiles, command.tiling, options, input.dtype(), positions)) {
        sample_by_tiles(command.output, command.input.path, *tiles, description, to_write_options(command.volume, command.common), positions,
                        options, antialias, command.tiling, &progress);
        return;
    }
    const std::shared_ptr<const io::Image> whole_input = tiles ? load_image(command.input, read_options) : loaded_input;
    Tensor filtered;
    const ConstTensorView pixels = input_to_sample(whole_input->nchw(), antialias, options, false, command.input.path,
                                                   to_memory_budget(command.volume.memory), filtered);
    sample_and_write(command.output, std::move(description), to_write_options(command.volume, command.common), pixels, positions, options,
                     &progress);
}

}  // namespace

CommandBinding register_flow_command(CLI::App& app) {
    auto command = std::make_shared<FlowCommand>();
    CLI::App* sub = app.add_subcommand("flow", "Warp an image or volume by a flow field: out(x) = in(x + flow(x))");
    sub->add_option("-i,--input", command->input, "Image, volume or .npy tensor to warp")->required();
    sub->add_option("-f,--flow", command->flow,
                    "Flow: .flo, KITTI .png, .npy (H,W,2)/(D,H,W,3)[with leading N], or a NIfTI/NRRD/MHA vector image")
        ->required();
    sub->add_option("-o,--output", command->output, "Output file (the flow's size); its extension picks the format")->required();
    sub->add_option("--units", command->units, "pixels (voxels) or normalized")->capture_default_str();
    sub->add_flag("--absolute", command->absolute, "The flow holds sampling positions, not displacements");
    add_sampling_options(*sub, command->sampling);
    add_antialias_option(*sub, command->sampling, "off");
    add_tiling_options(*sub, command->tiling);
    add_volume_options(*sub, command->volume, true);
    add_common_options(*sub, command->common);
    sub->footer(
        "Examples:\n"
        "  gridwarp flow -i frame2.png -f flow.flo -o frame2_warped.png\n"
        "  gridwarp flow -i frame2.png -f kitti_flow.png -o warped.png --fill 0\n"
        "  gridwarp flow -i moving.nii.gz -f displacement.nii.gz -o warped.nii.gz --padding border\n"
        "  gridwarp flow -i X.npy -f grid.npy -o Y.npy --units normalized --absolute --antialias off   # = sample");
    return set_command_action(*sub, command, run_flow);
}

}  // namespace gridwarp::cli
