// Errors from reading and writing files: the message always starts with the file's path.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace gridwarp::io {

class FileError : public std::runtime_error {
public:
    FileError(const std::filesystem::path& file, const std::string& problem)
        : std::runtime_error(file.string() + ": " + problem), file_(file) {}
    const std::filesystem::path& file() const { return file_; }

private:
    std::filesystem::path file_;
};

}  // namespace gridwarp::io
