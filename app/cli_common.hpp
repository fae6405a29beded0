// What every gridwarp subcommand shares: the common options (logging, threads), the --help groups,
// and the way a command's options struct, run function and registration fit together. The options
// of each concern have a header of their own: sampling_options.hpp, file_options.hpp,
// geometry_options.hpp, messages.hpp, sample_and_write.hpp.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>

namespace gridwarp::cli {

struct CommonOptions {
    bool verbose = false;
    bool quiet = false;
    int threads = 0;
    bool replace_special_output = false;
};

// -v/--verbose, -q/--quiet, --threads N, --replace-special-output.
void add_common_options(CLI::App& command, CommonOptions& options);
// Applies the log level; call first in every run function.
void apply_common_options(const CommonOptions& options);

// Sorts a command's options into its --help groups (input and output, the command's own, sampling,
// reading, output format, resources, messages), one table for every command.
void group_options(CLI::App& command);

// Makes RUN the action of SUB, whose options write into COMMAND. Every parse starts from the values
// COMMAND holds now (its defaults), so that batch can parse job after job with one CLI::App.
template <class Command, class Run>
void set_command_action(CLI::App& sub, const std::shared_ptr<Command>& command, Run run) {
    group_options(sub);
    sub.preparse_callback([command, defaults = *command](std::size_t) { *command = defaults; });
    sub.callback([command, run] { run(*command); });
}

}  // namespace gridwarp::cli
