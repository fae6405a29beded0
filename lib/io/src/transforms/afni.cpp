// AFNI affine matrices (.aff12.1D), as 3dAllineate and 3dvolreg write them with -1Dmatrix_save:
// '#' comment lines, then one row of 12 numbers per volume, the 3x4 matrix row by row. Their
// help text: "the coordinate transformation from base to source DICOM coordinates", i.e.
// Xsource = M Xbase, in AFNI's DICOM (RAI) order, which is LPS. The base is the reference grid,
// the source the moving image: a row is already gridwarp's reference-to-moving LPS map.
//
// AFNI's coordinates of an oblique dataset are not its NIfTI world coordinates: AFNI stores the
// grid as the nearest axis-aligned one (ijk_to_dicom, "cardinal"), with the grid's first voxel at
// the same place (thd_niftiread.c: origin from the matrix's offset, orientation from the nearest
// axes, spacing from the voxel sizes), and computes with that grid unless told to deoblique.
// A matrix of oblique images is therefore read between the images' cardinal grids.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>

#include "gridwarp/io/error.hpp"
#include "names.hpp"
#include "transforms/text_fields.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

// The signed permutation nearest to a 3x3 direction matrix (row-major, columns are the axes):
// the axis-aligned grid AFNI puts in place of an oblique one.
std::array<double, 9> nearest_axes(const std::vector<double>& direction) {
    static constexpr std::array<std::array<int, 3>, 6> kPermutations = {
        {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}};
    double best_score = -1;
    std::array<double, 9> best{};
    for (const auto& rows : kPermutations) {  // column c points along world axis rows[c]
        double score = 0;
        for (int c = 0; c < 3; ++c) score += std::abs(direction[rows[c] * 3 + c]);
        if (score > best_score) {
            best_score = score;
            best.fill(0);
            for (int c = 0; c < 3; ++c) best[rows[c] * 3 + c] = direction[rows[c] * 3 + c] < 0 ? -1.0 : 1.0;
        }
    }
    return best;
}

// Maps from an image's world (LPS) to AFNI's coordinates of it and back, or nothing when the
// image lies along the axes and the two are the same.
struct CardinalGrid {
    AffineMap world_to_afni, afni_to_world;
};

std::optional<CardinalGrid> cardinal_grid(const Image* image) {
    if (!image || !image->geometry || image->geometry->dimension() != 3) return std::nullopt;
    const Geometry& g = *image->geometry;
    const std::array<double, 9> axes = nearest_axes(g.direction);
    double departure = 0;
    for (int i = 0; i < 9; ++i) departure = std::max(departure, std::abs(axes[i] - g.direction[i]));
    if (departure < 1e-6) return std::nullopt;
    const AffineMap real = AffineMap::from_geometry(g.spacing, g.origin, g.direction);
    const AffineMap cardinal = AffineMap::from_geometry(g.spacing, g.origin, std::vector<double>(axes.begin(), axes.end()));
    return CardinalGrid{cardinal.after(real.inverse()), real.after(cardinal.inverse())};
}

}  // namespace

bool detects_afni_matrix(const std::string& lowercase_name, std::string_view head) {
    if (ends_with(lowercase_name, ".aff12.1d")) return true;
    if (!ends_with(lowercase_name, ".1d")) return false;
    // Another .1D (a motion-parameter or stimulus file) is a transform only with 12 columns.
    TextLines lines(head);
    std::string_view line;
    while (lines.next(line)) {
        const auto words = line_words(line);
        if (!words.empty()) return words.size() == 12;
    }
    return false;
}

std::vector<AffineMap> read_afni_rows(const fs::path& file) {
    // More volumes than any series holds: a list this long is not a 3dvolreg file.
    constexpr std::size_t kMaxRows = 100000;
    const std::string text = read_transform_text(file);
    std::vector<AffineMap> rows;
    TextLines lines(text);
    std::string_view text_line;
    while (lines.next(text_line)) {
        const std::size_t line = lines.index();
        const auto words = line_words(text_line);
        if (words.empty()) continue;
        if (words.size() != 12) {
            throw FileError(file, line_label(line) + ": expected 12 numbers (a 3x4 matrix row by row), found " +
                                      (words.size() > kMaxLineWords ? "more than " + std::to_string(kMaxLineWords)
                                                                    : std::to_string(words.size())) +
                                      " words");
        }
        if (rows.size() == kMaxRows) throw FileError(file, "holds more than " + std::to_string(kMaxRows) + " matrix rows");
        AffineMap map = AffineMap::identity(3);
        for (int r = 0; r < 3; ++r) {
            for (int c = 0; c < 3; ++c) map.matrix[r * 3 + c] = finite_number(words[r * 4 + c], file, line);
            map.offset[r] = finite_number(words[r * 4 + 3], file, line);
        }
        rows.push_back(std::move(map));
    }
    if (rows.empty()) throw FileError(file, "no matrix rows (expected lines of 12 numbers)");
    return rows;
}

AffineMap afni_row_from_world(const AffineMap& world, const TransformContext& context) {
    AffineMap row = world;
    if (const auto reference = cardinal_grid(context.reference)) row = row.after(reference->afni_to_world);
    if (const auto moving = cardinal_grid(context.moving)) row = moving->world_to_afni.after(row);
    return row;
}

AffineMap afni_row_to_world(const AffineMap& row, const TransformContext& context) {
    AffineMap map = row;
    if (const auto reference = cardinal_grid(context.reference)) map = map.after(reference->world_to_afni);
    if (const auto moving = cardinal_grid(context.moving)) map = moving->afni_to_world.after(map);
    return map;
}

TransformFile read_afni_matrix(const TransformSpec& spec, const TransformContext& context, const ReadOptions&) {
    const fs::path& file = spec.file;
    if (context.dimension != 3) {
        throw FileError(file, "an AFNI matrix maps 3-D volumes; the images are " + std::to_string(context.dimension) + "-D");
    }
    const std::vector<AffineMap> rows = read_afni_rows(file);
    if (rows.size() > 1) {
        throw FileError(file, "holds " + std::to_string(rows.size()) +
                                  " matrices, one per volume as 3dvolreg and 3dAllineate write them for a series: "
                                  "give it as FILE,per-volume to a 4-D input, or a file of one row for one transform");
    }
    try {
        AffineMap map = afni_row_to_world(rows.front(), context);
        TransformFile result;
        PointTransform step;
        step.affine = std::make_shared<const AffineMap>(std::move(map));
        result.steps.push_back(std::move(step));
        return result;
    } catch (const std::invalid_argument& e) {
        throw FileError(file, std::string("an image's grid is singular: ") + e.what());
    }
}

}  // namespace gridwarp::io::detail
