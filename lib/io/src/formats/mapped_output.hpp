// Internal: an output sampled straight into its file's mapped pages.
#pragma once

#include <filesystem>
#include <optional>

#include "files/mapped_file.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

// An output sampled straight into its file: `image.pixels` are the mapped voxel bytes of `file`
// (created at its final size, header written). Release the image's pixels, then call finish() to
// close the file (or abandon() on failure); the caller moves the file into place.
struct MappedOutput {
    Image image;
    FileClosers closers;
};

// The same for a .npy (any dtype but strings), stored as (N, C, spatial...): the image's layout
// becomes planar.
std::optional<MappedOutput> map_npy_output(const StagedFile& staged, const Image& description);

}  // namespace gridwarp::io::detail
