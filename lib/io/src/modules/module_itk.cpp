// The ITK module's entry point (backends.hpp).
#include "modules/backends.hpp"
#include "modules/module_functions.hpp"

namespace gridwarp::io::detail {
namespace {

ModuleFailure read(const std::filesystem::path& file, bool with_pixels, Image& image) {
    return failure_of([&] { image = read_volume(file, with_pixels); });
}

ModuleFailure write(const StagedFile& staged, const Image& image) {
    return failure_of([&] { write_volume(staged, image); });
}

ModuleFailure read_transform(const std::filesystem::path& file, std::size_t dimension, TransformFile& transform) {
    return failure_of([&] { transform = read_itk_transform(file, dimension); });
}

ModuleFailure read_dicom(const DicomSeriesRequest& request, Image& image) {
    return failure_of([&] {
        image = read_dicom_series(request.input, request.folder, request.series_uid, request.named_file, request.memory, request.with_pixels);
    });
}

ModuleFailure list_dicom(const DicomSeriesRequest& request, std::vector<DicomSeriesSummary>& series) {
    return failure_of([&] { series = list_dicom_series(request.input, request.folder); });
}

}  // namespace
}  // namespace gridwarp::io::detail

extern "C" __attribute__((visibility("default"))) const gridwarp::io::detail::ItkBackend* gridwarp_itk_backend_v5() {
    namespace detail = gridwarp::io::detail;
    static const detail::ItkBackend table{&detail::read, &detail::write, &detail::read_transform, &detail::read_dicom,
                                          &detail::list_dicom};
    return &table;
}
