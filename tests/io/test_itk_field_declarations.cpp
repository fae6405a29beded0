// ITK displacement field transforms in transform files: ITK allocates the field from the size its
// fixed parameters declare before it reads a parameter, so the declaration is checked first.
#include <catch2/catch.hpp>

#include <string>

#include "gridwarp/io/error.hpp"
#include "gridwarp/io/transform_io.hpp"

namespace {

std::string field_file(const std::string& parameters, const std::string& fixed) {
    return "#Insight Transform File V1.0\n#Transform 0\nTransform: DisplacementFieldTransform_double_3_3\nParameters: " +
           parameters + "\nFixedParameters: " + fixed + "\n";
}

void refused(const std::string& bytes, const std::string& needle) {
    INFO(bytes);
    try {
        (void)gridwarp::io::parse_itk_transform(bytes, gridwarp::io::ItkTransformEncoding::Text, "field.tfm", 3);
        FAIL("accepted");
    } catch (const gridwarp::io::FileError& e) {
        INFO(e.what());
        CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
}

}  // namespace

TEST_CASE("itk field declarations: a declared size must hold exactly the parameters given", "[io][transform]") {
    const std::string geometry = " 0 0 0 1 1 1 1 0 0 0 1 0 0 0 1";
    // 10^15 voxels declared, three values given: ITK would allocate petabytes.
    refused(field_file("0 0 0", "100000 100000 100000" + geometry), "takes");
    refused(field_file("0 0 0", "1.5 1 1" + geometry), "whole number");
    refused(field_file("0 0 0", "0 1 1" + geometry), "whole number");
    refused(field_file("0 0 0", "-1 -1 1" + geometry), "whole number");
    refused(field_file("0 0 0 0 0 0", "2 1" + geometry), "fixed parameters");
    refused(field_file("0 0 0", "1 1 1 0 0 0 1 1 1 1 0 0 0 1 0 0 0 nan"), "finite");
}

TEST_CASE("itk field declarations: a field whose size holds its parameters passes the check", "[io][transform]") {
    // Two voxels of 3-vectors: the check passes it on to ITK (nullopt: not a kind read without ITK).
    const auto steps = gridwarp::io::parse_itk_transform(field_file("0 0 0 1 1 1", "2 1 1 0 0 0 1 1 1 1 0 0 0 1 0 0 0 1"),
                                                         gridwarp::io::ItkTransformEncoding::Text, "field.tfm", 3);
    CHECK_FALSE(steps.has_value());
}
