// Internal: whole files written from memory on a thread of their own, past the page cache.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace gridwarp::io::detail {

// Writes `bytes` as the whole of `file` (created or truncated; errors name `target`). Where the file
// system allows, the bytes go to the disk without a copy into the page cache (O_DIRECT: a part of
// `bytes` that is whole 4 KiB blocks, `bytes` starting at such a block's address), the rest as usual.
void write_file_unbuffered(const std::filesystem::path& file, const std::filesystem::path& target, std::span<const std::uint8_t> bytes);

// Files written one after another by a thread of the queue's while the threads that fill them go
// on: a many-file output (a Zarr store's chunks) costs its producers neither the kernel's copy of
// every byte into the page cache nor the wait for the disk. At most `buffers` files wait at once;
// `write` waits for one to be written when they all do.
class FileWriteQueue {
public:
    struct FreeAligned {
        void operator()(std::uint8_t* p) const noexcept;
    };
    struct Buffer {
        std::unique_ptr<std::uint8_t[], FreeAligned> data;
        std::size_t capacity = 0;
        std::span<std::uint8_t> span() const { return {data.get(), capacity}; }
    };

    explicit FileWriteQueue(std::size_t buffers);
    ~FileWriteQueue();
    FileWriteQueue(const FileWriteQueue&) = delete;
    FileWriteQueue& operator=(const FileWriteQueue&) = delete;

    // A buffer of at least `capacity` bytes for the caller to fill; rethrows a failed write.
    Buffer take(std::size_t capacity);
    // Queues the first `size` bytes of `buffer` as the file; `atomically`: written under a staging
    // name and renamed into place, so that a reader sees it whole or not at all.
    void write(std::filesystem::path file, std::filesystem::path target, Buffer buffer, std::size_t size, bool atomically);
    // Waits for every queued file; rethrows the first failure.
    void finish();

private:
    struct Job {
        std::filesystem::path file, target;
        Buffer buffer;
        std::size_t size = 0;
        bool atomically = false;
    };
    void run();
    void rethrow_failure();  // holding mutex_

    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Job> jobs_;
    std::vector<Buffer> free_;
    std::size_t limit_;
    bool busy_ = false, stopping_ = false;
    std::exception_ptr failure_;
    std::thread writer_;
};

}  // namespace gridwarp::io::detail
