// The OpenCV module's entry point (backends.hpp).
#include "modules/backends.hpp"
#include "formats.hpp"

extern "C" __attribute__((visibility("default"))) const gridwarp::io::detail::RasterBackend* gridwarp_opencv_backend_v1() {
    static const gridwarp::io::detail::RasterBackend table{&gridwarp::io::detail::read_raster, &gridwarp::io::detail::write_raster,
                                                                &gridwarp::io::detail::has_raster_writer};
    return &table;
}
