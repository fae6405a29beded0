// Hostile files that once crashed a reader, exhausted memory, or were read as data: each is now
// refused with one FileError naming the file and the problem. The files are in
// tests/data/fuzz_regressions (its README.md says where each came from: issue 25's reports or a
// fuzz target, tests/fuzz).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gridwarp/io/error.hpp"
#include "gridwarp/io/flow_io.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/npy.hpp"
#include "gridwarp/io/transform_io.hpp"
#include "support/support.hpp"

using namespace gridwarp;
namespace fs = std::filesystem;

namespace {

fs::path regressions() { return test::data_dir() / "fuzz_regressions"; }

// The reader a regression file goes through, by its name: transforms for 2-D images end in _2d.
std::function<void()> reader_for(const fs::path& file) {
    const std::string name = file.filename().string();
    auto ends_with = [&](const std::string& suffix) {
        return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends_with(".npy")) return [file] { (void)io::read_npy(file); };
    if (ends_with(".flo") || ends_with(".png")) return [file] { (void)io::read_flow(file); };
    if (ends_with(".tfm") || ends_with(".mat") || ends_with(".txt") || ends_with(".h5")) {
        const std::size_t dimension = name.find("_2d.") != std::string::npos ? 2 : 3;
        return [file, dimension] { (void)io::read_transform(file, dimension, false); };
    }
    if (ends_with(".nii") || ends_with(".nii.gz")) return [file] { (void)io::read_image(file); };
    return {};
}

// Runs the file's reader; returns the FileError's message, or fails the test.
std::string refusal_of(const fs::path& file) {
    INFO("file " << file.string());
    const auto read = reader_for(file);
    REQUIRE(read);
    try {
        read();
    } catch (const io::FileError& e) {
        CHECK(e.file() == file);
        CHECK(std::string(e.what()).rfind(file.string() + ": ", 0) == 0);
        CHECK(std::string(e.what()).find('\n') == std::string::npos);  // one line
        return e.what();
    } catch (const std::exception& e) {
        FAIL("expected a FileError, got: " << e.what());
    }
    FAIL("the file was accepted");
    return "";
}

}  // namespace

TEST_CASE("fuzz regressions: every file in tests/data/fuzz_regressions is refused with a FileError", "[io][fuzz]") {
    std::size_t checked = 0;
    for (const auto& entry : fs::directory_iterator(regressions())) {
        if (!reader_for(entry.path())) continue;  // README.md
        (void)refusal_of(entry.path());
        ++checked;
    }
    CHECK(checked >= 11);
}

TEST_CASE("fuzz regressions: each refusal says what was expected and what was found", "[io][fuzz]") {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        // .npy of unbounded rank: rank >= 66 overflowed the sampler's tap count (SIGFPE), 40-65 aborted.
        {"npy_rank33.npy", {"more than 32 dimensions"}},
        {"npy_rank3000.npy", {"more than 32 dimensions"}},
        // A .flo value that is neither a displacement nor Middlebury's unknown mark was read as flow.
        {"flo_absurd_displacement.flo", {"pixel (x 2, y 1)", "500000000", "below 2^24"}},
        // ITK took the first 12 of 15 parameters; a missing FixedParameters line left an identity.
        {"itk_too_many_parameters.tfm", {"line 3", "expected 12 parameters, found 15"}},
        {"itk_missing_fixed_parameters.tfm", {"expected both parameters and fixedparameters"}},
        // ITK allocated the declared B-spline grid and died ("double free or corruption").
        {"itk_bspline_huge_grid.tfm", {"line 3", "bsplinetransform_double_3_3", "takes 3000000000000000000 parameters, found 3"}},
        {"itk_bspline_huge_grid.h5", {"/transformgroup/0", "bsplinetransform_double_3_3", "parameters, found"}},
        // ITK would read whatever file the line names, relative to the transform's folder.
        {"itk_component_file.tfm", {"line 4", "componenttransformfile"}},
        // vnl allocated the declared name length and vector size before reading (std::bad_alloc).
        {"itk_matlab_huge_name.mat", {"matrix 1", "implausible name length 2147483647"}},
        {"itk_matlab_huge_vector.mat", {"matrix 1", "2147483647 values declared, the file holds 12"}},
        // fuzz_kitti_png: not a PNG, so OpenCV gave it to GDCM, which allocated a declared length (OOM).
        {"oom-ae05af06632694c7cde081c2a6b905aeadf4a875.png", {"not a kitti flow png", "png signature"}},
    };
    for (const auto& [name, needles] : cases) {
        const std::string message = test::lower(refusal_of(regressions() / name));
        INFO(message);
        for (const auto& needle : needles) CHECK(message.find(test::lower(needle)) != std::string::npos);
    }
}

TEST_CASE("fuzz regressions: a batch manifest with a number JSON cannot hold is refused before any job", "[io][fuzz][batch]") {
    // fuzz_batch_manifest: nlohmann::json throws out_of_range (not parse_error) for 1e400, which
    // escaped the manifest reader's one-line error naming the file and line.
    // The fuzzer's file also holds NUL bytes, refused first since issue 32; the number alone still
    // gets its one line.
    const fs::path found = regressions() / "crash-f97c72a287fda87c3643ea970cd5fb4641b71025.jsonl";
    test::TempDir dir;
    const fs::path number_only = dir / "jobs.jsonl";
    test::write_bytes(number_only, "{\"inpput\":1e400 {\"x\": [0, 2]}, \"output\": \"o.png\"}\n");
    for (const fs::path& manifest : {found, number_only}) {
        const test::RunResult run = test::run_gridwarp({"batch", "affine", manifest.string()});
        INFO(test::describe(run));
        CHECK(run.status == 2);
        CHECK(test::line_count(run.err) == 1);
        CHECK(run.err.find(manifest.string() + ": line 1") != std::string::npos);
    }
    const test::RunResult run = test::run_gridwarp({"batch", "affine", number_only.string()});
    CHECK(run.err.find(number_only.string() + ": line 1: not JSON") != std::string::npos);
    CHECK(run.err.find("1e400") != std::string::npos);
}

TEST_CASE("fuzz regressions: a manifest naming an option twice is refused before any job", "[io][fuzz][batch]") {
    // tests/data/hostile's manifest_duplicate_column.csv: a repeated column gave its option two values.
    test::TempDir dir;
    const std::vector<std::pair<std::string, std::string>> manifests = {
        {"jobs.csv", "input,output,output\nin.png,a.png,b.png\n"},
        {"jobs.tsv", "input\toutput\tinput\na.png\tb.png\tc.png\n"},
        {"jobs.jsonl", "{\"input\": \"a.png\", \"output\": \"b.png\", \"input\": \"c.png\"}\n"},
    };
    for (const auto& [name, text] : manifests) {
        test::write_bytes(dir / name, text);
        const test::RunResult run = test::run_gridwarp({"batch", "affine", (dir / name).string()});
        INFO(test::describe(run));
        CHECK(run.status == 2);
        CHECK(test::line_count(run.err) == 1);
        CHECK(run.err.find((dir / name).string() + ": line 1") != std::string::npos);
        CHECK((run.err.find("repeats column") != std::string::npos || run.err.find("appears twice") != std::string::npos));
    }
}

TEST_CASE("fuzz regressions: the checks refuse nothing ITK writes", "[io][fuzz]") {
    test::TempDir dir;
    SECTION("a rank-32 .npy (NumPy 1.x's limit) still reads") {
        std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
        for (int i = 0; i < 32; ++i) header += "1, ";
        header += "), }";
        header.append(((10 + header.size() + 1 + 63) / 64) * 64 - 10 - header.size() - 1, ' ');
        header += '\n';
        std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
        bytes += static_cast<char>(header.size() & 0xff);
        bytes += static_cast<char>(header.size() >> 8);
        bytes += header + std::string(4, '\0');
        CHECK(io::parse_npy(bytes, "rank32.npy").rank() == 32);
    }
    SECTION("a .flo displacement just below 2^24 and the unknown marks still read") {
        const std::vector<float> values = {16777215.0f, -3.5f, 1e10f, 0.0f, -2e9f, 1e9f};
        std::string bytes = "PIEH";
        for (std::int32_t v : {3, 1}) bytes.append(reinterpret_cast<const char*>(&v), 4);
        bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
        const auto flow = io::parse_flo(bytes, "edge.flo");
        const float* f = flow.field.data_as<float>();
        CHECK(f[0] == 16777215.0f);
        CHECK(f[1] == -3.5f);
        for (int i = 2; i < 6; ++i) CHECK(std::isnan(f[i]));
    }
    SECTION("ITK's text and Matlab encodings of the same affine give the same step") {
        const std::string text = "#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n"
                                 "Parameters: 1 0.5 0 0 1 0 0 0 2 1 2 3\nFixedParameters: 1 1 1\n";
        auto vector = [](const std::string& name, const std::vector<double>& values) {
            std::string out;
            const std::int32_t header[5] = {0, static_cast<std::int32_t>(values.size()), 1, 0,
                                            static_cast<std::int32_t>(name.size() + 1)};
            out.append(reinterpret_cast<const char*>(header), sizeof header);
            out += name + '\0';
            out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
            return out;
        };
        const std::string matlab = vector("AffineTransform_double_3_3", {1, 0.5, 0, 0, 1, 0, 0, 0, 2, 1, 2, 3}) +
                                   vector("fixed", {1, 1, 1});
        const auto from_text = io::parse_itk_transform(text, io::ItkTransformEncoding::Text, "a.tfm", 3);
        const auto from_matlab = io::parse_itk_transform(matlab, io::ItkTransformEncoding::Matlab, "a.mat", 3);
        REQUIRE(from_text);
        REQUIRE(from_matlab);
        REQUIRE(from_text->steps.size() == 1);
        REQUIRE(from_matlab->steps.size() == 1);
        CHECK(from_text->steps.front().affine->matrix == from_matlab->steps.front().affine->matrix);
        CHECK(from_text->steps.front().affine->offset == from_matlab->steps.front().affine->offset);
        // p' = M (p - c) + c + t with c = (1, 1, 1): offset = t + c - M c.
        CHECK(from_text->steps.front().affine->offset == std::vector<double>{0.5, 2, 2});
    }
    SECTION("a checked linear kind gridwarp does not compute is left to ITK") {
        const std::string text = "#Insight Transform File V1.0\nTransform: ScaleTransform_double_2_2\n"
                                 "Parameters: 2 3\nFixedParameters: 0 0\n";
        CHECK_FALSE(io::parse_itk_transform(text, io::ItkTransformEncoding::Text, "s.tfm", 2));
        test::write_bytes(dir / "s.tfm", text);
        const auto read = io::read_transform(dir / "s.tfm", 2, false);
        REQUIRE(read.steps.size() == 1);
        CHECK(read.steps[0].affine->matrix == std::vector<double>{2, 0, 0, 3});
    }
}
