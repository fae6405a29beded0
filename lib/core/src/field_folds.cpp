// Where a displacement field folds: the sign of det(I + grad d) at each of its voxels.
#include <omp.h>

#include <algorithm>

#include "gridwarp/physical.hpp"

namespace gridwarp {

std::size_t count_folded_voxels(const DisplacementField& field, int threads) {
    const std::size_t d = field.dimension();
    const ConstTensorView& vectors = field.vectors();
    if (d < 2 || d > 3) return 0;
    const AffineMap to_index = field.index_to_point().inverse();  // d(index)/d(point) = its matrix
    std::int64_t extent[3] = {1, 1, 1};  // innermost-first
    for (std::size_t a = 0; a < d; ++a) extent[a] = vectors.shape[d - 1 - a];
    const std::int64_t voxels = extent[0] * extent[1] * extent[2];
    auto component = [&](std::int64_t x, std::int64_t y, std::int64_t z, std::size_t k) {
        const std::int64_t at = x * vectors.strides[d - 1] + y * vectors.strides[d - 2] + (d == 3 ? z * vectors.strides[0] : 0) +
                                static_cast<std::int64_t>(k) * vectors.strides[d];
        return vectors.dtype == DType::Float32 ? static_cast<double>(vectors.typed<float>()[at]) : vectors.typed<double>()[at];
    };
    std::size_t folded = 0;
#pragma omp parallel for reduction(+ : folded) schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads()) if (voxels > 32768)
    for (std::int64_t v = 0; v < voxels; ++v) {
        const std::int64_t index[3] = {v % extent[0], (v / extent[0]) % extent[1], v / (extent[0] * extent[1])};
        // by_index[k][a]: d(component k) / d(index a).
        double by_index[3][3] = {};
        for (std::size_t a = 0; a < d; ++a) {
            if (extent[a] < 2) continue;
            std::int64_t ahead[3] = {index[0], index[1], index[2]}, behind[3] = {index[0], index[1], index[2]};
            ahead[a] = std::min(index[a] + 1, extent[a] - 1);
            behind[a] = std::max<std::int64_t>(index[a] - 1, 0);
            const double step = static_cast<double>(ahead[a] - behind[a]);
            for (std::size_t k = 0; k < d; ++k) {
                by_index[k][a] = (component(ahead[0], ahead[1], ahead[2], k) - component(behind[0], behind[1], behind[2], k)) / step;
            }
        }
        double jacobian[9];
        for (std::size_t k = 0; k < d; ++k) {
            for (std::size_t j = 0; j < d; ++j) {
                double value = k == j ? 1.0 : 0.0;
                for (std::size_t a = 0; a < d; ++a) value += by_index[k][a] * to_index.matrix[a * d + j];
                jacobian[k * d + j] = value;
            }
        }
        const double det = d == 2 ? jacobian[0] * jacobian[3] - jacobian[1] * jacobian[2]
                                  : jacobian[0] * (jacobian[4] * jacobian[8] - jacobian[5] * jacobian[7]) -
                                        jacobian[1] * (jacobian[3] * jacobian[8] - jacobian[5] * jacobian[6]) +
                                        jacobian[2] * (jacobian[3] * jacobian[7] - jacobian[4] * jacobian[6]);
        if (det <= 0) ++folded;
    }
    return folded;
}

}  // namespace gridwarp
