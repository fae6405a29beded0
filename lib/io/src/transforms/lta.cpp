// FreeSurfer's linear transform array (.lta), in the layout of utils/transform.cpp (LTAprint and
// readVolGeom): "type = T", "nxforms = 1", mean, sigma, "1 4 4" and the 4x4 matrix, then the
// "src volume info" and "dst volume info" blocks. src is the moving volume (mri_vol2vol --mov),
// dst the target (--targ), and the matrix maps src to dst:
//   LINEAR_VOX_TO_VOX (0):         dst voxel = M * src voxel
//   LINEAR_RAS_TO_RAS (1):         dst scanner RAS = M * src scanner RAS
//   LINEAR_PHYSVOX_TO_PHYSVOX (2): dst voxel * dst size = M * (src voxel * src size)
// A volume info's voxel-to-RAS matrix is FreeSurfer's MRIxfmCRS2XYZ: columns xras*xsize,
// yras*ysize, zras*zsize, and the centre voxel (width/2, height/2, depth/2) at cras.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "gridwarp/io/error.hpp"
#include "gridwarp/io/text_matrix.hpp"
#include "names.hpp"
#include "transforms/text_fields.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

enum LtaType { LinearVoxToVox = 0, LinearRasToRas = 1, LinearPhysvoxToPhysvox = 2, RegisterDat = 14 };

struct VolumeInfo {
    bool seen = false;
    bool valid = false;
    std::string filename;
    std::array<long long, 3> size{};  // width, height, depth
    std::array<double, 3> voxel_size{};
    std::array<std::array<double, 3>, 3> axes{};  // xras, yras, zras
    std::array<double, 3> centre{};               // cras
    unsigned fields = 0;                           // bits of the keys read
};

struct LtaFile {
    int type = -1;
    std::optional<std::array<double, 16>> matrix;
    VolumeInfo src, dst;
};

constexpr unsigned kVolume = 1, kVoxelSize = 2, kXras = 4, kYras = 8, kZras = 16, kCras = 32;
constexpr unsigned kAllGeometry = kVolume | kVoxelSize | kXras | kYras | kZras | kCras;

std::string joined(const std::vector<std::string_view>& words, std::size_t from) {
    std::string text;
    for (std::size_t i = from; i < words.size(); ++i) {
        if (!text.empty()) text += ' ';
        text.append(words[i]);
    }
    return text;
}

LtaFile parse_lta(std::string_view text, const fs::path& file) {
    LtaFile lta;
    TextLines lines(text);
    VolumeInfo* volume = nullptr;
    bool saw_nxforms = false;
    auto numbers = [&](const std::vector<std::string_view>& words, std::size_t from, std::size_t count, std::size_t line) {
        if (words.size() != from + count) {
            throw FileError(file, line_label(line) + ": expected " + std::to_string(count) + " numbers after '" +
                                      std::string(words[0]) + " ='");
        }
        std::array<double, 3> values{};
        for (std::size_t i = 0; i < count; ++i) values[i] = finite_number(words[from + i], file, line);
        return values;
    };
    std::string_view text_line;
    while (lines.next(text_line)) {
        const std::size_t line = lines.index();
        const std::vector<std::string_view> words = line_words(text_line);
        if (words.empty()) continue;
        const std::string_view key = words[0];
        const bool assignment = words.size() >= 2 && words[1] == "=";
        if (words.size() == 3 && key == "src" && words[1] == "volume" && words[2] == "info") {
            volume = &lta.src;
            volume->seen = true;
        } else if (words.size() == 3 && key == "dst" && words[1] == "volume" && words[2] == "info") {
            volume = &lta.dst;
            volume->seen = true;
        } else if (volume && assignment && key == "valid") {
            if (words.size() != 3) throw FileError(file, line_label(line) + ": expected 'valid = 0|1'");
            volume->valid = whole_number(words[2], file, line) == 1;
        } else if (volume && assignment && key == "filename") {
            volume->filename = joined(words, 2);
        } else if (volume && assignment && key == "volume") {
            const auto size = numbers(words, 2, 3, line);
            for (int i = 0; i < 3; ++i) {
                if (size[i] < 1 || size[i] > 1e6 || size[i] != std::floor(size[i])) {
                    throw FileError(file, line_label(line) + ": a volume's size must be whole numbers from 1 to 1000000");
                }
                volume->size[i] = static_cast<long long>(size[i]);
            }
            volume->fields |= kVolume;
        } else if (volume && assignment && key == "voxelsize") {
            volume->voxel_size = numbers(words, 2, 3, line);
            for (double s : volume->voxel_size) {
                if (!(s > 0)) throw FileError(file, line_label(line) + ": voxel sizes must be positive");
            }
            volume->fields |= kVoxelSize;
        } else if (volume && assignment && (key == "xras" || key == "yras" || key == "zras")) {
            const int axis = key[0] - 'x';
            volume->axes[axis] = numbers(words, 2, 3, line);
            volume->fields |= kXras << axis;
        } else if (volume && assignment && key == "cras") {
            volume->centre = numbers(words, 2, 3, line);
            volume->fields |= kCras;
        } else if (volume) {
            // subject and fscale (tkregister's) follow the volume infos; nothing here uses them.
            if (key != "subject" && key != "fscale") {
                throw FileError(file, line_label(line) + ": unexpected '" + std::string(text_line.substr(0, 60)) +
                                          "' in an LTA volume info block");
            }
        } else if (assignment && key == "type") {
            if (words.size() != 3) throw FileError(file, line_label(line) + ": expected 'type = N'");
            lta.type = static_cast<int>(std::max(-1LL, std::min(1000LL, whole_number(words[2], file, line))));
        } else if (assignment && key == "nxforms") {
            if (words.size() != 3) throw FileError(file, line_label(line) + ": expected 'nxforms = N'");
            const long long count = whole_number(words[2], file, line);
            if (count != 1) {
                throw FileError(file, line_label(line) + ": the LTA holds " + std::to_string(count) +
                                          " transforms; gridwarp reads LTA files with exactly one");
            }
            saw_nxforms = true;
        } else if (assignment && (key == "mean" || key == "sigma" || key == "label")) {
            // The transform's centre and width in FreeSurfer's multi-transform arrays: unused for one.
        } else if (words.size() == 3 && words[0] == "1" && words[1] == "4" && words[2] == "4") {
            if (lta.matrix) throw FileError(file, line_label(line) + ": a second matrix");
            std::array<double, 16> m{};
            std::size_t row = 0;
            while (row < 4) {
                std::string_view row_line;
                if (!lines.next(row_line)) throw FileError(file, "the file ends inside the 4x4 matrix");
                const std::size_t line = lines.index();
                const auto values = line_words(row_line);
                if (values.empty()) continue;
                if (values.size() != 4) {
                    throw FileError(file, line_label(line) + ": expected 4 numbers in row " + std::to_string(row + 1) +
                                              " of the matrix, found " + std::to_string(values.size()) + " words");
                }
                for (std::size_t c = 0; c < 4; ++c) m[row * 4 + c] = finite_number(values[c], file, line);
                ++row;
            }
            lta.matrix = m;
        } else {
            throw FileError(file, line_label(line) + ": unexpected '" + std::string(text_line.substr(0, 60)) +
                                      "' (not an LTA line)");
        }
    }
    if (lta.type < 0) throw FileError(file, "no 'type = N' line: not a FreeSurfer LTA file");
    if (!saw_nxforms) throw FileError(file, "no 'nxforms = 1' line: not a FreeSurfer LTA file");
    if (!lta.matrix) throw FileError(file, "no '1 4 4' matrix: the file is truncated or not an LTA file");
    const auto& m = *lta.matrix;
    if (!is_homogeneous_last_row(&m[12], 4)) throw FileError(file, "the last row of the LTA matrix must be 0 0 0 1 (within 1e-6)");
    for (const VolumeInfo* info : {&lta.src, &lta.dst}) {
        if (info->valid && (info->fields & kAllGeometry) != kAllGeometry) {
            throw FileError(file, std::string(info == &lta.src ? "src" : "dst") +
                                      " volume info says valid but lacks volume, voxelsize, xras, yras, zras or cras");
        }
    }
    return lta;
}

// 4x4 matrices as AffineMap (3-D): the homogeneous row is implied.
AffineMap affine_of(const std::array<double, 16>& m) {
    AffineMap map = AffineMap::identity(3);
    for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c) map.matrix[r * 3 + c] = m[r * 4 + c];
        map.offset[r] = m[r * 4 + 3];
    }
    return map;
}

// FreeSurfer's MRIxfmCRS2XYZ(vg, 0).
AffineMap voxel_to_ras(const VolumeInfo& info) {
    AffineMap map = AffineMap::identity(3);
    for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c) map.matrix[r * 3 + c] = info.axes[c][r] * info.voxel_size[c];
    }
    for (int r = 0; r < 3; ++r) {
        double centre_offset = 0;
        for (int c = 0; c < 3; ++c) centre_offset += map.matrix[r * 3 + c] * (static_cast<double>(info.size[c]) / 2.0);
        map.offset[r] = info.centre[r] - centre_offset;
    }
    return map;
}

AffineMap diagonal(const std::array<double, 3>& values) {
    AffineMap map = AffineMap::identity(3);
    for (int i = 0; i < 3; ++i) map.matrix[i * 3 + i] = values[i];
    return map;
}

// RAS <-> LPS: x and y change sign.
const AffineMap& ras_lps_flip() {
    static const AffineMap flip = diagonal({-1.0, -1.0, 1.0});
    return flip;
}

AffineMap inverse_or_throw(const AffineMap& map, const fs::path& file, const std::string& what) {
    try {
        return map.inverse();
    } catch (const std::invalid_argument&) {
        throw FileError(file, what + " is singular");
    }
}

// The image's voxel-to-scanner-RAS map, from its LPS geometry.
std::optional<AffineMap> image_voxel_to_ras(const Image* image) {
    if (!image || !image->geometry || image->geometry->dimension() != 3) return std::nullopt;
    const Geometry& g = *image->geometry;
    return ras_lps_flip().after(AffineMap::from_geometry(g.spacing, g.origin, g.direction));
}

std::string size_text(const std::array<long long, 3>& size) {
    return std::to_string(size[0]) + "x" + std::to_string(size[1]) + "x" + std::to_string(size[2]);
}

// Why `image` is not the grid `info` names, or nothing when it is (within float text precision).
std::optional<std::string> grid_difference(const VolumeInfo& info, const Image* image) {
    const auto image_map = image_voxel_to_ras(image);
    if (!info.valid || !image_map || image->spatial.size() != 3) return std::nullopt;
    const std::array<long long, 3> image_size = {image->spatial[2], image->spatial[1], image->spatial[0]};
    if (image_size != info.size) return "size " + size_text(info.size) + " vs " + size_text(image_size);
    const AffineMap named = voxel_to_ras(info);
    double largest = 0;
    for (int i = 0; i < 9; ++i) largest = std::max(largest, std::abs(named.matrix[i] - image_map->matrix[i]));
    for (int i = 0; i < 3; ++i) largest = std::max(largest, std::abs(named.offset[i] - image_map->offset[i]));
    if (largest <= 1e-3) return std::nullopt;
    std::ostringstream text;
    text << "voxel-to-RAS differs by up to " << largest << " mm";
    return text.str();
}

}  // namespace

bool detects_lta(const std::string& lowercase_name, std::string_view head) {
    if (ends_with(lowercase_name, ".lta")) return true;
    // By content: the two header lines every LTA starts with (after comments).
    bool type = false;
    TextLines lines(head);
    std::string_view line;
    while (lines.next(line)) {
        const auto words = line_words(line);
        if (words.empty()) continue;
        if (!type) {
            if (words.size() != 3 || words[0] != "type" || words[1] != "=") return false;
            type = true;
            continue;
        }
        return words.size() == 3 && words[0] == "nxforms" && words[1] == "=";
    }
    return false;
}

TransformFile read_lta(const TransformSpec& spec, const TransformContext& context, const ReadOptions&) {
    const fs::path& file = spec.file;
    if (context.dimension != 3) {
        throw FileError(file, "an LTA maps 3-D volumes; the images are " + std::to_string(context.dimension) + "-D");
    }
    const LtaFile lta = parse_lta(read_transform_text(file), file);
    const AffineMap matrix = affine_of(*lta.matrix);
    auto need_volume_infos = [&](const char* type_name) {
        if (!lta.src.valid || !lta.dst.valid) {
            throw FileError(file, std::string("a ") + type_name + " LTA needs valid src and dst volume info; " +
                                      (lta.src.valid ? "dst" : "src") + " is missing or marked invalid");
        }
    };
    AffineMap ras_to_ras;  // src scanner RAS -> dst scanner RAS
    switch (lta.type) {
        case LinearRasToRas:
            ras_to_ras = matrix;
            break;
        case LinearVoxToVox: {
            need_volume_infos("LINEAR_VOX_TO_VOX");
            const AffineMap src_ras_to_voxel = inverse_or_throw(voxel_to_ras(lta.src), file, "the src volume's voxel-to-RAS");
            ras_to_ras = voxel_to_ras(lta.dst).after(matrix).after(src_ras_to_voxel);
            break;
        }
        case LinearPhysvoxToPhysvox: {
            need_volume_infos("LINEAR_PHYSVOX_TO_PHYSVOX");
            // FreeSurfer's LTAchangeType: physvox = diag(dst size) * vox2vox * diag(1 / src size).
            const auto& ds = lta.dst.voxel_size;
            const AffineMap voxel_to_voxel =
                diagonal({1 / ds[0], 1 / ds[1], 1 / ds[2]}).after(matrix).after(diagonal(lta.src.voxel_size));
            const AffineMap src_ras_to_voxel = inverse_or_throw(voxel_to_ras(lta.src), file, "the src volume's voxel-to-RAS");
            ras_to_ras = voxel_to_ras(lta.dst).after(voxel_to_voxel).after(src_ras_to_voxel);
            break;
        }
        case RegisterDat:
            throw FileError(file, "LTA type 14 (REGISTER_DAT, a tkregister matrix) is not read here; convert it with "
                                  "lta_convert --inlta FILE --outlta NEW.lta --ltaras2ras");
        default:
            throw FileError(file, "LTA type " + std::to_string(lta.type) +
                                      " is not a linear transform gridwarp reads (0 LINEAR_VOX_TO_VOX, 1 LINEAR_RAS_TO_RAS, "
                                      "2 LINEAR_PHYSVOX_TO_PHYSVOX)");
    }
    // Reference (dst) LPS -> moving (src) LPS.
    const AffineMap dst_to_src = inverse_or_throw(ras_to_ras, file, "the LTA's RAS-to-RAS matrix");
    AffineMap map = ras_lps_flip().after(dst_to_src).after(ras_lps_flip());

    TransformFile result;
    PointTransform step;
    step.affine = std::make_shared<const AffineMap>(std::move(map));
    result.steps.push_back(std::move(step));

    // FreeSurfer applies an LTA to other grids through its RAS-to-RAS map, and so does gridwarp;
    // a grid that differs from the one the file names is most often the wrong image.
    std::string differences;
    if (const auto why = grid_difference(lta.src, context.acts_last ? context.moving : nullptr)) {
        differences += "src" + (lta.src.filename.empty() ? "" : " (" + lta.src.filename + ")") + " vs the moving image: " + *why;
    }
    if (const auto why = grid_difference(lta.dst, context.acts_first ? context.reference : nullptr)) {
        differences += std::string(differences.empty() ? "" : "; ") + "dst" +
                       (lta.dst.filename.empty() ? "" : " (" + lta.dst.filename + ")") + " vs the reference grid: " + *why;
    }
    if (!differences.empty()) {
        result.warnings.push_back(file.string() + ": the images differ from the volumes the LTA names (" + differences +
                                  "); its RAS-to-RAS map is applied to the images given");
    }
    return result;
}

}  // namespace gridwarp::io::detail
