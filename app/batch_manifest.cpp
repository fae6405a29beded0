// The batch manifest's rows (docs/batch.md), parsed apart from running them so that the parser can be
// tested and fuzzed alone (tests/fuzz).
#include "batch_manifest.hpp"

#include <nlohmann/json.hpp>

#include "gridwarp/io/text.hpp"

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

using RowSink = std::function<void(std::size_t line, std::vector<std::string>& cells)>;

// A NUL byte would cut a path short where it reaches the system: a different file. Refused with
// the cell's place, not its text (which could not be printed as it is).
[[noreturn]] void refuse_nul(const fs::path& file, std::size_t line, const std::string& where) {
    throw BatchSetupError(file.string() + ": line " + std::to_string(line) + ", " + where + ": holds a NUL byte (cells are text)");
}

// CSV rows (RFC 4180: quoted fields may hold separators, quotes doubled, and line breaks), each
// given to `row` with the line it starts on as soon as it ends.
void read_csv(std::string_view text, const fs::path& file, const RowSink& row) {
    std::vector<std::string> fields;
    std::string field;
    bool quoted = false, row_started = false;
    std::size_t line = 1, row_line = 1;
    auto end_row = [&] {
        fields.push_back(field);
        field.clear();
        if (!(fields.size() == 1 && fields[0].empty())) row(row_line, fields);
        fields.clear();
        row_started = false;
    };
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (!row_started) {
            row_started = true;
            row_line = line;
        }
        if (c == '\0') refuse_nul(file, line, "column " + std::to_string(fields.size() + 1));
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
            end_row();
            ++line;
        } else {
            field += c;
        }
    }
    if (quoted) throw BatchSetupError(file.string() + ": line " + std::to_string(row_line) + ": a quoted field is not closed");
    if (row_started) end_row();
}

void read_tsv(std::string_view text, const fs::path& file, const RowSink& row) {
    std::size_t number = 0;
    std::vector<std::string> cells;
    while (!text.empty()) {
        const auto end = text.find('\n');
        std::string_view line = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
        ++number;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;
        cells.clear();
        for (std::size_t start = 0;;) {
            const auto tab = line.find('\t', start);
            cells.emplace_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
            if (cells.back().find('\0') != std::string::npos) refuse_nul(file, number, "column " + std::to_string(cells.size()));
            if (tab == std::string_view::npos) break;
            start = tab + 1;
        }
        row(number, cells);
    }
}

std::string lowercase_extension(const fs::path& file) {
    std::string extension = file.extension().string();
    std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return std::tolower(c); });
    return extension;
}

}  // namespace

std::optional<bool> parse_flag_value(const std::string& text) {
    std::string value = text;
    std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
    if (value == "true" || value == "1" || value == "yes" || value == "on") return true;
    if (value == "false" || value == "0" || value == "no" || value == "off") return false;
    return std::nullopt;
}

void read_manifest_jobs(std::string_view text, const fs::path& file, const ManifestColumns& columns,
                        const std::function<bool(std::size_t row)>& wanted, const std::function<void(Job&&)>& take) {
    text = io::without_byte_order_mark(text);
    const fs::path folder = file.parent_path().empty() ? fs::path(".") : file.parent_path();
    const std::string extension = lowercase_extension(file);
    auto check_column = [&](const std::string& name, std::size_t line, const std::string& where) {
        if (name.empty() || name.front() == '-' || !columns.is_option(name)) {
            throw BatchSetupError(file.string() + ": line " + std::to_string(line) + ", " + where + ": '" + name +
                                  "' is not an option of this command (columns are its long options without dashes)");
        }
        if (name == "help") throw BatchSetupError(file.string() + ": line " + std::to_string(line) + ", " + where + ": 'help' cannot be a column");
    };
    auto is_flag = [&](const std::string& name) { return columns.is_flag && columns.is_flag(name); };
    // Checks a value of a row, which is kept (its path resolved) only when the row is wanted.
    // (`where` names the cell, and is called only for an error.)
    auto add = [&](Job* job, const std::string& name, const std::string& value, std::size_t line, const auto& where) {
        if (value.empty()) return;  // not given
        if (is_flag(name) && !parse_flag_value(value)) {
            throw BatchSetupError(file.string() + ": line " + std::to_string(line) + ", " + where() + ": '" + value + "' for the flag '" +
                                  name + "': expected true or false (1/0, yes/no, on/off)");
        }
        if (!job) return;
        job->values[name].push_back(kPathOptions.count(name) != 0 ? resolve_path(value, folder) : value);
    };
    std::size_t row = 0;  // data rows read so far
    if (extension == ".jsonl") {
        std::size_t number = 0;
        while (!text.empty()) {
            const auto end = text.find('\n');
            const std::string_view line = text.substr(0, end);
            text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
            ++number;
            if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
            if (const auto nul = line.find('\0'); nul != std::string_view::npos) refuse_nul(file, number, "byte " + std::to_string(nul + 1));
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
                object = nlohmann::json::parse(line.begin(), line.end(), note_key);
            } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for numbers such as 1e400
                throw BatchSetupError(file.string() + ": line " + std::to_string(number) + ": not JSON (" + e.what() + ")");
            }
            if (!object.is_object()) throw BatchSetupError(file.string() + ": line " + std::to_string(number) + ": expected one JSON object per line");
            if (!repeated_key.empty()) {
                throw BatchSetupError(file.string() + ": line " + std::to_string(number) + ": the key '" + repeated_key +
                                      "' appears twice (each option once per job)");
            }
            Job job;
            job.row = row;
            job.line = number;
            Job* kept = wanted(row) ? &job : nullptr;
            for (const auto& item : object.items()) {
                // Named copies rather than a structured binding: clang 14 cannot capture those in the lambda below.
                const std::string& name = item.key();
                const nlohmann::json& value = item.value();
                const auto where = [&] { return "key '" + name + "'"; };
                if (name.find('\0') != std::string::npos) refuse_nul(file, number, "a key");
                check_column(name, number, "key");
                const auto as_text = [&](const nlohmann::json& v) -> std::string {
                    if (v.is_string()) {
                        if (v.get_ref<const std::string&>().find('\0') != std::string::npos) refuse_nul(file, number, where());
                        return v.get<std::string>();
                    }
                    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
                    if (v.is_number()) return v.dump();
                    throw BatchSetupError(file.string() + ": line " + std::to_string(number) + ", " + where() +
                                          ": expected a string, number, boolean or an array of them");
                };
                if (value.is_null()) continue;
                if (value.is_array()) {
                    if (!columns.is_repeatable(name) && value.size() > 1) {
                        throw BatchSetupError(file.string() + ": line " + std::to_string(number) + ", " + where() + ": takes one value");
                    }
                    for (const auto& v : value) add(kept, name, as_text(v), number, where);
                } else {
                    add(kept, name, as_text(value), number, where);
                }
            }
            if (kept) take(std::move(job));
            ++row;
        }
        return;
    }
    if (extension != ".csv" && extension != ".tsv") {
        throw BatchSetupError(file.string() + ": expected a .csv, .tsv or .jsonl manifest, got '" + file.extension().string() + "'");
    }
    std::vector<std::string> header;
    const RowSink on_row = [&](std::size_t line, std::vector<std::string>& cells) {
        if (header.empty()) {
            header = std::move(cells);
            for (std::size_t c = 0; c < header.size(); ++c) {
                check_column(header[c], line, "column " + std::to_string(c + 1));
                // A column given twice would give its option two values, or the last one silently.
                const auto first = std::find(header.begin(), header.begin() + static_cast<std::ptrdiff_t>(c), header[c]);
                if (first != header.begin() + static_cast<std::ptrdiff_t>(c)) {
                    throw BatchSetupError(file.string() + ": line " + std::to_string(line) + ", column " + std::to_string(c + 1) +
                                          ": '" + header[c] + "' repeats column " + std::to_string(first - header.begin() + 1) +
                                          " (each option once; several transforms go in one cell, separated by ';')");
                }
            }
            return;
        }
        if (cells.size() != header.size()) {
            throw BatchSetupError(file.string() + ": line " + std::to_string(line) + ": " + std::to_string(cells.size()) +
                                  " cells, expected " + std::to_string(header.size()) + " (one per header column)");
        }
        Job job;
        job.row = row;
        job.line = line;
        Job* kept = wanted(row) ? &job : nullptr;
        for (std::size_t c = 0; c < cells.size(); ++c) {
            const std::string& name = header[c];
            const auto where = [c] { return "column " + std::to_string(c + 1); };
            if (columns.is_repeatable(name)) {
                for (const auto& value : split(cells[c], ';')) add(kept, name, value, line, where);
            } else {
                add(kept, name, cells[c], line, where);
            }
        }
        if (kept) take(std::move(job));
        ++row;
    };
    if (extension == ".csv") {
        read_csv(text, file, on_row);
    } else {
        read_tsv(text, file, on_row);
    }
    if (header.empty()) throw BatchSetupError(file.string() + ": empty manifest: expected a header row naming the options");
}

std::vector<Job> parse_manifest(std::string_view text, const fs::path& file, const ManifestColumns& columns) {
    std::vector<Job> jobs;
    read_manifest_jobs(text, file, columns, [](std::size_t) { return true; }, [&](Job&& job) { jobs.push_back(std::move(job)); });
    return jobs;
}

}  // namespace gridwarp::cli
