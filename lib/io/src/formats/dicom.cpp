#include "formats/dicom.hpp"

#include <optional>
#include <string>

#include "gridwarp/io/error.hpp"
#include "names.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kSeriesTag = ",series=";

struct SeriesSource {
    fs::path folder, named_file;
    std::string series_uid;
};

// FOLDER,series=UID where FOLDER is a folder and the whole is not a path of its own.
std::optional<SeriesSource> tagged_folder_source(const fs::path& input) {
    const std::string text = input.string();
    const std::size_t tag = text.rfind(kSeriesTag);
    if (tag == std::string::npos) return std::nullopt;
    std::error_code error;
    if (fs::exists(input, error)) return std::nullopt;
    const fs::path folder = text.substr(0, tag);
    if (!fs::is_directory(folder, error)) return std::nullopt;
    return SeriesSource{folder, {}, text.substr(tag + kSeriesTag.size())};
}

SeriesSource series_source(const fs::path& input) {
    if (auto tagged = tagged_folder_source(input)) {
        if (tagged->series_uid.empty()) throw FileError(input, "series= names no UID");
        return *tagged;
    }
    std::error_code error;
    if (fs::is_directory(input, error)) return {input, {}, {}};
    // A file of the series: the series is read from its folder.
    const auto status = fs::status(input, error);
    if (!fs::exists(status)) throw FileError(input, "no such file");
    if (!fs::is_regular_file(status)) throw FileError(input, "is not a regular file (a device, FIFO or socket)");
    const fs::path folder = input.has_parent_path() ? input.parent_path() : fs::path(".");
    return {folder, input, {}};
}

}  // namespace

}  // namespace gridwarp::io::detail

namespace gridwarp::io {

bool names_dicom_folder(const std::filesystem::path& input) {
    std::error_code error;
    // A store kept as a folder (OME-Zarr) is named by its suffix.
    if (detail::lowercase_filename(input).ends_with(".zarr")) return false;
    return std::filesystem::is_directory(input, error) || detail::tagged_folder_source(input).has_value();
}

std::vector<DicomSeriesSummary> list_dicom_series(const std::filesystem::path& folder) {
    return detail::list_series_in_folder(folder, folder);
}

}  // namespace gridwarp::io

namespace gridwarp::io::detail {

Image read_dicom_series(const fs::path& input, const ReadOptions& options, bool with_pixels) {
    const SeriesSource source = series_source(input);
    Image image = read_series_in_folder(input, source.folder, source.series_uid, source.named_file, options.memory, with_pixels);
    if (!options.keep_stored_values) apply_value_scaling(image);
    return image;
}

std::vector<fs::path> dicom_files_read(const fs::path& input) {
    const SeriesSource source = series_source(input);
    std::vector<fs::path> files;
    std::error_code error;
    for (fs::directory_iterator entry(source.folder, error), end; !error && entry != end; entry.increment(error)) {
        if (entry->is_regular_file(error)) files.push_back(entry->path());
    }
    return files;
}

}  // namespace gridwarp::io::detail
