#include <algorithm>
#include <fstream>

#include "gridwarp/io/error.hpp"
#include "gridwarp/io/text_matrix.hpp"
#include "names.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

const std::vector<TransformFormatEntry>& transform_format_table() {
    // ITK first: its text header and binary .mat are unambiguous, and its .txt/.mat names overlap
    // with the others'.
    static const std::vector<TransformFormatEntry> table = {
        {.format = TransformFormat::Itk, .tag = "itk", .detects = detects_itk, .read = read_itk, .write_field = itk_field_layout},
        {.format = TransformFormat::Elastix, .tag = "elastix", .detects = detects_elastix, .read = read_elastix},
        {.format = TransformFormat::Fsl, .tag = "fsl", .detects = detects_fsl_matrix, .read = read_fsl_matrix, .uses_images = true,
         .write_field = fsl_field_layout},
        {.format = TransformFormat::Lta, .tag = "lta", .detects = detects_lta, .read = read_lta, .uses_images = true},
        {.format = TransformFormat::Afni, .tag = "afni", .detects = detects_afni_matrix, .read = read_afni_matrix, .uses_images = true},
        {.format = TransformFormat::NiftyReg, .tag = "niftyreg", .read = read_niftyreg_matrix},
        {.format = TransformFormat::Ras, .tag = "ras", .read = read_ras_matrix},
        {.format = TransformFormat::Lps, .tag = "lps", .read = read_lps_matrix},
        {.format = TransformFormat::Mrtrix, .tag = "mrtrix", .read = read_mrtrix_field, .write_field = mrtrix_field_layout},
        {.format = TransformFormat::Spm, .tag = "spm", .read = read_spm_field, .write_field = spm_field_layout},
        {.format = TransformFormat::World, .tag = "world", .read = read_world_field, .write_field = world_field_layout},
    };
    return table;
}

const TransformFormatEntry& transform_format_entry(TransformFormat format) {
    for (const auto& entry : transform_format_table()) {
        if (entry.format == format) return entry;
    }
    throw std::logic_error("no transform format row for " + std::to_string(static_cast<int>(format)));
}

const TransformFormatEntry* detect_transform_format(const fs::path& file, std::string_view head) {
    const std::string name = lowercase_filename(file);
    for (const auto& entry : transform_format_table()) {
        if (entry.detects && entry.detects(name, head)) return &entry;
    }
    return nullptr;
}

std::string read_transform_head(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::string head(512, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    return head;
}

TransformFile single_affine(AffineMap map) {
    TransformFile result;
    PointTransform step;
    step.affine = std::make_shared<const AffineMap>(std::move(map));
    result.steps.push_back(std::move(step));
    return result;
}

AffineMap homogeneous_matrix(const TextMatrix& m, std::size_t dimension, bool allow_short, const fs::path& file) {
    const std::size_t d = dimension;
    if (m.columns != d + 1 || (m.rows != d + 1 && !(allow_short && m.rows == d))) {
        const std::string full = std::to_string(d + 1) + "x" + std::to_string(d + 1);
        throw FileError(file, "the matrix is " + std::to_string(m.rows) + "x" + std::to_string(m.columns) + ", expected " + full +
                                  (allow_short ? " (or " + std::to_string(d) + "x" + std::to_string(d + 1) + ")" : "") + " for " +
                                  std::to_string(d) + "-D images");
    }
    if (m.rows == d + 1) {
        if (!is_homogeneous_last_row(&m.values[d * (d + 1)], d + 1)) {
            throw FileError(file, "the last row of a homogeneous matrix must be 0 ... 0 1 (within 1e-6)");
        }
    }
    AffineMap map = AffineMap::identity(d);
    for (std::size_t i = 0; i < d; ++i) {
        for (std::size_t j = 0; j < d; ++j) map.matrix[i * d + j] = m.values[i * (d + 1) + j];
        map.offset[i] = m.values[i * (d + 1) + d];
    }
    return map;
}

AffineMap ras_to_lps(const AffineMap& ras) {
    // LPS = S RAS with S = diag(-1, -1, 1) (diag(-1, -1) in 2-D), its own inverse: S M S.
    const std::size_t d = ras.dimension;
    auto sign = [](std::size_t axis) { return axis < 2 ? -1.0 : 1.0; };
    AffineMap lps = ras;
    for (std::size_t i = 0; i < d; ++i) {
        for (std::size_t j = 0; j < d; ++j) lps.matrix[i * d + j] = sign(i) * ras.matrix[i * d + j] * sign(j);
        lps.offset[i] = sign(i) * ras.offset[i];
    }
    return lps;
}

std::string transform_tag_choices() {
    // Documentation order: the package formats, then the plain conventions.
    return "fsl, lta, afni, niftyreg, itk, elastix, mrtrix, spm, world, ras or lps";
}

bool looks_like_text(std::string_view bytes) {
    return std::all_of(bytes.begin(), bytes.end(),
                       [](unsigned char c) { return c == '\n' || c == '\r' || c == '\t' || (c >= 32 && c < 127); });
}

}  // namespace gridwarp::io::detail
