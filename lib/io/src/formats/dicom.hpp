// Internal: DICOM series as inputs. A series is named by its folder, by one of its files (.dcm), or
// by FOLDER,series=UID where the folder holds several (dicom.cpp); it is read by dicom_series.cpp,
// compressed pixel data decoded by GDCM in the ITK module.
#pragma once

#include <filesystem>
#include <vector>

#include "gridwarp/io/dicom.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

Image read_dicom_series(const std::filesystem::path& input, const ReadOptions& options, bool with_pixels);
// The files in the series' folder (all of them: which belong to the series is known only once
// their headers are read).
std::vector<std::filesystem::path> dicom_files_read(const std::filesystem::path& input);

// dicom_series.cpp: the series in `folder`: the one `series_uid` names, the one `named_file` belongs
// to, or the folder's only one. Errors name `input`, the path as the user gave it.
Image read_series_in_folder(const std::filesystem::path& input, const std::filesystem::path& folder, const std::string& series_uid,
                            const std::filesystem::path& named_file, const MemoryBudget& budget, bool with_pixels);
std::vector<DicomSeriesSummary> list_series_in_folder(const std::filesystem::path& input, const std::filesystem::path& folder);

}  // namespace gridwarp::io::detail
