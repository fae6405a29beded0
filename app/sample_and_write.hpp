// Sampling an input into an output file, a window of rows at a time where the format allows.
#pragma once

#include <filesystem>
#include <vector>

#include "gridwarp/antialias.hpp"
#include "gridwarp/grid_sample.hpp"
#include "gridwarp/io/image.hpp"
#include "image_arguments.hpp"
#include "messages.hpp"

namespace gridwarp::cli {

// Samples `input` (N, C, D1..Dr) at `positions` into the output `description` describes, writes
// it to `output`'s file (io::write_sampled: a block of rows at a time where the format allows), or
// into its image in memory, and logs "wrote FILE (volume int16, spatial (D, H, W))"; tells `progress` (when given) when sampling
// and writing begin. An output of another dtype than the input's is sampled in the input's, then rounded and
// saturated into its own.
// `modulation` (given: float64 of the output's spatial shape, a floating output) multiplies each
// output value by its voxel's factor (resample --modulate).
void sample_and_write(const OutputArgument& output, io::Image description, const io::WriteOptions& write_options,
                      const ConstTensorView& input, const PositionSource& positions, const SampleOptions& options,
                      CommandProgress* progress = nullptr, const ConstTensorView* modulation = nullptr);
// sample_and_write where every output point is an input voxel's centre (the same grid, no
// transform): the values are copied, as every interpolation that passes through its samples gives
// them. `input` and the description are of the same dtype.
void copy_and_write(const OutputArgument& output, io::Image description, const io::WriteOptions& write_options,
                    const ConstTensorView& input, CommandProgress* progress = nullptr);
// sample_and_write for an anti-aliased axis-aligned map that gridwarp::shrinks_onto_grid serves:
// the output is reduced onto its grid (gridwarp::shrink_onto_grid), no filtered copy of the input made.
void shrink_and_write(const OutputArgument& output, io::Image description, const io::WriteOptions& write_options,
                      const ConstTensorView& input, const AxisAlignedMap& map, const std::vector<double>& factors,
                      const SampleOptions& options, CommandProgress* progress = nullptr);
// sample_and_write for a series: each channel of `input` (1, C, D1..Dr), a volume of a 4-D series,
// is sampled on its own into its plane of the output, at `volume_positions[c]` (or, given one,
// `volume_positions[0]` for every volume), in `sample_type`. A volume of another type is converted
// one at a time, and an output of another type is rounded and saturated a volume at a time: the
// series itself is never copied.
void sample_series_and_write(const OutputArgument& output, io::Image description, const io::WriteOptions& write_options,
                             const ConstTensorView& input, DType sample_type,
                             const std::vector<const PositionSource*>& volume_positions, const SampleOptions& options,
                             CommandProgress* progress = nullptr, const ConstTensorView* modulation = nullptr);

}  // namespace gridwarp::cli
