#include "command_runner.hpp"

#include <algorithm>
#include <string_view>

#include "cli_common.hpp"
#include "suggestions.hpp"

namespace gridwarp::cli {

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
    std::vector<std::string> names;
    for (const CLI::Option* option : command.get_options()) {
        for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    }
    for (const std::string& arg : command.remaining()) {
        if (!arg.starts_with("--") || arg == "--") continue;
        const std::string name = arg.substr(0, arg.find('='));
        if (std::find(names.begin(), names.end(), name) != names.end()) continue;
        const std::string near = nearest_word(name, names);
        return "unknown option '" + name + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)");
    }
    return "";
}

std::span<const CommandEntry> command_table() {
    static constexpr CommandEntry commands[] = {
        {"sample", &register_sample_command, true},
        {"grid", &register_grid_command, false},
        {"affine", &register_affine_command, true},
        {"resize", &register_resize_command, true},
        {"flow", &register_flow_command, true},
        {"resample", &register_resample_command, true},
        {"info", &register_info_command, false},
        {"batch", &register_batch_command, false},
        {"convert-transform", &register_convert_transform_command, false},
        {"help", &register_help_command, false},
    };
    return commands;
}

const CommandEntry* find_command(std::string_view name) {
    for (const CommandEntry& entry : command_table()) {
        if (entry.name == name) return &entry;
    }
    return nullptr;
}

const std::map<std::string, Registrar>& in_process_commands() {
    static const std::map<std::string, Registrar> commands = [] {
        std::map<std::string, Registrar> in_process;
        for (const CommandEntry& entry : command_table()) {
            if (entry.in_process) in_process.emplace(entry.name, entry.registrar);
        }
        return in_process;
    }();
    return commands;
}

CommandRunner::CommandRunner(const std::string& command) : storage_(in_process_commands().at(command)(app_)) {
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

}  // namespace gridwarp::cli
