// Compressed DICOM pixel data through GDCM, in the ITK module (GDCM comes with ITK's GDCM IO); the
// rest of a DICOM series is read by the program itself (formats/dicom_series.cpp), which has walked
// and checked the file before it comes here.
#include <gdcmImage.h>
#include <gdcmImageReader.h>
#include <gdcmTrace.h>
#include <gdcmUIDs.h>

#include <mutex>
#include <string>

#include "gridwarp/io/error.hpp"
#include "modules/module_functions.hpp"

namespace gridwarp::io::detail {

namespace {

void silence_gdcm() {
    static std::once_flag once;
    // GDCM writes its warnings to stderr; gridwarp reports what it refuses in its own words.
    std::call_once(once, [] {
        gdcm::Trace::SetDebug(false);
        gdcm::Trace::SetWarning(false);
        gdcm::Trace::SetError(false);
    });
}

std::string transfer_syntax_name(const std::string& uid) {
    gdcm::UIDs names;
    if (names.SetFromUID(uid.c_str()) && names.GetName() != nullptr) return std::string(names.GetName()) + " (" + uid + ")";
    return uid;
}

}  // namespace

void decode_dicom_pixels(const std::filesystem::path& file, const std::string& transfer_syntax, std::uint64_t bytes, char* destination) {
    silence_gdcm();
    gdcm::ImageReader reader;
    reader.SetFileName(file.c_str());
    if (!reader.Read()) throw FileError(file, "cannot read the DICOM file's pixel data (corrupt or truncated)");
    const gdcm::Image& pixels = reader.GetImage();
    if (pixels.GetBufferLength() != bytes) {
        throw FileError(file, "its pixel data decodes to " + std::to_string(pixels.GetBufferLength()) + " bytes, expected " +
                                  std::to_string(bytes));
    }
    if (!pixels.GetBuffer(destination)) {
        throw FileError(file, "its transfer syntax " + transfer_syntax_name(transfer_syntax) + " cannot be decoded by GDCM");
    }
}

}  // namespace gridwarp::io::detail
