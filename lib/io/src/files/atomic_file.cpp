#include "gridwarp/io/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <exception>
#include <streambuf>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include "files/output_file.hpp"
#include "gridwarp/io/error.hpp"
#include "names.hpp"

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

// ".gridwarp-HOST-PID-XXXXXX[-NAME]": whose staged output it is, so a later run can tell a dead
// writer's leftovers from a live writer's work.
std::string staging_stem() { return std::string(kStagingPrefix) + host_name() + "-" + std::to_string(::getpid()) + "-"; }

// Removes what processes of this machine that no longer run staged in `directory`
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
        // PID-XXXXXX (a folder) or PID-XXXXXX-NAME (a lone staged file).
        const auto dash = rest.find('-');
        if (dash == std::string::npos || dash == 0 || rest.size() - dash < 7) continue;
        if (rest.size() - dash > 7 && rest[dash + 7] != '-') continue;
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
    if (fs::is_directory(status)) {
        // A Zarr store is a folder, replaced whole by the store written (publish_store).
        const bool store = detail::ends_with(target.filename().string(), ".zarr") &&
                           (fs::exists(target / ".zgroup", error) || fs::exists(target / ".zarray", error));
        if (store) return;
        throw FileError(target, "is a directory, expected a file name to write");
    }
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

// The file of a detached pair that describes the others: published last, so that no reader finds
// it beside another run's data.
bool is_header_name(const fs::path& name) {
    const std::string lower = detail::lowercase_filename(name);
    for (const char* ending : {".hdr", ".hdr.gz", ".nhdr", ".mhd", ".mih"}) {
        if (detail::ends_with(lower, ending)) return true;
    }
    return false;
}

void move_into_place(const fs::path& from, const fs::path& to, const fs::path& target) {
    std::error_code error;
    fs::rename(from, to, error);
    if (error) throw FileError(target, "cannot move the finished file " + to.filename().string() + " into place: " + error.message());
}

// A store written as a folder (Zarr) replaces only an earlier store: the earlier one is moved
// aside, the new one renamed into place, and the earlier one removed (put back if the rename fails).
void publish_store(const fs::path& staged, const fs::path& target) {
    std::error_code error;
    const auto status = fs::symlink_status(target, error);
    if (!error && fs::exists(status)) {
        const bool store = fs::is_directory(status) && (fs::exists(target / ".zgroup", error) || fs::exists(target / ".zarray", error));
        if (!store) throw FileError(target, "exists and is not a Zarr store; refusing to replace it");
        const fs::path aside = staged.string() + ".earlier";
        fs::rename(target, aside, error);
        if (error) throw FileError(target, "cannot move the earlier store aside: " + error.message());
        fs::rename(staged, target, error);
        if (error) {
            std::error_code ignored;
            fs::rename(aside, target, ignored);
            throw FileError(target, "cannot move the finished store into place: " + error.message());
        }
        fs::remove_all(aside, error);
        return;
    }
    move_into_place(staged, target, target);
}

// Publishes a header and its data files (`staged`, the header last) from `staging` into
// `directory`, under the folder's lock so that concurrent writers take turns. The earlier files are
// first set aside into the staging folder, header first (from then on a reader finds no header),
// then the new data files are moved in and the new header last. A reader finds the earlier pair, no
// header, or the new pair. When a step fails, what was moved in is taken out again and the earlier
// files are put back, data first and header last: the earlier pair is whole again.
void publish_pair(const fs::path& staging, const fs::path& directory, const std::vector<fs::path>& staged, const fs::path& target) {
    const FolderLock lock(directory);
    const std::string aside_prefix = ".earlier-";  // the staged names carry no such prefix
    std::vector<fs::path> set_aside;               // in the order they were set aside
    std::vector<fs::path> moved_in;
    auto restore = [&] {
        std::error_code ignored;
        for (auto it = moved_in.rbegin(); it != moved_in.rend(); ++it) fs::remove(directory / *it, ignored);  // header first
        for (auto it = set_aside.rbegin(); it != set_aside.rend(); ++it) {
            fs::rename(staging / (aside_prefix + it->string()), directory / *it, ignored);
        }
    };
    try {
        for (auto it = staged.rbegin(); it != staged.rend(); ++it) {  // the header first
            std::error_code error;
            if (!fs::exists(fs::symlink_status(directory / *it, error))) continue;
            fs::rename(directory / *it, staging / (aside_prefix + it->string()), error);
            if (error) throw FileError(target, "cannot replace the earlier " + it->string() + ": " + error.message());
            set_aside.push_back(*it);
        }
        for (const auto& name : staged) {
            move_into_place(staging / name, directory / name, target);
            moved_in.push_back(name);
        }
    } catch (...) {
        restore();
        throw;
    }
}

// A stream buffer over an OutputFile, so that a stream's writer fails with the cause of the
// failing write (a full disk, a quota, an I/O error) rather than a stream's bad bit.
class OutputFileBuffer : public std::streambuf {
public:
    explicit OutputFileBuffer(detail::OutputFile& file) : file_(file), buffer_(std::size_t{1} << 16) { reset(); }
    // Writes what is buffered; rethrows the first failure.
    void finish() {
        drain();
        if (failure_) std::rethrow_exception(failure_);
    }

protected:
    int_type overflow(int_type c) override {
        if (!drain()) return traits_type::eof();
        if (!traits_type::eq_int_type(c, traits_type::eof())) {
            *pptr() = traits_type::to_char_type(c);
            pbump(1);
        }
        return traits_type::not_eof(c);
    }
    std::streamsize xsputn(const char* data, std::streamsize count) override {
        if (count < static_cast<std::streamsize>(buffer_.size())) return std::streambuf::xsputn(data, count);
        // Large pieces go to the file as they are, without a copy into the buffer.
        if (!drain() || !pass([&] { file_.write({reinterpret_cast<const std::uint8_t*>(data), static_cast<std::size_t>(count)}); })) return 0;
        return count;
    }
    int sync() override { return drain() ? 0 : -1; }

private:
    void reset() { setp(buffer_.data(), buffer_.data() + buffer_.size()); }
    bool drain() {
        const auto* start = reinterpret_cast<const std::uint8_t*>(pbase());
        const auto size = static_cast<std::size_t>(pptr() - pbase());
        reset();
        return pass([&] { file_.write({start, size}); });
    }
    // Runs a write, keeping its exception for finish() (a stream buffer reports failure by value).
    template <typename Write>
    bool pass(Write&& write) {
        if (failure_) return false;
        try {
            write();
        } catch (...) {
            failure_ = std::current_exception();
        }
        return !failure_;
    }

    detail::OutputFile& file_;
    std::vector<char> buffer_;
    std::exception_ptr failure_;
};

}  // namespace

void replace_special_outputs(bool replace) { special_outputs_replaced = replace; }

namespace detail {

namespace {

// Six characters unique within this process (and a process's names are unique on its host by the
// PID before them): a staged file is created by its writer, under a name no other writer takes.
std::string unique_suffix() {
    static std::atomic<std::uint64_t> counter{0};
    static const std::uint64_t start = std::random_device{}();
    constexpr std::string_view digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    std::uint64_t value = start + counter.fetch_add(1);
    std::string suffix;
    for (int i = 0; i < 6; ++i, value /= digits.size()) suffix += digits[value % digits.size()];
    return suffix;
}

// Formats whose writer may make a second file beside the named one (a detached header's data
// file, the other half of a NIfTI pair): these are staged in a folder of their own.
bool may_write_companions(const fs::path& target) {
    const std::string name = detail::lowercase_filename(target);
    for (const char* ending : {".hdr", ".hdr.gz", ".img", ".img.gz", ".nhdr", ".mhd", ".mih"}) {
        if (detail::ends_with(name, ending)) return true;
    }
    return false;
}

}  // namespace

// A single-file output is staged as one file beside target, named after it so that a writer that
// picks the format by the extension still finds it; a folder would cost a mkdir and a rmdir per
// output. Outputs that may bring companions get a fresh folder: the writer creates its files
// there under their final names, so a header and its data file keep referring to each other.
Staging make_staging(const fs::path& target) {
    require_replaceable(target);
    const fs::path directory = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    remove_dead_writers_staging(directory);
    if (!may_write_companions(target)) {
        struct stat status {};
        const bool found = ::stat(directory.c_str(), &status) == 0;
        if (!found || !S_ISDIR(status.st_mode)) {
            const int cause = found ? ENOTDIR : errno;
            throw FileError(target, std::string("cannot create a file in its directory: ") + std::strerror(cause));
        }
        // The name's end, so that the extension survives, within the file system's name limit.
        const std::string prefix = staging_stem() + unique_suffix() + "-";
        const long name_max = ::pathconf(directory.c_str(), _PC_NAME_MAX);
        const std::size_t room = (name_max > 0 ? static_cast<std::size_t>(name_max) : 255) - std::min<std::size_t>(prefix.size(), 255);
        const std::string name = target.filename().string();
        return {directory / (prefix + name.substr(name.size() > room ? name.size() - room : 0)), {}};
    }
    std::string pattern = (directory / (staging_stem() + "XXXXXX")).string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!::mkdtemp(buffer.data())) {
        throw FileError(target, std::string("cannot create a file in its directory: ") + std::strerror(errno));
    }
    const fs::path folder(buffer.data());
    return {folder / target.filename(), folder};
}

void publish_staged(const Staging& staging, const fs::path& target) {
    std::error_code error;
    if (!fs::exists(staging.file, error)) throw FileError(target, "the writer produced no file");
    require_space_left(staging.file.parent_path(), target);
    if (staging.folder.empty()) {
        if (fs::is_directory(staging.file, error)) {
            publish_store(staging.file, target);
            return;
        }
        require_replaceable(target);  // again: something may have appeared there while writing
        move_into_place(staging.file, target, target);  // one rename: atomic
        return;
    }
    const fs::path directory = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    std::vector<fs::path> staged;  // file names, the header last
    for (const auto& entry : fs::directory_iterator(staging.folder)) staged.push_back(entry.path().filename());
    std::stable_partition(staged.begin(), staged.end(), [](const fs::path& name) { return !is_header_name(name); });
    if (staged.size() > 1 && !is_header_name(staged.back())) {
        // No header among them: the named file goes last.
        std::stable_partition(staged.begin(), staged.end(), [&](const fs::path& name) { return name != target.filename(); });
    }
    // Everything that can be refused is refused before anything existing is touched (again for
    // the target: something may have appeared there while writing).
    for (const auto& name : staged) require_replaceable(directory / name);
    if (staged.size() == 1) {
        move_into_place(staging.folder / staged.front(), directory / staged.front(), target);  // one rename: atomic
        return;
    }
    publish_pair(staging.folder, directory, staged, target);
}

void discard_staged(const Staging& staging) noexcept {
    std::error_code ignored;
    if (staging.folder.empty()) {
        fs::remove_all(staging.file, ignored);  // a store written as a folder, too
    } else {
        fs::remove_all(staging.folder, ignored);
    }
}

}  // namespace detail

void write_path_atomically(const fs::path& target, const std::function<void(const StagedFile&)>& write) {
    const detail::Staging staging = detail::make_staging(target);
    try {
        write(StagedFile{staging.file, target});
        detail::publish_staged(staging, target);
    } catch (...) {
        detail::discard_staged(staging);
        throw;
    }
    detail::discard_staged(staging);
}

bool create_folder_atomically(const fs::path& target, const std::function<void(const fs::path& folder)>& fill) {
    const fs::path directory = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    remove_dead_writers_staging(directory);
    std::string pattern = (directory / (staging_stem() + "XXXXXX")).string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!::mkdtemp(buffer.data())) throw FileError(target, std::string("cannot create a folder in its directory: ") + std::strerror(errno));
    const fs::path folder(buffer.data());
    std::error_code ignored;
    try {
        fill(folder);
        require_space_left(directory, target);
    } catch (...) {
        fs::remove_all(folder, ignored);
        throw;
    }
    int result = ::renameat2(AT_FDCWD, folder.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE);
    if (result != 0 && (errno == EINVAL || errno == ENOSYS)) {
        // A file system without RENAME_NOREPLACE: rename(2) itself refuses a folder that is not empty.
        std::error_code error;
        result = fs::exists(fs::symlink_status(target, error)) ? (errno = EEXIST, -1) : ::rename(folder.c_str(), target.c_str());
    }
    if (result != 0) {
        const int cause = errno;
        fs::remove_all(folder, ignored);
        if (cause == EEXIST || cause == ENOTEMPTY) return false;
        throw FileError(target, std::string("cannot move the new folder into place: ") + std::strerror(cause));
    }
    return true;
}

void write_file_atomically(const fs::path& target, const std::function<void(std::ostream&)>& write) {
    write_path_atomically(target, [&](const StagedFile& staged) {
        detail::OutputFile file(staged);
        OutputFileBuffer buffer(file);
        std::ostream stream(&buffer);
        write(stream);
        buffer.finish();
        if (!stream) throw FileError(target, "write failed");
        file.close();
    });
}

namespace {

// A regular file opened for reading; FileError for anything else.
int open_regular_file(const fs::path& file) {
    std::error_code error;
    const auto status = fs::status(file, error);
    if (!fs::exists(status)) throw FileError(file, "no such file");
    if (fs::is_directory(status)) throw FileError(file, "is a directory, expected a file");
    if (!fs::is_regular_file(status)) throw FileError(file, "is not a regular file (a device, FIFO or socket)");
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw FileError(file, std::string("cannot open for reading: ") + std::strerror(errno));
    return fd;
}

// Reads `fd` to its end into buffer.data() from `done` on, growing it through resize(size) where
// it fills (a file whose size says nothing, as in /proc); returns the bytes read in all.
template <class Buffer>
std::size_t read_to_end(int fd, const fs::path& file, Buffer& buffer) {
    std::size_t done = 0;
    for (;;) {
        if (done == buffer.size()) buffer.resize(buffer.size() * 2);
        const ssize_t got = ::read(fd, buffer.data() + done, buffer.size() - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            ::close(fd);
            throw FileError(file, "read failed");
        }
        if (got == 0) break;
        done += static_cast<std::size_t>(got);
    }
    ::close(fd);
    return done;
}

// Sized once from the open file (one byte more, so that the end is seen without growing).
std::size_t opened_size(int fd) {
    struct stat opened {};
    return ::fstat(fd, &opened) == 0 ? static_cast<std::size_t>(opened.st_size) + 1 : 4096;
}

// Storage that is not cleared first: the read writes every byte that is kept.
struct UninitializedBytes {
    std::unique_ptr<std::uint8_t[]> bytes;
    std::size_t length = 0;
    std::uint8_t* data() { return bytes.get(); }
    std::size_t size() const { return length; }
    void resize(std::size_t size) {
        std::unique_ptr<std::uint8_t[]> grown(new std::uint8_t[size]);
        if (length > 0) std::memcpy(grown.get(), bytes.get(), std::min(size, length));
        bytes = std::move(grown);
        length = size;
    }
};

}  // namespace

std::string read_file_bytes(const fs::path& file) {
    const int fd = open_regular_file(file);
    std::string bytes(opened_size(fd), '\0');
    bytes.resize(read_to_end(fd, file, bytes));
    return bytes;
}

FileBuffer read_file_buffer(const fs::path& file) {
    const int fd = open_regular_file(file);
    UninitializedBytes buffer;
    buffer.resize(opened_size(fd));
    const std::size_t size = read_to_end(fd, file, buffer);
    return FileBuffer{std::move(buffer.bytes), size};
}

}  // namespace gridwarp::io
