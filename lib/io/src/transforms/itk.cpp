// ITK and ANTs transform files, and displacement field images (the ITK/ANTs convention: vectors in
// LPS millimetres, interpolated through the field's own geometry).
#include <algorithm>
#include <stdexcept>

#include "formats/raster_pixels.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "modules/backends.hpp"
#include "names.hpp"
#include "transforms/hdf5_isolation.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

bool has_itk_text_header(std::string_view head) { return head.rfind("#Insight Transform File", 0) == 0; }

// A NIfTI vector image is ITK's displacement field, untagged, only as ITK writes one: 5-D, one
// vector of `dimension` components per voxel (dim[4] = 1, dim[5] = dimension), intent vector or
// displacement vector. FSL's 4-D fields and NiftyReg's (intent name NREG_TRANS) hold other
// vectors, and nothing in the values tells them apart: refused, naming the tag that reads them.
void require_itk_field_header(const fs::path& file, const NiftiHeader& header, std::size_t dimension) {
    const bool vector_intent = header.intent_code == 1006 || header.intent_code == 1007;
    if (vector_intent && header.intent_name == "NREG_TRANS") {
        throw FileError(file, "a NiftyReg deformation or displacement field (intent name NREG_TRANS): its vectors are "
                              "NiftyReg's, which gridwarp does not read; reg_transform can convert it");
    }
    const bool itk_layout = header.dim[0] == 5 && header.dim[4] == 1 && header.dim[5] == static_cast<std::int64_t>(dimension);
    // Workbench writes its world warpfields (RAS vectors) in ITK's layout and intent, and says so in
    // the description only, as it does on the ITK fields it writes: its fields must be tagged.
    if (itk_layout && vector_intent && header.descrip.rfind("Connectome Workbench", 0) == 0) {
        throw FileError(file, "written by Connectome Workbench, whose world and ITK warpfields look alike: add ,world for a world "
                              "warpfield (RAS vectors) or ,itk for one it wrote with -to-itk");
    }
    if (itk_layout && vector_intent) return;
    std::string shape;
    for (std::int64_t axis = 1; axis <= std::clamp<std::int64_t>(header.dim[0], 0, 7); ++axis) {
        if (!shape.empty()) shape += 'x';
        shape += std::to_string(header.dim[static_cast<std::size_t>(axis)]);
    }
    throw FileError(file, "not tagged, and not an ITK displacement field by its header (" + std::to_string(header.dim[0]) +
                              "-D " + shape + ", intent " + std::to_string(header.intent_code) + "; ITK writes 5-D, one " +
                              std::to_string(dimension) + "-vector per voxel, intent 1007): if FSL, MRtrix3, SPM or Workbench "
                              "wrote it, add ,fsl ,mrtrix ,spm or ,world; if ITK's vectors are stored otherwise, add ,itk");
}

TransformFile read_displacement_field(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options) {
    const fs::path& file = spec.file;
    const std::size_t dimension = context.dimension;
    Image image = read_image(file, options);
    // FSL's fields say what they are in the NIfTI intent; their vectors are FSL's, not ITK's.
    if (image.nifti && image.nifti->intent_code >= kFnirtDisplacementField && image.nifti->intent_code <= 2018) {
        return read_fnirt_field(std::move(image), spec, context, options);
    }
    if (image.nifti && spec.format != TransformFormat::Itk) require_itk_field_header(file, *image.nifti, dimension);
    require_vector_image(image, file, dimension, "a displacement field");
    const Geometry geometry = image.geometry ? *image.geometry : Geometry::identity(dimension);
    // (D1..Dr, r) vectors over the pixels as they are: NIfTI's component volumes are viewed a
    // volume apart, not copied together.
    const ConstTensorView nchw = image.nchw();
    Shape shape(nchw.shape.begin() + 2, nchw.shape.end());
    Shape strides(nchw.strides.begin() + 2, nchw.strides.end());
    shape.push_back(nchw.shape[1]);
    strides.push_back(nchw.strides[1]);
    ConstTensorView vectors(nchw.dtype, nchw.data, shape, strides);
    auto buffer = std::make_shared<const Tensor>(std::move(image.pixels));
    if (vectors.dtype != DType::Float32 && vectors.dtype != DType::Float64) {
        buffer = std::make_shared<const Tensor>(convert_to(vectors, DType::Float64));
        vectors = buffer->view();
    }
    TransformFile result;
    PointTransform step;
    try {
        step.field = std::make_shared<const DisplacementField>(
            vectors, AffineMap::from_geometry(geometry.spacing, geometry.origin, geometry.direction));
    } catch (const std::invalid_argument& e) {
        throw FileError(file, e.what());
    }
    result.steps.push_back(std::move(step));
    result.buffers.push_back(std::move(buffer));
    return result;
}

}  // namespace

bool detects_itk(const std::string& lowercase_name, std::string_view head) {
    return kind_for_path(lowercase_name) == FileKind::Volume || ends_with(lowercase_name, ".tfm") ||
           ends_with(lowercase_name, ".h5") || ends_with(lowercase_name, ".hdf5") || has_itk_text_header(head) ||
           (ends_with(lowercase_name, ".mat") && !looks_like_text(head));
}

TransformFile read_itk(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options) {
    const fs::path& file = spec.file;
    const std::size_t dimension = context.dimension;
    const std::string name = lowercase_filename(file);
    if (kind_for_path(file) == FileKind::Volume) return read_displacement_field(spec, context, options);
    if (ends_with(name, ".h5") || ends_with(name, ".hdf5")) return read_hdf5_transform(file, dimension, options);
    // Text and Matlab files are checked here before ITK may read them (ITK allocates whatever
    // they declare), and their common linear kinds computed here; HDF5 files are read by ITK in a
    // process of their own.
    const std::string bytes = read_file_bytes(file);
    const bool text = ends_with(name, ".tfm") || has_itk_text_header(bytes);
    const bool matlab = !text && ends_with(name, ".mat") && !looks_like_text(bytes);
    if (!text && !matlab) {
        // A bare matrix tagged ",itk": ITK's convention for points, LPS from reference to moving.
        return single_affine(homogeneous_matrix(read_matrix(file), dimension, true, file));
    }
    std::optional<TransformFile> native =
        parse_itk_transform(bytes, text ? ItkTransformEncoding::Text : ItkTransformEncoding::Matlab, file, dimension);
    if (!native) {
        TransformFile from_itk;
        throw_if_failed(itk_backend().read_transform(file, dimension, from_itk));
        return from_itk;
    }
    return std::move(*native);
}

}  // namespace gridwarp::io::detail
