// Writing output files so that a failed or killed run never leaves a partial file behind.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string_view>

namespace gridwarp::io {

// Writes to a temporary file beside `target` (same directory, so the final rename is atomic),
// then renames it into place. If `write` throws, or the write fails, the temporary file is removed,
// `target` is left as it was, and a FileError naming `target` is thrown.
void write_file_atomically(const std::filesystem::path& target, const std::function<void(std::ostream&)>& write);

// Same, for a writer that needs a file name of its own (a third-party library writing by path).
// The temporary path keeps target's extension(s), so format detection by extension still works.
void write_path_atomically(const std::filesystem::path& target,
                           const std::function<void(const std::filesystem::path& temporary)>& write);

// Reads a whole file into memory; throws FileError when it cannot.
std::string read_file_bytes(const std::filesystem::path& file);

}  // namespace gridwarp::io
