// Writing output files so that a failed or killed run never leaves a partial file behind.
#pragma once

#include <filesystem>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string_view>

namespace gridwarp::io {

// Writes into a staged file beside `target` (same file system, so the final rename is atomic),
// then renames the result into place. If `write` throws, or the write fails, what was staged is
// removed, `target` is left as it was, and the error propagates (a FileError naming
// `target` for write failures).
void write_file_atomically(const std::filesystem::path& target, const std::function<void(std::ostream&)>& write);

// A file being written: `file`, where the writer makes it (staged beside the target), and `target`,
// the name it will have once published, which error messages name.
struct StagedFile {
    std::filesystem::path file;
    std::filesystem::path target;
};

// Same, for a writer that needs a path of its own (a third-party library writing by name). The
// staged file has target's file name, so format detection by extension works, and companion
// files it writes beside it (a detached header's data file) are moved into place too.
void write_path_atomically(const std::filesystem::path& target, const std::function<void(const StagedFile& staged)>& write);

// Creates the folder `target` whole or not at all: `fill` writes its contents into a staged folder
// beside it, which is then renamed into place unless `target` exists by then (another process made
// it first): the staged folder is then removed and false returned. Shares of one output that start
// at once (gridwarp --tiles) agree on one folder this way.
bool create_folder_atomically(const std::filesystem::path& target, const std::function<void(const std::filesystem::path& folder)>& fill);

// A staged file is named .gridwarp-HOST-PID-XXXXXX-NAME; a format that may write companion files
// is staged in a folder .gridwarp-HOST-PID-XXXXXX. The first write into a folder removes what
// processes of this host that no longer run (killed writers) staged there. A header and its data file are
// published together: no reader finds one run's header beside another run's data, and a publish
// that fails leaves the earlier pair whole (docs/reliability.md gives the order).
//
// An existing target that is not a regular file (a device, FIFO or symbolic link) is refused with
// a FileError unless replace_special_outputs(true) was called (--replace-special-output): then it
// is replaced by the regular file written.
void replace_special_outputs(bool replace);

// Reads a whole file into memory; throws FileError when it cannot.
std::string read_file_bytes(const std::filesystem::path& file);
// The same bytes in a buffer that is not cleared before the read (a large file's pages are touched
// once), writable in place.
struct FileBuffer {
    std::unique_ptr<std::uint8_t[]> data;
    std::size_t size = 0;
};
FileBuffer read_file_buffer(const std::filesystem::path& file);

}  // namespace gridwarp::io
