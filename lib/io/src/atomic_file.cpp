#include "gridwarp/io/atomic_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "formats.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

namespace detail {

// A fresh directory beside target: the writer creates its file(s) there under their final names,
// so formats that write a header and a data file referring to each other (.nhdr, .mhd) stay valid.
fs::path make_staging_directory(const fs::path& target) {
    const fs::path directory = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    std::string pattern = (directory / ".gridwarp-XXXXXX").string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!::mkdtemp(buffer.data())) {
        throw FileError(target, std::string("cannot create a file in its directory: ") + std::strerror(errno));
    }
    return fs::path(buffer.data());
}

void publish_staged(const fs::path& staging, const fs::path& target) {
    if (!fs::exists(staging / target.filename())) throw FileError(target, "the writer produced no file");
    // Companion files first, the named file last: it appears only once everything is in place.
    const fs::path directory = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    std::vector<fs::path> written;
    for (const auto& entry : fs::directory_iterator(staging)) {
        if (entry.path().filename() != target.filename()) written.push_back(entry.path());
    }
    written.push_back(staging / target.filename());
    for (const auto& file : written) {
        std::error_code error;
        fs::rename(file, directory / file.filename(), error);
        if (error) throw FileError(target, "cannot move the finished file into place: " + error.message());
    }
}

}  // namespace detail

void write_path_atomically(const fs::path& target, const std::function<void(const fs::path&)>& write) {
    const fs::path staging = detail::make_staging_directory(target);
    std::error_code ignored;
    try {
        write(staging / target.filename());
        detail::publish_staged(staging, target);
    } catch (...) {
        fs::remove_all(staging, ignored);
        throw;
    }
    fs::remove_all(staging, ignored);
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
