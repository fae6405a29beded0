// DICOM series in a folder, as `-i FOLDER` and `gridwarp info FOLDER` see them. Reading a series is
// read_image's (image.hpp); this lists what a folder holds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace gridwarp::io {

struct DicomSeriesSummary {
    std::string uid;          // SeriesInstanceUID: FOLDER,series=UID names it
    std::string description;  // SeriesDescription
    std::int64_t columns = 0, rows = 0, slices = 0;
    std::string orientation;  // the axes' nearest directions (nibabel's letters), "(oblique)" added where off
};

// Whether `input` names a folder of DICOM files (FOLDER, or FOLDER,series=UID) rather than a file.
bool names_dicom_folder(const std::filesystem::path& input);
// The image series among the files of FOLDER, in UID order. Throws FileError naming FOLDER where it
// holds none, or a file that cannot be read as DICOM.
std::vector<DicomSeriesSummary> list_dicom_series(const std::filesystem::path& folder);

}  // namespace gridwarp::io
