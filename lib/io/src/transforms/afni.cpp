// Placeholder until the afni reader lands: the format is named and detected, not yet read.
#include "../formats.hpp"
#include "gridwarp/io/error.hpp"
#include "transform_formats.hpp"

namespace gridwarp::io::detail {

bool detects_afni_matrix(const std::string& lowercase_name, std::string_view) { return ends_with(lowercase_name, ".1d"); }

TransformFile read_afni_matrix(const TransformSpec& spec, const TransformContext&, const ReadOptions&) {
    throw FileError(spec.file, "afni transforms are not yet supported");
}

}  // namespace gridwarp::io::detail
