// ITK HDF5 transform files are parsed in a process of their own (docs/reliability.md, "HDF5"):
// libhdf5 is not safe on hostile bytes, and a crash, a hang or a runaway allocation there must end
// as one error line, not as the death of gridwarp's process or of a Python interpreter.
#pragma once

#include <cstdint>

#include <filesystem>

#include "gridwarp/io/transform_io.hpp"

namespace gridwarp::io::detail {

// The reader program, beside the modules (backends.hpp).
inline constexpr const char* kHdf5ReaderProgram = "gridwarp-hdf5-reader";
// Its time limit: a hostile file's parse is cut off here (a real file reads in well under it).
inline constexpr unsigned kHdf5ReaderSeconds = 120;
// The reader's data limit is --max-memory plus this, for the libraries' own data (HDF5 and ITK need
// under 16 MiB on a valid file): a buffer libhdf5 sizes from a file it does not check (a variable-
// length string's declared length) cannot pass the budget by more.
inline constexpr std::uint64_t kHdf5ReaderLibraryBytes = std::uint64_t{64} << 20;
// Its exit status when it refused the file (the message is its stderr).
inline constexpr int kHdf5ReaderRefused = 3;

// Runs the reader program on `file` and decodes what it hands back. Throws FileError naming the
// file for anything the reader refused, and for its crash, time-out or memory exhaustion.
TransformFile read_hdf5_transform(const std::filesystem::path& file, std::size_t dimension, const ReadOptions& options);

}  // namespace gridwarp::io::detail
