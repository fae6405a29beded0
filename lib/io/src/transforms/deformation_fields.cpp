// Dense fields of other packages' conventions, read into ITK's (a displacement in LPS millimetres
// at each voxel of the field's grid) and written from it:
//  - MRtrix3 deformations: at each voxel the scanner (RAS) position it maps to, 4-D (X, Y, Z, 3);
//    its displacement fields (warpconvert's deformation2displacement) hold RAS vectors instead;
//  - SPM y_*.nii deformations: the same positions, 5-D (X, Y, Z, 1, 3);
//  - Connectome Workbench's world warpfields: RAS displacements, 5-D with the vector intent.
// Each maps a point of its own grid (the reference) to a point of the moving image. See
// docs/formats.md, "Displacement fields".
#include <cmath>

#include "formats/raster_pixels.hpp"
#include "gridwarp/io/error.hpp"
#include "names.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

// RAS and LPS differ in the signs of x and y.
constexpr double kRasSign[3] = {-1.0, -1.0, 1.0};

// Calls visit(voxel's LPS point, its vector, voxel number) for every voxel of a field on `grid`
// (x fastest).
template <class Visit>
void for_each_field_voxel(const Shape& spatial, const AffineMap& index_to_point, Visit&& visit) {
    const std::size_t dimension = spatial.size();
    std::vector<std::int64_t> index(dimension, 0);
    std::vector<double> continuous(dimension), point(dimension);
    std::int64_t count = 1;
    for (const std::int64_t extent : spatial) count *= extent;
    for (std::int64_t voxel = 0; voxel < count; ++voxel) {
        for (std::size_t axis = 0; axis < dimension; ++axis) continuous[axis] = static_cast<double>(index[dimension - 1 - axis]);
        index_to_point.apply(continuous.data(), point.data());
        visit(point.data(), static_cast<std::size_t>(voxel));
        for (std::size_t axis = dimension; axis-- > 0;) {  // the last axis of `spatial` is x
            if (++index[axis] < spatial[axis]) break;
            index[axis] = 0;
        }
    }
}

enum class RasValues { Positions, Displacements, Detect };

// A 3-D field of RAS positions or displacements in FILE as an ITK displacement field on its grid.
TransformFile read_ras_field(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options,
                             const std::string& what, RasValues values) {
    const fs::path& file = spec.file;
    if (context.dimension != 3) {
        throw FileError(file, what + " is for 3-D images, got " + std::to_string(context.dimension) + "-D");
    }
    Image image = read_vector_image(file, 3, options, what);
    const Geometry geometry = image.geometry ? *image.geometry : Geometry::identity(3);
    const AffineMap index_to_point = AffineMap::from_geometry(geometry.spacing, geometry.origin, geometry.direction);
    const Tensor as_read = convert_to(image.pixels.view(), DType::Float64);
    const double* read = as_read.data_as<double>();
    bool positions = values == RasValues::Positions;
    if (values == RasValues::Detect) {
        SpreadComparison spread;
        for_each_field_voxel(image.spatial, index_to_point, [&](const double* point, std::size_t voxel) {
            const double ras[3] = {kRasSign[0] * point[0], kRasSign[1] * point[1], point[2]};
            spread.add(ras, read + voxel * 3);
        });
        positions = spread.values_are_positions();
    }
    Shape shape = image.spatial;
    shape.push_back(3);
    auto vectors = std::make_shared<Tensor>(DType::Float64, shape);
    double* out = vectors->data_as<double>();
    for_each_field_voxel(image.spatial, index_to_point, [&](const double* point, std::size_t voxel) {
        for (std::size_t c = 0; c < 3; ++c) {
            const double value = read[voxel * 3 + c];
            if (!std::isfinite(value)) throw FileError(file, "the field holds a non-finite value");
            const double lps = kRasSign[c] * value;
            out[voxel * 3 + c] = positions ? lps - point[c] : lps;
        }
    });
    TransformFile result;
    result.format = spec.format;
    PointTransform step;
    step.field = std::make_shared<const DisplacementField>(std::const_pointer_cast<const Tensor>(vectors)->view(), index_to_point);
    result.steps.push_back(std::move(step));
    result.buffers.push_back(std::move(vectors));
    return result;
}

// A file of RAS positions (`positions`) or RAS displacements.
DisplacementFieldLayout ras_field_layout(const Image& reference, bool positions, int nifti_rank, int intent) {
    AffineMap lps_to_ras = AffineMap::identity(3);
    for (std::size_t c = 0; c < 3; ++c) lps_to_ras.matrix[c * 3 + c] = kRasSign[c];
    AffineMap none = AffineMap::identity(3);
    std::fill(none.matrix.begin(), none.matrix.end(), 0.0);
    return {vector_field_like(reference, 3, nifti_rank, intent), {lps_to_ras, positions ? none : lps_to_ras}};
}

void require_3d(const Image& reference, const std::string& what) {
    if (reference.spatial.size() != 3) throw std::invalid_argument(what + " is for 3-D grids, got a " + std::to_string(reference.spatial.size()) + "-D reference");
}

}  // namespace

void SpreadComparison::add(const double* coordinates, const double* values) {
    for (int c = 0; c < 3; ++c) {
        const double less = values[c] - coordinates[c];
        sum_as_is[c] += values[c];
        square_as_is[c] += values[c] * values[c];
        sum_less_coordinates[c] += less;
        square_less_coordinates[c] += less * less;
    }
    ++count;
}

bool SpreadComparison::values_are_positions() const {
    if (count == 0) return false;
    const double n = static_cast<double>(count);
    double spread_as_is = 0, spread_less_coordinates = 0;
    for (int c = 0; c < 3; ++c) {
        spread_as_is += std::sqrt(std::max(0.0, square_as_is[c] / n - std::pow(sum_as_is[c] / n, 2)));
        spread_less_coordinates += std::sqrt(std::max(0.0, square_less_coordinates[c] / n - std::pow(sum_less_coordinates[c] / n, 2)));
    }
    return spread_as_is > spread_less_coordinates;
}

Image read_vector_image(const fs::path& file, std::size_t dimension, const ReadOptions& options, const std::string& what) {
    if (kind_for_path(file) != FileKind::Volume) {
        throw FileError(file, what + " is a volume file (.nii, .nii.gz, .nrrd, .mha, .mhd)");
    }
    return as_vector_image(read_image(file, options), file, dimension, what);
}

Image as_vector_image(Image image, const fs::path& file, std::size_t dimension, const std::string& what) {
    require_vector_image(image, file, dimension, what);
    if (image.layout == ChannelLayout::Planar) image = interleaved(std::move(image));  // NIfTI stores vector components as volumes
    return image;
}

void require_vector_image(const Image& image, const fs::path& file, std::size_t dimension, const std::string& what) {
    if (image.spatial.size() != dimension || image.channels != static_cast<std::int64_t>(dimension) || image.batch != 1) {
        throw FileError(file, what + " for " + std::to_string(dimension) + "-D images must be a " + std::to_string(dimension) +
                                  "-D volume of " + std::to_string(dimension) + "-vectors, got spatial " + shape_to_string(image.spatial) +
                                  " with " + std::to_string(image.channels) + " channel(s)");
    }
}

Image vector_field_like(const Image& reference, std::int64_t channels, int nifti_rank, int intent) {
    Image field;
    field.kind = FileKind::Volume;
    field.format = "nifti";
    field.spatial = reference.spatial;
    field.channels = channels;
    field.layout = ChannelLayout::Interleaved;
    field.geometry = reference.geometry ? *reference.geometry : Geometry::identity(reference.spatial.size());
    // The reference's NIfTI header, so that the field's transforms are the reference's bit for bit
    // (FSL, for one, decides its x mirror from them), with the vector layout and intent asked for.
    auto header = std::make_shared<NiftiHeader>(reference.nifti ? *reference.nifti : NiftiHeader{});
    if (!reference.nifti) {
        header->xyzt_units = 2 | 8;
        header->qform_code = header->sform_code = 1;
        header->pixdim = {1, 1, 1, 1, 1, 1, 1, 1};
        const Geometry& g = *field.geometry;
        for (std::size_t axis = 0; axis < g.dimension(); ++axis) header->dim[axis + 1] = reference.spatial[g.dimension() - 1 - axis];
    }
    for (std::size_t axis = 4; axis < 8; ++axis) header->dim[axis] = 1;
    if (reference.spatial.size() == 2) header->dim[3] = 1;
    header->dim[0] = nifti_rank;
    header->dim[static_cast<std::size_t>(nifti_rank)] = channels;
    header->pixdim[4] = header->pixdim[5] = 1;
    header->intent_code = intent;
    header->intent_p1 = header->intent_p2 = header->intent_p3 = 0;
    header->intent_name.clear();
    header->cal_min = header->cal_max = 0;
    header->descrip.clear();
    header->aux_file.clear();
    field.nifti = std::move(header);
    field.pixels = Tensor(DType::Float32, Shape{0});
    return field;
}

TransformFile read_mrtrix_field(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options) {
    const RasValues values = !spec.absolute_field ? RasValues::Detect : *spec.absolute_field ? RasValues::Positions : RasValues::Displacements;
    return read_ras_field(spec, context, options, "an MRtrix3 deformation field", values);
}

TransformFile read_spm_field(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options) {
    return read_ras_field(spec, context, options, "an SPM deformation field", RasValues::Positions);
}

TransformFile read_world_field(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options) {
    return read_ras_field(spec, context, options, "a Workbench world warpfield", RasValues::Displacements);
}

DisplacementFieldLayout itk_field_layout(const Image& reference, const TransformContext&) {
    const std::size_t dimension = reference.spatial.size();
    return {vector_field_like(reference, static_cast<std::int64_t>(dimension), 5, kNiftiVectorIntent),
            {AffineMap::identity(dimension), AffineMap::identity(dimension)}};
}

DisplacementFieldLayout mrtrix_field_layout(const Image& reference, const TransformContext&) {
    require_3d(reference, "an MRtrix3 deformation field");
    return ras_field_layout(reference, true, 4, 0);
}

DisplacementFieldLayout spm_field_layout(const Image& reference, const TransformContext&) {
    require_3d(reference, "an SPM deformation field");
    return ras_field_layout(reference, true, 5, 0);
}

DisplacementFieldLayout world_field_layout(const Image& reference, const TransformContext&) {
    require_3d(reference, "a Workbench world warpfield");
    return ras_field_layout(reference, false, 5, kNiftiVectorIntent);
}

}  // namespace gridwarp::io::detail
