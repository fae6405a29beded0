// Matrices between world points that need no image to be read: NiftyReg's reg_aladin affines, and
// plain RAS or LPS matrices. Each maps a reference point to a moving point.
#include "gridwarp/io/error.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

TransformFile read_niftyreg_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions&) {
    // reg_aladin -aff writes a 4x4 mapping the reference image's world (NIfTI RAS, sform else
    // qform) to the floating image's: the direction gridwarp wants, in RAS.
    if (context.dimension != 3) {
        throw FileError(spec.file, "a NiftyReg affine is for 3-D images, got " + std::to_string(context.dimension) + "-D");
    }
    return single_affine(ras_to_lps(homogeneous_matrix(read_matrix(spec.file), 3, false, spec.file)));
}

TransformFile read_ras_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions&) {
    return single_affine(ras_to_lps(homogeneous_matrix(read_matrix(spec.file), context.dimension, true, spec.file)));
}

TransformFile read_lps_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions&) {
    return single_affine(homogeneous_matrix(read_matrix(spec.file), context.dimension, true, spec.file));
}

TransformFile read_undetected_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions&) {
    const TextMatrix m = read_matrix(spec.file);
    const std::size_t d = context.dimension;
    if (d == 3 && m.columns == 4 && (m.rows == 4 || m.rows == 3)) {
        // FSL, FreeSurfer, AFNI, NiftyReg and ITK all write 4x4 text; only the user knows which.
        throw FileError(spec.file, "a bare " + std::to_string(m.rows) + "x4 matrix does not say which package wrote it; "
                                   "add its convention as a tag, e.g. -t " + spec.file.string() + ",fsl (tags: " +
                                   transform_tag_choices() + ")");
    }
    return single_affine(homogeneous_matrix(m, d, true, spec.file));
}

}  // namespace gridwarp::io::detail
