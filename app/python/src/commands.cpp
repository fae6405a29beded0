// The file-level functions' compiled half: a command of the gridwarp program run in this process
// (app/command_runner.hpp) on options by name and images in memory, with its messages on stderr as
// the program writes them.
#include "commands.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>
#include <spdlog/sinks/ansicolor_sink.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "command_line.hpp"
#include "messages.hpp"
#include "command_runner.hpp"
#include "geometry_options.hpp"
#include "array_bridge.hpp"
#include "gridwarp/physical.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::python {

namespace {

// Warnings go to stderr as the program's do, through the descriptor taken before any reader can
// capture descriptor 2 (messages.hpp). The program's "wrote ..." lines only with verbose=True:
// a script calls these functions by the thousand.
void log_as_the_program_does(bool verbose) {
    static std::once_flag once;
    static std::shared_ptr<spdlog::sinks::sink> sink;
    std::call_once(once, [] {
        std::FILE* messages = ::fdopen(cli::original_stderr(), "w");
        sink = std::make_shared<spdlog::sinks::ansicolor_sink<spdlog::details::console_mutex>>(messages ? messages : stderr,
                                                                                              spdlog::color_mode::automatic);
        auto logger = std::make_shared<spdlog::logger>("gridwarp", sink);
        logger->set_pattern("gridwarp: %^%l%$: %v");
        spdlog::set_default_logger(std::move(logger));
    });
    sink->set_level(verbose ? spdlog::level::trace : spdlog::level::warn);
}

// Runs `command` on options by name (each with its values as the option takes them), the images in
// memory by the option they stand for, and, with keep_result, the result kept in memory.
std::shared_ptr<io::Image> run_command(const std::string& command, const std::vector<std::pair<std::string, std::vector<std::string>>>& options,
                                       const std::map<std::string, std::shared_ptr<io::Image>>& images, bool keep_result, bool verbose) {
    if (!cli::runs_in_python(command)) throw py::value_error("no such command: " + command);
    log_as_the_program_does(verbose);
    cli::InProcessCall call;
    call.options = options;
    for (const auto& [name, image] : images) call.images.emplace_back(name, image);
    if (keep_result) call.result = std::make_shared<io::Image>();
    std::string error;
    {
        py::gil_scoped_release released;
        cli::CommandRunner runner(command);
        error = runner.run(call);
    }
    // One line, as the program prints it: a value holding a newline is quoted with \n.
    if (!error.empty()) throw py::value_error(cli::escape_control_characters(error));
    return call.result;
}

// points (N, 2|3) through the chain as `gridwarp points` maps them; a new float64 array.
py::array map_points(py::handle points, const std::vector<std::string>& transforms, const std::string& space, bool from_moving,
                     std::optional<std::filesystem::path> reference, std::optional<std::filesystem::path> moving, double tolerance,
                     std::optional<int> threads) {
    if (space != "ras" && space != "lps") throw py::value_error("space: '" + space + "': expected ras or lps");
    if (!(tolerance > 0)) throw py::value_error("tolerance: must be a positive number of mm");
    const BorrowedArray borrowed = BorrowedArray::borrow(points, "points", false);
    const ConstTensorView& view = borrowed.view();
    if (view.rank() != 2 || (view.shape[1] != 2 && view.shape[1] != 3) || !is_floating(view.dtype)) {
        throw py::value_error("points: expected a floating array of shape (N, 2) or (N, 3), got " + std::string(dtype_name(view.dtype)) + " " +
                              shape_to_string(view.shape));
    }
    const Tensor values = convert_to(view, DType::Float64);
    std::vector<double> coordinates(values.data_as<double>(), values.data_as<double>() + values.numel());
    const auto dimension = static_cast<std::size_t>(view.shape[1]);
    InversionReport report;
    {
        py::gil_scoped_release released;
        io::ReadOptions options;
        options.threads = threads.value_or(0);
        std::optional<io::Image> reference_image, moving_image;
        if (reference) reference_image = io::read_image_header(*reference, options);
        if (moving) moving_image = io::read_image_header(*moving, options);
        std::vector<std::shared_ptr<const Tensor>> buffers;
        const std::vector<PointTransform> steps =
            cli::read_transform_chain(transforms, dimension, moving_image ? &*moving_image : nullptr,
                                      reference_image ? &*reference_image : nullptr, options, buffers);
        report = cli::map_point_coordinates(steps, coordinates, dimension, space == "ras", from_moving, tolerance, options.threads);
    }
    if (report.unconverged > 0) {
        throw py::value_error(std::to_string(report.unconverged) + " point(s), the first point " + std::to_string(report.first_unconverged) +
                              ", do not invert within tolerance " + std::to_string(tolerance) + " mm (the field folds there)");
    }
    py::array_t<double> result({view.shape[0], view.shape[1]});
    std::copy(coordinates.begin(), coordinates.end(), result.mutable_data());
    return result;
}


// `python -m gridwarp` and the `gridwarp` entry point: the program's command line in this process.
int run_program(const std::vector<std::string>& arguments) {
    std::vector<std::string> words{"gridwarp"};
    words.insert(words.end(), arguments.begin(), arguments.end());
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    py::gil_scoped_release released;
    const int status = cli::run_command_line(static_cast<int>(words.size()), argv.data(), GRIDWARP_VERSION);
    std::fflush(stdout);
    return status;
}

}  // namespace

void add_command_functions(py::module_& module) {
    module.def("_main", &run_program, py::arg("arguments"), "Runs the gridwarp command line with these arguments; returns its exit status.");
    module.def("map_points", &map_points, py::arg("points"), py::arg("transforms"), py::kw_only(), py::arg("space") = "ras",
               py::arg("from_moving") = false, py::arg("reference") = py::none(), py::arg("moving") = py::none(),
               py::arg("tolerance") = 1e-5, py::arg("threads") = py::none(),
               R"(Maps points (N, 2) or (N, 3), x first, through a transform chain, as `gridwarp points` does.

transforms: files as resample takes them ("FILE", "FILE,inverse", "[FILE,1]", tags), the first
    acting first on reference points: a reference point goes to where resample reads it in the
    moving image (antsApplyTransformsToPoints' direction).
space: "ras" (world coordinates as NIfTI and nibabel give them) or "lps" (ITK's).
from_moving: the points are in the moving image's space; map them into the reference's (the chain
    undone, displacement fields by fixed-point iteration to `tolerance` mm).
reference, moving: image files, for transforms defined through their grids (FSL, LTA).
Returns a new float64 array; raises ValueError naming a file it cannot read.)");
    module.def("_run_command", &run_command, py::arg("command"), py::arg("options"), py::arg("images"), py::arg("keep_result"),
               py::arg("verbose"),
               "Runs a gridwarp command in this process: options are (long name, values) pairs, images the Image objects "
               "standing for input files by option name; keep_result: return the result instead of writing --output.");
}

}  // namespace gridwarp::python
