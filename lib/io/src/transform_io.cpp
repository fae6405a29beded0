#include "gridwarp/io/transform_io.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <stdexcept>

#include "backends.hpp"
#include "shared_files_internal.hpp"
#include "formats.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/text_matrix.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

namespace {

std::string lowercase_name(const fs::path& file) {
    std::string name = file.filename().string();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    return name;
}

bool has_suffix(const std::string& name, const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ITK's own text format starts with this line; other text is a plain matrix.
bool is_itk_text(const fs::path& file) {
    const std::string head = read_file_bytes(file).substr(0, 64);
    return head.rfind("#Insight Transform File", 0) == 0;
}

// A .mat is ITK's Matlab (v4) transform unless it parses as text numbers.
bool is_text(const fs::path& file) {
    const std::string bytes = read_file_bytes(file);
    return std::all_of(bytes.begin(), bytes.end(), [](unsigned char c) { return c == '\n' || c == '\r' || c == '\t' || (c >= 32 && c < 127); });
}

PointTransform affine_step(AffineMap map) {
    PointTransform step;
    step.affine = std::make_shared<const AffineMap>(std::move(map));
    return step;
}

std::vector<PointTransform> read_matrix_transform(const fs::path& file, std::size_t dimension) {
    const TextMatrix m = read_matrix(file);
    const std::size_t d = dimension;
    if (m.columns != d + 1 || (m.rows != d && m.rows != d + 1)) {
        throw FileError(file, "the matrix is " + std::to_string(m.rows) + "x" + std::to_string(m.columns) + ", expected " +
                                  std::to_string(d + 1) + "x" + std::to_string(d + 1) + " (or " + std::to_string(d) + "x" +
                                  std::to_string(d + 1) + ") for " + std::to_string(d) + "-D images");
    }
    if (m.rows == d + 1) {
        for (std::size_t j = 0; j <= d; ++j) {
            if (m.values[d * (d + 1) + j] != (j == d ? 1.0 : 0.0)) {
                throw FileError(file, "the last row of a homogeneous matrix must be 0 ... 0 1");
            }
        }
    }
    AffineMap map = AffineMap::identity(d);
    for (std::size_t i = 0; i < d; ++i) {
        for (std::size_t j = 0; j < d; ++j) map.matrix[i * d + j] = m.values[i * (d + 1) + j];
        map.offset[i] = m.values[i * (d + 1) + d];
    }
    return {affine_step(std::move(map))};
}

TransformFile read_displacement_field(const fs::path& file, std::size_t dimension, const ReadOptions& options) {
    Image image = read_image(file, options);
    if (image.channels == static_cast<std::int64_t>(dimension) && image.layout == ChannelLayout::Planar) {
        image = detail::interleaved(std::move(image));  // NIfTI stores vector components as volumes
    }
    if (image.spatial.size() != dimension || image.channels != static_cast<std::int64_t>(dimension) ||
        image.layout != ChannelLayout::Interleaved) {
        throw FileError(file, "a displacement field for " + std::to_string(dimension) + "-D images must be a " +
                                  std::to_string(dimension) + "-D vector image with " + std::to_string(dimension) +
                                  " components, got spatial " + shape_to_string(image.spatial) + " with " +
                                  std::to_string(image.channels) + " channel(s)");
    }
    const Geometry geometry = image.geometry ? *image.geometry : Geometry::identity(dimension);
    Shape shape = image.spatial;
    shape.push_back(static_cast<std::int64_t>(dimension));
    Tensor vectors = std::move(image.pixels).reshaped(shape);
    if (vectors.dtype() != DType::Float32 && vectors.dtype() != DType::Float64) {
        vectors = convert_to(vectors.view(), DType::Float64);
    }
    auto buffer = std::make_shared<const Tensor>(std::move(vectors));
    TransformFile result;
    PointTransform step;
    try {
        step.field = std::make_shared<const DisplacementField>(
            buffer->view(), AffineMap::from_geometry(geometry.spacing, geometry.origin, geometry.direction));
    } catch (const std::invalid_argument& e) {
        throw FileError(file, e.what());
    }
    result.steps.push_back(std::move(step));
    result.buffers.push_back(std::move(buffer));
    return result;
}

}  // namespace

namespace {

TransformFile read_transform_file(const fs::path& file, std::size_t dimension, bool invert, const ReadOptions& options);

void invert_steps(const fs::path& file, std::vector<PointTransform>& steps) {
    // (A o B)^-1 = B^-1 o A^-1: reverse the list and invert each step.
    std::reverse(steps.begin(), steps.end());
    for (auto& step : steps) {
        if (!step.affine) throw FileError(file, "a displacement field cannot be inverted here; pass its inverse field");
        try {
            step.affine = std::make_shared<const AffineMap>(step.affine->inverse());
        } catch (const std::invalid_argument& e) {
            throw FileError(file, e.what());
        }
    }
}

// FreeSurfer LTA and AFNI matrices, named by a tag or detected by name and content. Their maps
// depend on both images, so they bypass the shared-file cache.
std::optional<TransformFile> read_package_transform(const TransformSpec& spec, const TransformContext& context,
                                                    const ReadOptions& options) {
    TransformFormat format = spec.format;
    if (format == TransformFormat::Detect) {
        detail::require_readable_file(spec.file);
        std::string head(4096, '\0');
        std::ifstream stream(spec.file, std::ios::binary);
        stream.read(head.data(), static_cast<std::streamsize>(head.size()));
        head.resize(static_cast<std::size_t>(std::max<std::streamsize>(stream.gcount(), 0)));
        const std::string name = lowercase_name(spec.file);
        if (detail::detects_lta(name, head)) {
            format = TransformFormat::Lta;
        } else if (detail::detects_afni_matrix(name, head)) {
            format = TransformFormat::Afni;
        }
    }
    if (format != TransformFormat::Lta && format != TransformFormat::Afni) return std::nullopt;
    detail::require_readable_file(spec.file);
    TransformFile result = format == TransformFormat::Lta ? detail::read_lta(spec, context, options)
                                                           : detail::read_afni_matrix(spec, context, options);
    if (spec.inverse) invert_steps(spec.file, result.steps);
    return result;
}

}  // namespace

const std::vector<std::pair<std::string, TransformFormat>>& transform_format_tags() {
    static const std::vector<std::pair<std::string, TransformFormat>> tags = {
        {"itk", TransformFormat::Itk},           {"fsl", TransformFormat::Fsl}, {"lta", TransformFormat::Lta},
        {"afni", TransformFormat::Afni},         {"niftyreg", TransformFormat::NiftyReg},
        {"ras", TransformFormat::Ras},           {"lps", TransformFormat::Lps}};
    return tags;
}

std::string transform_format_name(TransformFormat format) {
    for (const auto& [tag, listed] : transform_format_tags()) {
        if (listed == format) return tag;
    }
    return "detected";
}

TransformSpec parse_transform_spec(std::string text) {
    TransformSpec spec;
    // ANTs writes [FILE,1] to invert and [FILE,0] not to.
    const bool bracketed = text.size() >= 2 && text.front() == '[' && text.back() == ']';
    if (bracketed) text = text.substr(1, text.size() - 2);
    // Tags are taken from the right while they are tags, so a file name may hold commas.
    for (auto comma = text.rfind(','); comma != std::string::npos; comma = text.rfind(',')) {
        const std::string tag = text.substr(comma + 1);
        const auto format = std::find_if(transform_format_tags().begin(), transform_format_tags().end(),
                                         [&](const auto& entry) { return entry.first == tag; });
        if (format != transform_format_tags().end()) {
            spec.format = format->second;
        } else if (tag == "inverse" || tag == "1") {
            spec.inverse = true;
        } else if (tag == "forward" || tag == "0") {
            spec.inverse = false;
        } else if (tag == "per-volume") {
            spec.per_volume = true;
        } else if (tag.rfind("src=", 0) == 0) {
            spec.source = tag.substr(4);
        } else if (tag.rfind("ref=", 0) == 0) {
            spec.reference = tag.substr(4);
        } else {
            break;
        }
        text.resize(comma);
    }
    if (bracketed && text.find(',') != std::string::npos) {
        throw std::invalid_argument("--transform [" + text + "]: expected [FILE,0] or [FILE,1]");
    }
    if (text.empty()) throw std::invalid_argument("--transform: no file name");
    spec.file = text;
    return spec;
}

TransformFile read_transform(const fs::path& file, std::size_t dimension, bool invert, const ReadOptions& options) {
    TransformSpec spec;
    spec.file = file;
    spec.inverse = invert;
    TransformContext context;
    context.dimension = dimension;
    return read_transform(spec, context, options);
}

TransformFile read_transform(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options) {
    if (auto package = read_package_transform(spec, context, options)) return std::move(*package);
    const fs::path& file = spec.file;
    const std::size_t dimension = context.dimension;
    const bool invert = spec.inverse;
    // Many jobs of a batch share their transforms: read each once (shared_files.hpp).
    const auto key = detail::shared_file_key(file, "transform|" + std::to_string(dimension) + (invert ? "|inverse|" : "|forward|") +
                                                       std::to_string(static_cast<int>(options.nifti_geometry)));
    if (key) {
        if (auto hit = detail::shared_file_find(*key)) return std::any_cast<TransformFile>(*hit);
    }
    TransformFile result = read_transform_file(file, dimension, invert, options);
    if (key) {
        std::size_t bytes = 4096;
        for (const auto& buffer : result.buffers) bytes += buffer ? buffer->nbytes() : 0;
        detail::shared_file_store(*key, result, bytes);
    }
    return result;
}

namespace {

TransformFile read_transform_file(const fs::path& file, std::size_t dimension, bool invert, const ReadOptions& options) {
    detail::require_readable_file(file);
    if (dimension != 2 && dimension != 3) {
        throw FileError(file, "transforms apply to 2-D and 3-D images, got " + std::to_string(dimension) + "-D");
    }
    const std::string name = lowercase_name(file);
    TransformFile result;
    if (kind_for_path(file) == FileKind::Volume) {
        result = read_displacement_field(file, dimension, options);
    } else if (has_suffix(name, ".tfm") || has_suffix(name, ".h5") || has_suffix(name, ".hdf5") ||
               (has_suffix(name, ".txt") && is_itk_text(file)) || (has_suffix(name, ".mat") && !is_text(file))) {
        // Text and Matlab files are checked here before ITK may read them (ITK allocates whatever
        // they declare), and their common linear kinds computed here; HDF5 is ITK's alone.
        const bool text = has_suffix(name, ".tfm") || has_suffix(name, ".txt");
        const bool matlab = has_suffix(name, ".mat");
        std::optional<std::vector<PointTransform>> native;
        if (text || matlab) {
            native = parse_itk_transform(read_file_bytes(file), text ? ItkTransformEncoding::Text : ItkTransformEncoding::Matlab,
                                         file, dimension);
        }
        if (native) {
            result.steps = std::move(*native);
        } else {
            result = detail::itk_backend().read_transform(file, dimension);
        }
    } else {
        result.steps = read_matrix_transform(file, dimension);
    }
    if (invert) invert_steps(file, result.steps);
    return result;
}

}  // namespace

}  // namespace gridwarp::io
