#include "files/file_write_queue.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kBlock = 4096;  // a multiple of every logical block size O_DIRECT asks of Linux file systems

[[noreturn]] void fail(const fs::path& target, const char* what, int error) {
    throw FileError(target, std::string(what) + std::strerror(error));
}

// Writes `bytes` from `offset` on; returns how many were written, all of them unless `direct` and
// the file system refuses an O_DIRECT write (the caller writes the rest plainly).
std::size_t write_from(int fd, const fs::path& target, std::span<const std::uint8_t> bytes, std::uint64_t offset, bool direct) {
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::pwrite(fd, bytes.data() + done, std::min<std::size_t>(bytes.size() - done, std::size_t{1} << 30),
                                   static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EINVAL && direct) return done;
        if (n <= 0) throw FileError(target, std::string("write failed: ") + (n < 0 ? std::strerror(errno) : "no space"));
        done += static_cast<std::size_t>(n);
    }
    return done;
}

}  // namespace

void write_file_unbuffered(const fs::path& file, const fs::path& target, std::span<const std::uint8_t> bytes) {
    const bool aligned = reinterpret_cast<std::uintptr_t>(bytes.data()) % kBlock == 0;
    const std::size_t direct_bytes = aligned ? bytes.size() / kBlock * kBlock : 0;
    constexpr int kFlags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    int fd = direct_bytes > 0 ? ::open(file.c_str(), kFlags | O_DIRECT, 0666) : -1;
    const bool direct = fd >= 0;
    if (fd < 0) fd = ::open(file.c_str(), kFlags, 0666);
    if (fd < 0) fail(target, "cannot open for writing: ", errno);
    try {
        const std::size_t done = direct ? write_from(fd, target, bytes.first(direct_bytes), 0, true) : 0;
        if (direct && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT) != 0) fail(target, "cannot write: ", errno);
        write_from(fd, target, bytes.subspan(done), done, false);
    } catch (...) {
        ::close(fd);
        throw;
    }
    if (::close(fd) != 0) fail(target, "write failed: ", errno);
}

void FileWriteQueue::FreeAligned::operator()(std::uint8_t* p) const noexcept { std::free(p); }

FileWriteQueue::FileWriteQueue(std::size_t buffers) : limit_(std::max<std::size_t>(1, buffers)) {
    writer_ = std::thread([this] { run(); });
}

FileWriteQueue::~FileWriteQueue() {
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
        jobs_.clear();  // a producer that failed: its files are not wanted
    }
    changed_.notify_all();
    writer_.join();
}

void FileWriteQueue::rethrow_failure() {
    if (failure_) std::rethrow_exception(failure_);
}

FileWriteQueue::Buffer FileWriteQueue::take(std::size_t capacity) {
    capacity = (std::max<std::size_t>(capacity, 1) + kBlock - 1) / kBlock * kBlock;
    {
        const std::lock_guard lock(mutex_);
        rethrow_failure();
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->capacity >= capacity) {
                Buffer buffer = std::move(*it);
                free_.erase(it);
                return buffer;
            }
        }
    }
    auto* memory = static_cast<std::uint8_t*>(std::aligned_alloc(kBlock, capacity));
    if (!memory) throw std::bad_alloc();
    return Buffer{std::unique_ptr<std::uint8_t[], FreeAligned>(memory), capacity};
}

void FileWriteQueue::write(fs::path file, fs::path target, Buffer buffer, std::size_t size, bool atomically) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return failure_ || jobs_.size() + (busy_ ? 1 : 0) < limit_; });
    rethrow_failure();
    jobs_.push_back(Job{std::move(file), std::move(target), std::move(buffer), size, atomically});
    lock.unlock();
    changed_.notify_all();
}

void FileWriteQueue::finish() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return jobs_.empty() && !busy_; });
    rethrow_failure();
}

void FileWriteQueue::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        changed_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (stopping_) return;
        Job job = std::move(jobs_.front());
        jobs_.pop_front();
        busy_ = true;
        const bool skip = failure_ != nullptr;
        lock.unlock();
        std::exception_ptr failed;
        if (!skip) {
            try {
                const std::span<const std::uint8_t> bytes(job.buffer.data.get(), job.size);
                if (job.atomically) {
                    write_path_atomically(job.file, [&](const StagedFile& staged) { write_file_unbuffered(staged.file, job.target, bytes); });
                } else {
                    write_file_unbuffered(job.file, job.target, bytes);
                }
            } catch (...) {
                failed = std::current_exception();
            }
        }
        lock.lock();
        busy_ = false;
        if (failed && !failure_) failure_ = failed;
        free_.push_back(std::move(job.buffer));
        changed_.notify_all();
    }
}

}  // namespace gridwarp::io::detail
