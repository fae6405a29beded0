// Per-volume transform lists: one transform for each volume of a 4-D series (head motion).
#include <algorithm>
#include <stdexcept>
#include <system_error>

#include "gridwarp/io/error.hpp"
#include "gridwarp/io/transform_io.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

namespace {

// The files of a folder that a list is made of, in name order: MCFLIRT's MAT_0000, MAT_0001, ...
// sort as numbered. Hidden files and subfolders are not part of it. Every other member must be a
// regular file inside the folder once links are resolved (the containment rule of detached
// headers, files/file_checks.hpp), checked before any is read.
std::vector<fs::path> list_elements(const fs::path& folder, const ReadOptions& options) {
    std::vector<fs::path> files;
    std::error_code error;
    fs::directory_iterator entries(folder, error);
    if (error) throw FileError(folder, "cannot list the folder: " + error.message());
    const fs::path real_folder = fs::weakly_canonical(folder, error);
    if (error) throw FileError(folder, "cannot resolve the folder: " + error.message());
    for (const fs::directory_entry& entry : entries) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || name.front() == '.') continue;
        std::error_code kind_error;
        if (entry.is_directory(kind_error)) continue;
        const fs::path real_member = fs::weakly_canonical(entry.path(), kind_error);
        if (!options.allow_outside_data_files && (kind_error || real_member.parent_path() != real_folder)) {
            throw FileError(folder, "its member " + name + " leads outside the folder (--allow-outside-data-files allows it)");
        }
        if (!fs::is_regular_file(fs::status(entry.path(), kind_error))) {
            throw FileError(folder, "its member " + name + " is not a regular file");
        }
        files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end(),
              [](const fs::path& a, const fs::path& b) { return a.filename().string() < b.filename().string(); });
    return files;
}

}  // namespace

std::vector<TransformFile> read_transform_series(const TransformSpec& spec, const TransformContext& context,
                                                 const ReadOptions& options) {
    TransformSpec element = spec;
    element.per_volume = false;
    std::vector<TransformFile> series;
    std::error_code error;
    const auto status = fs::status(spec.file, error);
    if (!fs::exists(status)) throw FileError(spec.file, "cannot open: no such file or folder");
    if (!fs::is_directory(status) && !fs::is_regular_file(status)) {
        throw FileError(spec.file, "not a regular file or a folder (a per-volume list is a file of transforms or a folder of them)");
    }
    if (fs::is_directory(status)) {
        for (const fs::path& file : list_elements(spec.file, options)) {
            element.file = file;
            try {
                series.push_back(read_transform(element, context, options));
            } catch (const FileError& e) {
                if (spec.format != TransformFormat::Detect) throw;
                // MCFLIRT's MAT_0000, ... are bare 4x4 text, which only a tag assigns to FSL.
                throw FileError(spec.file, std::string(e.what()) + " (a folder of MCFLIRT matrices: -t " + spec.file.string() +
                                               ",fsl,per-volume)");
            }
        }
        if (series.empty()) throw FileError(spec.file, "the folder holds no transform files (a per-volume list needs one per volume)");
        return series;
    }
    // 3dvolreg's .1D: a row per volume.
    const detail::TransformFormatEntry* format = spec.format != TransformFormat::Detect
                                                     ? &detail::transform_format_entry(spec.format)
                                                     : detail::detect_transform_format(spec.file, detail::read_transform_head(spec.file));
    if (format && format->format == TransformFormat::Afni) {
        for (const AffineMap& row : detail::read_afni_rows(spec.file)) {
            AffineMap map = detail::afni_row_to_world(row, context);
            try {
                if (spec.inverse) map = map.inverse();
            } catch (const std::invalid_argument& e) {
                throw FileError(spec.file, "row " + std::to_string(series.size() + 1) + ": " + e.what());
            }
            TransformFile one;
            one.steps.push_back(PointTransform{std::make_shared<const AffineMap>(std::move(map)), nullptr});
            one.format = TransformFormat::Afni;
            series.push_back(std::move(one));
        }
        return series;
    }
    // A file of N transforms: each is one volume's, not a step of one chain. Read forward, so that
    // ,inverse inverts each in its place instead of reversing the list.
    element.inverse = false;
    const TransformFile list = read_transform(element, context, options);
    for (const PointTransform& step : list.steps) {
        TransformFile one;
        one.steps.push_back(step);
        one.buffers = list.buffers;
        if (spec.inverse) detail::invert_step(spec.file, one.steps.front(), one, options, "transform " + std::to_string(series.size()) + ": ");
        series.push_back(std::move(one));
    }
    return series;
}

}  // namespace gridwarp::io
