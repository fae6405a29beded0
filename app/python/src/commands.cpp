// The file-level functions' compiled half: a command of the gridwarp program run in this process
// (app/command_runner.hpp) on options by name and images in memory, with its messages on stderr as
// the program writes them.
#include "commands.hpp"

#include <pybind11/stl.h>
#include <spdlog/sinks/ansicolor_sink.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "messages.hpp"
#include "command_runner.hpp"
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
    if (!cli::runs_in_process(command)) throw py::value_error("no such command: " + command);
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

}  // namespace

void add_command_functions(py::module_& module) {
    module.def("_run_command", &run_command, py::arg("command"), py::arg("options"), py::arg("images"), py::arg("keep_result"),
               py::arg("verbose"),
               "Runs a gridwarp command in this process: options are (long name, values) pairs, images the Image objects "
               "standing for input files by option name; keep_result: return the result instead of writing --output.");
}

}  // namespace gridwarp::python
