// The options every command shares, their --help groups and the log level.
#include "cli_common.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <stdexcept>
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

namespace {

// A whole number for --shard and --tiles: digits only, refused past what a count can hold (strtoll would wrap
// 99999999999999999999 silently).
std::uint64_t share_number(std::string_view text, const std::string& what, const std::string& option) {
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error == std::errc::result_out_of_range) {
        throw std::invalid_argument(option + ": " + what + " is " + std::string(text) + ", past the largest count (" +
                              std::to_string(std::numeric_limits<std::uint64_t>::max()) + ")");
    }
    if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
        throw std::invalid_argument(option + ": " + what + " is '" + std::string(text) + "', expected a whole number (0, 1, 2, ...)");
    }
    return value;
}

}  // namespace

Share parse_share(const std::string& text, const std::string& option) {
    Share share;
    if (text.empty()) return share;
    auto from_environment = [&](const char* name) {
        const char* value = std::getenv(name);
        if (!value || !*value) throw std::invalid_argument(option + " slurm: " + name + " is not set (run it in a Slurm array job)");
        return share_number(value, name, option);
    };
    std::uint64_t k = 0, n = 0;
    if (text == "slurm") {
        const std::uint64_t id = from_environment("SLURM_ARRAY_TASK_ID");
        const char* minimum = std::getenv("SLURM_ARRAY_TASK_MIN");
        const std::uint64_t first = minimum && *minimum ? from_environment("SLURM_ARRAY_TASK_MIN") : 0;
        if (id < first) {
            throw std::invalid_argument(option + " slurm: SLURM_ARRAY_TASK_ID " + std::to_string(id) + " is below SLURM_ARRAY_TASK_MIN " +
                                  std::to_string(first));
        }
        k = id - first;
        n = from_environment("SLURM_ARRAY_TASK_COUNT");
    } else {
        const auto slash = text.find('/');
        if (slash == std::string::npos) throw std::invalid_argument(option + ": expected K/N or slurm, got '" + text + "'");
        k = share_number(std::string_view(text).substr(0, slash), "K", option);
        n = share_number(std::string_view(text).substr(slash + 1), "N", option);
    }
    if (n < 1 || k >= n) {
        throw std::invalid_argument(option + ": expected 0 <= K < N, got K=" + std::to_string(k) + " N=" + std::to_string(n));
    }
    share.index = static_cast<std::size_t>(k);
    share.count = static_cast<std::size_t>(n);
    return share;
}


}  // namespace gridwarp::cli
