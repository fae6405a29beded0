// Sampling a raster larger than memory a tile of the output at a time.
#include "tiled_sampling.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <cctype>
#include <cmath>
#include <thread>
#include <vector>

#include "cli_common.hpp"
#include "gridwarp/antialias.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::cli {

void add_tiling_options(CLI::App& command, TilingFlags& flags) {
    command.add_option("--by-tiles", flags.by_tiles,
                       "Sample a tiled image a tile at a time, within --working-memory: auto (where the input and output pass it), "
                       "always or never")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "always", "never"}));
    command.add_option("--working-memory", flags.working_memory,
                       "Memory for input tiles and work in flight when sampling by tiles: a byte count or 512M, 4G (powers of 1024)")
        ->transform(CLI::AsSizeValue(false).description(""))
        ->type_name("BYTES")
        ->default_str("1G");
    command.add_option("--tiles", flags.tiles,
                       "Write only the K-th of N shares of the output's tiles (K from 0), or slurm (this array task's share), into "
                       "one OME-Zarr store that N runs fill, at once or one after another")
        ->type_name("K/N");
    command.add_flag("--resume", flags.resume, "Go on with a stopped run's OME-Zarr output: tiles already written are kept");
}

std::unique_ptr<io::TileSource> open_input_tiles(const ImageArgument& input, const OutputArgument& output, const TilingFlags& flags,
                                                 const io::ReadOptions& options) {
    const std::string required = !flags.tiles.empty() ? "--tiles" : flags.resume ? "--resume" : flags.by_tiles == "always" ? "--by-tiles always" : "";
    if (flags.in_place()) {
        if (!flags.tiles.empty()) parse_share(flags.tiles, "--tiles");
        if (flags.by_tiles == "never") throw std::invalid_argument(required + ": the output is written by tiles (not --by-tiles never)");
        if (output.in_memory() || !io::writes_tile_shares(output.path)) {
            throw std::invalid_argument(required + ": " + output.string() + " is not written in shares (write an OME-Zarr store, .zarr)");
        }
    }
    if (flags.by_tiles == "never") return nullptr;
    const bool always = !required.empty();
    if (output.in_memory() || !io::writes_tiles(output.path)) {
        if (always) throw std::invalid_argument(required + ": " + output.string() + " is not written by tiles (write a .tif or .zarr)");
        return nullptr;
    }
    if (input.in_memory()) {
        if (always) throw std::invalid_argument(required + ": the input is in memory, not read by tiles");
        return nullptr;
    }
    // A raw .nii read into a .nii or .npy is sampled through both memory maps whole, which is faster
    // than by tiles and needs no more memory than the kernel gives it.
    const auto mapped = [](const std::filesystem::path& file) {
        std::string name = file.filename().string();
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        return name.ends_with(".nii") || name.ends_with(".npy");
    };
    if (!always && mapped(input.path) && mapped(output.path)) return nullptr;
    std::unique_ptr<io::TileSource> tiles = io::open_tile_source(input.path, options);
    std::error_code error;
    // A missing input is reported by the reader, as for any command.
    if (!tiles && always && std::filesystem::exists(input.path, error)) {
        throw std::invalid_argument(required + ": " + input.string() +
                                    " is not read by tiles (an OME-Zarr store; an uncompressed .nii of one scalar image, values unscaled; or a "
                                    "TIFF of one page, 8 bits or wider, no orientation to apply)");
    }
    if (tiles && flags.working_memory < (std::uint64_t{16} << 20)) {
        throw std::invalid_argument("--working-memory: at least 16M, got " + std::to_string(flags.working_memory));
    }
    return tiles;
}

namespace {

// Whether the input and an output of `output_spatial` in its type take more than `working_memory`.
bool passes_working_memory(const io::TileLayout& layout, const Shape& output_spatial, std::uint64_t working_memory) {
    const auto bytes = [&](const Shape& spatial) {
        unsigned __int128 total = static_cast<std::uint64_t>(layout.channels) * dtype_size(layout.dtype);
        for (const auto extent : spatial) total *= static_cast<std::uint64_t>(extent);
        return total;
    };
    return bytes(layout.spatial) + bytes(output_spatial) > working_memory;
}

}  // namespace

bool samples_by_tiles(const io::TileSource& tiles, const TilingFlags& flags, const SampleOptions& options,
                      DType output_type, const PositionSource& positions) {
    const Shape& output_spatial = positions.output_shape();
    const io::TileLayout& layout = tiles.layout();
    const std::string required = !flags.tiles.empty() ? "--tiles" : flags.resume ? "--resume" : "--by-tiles always";
    const bool always = flags.by_tiles == "always" || flags.in_place();
    std::string why_not;
    if (!reads_near_positions(options)) {
        why_not = std::string(interpolation_name(options.mode)) + " reads beyond a fixed reach of its positions";
    } else if (options.padding == Padding::Reflection) {
        why_not = "reflection padding folds positions across the whole input";
    } else if (output_type != layout.dtype) {
        why_not = "the output's type differs from the input's";
    }
    if (!why_not.empty()) {
        if (always) throw std::invalid_argument(required + ": " + why_not);
        return false;
    }
    return always || passes_working_memory(layout, output_spatial, flags.working_memory);
}

namespace {

// How an output box is made from the input: the input box it reads, and the sampling of that box.
struct BoxSampling {
    std::function<InputBox(const Shape& start, const Shape& extent)> box;
    // `stored`: the box's voxels, (1, C, box extents); `pixels`: the output box at `start`.
    std::function<void(const ConstTensorView& stored, const InputBox& box, const Shape& start, const TensorView& pixels)> sample;
    // Bytes of memory a byte of the box takes while sampled (its low-passed copy too).
    std::uint64_t bytes_per_box_byte = 1;
};

// One output tile's work: the input box it reads, assembled from the cache, then sampled.
class TileSampler {
public:
    TileSampler(const std::filesystem::path& input_file, const io::TileSource& tiles, BoxSampling sampling, std::uint64_t box_budget,
                std::uint64_t cache_bytes)
        : input_file_(input_file), layout_(tiles.layout()), sampling_(std::move(sampling)), box_budget_(box_budget), cache_(tiles, cache_bytes) {}

    // The box of the output at `start` of pixels' extent into `pixels`; a box of input past the
    // budget is read for halves of the output box (along its outermost axis longer than 1) instead.
    void sample(const Shape& start, const TensorView& pixels) const {
        const Shape extent(pixels.shape.begin() + 2, pixels.shape.end());
        const InputBox box = sampling_.box(start, extent);
        const std::uint64_t box_bytes = static_cast<std::uint64_t>(shape_numel(box.extent) * layout_.channels) * dtype_size(layout_.dtype);
        if (box_bytes * sampling_.bytes_per_box_byte > box_budget_) {
            std::size_t axis = 0;
            while (axis < extent.size() && extent[axis] < 2) ++axis;
            if (axis == extent.size()) {
                throw io::FileError(input_file_, "an output point reads " + image_size_text(box.extent) +
                                                     " input voxels, more than --working-memory leaves each thread");
            }
            const std::int64_t half = extent[axis] / 2;
            TensorView first = pixels, second = pixels;
            first.shape[axis + 2] = half;
            second.shape[axis + 2] = extent[axis] - half;
            second.data = static_cast<std::uint8_t*>(pixels.data) + half * pixels.strides[axis + 2] * static_cast<std::int64_t>(dtype_size(pixels.dtype));
            Shape second_start = start;
            second_start[axis] += half;
            sample(start, first);
            sample(second_start, second);
            return;
        }
        // Every byte of the box is copied in: the buffer, kept between tiles, is not cleared.
        thread_local std::unique_ptr<std::uint8_t[]> box_buffer;
        thread_local std::uint64_t box_capacity = 0;
        if (box_bytes > box_capacity) {
            box_buffer = std::make_unique_for_overwrite<std::uint8_t[]>(box_bytes);
            box_capacity = box_bytes;
        }
        std::uint8_t* box_pixels = box_buffer.get();
        if (box_bytes > 0) cache_.read_region(box.start, box.extent, box_pixels);
        const std::int64_t c = layout_.channels;
        Shape shape{1, c}, strides(box.extent.size() + 2);
        shape.insert(shape.end(), box.extent.begin(), box.extent.end());
        std::int64_t stride = c;
        for (std::size_t a = box.extent.size(); a-- > 0;) {
            strides[a + 2] = stride;
            stride *= box.extent[a];
        }
        strides[1] = 1;
        strides[0] = stride;
        sampling_.sample(ConstTensorView(layout_.dtype, box_pixels, shape, strides), box, start, pixels);
    }

    std::uint64_t tiles_decoded() const { return cache_.tiles_decoded(); }

private:
    const std::filesystem::path& input_file_;
    const io::TileLayout& layout_;
    BoxSampling sampling_;
    std::uint64_t box_budget_;
    io::TileCache cache_;
};

// The input tiles to keep: enough for the boxes of the last few dozen output tiles (taken in
// Z-order), judged from the boxes of a few output tiles, within half the working memory. Tiles that
// do not fit are decoded again when needed.
std::uint64_t tile_cache_bytes(const io::TileLayout& layout, const Shape& output, const BoxSampling& sampling, std::uint64_t working_memory) {
    const std::size_t rank = output.size();
    const std::int64_t side = rank == 2 ? 512 : 128;
    std::int64_t most_tiles = 1;
    for (int corner = 0; corner < (1 << rank) + 1; ++corner) {  // each corner, and the centre
        Shape start(rank), extent(rank);
        for (std::size_t a = 0; a < rank; ++a) {
            extent[a] = std::min(side, output[a]);
            const double where = corner == (1 << rank) ? 0.5 : ((corner >> a) & 1);
            start[a] = static_cast<std::int64_t>(where * static_cast<double>(output[a] - extent[a]));
        }
        const InputBox box = sampling.box(start, extent);
        if (shape_numel(box.extent) == 0) continue;
        std::int64_t tiles = 1;
        for (std::size_t a = 0; a < rank; ++a) {
            tiles *= (box.start[a] + box.extent[a] - 1) / layout.tile[a] - box.start[a] / layout.tile[a] + 1;
        }
        most_tiles = std::max(most_tiles, tiles);
    }
    const std::uint64_t wanted = static_cast<std::uint64_t>(16 * most_tiles) * layout.tile_bytes();
    return std::clamp<std::uint64_t>(wanted, std::min<std::uint64_t>(16 << 20, working_memory / 2), working_memory / 2);
}

// A digest of the job a share belongs to: the input file's size and time, the output's size and
// type, how it is sampled, and the positions of points spread over the output. Shares of one store
// must agree on it, so that a store is never filled by two different commands.
std::string job_digest(const std::filesystem::path& input_file, const io::Image& description, const PositionSource& positions,
                       const SampleOptions& options, const std::string& extra = {}) {
    std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
    const auto mix = [&](const void* data, std::size_t bytes) {
        for (std::size_t i = 0; i < bytes; ++i) {
            hash ^= static_cast<const std::uint8_t*>(data)[i];
            hash *= 1099511628211ull;
        }
    };
    const auto mix_value = [&](const auto& value) { mix(&value, sizeof value); };
    std::error_code error;
    if (std::filesystem::is_regular_file(input_file, error)) {
        mix_value(std::filesystem::file_size(input_file, error));
        mix_value(std::filesystem::last_write_time(input_file, error).time_since_epoch().count());
    }
    for (const auto extent : description.spatial) mix_value(extent);
    mix_value(description.channels);
    mix_value(description.dtype());
    mix_value(options.mode);
    mix_value(options.spline_order);
    mix_value(options.padding);
    mix_value(options.align_corners);
    mix_value(options.fill);
    mix(extra.data(), extra.size());
    const Shape& output = positions.output_shape();
    const std::size_t rank = output.size();
    std::vector<double> xyz(2 * rank);
    for (int sample = 0; sample < 33; ++sample) {
        Shape outer(rank > 1 ? rank - 1 : 1, 0);
        for (std::size_t a = 0; a + 1 < rank; ++a) outer[a] = (output[a] - 1) * ((sample * (a + 3)) % 33) / 32;
        const std::int64_t width = output[rank - 1];
        positions.row(0, outer.data(), 0, 1, xyz.data());
        positions.row(0, outer.data(), width - 1, 1, xyz.data() + rank);
        mix(xyz.data(), xyz.size() * sizeof(double));
    }
    return fmt::format("{:016x}", hash);
}

}  // namespace

namespace {

void write_by_box_sampling(const OutputArgument& output, const std::filesystem::path& input_file, const io::TileSource& tiles,
                           const io::Image& description, const io::WriteOptions& write_options, const BoxSampling& sampling, int threads,
                           const TilingFlags& flags, const std::function<std::string()>& job, CommandProgress* progress) {
    const std::uint64_t cache_bytes = tile_cache_bytes(tiles.layout(), description.spatial, sampling, flags.working_memory);
    // Each thread's box of input takes at most half of its share of what the cache leaves, the rest
    // room for the output tiles being encoded and written.
    const std::uint64_t box_budget = (flags.working_memory - cache_bytes) / 2 / static_cast<std::uint64_t>(threads);
    const TileSampler sampler(input_file, tiles, sampling, box_budget, cache_bytes);
    const io::TileLayout& layout = tiles.layout();
    spdlog::debug("sampling by tiles: input tiles {}, {} thread(s), working memory {} MiB, {} MiB of it for input tiles",
                  shape_to_string(layout.tile), threads, flags.working_memory >> 20, cache_bytes >> 20);
    io::TileShare share;
    if (!flags.tiles.empty()) {
        const Share parsed = parse_share(flags.tiles, "--tiles");
        share.index = static_cast<std::int64_t>(parsed.index);
        share.count = static_cast<std::int64_t>(parsed.count);
    }
    share.resume = flags.resume;
    if (share.in_place()) share.job = job();
    if (progress) progress->phase("sampling by tiles", 1, 2);
    io::write_by_tiles(
        output.path, description, write_options, threads, [&](const Shape& start, const TensorView& pixels) { sampler.sample(start, pixels); },
        [&](std::int64_t done, std::int64_t total) {
            if (progress) progress->items(done, total);
        },
        share);
    if (progress) progress->finish();
    spdlog::debug("input tiles decoded: {} of {}", sampler.tiles_decoded(), layout.tile_count());
    const std::string part = share.count > 1 ? fmt::format(", share {} of 0..{}", share.index, share.count - 1) : "";
    spdlog::info("wrote {} ({} {}, size {}, by tiles{})", output.string(), io::file_kind_name(description.kind), dtype_name(description.dtype()),
                 image_size_text(description.spatial), part);
}

int thread_count(const SampleOptions& options) {
    return options.threads > 0 ? options.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace

void sample_by_tiles(const OutputArgument& output, const std::filesystem::path& input_file, const io::TileSource& tiles,
                     const io::Image& description, const io::WriteOptions& write_options, const PositionSource& positions,
                     const SampleOptions& options, const AntialiasPlan& antialias, const TilingFlags& flags, CommandProgress* progress) {
    SampleOptions one_thread = options;
    one_thread.threads = 1;
    const Shape& spatial = tiles.layout().spatial;
    // The low-pass reaches 3 k voxels along an axis shrunk by k: a box read that much wider holds
    // every voxel its interior's filtered values read (a box edge that is not the input's is never
    // within reach of the voxels sampled).
    Shape margin(spatial.size(), 0);
    if (antialias.filters) {
        for (std::size_t a = 0; a < spatial.size(); ++a) {
            const double factor = std::min(antialias.factors[a], kMaxLowpassFactor);
            if (antialias.factors[a] > kShrinkTolerance) margin[a] = static_cast<std::int64_t>(std::ceil(3 * factor)) + 1;
        }
    }
    BoxSampling sampling;
    if (antialias.filters) {
        const std::size_t stored = dtype_size(tiles.layout().dtype), filtered = dtype_size(lowpass_dtype(tiles.layout().dtype));
        sampling.bytes_per_box_byte = 1 + (filtered + stored - 1) / stored;
    }
    sampling.box = [&](const Shape& start, const Shape& extent) {
        InputBox box = input_box_read(PositionWindow(positions, start, extent), spatial, one_thread);
        for (std::size_t a = 0; a < spatial.size(); ++a) {
            const std::int64_t first = std::max<std::int64_t>(0, box.start[a] - margin[a]);
            const std::int64_t end = std::min(spatial[a], box.start[a] + box.extent[a] + margin[a]);
            box.start[a] = first;
            box.extent[a] = end - first;
        }
        return box;
    };
    sampling.sample = [&](const ConstTensorView& stored, const InputBox& box, const Shape& start, const TensorView& pixels) {
        const Shape extent(pixels.shape.begin() + 2, pixels.shape.end());
        const PositionWindow window(positions, start, extent);
        if (!antialias.filters) {
            grid_sample_in_box(stored, box, spatial, window, pixels, one_thread);
            return;
        }
        // As the whole path: sampled in the low-passed copy's type, then converted.
        const Tensor filtered = lowpass_for_shrink(stored, antialias.factors, 1);
        if (filtered.dtype() == pixels.dtype) {
            grid_sample_in_box(filtered.view(), box, spatial, window, pixels, one_thread);
            return;
        }
        Tensor sampled(filtered.dtype(), pixels.shape);
        grid_sample_in_box(filtered.view(), box, spatial, window, sampled.view(), one_thread);
        copy_elements(convert_to(sampled.view(), pixels.dtype).view(), pixels);
    };
    std::string lowpass;
    for (const double factor : antialias.factors) lowpass += antialias.filters ? fmt::format(" {}", factor) : "";
    write_by_box_sampling(output, input_file, tiles, description, write_options, sampling, thread_count(options), flags,
                          [&] { return job_digest(input_file, description, positions, options, lowpass); }, progress);
}

bool shrinks_by_tiles(const io::TileSource& tiles, const TilingFlags& flags, const SampleOptions& options, DType output_type,
                      const Shape& output_spatial) {
    const io::TileLayout& layout = tiles.layout();
    const std::string required = !flags.tiles.empty() ? "--tiles" : flags.resume ? "--resume" : "--by-tiles always";
    const bool always = flags.by_tiles == "always" || flags.in_place();
    if (output_type != layout.dtype || !shrinks_onto_grid(options, layout.dtype)) {
        if (always) throw std::invalid_argument(required + ": this shrink low-passes the whole input (--antialias off, or --mode linear or cubic)");
        return false;
    }
    return always || passes_working_memory(layout, output_spatial, flags.working_memory);
}

void shrink_by_tiles(const OutputArgument& output, const std::filesystem::path& input_file, const io::TileSource& tiles,
                     const io::Image& description, const io::WriteOptions& write_options, const AxisAlignedMap& map,
                     const std::vector<double>& factors, const PositionSource& positions, const SampleOptions& options, const TilingFlags& flags,
                     CommandProgress* progress) {
    SampleOptions one_thread = options;
    one_thread.threads = 1;
    const Shape& spatial = tiles.layout().spatial;
    BoxSampling sampling;
    sampling.box = [&](const Shape& start, const Shape& extent) { return shrink_input_box(spatial, map, factors, one_thread, start, extent); };
    sampling.sample = [&](const ConstTensorView& stored, const InputBox& box, const Shape& start, const TensorView& pixels) {
        shrink_onto_grid_in_box(stored, box.start, spatial, map, factors, one_thread, start, pixels);
    };
    const auto job = [&] {
        std::string filtered = "shrink";
        for (const double factor : factors) filtered += fmt::format(" {}", factor);
        return job_digest(input_file, description, positions, options, filtered);
    };
    write_by_box_sampling(output, input_file, tiles, description, write_options, sampling, thread_count(options), flags, job, progress);
}

}  // namespace gridwarp::cli
