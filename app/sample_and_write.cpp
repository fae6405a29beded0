// Sampling an input into an output file, a window of rows at a time.
#include "sample_and_write.hpp"
#include "messages.hpp"

#include <spdlog/spdlog.h>

#include <type_traits>

#include "gridwarp/io/atomic_file.hpp"

namespace gridwarp::cli {

namespace {

// Channels first .. first + count - 1 of a (N, C, ...) view, as a (N, count, ...) view of the same elements.
template <class Pointer>
BasicTensorView<Pointer> channel_range(const BasicTensorView<Pointer>& view, std::int64_t first, std::int64_t count) {
    using Byte = std::conditional_t<std::is_const_v<std::remove_pointer_t<Pointer>>, const std::uint8_t, std::uint8_t>;
    BasicTensorView<Pointer> result = view;
    result.data = static_cast<Byte*>(view.data) + first * view.strides[1] * static_cast<std::int64_t>(dtype_size(view.dtype));
    result.shape[1] = count;
    return result;
}

// Multiplies the window `pixels` (N, C, extent...) of a floating output, at `start` of the output
// grid, by `factors` (the grid's shape, float64) voxel by voxel.
void modulate_window(const TensorView& pixels, const Shape& start, const ConstTensorView& factors) {
    const std::size_t rank = start.size();
    std::int64_t points = 1;
    for (std::size_t a = 0; a < rank; ++a) points *= pixels.shape[2 + a];
    const auto* scale = static_cast<const double*>(factors.data);
    for (std::int64_t n = 0; n < pixels.shape[0]; ++n) {
        for (std::int64_t c = 0; c < pixels.shape[1]; ++c) {
            for (std::int64_t p = 0; p < points; ++p) {
                std::int64_t rest = p, at = 0, factor_at = 0;
                for (std::size_t a = rank; a-- > 0;) {  // innermost first
                    const std::int64_t i = rest % pixels.shape[2 + a];
                    rest /= pixels.shape[2 + a];
                    at += i * pixels.strides[2 + a];
                    factor_at += (start[a] + i) * factors.strides[a];
                }
                at += n * pixels.strides[0] + c * pixels.strides[1];
                if (pixels.dtype == DType::Float32) {
                    auto* value = static_cast<float*>(pixels.data) + at;
                    *value = static_cast<float>(static_cast<double>(*value) * scale[factor_at]);
                } else {
                    auto* value = static_cast<double*>(pixels.data) + at;
                    *value *= scale[factor_at];
                }
            }
        }
    }
}

// Samples with `sample` and writes, as write_sampled does, or into the output's image in memory,
// with the whole grid in one call (as write_sampled samples a format it does not stream).
void sample_to_output(const OutputArgument& output, io::Image description, const io::WriteOptions& write_options, int threads,
                      const io::WindowSampler& sample, const std::function<void()>& sampled, io::ChannelSampling channel_sampling) {
    if (!output.in_memory()) {
        io::write_sampled(output.path, std::move(description), write_options, threads, sample, sampled, channel_sampling);
        return;
    }
    io::Image& image = *output.result;
    image = std::move(description);
    image.allocate();
    sample(Shape(image.spatial.size(), 0), image.spatial, 0, image.nchw(), threads);
    if (sampled) sampled();
}

// Samples with `sample` and writes, logging "wrote FILE (...)".
void write_windows(const OutputArgument& output, io::Image description, const io::WriteOptions& write_options, int threads,
                   const io::WindowSampler& sample, CommandProgress* progress) {
    // (An output written a block at a time is sampled and written together: "sampling" to the end.)
    if (progress) progress->phase("sampling", 1, 3);
    const std::string summary = std::string(io::file_kind_name(description.kind)) + " " + std::string(dtype_name(description.dtype())) +
                                ", size " + image_size_text(description.spatial);
    sample_to_output(output, std::move(description), write_options, threads, sample, [&] {
        if (progress) progress->phase("writing", 2, 3);
    }, io::ChannelSampling::Together);
    if (progress) progress->finish();
    spdlog::info("wrote {} ({})", output.string(), summary);
}

}  // namespace

void sample_and_write(const OutputArgument& output, io::Image description, const io::WriteOptions& write_options,
                      const ConstTensorView& input, const PositionSource& positions, const SampleOptions& options,
                      CommandProgress* progress, const ConstTensorView* modulation) {
    const auto sample = [&](const Shape& start, const Shape& extent, std::int64_t first_channel, const TensorView& pixels, int threads) {
        SampleOptions window_options = options;
        window_options.threads = threads;
        const PositionWindow window(positions, start, extent);
        const ConstTensorView channels = channel_range(input, first_channel, pixels.shape[1]);
        if (pixels.dtype == input.dtype) {
            grid_sample(channels, window, pixels, window_options);
        } else {
            const Tensor sampled = grid_sample(channels, window, window_options);
            const Tensor converted = convert_to(sampled.view(), pixels.dtype);
            copy_elements(converted.view(), pixels);
        }
        if (modulation) modulate_window(pixels, start, *modulation);
    };
    write_windows(output, std::move(description), write_options, options.threads, sample, progress);
}

void copy_and_write(const OutputArgument& output, io::Image description, const io::WriteOptions& write_options,
                    const ConstTensorView& input, CommandProgress* progress) {
    const auto copy = [&](const Shape& start, const Shape& extent, std::int64_t first_channel, const TensorView& pixels, int) {
        ConstTensorView window = channel_range(input, first_channel, pixels.shape[1]);
        const auto* byte = static_cast<const std::uint8_t*>(window.data);
        for (std::size_t axis = 0; axis < start.size(); ++axis) {
            byte += start[axis] * window.strides[2 + axis] * static_cast<std::int64_t>(dtype_size(window.dtype));
            window.shape[2 + axis] = extent[axis];
        }
        window.data = byte;
        copy_elements(window, pixels);
    };
    write_windows(output, std::move(description), write_options, 1, copy, progress);
}

void shrink_and_write(const OutputArgument& output, io::Image description, const io::WriteOptions& write_options,
                      const ConstTensorView& input, const AxisAlignedMap& map, const std::vector<double>& factors,
                      const SampleOptions& options, CommandProgress* progress) {
    spdlog::debug("anti-aliasing on the output grid: {}", describe_antialias(factors, Shape(input.shape.begin() + 2, input.shape.end())));
    const auto sample = [&](const Shape& start, const Shape&, std::int64_t first_channel, const TensorView& pixels, int threads) {
        SampleOptions window_options = options;
        window_options.threads = threads;
        const ConstTensorView channels = channel_range(input, first_channel, pixels.shape[1]);
        if (pixels.dtype == input.dtype) {
            shrink_onto_grid(channels, map, factors, window_options, start, pixels);
            return;
        }
        Shape shape = pixels.shape;
        Tensor reduced(input.dtype, shape);
        shrink_onto_grid(channels, map, factors, window_options, start, reduced.view());
        copy_elements(convert_to(reduced.view(), pixels.dtype).view(), pixels);
    };
    write_windows(output, std::move(description), write_options, options.threads, sample, progress);
}

void sample_series_and_write(const OutputArgument& output, io::Image description, const io::WriteOptions& write_options,
                             const ConstTensorView& input, DType sample_type,
                             const std::vector<const PositionSource*>& volume_positions, const SampleOptions& options,
                             CommandProgress* progress, const ConstTensorView* modulation) {
    const std::int64_t volumes = input.shape[1];
    if (volume_positions.size() != 1 && static_cast<std::int64_t>(volume_positions.size()) != volumes) {
        throw std::logic_error("sample_series_and_write: one position source, or one per volume");
    }
    if (progress) progress->phase("sampling", 1, 3);
    const auto sample = [&](const Shape& start, const Shape& extent, std::int64_t first_channel, const TensorView& pixels, int threads) {
        SampleOptions window_options = options;
        window_options.threads = threads;
        for (std::int64_t v = first_channel; v < first_channel + pixels.shape[1]; ++v) {
            const PositionSource& positions = *volume_positions[volume_positions.size() == 1 ? 0 : static_cast<std::size_t>(v)];
            const PositionWindow window(positions, start, extent);
            ConstTensorView volume = channel_range(input, v, 1);
            Tensor converted_volume;
            if (volume.dtype != sample_type) {
                converted_volume = convert_to(volume, sample_type);
                volume = converted_volume.view();
            }
            const TensorView output = channel_range(pixels, v - first_channel, 1);
            if (output.dtype == sample_type) {
                grid_sample(volume, window, output, window_options);
            } else {
                const Tensor sampled = grid_sample(volume, window, window_options);
                copy_elements(convert_to(sampled.view(), output.dtype).view(), output);
            }
            if (modulation) modulate_window(output, start, *modulation);
        }
    };
    const std::string summary = std::string(io::file_kind_name(description.kind)) + " " + std::string(dtype_name(description.dtype())) +
                                ", " + std::to_string(volumes) + " volume(s), size " + image_size_text(description.spatial);
    sample_to_output(output, std::move(description), write_options, options.threads, sample, [&] {
        if (progress) progress->phase("writing", 2, 3);
    }, io::ChannelSampling::Apart);
    if (progress) progress->finish();
    spdlog::info("wrote {} ({})", output.string(), summary);
}

}  // namespace gridwarp::cli
