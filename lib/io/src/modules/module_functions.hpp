// Internal: the readers and writers compiled into the modules (OpenCV: raster_io.cpp; ITK:
// volume_io.cpp, itk_transform_io.cpp), reached from the program only through backends.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/transform_io.hpp"

namespace gridwarp::io::detail {

Image read_raster(const std::filesystem::path& file);                           // OpenCV
void write_raster(const StagedFile& staged, const Image& image,
                  const WriteOptions& options);
// Whether OpenCV has an encoder for the file's extension.
bool has_raster_writer(const std::filesystem::path& file);
Image read_volume(const std::filesystem::path& file, bool with_pixels = true);  // ITK
TransformFile read_itk_transform(const std::filesystem::path& file, std::size_t dimension);  // ITK
// An ITK HDF5 file, its structure checked first; runs only in the HDF5 reader's process.
TransformFile read_itk_hdf5_transform(const std::filesystem::path& file, std::size_t dimension, const MemoryBudget& budget);
void write_volume(const StagedFile& staged, const Image& image);
// A DICOM file's compressed pixel data, decoded by GDCM into `bytes` bytes (dicom_decode.cpp).
void decode_dicom_pixels(const std::filesystem::path& file, const std::string& transfer_syntax, std::uint64_t bytes, char* destination);

}  // namespace gridwarp::io::detail
