// The file-level functions' compiled half: a command of the gridwarp program run in this process
// (app/command_runner.hpp), with its messages on stderr as the program writes them.
#include "commands.hpp"

#include <pybind11/stl.h>
#include <spdlog/sinks/ansicolor_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "messages.hpp"
#include "command_runner.hpp"

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

void run_command(const std::vector<std::string>& args) {
    if (args.empty() || !cli::runs_in_process(args.front())) {
        throw py::value_error("no such command: " + (args.empty() ? std::string("(none)") : args.front()));
    }
    log_as_the_program_does(std::find(args.begin(), args.end(), "--verbose") != args.end());
    std::string error;
    {
        py::gil_scoped_release released;
        cli::CommandRunner runner(args.front());
        error = runner.run(args);
    }
    // One line, as the program prints it: a value holding a newline is quoted with \n.
    if (!error.empty()) throw py::value_error(cli::escape_control_characters(error));
}

}  // namespace

void add_command_functions(py::module_& module) {
    module.def("_run_command", &run_command, py::arg("args"),
               "Runs a gridwarp command in this process: args is its command line without 'gridwarp'.");
}

}  // namespace gridwarp::python
