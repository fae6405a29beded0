#include "files/output_file.hpp"

#include <fcntl.h>
#include <limits.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>

#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

OutputFile::OutputFile(const StagedFile& staged) : target_(staged.target) {
    fd_ = ::open(staged.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd_ < 0) throw FileError(staged.target, std::string("cannot open for writing: ") + std::strerror(errno));
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(std::span<const std::uint8_t> bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd_, bytes.data(), std::min<std::size_t>(bytes.size(), std::size_t{1} << 30));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw FileError(target_, std::string("write failed: ") + (n < 0 ? std::strerror(errno) : "no space"));
        bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
}

bool OutputFile::reserve(std::uint64_t size) {
    const int error = ::posix_fallocate(fd_, 0, static_cast<off_t>(size));
    if (error == EOPNOTSUPP || error == EINVAL) return false;
    if (error != 0) throw FileError(target_, std::string("cannot reserve ") + std::to_string(size) + " bytes: " + std::strerror(error));
    return true;
}

void OutputFile::write_at(std::uint64_t offset, std::span<const std::uint8_t> bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::pwrite(fd_, bytes.data(), std::min<std::size_t>(bytes.size(), std::size_t{1} << 30), static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw FileError(target_, std::string("write failed: ") + (n < 0 ? std::strerror(errno) : "no space"));
        bytes = bytes.subspan(static_cast<std::size_t>(n));
        offset += static_cast<std::uint64_t>(n);
    }
}

void OutputFile::write_gathered(std::vector<iovec> pieces) {
    std::size_t next = 0;  // the first piece not yet written whole
    for (;;) {
        while (next < pieces.size() && pieces[next].iov_len == 0) ++next;
        if (next == pieces.size()) return;
        const int count = static_cast<int>(std::min<std::size_t>(pieces.size() - next, IOV_MAX));
        const ssize_t n = ::writev(fd_, pieces.data() + next, count);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw FileError(target_, std::string("write failed: ") + (n < 0 ? std::strerror(errno) : "no space"));
        // Skip what was written; a piece written in part continues where it stopped.
        auto left = static_cast<std::size_t>(n);
        while (next < pieces.size() && left > 0 && left >= pieces[next].iov_len) left -= pieces[next++].iov_len;
        if (left > 0) {
            pieces[next].iov_base = static_cast<char*>(pieces[next].iov_base) + left;
            pieces[next].iov_len -= left;
        }
    }
}

void OutputFile::close() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw FileError(target_, std::string("write failed: ") + std::strerror(errno));
}

std::span<const std::uint8_t> BlockSource::checked_bytes(std::uint64_t b, std::vector<std::uint8_t>& scratch) const {
    const auto block = bytes(b, scratch);
    if (block.size() != sizes[b]) {
        throw std::logic_error("a block source gave " + std::to_string(block.size()) + " bytes for a block of " +
                               std::to_string(sizes[b]));
    }
    return block;
}

void write_blocks(OutputFile& out, std::uint64_t offset, const BlockSource& source, int threads) {
    std::vector<std::uint64_t> starts(source.sizes.size());
    for (std::size_t b = 0; b < starts.size(); ++b) {
        starts[b] = offset;
        offset += source.sizes[b];
    }
    const int workers = std::max(1, threads > 0 ? threads : omp_get_max_threads());
    std::atomic<std::uint64_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr failure;
    std::mutex mutex;
#pragma omp parallel num_threads(workers)
    {
        std::vector<std::uint8_t> scratch;
        for (std::uint64_t b = next++; b < starts.size() && !failed; b = next++) {
            try {
                out.write_at(starts[b], source.checked_bytes(b, scratch));
            } catch (...) {
                std::lock_guard lock(mutex);
                if (!failure) failure = std::current_exception();
                failed = true;
            }
        }
    }
    if (failure) std::rethrow_exception(failure);
}

}  // namespace gridwarp::io::detail
