// FSL FLIRT matrices (.mat, text 4x4). FLIRT maps the input image's (flirt -in) FSL coordinates to
// the reference image's (flirt -ref). FSL coordinates of a voxel index v are diag(pixdim) v, with
// x first mirrored (v_x -> nx - 1 - v_x) when the image's voxel-to-world matrix (sform when
// sform_code > 0, else qform, else the pixdims) has a positive determinant. See docs/formats.md.
#include <array>
#include <cmath>
#include <stdexcept>

#include "formats/raster_pixels.hpp"
#include "gridwarp/io/error.hpp"
#include "names.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

double determinant3(const std::vector<double>& m) {
    return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6]);
}

}  // namespace

FslSpace fsl_space(const Image& image, const fs::path& named, const fs::path& matrix_file) {
    if (image.spatial.size() != 3 || !image.geometry) {
        throw FileError(matrix_file, "an FSL matrix needs 3-D images with a geometry; " + named.string() + " is not one");
    }
    const Geometry& geometry = *image.geometry;
    std::vector<double> pixdim = geometry.spacing;
    // FSL decides the mirror from the NIfTI header by the standard rule, whatever rule placed the
    // image in the world for gridwarp; a determinant keeps its sign between RAS and LPS.
    Geometry standard = geometry;
    if (image.nifti) {
        standard = nifti_geometry(*image.nifti, 3, NiftiGeometryRule::Standard, named);
        for (std::size_t axis = 0; axis < 3; ++axis) pixdim[axis] = std::abs(image.nifti->pixdim[axis + 1]);
    }
    std::vector<double> voxel_to_world = standard.direction;
    for (std::size_t i = 0; i < 3; ++i) {
        for (std::size_t j = 0; j < 3; ++j) voxel_to_world[i * 3 + j] *= standard.spacing[j];
    }
    AffineMap index_to_fsl = AffineMap::identity(3);
    for (std::size_t axis = 0; axis < 3; ++axis) index_to_fsl.matrix[axis * 4] = pixdim[axis];
    if (determinant3(voxel_to_world) > 0) {
        const auto nx = static_cast<double>(image.spatial.back());  // spatial is outermost first: x is last
        index_to_fsl.matrix[0] = -pixdim[0];
        index_to_fsl.offset[0] = pixdim[0] * (nx - 1);
    }
    return {AffineMap::from_geometry(geometry.spacing, geometry.origin, geometry.direction), index_to_fsl};
}

bool detects_fsl_matrix(const std::string& lowercase_name, std::string_view head) {
    // ITK's text .mat files are claimed by the ITK row before this one.
    return ends_with(lowercase_name, ".mat") && looks_like_text(head);
}

TransformFile read_fnirt_field(Image field, const TransformSpec& spec, const TransformContext& context, const ReadOptions& options) {
    const fs::path& file = spec.file;
    if (context.dimension != 3) {
        throw FileError(file, "an FSL warp field is for 3-D images, got " + std::to_string(context.dimension) + "-D");
    }
    if (field.nifti && field.nifti->intent_code != kFnirtDisplacementField && field.nifti->intent_code >= 2007 &&
        field.nifti->intent_code <= 2018) {
        throw FileError(file, "holds FSL warp coefficients (NIfTI intent " + std::to_string(field.nifti->intent_code) +
                                  "), not a displacement field: make one with fnirtfileutils -i COEF -r REF -o FIELD");
    }
    if (field.channels == 3 && field.layout == ChannelLayout::Planar) field = interleaved(std::move(field));
    if (field.spatial.size() != 3 || field.channels != 3 || field.layout != ChannelLayout::Interleaved) {
        throw FileError(file, "an FSL warp field must be a 3-D volume of 3-vectors, got spatial " + shape_to_string(field.spatial) +
                                  " with " + std::to_string(field.channels) + " channel(s)");
    }
    std::optional<Image> named_source;
    if (!spec.source.empty()) named_source = read_image_header(spec.source, options);
    const Image* source = named_source ? &*named_source : context.moving;
    if (!source) throw FileError(file, "an FSL warp field needs the image it warps (-i, or the src= tag)");
    // The field lies on the reference grid (it carries the reference's header): FSL coordinates of
    // the reference voxel plus the displacement (mm, along those axes) are the moving image's FSL
    // coordinates. Converted here, voxel by voxel, into the world displacement of an ITK field on
    // the same grid; both are affine in the voxel index, so linear interpolation agrees too.
    const FslSpace reference = fsl_space(field, file, file);
    const FslSpace moving = fsl_space(*source, spec.source.empty() ? fs::path("the moving image") : spec.source, file);
    const AffineMap fsl_to_moving_world = moving.index_to_world.after(moving.index_to_fsl.inverse());
    const Tensor values = convert_to(field.pixels.view(), DType::Float64);
    const double* d = values.data_as<double>();
    const std::int64_t nz = field.spatial[0], ny = field.spatial[1], nx = field.spatial[2];
    const auto for_each_voxel = [&](auto&& visit) {  // visit(voxel's FSL coordinates, its values)
        for (std::int64_t k = 0, at = 0; k < nz; ++k) {
            for (std::int64_t j = 0; j < ny; ++j) {
                for (std::int64_t i = 0; i < nx; ++i, at += 3) {
                    const double index[3] = {static_cast<double>(i), static_cast<double>(j), static_cast<double>(k)};
                    double fsl[3];
                    reference.index_to_fsl.apply(index, fsl);
                    visit(index, fsl, d + at);
                }
            }
        }
    };
    // Absolute fields (convertwarp --absout) hold the moving FSL coordinates themselves. Untagged,
    // the values are taken as absolute when they vary more as they are than less each voxel's own
    // coordinates (fslpy's detectDisplacementType): coordinates spread over the field of view,
    // displacements do not.
    bool absolute = false;
    if (spec.absolute_field) {
        absolute = *spec.absolute_field;
    } else {
        SpreadComparison spread;
        for_each_voxel([&](const double*, const double* fsl, const double* value) { spread.add(fsl, value); });
        absolute = spread.values_are_positions();
    }
    Shape shape = field.spatial;
    shape.push_back(3);
    auto world = std::make_shared<Tensor>(DType::Float64, shape);
    double* out = world->data_as<double>();
    for_each_voxel([&](const double* index, const double* fsl, const double* value) {
        double target[3], here[3], there[3];
        reference.index_to_world.apply(index, here);
        for (int c = 0; c < 3; ++c) {
            if (!std::isfinite(value[c])) throw FileError(file, "the warp field holds a non-finite value");
            target[c] = absolute ? value[c] : fsl[c] + value[c];
        }
        fsl_to_moving_world.apply(target, there);
        const std::size_t at = static_cast<std::size_t>(value - d);
        for (int c = 0; c < 3; ++c) out[at + c] = there[c] - here[c];
    });
    TransformFile result;
    result.format = TransformFormat::Fsl;
    PointTransform step;
    step.field = std::make_shared<const DisplacementField>(std::const_pointer_cast<const Tensor>(world)->view(),
                                                           reference.index_to_world);
    result.steps.push_back(std::move(step));
    result.buffers.push_back(std::move(world));
    return result;
}

DisplacementFieldLayout fsl_field_layout(const Image& reference, const TransformContext& context) {
    if (reference.spatial.size() != 3) throw std::invalid_argument("an FSL warp field is for 3-D grids");
    if (!context.moving) throw std::invalid_argument("an FSL warp field is relative to the image it warps: give -i MOVING");
    // At each reference voxel: the moving image's FSL coordinates of the mapped point less the
    // voxel's own FSL coordinates (FNIRT's relative convention), with FNIRT's intent.
    const FslSpace fixed = fsl_space(reference, context.reference_file, context.reference_file);
    const FslSpace moving = fsl_space(*context.moving, context.moving_file, context.moving_file);
    return {vector_field_like(reference, 3, 4, kFnirtDisplacementField),
            {moving.index_to_fsl.after(moving.index_to_world.inverse()), fixed.index_to_fsl.after(fixed.index_to_world.inverse())}};
}

TransformFile read_fsl_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options) {
    const fs::path& file = spec.file;
    if (kind_for_path(file) == FileKind::Volume) return read_fnirt_field(read_image(file, options), spec, context, options);
    if (context.dimension != 3) {
        throw FileError(file, "an FSL matrix is for 3-D images, got " + std::to_string(context.dimension) + "-D");
    }
    const AffineMap flirt = homogeneous_matrix(read_matrix(file), 3, false, file);
    // The images FLIRT was given: src=/ref= when the spec names them, else the command's.
    std::optional<Image> named_source, named_reference;
    if (!spec.source.empty()) named_source = read_image_header(spec.source, options);
    if (!spec.reference.empty()) named_reference = read_image_header(spec.reference, options);
    const Image* source = named_source ? &*named_source : context.moving;
    const Image* reference = named_reference ? &*named_reference : context.reference;
    if (!source || !reference) {
        throw FileError(file, "an FSL matrix needs the images FLIRT was given (-i and -r, or the src= and ref= tags)");
    }
    const FslSpace moving = fsl_space(*source, spec.source.empty() ? fs::path("the moving image") : spec.source, file);
    const FslSpace fixed = fsl_space(*reference, spec.reference.empty() ? fs::path("the reference image") : spec.reference, file);
    // reference world -> reference index -> reference FSL -> (FLIRT^-1) -> moving FSL -> moving index -> moving world.
    try {
        return single_affine(moving.index_to_world.after(moving.index_to_fsl.inverse())
                                 .after(flirt.inverse())
                                 .after(fixed.index_to_fsl)
                                 .after(fixed.index_to_world.inverse()));
    } catch (const std::invalid_argument& e) {
        throw FileError(file, std::string("cannot be applied: ") + e.what());
    }
}

}  // namespace gridwarp::io::detail
