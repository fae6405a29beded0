#include "gridwarp/io/reorient.hpp"

#include <cctype>
#include <cmath>
#include <stdexcept>

#include "gridwarp/io/nifti.hpp"

namespace gridwarp::io {

namespace {

using Matrix3 = std::array<double, 9>;  // row-major

Matrix3 inverse_transpose(const Matrix3& m) {
    const double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6]);
    if (det == 0 || !std::isfinite(det)) throw std::invalid_argument("the volume's direction is singular");
    // (m^-1)^T = cofactor(m) / det.
    return {(m[4] * m[8] - m[5] * m[7]) / det, (m[5] * m[6] - m[3] * m[8]) / det, (m[3] * m[7] - m[4] * m[6]) / det,
            (m[2] * m[7] - m[1] * m[8]) / det, (m[0] * m[8] - m[2] * m[6]) / det, (m[1] * m[6] - m[0] * m[7]) / det,
            (m[1] * m[5] - m[2] * m[4]) / det, (m[2] * m[3] - m[0] * m[5]) / det, (m[0] * m[4] - m[1] * m[3]) / det};
}

// For each voxel axis: the RAS world axis it runs along and whether it points the positive way.
struct AxisDirections {
    std::array<int, 3> world_axis{};
    std::array<bool, 3> positive{};
};

AxisDirections axis_directions(const Geometry& geometry) {
    if (geometry.dimension() != 3) throw std::invalid_argument("reorientation is for 3-D volumes");
    // The RAS direction (LPS with x and y negated); its polar factor by Newton's iteration, as
    // nibabel takes the SVD's u v^T, so that an oblique volume pairs axes as nibabel pairs them.
    Matrix3 rotation;
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) rotation[3 * i + j] = (i < 2 ? -1.0 : 1.0) * geometry.direction[3 * i + j];
    }
    for (int iteration = 0; iteration < 100; ++iteration) {
        const Matrix3 inverse = inverse_transpose(rotation);
        double change = 0;
        for (int k = 0; k < 9; ++k) {
            const double next = 0.5 * (rotation[k] + inverse[k]);
            change = std::max(change, std::abs(next - rotation[k]));
            rotation[k] = next;
        }
        if (change < 1e-15) break;
    }
    AxisDirections directions;
    std::array<bool, 3> world_taken{}, voxel_taken{};
    for (int pair = 0; pair < 3; ++pair) {
        int best_world = -1, best_voxel = -1;
        double best = -1;
        for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 3; ++j) {
                if (world_taken[i] || voxel_taken[j]) continue;
                if (std::abs(rotation[3 * i + j]) > best) best = std::abs(rotation[3 * i + j]), best_world = i, best_voxel = j;
            }
        }
        world_taken[best_world] = voxel_taken[best_voxel] = true;
        directions.world_axis[best_voxel] = best_world;
        directions.positive[best_voxel] = rotation[3 * best_world + best_voxel] > 0;
    }
    return directions;
}

constexpr char kPositiveLetter[3] = {'R', 'A', 'S'};
constexpr char kNegativeLetter[3] = {'L', 'P', 'I'};

}  // namespace

bool AxisReorder::identity() const {
    for (int k = 0; k < 3; ++k) {
        if (source_axis[k] != k || flipped[k]) return false;
    }
    return true;
}

std::string orientation_code(const Geometry& geometry) {
    const AxisDirections directions = axis_directions(geometry);
    std::string code;
    for (int j = 0; j < 3; ++j) code += directions.positive[j] ? kPositiveLetter[directions.world_axis[j]] : kNegativeLetter[directions.world_axis[j]];
    return code;
}

AxisReorder reorder_to(const Geometry& geometry, const std::string& code) {
    AxisDirections target;
    std::array<bool, 3> named{};
    bool valid = code.size() == 3;
    for (std::size_t k = 0; valid && k < 3; ++k) {
        const char letter = static_cast<char>(std::toupper(static_cast<unsigned char>(code[k])));
        int axis = -1;
        for (int a = 0; a < 3; ++a) {
            if (letter == kPositiveLetter[a] || letter == kNegativeLetter[a]) axis = a;
        }
        valid = axis >= 0 && !named[static_cast<std::size_t>(axis)];
        if (!valid) break;
        named[static_cast<std::size_t>(axis)] = true;
        target.world_axis[k] = axis;
        target.positive[k] = letter == kPositiveLetter[axis];
    }
    if (!valid) {
        throw std::invalid_argument("'" + code + "' is not an orientation code: three letters, one of R/L, one of A/P and one of S/I "
                                    "(RAS, LPS, LIA, ...)");
    }
    const AxisDirections source = axis_directions(geometry);
    AxisReorder reorder;
    for (int k = 0; k < 3; ++k) {
        for (int j = 0; j < 3; ++j) {
            if (source.world_axis[j] != target.world_axis[k]) continue;
            reorder.source_axis[k] = j;
            reorder.flipped[k] = source.positive[j] != target.positive[k];
        }
    }
    return reorder;
}

void reorient_nifti_header(NiftiHeader& header, const AxisReorder& reorder) {
    const std::array<std::int64_t, 3> old_dims{header.dim[1], header.dim[2], header.dim[3]};
    const std::array<double, 3> old_pixdim{header.pixdim[1], header.pixdim[2], header.pixdim[3]};
    // old index = F new index + c; a transform M old + t becomes (M F) new + (M c + t).
    auto reordered = [&](const std::array<double, 12>& m) {
        std::array<double, 12> out{};
        for (int i = 0; i < 3; ++i) {
            out[4 * i + 3] = m[4 * i + 3];
            for (int k = 0; k < 3; ++k) {
                const int j = reorder.source_axis[k];
                out[4 * i + k] = reorder.flipped[k] ? -m[4 * i + j] : m[4 * i + j];
                if (reorder.flipped[k]) out[4 * i + 3] += m[4 * i + j] * static_cast<double>(old_dims[j] - 1);
            }
        }
        return out;
    };
    const std::array<double, 12> qform = nifti_qform_matrix(header);
    header.srow = reordered(header.srow);
    for (int k = 0; k < 3; ++k) {
        header.dim[k + 1] = old_dims[reorder.source_axis[k]];
        header.pixdim[k + 1] = old_pixdim[reorder.source_axis[k]];
    }
    if (header.qform_code > 0) set_nifti_qform(header, reordered(qform));
    // dim_info: frequency, phase and slice axes (1-based, 0: none) in bits 0-1, 2-3, 4-5.
    auto new_axis = [&](int old_axis) {  // 1-based both
        if (old_axis == 0) return 0;
        for (int k = 0; k < 3; ++k) {
            if (reorder.source_axis[k] == old_axis - 1) return k + 1;
        }
        return 0;
    };
    const int frequency = header.dim_info & 3, phase = (header.dim_info >> 2) & 3, slice = (header.dim_info >> 4) & 3;
    header.dim_info = static_cast<std::uint8_t>(new_axis(frequency) | (new_axis(phase) << 2) | (new_axis(slice) << 4));
    const int new_slice = new_axis(slice);
    if (new_slice > 0 && reorder.flipped[static_cast<std::size_t>(new_slice - 1)]) {
        // The slices in the other order: sequential and alternating orders trade increasing for decreasing.
        const std::int64_t last = header.dim[new_slice] - 1;
        const std::int64_t start = header.slice_start, end = header.slice_end;
        if (end > start) {
            header.slice_start = last - end;
            header.slice_end = last - start;
        }
        static constexpr int kFlippedCode[7] = {0, 2, 1, 4, 3, 6, 5};
        if (header.slice_code > 0 && header.slice_code <= 6) header.slice_code = kFlippedCode[header.slice_code];
    }
}

Image reoriented(const Image& image, const AxisReorder& reorder) {
    if (image.spatial.size() != 3 || !image.geometry) throw std::invalid_argument("reorientation is for 3-D volumes with a geometry");
    if (image.batch != 1) throw std::invalid_argument("reorientation is for one volume (or a series), not a batch");
    const Geometry& geometry = *image.geometry;
    Shape spatial = image.spatial;  // outermost first: z, y, x
    for (int k = 0; k < 3; ++k) spatial[2 - static_cast<std::size_t>(k)] = image.spatial[2 - static_cast<std::size_t>(reorder.source_axis[k])];
    Image result = Image::allocate_like(image, spatial);
    result.channel_order = image.channel_order;
    // Spatial axes in the buffer: interleaved (D, H, W, C), planar (C, D, H, W) after N = 1.
    const std::size_t first_spatial = image.layout == ChannelLayout::Interleaved ? 0 : image.pixels.shape().size() - 3;
    auto position = [&](int axis) { return first_spatial + 2 - static_cast<std::size_t>(axis); };  // x is innermost
    const ConstTensorView source = image.pixels.view();
    Shape shape = source.shape;
    Shape strides = source.strides;
    const auto* base = static_cast<const std::uint8_t*>(source.data);
    std::int64_t offset = 0;  // elements
    for (int k = 0; k < 3; ++k) {
        const std::size_t from = position(reorder.source_axis[k]);
        shape[position(k)] = source.shape[from];
        strides[position(k)] = reorder.flipped[k] ? -source.strides[from] : source.strides[from];
        if (reorder.flipped[k]) offset += (source.shape[from] - 1) * source.strides[from];
    }
    const ConstTensorView moved(source.dtype, base + offset * static_cast<std::int64_t>(dtype_size(source.dtype)), shape, strides);
    if (result.pixels.shape() != shape) throw std::logic_error("reoriented: the output's storage shape is not the permuted one");
    copy_elements(moved, result.pixels.view());
    Geometry moved_geometry = geometry;
    std::array<double, 3> corner{};  // the input index of the output's first voxel
    for (int k = 0; k < 3; ++k) {
        const int j = reorder.source_axis[k];
        moved_geometry.spacing[static_cast<std::size_t>(k)] = geometry.spacing[static_cast<std::size_t>(j)];
        for (int i = 0; i < 3; ++i) {
            const double column = geometry.direction[static_cast<std::size_t>(3 * i + j)];
            moved_geometry.direction[static_cast<std::size_t>(3 * i + k)] = reorder.flipped[k] ? -column : column;
        }
        if (reorder.flipped[k]) corner[static_cast<std::size_t>(j)] = static_cast<double>(image.spatial[2 - static_cast<std::size_t>(j)] - 1);
    }
    for (int i = 0; i < 3; ++i) {
        double origin = geometry.origin[static_cast<std::size_t>(i)];
        for (int j = 0; j < 3; ++j) {
            origin += geometry.direction[static_cast<std::size_t>(3 * i + j)] * geometry.spacing[static_cast<std::size_t>(j)] * corner[static_cast<std::size_t>(j)];
        }
        moved_geometry.origin[static_cast<std::size_t>(i)] = origin;
    }
    result.geometry = moved_geometry;
    if (image.nifti) {
        auto header = std::make_shared<NiftiHeader>(*image.nifti);
        reorient_nifti_header(*header, reorder);
        result.nifti = std::move(header);
    }
    return result;
}

}  // namespace gridwarp::io
