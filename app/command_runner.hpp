// The sampling commands run in this process, as `gridwarp batch` runs its jobs and the Python
// package runs its file-level functions: the command's own option parsing, defaults, checks and
// run function, so that the result is the command's, byte for byte.
#pragma once

#include <CLI/CLI.hpp>

#include "cli_common.hpp"

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gridwarp::cli {

// Adds a command to the program's App and returns its binding (the storage its options write to).
using Registrar = CommandBinding (*)(CLI::App&);

// Every gridwarp command, once, in --help's order (the rows are in commands.def). in_batch: batch
// rows can run it (an image in, an image out); in_python: the Python package can run it.
struct CommandEntry {
    std::string_view name;
    Registrar registrar;
    bool in_batch;
    bool in_python;
};
std::span<const CommandEntry> command_table();
const CommandEntry* find_command(std::string_view name);

// Whether NAME is a command batch rows can run (affine, flow, resample, resize, sample), or the
// Python package (those, jacobian and convert-transform), and the function that registers such a
// command (std::invalid_argument for any other name).
bool runs_in_batch(std::string_view name);
bool runs_in_python(std::string_view name);
Registrar in_process_registrar(std::string_view name);

// "unknown option '--rotat' (did you mean '--rotate'?)" for the first argument the command did not
// take that looks like an option or, with no command given, a command name; empty when none.
std::string unknown_argument(const CLI::App& app);

// A run without a command line: the options by long name (without "--"), each with its values as
// the option takes them one by one (a repeated option's values, or the one value of any other), and
// images held in memory by the name of the option they stand for. With `result` set, the command's
// output is kept there, not written (--output is then not given).
struct InProcessCall {
    std::vector<std::pair<std::string, std::vector<std::string>>> options;
    std::vector<std::pair<std::string, std::shared_ptr<const io::Image>>> images;
    std::shared_ptr<io::Image> result;
};

// Runs one command's jobs, one after another, with one CLI::App: building the App costs more than
// parsing a job's arguments, and each parse starts from the options' defaults (set_command_action).
class CommandRunner {
public:
    explicit CommandRunner(const std::string& command);

    // Runs the command with `args` (the command's name, then its options: a command line without
    // "gridwarp"); returns the error message, empty on success.
    std::string run(const std::vector<std::string>& args);
    // Runs the command on `call`: each value goes through its option's conversion and checks, as
    // on the command line; returns the error message, empty on success.
    std::string run(const InProcessCall& call);
    // Whether the last run failed on its arguments (a value that is not a number, ...), not its files.
    bool bad_arguments() const { return bad_arguments_; }

private:
    std::string fill_options(const InProcessCall& call);

    CLI::App app_;
    CommandBinding binding_;
    bool bad_arguments_ = false;
};

}  // namespace gridwarp::cli
