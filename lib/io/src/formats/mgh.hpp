// Internal: FreeSurfer's MGH volumes (.mgh; gzipped .mgz and .mgh.gz), read and written by
// gridwarp's own codec (mgh.cpp). docs/formats.md gives the conventions: the voxel-to-RAS matrix,
// the types, frames as channels, and what an output keeps.
#pragma once

#include <filesystem>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

Image read_mgh(const std::filesystem::path& file, const ReadOptions& options, bool with_pixels);
void write_mgh(const StagedFile& staged, const Image& image, const WriteOptions& options);

// write_sampled's MGH form: every image MGH can hold is written a block of rows at a time as it
// is sampled (the voxels are big-endian, so no output is sampled in its file's pages). Throws
// FileError, before anything is sampled, for an image MGH cannot hold.
bool mgh_output_streams(const std::filesystem::path& target, const Image& description);
void stream_mgh_output(const StagedFile& staged, const Image& description, const WriteOptions& options,
                       const WindowSampler& sample, ChannelSampling channel_sampling);

}  // namespace gridwarp::io::detail
