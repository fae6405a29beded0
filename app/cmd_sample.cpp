// gridwarp sample: the ONNX GridSample operator on .npy tensors.
#include <spdlog/spdlog.h>

#include <memory>

#include "cli_common.hpp"
#include "sampling_options.hpp"
#include "file_options.hpp"
#include "messages.hpp"
#include "gridwarp/io/npy.hpp"

namespace gridwarp::cli {

namespace {

struct SampleCommand {
    std::filesystem::path input;
    std::filesystem::path grid;
    std::filesystem::path output;
    SamplingFlags sampling;
    MemoryFlags memory;
    CommonOptions common;
};

void run_sample(const SampleCommand& command) {
    apply_common_options(command.common);
    SampleOptions options = to_sample_options(command.sampling, command.common);
    check_output_differs(command.output, {command.input, command.grid});

    const Tensor input = io::read_npy(command.input);
    const Tensor grid = io::read_npy(command.grid);
    spdlog::debug("input {}: {} {}", command.input.string(), dtype_name(input.dtype()), shape_to_string(input.shape()));
    spdlog::debug("grid {}: {} {}", command.grid.string(), dtype_name(grid.dtype()), shape_to_string(grid.shape()));
    set_gaussian_sigma(options, command.sampling, {}, input.rank() - 2);

    // The output (N, C, O1..Or) takes the input's N and C and the grid's points: two small files
    // can ask for any size.
    const Shape& grid_shape = grid.shape();
    if (input.rank() >= 2 && grid.rank() >= 2) {
        std::vector<std::int64_t> points{input.shape()[0], input.shape()[1]};
        points.insert(points.end(), grid_shape.begin() + 1, grid_shape.end() - 1);
        check_output_memory(command.output, "sampling " + command.input.string() + " at " + command.grid.string(), points, 1,
                            dtype_size(input.dtype()), to_memory_budget(command.memory));
    }
    if (command.sampling.explain) {
        Explanation explanation("sample");
        explanation.add("input", command.input.string() + " (" + std::string(dtype_name(input.dtype())) + " " + shape_to_string(input.shape()) + ")");
        explanation.add("mapping", command.grid.string() + " (" + std::string(dtype_name(grid.dtype())) + " " + shape_to_string(grid.shape()) +
                                       ", normalized positions, as ONNX GridSample)");
        explanation.add("sampling", describe_sampling(options));
        explanation.add("output", command.output.string());
        explanation.print();
        return;
    }
    const auto naming_files = [&](const std::invalid_argument& e) {
        return std::invalid_argument(command.input.string() + " with " + command.grid.string() + ": " + e.what());
    };
    Shape output_shape;
    try {
        output_shape = grid_sample_output_shape(input.view(), grid.view());
    } catch (const std::invalid_argument& e) {
        throw naming_files(e);
    }
    check_sampling_work(command.sampling, options, input.view(), Shape(output_shape.begin() + 2, output_shape.end()));
    io::check_memory_budget(command.input, "the B-spline coefficient copy",
                            grid_sample_scratch_bytes(input.dtype(), static_cast<std::uint64_t>(input.numel()), static_cast<std::uint64_t>(shape_numel(output_shape)), options), 1,
                            to_memory_budget(command.memory));
    io::PendingNpy output(command.output, input.dtype(), output_shape);  // sampled straight into its file's pages
    try {
        grid_sample_into(input.view(), grid.view(), output.tensor(), options);
    } catch (const std::invalid_argument& e) {
        throw naming_files(e);
    }
    output.commit();
    spdlog::debug("wrote {}: {} {}", command.output.string(), dtype_name(input.dtype()), shape_to_string(output_shape));
}

}  // namespace

CommandBinding register_sample_command(CLI::App& app) {
    auto command = std::make_shared<SampleCommand>();
    CLI::App* sub = app.add_subcommand("sample", "Sample a tensor at the positions of a grid (ONNX GridSample)");
    sub->add_option("-i,--input", command->input, "Input tensor X (N, C, D1..Dr) as .npy, any dtype")->required();
    sub->add_option("-g,--grid", command->grid, "Grid (N, O1..Or, r) as .npy: float16/bfloat16/float32/float64")->required();
    sub->add_option("-o,--output", command->output, "Output Y (N, C, O1..Or) as .npy, X's dtype")->required();
    add_sampling_options(*sub, command->sampling);
    add_memory_options(*sub, command->memory);
    add_common_options(*sub, command->common);
    sub->footer(
        "Examples:\n"
        "  gridwarp sample --input X.npy --grid G.npy --output Y.npy\n"
        "  gridwarp sample -i X.npy -g G.npy -o Y.npy --mode cubic --padding reflection --align-corners\n"
        "  gridwarp sample -i labels.npy -g G.npy -o out.npy --mode nearest --fill 255");
    return set_command_action(*sub, command, run_sample);
}

}  // namespace gridwarp::cli
