// gridwarp grid: the ONNX AffineGrid operator, writing a sampling grid as .npy.
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>

#include "cli_common.hpp"
#include "file_options.hpp"
#include "gridwarp/io/npy.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/text_matrix.hpp"
#include "gridwarp/positions.hpp"

namespace gridwarp::cli {

namespace {

struct GridCommand {
    std::filesystem::path theta;
    std::vector<std::int64_t> size;
    std::filesystem::path output;
    bool align_corners = false;
    std::string dtype;
    MemoryFlags memory;
    CommonOptions common;
};

// A text file holds one matrix: r rows of r+1 numbers, or the (r+1)x(r+1) homogeneous form.
Tensor theta_from_text(const std::filesystem::path& file, std::int64_t rank) {
    const io::TextMatrix matrix = io::read_text_matrix(file);
    const auto rows = static_cast<std::int64_t>(matrix.rows);
    const auto columns = static_cast<std::int64_t>(matrix.columns);
    const std::string expected = "expected " + std::to_string(rank) + "x" + std::to_string(rank + 1) + " (or " +
                                 std::to_string(rank + 1) + "x" + std::to_string(rank + 1) + " homogeneous) for a " +
                                 std::to_string(rank) + "-D size";
    if (columns != rank + 1 || (rows != rank && rows != rank + 1)) {
        throw io::FileError(file, "theta is " + std::to_string(rows) + "x" + std::to_string(columns) + ", " + expected);
    }
    if (rows == rank + 1) {
        if (!io::is_homogeneous_last_row(&matrix.values[static_cast<std::size_t>(rank * columns)], static_cast<std::size_t>(columns))) {
            throw io::FileError(file, "the last row of a homogeneous theta must be 0 ... 0 1 (within 1e-6)");
        }
    }
    Tensor theta(DType::Float64, {1, rank, rank + 1});
    std::copy_n(matrix.values.begin(), rank * (rank + 1), theta.data_as<double>());
    return theta;
}

void run_grid(const GridCommand& command) {
    apply_common_options(command.common);
    check_output_differs(command.output, {command.theta});
    const auto& size = command.size;
    if (size.size() < 3) {
        throw std::invalid_argument("--size must list N,C and at least one spatial extent (N,C,H,W or N,C,D,H,W), got " +
                                    std::to_string(size.size()) + " values");
    }
    const auto rank = static_cast<std::int64_t>(size.size()) - 2;
    const bool text = command.theta.extension() != ".npy";
    Tensor theta = text ? theta_from_text(command.theta, rank) : io::read_npy(command.theta);
    // Text holds decimals: the grid is float32 unless asked otherwise, like an ONNX float32 theta.
    DType grid_dtype = text ? DType::Float32 : theta.dtype();
    if (!command.dtype.empty()) {
        try {
            grid_dtype = parse_dtype(command.dtype);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(std::string("--dtype: ") + e.what());
        }
    }
    if (command.dtype.empty() && !is_floating(grid_dtype)) {
        throw io::FileError(command.theta, std::string("theta is ") + std::string(dtype_name(grid_dtype)) +
                                               ", expected float16, bfloat16, float32 or float64 "
                                               "(or pass --dtype to convert it)");
    }
    if (!is_floating(grid_dtype)) {
        throw std::invalid_argument("--dtype must be float16, bfloat16, float32 or float64, got " + command.dtype);
    }
    if (theta.dtype() != grid_dtype) {
        try {
            theta = convert_to(theta.view(), grid_dtype);
        } catch (const std::invalid_argument& e) {  // complex or string theta
            throw io::FileError(command.theta, std::string("theta cannot be converted to --dtype ") +
                                                   std::string(dtype_name(grid_dtype)) + ": " + e.what());
        }
    }

    // The grid (N, O1..Or, r) holds rank values per output point; C only has to be positive.
    if (size[1] < 1) throw std::invalid_argument("--size: expected positive sizes, got " + std::to_string(size[1]));
    std::vector<std::int64_t> points{size[0]};
    points.insert(points.end(), size.begin() + 2, size.end());
    check_output_size(command.output, "--size", points, static_cast<std::uint64_t>(rank), dtype_size(grid_dtype),
                      to_memory_budget(command.memory));
    Tensor grid;
    try {
        grid = affine_grid(theta.view(), Shape(size.begin(), size.end()), command.align_corners);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(command.theta.string() + ": " + e.what());
    }
    io::write_npy(command.output, grid.view());
    spdlog::debug("wrote {}: {} {}", command.output.string(), dtype_name(grid.dtype()), shape_to_string(grid.shape()));
}

}  // namespace

CommandBinding register_grid_command(CLI::App& app) {
    auto command = std::make_shared<GridCommand>();
    CLI::App* sub = app.add_subcommand("grid", "Make the sampling grid of an affine map (ONNX AffineGrid)");
    sub->add_option("-t,--theta", command->theta,
                    "theta as .npy (N, r, r+1), or a text file with the rows of one matrix")->required();
    sub->add_option("-s,--size", command->size, "Output size N,C,H,W or N,C,D,H,W (any N,C,D1..Dr)")
        ->required()->delimiter(',');
    sub->add_option("-o,--output", command->output, "Grid (N, O1..Or, r) as .npy")->required();
    sub->add_flag("--align-corners", command->align_corners, "-1 and 1 are the centres of the corner pixels");
    sub->add_option("--dtype", command->dtype, "Grid dtype: float32, float64, float16, bfloat16 "
                                               "(default: theta's for .npy, float32 for text)");
    add_memory_options(*sub, command->memory);
    add_common_options(*sub, command->common);
    sub->footer(
        "Examples:\n"
        "  gridwarp grid --theta theta.npy --size 2,3,64,64 --output grid.npy\n"
        "  printf '0.8 -0.2 0.1\\n0.2 0.8 0\\n' > theta.txt\n"
        "  gridwarp grid --theta theta.txt --size 1,1,480,640 --output grid.npy --align-corners");
    return set_command_action(*sub, command, run_grid);
}

}  // namespace gridwarp::cli
