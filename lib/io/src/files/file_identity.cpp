#include "gridwarp/io/file_identity.hpp"

#include <sys/stat.h>

namespace gridwarp::io {

namespace fs = std::filesystem;

FileIdentity FileIdentifier::operator()(const fs::path& file) {
    FileIdentity identity;
    struct stat info {};
    if (::stat(file.c_str(), &info) == 0) {
        identity.exists = true;
        identity.device = info.st_dev;
        identity.inode = info.st_ino;
        return identity;
    }
    const std::string folder = file.parent_path().empty() ? std::string(".") : file.parent_path().string();
    auto found = resolved_folders_.find(folder);
    if (found == resolved_folders_.end()) {
        std::error_code error;
        fs::path resolved = fs::weakly_canonical(folder, error);
        if (error) resolved = fs::absolute(folder, error).lexically_normal();
        found = resolved_folders_.emplace(folder, resolved.string()).first;
    }
    identity.resolved = (fs::path(found->second) / file.filename()).string();
    return identity;
}

}  // namespace gridwarp::io
