// Internal: the checks on a named input file and the files it brings along.
#pragma once

#include <filesystem>
#include <string>

#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

// Throws FileError unless `file` exists and is a regular file.
void require_readable_file(const std::filesystem::path& file);

// The one containment rule for the files that a named file brings along (a detached header's data
// files, the other half of a NIfTI pair), whatever the format: each must lie in the named file's
// folder (or below it) once symbolic links are resolved, unless options.allow_outside_data_files,
// and must exist and be a regular file. Throws FileError naming `named`; `role` is what the
// companion is to it ("data file", "header").
void require_companion_inside(const std::filesystem::path& named, const std::filesystem::path& companion,
                              const std::string& role, const ReadOptions& options);

}  // namespace gridwarp::io::detail
