// The OpenCV module's entry point (backends.hpp).
#include "modules/backends.hpp"
#include "modules/module_functions.hpp"

namespace gridwarp::io::detail {
namespace {

ModuleFailure read(const std::filesystem::path& file, Image& image) {
    return failure_of([&] { image = read_raster(file); });
}

ModuleFailure write(const StagedFile& staged, const Image& image,
                    const WriteOptions& options) {
    return failure_of([&] { write_raster(staged, image, options); });
}

ModuleFailure has_writer(const std::filesystem::path& file, bool& has) {
    return failure_of([&] { has = has_raster_writer(file); });
}

}  // namespace
}  // namespace gridwarp::io::detail

extern "C" __attribute__((visibility("default"))) const gridwarp::io::detail::RasterBackend* gridwarp_opencv_backend_v3() {
    namespace detail = gridwarp::io::detail;
    static const detail::RasterBackend table{&detail::read, &detail::write, &detail::has_writer};
    return &table;
}
