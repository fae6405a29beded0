#include "gridwarp/io/atomic_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "gridwarp/io/error.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

namespace {

// Everything from the first dot of the file name on (".nii.gz"), ignoring a leading dot.
std::string full_extension(const fs::path& target) {
    const std::string name = target.filename().string();
    const auto dot = name.find('.', 1);
    return dot == std::string::npos ? std::string() : name.substr(dot);
}

// Creates an empty temporary file beside target with the permissions a plain create would give.
fs::path make_temporary(const fs::path& target) {
    const fs::path directory = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    const std::string extension = full_extension(target);
    std::string stem = target.filename().string();
    stem = stem.substr(0, stem.size() - extension.size());
    std::string pattern = (directory / ("." + stem + ".gridwarp-XXXXXX" + extension)).string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    const int fd = ::mkstemps(buffer.data(), static_cast<int>(extension.size()));
    if (fd < 0) throw FileError(target, std::string("cannot create a file in its directory: ") + std::strerror(errno));
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask);
    ::close(fd);
    return fs::path(buffer.data());
}

void commit(const fs::path& temporary, const fs::path& target) {
    std::error_code error;
    fs::rename(temporary, target, error);
    if (error) {
        fs::remove(temporary, error);
        throw FileError(target, "cannot move the finished file into place: " + error.message());
    }
}

}  // namespace

void write_path_atomically(const fs::path& target, const std::function<void(const fs::path&)>& write) {
    const fs::path temporary = make_temporary(target);
    try {
        write(temporary);
    } catch (...) {
        std::error_code ignored;
        fs::remove(temporary, ignored);
        throw;
    }
    commit(temporary, target);
}

void write_file_atomically(const fs::path& target, const std::function<void(std::ostream&)>& write) {
    write_path_atomically(target, [&](const fs::path& temporary) {
        std::ofstream stream(temporary, std::ios::binary | std::ios::trunc);
        if (!stream) throw FileError(target, "cannot open for writing");
        write(stream);
        stream.flush();
        if (!stream) throw FileError(target, "write failed (disk full?)");
    });
}

std::string read_file_bytes(const fs::path& file) {
    std::error_code error;
    if (!fs::exists(file, error)) throw FileError(file, "no such file");
    if (fs::is_directory(file, error)) throw FileError(file, "is a directory, expected a file");
    std::ifstream stream(file, std::ios::binary);
    if (!stream) throw FileError(file, std::string("cannot open for reading: ") + std::strerror(errno));
    std::string bytes((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
    if (stream.bad()) throw FileError(file, "read failed");
    return bytes;
}

}  // namespace gridwarp::io
