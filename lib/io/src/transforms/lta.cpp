// Placeholder until the lta reader lands: the format is named and detected, not yet read.
#include "../formats.hpp"
#include "gridwarp/io/error.hpp"
#include "transform_formats.hpp"

namespace gridwarp::io::detail {

bool detects_lta(const std::string& lowercase_name, std::string_view) { return ends_with(lowercase_name, ".lta"); }

TransformFile read_lta(const TransformSpec& spec, const TransformContext&, const ReadOptions&) {
    throw FileError(spec.file, "lta transforms are not yet supported");
}

}  // namespace gridwarp::io::detail
