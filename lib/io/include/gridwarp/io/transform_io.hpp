// Transforms for physical-space resampling, read from files. Every transform maps points of the
// reference (fixed) space to points of the moving space, in ITK's LPS millimetres, as ITK's
// ResampleImageFilter and antsApplyTransforms use them. See docs/resample.md.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gridwarp/io/image.hpp"
#include "gridwarp/physical.hpp"

namespace gridwarp::io {

// The packages whose transform files gridwarp reads, as a -t tag names them ("FILE,fsl").
enum class TransformFormat {
    Detect,    // by content and extension
    Itk,       // ITK/ANTs .tfm/.txt/.mat/.h5, and displacement field images
    Fsl,       // FSL FLIRT .mat (scaled-voxel coordinates; needs both images)
    Lta,       // FreeSurfer .lta
    Afni,      // AFNI .aff12.1D / 3dvolreg / 3dAllineate (DICOM order)
    NiftyReg,  // NiftyReg reg_aladin (reference to floating, RAS)
    Ras,       // a plain 4x4 world matrix, reference to moving, RAS
    Lps,       // a plain 4x4 world matrix, reference to moving, LPS
    Mrtrix,    // MRtrix3 deformation (or displacement) fields: RAS scanner positions
    Spm,       // SPM y_*.nii deformations: RAS positions, 5-D
    World,     // Connectome Workbench world warpfields: RAS displacements
    Elastix,   // elastix TransformParameters files (linear kinds and B-splines, chained)
};

// A transform as a command line names it: "FILE[,tag...]" or ANTs' "[FILE,0|1]". Tags: a format
// (transform_format_tags()), inverse / forward, per-volume, FSL's src=IMAGE and ref=IMAGE, and
// abs / rel for an FSL warp field.
struct TransformSpec {
    std::filesystem::path file;
    TransformFormat format = TransformFormat::Detect;
    bool inverse = false;
    bool per_volume = false;                // one transform per volume of a 4-D input
    // An FSL warp field's values: relative displacements or absolute FSL coordinates (applywarp's
    // --rel and --abs); nullopt: told apart from the values, as fslpy does.
    std::optional<bool> absolute_field;
    std::filesystem::path source, reference;  // the images an FSL matrix was made for (src=, ref=)
};

// The format tags, in the order documentation lists them, with their formats.
const std::vector<std::pair<std::string, TransformFormat>>& transform_format_tags();
std::string transform_format_name(TransformFormat format);

// Parses a -t value; throws std::invalid_argument for an empty file name or a bracketed flag other
// than 0 and 1. Trailing comma-separated words that are not tags stay part of the file name.
TransformSpec parse_transform_spec(std::string text);

// What a transform reader may need besides the file: the images it maps between. FSL and AFNI
// matrices and LTA files are defined through them.
struct TransformContext {
    std::size_t dimension = 3;
    const Image* moving = nullptr;     // the image sampled (-i): its header
    const Image* reference = nullptr;  // the grid sampled onto (-r, or the moving image)
    std::filesystem::path moving_file, reference_file;  // their names, for formats that record them
    // Where the transform sits in a chain: first (its input points are the reference grid's) and
    // last (its output points are the moving image's). A format that names its images (an LTA)
    // checks them against the given ones only on those ends; the spaces inside a chain are unknown.
    bool acts_first = true, acts_last = true;
};

struct TransformFile {
    // The file's transforms in its own listed order: a point p maps to steps[0](steps[1](...(p))),
    // so the last one acts first (ITK's CompositeTransform order).
    std::vector<PointTransform> steps;
    // Buffers that displacement fields read from; kept alive with the steps.
    std::vector<std::shared_ptr<const Tensor>> buffers;
    // What the reader wants the user to know (one line each), e.g. an LTA whose volumes are not
    // the images given.
    std::vector<std::string> warnings;
    // How it was read, for --explain and the log (one line each): an inverse field's residual and folds.
    std::vector<std::string> notes;
    // The convention it was read in (a tag's or the detected one; Lps for a bare 2-D matrix).
    TransformFormat format = TransformFormat::Detect;
};

// Reads a transform file in the format its tag names, else the one its name and first bytes show
// (docs/formats.md, "Transforms"):
//  - ITK transform files (.tfm, "#Insight Transform File" text, binary .mat, .h5/.hdf5): the linear
//    kinds derived from MatrixOffsetTransformBase, TranslationTransform, and composites of these;
//    displacement field images (NIfTI/NRRD/MetaImage vectors in millimetres, the ITK/ANTs
//    convention), interpolated through their own geometry;
//  - FSL FLIRT text .mat, placed through the moving and reference images (or src=/ref=);
//  - FreeSurfer .lta and AFNI .1D matrices;
//  - with a tag only: NiftyReg reg_aladin affines (,niftyreg), plain world matrices (,ras / ,lps);
//  - a bare matrix no format claims: 2-D ones (3x3, 2x3) as LPS; a 3-D one is refused with the tags.
// `spec.inverse` inverts the file's transforms (a displacement field by its inverse on its own grid,
// gridwarp::invert_displacement_field). Throws
// FileError naming the file and the problem.
TransformFile read_transform(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options = {});
// The same for a file detected by its content, without images.
TransformFile read_transform(const std::filesystem::path& file, std::size_t dimension, bool invert,
                             const ReadOptions& options = {});

// The format an output file's name asks for: TAGGED when given, else its extension (.tfm ITK,
// .lta FreeSurfer, .1D AFNI); nullopt when the name does not say (.mat is FSL text or ITK Matlab,
// .txt any package's).
std::optional<TransformFormat> transform_output_format(const std::filesystem::path& file, TransformFormat tagged);

// Writes one affine map (reference point -> moving point, LPS mm; 2-D or 3-D for ITK, 3-D for the
// rest) as FORMAT: ITK text (.tfm/.txt) or Matlab (.mat), FSL FLIRT, FreeSurfer LTA (RAS2RAS with
// both volume infos), AFNI .aff12.1D, NiftyReg, or a plain RAS or LPS 4x4. FSL and LTA need the
// context's moving and reference images (std::invalid_argument without them). Written atomically.
void write_affine_transform(const std::filesystem::path& file, TransformFormat format, const AffineMap& reference_to_moving,
                            const TransformContext& context);

// Whether write_affine_transform writes FORMAT (every format but the field-only mrtrix, spm, world).
bool writes_matrices(TransformFormat format);
// The formats with a dense field layout (itk, fsl, mrtrix, spm, world), for messages.
std::vector<TransformFormat> displacement_field_formats();
// How FORMAT stores a chain as a dense field on REFERENCE's grid, written to OUTPUT: `description`
// is the file (float32 vectors in the layout OUTPUT's format stores them, with the reference's
// header and the format's NIfTI layout and intent; no pixels: a PendingOutput's description) and `values` what it holds at each voxel (core's
// chain_field_values): ITK's LPS displacements (5-D, vector intent), FSL FNIRT's relative warp
// (4-D, intent 2006; needs the context's moving image), MRtrix3's deformation (RAS positions,
// 4-D), SPM's (5-D) or Workbench's world warpfield (RAS displacements, 5-D). Throws
// std::invalid_argument for a format without a field layout, or one that needs what the context lacks.
struct DisplacementFieldLayout {
    Image description;
    FieldValueMaps values;
};
DisplacementFieldLayout displacement_field_layout(TransformFormat format, const Image& reference, const TransformContext& context,
                                                  const std::filesystem::path& output);

// A per-volume list (`-t FILE,per-volume`): one transform per volume of a 4-D series, in volume
// order. FILE is either a file holding the list (an ITK text/Matlab/HDF5 file of N transforms, as
// ANTs and fMRIPrep write head motion: its i-th transform is volume i's) or a folder whose files,
// in name order, are one transform each (MCFLIRT's MAT_0000, MAT_0001, ...), each read by
// read_transform with the spec's format. `,inverse` inverts each transform in place. Throws
// FileError naming FILE for an empty list or an unreadable element.
std::vector<TransformFile> read_transform_series(const TransformSpec& spec, const TransformContext& context,
                                                 const ReadOptions& options = {});

enum class ItkTransformEncoding {
    Text,    // "#Insight Transform File V1.0" (.tfm, .txt)
    Matlab,  // ITK's Matlab v4 files (.mat)
};

// The bytes of an ITK transform file, read without ITK; `source` names it in errors. Every transform
// must be a linear kind (or a translation, or a text file's heading CompositeTransform), a
// BSplineTransform or a DisplacementFieldTransform for `dimension`-D images, with exactly as many
// parameters as ITK's class takes; anything else (other kinds, surplus or missing parameters,
// non-finite values, sizes the bytes do not hold) throws FileError. Returns the steps, or nullopt
// for a checked file holding a kind this reader leaves to ITK (read_transform then reads it
// through ITK).
std::optional<TransformFile> parse_itk_transform(std::string_view bytes, ItkTransformEncoding encoding, const std::filesystem::path& source,
                                                 std::size_t dimension);

// Appends ITK's BSplineTransform of `order` (ITK's fixed parameters: the coefficient grid's size,
// origin, spacing and direction row by row; parameters: each component's coefficients in turn, x
// fastest) to `result` as a B-spline displacement field. Throws FileError naming `file` for counts
// that do not match, a grid too small for the order, or non-finite values.
void append_bspline_transform(const std::vector<double>& fixed, const std::vector<double>& parameters, std::size_t dimension, int order,
                              TransformFile& result, const std::filesystem::path& file);

// One transform as an ITK file declares it: its type as ITK names it ("AffineTransform_double_3_3")
// and how many parameters and fixed parameters the file holds for it.
struct ItkTransformDeclaration {
    std::string type;
    std::size_t parameters = 0, fixed_parameters = 0;
    bool has_parameters = false, has_fixed_parameters = false;
    std::string where;  // where the file declares it, for errors: "line 3", "matrix 1", "/TransformGroup/0"
    // The fixed parameters' values where the reader has them (few: a centre, or a displacement
    // field's size, origin, spacing and direction, which ITK allocates from).
    std::vector<double> fixed_values;
};
// parse_itk_transform's rules, for readers that see only the declarations (ITK's HDF5 files): throws
// FileError naming `source` unless every transform is one gridwarp can use for `dimension`-D images.
void check_itk_transform_declarations(const std::vector<ItkTransformDeclaration>& transforms, std::size_t dimension,
                                      const std::filesystem::path& source);

}  // namespace gridwarp::io
