// How a -t value names a transform: the file, its format tag, its direction, per-volume lists and
// FSL's src=/ref= images (io::parse_transform_spec).
#include <catch2/catch.hpp>

#include <stdexcept>

#include "gridwarp/io/transform_io.hpp"

using gridwarp::io::parse_transform_spec;
using gridwarp::io::TransformFormat;

TEST_CASE("transform spec: a bare file name detects its format and acts forward", "[io][transform]") {
    const auto spec = parse_transform_spec("dir/affine.tfm");
    CHECK(spec.file == "dir/affine.tfm");
    CHECK(spec.format == TransformFormat::Detect);
    CHECK_FALSE(spec.inverse);
    CHECK_FALSE(spec.per_volume);
}

TEST_CASE("transform spec: tags after the name, in any order", "[io][transform]") {
    const auto spec = parse_transform_spec("bold2t1.mat,inverse,fsl,src=bold.nii.gz,ref=t1.nii.gz");
    CHECK(spec.file == "bold2t1.mat");
    CHECK(spec.format == TransformFormat::Fsl);
    CHECK(spec.inverse);
    CHECK(spec.source == "bold.nii.gz");
    CHECK(spec.reference == "t1.nii.gz");
    CHECK_FALSE(spec.absolute_field.has_value());
    for (const std::string tag : {"abs", "absolute"}) CHECK(parse_transform_spec("warp.nii.gz," + tag).absolute_field == true);
    for (const std::string tag : {"rel", "relative"}) CHECK(parse_transform_spec("warp.nii.gz," + tag).absolute_field == false);
    const auto motion = parse_transform_spec("motion.txt,per-volume,itk");
    CHECK(motion.format == TransformFormat::Itk);
    CHECK(motion.per_volume);
    for (const auto& [tag, format] : gridwarp::io::transform_format_tags()) {
        CHECK(parse_transform_spec("m," + tag).format == format);
        CHECK(gridwarp::io::transform_format_name(format) == tag);
    }
}

TEST_CASE("transform spec: ANTs' brackets", "[io][transform]") {
    CHECK(parse_transform_spec("[a.mat,1]").inverse);
    CHECK_FALSE(parse_transform_spec("[a.mat,0]").inverse);
    CHECK(parse_transform_spec("[a.mat,1]").file == "a.mat");
    CHECK(parse_transform_spec("[a.mat]").file == "a.mat");
    CHECK_THROWS_AS(parse_transform_spec("[a.mat,2]"), std::invalid_argument);
}

TEST_CASE("transform spec: words that are not tags stay in the file name", "[io][transform]") {
    CHECK(parse_transform_spec("run,1,final.txt").file == "run,1,final.txt");
    const auto spec = parse_transform_spec("a,b.lta,inverse");
    CHECK(spec.file == "a,b.lta");
    CHECK(spec.inverse);
    CHECK_THROWS_AS(parse_transform_spec(",inverse"), std::invalid_argument);
}
