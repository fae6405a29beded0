// The options every command shares, their --help groups and the log level.
#include "cli_common.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "gridwarp/io/atomic_file.hpp"

namespace gridwarp::cli {

void add_common_options(CLI::App& command, CommonOptions& options) {
    command.add_flag("-v,--verbose", options.verbose, "Report what is read, computed and written");
    command.add_flag("-q,--quiet", options.quiet, "Print errors only");
    command.add_option("--threads", options.threads, "Worker threads (default: every core)")
        ->check(CLI::Range(0, 4096));
    command.add_flag("--replace-special-output", options.replace_special_output,
                     "Replace an output path that is a symbolic link, device or FIFO by a regular file (refused otherwise)");
}

void group_options(CLI::App& command) {
    struct Group {
        const char* name;
        std::initializer_list<const char*> options;  // long names (or the short one where there is none)
    };
    static const Group kGroups[] = {
        {"Input and output", {"--input", "--output", "--reference", "--manifest", "--report", "--output-type", "--output-data-type",
                              "--dtype", "--replace-special-output"}},
        {"Sampling", {"--mode", "--interpolation", "--padding", "--align-corners", "--fill", "--default-value", "--antialias",
                      "--max-taps"}},
        {"Reading", {"--nifti-geometry", "--keep-orientation", "--allow-outside-data-files"}},
        {"Output format", {"--compression-level", "--quality"}},
        {"Resources", {"--threads", "--max-memory", "--max-voxels"}},
        {"Messages", {"--verbose", "--quiet", "--explain"}},
    };
    const std::string name = command.get_name();
    const char* own = name == "info" || name == "batch" || name == "help" ? "Options" : "Transform and grid";
    for (CLI::Option* option : command.get_options()) {
        if (option == command.get_help_ptr()) continue;  // alone at the top, under "Options"
        const std::vector<std::string>& long_names = option->get_lnames();
        const std::string long_name = long_names.empty() ? "" : "--" + long_names.front();
        const char* group = own;
        for (const Group& candidate : kGroups) {
            for (const char* listed : candidate.options) {
                if (long_name == listed) group = candidate.name;
            }
        }
        option->group(group);
    }
}

void apply_common_options(const CommonOptions& options) {
    io::replace_special_outputs(options.replace_special_output);
    if (options.quiet) {
        spdlog::set_level(spdlog::level::err);
    } else if (options.verbose) {
        spdlog::set_level(spdlog::level::debug);
    } else {
        spdlog::set_level(spdlog::level::info);
    }
}

}  // namespace gridwarp::cli
