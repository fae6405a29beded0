// Sampling a raster larger than memory a tile of the output at a time (docs/bigdata.md).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "gridwarp/antialias.hpp"
#include "gridwarp/grid_sample.hpp"
#include "gridwarp/io/tiles.hpp"
#include "image_arguments.hpp"
#include "messages.hpp"
#include "sampling_options.hpp"

namespace gridwarp::cli {

// --by-tiles auto|always|never, --working-memory BYTES, --tiles K/N and --resume.
struct TilingFlags {
    std::string by_tiles = "auto";
    std::uint64_t working_memory = std::uint64_t{1} << 30;
    std::string tiles;    // a share of the output's tiles: K/N or slurm
    bool resume = false;  // skip the tiles a stopped run wrote
    bool in_place() const { return !tiles.empty() || resume; }
};
void add_tiling_options(CLI::App& command, TilingFlags& flags);

// The input's tiles, where the input is read by tiles (a tiled or striped TIFF, an OME-Zarr store)
// and the output is written by them (.tif, .zarr), unless --by-tiles never; nullptr otherwise.
// Under --by-tiles always, --tiles and --resume a pair that cannot is refused
// (std::invalid_argument saying why).
std::unique_ptr<io::TileSource> open_input_tiles(const ImageArgument& input, const OutputArgument& output, const TilingFlags& flags,
                                                 const io::ReadOptions& options);

// Whether sampling from `tiles` at `positions` runs by tiles: under auto, where
// the input and the output together pass --working-memory; and only where every point reads input
// near its position (reads_near_positions), into the input's type. Under always (and --tiles, --resume) a sampling that cannot is refused
// (std::invalid_argument saying why).
bool samples_by_tiles(const io::TileSource& tiles, const TilingFlags& flags, const SampleOptions& options,
                      DType output_type, const PositionSource& positions);

// Samples the input at `positions` into `output` a tile at a time: each output tile reads the box
// of input its positions reach (input_box_read) through a cache of decoded input tiles, so that
// memory stays within --working-memory whatever the image's size; the values equal sampling the
// whole input in memory. An anti-aliased map low-passes each box, read with the low-pass's
// margin, as lowpass_for_shrink low-passes the whole input: the values are the same. Under --tiles and --resume, only this share's tiles (io::TileShare).
// Logs "wrote FILE (...)".
void sample_by_tiles(const OutputArgument& output, const std::filesystem::path& input_file, const io::TileSource& tiles,
                     const io::Image& description, const io::WriteOptions& write_options, const PositionSource& positions,
                     const SampleOptions& options, const AntialiasPlan& antialias, const TilingFlags& flags, CommandProgress* progress);

// Whether an anti-aliased shrink onto an axis-aligned grid (resize: shrink_onto_grid) runs by tiles:
// into the input's type, where shrink_onto_grid serves the options; under auto, where the input
// and the output together pass --working-memory. Under always (and --tiles, --resume) one that
// cannot is refused (std::invalid_argument saying why).
bool shrinks_by_tiles(const io::TileSource& tiles, const TilingFlags& flags, const SampleOptions& options, DType output_type,
                      const Shape& output_spatial);

// shrink_onto_grid a tile of the output at a time, each from the input box its weights reach
// (shrink_input_box): the values equal the whole computation's. `positions` are the map's, for
// the job's digest.
void shrink_by_tiles(const OutputArgument& output, const std::filesystem::path& input_file, const io::TileSource& tiles,
                     const io::Image& description, const io::WriteOptions& write_options, const AxisAlignedMap& map,
                     const std::vector<double>& factors, const PositionSource& positions, const SampleOptions& options, const TilingFlags& flags,
                     CommandProgress* progress);

}  // namespace gridwarp::cli
