// Sizes and transforms as the command line spells them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gridwarp/io/transform_io.hpp"
#include "gridwarp/physical.hpp"

namespace gridwarp::cli {

// Whole numbers "A,B[,C...]" or "AxB[xC...]", exactly `count` of them; throws std::invalid_argument
// naming `option`.
std::vector<std::int64_t> parse_integer_list(const std::string& option, const std::string& text, std::size_t count);

// A --transform value: "FILE[,tag...]" or ANTs' "[FILE,1]" / "[FILE,0]" (io::parse_transform_spec);
// throws std::invalid_argument for another bracketed flag.
using TransformArgument = io::TransformSpec;
TransformArgument parse_transform_argument(std::string text);

// A -t list read as resample reads it, the first listed acting first on reference points: the steps
// in the order they act. `moving` and `reference` (headers; null where not given) place the formats
// defined through images; warnings are logged; the fields' buffers are kept in `buffers`.
// Per-volume lists are refused (they map a series).
std::vector<PointTransform> read_transform_chain(const std::vector<std::string>& arguments, std::size_t dimension,
                                                 const io::Image* moving, const io::Image* reference,
                                                 const io::ReadOptions& options, std::vector<std::shared_ptr<const Tensor>>& buffers);

// Points (N x dimension, x first) in `ras` (else LPS) coordinates, in place, through `steps` as
// resample maps reference points, or with `from_moving` the chain undone (map_points_inverse, to
// `tolerance` mm); what `gridwarp points` and Python's map_points both do.
InversionReport map_point_coordinates(const std::vector<PointTransform>& steps, std::vector<double>& coordinates, std::size_t dimension,
                                      bool ras, bool from_moving, double tolerance, int threads);

}  // namespace gridwarp::cli
