// The fixtures' .npy files (version 1.0, little-endian float32, float64 or int64, C order), read
// without gridwarp::io so that the core tests build where the io library does not (docs/design.md).
#pragma once

#include <filesystem>
#include <string>

#include "gridwarp/tensor.hpp"

namespace gridwarp::test {

std::string read_whole_file(const std::filesystem::path& file);
// Throws std::runtime_error naming the file for anything outside that subset of the format.
Tensor read_fixture_npy(const std::filesystem::path& file);

}  // namespace gridwarp::test
