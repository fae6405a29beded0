// Fixture cases with expected outputs from independent sources, run through the library:
//  - data/onnx: the ONNX project's backend test data (26 cases, GridSample and AffineGrid);
//  - data/oracle: tests/fixtures/make_oracle.py's float64 N-D reference of docs/semantics.md
//    (ranks 1-4, every mode x padding x align_corners, checked there against PyTorch for 2-D/3-D);
//  - data/torch: PyTorch 1.13 float32 results for 2-D and 3-D.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "gridwarp/positions.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;

namespace {

Tensor run_case(const FixtureCase& c, bool force_generic_rank = false) {
    const std::string op = c.spec.at("op").get<std::string>();
    if (op == "AffineGrid") {
        const auto size = as_doubles(c.inputs.at(1).view());
        const Shape shape(size.begin(), size.end());
        return affine_grid(c.inputs.at(0).view(), shape, c.spec.at("attributes").at("align_corners").get<int>() != 0);
    }
    REQUIRE(op == "GridSample");
    SampleOptions options = case_options(c);
    options.force_generic_rank = force_generic_rank;
    return grid_sample(c.inputs.at(0).view(), c.inputs.at(1).view(), options);
}

void check_cases(const std::filesystem::path& root, std::size_t minimum_count) {
    const auto dirs = case_dirs(root);
    REQUIRE(dirs.size() >= minimum_count);
    for (const auto& dir : dirs) {
        INFO("case " << dir.filename().string());
        const FixtureCase c = load_case(dir);
        const Tensor actual = run_case(c);
        CHECK(compare(actual.view(), c.outputs.at(0).view(), c.rtol, c.atol) == "");
    }
}

}  // namespace

TEST_CASE("ONNX conformance cases pass through the library", "[conformance][onnx]") {
    check_cases(data_dir() / "onnx", 26);
}

TEST_CASE("N-D reference cases (ranks 1-4) pass through the library", "[conformance][oracle]") {
    check_cases(data_dir() / "oracle", 72);
}

TEST_CASE("PyTorch float32 cases (2-D, 3-D) pass through the library", "[conformance][torch]") {
    check_cases(data_dir() / "torch", 30);
}

// README's claim: nearest equals PyTorch bit for bit; linear and cubic differ by float32 rounding
// only (the contract's order of operations, not PyTorch's), a few units in the last place.
TEST_CASE("PyTorch: nearest bit for bit, linear and cubic within float32 rounding", "[conformance][torch]") {
    int nearest = 0;
    for (const auto& dir : case_dirs(data_dir() / "torch")) {
        const FixtureCase c = load_case(dir);
        INFO("case torch/" << dir.filename().string());
        const std::string mode = c.spec.at("attributes").at("mode").get<std::string>();
        const Tensor actual = run_case(c);
        if (mode == "nearest") {
            CHECK(compare_exact(actual.view(), c.outputs.at(0).view()) == "");
            ++nearest;
        } else {
            double scale = 0;
            for (const double v : as_doubles(c.inputs.at(0).view())) scale = std::max(scale, std::fabs(v));
            CHECK(compare(actual.view(), c.outputs.at(0).view(), 0, 64 * 0x1p-24 * scale) == "");
        }
    }
    CHECK(nearest > 0);
}

TEST_CASE("fixture cases give identical results on the fixed-rank and generic paths", "[conformance][rank]") {
    for (const char* set : {"onnx", "oracle", "torch"}) {
        for (const auto& dir : case_dirs(data_dir() / set)) {
            const FixtureCase c = load_case(dir);
            if (c.spec.at("op").get<std::string>() != "GridSample") continue;
            INFO("case " << set << "/" << dir.filename().string());
            CHECK(compare_exact(run_case(c, true).view(), run_case(c, false).view()) == "");
        }
    }
}
