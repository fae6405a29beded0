// Internal: the readers and writers that need OpenCV or ITK live in modules of their own
// (gridwarp_opencv.so, gridwarp_itk.so), loaded with dlopen the first time a file needs them. A
// command on .npy or NIfTI files never loads either library, so it starts in a few milliseconds
// instead of resolving the ~160 shared libraries they pull in (docs/design.md).
//
// A module exports one C function, gridwarp_<name>_backend_v1(), returning a table of function
// pointers. To add a reader: put its code in a module (or a new one), add its functions to the
// table, and call them through the accessor below.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "gridwarp/io/image.hpp"
#include "gridwarp/io/transform_io.hpp"
#include "gridwarp/physical.hpp"

namespace gridwarp::io::detail {

struct RasterBackend {  // OpenCV
    Image (*read)(const std::filesystem::path& file);
    void (*write)(const std::filesystem::path& temporary, const std::filesystem::path& target, const Image& image,
                  const WriteOptions& options);
    bool (*has_writer)(const std::filesystem::path& file);
};

struct ItkBackend {  // ITK: NRRD, MetaImage, transform files
    Image (*read_volume)(const std::filesystem::path& file, bool with_pixels);
    void (*write_volume)(const std::filesystem::path& temporary, const std::filesystem::path& target, const Image& image);
    TransformFile (*read_transform)(const std::filesystem::path& file, std::size_t dimension);
};

// Load the module on first use (thread-safe); throw std::runtime_error naming the module and where
// it was looked for when it cannot be loaded.
const RasterBackend& raster_backend();
// Where a module file (or the HDF5 reader program, which lives beside the modules) is: the first
// of the folders above that holds it; std::runtime_error naming the folders otherwise.
std::filesystem::path find_module_file(const std::string& file_name);
const ItkBackend& itk_backend();

}  // namespace gridwarp::io::detail

// The entry points the modules define.
extern "C" const gridwarp::io::detail::RasterBackend* gridwarp_opencv_backend_v1();
extern "C" const gridwarp::io::detail::ItkBackend* gridwarp_itk_backend_v1();
