// The one-line warning for an integer image that looks like a label map, sampled by a kind that
// makes values between its labels (linear, cubic, B-splines, sincs, Gaussian).
#include <spdlog/spdlog.h>

#include <cstdint>
#include <unordered_set>

#include "cli_common.hpp"
#include "messages.hpp"
#include "gridwarp/interpolation.hpp"

namespace gridwarp::cli {
namespace {

// A label map has few distinct values, and most voxels equal their neighbour along x.
constexpr std::size_t kMostLabels = 1000;
constexpr double kLeastUniformShare = 0.8;
constexpr std::int64_t kMostPairs = std::int64_t{1} << 20;  // a sample of rows beyond this
constexpr std::int64_t kLeastPairs = 64;

struct LabelEvidence {
    std::size_t distinct = 0;
    bool label_map = false;
};

// Channel 0 of the first image, rows along the innermost axis, evenly spaced rows when there are
// more pairs than kMostPairs; stops as soon as the answer is no.
template <class T>
LabelEvidence gather(const ConstTensorView& view) {
    LabelEvidence evidence;
    const int rank = static_cast<int>(view.rank());
    const std::int64_t width = view.shape[static_cast<std::size_t>(rank - 1)];
    std::int64_t rows = 1;
    for (int axis = 2; axis < rank - 1; ++axis) rows *= view.shape[static_cast<std::size_t>(axis)];
    if (width < 2 || rows * (width - 1) < kLeastPairs) return evidence;
    const std::int64_t row_step = std::max<std::int64_t>(1, rows * (width - 1) / kMostPairs);
    const T* data = view.typed<T>();
    std::unordered_set<std::int64_t> values;
    std::int64_t pairs = 0;
    std::int64_t uniform = 0;
    for (std::int64_t row = 0; row < rows; row += row_step) {
        std::int64_t offset = 0;
        for (std::int64_t rest = row, axis = rank - 2; axis >= 2; --axis) {
            const auto extent = view.shape[static_cast<std::size_t>(axis)];
            offset += (rest % extent) * view.strides[static_cast<std::size_t>(axis)];
            rest /= extent;
        }
        const T* line = data + offset;
        const std::int64_t step = view.strides[static_cast<std::size_t>(rank - 1)];
        for (std::int64_t x = 0; x < width; ++x) {
            const T value = line[x * step];
            if (x > 0) {
                ++pairs;
                if (value == line[(x - 1) * step]) {
                    ++uniform;
                    continue;
                }
            }
            values.insert(static_cast<std::int64_t>(value));
            if (values.size() > kMostLabels) return evidence;
        }
        // A photo or a scan shows itself within a few rows: most neighbours differ.
        if (pairs >= 65536 && uniform < pairs / 2) return evidence;
    }
    evidence.distinct = values.size();
    evidence.label_map = evidence.distinct >= 2 && static_cast<double>(uniform) >= kLeastUniformShare * static_cast<double>(pairs);
    return evidence;
}

}  // namespace

void warn_if_label_map(const std::filesystem::path& file, const io::Image& image, const SampleOptions& options) {
    const bool keeps_values = interpolation_kind(options.mode).keeps_values || options.generic_label ||
                              (options.mode == Interpolation::BSpline && options.spline_order == 0);
    const DType type = image.dtype();
    if (keeps_values || image.channels != 1 || is_floating(type) || type == DType::Bool || type == DType::String ||
        is_complex(type) || image.pixels.numel() == 0) {
        return;
    }
    const ConstTensorView view = image.nchw();
    const LabelEvidence evidence = visit_dtype(type, [&](auto tag) -> LabelEvidence {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            return gather<T>(view);
        } else {
            return {};
        }
    });
    if (!evidence.label_map) return;
    spdlog::warn("{}: looks like a label map ({} distinct values in uniform regions); {} interpolation makes values "
                 "between labels: --mode nearest or GenericLabel keeps them",
                 escape_control_characters(file.string()), evidence.distinct, interpolation_name(options.mode));
}

}  // namespace gridwarp::cli
