// Sampling a raster larger than memory a tile of the output at a time.
#include "tiled_sampling.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>
#include <vector>

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
}

std::unique_ptr<io::TileSource> open_input_tiles(const ImageArgument& input, const OutputArgument& output, const TilingFlags& flags,
                                                 const io::ReadOptions& options) {
    if (flags.by_tiles == "never") return nullptr;
    const bool always = flags.by_tiles == "always";
    if (output.in_memory() || !io::writes_tiles(output.path)) {
        if (always) throw std::invalid_argument("--by-tiles always: " + output.string() + " is not written by tiles (write a .tif)");
        return nullptr;
    }
    if (input.in_memory()) return nullptr;
    std::unique_ptr<io::TileSource> tiles = io::open_tile_source(input.path, options);
    if (!tiles && always) {
        throw std::invalid_argument("--by-tiles always: " + input.string() +
                                    " is not read by tiles (a TIFF of one page, 8 bits or wider, samples together, no orientation to apply)");
    }
    if (tiles && flags.working_memory < (std::uint64_t{16} << 20)) {
        throw std::invalid_argument("--working-memory: at least 16M, got " + std::to_string(flags.working_memory));
    }
    return tiles;
}

io::Image describe_tiled_input(const io::TileSource& tiles) {
    const io::TileLayout& layout = tiles.layout();
    io::Image image;
    image.kind = io::FileKind::Raster;
    image.format = "tiff";
    image.channels = layout.channels;
    image.spatial = {layout.height, layout.width};
    image.layout = io::ChannelLayout::Interleaved;
    if (layout.channels == 3) image.channel_order = "BGR";
    if (layout.channels == 4) image.channel_order = "BGRA";
    image.pixels = Tensor(layout.dtype, Shape{0});
    return image;
}

bool samples_by_tiles(const io::TileSource& tiles, const TilingFlags& flags, const SampleOptions& options, bool filters_input,
                      DType output_type, const PositionSource& positions) {
    const Shape& output_spatial = positions.output_shape();
    const io::TileLayout& layout = tiles.layout();
    const bool always = flags.by_tiles == "always";
    std::string why_not;
    if (!reads_near_positions(options)) {
        why_not = std::string(interpolation_name(options.mode)) + " reads beyond a fixed reach of its positions";
    } else if (filters_input) {
        why_not = "anti-aliasing low-passes the whole input (--antialias off, or gridwarp resize)";
    } else if (options.padding == Padding::Reflection) {
        why_not = "reflection padding folds positions across the whole input";
    } else if (output_type != layout.dtype) {
        why_not = "the output's type differs from the input's";
    }
    if (!why_not.empty()) {
        if (always) throw std::invalid_argument("--by-tiles always: " + why_not);
        return false;
    }
    if (always) return true;
    const auto bytes = [&](const Shape& spatial) {
        return static_cast<unsigned __int128>(spatial[0]) * static_cast<std::uint64_t>(spatial[1]) *
               static_cast<std::uint64_t>(layout.channels) * dtype_size(layout.dtype);
    };
    return bytes({layout.height, layout.width}) + bytes(output_spatial) > flags.working_memory;
}

namespace {

// One output tile's work: the input box its positions reach, read through the cache, then sampled.
class TileSampler {
public:
    TileSampler(const std::filesystem::path& input_file, const io::TileSource& tiles, const PositionSource& positions,
                const SampleOptions& options, std::uint64_t box_budget, std::uint64_t cache_bytes)
        : input_file_(input_file), layout_(tiles.layout()), positions_(positions), options_(options), box_budget_(box_budget),
          cache_(tiles, cache_bytes) {
        options_.threads = 1;
    }

    // Rows [y, y + rows) and columns [x, x + columns) of the output into `pixels`; a box of input
    // past the budget is read for halves of the rows instead.
    void sample(std::int64_t y, std::int64_t x, const TensorView& pixels) const {
        const std::int64_t rows = pixels.shape[2], columns = pixels.shape[3];
        const PositionWindow window(positions_, Shape{y, x}, Shape{rows, columns});
        const Shape input_spatial{layout_.height, layout_.width};
        const InputBox box = input_box_read(window, input_spatial, options_);
        const std::uint64_t box_bytes = static_cast<std::uint64_t>(box.extent[0] * box.extent[1] * layout_.channels) * dtype_size(layout_.dtype);
        if (box_bytes > box_budget_) {
            if (rows == 1) {
                throw io::FileError(input_file_, "a row of output reads " + std::to_string(box.extent[1]) + " x " + std::to_string(box.extent[0]) +
                                                     " input pixels, more than --working-memory leaves each thread");
            }
            const std::int64_t half = rows / 2;
            TensorView top = pixels, bottom = pixels;
            top.shape[2] = half;
            bottom.shape[2] = rows - half;
            bottom.data = static_cast<std::uint8_t*>(pixels.data) + half * pixels.strides[2] * static_cast<std::int64_t>(dtype_size(pixels.dtype));
            sample(y, x, top);
            sample(y + half, x, bottom);
            return;
        }
        thread_local std::vector<std::uint8_t> box_pixels;
        box_pixels.resize(box_bytes);
        cache_.read_region(box.start[0], box.start[1], box.extent[0], box.extent[1], box_pixels.data());
        const std::int64_t c = layout_.channels;
        const ConstTensorView stored(layout_.dtype, box_pixels.data(), Shape{1, c, box.extent[0], box.extent[1]},
                                     Shape{box.extent[0] * box.extent[1] * c, 1, box.extent[1] * c, c});
        grid_sample(stored, PositionsInBox(window, input_spatial, options_.align_corners, box), pixels, options_);
    }

    std::uint64_t tiles_decoded() const { return cache_.tiles_decoded(); }

private:
    const std::filesystem::path& input_file_;
    const io::TileLayout& layout_;
    const PositionSource& positions_;
    SampleOptions options_;
    std::uint64_t box_budget_;
    io::TileCache cache_;
};

// The input tiles to keep: those the output tiles of two columns of a band (write_by_tiles' order)
// read, judged from the boxes of a few output tiles, within half the working memory. Tiles that
// do not fit are decoded again when needed.
std::uint64_t tile_cache_bytes(const io::TileLayout& layout, const PositionSource& positions, const SampleOptions& options,
                               std::uint64_t working_memory) {
    constexpr std::int64_t kOutputTileSide = 512, kBandTileRows = 8;
    const Shape& output = positions.output_shape();
    const Shape input_spatial{layout.height, layout.width};
    std::int64_t most_tiles = 1;
    for (const double fy : {0.0, 0.5, 1.0}) {
        for (const double fx : {0.0, 0.5, 1.0}) {
            const Shape extent{std::min(kOutputTileSide, output[0]), std::min(kOutputTileSide, output[1])};
            const Shape start{static_cast<std::int64_t>(fy * static_cast<double>(output[0] - extent[0])),
                              static_cast<std::int64_t>(fx * static_cast<double>(output[1] - extent[1]))};
            const InputBox box = input_box_read(PositionWindow(positions, start, extent), input_spatial, options);
            const std::int64_t rows = (box.start[0] + box.extent[0] - 1) / layout.tile_height - box.start[0] / layout.tile_height + 1;
            const std::int64_t columns = (box.start[1] + box.extent[1] - 1) / layout.tile_width - box.start[1] / layout.tile_width + 1;
            most_tiles = std::max(most_tiles, rows * columns);
        }
    }
    const std::uint64_t wanted = static_cast<std::uint64_t>(2 * (kBandTileRows + 2) * most_tiles) * layout.tile_bytes();
    return std::clamp<std::uint64_t>(wanted, std::min<std::uint64_t>(16 << 20, working_memory / 2), working_memory / 2);
}

}  // namespace

void sample_by_tiles(const OutputArgument& output, const std::filesystem::path& input_file, const io::TileSource& tiles,
                     const io::Image& description, const io::WriteOptions& write_options, const PositionSource& positions,
                     const SampleOptions& options, const TilingFlags& flags, CommandProgress* progress) {
    const int threads = options.threads > 0 ? options.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    const std::uint64_t cache_bytes = tile_cache_bytes(tiles.layout(), positions, options, flags.working_memory);
    // Each thread's box of input takes at most half of its share of what the cache leaves, the rest
    // room for the output tiles being encoded and written.
    const std::uint64_t box_budget = (flags.working_memory - cache_bytes) / 2 / static_cast<std::uint64_t>(threads);
    const TileSampler sampler(input_file, tiles, positions, options, box_budget, cache_bytes);
    const io::TileLayout& layout = tiles.layout();
    spdlog::debug("sampling by tiles: input tiles {}x{}, {} thread(s), working memory {} MiB, {} MiB of it for input tiles",
                  layout.tile_width, layout.tile_height, threads, flags.working_memory >> 20, cache_bytes >> 20);
    if (progress) progress->phase("sampling by tiles", 1, 2);
    io::write_by_tiles(output.path, description, write_options, threads,
                       [&](std::int64_t y, std::int64_t x, const TensorView& pixels) { sampler.sample(y, x, pixels); },
                       [&](std::int64_t done, std::int64_t total) {
                           if (progress) progress->items(done, total);
                       });
    if (progress) progress->finish();
    spdlog::debug("input tiles decoded: {} of {}", sampler.tiles_decoded(), layout.tile_rows() * layout.tile_columns());
    spdlog::info("wrote {} (image {}, size {}, by tiles)", output.string(), dtype_name(description.dtype()), image_size_text(description.spatial));
}

}  // namespace gridwarp::cli
