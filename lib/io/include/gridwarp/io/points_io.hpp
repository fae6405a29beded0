// Point sets on disk: CSV and TSV tables with x, y[, z] columns (antsApplyTransformsToPoints'
// layout; every other column is kept as it is) and .npy arrays of shape (N, 2) or (N, 3).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "gridwarp/tensor.hpp"

namespace gridwarp::io {

struct PointSet {
    std::size_t dimension = 3;  // 2 or 3
    std::vector<double> coordinates;  // N x dimension, x first, as the file holds them
    std::string format;  // "csv", "tsv" or "npy"

    // Tables: the header's cells and each row's line exactly as read (quotes included; a row is
    // split again when written, one string a row being far smaller than one a cell), so that a
    // written table differs from the one read in its coordinate cells only.
    std::vector<std::string> header;
    std::vector<std::string> rows;
    char delimiter = ',';
    std::vector<std::size_t> coordinate_columns;  // the x, y[, z] cells of each row
    // .npy: the dtype the file held (a floating one is written back as it was; integers as float64).
    DType npy_dtype = DType::Float64;

    std::size_t size() const { return dimension == 0 ? 0 : coordinates.size() / dimension; }
};

// Reads a .csv, .tsv or .npy point set. Throws FileError naming the file and the problem (no x/y
// column, a cell that is not a finite number, a row with too few cells, a wrong array shape).
PointSet read_points(const std::filesystem::path& file);

// Writes `points` in the format `file`'s extension names, atomically: a table keeps the cells it
// was read with and puts the coordinates in the shortest text that reads back to the same double;
// a table written from a .npy set (or a .npy from a table) gets the columns x, y[, z] only.
void write_points(const std::filesystem::path& file, const PointSet& points);

}  // namespace gridwarp::io
