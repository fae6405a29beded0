// Internal: an output file written through its file descriptor, every short write an error.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

#include "gridwarp/io/atomic_file.hpp"

namespace gridwarp::io::detail {

// Creates (or truncates) `file`; errors name `target`, the path the user gave (the file itself is
// a staging copy of it). A full disk is a FileError, never a short file.
class OutputFile {
public:
    explicit OutputFile(const StagedFile& staged);
    ~OutputFile();
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    void write(std::span<const std::uint8_t> bytes);
    // Reserves the file's blocks up to `size` bytes, so that a full disk fails here, before any
    // writing; returns false where the file system cannot reserve.
    bool reserve(std::uint64_t size);
    // At `offset`, leaving the file position alone; several threads may write disjoint ranges.
    void write_at(std::uint64_t offset, std::span<const std::uint8_t> bytes);
    // The pieces one after another, in as few system calls as the kernel allows (rows of an
    // image written from memory in another order than the file's, without a copy).
    void write_gathered(std::vector<iovec> pieces);
    // Closes the file, reporting what the close reports (a delayed write error).
    void close();

private:
    std::filesystem::path target_;
    int fd_ = -1;
};

// A byte stream made block by block, by whoever writes it: a file's bytes sampled a block of rows
// at a time, so that no buffer of the whole output is ever needed.
struct BlockSource {
    std::vector<std::uint64_t> sizes;  // of each block, in stream order
    // Block b's bytes: a view of memory that outlives the call, or of `scratch`, which the source
    // may resize. Called from several threads at once, each with a scratch of its own.
    std::function<std::span<const std::uint8_t>(std::uint64_t b, std::vector<std::uint8_t>& scratch)> bytes;

    // bytes(b, scratch), checked against sizes[b] (std::logic_error when they differ).
    std::span<const std::uint8_t> checked_bytes(std::uint64_t b, std::vector<std::uint8_t>& scratch) const;
};

// Writes the blocks of `source` at `offset` onwards, `threads` blocks at a time (0: every core),
// each where it belongs (no block waits for the one before it). The first exception of the
// source or of a write is rethrown once every thread has stopped.
void write_blocks(OutputFile& out, std::uint64_t offset, const BlockSource& source, int threads);

}  // namespace gridwarp::io::detail
