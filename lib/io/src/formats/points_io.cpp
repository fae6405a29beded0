#include "gridwarp/io/points_io.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ostream>

#include "formats/gifti.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/npy.hpp"

namespace gridwarp::io {

namespace {

enum class TableKind { Csv, Tsv, Npy, Gifti };

TableKind kind_of(const std::filesystem::path& file) {
    std::string extension = file.extension().string();
    std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (extension == ".csv") return TableKind::Csv;
    if (extension == ".tsv") return TableKind::Tsv;
    if (extension == ".npy") return TableKind::Npy;
    if (extension == ".gii") return TableKind::Gifti;
    throw FileError(file, "not a point format gridwarp reads or writes (expected .csv, .tsv, .npy or a GIFTI surface .gii)");
}

// One line's cells, split at `delimiter` outside double quotes ("" inside quotes is a quote).
// Cells keep their text as written; a line break inside quotes is not part of a point table.
std::vector<std::string> split_cells(std::string_view line, char delimiter, const std::filesystem::path& file, std::size_t line_number) {
    std::vector<std::string> cells(1);
    bool quoted = false;
    for (const char c : line) {
        if (c == '"') quoted = !quoted;
        if (c == delimiter && !quoted) {
            cells.emplace_back();
            continue;
        }
        cells.back() += c;
    }
    if (quoted) throw FileError(file, "line " + std::to_string(line_number) + ": a quoted cell is not closed");
    return cells;
}

// A cell's text without the spaces around it and, when quoted, without its quotes.
std::string cell_text(const std::string& cell) {
    const auto first = cell.find_first_not_of(" \t");
    if (first == std::string::npos) return "";
    std::string text = cell.substr(first, cell.find_last_not_of(" \t") - first + 1);
    if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
    return text;
}

std::string lowercase(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

double parse_coordinate(const std::string& cell, const std::filesystem::path& file, std::size_t line_number, const std::string& column) {
    const std::string text = cell_text(cell);
    double value = 0.0;
    const char* begin = text.data();
    const char* end = begin + text.size();
    if (!text.empty() && *begin == '+') ++begin;
    const auto [stop, error] = std::from_chars(begin, end, value);
    if (text.empty() || error != std::errc() || stop != end || !std::isfinite(value)) {
        throw FileError(file, "line " + std::to_string(line_number) + ": column " + column + " holds '" + text +
                                  "', not a finite number");
    }
    return value;
}

PointSet read_table(const std::filesystem::path& file, char delimiter, const char* format) {
    const std::string bytes = read_file_bytes(file);
    PointSet points;
    points.format = format;
    points.delimiter = delimiter;
    std::size_t line_number = 0;
    std::size_t at = 0;
    bool header_read = false;
    while (at < bytes.size()) {
        std::size_t end = bytes.find('\n', at);
        if (end == std::string::npos) end = bytes.size();
        std::string_view line(bytes.data() + at, end - at);
        at = end + 1;
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line_number == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // a spreadsheet's byte order mark
        if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
        if (line.find('\0') != std::string_view::npos) throw FileError(file, "line " + std::to_string(line_number) + " holds a NUL byte: not a text table");
        const std::vector<std::string> cells = split_cells(line, delimiter, file, line_number);
        if (!header_read) {
            header_read = true;
            points.header = cells;
            std::vector<std::size_t> found(3, points.header.size());
            for (std::size_t k = 0; k < points.header.size(); ++k) {
                const std::string name = lowercase(cell_text(points.header[k]));
                for (std::size_t axis = 0; axis < 3; ++axis) {
                    if (name == std::string(1, "xyz"[axis]) && found[axis] == points.header.size()) found[axis] = k;
                }
            }
            if (found[0] == points.header.size() || found[1] == points.header.size()) {
                throw FileError(file, std::string("the header names no x and y columns (expected x,y[,z] as antsApplyTransformsToPoints ") +
                                          "reads them, separated by " + (delimiter == '\t' ? "tabs" : "commas") + ")");
            }
            points.dimension = found[2] == points.header.size() ? 2 : 3;
            points.coordinate_columns.assign(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(points.dimension));
            continue;
        }
        for (std::size_t axis = 0; axis < points.dimension; ++axis) {
            const std::size_t column = points.coordinate_columns[axis];
            if (column >= cells.size()) {
                throw FileError(file, "line " + std::to_string(line_number) + " has " + std::to_string(cells.size()) +
                                          " cell(s), too few for its " + std::string(1, "xyz"[axis]) + " column");
            }
            points.coordinates.push_back(parse_coordinate(cells[column], file, line_number, std::string(1, "xyz"[axis])));
        }
        points.rows.emplace_back(line);
    }
    if (!header_read) throw FileError(file, "the table is empty: expected a header row naming x,y[,z]");
    return points;
}

PointSet read_npy_points(const std::filesystem::path& file) {
    const Tensor array = read_npy(file);
    if (array.rank() != 2 || (array.shape()[1] != 2 && array.shape()[1] != 3)) {
        throw FileError(file, "expected points of shape (N, 2) or (N, 3), got " + shape_to_string(array.shape()));
    }
    if (array.dtype() == DType::String || is_complex(array.dtype()) || array.dtype() == DType::Bool) {
        throw FileError(file, "points must be real numbers, got " + std::string(dtype_name(array.dtype())));
    }
    PointSet points;
    points.format = "npy";
    points.dimension = static_cast<std::size_t>(array.shape()[1]);
    points.npy_dtype = is_floating(array.dtype()) ? array.dtype() : DType::Float64;
    const Tensor values = convert_to(array.view(), DType::Float64);
    points.coordinates.assign(values.data_as<double>(), values.data_as<double>() + values.numel());
    for (std::size_t k = 0; k < points.coordinates.size(); ++k) {
        if (!std::isfinite(points.coordinates[k])) {
            throw FileError(file, "point " + std::to_string(k / points.dimension) + " holds a non-finite value (NaN or infinity)");
        }
    }
    return points;
}

std::string shortest_text(double value) {
    char text[32];
    const auto result = std::to_chars(text, text + sizeof text, value);
    return std::string(text, result.ptr);
}

}  // namespace

std::string point_format_of(const std::filesystem::path& file) {
    switch (kind_of(file)) {
        case TableKind::Csv: return "csv";
        case TableKind::Tsv: return "tsv";
        case TableKind::Npy: return "npy";
        case TableKind::Gifti: return "gifti";
    }
    return {};
}

PointSet read_points(const std::filesystem::path& file) {
    switch (kind_of(file)) {
        case TableKind::Csv: return read_table(file, ',', "csv");
        case TableKind::Tsv: return read_table(file, '\t', "tsv");
        case TableKind::Npy: return read_npy_points(file);
        case TableKind::Gifti: return detail::read_gifti_points(read_file_bytes(file), file);
    }
    return {};
}

void write_points(const std::filesystem::path& file, const PointSet& points) {
    const TableKind kind = kind_of(file);
    const std::size_t count = points.size();
    if (kind == TableKind::Gifti) {
        if (points.format != "gifti") {
            throw FileError(file, "a GIFTI surface is written only from one read (its triangles and metadata come from there); "
                                  "the points were read from ." + points.format);
        }
        detail::write_gifti_points(file, points);
        return;
    }
    if (kind == TableKind::Npy) {
        Tensor array(DType::Float64, {static_cast<std::int64_t>(count), static_cast<std::int64_t>(points.dimension)});
        std::copy(points.coordinates.begin(), points.coordinates.end(), array.data_as<double>());
        const Tensor stored = points.npy_dtype == DType::Float64 ? std::move(array) : convert_to(array.view(), points.npy_dtype);
        write_npy(file, stored.view());
        return;
    }
    const char delimiter = kind == TableKind::Tsv ? '\t' : ',';
    const bool as_read = !points.header.empty() && points.rows.size() == count;
    write_file_atomically(file, [&](std::ostream& out) {
        auto write_row = [&](const std::vector<std::string>& cells) {
            for (std::size_t k = 0; k < cells.size(); ++k) out << (k ? std::string(1, delimiter) : "") << cells[k];
            out << '\n';
        };
        if (as_read) {
            write_row(points.header);
        } else {
            write_row(points.dimension == 3 ? std::vector<std::string>{"x", "y", "z"} : std::vector<std::string>{"x", "y"});
        }
        for (std::size_t row = 0; row < count; ++row) {
            std::vector<std::string> cells =
                as_read ? split_cells(points.rows[row], points.delimiter, file, row + 2) : std::vector<std::string>(points.dimension);
            for (std::size_t axis = 0; axis < points.dimension; ++axis) {
                cells[as_read ? points.coordinate_columns[axis] : axis] = shortest_text(points.coordinates[row * points.dimension + axis]);
            }
            write_row(cells);
        }
    });
}

}  // namespace gridwarp::io
