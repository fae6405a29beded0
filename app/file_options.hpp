// Reading and writing options (--max-memory, --nifti-geometry, --compression-level, ...) and the checks
// every output passes before it is written.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "image_arguments.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::cli {

// --max-memory BYTES bounds every buffer whose size a file or the command line declares rather than
// proves (docs/reliability.md). --max-voxels N, deprecated, bounds values instead; given alone it
// keeps its old meaning (the byte budget off), so that old command lines run as before.
struct MemoryFlags {
    std::uint64_t max_memory = io::kDefaultMaxMemory;
    std::uint64_t max_voxels = 0;
    bool max_memory_given = false;
    bool max_voxels_given = false;
};
void add_memory_options(CLI::App& command, MemoryFlags& flags);
io::MemoryBudget to_memory_budget(const MemoryFlags& flags);

struct VolumeFlags {
    std::string nifti_geometry = "standard";
    int compression_level = -1;
    int quality = -1;
    std::string chunk_codec;
    bool pyramid = false;
    int pyramid_levels = 0;
    MemoryFlags memory;
    bool allow_outside_data_files = false;
    bool keep_orientation = false;
};

// --nifti-geometry, --max-memory (and --max-voxels), --allow-outside-data-files, --keep-orientation (reading) and, for
// commands that write, --compression-level.
void add_volume_options(CLI::App& command, VolumeFlags& flags, bool writes);
io::ReadOptions to_read_options(const VolumeFlags& flags, const CommonOptions& common);
io::WriteOptions to_write_options(const VolumeFlags& flags, const CommonOptions& common);

// Refuses an output of `extents` points of `per_point` values of `value_bytes` bytes each, before
// it is allocated: std::invalid_argument naming `origin` (the option or file that sets the size)
// when an extent is not positive, io::FileError naming `output` and `origin` when it passes the budget.
void check_output_size(const std::filesystem::path& output, const std::string& origin, const std::vector<std::int64_t>& extents,
                       std::uint64_t per_point, std::uint64_t value_bytes, const io::MemoryBudget& budget);
// The budget alone, for outputs whose extents were already checked (0 allowed: an empty output).
void check_output_memory(const std::filesystem::path& output, const std::string& origin, const std::vector<std::int64_t>& extents,
                         std::uint64_t per_point, std::uint64_t value_bytes, const io::MemoryBudget& budget);

// Refuses (std::invalid_argument naming the output) outputs that would overwrite an input or one
// another: every file each output writes (a pair by both halves) against every file each input
// reads (a pair by both halves, a detached header's data files), by identity (io::FileIdentity), not
// by spelling.
void check_outputs_differ(const std::vector<std::filesystem::path>& outputs, const std::vector<std::filesystem::path>& inputs);
void check_output_differs(const std::filesystem::path& output, const std::vector<std::filesystem::path>& inputs);
// The same for an output file; a result kept in memory overwrites nothing.
void check_output_differs(const OutputArgument& output, const std::vector<std::filesystem::path>& inputs);

}  // namespace gridwarp::cli
