#include "gridwarp/io/file_identity.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <optional>

#include "formats/nifti.hpp"
#include "formats/volume_header_check.hpp"
#include "names.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

namespace {

// What ITK names the data file of a detached header it writes (gridwarp writes them compressed):
// teem's NRRD writer adds its encoding's suffix, MetaIO "zraw" for compressed data.
std::optional<fs::path> detached_data_file_written(const fs::path& header) {
    const std::string name = detail::lowercase_filename(header);
    const std::string filename = header.filename().string();
    if (detail::ends_with(name, ".nhdr")) return header.parent_path() / (filename.substr(0, filename.size() - 5) + ".raw.gz");
    if (detail::ends_with(name, ".mhd")) return header.parent_path() / (filename.substr(0, filename.size() - 4) + ".zraw");
    return std::nullopt;
}

}  // namespace

std::vector<fs::path> files_read(const fs::path& file) {
    if (detail::is_nifti_path(file)) return detail::nifti_files(file, true);
    const std::string name = detail::lowercase_filename(file);
    if (!detail::ends_with(name, ".nhdr") && !detail::ends_with(name, ".mhd")) return {file};
    std::vector<fs::path> files{file};
    ReadOptions every_data_file;
    every_data_file.allow_outside_data_files = true;
    every_data_file.memory = MemoryBudget{0, 0};
    try {
        for (const auto& data : detail::check_volume_file(file, every_data_file).data_files) {
            if (std::find(files.begin(), files.end(), data.path) == files.end()) files.push_back(data.path);
        }
    } catch (const std::exception&) {
        // Not readable as it is: the read itself will refuse it, naming the problem.
    }
    return files;
}

std::vector<fs::path> files_written(const fs::path& file) {
    if (detail::is_nifti_path(file)) return detail::nifti_files(file, false);
    if (auto data = detached_data_file_written(file)) return {file, *data};
    return {file};
}

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
