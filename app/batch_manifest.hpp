// The batch manifest (docs/batch.md): .csv (RFC 4180), .tsv or .jsonl rows of a command's long
// options, parsed into jobs. Kept apart from gridwarp batch itself so that tests and the fuzz target
// (tests/fuzz) reach the parser without the commands.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gridwarp::cli {

// Problems with the manifest or the batch's own options: the batch does not start (exit status 2).
class BatchSetupError : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Options whose values are files: relative ones in a manifest are relative to the manifest's folder.
inline const std::set<std::string> kPathOptions = {"input", "output", "reference", "transform", "flow", "theta", "matrix", "grid"};

using Values = std::map<std::string, std::vector<std::string>>;  // long option name -> values

struct Job {
    std::size_t row = 0;   // 0-based among the manifest's data rows
    std::size_t line = 0;  // the manifest line the row starts on, 1-based
    Values values;         // the row's own values, paths resolved
};

// What the command accepts as columns: its long options (names without dashes), which of them
// take several values (';'-separated in a cell, an array in JSON), and which are on/off flags
// (optional: their cells must then say true or false).
struct ManifestColumns {
    std::function<bool(const std::string&)> is_option;
    std::function<bool(const std::string&)> is_repeatable;
    std::function<bool(const std::string&)> is_flag;
};

// A flag's cell: true/false, 1/0, yes/no or on/off (any case); nullopt for anything else.
std::optional<bool> parse_flag_value(const std::string& text);

// Reads a manifest's text row by row; `file` chooses the format by its extension, names it in
// errors and anchors relative paths. Every row is checked, and `take` receives the jobs of the rows
// `wanted` accepts (by 0-based row), in order, as they are read: the rows left out are never held.
// A leading UTF-8 byte-order mark is skipped. Throws BatchSetupError naming the file, line and
// column of the first problem.
void read_manifest_jobs(std::string_view text, const std::filesystem::path& file, const ManifestColumns& columns,
                        const std::function<bool(std::size_t row)>& wanted, const std::function<void(Job&&)>& take);

// Every row's job.
std::vector<Job> parse_manifest(std::string_view text, const std::filesystem::path& file, const ManifestColumns& columns);

}  // namespace gridwarp::cli
