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

ModuleFailure decode_dicom(const std::filesystem::path& file, const std::string& transfer_syntax, std::uint64_t bytes, char* destination) {
    return failure_of([&] { decode_dicom_pixels(file, transfer_syntax, bytes, destination); });
}

}  // namespace
}  // namespace gridwarp::io::detail

extern "C" __attribute__((visibility("default"))) const gridwarp::io::detail::ItkBackend* gridwarp_itk_backend_v6() {
    namespace detail = gridwarp::io::detail;
    static const detail::ItkBackend table{&detail::read, &detail::write, &detail::read_transform, &detail::decode_dicom};
    return &table;
}
