// Internal: files seen through memory maps. Inputs are sampled in their own pages; outputs are
// sampled straight into the pages of a file created at its final size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "files/staging.hpp"

namespace gridwarp::io::detail {

// A whole file, opened for reading and mapped on request. The mapping is private and writable:
// a reader may fix its byte order in place, and such writes stay in this process.
class MappedFile {
public:
    explicit MappedFile(const std::filesystem::path& file);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::size_t size() const { return size_; }
    // Maps the file (once); populate: fault every page in now, on this thread.
    std::uint8_t* map(bool populate);
    // The first min(count, size()) bytes, read without mapping.
    std::vector<std::uint8_t> read_prefix(std::size_t count) const;

private:
    std::filesystem::path file_;
    int fd_ = -1;
    std::size_t size_ = 0;
    void* data_ = nullptr;
};

// How a file written through a mapping is closed, once the mapping is released: finish() closes it
// (reporting a delayed write error), abandon() closes it after a failure.
struct FileClosers {
    std::function<void()> finish;
    std::function<void()> abandon;
};

// A new file of `size` bytes, its blocks reserved and mapped shared: what is stored in `bytes` is
// the file's content. Destroying the last owner of `bytes` unmaps it.
struct MappedOutputFile {
    std::shared_ptr<std::uint8_t> bytes;
    FileClosers closers;
};
// nullopt (and no file left) where the file system cannot reserve the space up front or map the
// file; a FileError naming `target` when the disk is full or the file cannot be created.
std::optional<MappedOutputFile> create_mapped_output(const StagedFile& staged, std::size_t size);

// A mapped output staged beside its target (atomic_file.hpp's rules). publish()
// closes the file and moves it into place; destroyed unpublished, it closes and removes it. Its
// owner releases the mapping before either.
class StagedOutput {
public:
    StagedOutput(Staging staging, FileClosers closers);
    ~StagedOutput();
    StagedOutput(const StagedOutput&) = delete;
    StagedOutput& operator=(const StagedOutput&) = delete;

    void publish(const std::filesystem::path& target);

private:
    Staging staging_;
    FileClosers closers_;
    bool published_ = false;
};

// Stages `target` and calls `map` with the file to make. Where `map` gives nullopt
// (the output cannot be mapped), or throws, what was staged is removed.
std::unique_ptr<StagedOutput> stage_mapped_output(const std::filesystem::path& target,
                                                  const std::function<std::optional<FileClosers>(const StagedFile& staged)>& map);

// Reverses the bytes of each of `count` elements of `size` bytes.
void swap_elements(std::uint8_t* bytes, std::size_t count, std::size_t size);

}  // namespace gridwarp::io::detail
