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

// How far a homogeneous matrix's last row may be from 0 ... 0 1: FSL's convert_xfm and FreeSurfer's
// mri_concatenate_lta compute in float32 and write rows such as "0 0 0 0.99999988" (1 - 2^-23).
// Within it, the row is taken as exactly 0 ... 0 1 (docs/reliability.md).
inline constexpr double kLastRowTolerance = 1e-6;
// Whether `row` (n values) is 0 ... 0 1 within kLastRowTolerance.
bool is_homogeneous_last_row(const double* row, std::size_t n);

}  // namespace gridwarp::io
