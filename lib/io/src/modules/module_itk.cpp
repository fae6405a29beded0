// The ITK module's entry point (backends.hpp).
#include "modules/backends.hpp"
#include "formats.hpp"

extern "C" __attribute__((visibility("default"))) const gridwarp::io::detail::ItkBackend* gridwarp_itk_backend_v1() {
    static const gridwarp::io::detail::ItkBackend table{&gridwarp::io::detail::read_volume, &gridwarp::io::detail::write_volume,
                                                        &gridwarp::io::detail::read_itk_transform};
    return &table;
}
