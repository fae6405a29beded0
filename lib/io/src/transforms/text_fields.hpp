// Small helpers the text transform readers share: a size-checked read, words of a line, and
// numbers that must be finite. Errors name the file and the line.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/text.hpp"

namespace gridwarp::io::detail {

// Transform text files are small (a 3dvolreg list of 10000 volumes is a few megabytes); a
// larger one is not such a file, and is refused before it is read.
inline constexpr std::uintmax_t kMaxTransformTextBytes = 16u << 20;

inline std::string read_transform_text(const std::filesystem::path& file) {
    std::error_code error;
    const auto size = std::filesystem::file_size(file, error);
    if (!error && size > kMaxTransformTextBytes) {
        throw FileError(file, "is " + std::to_string(size) + " bytes, more than a transform text file holds (" +
                                  std::to_string(kMaxTransformTextBytes) + ")");
    }
    std::string bytes = read_file_bytes(file);
    if (bytes.size() > kMaxTransformTextBytes) throw FileError(file, "is larger than a transform text file holds");
    return bytes;
}

// The lines of `text` one at a time (no list of them is kept: a hostile file may be all
// newlines), without a byte-order mark or carriage returns. index() is the last line's, from 0.
class TextLines {
public:
    explicit TextLines(std::string_view text) : rest_(without_byte_order_mark(text)) {}
    bool next(std::string_view& line) {
        if (rest_.empty()) return false;
        const auto end = rest_.find('\n');
        line = rest_.substr(0, end);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        rest_ = end == std::string_view::npos ? std::string_view() : rest_.substr(end + 1);
        index_ = started_ ? index_ + 1 : 0;
        started_ = true;
        return true;
    }
    std::size_t index() const { return index_; }

private:
    std::string_view rest_;
    std::size_t index_ = 0;
    bool started_ = false;
};

// Whitespace-separated words of a line, up to a '#' comment; at most kMaxLineWords + 1, so a
// caller sees a line with too many without a list as long as the line.
inline constexpr std::size_t kMaxLineWords = 64;
inline std::vector<std::string_view> line_words(std::string_view line) {
    std::vector<std::string_view> words;
    std::size_t pos = 0;
    auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; };
    while (pos < line.size()) {
        while (pos < line.size() && blank(line[pos])) ++pos;
        if (pos >= line.size() || line[pos] == '#') break;
        std::size_t end = pos;
        while (end < line.size() && !blank(line[end]) && line[end] != '#') ++end;
        words.push_back(line.substr(pos, end - pos));
        if (words.size() > kMaxLineWords) break;
        pos = end;
    }
    return words;
}

inline std::string line_label(std::size_t line_index) { return "line " + std::to_string(line_index + 1); }

inline double finite_number(std::string_view word, const std::filesystem::path& file, std::size_t line_index) {
    double value = 0;
    const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), value);
    if (error != std::errc() || end != word.data() + word.size() || !std::isfinite(value)) {
        throw FileError(file, line_label(line_index) + ": expected a finite number, found '" + std::string(word.substr(0, 40)) + "'");
    }
    return value;
}

inline long long whole_number(std::string_view word, const std::filesystem::path& file, std::size_t line_index) {
    long long value = 0;
    const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), value);
    if (error != std::errc() || end != word.data() + word.size()) {
        throw FileError(file, line_label(line_index) + ": expected a whole number, found '" + std::string(word.substr(0, 40)) + "'");
    }
    return value;
}

}  // namespace gridwarp::io::detail
