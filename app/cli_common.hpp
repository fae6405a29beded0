// What every gridwarp subcommand shares: the common options (logging, threads), the --help groups,
// and the way a command's options struct, run function and registration fit together. The options
// of each concern have a header of their own: sampling_options.hpp, file_options.hpp,
// geometry_options.hpp, messages.hpp, sample_and_write.hpp.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string_view>
#include <type_traits>

#include "image_arguments.hpp"

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

// A command as its options struct and run function, for a caller that fills the struct without a
// command line (command_runner.hpp): its CLI11 options (each value converted and checked by the
// option's own rules), its defaults, its run function, and its image arguments and output, which
// an in-process caller may hold in memory.
struct CommandBinding {
    CLI::App* app = nullptr;
    std::shared_ptr<void> storage;  // the options struct
    std::function<void()> restore_defaults;
    std::function<void()> run;
    // The ImageArgument behind an option ("input", "flow", "reference"); null for any other name.
    std::function<ImageArgument*(std::string_view option)> image_argument = [](std::string_view) { return nullptr; };
    std::function<OutputArgument*()> output = [] { return nullptr; };
};

// Makes RUN the action of SUB, whose options write into COMMAND. Every parse starts from the values
// COMMAND holds now (its defaults), so that batch can parse job after job with one CLI::App. A
// command whose struct has `OutputArgument output` and `ImageArgument* image_argument(name)` can
// take its images from memory and keep its result there.
template <class Command, class Run>
CommandBinding set_command_action(CLI::App& sub, const std::shared_ptr<Command>& command, Run run) {
    group_options(sub);
    sub.preparse_callback([command, defaults = *command](std::size_t) { *command = defaults; });
    sub.callback([command, run] { run(*command); });
    CommandBinding binding;
    binding.app = &sub;
    binding.storage = command;
    binding.restore_defaults = [command, defaults = *command] { *command = defaults; };
    binding.run = [command, run] { run(*command); };
    if constexpr (requires(Command& c) { c.image_argument(std::string_view()); }) {
        binding.image_argument = [command](std::string_view option) -> ImageArgument* { return command->image_argument(option); };
    }
    if constexpr (requires(Command& c) { requires std::is_same_v<decltype(c.output), OutputArgument>; }) {
        binding.output = [command]() -> OutputArgument* { return &command->output; };
    }
    return binding;
}

// Which share of a job this process does: --shard and --tiles K/N (0 <= K < N), or "slurm" (the
// array task's place among SLURM_ARRAY_TASK_MIN..COUNT). Throws std::invalid_argument naming `option`.
struct Share {
    std::size_t index = 0, count = 1;
};
Share parse_share(const std::string& text, const std::string& option);

}  // namespace gridwarp::cli
