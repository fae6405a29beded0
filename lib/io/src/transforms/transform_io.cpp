#include "gridwarp/io/transform_io.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "files/file_checks.hpp"
#include "files/shared_files_internal.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

const std::vector<std::pair<std::string, TransformFormat>>& transform_format_tags() {
    static const std::vector<std::pair<std::string, TransformFormat>> tags = [] {
        std::vector<std::pair<std::string, TransformFormat>> listed;
        for (const auto& entry : detail::transform_format_table()) listed.emplace_back(entry.tag, entry.format);
        return listed;
    }();
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
        } else if (tag == "abs" || tag == "absolute") {
            spec.absolute_field = true;
        } else if (tag == "rel" || tag == "relative") {
            spec.absolute_field = false;
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

std::vector<TransformFormat> displacement_field_formats() {
    std::vector<TransformFormat> formats;
    for (const auto& entry : detail::transform_format_table()) {
        if (entry.write_field) formats.push_back(entry.format);
    }
    return formats;
}

DisplacementFieldLayout displacement_field_layout(TransformFormat format, const Image& reference, const TransformContext& context,
                                                  const fs::path& output) {
    const detail::TransformFormatEntry& entry = detail::transform_format_entry(format);
    if (!entry.write_field) throw std::invalid_argument(std::string(entry.tag) + " has no displacement field layout");
    DisplacementFieldLayout layout = entry.write_field(reference, context);
    layout.description.layout = stored_channel_layout(output);
    return layout;
}

TransformFile read_transform(const fs::path& file, std::size_t dimension, bool invert, const ReadOptions& options) {
    TransformSpec spec;
    spec.file = file;
    spec.inverse = invert;
    TransformContext context;
    context.dimension = dimension;
    return read_transform(spec, context, options);
}

namespace detail {

// The inverse misses its tolerance at a few voxels where a field folds or maps off its own grid
// (its edge); past this share of the voxels missed, or folded, the field has no inverse worth
// sampling with.
constexpr double kFieldInverseTolerance = 1e-6;  // mm
constexpr double kUnconvergedShare = 0.01;

void invert_step(const fs::path& file, PointTransform& step, TransformFile& owner, const ReadOptions& options, const std::string& context) {
    if (step.affine) {
        try {
            step.affine = std::make_shared<const AffineMap>(step.affine->inverse());
        } catch (const std::invalid_argument& e) {
            throw FileError(file, context + e.what());
        }
        return;
    }
    if (step.field->bspline_order() > 0) {
        // Its control grid is far coarser than the images: an inverse sampled there would be poor.
        throw FileError(file, context + "a B-spline transform is not inverted on its control grid: write it as a field on the "
                                        "reference's grid (convert-transform -o FIELD.nii.gz -r REF) and invert that; points take "
                                        "--from-moving");
    }
    const std::size_t dimension = step.field->dimension();
    const auto voxels = static_cast<std::uint64_t>(step.field->vectors().numel()) / dimension;
    // The inverse's float64 vectors, and the voxels' points twice while it is computed.
    check_memory_budget(file, "the inverse of the displacement field", voxels * dimension * 3, sizeof(double), options.memory);
    const InvertedField inverse = invert_displacement_field(*step.field, kFieldInverseTolerance, options.threads);
    const InversionReport& report = inverse.report;
    const std::size_t folded = count_folded_voxels(*step.field, options.threads);
    const std::string folds = "the field folds (det(I + grad d) <= 0) at " + std::to_string(folded) + " voxel(s)";
    const double most = kUnconvergedShare * static_cast<double>(voxels);
    if (static_cast<double>(report.unconverged) > most || static_cast<double>(folded) > most) {
        throw FileError(file, context + ",inverse: the displacement field does not invert: the iteration misses 1e-6 mm at " +
                                  std::to_string(report.unconverged) + " of " + std::to_string(voxels) + " voxels and " + folds +
                                  " (at most 1% may)");
    }
    if (report.unconverged > 0) {
        owner.warnings.push_back(file.string() + ",inverse: the inverse misses 1e-6 mm at " + std::to_string(report.unconverged) + " of " +
                                 std::to_string(voxels) + " voxels; " + folds);
    }
    char residual[96];
    std::snprintf(residual, sizeof residual, "max %.2g mm, mean %.2g mm", report.max_residual, report.mean_residual);
    owner.notes.push_back(file.string() + ",inverse: fixed-point inverse at the field's " + std::to_string(voxels) +
                          " voxels, residual |phi(phi^-1(y)) - y| " + residual + " where it converged (tolerance 1e-6 mm), missed at " +
                          std::to_string(report.unconverged) + ", beyond the field's reach (inverse 0) at " + std::to_string(report.off_grid) +
                          "; " + folds);
    owner.buffers.push_back(inverse.vectors);
    step.field = inverse.field;
}

}  // namespace detail

TransformFile read_transform(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options) {
    const fs::path& file = spec.file;
    detail::require_readable_file(file);
    if (context.dimension != 2 && context.dimension != 3) {
        throw FileError(file, "transforms apply to 2-D and 3-D images, got " + std::to_string(context.dimension) + "-D");
    }
    const detail::TransformFormatEntry* format = spec.format == TransformFormat::Detect
                                                     ? detail::detect_transform_format(file, detail::read_transform_head(file))
                                                     : &detail::transform_format_entry(spec.format);
    // Many jobs of a batch share their transforms: read each once (shared_files.hpp). A format
    // defined through its images is read for each job's images.
    std::optional<std::string> key;
    if (!format || !format->uses_images) {
        key = detail::shared_file_key(file, "transform|" + std::string(format ? format->tag : "matrix") + "|" +
                                                std::to_string(context.dimension) + (spec.inverse ? "|inverse|" : "|forward|") +
                                                std::to_string(static_cast<int>(options.nifti_geometry)));
    }
    if (key) {
        if (auto hit = detail::shared_file_find(*key)) return std::any_cast<TransformFile>(*hit);
    }
    TransformFile result = format ? format->read(spec, context, options) : detail::read_undetected_matrix(spec, context, options);
    // An FSL warp field found among the ITK row's images is FSL's, and defined through the moving image.
    if (result.format == TransformFormat::Fsl) key.reset();
    if (result.format == TransformFormat::Detect) result.format = format ? format->format : TransformFormat::Lps;
    if (spec.inverse) {
        // (A o B)^-1 = B^-1 o A^-1: reverse the list and invert each step.
        std::reverse(result.steps.begin(), result.steps.end());
        for (auto& step : result.steps) detail::invert_step(file, step, result, options);
    }
    if (key) {
        std::size_t bytes = 4096;
        for (const auto& buffer : result.buffers) bytes += buffer ? buffer->nbytes() : 0;
        detail::shared_file_store(*key, result, bytes);
    }
    return result;
}

}  // namespace gridwarp::io
