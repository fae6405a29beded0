// A TransformFile as bytes: how the HDF5 reader's own process (hdf5_isolation.cpp) hands back what
// it read. The decoder trusts nothing it is given: a reader process that misbehaves is refused like
// a damaged file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "gridwarp/io/transform_io.hpp"

namespace gridwarp::io::detail {

std::string encode_transform_file(const TransformFile& transforms);
// Throws FileError naming `source` when the bytes are not a whole encoding of `dimension`-D steps.
TransformFile decode_transform_file(std::string_view bytes, std::size_t dimension, const std::filesystem::path& source);

}  // namespace gridwarp::io::detail
