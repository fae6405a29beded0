#include "gridwarp/io/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <vector>

#include "formats.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

namespace {

std::atomic<bool> special_outputs_replaced{false};

constexpr std::string_view kStagingPrefix = ".gridwarp-";

// This machine's name as it may appear in a file name.
std::string host_name() {
    char buffer[256] = {};
    if (::gethostname(buffer, sizeof buffer - 1) != 0) return "host";
    std::string name;
    for (const char* c = buffer; *c && name.size() < 40; ++c) {
        const bool plain = std::isalnum(static_cast<unsigned char>(*c)) || *c == '.' || *c == '_';
        name += plain ? *c : '_';
    }
    return name.empty() ? "host" : name;
}

// ".gridwarp-HOST-PID-XXXXXX": whose staging folder it is, so a later run can tell a dead
// writer's leftovers from a live writer's work.
std::string staging_stem() { return std::string(kStagingPrefix) + host_name() + "-" + std::to_string(::getpid()) + "-"; }

// Removes staging folders in `directory` left by processes of this machine that no longer run
// (killed writers). Once per folder and process: a batch writing thousands of files into one
// folder scans it once.
void remove_dead_writers_staging(const fs::path& directory) {
    static std::mutex scanned_mutex;
    static std::set<fs::path> scanned;
    {
        const std::lock_guard<std::mutex> lock(scanned_mutex);
        if (!scanned.insert(directory).second) return;
    }
    const std::string host_prefix = std::string(kStagingPrefix) + host_name() + "-";
    std::error_code error;
    for (fs::directory_iterator entry(directory, error), end; !error && entry != end; entry.increment(error)) {
        const std::string name = entry->path().filename().string();
        if (name.rfind(host_prefix, 0) != 0) continue;
        const std::string rest = name.substr(host_prefix.size());
        const auto dash = rest.find('-');
        if (dash == std::string::npos || dash == 0 || rest.size() - dash != 7) continue;
        char* parsed_end = nullptr;
        const long pid = std::strtol(rest.c_str(), &parsed_end, 10);
        if (parsed_end != rest.c_str() + dash || pid <= 0) continue;
        if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
        std::error_code ignored;
        fs::remove_all(entry->path(), ignored);
    }
}

const char* special_kind(const fs::file_status& status) {
    switch (status.type()) {
        case fs::file_type::symlink: return "a symbolic link";
        case fs::file_type::directory: return "a directory";
        case fs::file_type::block: return "a block device";
        case fs::file_type::character: return "a character device";
        case fs::file_type::fifo: return "a FIFO";
        case fs::file_type::socket: return "a socket";
        default: return "not a regular file";
    }
}

// An existing output must be a regular file: replacing a device, FIFO or symbolic link by a
// regular file is refused unless asked for (as root, -o /dev/null would replace /dev/null).
void require_replaceable(const fs::path& target) {
    std::error_code error;
    const auto status = fs::symlink_status(target, error);
    if (error || !fs::exists(status) || fs::is_regular_file(status)) return;
    if (fs::is_directory(status)) throw FileError(target, "is a directory, expected a file name to write");
    if (!special_outputs_replaced) {
        throw FileError(target, std::string("is ") + special_kind(status) +
                                    ", not a regular file; refusing to replace it (--replace-special-output replaces it)");
    }
}

// A writer that does not check its own writes (ITK's, OpenCV's) may end quietly on a full file
// system with a short file: a file system with no free block left after the write is taken as one
// that ran out during it.
void require_space_left(const fs::path& staging, const fs::path& target) {
    struct statvfs stats {};
    if (::statvfs(staging.c_str(), &stats) != 0) return;
    if (stats.f_bfree == 0 || stats.f_bavail == 0) {
        throw FileError(target, "write failed: no space left on the file system (it was full after writing)");
    }
}

// Serialises the publishing of multi-file outputs among gridwarp processes writing into one folder
// (an advisory lock on the folder itself; where the file system has no such locks, none is taken).
class FolderLock {
public:
    explicit FolderLock(const fs::path& directory) : fd_(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
        if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }
    ~FolderLock() {
        if (fd_ >= 0) ::close(fd_);  // releases the lock
    }
    FolderLock(const FolderLock&) = delete;
    FolderLock& operator=(const FolderLock&) = delete;

private:
    int fd_;
};

}  // namespace

void replace_special_outputs(bool replace) { special_outputs_replaced = replace; }

namespace detail {

// A fresh directory beside target: the writer creates its file(s) there under their final names,
// so formats that write a header and a data file referring to each other (.nhdr, .mhd) stay valid.
fs::path make_staging_directory(const fs::path& target) {
    require_replaceable(target);
    const fs::path directory = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    remove_dead_writers_staging(directory);
    std::string pattern = (directory / (staging_stem() + "XXXXXX")).string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!::mkdtemp(buffer.data())) {
        throw FileError(target, std::string("cannot create a file in its directory: ") + std::strerror(errno));
    }
    return fs::path(buffer.data());
}

void publish_staged(const fs::path& staging, const fs::path& target) {
    if (!fs::exists(staging / target.filename())) throw FileError(target, "the writer produced no file");
    require_space_left(staging, target);
    const fs::path directory = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    std::vector<fs::path> companions;
    for (const auto& entry : fs::directory_iterator(staging)) {
        if (entry.path().filename() != target.filename()) companions.push_back(entry.path());
    }
    require_replaceable(target);  // again: something may have appeared there while writing
    auto move = [&](const fs::path& file) {
        std::error_code error;
        fs::rename(file, directory / file.filename(), error);
        if (error) throw FileError(target, "cannot move the finished file into place: " + error.message());
    };
    if (companions.empty()) {
        move(staging / target.filename());  // one rename: atomic
        return;
    }
    // A header and its data file: no reader may find a header beside another run's data. Under
    // the folder's lock (so concurrent writers publish one after the other), the old header goes
    // first, then the data arrive, then the new header: at every moment the folder holds the old
    // pair, no header, or the new pair.
    const FolderLock lock(directory);
    std::error_code error;
    fs::remove(target, error);
    for (const auto& companion : companions) move(companion);
    move(staging / target.filename());
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
        stream.close();
        if (!stream) throw FileError(target, "write failed when closing the file (disk full?)");
    });
}

std::string read_file_bytes(const fs::path& file) {
    std::error_code error;
    const auto status = fs::status(file, error);
    if (!fs::exists(status)) throw FileError(file, "no such file");
    if (fs::is_directory(status)) throw FileError(file, "is a directory, expected a file");
    if (!fs::is_regular_file(status)) throw FileError(file, "is not a regular file (a device, FIFO or socket)");
    std::ifstream stream(file, std::ios::binary);
    if (!stream) throw FileError(file, std::string("cannot open for reading: ") + std::strerror(errno));
    std::string bytes((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
    if (stream.bad()) throw FileError(file, "read failed");
    return bytes;
}

}  // namespace gridwarp::io
