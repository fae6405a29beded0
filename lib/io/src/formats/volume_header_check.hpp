// Internal: NRRD and MetaImage headers read and checked by gridwarp before ITK sees them.
//
// ITK's readers trust their headers: a size product that overflows, a data file pattern running to
// 2^31, a data file outside the header's folder (/etc/passwd, /dev/zero) or an over-long field
// reach ITK's allocation, file and string code unchecked. So the header is parsed here first, every
// field ITK would act on is checked, and the declared voxel bytes are compared with the bytes that
// the data files can hold, all before anything is allocated. See docs/reliability.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

enum class DataEncoding { Raw, Deflate, Bzip2, Text, Hex };

// One data file: where it is and where its voxels begin.
struct DeclaredDataFile {
    std::filesystem::path path;
    std::int64_t offset = 0;  // bytes before the voxels; -1: the voxels end the file
};

struct DeclaredVolume {
    std::string format;                // "nrrd" or "metaimage"
    std::vector<std::uint64_t> sizes;  // every axis as declared (a vector axis included)
    std::uint64_t component_bytes = 0; // of one stored value
    std::uint64_t values = 0;          // product of the sizes and the channel count
    DataEncoding encoding = DataEncoding::Raw;
    std::vector<DeclaredDataFile> data_files;  // in order; the header's own file when attached
    std::int64_t compressed_bytes = -1;        // MetaImage CompressedDataSize, when given
};

// The longest header line accepted, and the longest header. (ITK's NRRD reader overflows a stack
// buffer on a field of about 2,400 bytes; no legitimate field comes near 1,024.)
inline constexpr std::size_t kMaxHeaderLineBytes = 1024;
inline constexpr std::size_t kMaxHeaderBytes = 1 << 20;
// Data files one header may name (a numbered pattern or a LIST).
inline constexpr std::uint64_t kMaxDataFiles = 1 << 16;

// Parses the header text of `file` (a .nrrd/.nhdr or .mha/.mhd; for an attached header, the bytes up
// to and including the end of the header) and checks every field: throws FileError naming the file
// and the field. `header_end` is where the header stops in the file (the first voxel byte of an
// attached header). Data files are resolved against the header's folder but not opened.
DeclaredVolume parse_volume_header(std::string_view header, std::uint64_t header_end, const std::filesystem::path& file);

// Reads and parses the header of `file`, then checks its data files: inside the header's folder
// (unless options.allow_outside_data_files), regular files, and large enough for the declared
// voxels (raw data: the bytes themselves; deflate: at most 1032:1). Compressed voxels are bounded
// by the memory budget where they are read (read_itk_volume).
DeclaredVolume check_volume_file(const std::filesystem::path& file, const ReadOptions& options);

// Inflates every deflate-compressed data file of `volume` and refuses one that ends, or fails,
// before it has yielded its share of the voxels (ITK would go on with a partly filled buffer).
void check_volume_data_inflates(const DeclaredVolume& volume, const std::filesystem::path& file);

// The files a NRRD or MetaImage path stands for: an attached header itself; a detached header
// (.nhdr, .mhd) and, for reading, the data files it names (itself only where it cannot be parsed:
// the read will say why), for writing, the data file ITK writes beside it.
std::vector<std::filesystem::path> detached_header_files_read(const std::filesystem::path& file);
std::vector<std::filesystem::path> detached_header_files_written(const std::filesystem::path& file);

}  // namespace gridwarp::io::detail
