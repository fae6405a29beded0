// Lossless reorientation: the same voxels with their axes permuted and flipped so that they point
// towards the directions an orientation code names (RAS, LPS, LIA, ...), as nibabel's
// as_closest_canonical, fslreorient2std and mrconvert -axes do. No value is interpolated.
#pragma once

#include <array>
#include <string>

#include "gridwarp/io/image.hpp"

namespace gridwarp::io {

// The anatomical direction each voxel axis (x, y, z) points towards, one letter each: R or L, A or P,
// S or I (nibabel's aff2axcodes): the closest rotation to the geometry's direction (its polar
// factor), whose largest entries, taken greedily, pair voxel axes with world axes. 3-D geometry.
std::string orientation_code(const Geometry& geometry);

// Which input axis each output axis takes (x first) and whether it runs the other way.
struct AxisReorder {
    std::array<int, 3> source_axis{0, 1, 2};
    std::array<bool, 3> flipped{false, false, false};
    bool identity() const;
};
// The reorder taking a volume of `geometry` to `code` (three letters, one per world axis, any case).
// Throws std::invalid_argument naming a code that is not one.
AxisReorder reorder_to(const Geometry& geometry, const std::string& code);

// IMAGE with its spatial axes reordered: the data moved, not interpolated (channels and a 4-D
// series' volumes stay last), the geometry changed so that every voxel keeps its world position,
// and a NIfTI header's sform and qform reordered alike (codes, units and slice timing kept, the slice
// order reversed with a flipped slice axis). A 3-D volume with a geometry.
Image reoriented(const Image& image, const AxisReorder& reorder);

// The same reorder of a NIfTI header's first three axes: dims, pixdims, sform and qform (each as the
// header holds it, so a header whose two transforms differ keeps them different), dim_info, slice
// timing.
void reorient_nifti_header(NiftiHeader& header, const AxisReorder& reorder);

}  // namespace gridwarp::io
