#include "command_runner.hpp"

#include "cli_common.hpp"

namespace gridwarp::cli {

const std::map<std::string, Registrar>& in_process_commands() {
    static const std::map<std::string, Registrar> commands = {{"affine", &register_affine_command},
                                                              {"flow", &register_flow_command},
                                                              {"resample", &register_resample_command},
                                                              {"resize", &register_resize_command},
                                                              {"sample", &register_sample_command}};
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
    } catch (const CLI::ParseError& e) {
        bad_arguments_ = true;
        return e.what();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

}  // namespace gridwarp::cli
