// Internal: the transform file formats read_transform knows, one reader file per format. Adding a
// format is its reader file (detects_X, read_X) and one row of transform_format_table().
// Every reader returns the file's transform as the file states it, mapping reference points to
// moving points in LPS millimetres; read_transform applies a spec's `inverse` afterwards.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gridwarp/io/text_matrix.hpp"
#include "gridwarp/io/transform_io.hpp"

namespace gridwarp::io::detail {

// `,inverse` of one step, in place: an affine map by its inverse, a displacement field by its
// inverse on its own grid (gridwarp::invert_displacement_field, kept alive in `owner.buffers`, a
// warning in `owner.warnings` where it misses). Throws FileError naming `file`, after `context`
// ("transform 3: ") when given, for a singular matrix or a field that does not invert.
void invert_step(const std::filesystem::path& file, PointTransform& step, TransformFile& owner, const ReadOptions& options,
                 const std::string& context = "");

using TransformDetector = bool (*)(const std::string& lowercase_name, std::string_view head);
using TransformReader = TransformFile (*)(const TransformSpec& spec, const TransformContext& context,
                                          const ReadOptions& options);
// A format's dense field on a reference grid: the file's description (float32 vectors, no pixels) and what it stores at each voxel for a chain. Throws std::invalid_argument when the
// format needs what the context lacks (FSL: the moving image).
using FieldWriter = DisplacementFieldLayout (*)(const Image& reference, const TransformContext& context);

// Rows are written with designated initializers.
struct TransformFormatEntry {
    TransformFormat format;
    std::string_view tag;                  // the -t tag that names it ("fsl")
    TransformDetector detects = nullptr;   // nullptr: named by its tag only (nothing in the file says so)
    TransformReader read = nullptr;
    bool uses_images = false;              // the result depends on the context's images (never shared between jobs)
    FieldWriter write_field = nullptr;     // the format's displacement field layout, where it has one
};

// In detection order: the first row whose detector accepts a file reads it.
const std::vector<TransformFormatEntry>& transform_format_table();
const TransformFormatEntry& transform_format_entry(TransformFormat format);
// The row for a spec: its tag's, else the detected one; a file no row detects is read by
// read_undetected_matrix. `head` is the file's first bytes.
const TransformFormatEntry* detect_transform_format(const std::filesystem::path& file, std::string_view head);
// The first bytes of a file, enough for every detector.
std::string read_transform_head(const std::filesystem::path& file);

// ITK/ANTs files (.tfm, .txt, .mat, .h5) and displacement field images (itk.cpp).
bool detects_itk(const std::string& lowercase_name, std::string_view head);
TransformFile read_itk(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
// elastix TransformParameters files, with the files they chain (elastix.cpp).
bool detects_elastix(const std::string& lowercase_name, std::string_view head);
TransformFile read_elastix(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
// FSL FLIRT text .mat (fsl.cpp).
bool detects_fsl_matrix(const std::string& lowercase_name, std::string_view head);
TransformFile read_fsl_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
// How FSL places one image: index -> world (gridwarp's LPS) and index -> FSL coordinates (scaled
// voxels, x mirrored for a positive determinant). NAMED and MATRIX_FILE name them in errors.
struct FslSpace {
    AffineMap index_to_world;
    AffineMap index_to_fsl;
};
FslSpace fsl_space(const Image& image, const std::filesystem::path& named, const std::filesystem::path& matrix_file);
// FSL FNIRT displacement fields (NIfTI intent 2006, relative, mm along the reference's FSL axes):
// FIELD as read, turned into an ITK displacement field on its grid (fsl.cpp).
constexpr int kFnirtDisplacementField = 2006;
TransformFile read_fnirt_field(Image field, const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
DisplacementFieldLayout fsl_field_layout(const Image& reference, const TransformContext& context);
// FreeSurfer .lta (lta.cpp).
bool detects_lta(const std::string& lowercase_name, std::string_view head);
TransformFile read_lta(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
// AFNI .aff12.1D and 3dvolreg / 3dAllineate matrices (afni.cpp).
bool detects_afni_matrix(const std::string& lowercase_name, std::string_view head);
TransformFile read_afni_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
// ITK/ANTs displacement fields as written (itk.cpp writes through deformation_fields.cpp).
constexpr int kNiftiVectorIntent = 1007;
DisplacementFieldLayout itk_field_layout(const Image& reference, const TransformContext& context);
// Fields of RAS positions or displacements (deformation_fields.cpp): MRtrix3 deformations (its
// displacement fields told apart by their values unless tagged abs or rel), SPM y_*.nii
// deformations, Workbench world warpfields; and their writers.
TransformFile read_mrtrix_field(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
TransformFile read_spm_field(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
TransformFile read_world_field(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
DisplacementFieldLayout mrtrix_field_layout(const Image& reference, const TransformContext& context);
DisplacementFieldLayout spm_field_layout(const Image& reference, const TransformContext& context);
DisplacementFieldLayout world_field_layout(const Image& reference, const TransformContext& context);
// FILE's volume as one `dimension`-vector per voxel, interleaved; FileError naming WHAT ("an SPM
// deformation field") when it is not one.
Image read_vector_image(const std::filesystem::path& file, std::size_t dimension, const ReadOptions& options, const std::string& what);
// The same for an image already read.
Image as_vector_image(Image image, const std::filesystem::path& file, std::size_t dimension, const std::string& what);
// Throws that FileError unless IMAGE holds one `dimension`-vector per voxel, in either layout.
void require_vector_image(const Image& image, const std::filesystem::path& file, std::size_t dimension, const std::string& what);
// The description of a file on the reference's grid (its NIfTI header kept, so its transforms are
// written bit for bit) of float32 vectors of `channels` components in NIfTI
// dimension `nifti_rank` (4 or 5), with NIfTI intent `intent`.
Image vector_field_like(const Image& reference, std::int64_t channels, int nifti_rank, int intent);
// Whether a field holds positions rather than displacements, as fslpy's detectDisplacementType
// decides: the values vary more as they are than less each voxel's own coordinates (positions
// spread over the field of view, displacements do not). Fed voxel by voxel.
struct SpreadComparison {
    void add(const double* coordinates, const double* values);  // three of each
    bool values_are_positions() const;

private:
    double sum_as_is[3] = {}, square_as_is[3] = {}, sum_less_coordinates[3] = {}, square_less_coordinates[3] = {};
    std::size_t count = 0;
};

// World matrices (world_matrix.cpp): NiftyReg reg_aladin (reference to floating, RAS), plain RAS
// and LPS 4x4s, and text matrices no format claims.
TransformFile read_niftyreg_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
TransformFile read_ras_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
TransformFile read_lps_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);
// A bare matrix nothing names: a 2-D one (3x3 or 2x3) is read as LPS, as gridwarp always has; a
// 3-D one (4x4 or 3x4) is refused with the tags to choose from, since packages disagree on it.
TransformFile read_undetected_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options);

// Shared by the readers.
TransformFile single_affine(AffineMap map);
// A (d+1)x(d+1) homogeneous matrix (last row 0 ... 0 1), or d x (d+1) rows when `allow_short`.
AffineMap homogeneous_matrix(const TextMatrix& m, std::size_t dimension, bool allow_short, const std::filesystem::path& file);
// A map between RAS points as the same map between LPS points.
AffineMap ras_to_lps(const AffineMap& ras);
// "fsl, lta, afni, niftyreg, itk, ras or lps", for messages.
std::string transform_tag_choices();
// Whether bytes look like text (printable ASCII and line breaks).
bool looks_like_text(std::string_view bytes);

// Every row of an AFNI matrix file as AFNI's own base-to-source map in DICOM (RAI = LPS)
// coordinates, uncorrected for obliquity; for per-volume lists (3dvolreg).
std::vector<AffineMap> read_afni_rows(const std::filesystem::path& file);
// One such row as a reference-to-moving LPS map for these images: the identity correction for
// images stored along the axes, AFNI's cardinal-grid coordinates for oblique ones.
AffineMap afni_row_to_world(const AffineMap& row, const TransformContext& context);
// The inverse: the row AFNI would save for a reference-to-moving LPS map between these images.
AffineMap afni_row_from_world(const AffineMap& world, const TransformContext& context);

}  // namespace gridwarp::io::detail
