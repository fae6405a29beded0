// Internal: an output file written through its file descriptor, every short write an error.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace gridwarp::io::detail {

// Creates (or truncates) `file`; errors name `target`, the path the user gave (the file itself is
// a staging copy of it). A full disk is a FileError, never a short file.
class OutputFile {
public:
    OutputFile(const std::filesystem::path& file, const std::filesystem::path& target);
    ~OutputFile();
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    void write(std::span<const std::uint8_t> bytes);
    // The pieces one after another, in as few system calls as the kernel allows (rows of an
    // image written from memory in another order than the file's, without a copy).
    void write_gathered(std::vector<iovec> pieces);
    // Closes the file, reporting what the close reports (a delayed write error).
    void close();

private:
    std::filesystem::path target_;
    int fd_ = -1;
};

}  // namespace gridwarp::io::detail
