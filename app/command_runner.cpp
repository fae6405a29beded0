#include "command_runner.hpp"

#include <algorithm>
#include <stdexcept>
#include <string_view>

#include "cli_common.hpp"
#include "suggestions.hpp"

namespace gridwarp::cli {

namespace {

// "unknown option '--rotat' (did you mean '--rotate'?)" for a name `command` has no option of.
std::string unknown_option(const CLI::App& command, const std::string& name) {
    std::vector<std::string> names;
    for (const CLI::Option* option : command.get_options()) {
        for (const std::string& long_name : option->get_lnames()) names.push_back("--" + long_name);
    }
    const std::string near = nearest_word(name, names);
    return "unknown option '" + name + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)");
}

}  // namespace

std::string unknown_argument(const CLI::App& app) {
    const auto used = app.get_subcommands();
    if (used.empty()) {
        std::vector<std::string> commands;
        for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) commands.push_back(command->get_name());
        for (const std::string& arg : app.remaining()) {
            if (arg.starts_with("-")) continue;
            const std::string near = nearest_word(arg, commands);
            return "unknown command '" + arg + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)");
        }
        return "";
    }
    const CLI::App& command = *used.front();
    for (const std::string& arg : command.remaining()) {
        if (!arg.starts_with("--") || arg == "--") continue;
        const std::string name = arg.substr(0, arg.find('='));
        if (command.get_option_no_throw(name)) continue;
        return unknown_option(command, name);
    }
    return "";
}

#define GRIDWARP_COMMAND(name, registrar, in_batch, in_python) CommandBinding registrar(CLI::App& app);
#include "commands.def"
#undef GRIDWARP_COMMAND

std::span<const CommandEntry> command_table() {
    static constexpr CommandEntry commands[] = {
#define GRIDWARP_COMMAND(name, registrar, in_batch, in_python) {name, &registrar, in_batch, in_python},
#include "commands.def"
#undef GRIDWARP_COMMAND
    };
    return commands;
}

const CommandEntry* find_command(std::string_view name) {
    for (const CommandEntry& entry : command_table()) {
        if (entry.name == name) return &entry;
    }
    return nullptr;
}

bool runs_in_batch(std::string_view name) {
    const CommandEntry* entry = find_command(name);
    return entry && entry->in_batch;
}

bool runs_in_python(std::string_view name) {
    const CommandEntry* entry = find_command(name);
    return entry && entry->in_python;
}

Registrar in_process_registrar(std::string_view name) {
    const CommandEntry* entry = find_command(name);
    if (!entry || !(entry->in_batch || entry->in_python)) throw std::invalid_argument("'" + std::string(name) + "' is not a command that runs in-process");
    return entry->registrar;
}

CommandRunner::CommandRunner(const std::string& command) : binding_(in_process_registrar(command)(app_)) {
    app_.require_subcommand(1);
}

std::string CommandRunner::run(const std::vector<std::string>& args) {
    std::vector<const char*> argv{"gridwarp"};
    for (const auto& a : args) argv.push_back(a.c_str());
    bad_arguments_ = false;
    try {
        app_.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::CallForHelp&) {
        bad_arguments_ = true;
        return "--help is not an option of an in-process run: see 'gridwarp " + args.front() + " --help' or docs/cli.md";
    } catch (const CLI::CallForAllHelp&) {
        bad_arguments_ = true;
        return "--help-all is not an option of an in-process run: see 'gridwarp " + args.front() + " --help' or docs/cli.md";
    } catch (const CLI::ParseError& e) {
        bad_arguments_ = true;
        const std::string unknown = unknown_argument(app_);
        return unknown.empty() ? std::string(e.what()) : unknown;
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}


std::string CommandRunner::fill_options(const InProcessCall& call) {
    CLI::App& command = *binding_.app;
    binding_.restore_defaults();
    for (CLI::Option* option : command.get_options()) option->clear();
    std::vector<const CLI::Option*> given_in_memory;
    for (const auto& [name, values] : call.options) {
        if (name == "help" || name == "help-all") {
            return "--" + name + " is not an option of an in-process run: see 'gridwarp " + command.get_name() + " --help' or docs/cli.md";
        }
        CLI::Option* option = command.get_option_no_throw("--" + name);
        if (!option) return unknown_option(command, "--" + name);
        option->add_result(values);
        option->run_callback();
    }
    for (const auto& [name, image] : call.images) {
        ImageArgument* argument = binding_.image_argument(name);
        if (!argument) return "--" + name + " takes no image in memory";
        argument->path = name + " image (in memory)";
        argument->image = image;
        given_in_memory.push_back(command.get_option_no_throw("--" + name));
    }
    if (call.result) {
        OutputArgument* output = binding_.output();
        if (!output) return "'" + command.get_name() + "' keeps no result in memory";
        output->path = "the result (in memory)";
        output->result = call.result;
        given_in_memory.push_back(command.get_option_no_throw("--output"));
    }
    for (const CLI::Option* option : command.get_options()) {
        if (option->get_required() && option->count() == 0 &&
            std::find(given_in_memory.begin(), given_in_memory.end(), option) == given_in_memory.end()) {
            return option->get_name() + " is required";
        }
    }
    return "";
}

std::string CommandRunner::run(const InProcessCall& call) {
    bad_arguments_ = false;
    try {
        const std::string error = fill_options(call);
        if (!error.empty()) {
            bad_arguments_ = true;
            return error;
        }
        binding_.run();
    } catch (const CLI::ParseError& e) {
        bad_arguments_ = true;
        return e.what();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

}  // namespace gridwarp::cli
