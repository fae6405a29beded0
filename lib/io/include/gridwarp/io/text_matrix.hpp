// Plain-text matrices: one row per line, numbers separated by spaces, tabs or commas;
// blank lines and lines starting with '#' are ignored, and so is a leading UTF-8 byte-order mark.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

namespace gridwarp::io {

struct TextMatrix {
    std::size_t rows = 0;
    std::size_t columns = 0;
    std::vector<double> values;  // row-major
};

TextMatrix parse_text_matrix(std::string_view text, const std::filesystem::path& source);
TextMatrix read_text_matrix(const std::filesystem::path& file);
// A matrix from a text file, or from a .npy file holding a 2-D array (or a 3-D one with N=1).
TextMatrix read_matrix(const std::filesystem::path& file);

}  // namespace gridwarp::io
