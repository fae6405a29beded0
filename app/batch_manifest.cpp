// The batch manifest's rows (docs/batch.md), parsed apart from running them so that the parser can be
// tested and fuzzed alone (tests/fuzz).
#include "batch_manifest.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <sstream>

namespace gridwarp::cli {

namespace fs = std::filesystem;

namespace {

// A path from the manifest, relative to its folder; ITK-style "[FILE,1]" and "FILE,inverse" keep
// their suffix.
std::string resolve_path(const std::string& value, const fs::path& folder) {
    std::string text = value, prefix, suffix;
    if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
        prefix = "[";
        suffix = "]";
        text = text.substr(1, text.size() - 2);
    }
    const auto comma = text.rfind(',');
    if (comma != std::string::npos) {
        const std::string flag = text.substr(comma + 1);
        if (flag == "inverse" || flag == "forward" || flag == "0" || flag == "1") {
            suffix = text.substr(comma) + suffix;
            text.resize(comma);
        }
    }
    const fs::path file(text);
    return prefix + (file.is_absolute() || text.empty() ? text : (folder / file).string()) + suffix;
}

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::string part;
    std::istringstream in(text);
    while (std::getline(in, part, separator)) parts.push_back(part);
    if (!text.empty() && text.back() == separator) parts.emplace_back();
    return parts;
}

// CSV rows (RFC 4180: quoted fields may hold separators, quotes doubled, and line breaks), with the
// line each row starts on.
std::vector<std::pair<std::size_t, std::vector<std::string>>> read_csv(const std::string& text, const fs::path& file) {
    std::vector<std::pair<std::size_t, std::vector<std::string>>> rows;
    std::vector<std::string> fields;
    std::string field;
    bool quoted = false, row_started = false;
    std::size_t line = 1, row_line = 1;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (!row_started) {
            row_started = true;
            row_line = line;
        }
        if (quoted) {
            if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
                field += '"';
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                if (c == '\n') ++line;
                field += c;
            }
        } else if (c == '"' && field.empty()) {
            quoted = true;
        } else if (c == ',') {
            fields.push_back(field);
            field.clear();
        } else if (c == '\n' || c == '\r') {
            if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
            fields.push_back(field);
            field.clear();
            if (!(fields.size() == 1 && fields[0].empty())) rows.emplace_back(row_line, fields);
            fields.clear();
            row_started = false;
            ++line;
        } else {
            field += c;
        }
    }
    if (quoted) throw BatchSetupError(file.string() + ": line " + std::to_string(row_line) + ": a quoted field is not closed");
    if (row_started) {
        fields.push_back(field);
        if (!(fields.size() == 1 && fields[0].empty())) rows.emplace_back(row_line, fields);
    }
    return rows;
}

std::vector<std::pair<std::size_t, std::vector<std::string>>> read_tsv(const std::string& text) {
    std::vector<std::pair<std::size_t, std::vector<std::string>>> rows;
    std::istringstream in(text);
    std::string line;
    std::size_t number = 0;
    while (std::getline(in, line)) {
        ++number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        rows.emplace_back(number, split(line, '\t'));
    }
    return rows;
}

std::string lowercase_extension(const fs::path& file) {
    std::string extension = file.extension().string();
    std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return std::tolower(c); });
    return extension;
}

}  // namespace

std::vector<Job> parse_manifest(const std::string& text, const fs::path& file, const ManifestColumns& columns) {
    const fs::path folder = file.parent_path().empty() ? fs::path(".") : file.parent_path();
    const std::string extension = lowercase_extension(file);
    auto check_column = [&](const std::string& name, std::size_t line, const std::string& where) {
        if (name.empty() || name.front() == '-' || !columns.is_option(name)) {
            throw BatchSetupError(file.string() + ": line " + std::to_string(line) + ", " + where + ": '" + name +
                                  "' is not an option of this command (columns are its long options without dashes)");
        }
        if (name == "help") throw BatchSetupError(file.string() + ": line " + std::to_string(line) + ", " + where + ": 'help' cannot be a column");
    };
    auto add = [&](Values& values, const std::string& name, const std::string& value) {
        if (value.empty()) return;  // not given
        if (kPathOptions.count(name) != 0) {
            values[name].push_back(resolve_path(value, folder));
        } else {
            values[name].push_back(value);
        }
    };
    std::vector<Job> jobs;
    if (extension == ".jsonl") {
        std::istringstream in(text);
        std::string line;
        std::size_t number = 0;
        while (std::getline(in, line)) {
            ++number;
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            nlohmann::json object;
            // A key given twice would silently keep its last value: note the object's keys as they come.
            std::set<std::string> keys;
            std::string repeated_key;
            const auto note_key = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
                if (event == nlohmann::json::parse_event_t::key && depth == 1 && !keys.insert(parsed.get<std::string>()).second &&
                    repeated_key.empty()) {
                    repeated_key = parsed.get<std::string>();
                }
                return true;
            };
            try {
                object = nlohmann::json::parse(line, note_key);
            } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for numbers such as 1e400
                throw BatchSetupError(file.string() + ": line " + std::to_string(number) + ": not JSON (" + e.what() + ")");
            }
            if (!object.is_object()) throw BatchSetupError(file.string() + ": line " + std::to_string(number) + ": expected one JSON object per line");
            if (!repeated_key.empty()) {
                throw BatchSetupError(file.string() + ": line " + std::to_string(number) + ": the key '" + repeated_key +
                                      "' appears twice (each option once per job)");
            }
            Job job;
            job.row = jobs.size();
            for (const auto& item : object.items()) {
                // Named copies rather than a structured binding: clang 14 cannot capture those in the lambda below.
                const std::string& name = item.key();
                const nlohmann::json& value = item.value();
                check_column(name, number, "key");
                const auto as_text = [&](const nlohmann::json& v) -> std::string {
                    if (v.is_string()) return v.get<std::string>();
                    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
                    if (v.is_number()) return v.dump();
                    throw BatchSetupError(file.string() + ": line " + std::to_string(number) + ", key '" + name +
                                          "': expected a string, number, boolean or an array of them");
                };
                if (value.is_null()) continue;
                if (value.is_array()) {
                    if (!columns.is_repeatable(name) && value.size() > 1) {
                        throw BatchSetupError(file.string() + ": line " + std::to_string(number) + ", key '" + name + "': takes one value");
                    }
                    for (const auto& v : value) add(job.values, name, as_text(v));
                } else {
                    add(job.values, name, as_text(value));
                }
            }
            jobs.push_back(std::move(job));
        }
        return jobs;
    }
    if (extension != ".csv" && extension != ".tsv") {
        throw BatchSetupError(file.string() + ": expected a .csv, .tsv or .jsonl manifest, got '" + file.extension().string() + "'");
    }
    const auto rows = extension == ".csv" ? read_csv(text, file) : read_tsv(text);
    if (rows.empty()) throw BatchSetupError(file.string() + ": empty manifest: expected a header row naming the options");
    const std::vector<std::string>& header = rows.front().second;
    for (std::size_t c = 0; c < header.size(); ++c) {
        check_column(header[c], rows.front().first, "column " + std::to_string(c + 1));
        // A column given twice would give its option two values, or the last one silently.
        const auto first = std::find(header.begin(), header.begin() + static_cast<std::ptrdiff_t>(c), header[c]);
        if (first != header.begin() + static_cast<std::ptrdiff_t>(c)) {
            throw BatchSetupError(file.string() + ": line " + std::to_string(rows.front().first) + ", column " + std::to_string(c + 1) +
                                  ": '" + header[c] + "' repeats column " + std::to_string(first - header.begin() + 1) +
                                  " (each option once; several transforms go in one cell, separated by ';')");
        }
    }
    for (std::size_t r = 1; r < rows.size(); ++r) {
        const auto& [line, cells] = rows[r];
        if (cells.size() != header.size()) {
            throw BatchSetupError(file.string() + ": line " + std::to_string(line) + ": " + std::to_string(cells.size()) +
                                  " cells, expected " + std::to_string(header.size()) + " (one per header column)");
        }
        Job job;
        job.row = jobs.size();
        for (std::size_t c = 0; c < cells.size(); ++c) {
            const std::string& name = header[c];
            if (columns.is_repeatable(name)) {
                for (const auto& value : split(cells[c], ';')) add(job.values, name, value);
            } else {
                add(job.values, name, cells[c]);
            }
        }
        jobs.push_back(std::move(job));
    }
    return jobs;
}

}  // namespace gridwarp::cli
