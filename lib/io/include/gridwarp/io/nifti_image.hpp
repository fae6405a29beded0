// NIfTI images held in memory by other programs (nibabel): their header and voxels as the Image
// read_image would make of the file, and the header write_image would give an Image.
#pragma once

#include <filesystem>
#include <memory>

#include "gridwarp/io/image.hpp"
#include "gridwarp/io/nifti.hpp"

namespace gridwarp::io {

// The image read_image makes of a NIfTI file with this header, without its pixels (an empty
// tensor of the values' dtype: float64 where the header scales them): what a NIfTI image another
// program holds in memory (nibabel's) becomes. Throws FileError naming `named` where read_image
// would refuse the header.
Image nifti_image_description(std::shared_ptr<const NiftiHeader> header, const ReadOptions& options, const std::filesystem::path& named);
// The header write_image gives `image` in a single .nii file: the one it carries, updated to its
// shape, type, scaling and geometry, or a new one.
NiftiHeader nifti_header_for(const Image& image);

}  // namespace gridwarp::io
