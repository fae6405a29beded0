// Sizes and transforms as the command line spells them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gridwarp/io/transform_io.hpp"

namespace gridwarp::cli {

// Whole numbers "A,B[,C...]" or "AxB[xC...]", exactly `count` of them; throws std::invalid_argument
// naming `option`.
std::vector<std::int64_t> parse_integer_list(const std::string& option, const std::string& text, std::size_t count);

// A --transform value: "FILE[,tag...]" or ANTs' "[FILE,1]" / "[FILE,0]" (io::parse_transform_spec);
// throws std::invalid_argument for another bracketed flag.
using TransformArgument = io::TransformSpec;
TransformArgument parse_transform_argument(std::string text);

}  // namespace gridwarp::cli
