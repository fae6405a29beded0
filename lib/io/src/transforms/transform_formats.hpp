// The transform readers, one file per package under transforms/. Each reads the file as its
// package writes it and returns the map from reference (output) points to moving points in LPS
// millimetres, not inverted: read_transform applies a spec's "inverse" afterwards.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gridwarp/io/transform_io.hpp"

namespace gridwarp::io::detail {

// FreeSurfer .lta (LINEAR_VOX_TO_VOX, LINEAR_RAS_TO_RAS, LINEAR_PHYSVOX_TO_PHYSVOX).
TransformFile read_lta(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
bool detects_lta(const std::string& lowercase_name, std::string_view head);

// AFNI .aff12.1D (3dAllineate / 3dvolreg -1Dmatrix_save): one row of 12 numbers per volume.
TransformFile read_afni_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
bool detects_afni_matrix(const std::string& lowercase_name, std::string_view head);

// Every row of an AFNI matrix file as AFNI's own base-to-source map in DICOM (RAI = LPS)
// coordinates, uncorrected for obliquity; for per-volume lists (3dvolreg).
std::vector<AffineMap> read_afni_rows(const std::filesystem::path& file);
// One such row as a reference-to-moving LPS map for these images: the identity correction for
// images stored along the axes, AFNI's cardinal-grid coordinates for oblique ones.
AffineMap afni_row_to_world(const AffineMap& row, const TransformContext& context);
// The inverse: the row AFNI would save for a reference-to-moving LPS map between these images.
AffineMap afni_row_from_world(const AffineMap& world, const TransformContext& context);

}  // namespace gridwarp::io::detail
