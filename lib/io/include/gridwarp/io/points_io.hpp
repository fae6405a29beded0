// Point sets on disk: CSV and TSV tables with x, y[, z] columns (antsApplyTransformsToPoints'
// layout; every other column is kept as it is), .npy arrays of shape (N, 2) or (N, 3), and GIFTI
// surfaces (.gii: the vertices of the NIFTI_INTENT_POINTSET array; every other byte is kept).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "gridwarp/tensor.hpp"

namespace gridwarp::io {

// GIFTI: how the pointset array's <Data> text encodes the coordinates, and where it lies in the
// document, so that the text can be replaced by the mapped coordinates encoded the same way.
struct GiftiPointData {
    enum class Encoding { Ascii, Base64Binary, GZipBase64Binary };
    Encoding encoding = Encoding::Ascii;
    DType dtype = DType::Float32;  // Float32 or Float64
    bool big_endian = false;
    bool column_major = false;  // ArrayIndexingOrder: all x, then all y, then all z
    // document[text_begin, text_end) is the encoded data without the white space around it.
    std::size_t text_begin = 0;
    std::size_t text_end = 0;
};

struct PointSet {
    std::size_t dimension = 3;  // 2 or 3
    std::vector<double> coordinates;  // N x dimension, x first, as the file holds them
    std::string format;  // "csv", "tsv", "npy" or "gifti"

    // Tables: the header's cells and each row's line exactly as read (quotes included), so that a
    // written table differs from the one read in its coordinate cells only. The rows are spans of
    // the file's text, split again when written: one allocation for the table, not one a row or a cell.
    struct TextSpan {
        std::size_t begin = 0;
        std::size_t size = 0;
    };
    std::vector<std::string> header;
    std::string table_text;
    std::vector<TextSpan> rows;  // each row's line in table_text, without its line end
    char delimiter = ',';
    std::vector<std::size_t> coordinate_columns;  // the x, y[, z] cells of each row
    // .npy: the dtype the file held (a floating one is written back as it was; integers as float64).
    DType npy_dtype = DType::Float64;
    // GIFTI: the file's bytes as read (triangles, metadata, other arrays) and the pointset's data in it.
    std::string gifti_document;
    GiftiPointData gifti_data;

    std::size_t size() const { return dimension == 0 ? 0 : coordinates.size() / dimension; }
};

// The format `file`'s extension names: "csv", "tsv", "npy" or "gifti" (.gii). Throws FileError for
// any other extension.
std::string point_format_of(const std::filesystem::path& file);

// Reads a .csv, .tsv, .npy or .gii point set. Throws FileError naming the file and the problem (no
// x/y column, a cell that is not a finite number, a row with too few cells, a wrong array shape, a
// GIFTI file without one well-formed pointset array). A table is parsed on `threads` threads (0:
// every core).
PointSet read_points(const std::filesystem::path& file, int threads = 0);

// Writes `points` in the format `file`'s extension names, atomically: a table keeps the cells it
// was read with and puts the coordinates in the shortest text that reads back to the same double;
// a table written from a .npy set (or a .npy from a table) gets the columns x, y[, z] only. A GIFTI
// file is the one read with the pointset's data re-encoded as they were; a set read from any other
// format is refused as GIFTI output (it has no triangles to write). A table is formatted on
// `threads` threads (0: every core).
void write_points(const std::filesystem::path& file, const PointSet& points, int threads = 0);

}  // namespace gridwarp::io
