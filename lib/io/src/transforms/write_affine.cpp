// One affine map written in each package's convention (gridwarp convert-transform). The map is
// gridwarp's own: reference point -> moving point in LPS millimetres. Each writer is the inverse of
// its reader; docs/formats.md gives the conventions.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/transform_io.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

namespace {

using Matrix4 = std::array<double, 16>;  // row-major, last row 0 0 0 1

Matrix4 homogeneous(const AffineMap& map) {
    Matrix4 m{};
    for (std::size_t i = 0; i < 3; ++i) {
        for (std::size_t j = 0; j < 3; ++j) m[i * 4 + j] = map.matrix[i * 3 + j];
        m[i * 4 + 3] = map.offset[i];
    }
    m[15] = 1.0;
    return m;
}

// RAS <-> LPS: x and y change sign (the same matrix both ways).
AffineMap flip_xy(const AffineMap& map) {
    AffineMap flipped = map;
    const double sign[3] = {-1, -1, 1};
    for (std::size_t i = 0; i < 3; ++i) {
        for (std::size_t j = 0; j < 3; ++j) flipped.matrix[i * 3 + j] = sign[i] * map.matrix[i * 3 + j] * sign[j];
        flipped.offset[i] = sign[i] * map.offset[i];
    }
    return flipped;
}

const Image& required_image(const Image* image, const char* which, TransformFormat format) {
    if (image == nullptr || !image->geometry || image->spatial.size() < 3) {
        throw std::invalid_argument("writing a " + transform_format_name(format) + " transform needs the " + which +
                                    " image (a 3-D volume): give " + (std::strcmp(which, "moving") == 0 ? "-i" : "-r"));
    }
    return *image;
}

// The number of voxels along world-index axis AXIS (x first; Image::spatial lists the slowest first).
double extent(const Image& image, std::size_t axis) {
    return static_cast<double>(image.spatial[image.spatial.size() - 1 - axis]);
}

AffineMap index_to_lps(const Image& image) {
    const Geometry& g = *image.geometry;
    return AffineMap::from_geometry(g.spacing, g.origin, g.direction);
}

std::string number(double value, const char* format = "%.10g") {
    if (value == 0.0) value = 0.0;  // no "-0"
    char text[64];
    std::snprintf(text, sizeof text, format, value);
    return text;
}

// The shortest text that reads back as the same double.
std::string exact_number(double value) {
    if (value == 0.0) value = 0.0;
    char text[64];
    const auto result = std::to_chars(text, text + sizeof text, value);
    return std::string(text, result.ptr);
}

std::string matrix_rows(const Matrix4& m, const char* format, const char* separator) {
    std::string text;
    for (std::size_t i = 0; i < 4; ++i) {
        for (std::size_t j = 0; j < 4; ++j) text += number(m[i * 4 + j], format) + (j < 3 ? separator : "\n");
    }
    return text;
}

void write_text(const fs::path& file, const std::string& text) {
    write_file_atomically(file, [&](std::ostream& out) { out << text; });
}

std::string itk_text(const AffineMap& map) {
    const std::size_t d = map.dimension;
    std::string parameters;
    for (double v : map.matrix) parameters.append(" ").append(exact_number(v));
    for (double v : map.offset) parameters.append(" ").append(exact_number(v));
    std::string fixed;
    for (std::size_t i = 0; i < d; ++i) fixed += " 0";
    return "#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_" + std::to_string(d) + "_" +
           std::to_string(d) + "\nParameters:" + parameters + "\nFixedParameters:" + fixed + "\n";
}

// ITK's Matlab v4 layout (vnl_matlab_write, as antsRegistration writes .mat): a column vector named
// by the transform type holding its parameters, then "fixed" holding the centre; little-endian
// float64 (type code 0).
std::string itk_matlab(const AffineMap& map) {
    auto column = [](const std::string& name, const std::vector<double>& values) {
        std::string bytes(20, '\0');
        const std::int32_t header[5] = {0, static_cast<std::int32_t>(values.size()), 1, 0, static_cast<std::int32_t>(name.size() + 1)};
        std::memcpy(bytes.data(), header, sizeof header);
        bytes += name;
        bytes.push_back('\0');
        for (double v : values) bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
        return bytes;
    };
    const std::size_t d = map.dimension;
    std::vector<double> parameters = map.matrix;
    parameters.insert(parameters.end(), map.offset.begin(), map.offset.end());
    return column("AffineTransform_double_" + std::to_string(d) + "_" + std::to_string(d), parameters) +
           column("fixed", std::vector<double>(d, 0.0));
}

std::string lta_volume_info(const Image& image, const std::string& name) {
    const Geometry& g = *image.geometry;
    // FreeSurfer's centre: the RAS of voxel (N/2, N/2, N/2), not of the middle voxel.
    double centre_index[3], centre[3];
    for (std::size_t i = 0; i < 3; ++i) centre_index[i] = extent(image, i) / 2.0;
    index_to_lps(image).apply(centre_index, centre);
    auto ras_column = [&](std::size_t j) {
        return number(-g.direction[0 * 3 + j], "%.15e") + " " + number(-g.direction[1 * 3 + j], "%.15e") + " " +
               number(g.direction[2 * 3 + j], "%.15e");
    };
    return "valid = 1  # volume info valid\nfilename = " + name + "\nvolume = " + number(extent(image, 0), "%.0f") + " " +
           number(extent(image, 1), "%.0f") + " " + number(extent(image, 2), "%.0f") + "\nvoxelsize = " +
           number(g.spacing[0], "%.15e") + " " + number(g.spacing[1], "%.15e") + " " + number(g.spacing[2], "%.15e") +
           "\nxras   = " + ras_column(0) + "\nyras   = " + ras_column(1) + "\nzras   = " + ras_column(2) + "\ncras   = " +
           number(-centre[0], "%.15e") + " " + number(-centre[1], "%.15e") + " " + number(centre[2], "%.15e") + "\n";
}

}  // namespace

std::optional<TransformFormat> transform_output_format(const fs::path& file, TransformFormat tagged) {
    if (tagged != TransformFormat::Detect) return tagged;
    std::string name = file.filename().string();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    auto ends_with = [&](const std::string& suffix) {
        return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends_with(".tfm")) return TransformFormat::Itk;
    if (ends_with(".lta")) return TransformFormat::Lta;
    if (ends_with(".1d")) return TransformFormat::Afni;
    return std::nullopt;  // .mat (FSL text or ITK Matlab), .txt (any package) and the rest say nothing
}

bool writes_matrices(TransformFormat format) {
    return format != TransformFormat::Detect && format != TransformFormat::Mrtrix && format != TransformFormat::Spm &&
           format != TransformFormat::World && format != TransformFormat::Elastix;
}

void write_affine_transform(const fs::path& file, TransformFormat format, const AffineMap& reference_to_moving,
                            const TransformContext& context) {
    const AffineMap& map = reference_to_moving;
    if (format != TransformFormat::Itk && map.dimension != 3) {
        throw std::invalid_argument(transform_format_name(format) + " transforms are 3-D; this one is " +
                                    std::to_string(map.dimension) + "-D");
    }
    switch (format) {
        case TransformFormat::Itk: {
            std::string name = file.filename().string();
            std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
            const bool matlab = name.size() >= 4 && name.compare(name.size() - 4, 4, ".mat") == 0;
            return write_text(file, matlab ? itk_matlab(map) : itk_text(map));
        }
        case TransformFormat::Lps:
            return write_text(file, matrix_rows(homogeneous(map), "%.10g", " "));
        case TransformFormat::Ras:
            return write_text(file, matrix_rows(homogeneous(flip_xy(map)), "%.10g", " "));
        case TransformFormat::NiftyReg:
            // reg_aladin's -aff: reference world to floating world, RAS.
            return write_text(file, matrix_rows(homogeneous(flip_xy(map)), "%.10g", " "));
        case TransformFormat::Afni: {
            // 3dAllineate's -1Dmatrix_save: base (reference) to source (moving), DICOM (LPS) order, one
            // row, between the images' cardinal grids when they are oblique.
            const AffineMap afni = detail::afni_row_from_world(map, context);
            std::string row;
            for (std::size_t i = 0; i < 3; ++i) {
                for (std::size_t j = 0; j < 3; ++j) row += number(afni.matrix[i * 3 + j], "%.10g") + " ";
                row += number(afni.offset[i], "%.10g") + (i < 2 ? " " : "\n");
            }
            return write_text(file, "# 3dAllineate matrices (DICOM-to-DICOM, row-by-row):\n" + row);
        }
        case TransformFormat::Fsl: {
            // FLIRT's matrix maps the moving image's FSL coordinates to the reference's.
            const Image& moving = required_image(context.moving, "moving", format);
            const Image& reference = required_image(context.reference, "reference", format);
            const detail::FslSpace moving_space = detail::fsl_space(moving, context.moving_file, file);
            const detail::FslSpace reference_space = detail::fsl_space(reference, context.reference_file, file);
            const AffineMap flirt = reference_space.index_to_fsl.after(reference_space.index_to_world.inverse())
                                        .after(map.inverse())
                                        .after(moving_space.index_to_world)
                                        .after(moving_space.index_to_fsl.inverse());
            return write_text(file, matrix_rows(homogeneous(flirt), "%.10f", "  "));
        }
        case TransformFormat::Lta: {
            // LINEAR_RAS_TO_RAS from the moving (src) volume's scanner RAS to the reference's (dst).
            const Image& moving = required_image(context.moving, "moving", format);
            const Image& reference = required_image(context.reference, "reference", format);
            const Matrix4 ras = homogeneous(flip_xy(map.inverse()));
            std::string text = "# transform file " + file.filename().string() + "\n# created by gridwarp convert-transform\n";
            text += "type      = 1 # LINEAR_RAS_TO_RAS\nnxforms   = 1\nmean      = 0.0000 0.0000 0.0000\nsigma     = 1.0000\n1 4 4\n";
            text += matrix_rows(ras, "%.15e", " ");
            text += "src volume info\n" + lta_volume_info(moving, context.moving_file.string());
            text += "dst volume info\n" + lta_volume_info(reference, context.reference_file.string());
            return write_text(file, text);
        }
        case TransformFormat::Mrtrix:
        case TransformFormat::Spm:
        case TransformFormat::World:
        case TransformFormat::Elastix:
        case TransformFormat::Detect:
            break;
    }
    throw std::invalid_argument(transform_format_name(format) + " has no matrix layout for " + file.string());
}

}  // namespace gridwarp::io
