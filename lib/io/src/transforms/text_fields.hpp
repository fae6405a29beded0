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

// The lines of `text`, without a byte-order mark or carriage returns.
inline std::vector<std::string_view> text_lines(std::string_view text) {
    text = without_byte_order_mark(text);
    std::vector<std::string_view> lines;
    while (!text.empty()) {
        const auto end = text.find('\n');
        std::string_view line = text.substr(0, end);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        lines.push_back(line);
        text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    }
    return lines;
}

// Whitespace-separated words of a line, up to a '#' comment.
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
