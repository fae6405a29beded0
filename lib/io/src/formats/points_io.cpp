#include "gridwarp/io/points_io.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <exception>
#include <ostream>

#include "formats/gifti.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/npy.hpp"
#include "names.hpp"

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

// The cells of one line, split at `delimiter` outside double quotes ("" inside quotes is a quote),
// each with its text as written. A line break inside quotes is not part of a point table. Lines
// of a table without quotes, nearly every table, are split by memchr.
class CellCursor {
public:
    CellCursor(std::string_view line, char delimiter, bool table_has_quotes)
        : line_(line), delimiter_(delimiter), has_quotes_(table_has_quotes) {}

    // The next cell into `cell`; false past the last one.
    bool next(std::string_view& cell) {
        if (done_) return false;
        const std::size_t begin = at_;
        std::size_t end = begin;
        if (has_quotes_) {
            bool quoted = false;
            for (; end < line_.size() && (quoted || line_[end] != delimiter_); ++end) {
                if (line_[end] == '"') quoted = !quoted;
            }
            unclosed_quote_ = unclosed_quote_ || quoted;
        } else {
            end = std::min(line_.find(delimiter_, begin), line_.size());
        }
        done_ = end == line_.size();
        at_ = end + 1;
        cell = line_.substr(begin, end - begin);
        return true;
    }

    bool unclosed_quote() const { return unclosed_quote_; }

private:
    std::string_view line_;
    char delimiter_;
    bool has_quotes_;
    std::size_t at_ = 0;
    bool done_ = false;
    bool unclosed_quote_ = false;
};

// A cell's text without the spaces around it and, when quoted, without its quotes.
std::string_view cell_text(std::string_view cell) {
    const auto first = cell.find_first_not_of(" \t");
    if (first == std::string_view::npos) return {};
    std::string_view text = cell.substr(first, cell.find_last_not_of(" \t") - first + 1);
    if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
    return text;
}

double parse_coordinate(std::string_view cell, const std::filesystem::path& file, std::size_t line_number, char axis) {
    const std::string_view text = cell_text(cell);
    double value = 0.0;
    const char* begin = text.data();
    const char* end = begin + text.size();
    if (!text.empty() && *begin == '+') ++begin;
    const auto [stop, error] = std::from_chars(begin, end, value);
    if (text.empty() || error != std::errc() || stop != end || !std::isfinite(value)) {
        throw FileError(file, "line " + std::to_string(line_number) + ": column " + axis + " holds '" + std::string(text) +
                                  "', not a finite number");
    }
    return value;
}

std::string unclosed_quote_problem(std::size_t line_number) { return "line " + std::to_string(line_number) + ": a quoted cell is not closed"; }

// The line of `text` from `at`, without its line end (LF or CRLF); `at` moves past it.
std::string_view next_line(std::string_view text, std::size_t& at) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
}

bool is_blank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

int worker_count(int threads) { return std::max(1, threads > 0 ? threads : omp_get_max_threads()); }

// Tables smaller than this are parsed on one thread: starting more would cost more than it saves.
constexpr std::size_t kMinParallelTableBytes = std::size_t{1} << 20;

// Whole lines of a table's rows, parsed by one thread into its own stretch of the point set's
// arrays, with room for as many rows as it has lines.
struct RowBlock {
    std::size_t begin = 0;  // offsets into the table's text
    std::size_t end = 0;
    std::size_t first_line = 0;  // the line number of its first line
    std::size_t first_row = 0;  // where its rows go in the arrays
    std::size_t row_count = 0;  // how many it read (blank lines are skipped)
    std::exception_ptr error;  // the first problem, which ends the block
};

// Reads the rows of `block` into `points`' arrays, with the columns its header named.
void parse_rows(std::string_view text, PointSet& points, bool has_quotes, const std::filesystem::path& file, RowBlock& block) {
    const std::string_view lines = text.substr(0, block.end);
    const std::size_t dimension = points.dimension;
    std::size_t at = block.begin;
    for (std::size_t line_number = block.first_line; at < lines.size(); ++line_number) {
        const std::string_view line = next_line(lines, at);
        if (is_blank(line)) continue;
        CellCursor cells(line, points.delimiter, has_quotes);
        std::array<std::string_view, 3> coordinate_cells;
        std::string_view cell;
        std::size_t cell_count = 0;
        for (; cells.next(cell); ++cell_count) {
            for (std::size_t axis = 0; axis < dimension; ++axis) {
                if (points.coordinate_columns[axis] == cell_count) coordinate_cells[axis] = cell;
            }
        }
        if (cells.unclosed_quote()) throw FileError(file, unclosed_quote_problem(line_number));
        const std::size_t row = block.first_row + block.row_count++;
        for (std::size_t axis = 0; axis < dimension; ++axis) {
            if (points.coordinate_columns[axis] >= cell_count) {
                throw FileError(file, "line " + std::to_string(line_number) + " has " + std::to_string(cell_count) +
                                          " cell(s), too few for its " + std::string(1, "xyz"[axis]) + " column");
            }
            points.coordinates[row * dimension + axis] = parse_coordinate(coordinate_cells[axis], file, line_number, "xyz"[axis]);
        }
        points.rows[row] = {static_cast<std::size_t>(line.data() - text.data()), line.size()};
    }
}

// The header's cells and the coordinate columns they name.
void parse_header(std::string_view line, std::size_t line_number, bool has_quotes, const std::filesystem::path& file, PointSet& points) {
    CellCursor cells(line, points.delimiter, has_quotes);
    std::string_view cell;
    while (cells.next(cell)) points.header.emplace_back(cell);
    if (cells.unclosed_quote()) throw FileError(file, unclosed_quote_problem(line_number));
    std::vector<std::size_t> found(3, points.header.size());
    for (std::size_t k = 0; k < points.header.size(); ++k) {
        const std::string name = detail::lowercase(cell_text(points.header[k]));
        for (std::size_t axis = 0; axis < 3; ++axis) {
            if (name == std::string(1, "xyz"[axis]) && found[axis] == points.header.size()) found[axis] = k;
        }
    }
    if (found[0] == points.header.size() || found[1] == points.header.size()) {
        throw FileError(file, std::string("the header names no x and y columns (expected x,y[,z] as antsApplyTransformsToPoints ") +
                                  "reads them, separated by " + (points.delimiter == '\t' ? "tabs" : "commas") + ")");
    }
    points.dimension = found[2] == points.header.size() ? 2 : 3;
    points.coordinate_columns.assign(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(points.dimension));
}

// The rows are parsed in one block per thread, each cut at a line end; a problem is reported for
// the first block that has one, so the message is the one a single thread would give.
PointSet read_table(const std::filesystem::path& file, char delimiter, const char* format, int threads) {
    PointSet points;
    points.format = format;
    points.delimiter = delimiter;
    points.table_text = read_file_bytes(file);
    const std::string_view text = points.table_text;
    // Whole-file checks, so that each row is searched only for its cells.
    if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
        throw FileError(file, "line " + std::to_string(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n') + 1) +
                                  " holds a NUL byte: not a text table");
    }
    const bool has_quotes = text.find('"') != std::string_view::npos;

    std::size_t at = 0, line_number = 0;
    while (at < text.size()) {
        std::string_view line = next_line(text, at);
        ++line_number;
        if (line_number == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // a spreadsheet's byte order mark
        if (is_blank(line)) continue;
        parse_header(line, line_number, has_quotes, file, points);
        break;
    }
    if (points.header.empty()) throw FileError(file, "the table is empty: expected a header row naming x,y[,z]");
    const std::size_t body = std::min(at, text.size());

    const auto block_count = static_cast<std::size_t>(text.size() - body < kMinParallelTableBytes ? 1 : worker_count(threads));
    std::vector<RowBlock> blocks(block_count);
    for (std::size_t k = 0; k < block_count; ++k) {
        blocks[k].begin = k == 0 ? body : blocks[k - 1].end;
        const std::size_t target = std::max(blocks[k].begin, body + (text.size() - body) * (k + 1) / block_count);
        blocks[k].end = k + 1 == block_count ? text.size() : std::min(text.find('\n', target), text.size() - 1) + 1;
    }
    std::vector<std::size_t> line_ends(block_count);
#pragma omp parallel for schedule(static, 1) num_threads(static_cast<int>(block_count)) if (block_count > 1)
    for (std::size_t k = 0; k < block_count; ++k) {
        const auto first = text.begin() + static_cast<std::ptrdiff_t>(blocks[k].begin);
        line_ends[k] = static_cast<std::size_t>(std::count(first, text.begin() + static_cast<std::ptrdiff_t>(blocks[k].end), '\n'));
    }
    // Room for a row per line: its line ends, and the file's last line where it has none.
    std::size_t capacity = 0;
    for (std::size_t k = 0; k < block_count; ++k) {
        blocks[k].first_line = k == 0 ? line_number + 1 : blocks[k - 1].first_line + line_ends[k - 1];
        blocks[k].first_row = capacity;
        capacity += line_ends[k] + (blocks[k].end > blocks[k].begin && text[blocks[k].end - 1] != '\n' ? 1 : 0);
    }
    points.rows.resize(capacity);
    points.coordinates.resize(capacity * points.dimension);
#pragma omp parallel for schedule(static, 1) num_threads(static_cast<int>(block_count)) if (block_count > 1)
    for (std::size_t k = 0; k < block_count; ++k) {
        try {
            parse_rows(text, points, has_quotes, file, blocks[k]);
        } catch (...) {
            blocks[k].error = std::current_exception();
        }
    }
    // The blocks' rows, moved together where blank lines or a last line end left room.
    std::size_t row_count = 0;
    for (const RowBlock& block : blocks) {
        if (block.error) std::rethrow_exception(block.error);
        if (block.first_row != row_count) {
            const auto dimension = static_cast<std::ptrdiff_t>(points.dimension);
            const auto from = static_cast<std::ptrdiff_t>(block.first_row), count = static_cast<std::ptrdiff_t>(block.row_count);
            std::copy_n(points.rows.begin() + from, count, points.rows.begin() + static_cast<std::ptrdiff_t>(row_count));
            std::copy_n(points.coordinates.begin() + from * dimension, count * dimension,
                        points.coordinates.begin() + static_cast<std::ptrdiff_t>(row_count) * dimension);
        }
        row_count += block.row_count;
    }
    points.rows.resize(row_count);
    points.coordinates.resize(row_count * points.dimension);
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

void append_shortest_text(std::string& out, double value) {
    char text[32];
    const auto result = std::to_chars(text, text + sizeof text, value);
    out.append(text, result.ptr);
}

// Writes a table: the rows as read with their coordinate cells replaced, or x, y[, z] columns
// alone. The threads take turns at pieces of kRowsPerPiece rows, each formatted into the thread's
// own text and written in order as soon as the pieces before it are: the output costs a piece of
// memory per thread beside the points, and no thread waits for a whole round to finish.
void write_table(const std::filesystem::path& file, const PointSet& points, char delimiter, int threads) {
    constexpr std::size_t kRowsPerPiece = 16384;
    const std::size_t count = points.size();
    const std::size_t dimension = points.dimension;
    const bool as_read = !points.header.empty() && points.rows.size() == count;
    const std::string_view table_text = points.table_text;
    const bool has_quotes = as_read && table_text.find('"') != std::string_view::npos;
    // The axis each cell up to the last coordinate column holds (`dimension`: none).
    std::vector<std::size_t> axis_of_cell;
    if (as_read) {
        axis_of_cell.assign(*std::max_element(points.coordinate_columns.begin(), points.coordinate_columns.end()) + 1, dimension);
        for (std::size_t axis = 0; axis < dimension; ++axis) axis_of_cell[points.coordinate_columns[axis]] = axis;
    }
    const auto format_row = [&](std::size_t row, std::string& text) {
        const double* point = points.coordinates.data() + row * dimension;
        if (!as_read) {
            for (std::size_t axis = 0; axis < dimension; ++axis) {
                if (axis) text += delimiter;
                append_shortest_text(text, point[axis]);
            }
        } else {
            CellCursor cells(table_text.substr(points.rows[row].begin, points.rows[row].size), points.delimiter, has_quotes);
            std::string_view cell;
            for (std::size_t index = 0; cells.next(cell); ++index) {
                if (index) text += delimiter;
                if (index < axis_of_cell.size() && axis_of_cell[index] < dimension) {
                    append_shortest_text(text, point[axis_of_cell[index]]);
                } else {
                    text.append(cell);
                }
            }
        }
        text += '\n';
    };

    write_file_atomically(file, [&](std::ostream& out) {
        const std::vector<std::string> plain_header = dimension == 3 ? std::vector<std::string>{"x", "y", "z"} : std::vector<std::string>{"x", "y"};
        const std::vector<std::string>& header = as_read ? points.header : plain_header;
        for (std::size_t k = 0; k < header.size(); ++k) out << (k ? std::string(1, delimiter) : "") << header[k];
        out << '\n';
        const std::size_t piece_count = (count + kRowsPerPiece - 1) / kRowsPerPiece;
        const auto workers = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(worker_count(threads)), std::max<std::size_t>(piece_count, 1)));
        std::exception_ptr error;  // the first, after which pieces are neither formatted nor written
        std::atomic<bool> failed = false;
#pragma omp parallel num_threads(workers) if (workers > 1)
        {
            std::string piece;
#pragma omp for ordered schedule(static, 1)
            for (std::size_t k = 0; k < piece_count; ++k) {
                try {
                    piece.clear();
                    const std::size_t end = std::min((k + 1) * kRowsPerPiece, count);
                    for (std::size_t row = k * kRowsPerPiece; row < end && !failed; ++row) format_row(row, piece);
                } catch (...) {
#pragma omp critical(gridwarp_points_write_error)
                    if (!error) error = std::current_exception();
                    failed = true;
                }
#pragma omp ordered
                {
                    try {
                        if (!failed) out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
                    } catch (...) {
#pragma omp critical(gridwarp_points_write_error)
                        if (!error) error = std::current_exception();
                        failed = true;
                    }
                }
            }
        }
        if (error) std::rethrow_exception(error);
    });
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

PointSet read_points(const std::filesystem::path& file, int threads) {
    switch (kind_of(file)) {
        case TableKind::Csv: return read_table(file, ',', "csv", threads);
        case TableKind::Tsv: return read_table(file, '\t', "tsv", threads);
        case TableKind::Npy: return read_npy_points(file);
        case TableKind::Gifti: return detail::read_gifti_points(read_file_bytes(file), file);
    }
    return {};
}

void write_points(const std::filesystem::path& file, const PointSet& points, int threads) {
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
    write_table(file, points, kind == TableKind::Tsv ? '\t' : ',', threads);
}

}  // namespace gridwarp::io
