// Which files a path stands for, and when two paths are one file: so that a command can refuse an
// output that would replace one of its inputs, or another of its outputs, however they are spelled
// (docs/reliability.md).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace gridwarp::io {

// The files that reading `file` opens: the file itself and the files it brings along (the other
// half of a NIfTI pair, the data files a .nhdr/.mhd header names, inside its folder or not). A
// header that cannot be parsed stands for itself only (reading it will say what is wrong).
std::vector<std::filesystem::path> files_read(const std::filesystem::path& file);

// The files that writing `file` creates or replaces: both halves of a NIfTI pair (-o x.hdr or
// -o x.img), a .nhdr's or .mhd's data file, else the file itself.
std::vector<std::filesystem::path> files_written(const std::filesystem::path& file);

// A file, whatever the spelling: the device and inode of an existing file (symbolic links followed,
// so a hard link or a link to it is the same file), else the resolved folder (symbolic links, "..",
// "./") and the name of a file not yet there.
struct FileIdentity {
    bool exists = false;
    dev_t device = 0;
    ino_t inode = 0;
    std::string resolved;  // for a file not yet there

    bool operator==(const FileIdentity& other) const {
        return std::tie(exists, device, inode, resolved) == std::tie(other.exists, other.device, other.inode, other.resolved);
    }
    bool operator<(const FileIdentity& other) const {
        return std::tie(exists, device, inode, resolved) < std::tie(other.exists, other.device, other.inode, other.resolved);
    }
};

// Identifies files, resolving each folder once (a batch identifies the outputs of all its jobs).
class FileIdentifier {
public:
    FileIdentity operator()(const std::filesystem::path& file);

private:
    std::map<std::string, std::string> resolved_folders_;
};

}  // namespace gridwarp::io
