// Reading and writing options (--max-memory, --nifti-geometry, ...) and the checks on outputs.
#include "file_options.hpp"

#include <algorithm>
#include <stdexcept>

#include "gridwarp/io/file_identity.hpp"

namespace gridwarp::cli {

void add_volume_options(CLI::App& command, VolumeFlags& flags, bool writes) {
    command.add_option("--nifti-geometry", flags.nifti_geometry,
                       "NIfTI voxel-to-world rule: standard (sform, else qform, else pixdim: nibabel, FSL, SPM, MRtrix3) "
                       "or itk (ITK 5.2, as antsApplyTransforms reads it)")
        ->capture_default_str()
        ->check(CLI::IsMember({"standard", "itk"}));
    add_memory_options(command, flags.memory);
    command.add_flag("--allow-outside-data-files", flags.allow_outside_data_files,
                     "Let a detached header (.nhdr, .mhd, a NIfTI pair's half) bring along data files outside its own folder");
    command.add_flag("--keep-orientation", flags.keep_orientation,
                     "Read an image's stored pixels as they are, not turned by its EXIF orientation as viewers show them");
    if (writes) {
        command.add_option("--compression-level", flags.compression_level,
                           "gzip level for .nii.gz outputs: 0 (stored) to 12 (smallest); default 4, within 1 % of zlib's 6 "
                           "(1 where a trial block shows that 4 buys less than 0.5 %: noise-like data). PNG outputs: "
                           "0 to 9, default 4")
            ->check(CLI::Range(0, 12));
        command.add_option("--quality", flags.quality, "JPEG and WebP outputs: 1 (smallest) to 100 (best); default 95 for JPEG, "
                                                       "lossless for WebP")
            ->check(CLI::Range(1, 100));
        command.add_option("--chunk-codec", flags.chunk_codec, "OME-Zarr outputs: the chunks' compressor, blosc (LZ4; default), zstd, zlib, gzip or none")
            ->check(CLI::IsMember({"blosc", "zstd", "zlib", "gzip", "none"}));
        command.add_flag("--pyramid", flags.pyramid,
                         "OME-Zarr and TIFF outputs: also write halved levels (each voxel the mean of a 2x2 or 2x2x2 block), down to one chunk or tile");
        command.add_option("--pyramid-levels", flags.pyramid_levels, "OME-Zarr and TIFF outputs: write this many halved levels (--pyramid with a count)")
            ->check(CLI::Range(1, 40));
    }
}

void add_memory_options(CLI::App& command, MemoryFlags& flags) {
    command.add_option("--max-memory", flags.max_memory,
                       "Most bytes one buffer may take when a file or this command line declares its size rather than "
                       "proves it (compressed voxels, encoded images, outputs): a byte count or 512M, 4G (powers of "
                       "1024); 0: no limit")
        ->check(CLI::Validator(
            [](const std::string& text) {
                // A "-1" would wrap to 2^64 - 1 bytes, silently no limit.
                return text.find('-') == std::string::npos ? std::string() : "expected a byte count, got " + text;
            },
            ""))
        ->transform(CLI::AsSizeValue(false).description(""))
        ->type_name("BYTES")
        ->default_str("2G")
        ->each([&flags](const std::string&) { flags.max_memory_given = true; });
    command.add_option("--max-voxels", flags.max_voxels,
                       "Deprecated: most values (voxels x channels) instead of bytes; alone, it turns --max-memory off")
        ->each([&flags](const std::string&) { flags.max_voxels_given = true; });
}

io::MemoryBudget to_memory_budget(const MemoryFlags& flags) {
    io::MemoryBudget budget;
    budget.max_bytes = flags.max_voxels_given && !flags.max_memory_given ? 0 : flags.max_memory;
    budget.max_values = flags.max_voxels_given ? flags.max_voxels : 0;
    return budget;
}

void check_output_size(const std::filesystem::path& output, const std::string& origin, const std::vector<std::int64_t>& extents,
                       std::uint64_t per_point, std::uint64_t value_bytes, const io::MemoryBudget& budget) {
    for (const auto extent : extents) {
        if (extent < 1) throw std::invalid_argument(origin + ": expected positive sizes, got " + std::to_string(extent));
    }
    check_output_memory(output, origin, extents, per_point, value_bytes, budget);
}

void check_output_memory(const std::filesystem::path& output, const std::string& origin, const std::vector<std::int64_t>& extents,
                         std::uint64_t per_point, std::uint64_t value_bytes, const io::MemoryBudget& budget) {
    // Counted wide and saturated: twenty-digit sizes must reach the budget's message, not wrap.
    unsigned __int128 values = per_point;
    for (const auto extent : extents) {
        values = std::min<unsigned __int128>(values * static_cast<std::uint64_t>(std::max<std::int64_t>(extent, 0)), UINT64_MAX);
    }
    io::check_memory_budget(output, origin + ": the output", static_cast<std::uint64_t>(values), value_bytes, budget);
}

io::ReadOptions to_read_options(const VolumeFlags& flags, const CommonOptions& common) {
    io::ReadOptions options;
    options.threads = common.threads;
    options.nifti_geometry = io::parse_nifti_geometry_rule(flags.nifti_geometry);
    options.memory = to_memory_budget(flags.memory);
    options.allow_outside_data_files = flags.allow_outside_data_files;
    options.keep_orientation = flags.keep_orientation;
    return options;
}

io::WriteOptions to_write_options(const VolumeFlags& flags, const CommonOptions& common) {
    io::WriteOptions options;
    options.compression_level = flags.compression_level;
    options.quality = flags.quality;
    options.chunk_codec = flags.chunk_codec;
    options.pyramid_levels = flags.pyramid_levels > 0 ? flags.pyramid_levels : flags.pyramid ? -1 : 0;
    options.threads = common.threads;
    return options;
}

void check_outputs_differ(const std::vector<std::filesystem::path>& outputs, const std::vector<std::filesystem::path>& inputs) {
    io::FileIdentifier identify;
    struct Known {
        io::FileIdentity identity;
        std::filesystem::path file;   // one file of ...
        std::filesystem::path named;  // ... this path as given
        bool output;
    };
    std::vector<Known> known;
    for (const auto& input : inputs) {
        for (const auto& file : io::files_read(input)) known.push_back({identify(file), file, input, false});
    }
    for (const auto& output : outputs) {
        const auto written = io::files_written(output);
        for (const auto& file : written) {
            const io::FileIdentity identity = identify(file);
            for (const Known& other : known) {
                if (!(other.identity == identity)) continue;
                std::string message = output.string() + ": the output would overwrite " +
                                      (other.output ? "another output " : "the input ") + other.named.string();
                if (file != output || other.file != other.named) {
                    message += " (writing it replaces " + file.string() + ", " +
                               (other.file == other.named ? "that path itself" : "a file of that path") + ")";
                }
                throw std::invalid_argument(message + "; choose another path");
            }
        }
        for (const auto& file : written) known.push_back({identify(file), file, output, true});
    }
}

void check_output_differs(const std::filesystem::path& output, const std::vector<std::filesystem::path>& inputs) {
    check_outputs_differ({output}, inputs);
}

void check_output_differs(const OutputArgument& output, const std::vector<std::filesystem::path>& inputs) {
    if (!output.in_memory()) check_outputs_differ({output.path}, inputs);
}

}  // namespace gridwarp::cli
