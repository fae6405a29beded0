// Flow and displacement fields on disk. Every reader returns the field as (N, O1..Or, r) with
// components innermost-first (u/x, v/y, w/z); see docs/formats.md for each format's conventions.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "gridwarp/io/image.hpp"

namespace gridwarp::io {

struct FlowField {
    Tensor field;                       // (N, O1..Or, r); NaN marks invalid vectors
    std::string format;                 // "flo", "kitti", "npy", "nifti", "nrrd", "metaimage"
    std::optional<Geometry> geometry;   // for fields read from volume formats
};

// .flo (Middlebury; |u| or |v| >= 1e9 marks unknown flow and reads as NaN), .png (KITTI 16-bit
// flow; invalid pixels read as NaN), .npy ((H, W, 2), (D, H, W, 3), or either with a leading N),
// .nii/.nii.gz/.nrrd/.nhdr/.mha/.mhd (vector images with one component per spatial axis). `options`
// apply to the PNG and volume forms (the memory budget, the NIfTI geometry rule, data files).
FlowField read_flow(const std::filesystem::path& file, const ReadOptions& options = {});

// The field an image read by read_image holds, by the conventions read_flow applies to its kind: a
// tensor as a .npy flow, a volume as a vector image, a 16-bit colour image as KITTI's PNG. `source`
// names it in errors. The image is copied, not moved from.
FlowField flow_from_image(const Image& image, const std::filesystem::path& source);

// The bytes of a Middlebury .flo file; `source` names it in errors. Throws FileError for a wrong
// tag, a size that is implausible or disagrees with the byte count, and vectors that are NaN,
// infinite, or 2^24 pixels and more without reaching the unknown mark (1e9).
FlowField parse_flo(std::string_view bytes, const std::filesystem::path& source);

// Middlebury .flo, for a field (1, H, W, 2) or (H, W, 2) of a real dtype (stored as float32).
void write_flo(const std::filesystem::path& file, const ConstTensorView& field);

}  // namespace gridwarp::io
