// Internal: GIFTI surfaces (.gii) as point sets: the vertices of the file's one
// NIFTI_INTENT_POINTSET DataArray, in RAS mm as GIFTI stores them.
//  - Reading scans the XML only as far as that takes (tags, attributes, nesting, the array's <Data>
//    text), with no XML library: the document is kept whole for writing, and the scanner trusts no
//    size the file claims until the data it holds prove it.
//  - Writing encodes the mapped coordinates as the array was encoded (encoding, data type, byte
//    order, index order) and puts them in place of its <Data> text; every other byte of the file
//    (triangles, metadata, other arrays, the coordinate system matrix) stays as it was read.
#pragma once

#include <filesystem>
#include <string>

#include "gridwarp/io/points_io.hpp"

namespace gridwarp::io::detail {

// The point set of the GIFTI `document`, the bytes of `file`; it keeps the document. Throws
// FileError naming `file` (and the line) when the document is malformed or holds no single
// pointset array of N x 3 float32 or float64 values in an encoding gridwarp reads.
PointSet read_gifti_points(std::string document, const std::filesystem::path& file);

// Writes the document `points` was read from, with its pointset data replaced by
// `points.coordinates`, to `file`, atomically.
void write_gifti_points(const std::filesystem::path& file, const PointSet& points);

}  // namespace gridwarp::io::detail
