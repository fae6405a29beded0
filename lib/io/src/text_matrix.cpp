#include "gridwarp/io/text_matrix.hpp"

#include <charconv>
#include <cmath>
#include <string>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io {

TextMatrix parse_text_matrix(std::string_view text, const std::filesystem::path& source) {
    TextMatrix matrix;
    std::size_t line_number = 0;
    while (!text.empty()) {
        const auto end = text.find('\n');
        std::string_view line = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
        ++line_number;
        std::vector<double> row;
        std::size_t pos = 0;
        auto is_separator = [](char c) { return c == ' ' || c == '\t' || c == ',' || c == '\r' || c == ';'; };
        while (pos < line.size()) {
            while (pos < line.size() && is_separator(line[pos])) ++pos;
            if (pos >= line.size() || line[pos] == '#') break;
            std::size_t token_end = pos;
            while (token_end < line.size() && !is_separator(line[token_end]) && line[token_end] != '#') ++token_end;
            const std::string_view token = line.substr(pos, token_end - pos);
            double value = 0;
            const auto [ptr, error] = std::from_chars(token.data(), token.data() + token.size(), value);
            if (error != std::errc() || ptr != token.data() + token.size() || !std::isfinite(value)) {
                throw FileError(source, "line " + std::to_string(line_number) + ": expected a finite number, found '" +
                                            std::string(token) + "'");
            }
            row.push_back(value);
            pos = token_end;
        }
        if (row.empty()) continue;
        if (matrix.rows > 0 && row.size() != matrix.columns) {
            throw FileError(source, "line " + std::to_string(line_number) + ": expected " +
                                        std::to_string(matrix.columns) + " numbers like the first row, found " +
                                        std::to_string(row.size()));
        }
        matrix.columns = row.size();
        matrix.values.insert(matrix.values.end(), row.begin(), row.end());
        ++matrix.rows;
    }
    if (matrix.rows == 0) throw FileError(source, "no matrix rows found (expected lines of numbers)");
    return matrix;
}

TextMatrix read_text_matrix(const std::filesystem::path& file) { return parse_text_matrix(read_file_bytes(file), file); }

}  // namespace gridwarp::io
