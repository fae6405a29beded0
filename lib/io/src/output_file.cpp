#include "output_file.hpp"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

OutputFile::OutputFile(const fs::path& file, const fs::path& target) : target_(target) {
    fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd_ < 0) throw FileError(target, std::string("cannot open for writing: ") + std::strerror(errno));
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

}  // namespace gridwarp::io::detail
