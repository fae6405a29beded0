// ITK HDF5 transform files are parsed in a process of their own (docs/reliability.md, "HDF5"):
// libhdf5 is not safe on hostile bytes, and a crash, a hang or a runaway allocation there must end
// as one error line, not as the death of gridwarp's process or of a Python interpreter.
#pragma once

#include <filesystem>

#include "gridwarp/io/transform_io.hpp"

namespace gridwarp::io::detail {

// The reader program, beside the modules (backends.hpp).
inline constexpr const char* kHdf5ReaderProgram = "gridwarp-hdf5-reader";
// Its time limit: a hostile file's parse is cut off here (a real file reads in well under it).
inline constexpr unsigned kHdf5ReaderSeconds = 120;
// Its exit status when it refused the file (the message is its stderr).
inline constexpr int kHdf5ReaderRefused = 3;

// Runs the reader program on `file` and decodes what it hands back. Throws FileError naming the
// file for anything the reader refused, and for its crash, time-out or memory exhaustion.
TransformFile read_hdf5_transform(const std::filesystem::path& file, std::size_t dimension, const ReadOptions& options);

}  // namespace gridwarp::io::detail
