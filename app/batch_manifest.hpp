// The batch manifest (docs/batch.md): .csv (RFC 4180), .tsv or .jsonl rows of a command's long
// options, parsed into jobs. Kept apart from gridwarp batch itself so that tests and the fuzz target
// (tests/fuzz) reach the parser without the commands.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
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
    std::size_t row = 0;  // 0-based among the manifest's data rows
    Values values;        // the row's own values, paths resolved
};

// What the command accepts as columns: its long options (names without dashes), and which of them
// take several values (';'-separated in a cell, an array in JSON).
struct ManifestColumns {
    std::function<bool(const std::string&)> is_option;
    std::function<bool(const std::string&)> is_repeatable;
};

// The jobs of a manifest's text; `file` chooses the format by its extension, names it in errors and
// anchors relative paths. Throws BatchSetupError naming the file, row and column of the first problem.
std::vector<Job> parse_manifest(const std::string& text, const std::filesystem::path& file, const ManifestColumns& columns);

}  // namespace gridwarp::cli
