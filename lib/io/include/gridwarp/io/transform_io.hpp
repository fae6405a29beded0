// Transforms for physical-space resampling, read from files. Every transform maps points of the
// reference (fixed) space to points of the moving space, in ITK's LPS millimetres, as ITK's
// ResampleImageFilter and antsApplyTransforms use them. See docs/resample.md.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "gridwarp/io/image.hpp"
#include "gridwarp/physical.hpp"

namespace gridwarp::io {

struct TransformFile {
    // The file's transforms in its own listed order: a point p maps to steps[0](steps[1](...(p))),
    // so the last one acts first (ITK's CompositeTransform order).
    std::vector<PointTransform> steps;
    // Buffers that displacement fields read from; kept alive with the steps.
    std::vector<std::shared_ptr<const Tensor>> buffers;
};

// Reads
//  - ITK transform files (.tfm, .txt with the "#Insight Transform File" header, .mat, .h5/.hdf5):
//    AffineTransform, MatrixOffsetTransformBase and every linear kind derived from it (Euler2D/3D,
//    Similarity2D/3D, VersorRigid3D, ScaleTransform, ...), TranslationTransform, and composite
//    transforms of these;
//  - plain text matrices (any other .txt/.mat/...): (d+1)x(d+1) homogeneous or d x (d+1) rows in
//    LPS millimetres mapping reference points to moving points;
//  - displacement fields: NIfTI/NRRD/MetaImage vector images with d components per voxel, in
//    millimetres (the ITK/ANTs convention), interpolated through their own geometry.
// `dimension` is the images' spatial dimension; `invert` inverts linear transforms (a displacement
// field cannot be inverted here). Throws FileError naming the file and the problem.
TransformFile read_transform(const std::filesystem::path& file, std::size_t dimension, bool invert,
                             const ReadOptions& options = {});

}  // namespace gridwarp::io
