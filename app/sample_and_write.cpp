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
                      CommandProgress* progress) {
    const auto sample = [&](const Shape& start, const Shape& extent, std::int64_t first_channel, const TensorView& pixels, int threads) {
        SampleOptions window_options = options;
        window_options.threads = threads;
        const PositionWindow window(positions, start, extent);
        const ConstTensorView channels = channel_range(input, first_channel, pixels.shape[1]);
        if (pixels.dtype == input.dtype) {
            grid_sample(channels, window, pixels, window_options);
            return;
        }
        const Tensor sampled = grid_sample(channels, window, window_options);
        const Tensor converted = convert_to(sampled.view(), pixels.dtype);
        copy_elements(converted.view(), pixels);
    };
    write_windows(output, std::move(description), write_options, options.threads, sample, progress);
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
                             CommandProgress* progress) {
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
