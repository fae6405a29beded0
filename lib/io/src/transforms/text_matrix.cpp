#include "gridwarp/io/text_matrix.hpp"

#include <charconv>
#include <cmath>
#include <string>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/npy.hpp"
#include "gridwarp/io/text.hpp"

namespace gridwarp::io {

TextMatrix parse_text_matrix(std::string_view text, const std::filesystem::path& source) {
    TextMatrix matrix;
    text = without_byte_order_mark(text);
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

bool is_homogeneous_last_row(const double* row, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) {
        if (!(std::abs(row[j] - (j + 1 == n ? 1.0 : 0.0)) <= kLastRowTolerance)) return false;
    }
    return true;
}

TextMatrix read_text_matrix(const std::filesystem::path& file) { return parse_text_matrix(read_file_bytes(file), file); }

TextMatrix read_matrix(const std::filesystem::path& file) {
    if (file.extension() != ".npy") return read_text_matrix(file);
    const Tensor tensor = read_npy(file);
    Shape shape = tensor.shape();
    if (shape.size() == 3 && shape[0] == 1) shape.erase(shape.begin());
    if (shape.size() != 2 || shape[0] < 1 || shape[1] < 1) {
        throw FileError(file, "expected one matrix (rows, columns), got shape " + shape_to_string(tensor.shape()));
    }
    TextMatrix matrix;
    matrix.rows = static_cast<std::size_t>(shape[0]);
    matrix.columns = static_cast<std::size_t>(shape[1]);
    const Tensor values = convert_to(tensor.view(), DType::Float64);
    matrix.values.assign(values.data_as<double>(), values.data_as<double>() + values.numel());
    for (double v : matrix.values) {
        if (!std::isfinite(v)) throw FileError(file, "the matrix holds a non-finite value");
    }
    return matrix;
}

}  // namespace gridwarp::io
