#include "files/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

MappedFile::MappedFile(const fs::path& file) : file_(file) {
    fd_ = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw FileError(file, std::string("cannot open for reading: ") + std::strerror(errno));
    struct stat info {};
    if (::fstat(fd_, &info) != 0) {
        const int error = errno;
        ::close(fd_);
        throw FileError(file, std::string("cannot read its size: ") + std::strerror(error));
    }
    if (!S_ISREG(info.st_mode)) {
        ::close(fd_);
        throw FileError(file, "not a regular file");
    }
    size_ = static_cast<std::size_t>(info.st_size);
}

MappedFile::~MappedFile() {
    if (data_ && data_ != MAP_FAILED) ::munmap(data_, size_);
    if (fd_ >= 0) ::close(fd_);
}

std::uint8_t* MappedFile::map(bool populate) {
    if (!data_) {
        if (size_ == 0) throw FileError(file_, "the file is empty");
        void* data = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd_, 0);
        if (data == MAP_FAILED) throw FileError(file_, std::string("cannot map into memory: ") + std::strerror(errno));
        data_ = data;
    }
    return static_cast<std::uint8_t*>(data_);
}

std::vector<std::uint8_t> MappedFile::read_prefix(std::size_t count) const {
    std::vector<std::uint8_t> bytes(std::min(count, size_));
    std::size_t got = 0;
    while (got < bytes.size()) {
        const ssize_t n = ::pread(fd_, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw FileError(file_, std::string("read failed: ") + (n < 0 ? std::strerror(errno) : "unexpected end"));
        got += static_cast<std::size_t>(n);
    }
    return bytes;
}

std::optional<MappedOutputFile> create_mapped_output(const StagedFile& staged, std::size_t size) {
    const int fd = ::open(staged.file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) throw FileError(staged.target, std::string("cannot open for writing: ") + std::strerror(errno));
    // The blocks are reserved now, so that a full disk is an error here rather than a SIGBUS
    // while sampling into the mapping.
    if (const int error = ::posix_fallocate(fd, 0, static_cast<off_t>(size)); error != 0) {
        ::close(fd);
        ::unlink(staged.file.c_str());
        if (error == EOPNOTSUPP || error == EINVAL) return std::nullopt;
        throw FileError(staged.target, std::string("cannot reserve ") + std::to_string(size) + " bytes: " + std::strerror(error));
    }
    void* mapping = size == 0 ? MAP_FAILED : ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapping == MAP_FAILED) {
        ::close(fd);
        ::unlink(staged.file.c_str());
        return std::nullopt;
    }
    auto* bytes = static_cast<std::uint8_t*>(mapping);
    MappedOutputFile output;
    output.bytes = std::shared_ptr<std::uint8_t>(bytes, [size](std::uint8_t* address) { ::munmap(address, size); });
    output.closers.finish = [fd, target = staged.target]() {
        if (::close(fd) != 0) throw FileError(target, std::string("write failed: ") + std::strerror(errno));
    };
    output.closers.abandon = [fd]() { ::close(fd); };
    return output;
}

StagedOutput::StagedOutput(Staging staging, FileClosers closers) : staging_(std::move(staging)), closers_(std::move(closers)) {}

StagedOutput::~StagedOutput() {
    if (published_) return;
    if (closers_.abandon) closers_.abandon();
    discard_staged(staging_);
}

void StagedOutput::publish(const fs::path& target) {
    auto finish = std::move(closers_.finish);
    closers_.abandon = nullptr;  // finish() closes the file whether or not it throws
    finish();
    publish_staged(staging_, target);
    published_ = true;
    discard_staged(staging_);
}

std::unique_ptr<StagedOutput> stage_mapped_output(const fs::path& target,
                                                  const std::function<std::optional<FileClosers>(const StagedFile& staged)>& map) {
    const Staging staging = make_staging(target);
    std::optional<FileClosers> closers;
    try {
        closers = map(StagedFile{staging.file, target});
    } catch (...) {
        discard_staged(staging);
        throw;
    }
    if (!closers) {
        discard_staged(staging);
        return nullptr;
    }
    return std::make_unique<StagedOutput>(staging, std::move(*closers));
}

void swap_elements(std::uint8_t* bytes, std::size_t count, std::size_t size) {
    for (std::size_t i = 0; i < count; ++i) std::reverse(bytes + i * size, bytes + (i + 1) * size);
}

}  // namespace gridwarp::io::detail
