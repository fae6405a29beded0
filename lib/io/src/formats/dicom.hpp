// Internal: DICOM series as inputs (dicom.cpp). A series is named by its folder, by one of its
// files (.dcm), or by FOLDER,series=UID where the folder holds several; it is read by the ITK
// module, through GDCM (modules/dicom_io.cpp).
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

}  // namespace gridwarp::io::detail
