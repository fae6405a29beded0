// NIfTI-1 and NIfTI-2, read and written by gridwarp's own codec: .nii, .nii.gz, .hdr/.img pairs
// (.img.gz too), both byte orders, every datatype that has a gridwarp dtype. The header of the
// file read travels with the image (Image::nifti) so that a written file keeps it; see
// docs/formats.md for what is kept, what changes, and the geometry rules.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace gridwarp::io {

struct Geometry;

// Which of a file's transforms gives the voxel-to-world geometry.
enum class NiftiGeometryRule {
    // The sform when sform_code > 0, else the qform when qform_code > 0, else the pixdims alone
    // (NIfTI's method 1): the rule of nibabel, FSL, SPM and MRtrix3. Spatial units apply to the
    // whole affine.
    Standard,
    // ITK 5.2's NiftiImageIO, for parity with ITK-based tools (antsApplyTransforms): it prefers the
    // qform unless the sform is orthonormal and labelled scanner-anatomical (or matches the qform),
    // refuses sheared sforms, and scales the spacing but not the origin by the spatial unit.
    Itk,
};
NiftiGeometryRule parse_nifti_geometry_rule(const std::string& name);  // "standard" or "itk"

// The header fields, in NIfTI-2's widths (a NIfTI-1 file's values convert exactly).
struct NiftiHeader {
    int version = 1;          // 1 or 2
    bool big_endian = false;  // the byte order of the file read; gridwarp writes little-endian
    std::array<std::int64_t, 8> dim{};
    std::array<double, 8> pixdim{};
    int datatype = 0;
    int bitpix = 0;
    std::int64_t vox_offset = 0;
    double scl_slope = 0, scl_inter = 0;
    double cal_max = 0, cal_min = 0;
    double slice_duration = 0, toffset = 0;
    std::int64_t slice_start = 0, slice_end = 0;
    int slice_code = 0;
    int xyzt_units = 0;
    int intent_code = 0;
    double intent_p1 = 0, intent_p2 = 0, intent_p3 = 0;
    std::string intent_name;  // at most 15 characters
    std::string descrip;      // at most 79
    std::string aux_file;     // at most 23
    int qform_code = 0, sform_code = 0;
    double quatern_b = 0, quatern_c = 0, quatern_d = 0;
    double qoffset_x = 0, qoffset_y = 0, qoffset_z = 0;
    std::array<double, 12> srow{};  // srow_x, srow_y, srow_z: the sform's rows (RAS)
    std::uint8_t dim_info = 0;
    bool single_file = true;  // magic n+1/n+2 (.nii) rather than ni1/ni2 (.hdr/.img)

    // Bytes of one voxel of `datatype` (3 for RGB24).
    std::size_t bytes_per_voxel() const;
};

// Parses and checks a header (at least 348 bytes, 540 for NIfTI-2). Throws FileError naming `file`
// and the field that is wrong.
NiftiHeader parse_nifti_header(std::span<const std::uint8_t> bytes, const std::filesystem::path& file);
// The header as written (little-endian, 348 or 540 bytes, then 4 zero extension bytes).
std::array<std::uint8_t, 544> serialize_nifti_header(const NiftiHeader& header, std::size_t& size);

// The geometry (LPS, millimetres) of a header's first `dimension` axes under `rule`. Sets
// `used_method_1` when neither transform is set. Throws FileError when the chosen transform is
// singular or not finite, or (rule Itk) when ITK would refuse the file.
Geometry nifti_geometry(const NiftiHeader& header, std::size_t dimension, NiftiGeometryRule rule,
                        const std::filesystem::path& file, bool* used_method_1 = nullptr);

// A series' repetition time in seconds: pixdim[4] of a header whose time axis holds more than one
// volume, in the header's time unit (s, ms, us); 0 where it has none or no unit.
double nifti_repetition_time(const NiftiHeader& header);
// Sets the header's transforms (sform, qform, pixdim[1..3]) to hold `geometry`, in the header's
// spatial unit; keeps its codes (a sheared geometry goes in the sform only, with qform_code 0).
void set_nifti_geometry(NiftiHeader& header, const Geometry& geometry);
// The qform as a 3x4 RAS matrix [linear | offset] in the header's unit (nifti_io's quatern_to_mat44).
std::array<double, 12> nifti_qform_matrix(const NiftiHeader& header);
// Sets the qform (quaternion, offsets, pixdims, qfac) to a 3x4 RAS matrix; one whose columns are not
// orthogonal goes in the sform alone (qform_code 0), as set_nifti_geometry does.
void set_nifti_qform(NiftiHeader& header, const std::array<double, 12>& ras);

}  // namespace gridwarp::io
