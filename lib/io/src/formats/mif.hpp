// Internal: MRtrix3 images (mif.cpp): .mif (header and voxels in one file), .mif.gz (the same,
// gzipped) and .mih (a header naming its data file). docs/formats.md gives the conventions and
// what a written file keeps.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "formats/mapped_output.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

Image read_mif(const std::filesystem::path& file, const ReadOptions& options, bool with_pixels);
void write_mif(const StagedFile& staged, const Image& image, const WriteOptions& options);

// The header and the data file it names where that is another file (a .mih's); for writing, a
// .mih and the NAME.dat beside it that mrconvert would make.
std::vector<std::filesystem::path> mif_files_read(const std::filesystem::path& file);
std::vector<std::filesystem::path> mif_files_written(const std::filesystem::path& file);

// A plain .mif output sampled straight into its pages; nullopt for .mif.gz and .mih, for values
// that need a conversion on the way (scaled integers), or where the file system cannot reserve
// the space up front.
std::optional<MappedOutput> map_mif_output(const StagedFile& staged, const Image& description);

}  // namespace gridwarp::io::detail
