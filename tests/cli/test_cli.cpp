// The gridwarp command line, run as a real process (the built binary) through run_gridwarp().
// Expected values come from the fixture files in tests/data (ONNX backend data, the N-D oracle,
// PyTorch results); comparisons of two runs against each other are only used for properties
// (threads 1 vs 2, text theta vs .npy theta).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/npy.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// Small helpers

std::string file_bytes(const fs::path& file) { return io::read_file_bytes(file); }

std::string format_double(double value) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
    return buffer;
}

// "v" followed by the value: a string element standing for a number.
std::string label(double value) { return std::string(1, 'v').append(format_double(value)); }

std::string join_sizes(const std::vector<double>& values) {
    std::string text;
    for (double v : values) {
        if (!text.empty()) text += ",";
        text += std::to_string(static_cast<long long>(v));
    }
    return text;
}

// A successful run: exit status 0.
void require_success(const RunResult& r) {
    INFO(describe(r));
    REQUIRE(r.status == 0);
}

// First `count` items of the outermost axis of a C-ordered real tensor, as a new tensor.
Tensor leading(const Tensor& tensor, std::int64_t count) {
    const auto values = as_doubles(tensor.view());
    Shape shape = tensor.shape();
    const std::int64_t per_item = tensor.numel() / shape.front();
    shape.front() = count;
    return tensor_from(tensor.dtype(), shape, std::vector<double>(values.begin(), values.begin() + count * per_item));
}

// Writes the first matrix of theta (N, r, r+1) as text rows, optionally with the homogeneous last
// row; every float32 value is printed exactly (%.9g round-trips float32, %.17g float64).
std::string theta_text(const Tensor& theta, bool homogeneous, const std::string& last_row = "") {
    const auto values = as_doubles(theta.view());
    const std::int64_t rows = theta.shape().at(1);
    const std::int64_t columns = theta.shape().at(2);
    std::ostringstream text;
    text << "# theta, one row per line\n";
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < columns; ++j) {
            char buffer[64];
            std::snprintf(buffer, sizeof buffer, "%.17g", values[static_cast<std::size_t>(i * columns + j)]);
            text << (j ? " " : "") << buffer;
        }
        text << "\n";
    }
    if (homogeneous) {
        if (!last_row.empty()) {
            text << last_row << "\n";
        } else {
            for (std::int64_t j = 0; j < columns; ++j) text << (j ? " " : "") << (j == columns - 1 ? "1" : "0");
            text << "\n";
        }
    }
    return text.str();
}

// The arguments that reproduce a fixture case from the command line.
std::vector<std::string> case_arguments(const FixtureCase& c, const fs::path& output) {
    const auto& attributes = c.spec.at("attributes");
    const std::string op = c.spec.at("op").get<std::string>();
    std::vector<std::string> args;
    if (op == "AffineGrid") {
        args = {"grid", "--theta", c.input_files.at(0).string(), "--size", join_sizes(as_doubles(c.inputs.at(1).view())),
                "--output", output.string()};
    } else {
        REQUIRE(op == "GridSample");
        args = {"sample", "--input", c.input_files.at(0).string(), "--grid", c.input_files.at(1).string(), "--output",
                output.string()};
        if (attributes.contains("mode")) {
            args.push_back("--mode");
            args.push_back(attributes.at("mode").get<std::string>());
        }
        if (attributes.contains("padding_mode")) {
            args.push_back("--padding");
            args.push_back(attributes.at("padding_mode").get<std::string>());
        }
        if (c.spec.contains("fill")) {
            args.push_back("--fill");
            args.push_back(format_double(c.spec.at("fill").get<double>()));
        }
    }
    if (attributes.value("align_corners", 0) != 0) args.push_back("--align-corners");
    return args;
}

// Runs one fixture case through the binary and checks its output against the case's expected output.
void check_case_from_command_line(const fs::path& dir) {
    INFO("case " << dir.parent_path().filename().string() << "/" << dir.filename().string());
    const FixtureCase c = load_case(dir);
    TempDir temp;
    const fs::path output = temp / "out.npy";
    const RunResult r = run_gridwarp(case_arguments(c, output));
    require_success(r);
    CHECK(r.out.empty());
    CHECK(r.err.empty());
    REQUIRE(fs::exists(output));
    const Tensor actual = io::read_npy(output);
    CHECK(compare(actual.view(), c.outputs.at(0).view(), c.rtol, c.atol) == "");
    CHECK(listing(temp.path()) == std::vector<std::string>{"out.npy"});
}

fs::path onnx_case(const std::string& name) { return data_dir() / "onnx" / name; }

// A valid 2-D sampling problem: X (1, 1, 3, 2) and grid (1, 2, 4, 2), float32 (ONNX bilinear case).
struct SampleFiles {
    fs::path input = onnx_case("test_gridsample_bilinear") / "input_0.npy";
    fs::path grid = onnx_case("test_gridsample_bilinear") / "input_1.npy";
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// 1. Fixture cases from the command line

TEST_CASE("every ONNX conformance case is reproduced by the command line", "[cli][onnx]") {
    const auto dirs = case_dirs(data_dir() / "onnx");
    REQUIRE(dirs.size() == 26);
    std::size_t grids = 0;
    std::size_t samples = 0;
    for (const auto& dir : dirs) {
        const std::string op = load_case(dir).spec.at("op").get<std::string>();
        (op == "AffineGrid" ? grids : samples) += 1;
        check_case_from_command_line(dir);
    }
    CHECK(grids == 8);
    CHECK(samples == 18);
}

TEST_CASE("a sample of the N-D oracle cases, and every case with a fill, pass through the command line",
          "[cli][oracle]") {
    const auto dirs = case_dirs(data_dir() / "oracle");
    REQUIRE(dirs.size() >= 72);
    std::size_t with_fill = 0;
    for (std::size_t i = 0; i < dirs.size(); ++i) {
        const FixtureCase c = load_case(dirs[i]);
        const bool nonzero_fill = c.spec.value("fill", 0.0) != 0.0;
        with_fill += nonzero_fill ? 1 : 0;
        if (i % 4 == 0 || nonzero_fill) check_case_from_command_line(dirs[i]);
    }
    CHECK(with_fill >= 12);
}

TEST_CASE("a sample of the PyTorch cases pass through the command line", "[cli][torch]") {
    const auto dirs = case_dirs(data_dir() / "torch");
    REQUIRE(dirs.size() >= 30);
    for (std::size_t i = 0; i < dirs.size(); i += 4) check_case_from_command_line(dirs[i]);
}

// ---------------------------------------------------------------------------------------------
// 2. Text theta

TEST_CASE("a text theta gives the grid of the same theta as .npy", "[cli][grid][text]") {
    // theta[0] of the ONNX 2-D case, expected grid output_0[0].
    const FixtureCase c = load_case(onnx_case("test_affine_grid_2d"));
    const Tensor theta = leading(c.inputs.at(0), 1);  // float32 (1, 2, 3)
    REQUIRE(theta.dtype() == DType::Float32);
    const Tensor expected = leading(c.outputs.at(0), 1);
    auto size = as_doubles(c.inputs.at(1).view());
    size[0] = 1;
    const std::string size_arg = join_sizes(size);

    TempDir temp;
    write_bytes(temp / "theta.txt", theta_text(theta, false));
    io::write_npy(temp / "theta.npy", theta.view());
    const Tensor theta64 = convert_to(theta.view(), DType::Float64);
    io::write_npy(temp / "theta64.npy", theta64.view());

    SECTION("float32 by default, equal to the float32 .npy theta") {
        require_success(run_gridwarp({"grid", "--theta", (temp / "theta.txt").string(), "--size", size_arg, "--output",
                                      (temp / "text.npy").string()}));
        require_success(run_gridwarp({"grid", "--theta", (temp / "theta.npy").string(), "--size", size_arg, "--output",
                                      (temp / "npy.npy").string()}));
        const Tensor from_text = io::read_npy(temp / "text.npy");
        const Tensor from_npy = io::read_npy(temp / "npy.npy");
        CHECK(from_text.dtype() == DType::Float32);
        CHECK(compare(from_text.view(), expected.view(), c.rtol, c.atol) == "");
        CHECK(compare_exact(from_text.view(), from_npy.view()) == "");
    }
    SECTION("--dtype float64 gives float64, equal to the float64 .npy theta") {
        require_success(run_gridwarp({"grid", "--theta", (temp / "theta.txt").string(), "--size", size_arg, "--output",
                                      (temp / "text.npy").string(), "--dtype", "float64"}));
        require_success(run_gridwarp({"grid", "--theta", (temp / "theta64.npy").string(), "--size", size_arg,
                                      "--output", (temp / "npy.npy").string()}));
        const Tensor from_text = io::read_npy(temp / "text.npy");
        const Tensor from_npy = io::read_npy(temp / "npy.npy");
        CHECK(from_text.dtype() == DType::Float64);
        const Tensor expected64 = convert_to(expected.view(), DType::Float64);
        CHECK(compare(from_text.view(), expected64.view(), c.rtol, c.atol) == "");
        CHECK(compare_exact(from_text.view(), from_npy.view()) == "");
    }
    SECTION("a 3x3 homogeneous matrix is accepted") {
        write_bytes(temp / "theta_h.txt", theta_text(theta, true));
        require_success(run_gridwarp({"grid", "--theta", (temp / "theta_h.txt").string(), "--size", size_arg,
                                      "--output", (temp / "text.npy").string()}));
        const Tensor from_text = io::read_npy(temp / "text.npy");
        CHECK(compare(from_text.view(), expected.view(), c.rtol, c.atol) == "");
    }
}

TEST_CASE("a 4x4 homogeneous text theta gives the 3-D grid", "[cli][grid][text]") {
    const FixtureCase c = load_case(onnx_case("test_affine_grid_3d_align_corners"));
    const Tensor theta = leading(c.inputs.at(0), 1);  // (1, 3, 4)
    REQUIRE(theta.shape() == Shape{1, 3, 4});
    const Tensor expected = leading(c.outputs.at(0), 1);
    auto size = as_doubles(c.inputs.at(1).view());
    size[0] = 1;

    TempDir temp;
    write_bytes(temp / "theta.txt", theta_text(theta, true));
    require_success(run_gridwarp({"grid", "--theta", (temp / "theta.txt").string(), "--size", join_sizes(size),
                                  "--output", (temp / "grid.npy").string(), "--align-corners"}));
    const Tensor actual = io::read_npy(temp / "grid.npy");
    CHECK(compare(actual.view(), expected.view(), c.rtol, c.atol) == "");
}

TEST_CASE("a text theta of the wrong form is refused", "[cli][grid][text][errors]") {
    const FixtureCase c = load_case(onnx_case("test_affine_grid_2d"));
    const Tensor theta = leading(c.inputs.at(0), 1);
    TempDir temp;
    const fs::path output = temp / "grid.npy";

    SECTION("a homogeneous matrix whose last row is not 0 0 1") {
        for (const char* bad_row : {"0 0 2", "0.5 0 1", "0 0 0"}) {
            INFO("last row " << bad_row);
            write_bytes(temp / "theta.txt", theta_text(theta, true, bad_row));
            const auto before = listing(temp.path());
            const RunResult r = run_gridwarp(
                {"grid", "--theta", (temp / "theta.txt").string(), "--size", "1,1,4,5", "--output", output.string()});
            require_refusal(r, {"theta.txt", "last row"}, output, before);
        }
    }
    SECTION("a matrix whose shape does not fit --size") {
        write_bytes(temp / "theta.txt", "1 0\n0 1\n");
        const auto before = listing(temp.path());
        const RunResult r = run_gridwarp(
            {"grid", "--theta", (temp / "theta.txt").string(), "--size", "1,1,4,5", "--output", output.string()});
        require_refusal(r, {"theta.txt", "2x2"}, output, before);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Errors

TEST_CASE("unreadable inputs are refused with one line naming the file", "[cli][errors]") {
    const SampleFiles good;
    TempDir temp;
    const fs::path output = temp / "out.npy";

    SECTION("missing input file") {
        const auto before = listing(temp.path());
        const fs::path missing = temp / "missing.npy";
        require_refusal(run_gridwarp({"sample", "--input", missing.string(), "--grid", good.grid.string(), "--output",
                                      output.string()}),
                        {missing.string(), "no such file"}, output, before);
    }
    SECTION("missing grid file") {
        const auto before = listing(temp.path());
        const fs::path missing = temp / "missing_grid.npy";
        require_refusal(run_gridwarp({"sample", "--input", good.input.string(), "--grid", missing.string(), "--output",
                                      output.string()}),
                        {missing.string(), "no such file"}, output, before);
    }
    SECTION("missing theta file") {
        const auto before = listing(temp.path());
        const fs::path missing = temp / "missing_theta.npy";
        require_refusal(
            run_gridwarp({"grid", "--theta", missing.string(), "--size", "1,1,4,4", "--output", output.string()}),
            {missing.string(), "no such file"}, output, before);
    }
    SECTION("a corrupt .npy (garbage bytes)") {
        const fs::path corrupt = temp / "corrupt.npy";
        write_bytes(corrupt, std::string("this is not a numpy file at all \x01\x02\x03\xff", 36));
        const auto before = listing(temp.path());
        require_refusal(run_gridwarp({"sample", "--input", corrupt.string(), "--grid", good.grid.string(), "--output",
                                      output.string()}),
                        {corrupt.string(), "npy"}, output, before);
    }
    SECTION("a truncated .npy (data cut short)") {
        const std::string whole = file_bytes(good.grid);
        const fs::path truncated = temp / "truncated.npy";
        write_bytes(truncated, whole.substr(0, whole.size() - 5));
        const auto before = listing(temp.path());
        require_refusal(run_gridwarp({"sample", "--input", good.input.string(), "--grid", truncated.string(),
                                      "--output", output.string()}),
                        {truncated.string(), "truncated"}, output, before);
    }
    SECTION("a truncated .npy (header cut short)") {
        const std::string whole = file_bytes(good.input);
        const fs::path truncated = temp / "truncated.npy";
        write_bytes(truncated, whole.substr(0, 30));
        const auto before = listing(temp.path());
        require_refusal(run_gridwarp({"sample", "--input", truncated.string(), "--grid", good.grid.string(),
                                      "--output", output.string()}),
                        {truncated.string(), "truncated"}, output, before);
    }
}

TEST_CASE("inputs that do not fit together are refused with one line naming them", "[cli][errors]") {
    const SampleFiles good;
    const Tensor input = io::read_npy(good.input);  // (1, 1, 3, 2)
    REQUIRE(input.shape() == Shape{1, 1, 3, 2});
    std::mt19937 rng(7);
    TempDir temp;
    const fs::path output = temp / "out.npy";

    auto refuse_grid = [&](const Tensor& grid, const std::string& name, std::vector<std::string> needles) {
        const fs::path grid_file = temp / name;
        io::write_npy(grid_file, grid.view());
        const auto before = listing(temp.path());
        needles.push_back(grid_file.string());
        require_refusal(run_gridwarp({"sample", "--input", good.input.string(), "--grid", grid_file.string(),
                                      "--output", output.string()}),
                        needles, output, before);
    };

    SECTION("grid N differs from input N") {
        refuse_grid(random_tensor(DType::Float32, {2, 2, 4, 2}, -1, 1, rng), "grid_n2.npy", {"N"});
    }
    SECTION("grid's last axis is not the spatial rank") {
        refuse_grid(random_tensor(DType::Float32, {1, 2, 4, 3}, -1, 1, rng), "grid_last3.npy", {"3"});
    }
    SECTION("grid rank does not match the input's rank") {
        // A consistent 3-D grid (last axis 3) for a 2-D input.
        refuse_grid(random_tensor(DType::Float32, {1, 2, 2, 2, 3}, -1, 1, rng), "grid_3d.npy",
                    {"grid must have shape (N, O1..O2, 2)", "(1, 2, 2, 2, 3)"});
    }
    SECTION("a non-floating grid dtype") {
        refuse_grid(tensor_from(DType::Int32, {1, 2, 4, 2}, std::vector<double>(16, 0.0)), "grid_int.npy", {"int32"});
    }
    SECTION("a string input with --mode linear") {
        Tensor strings(DType::String, {1, 1, 3, 2});
        auto* values = strings.data_as<std::string>();
        for (int i = 0; i < 6; ++i) values[i] = std::string(1, 's').append(std::to_string(i));
        const fs::path string_file = temp / "strings.npy";
        io::write_npy(string_file, strings.view());
        const auto before = listing(temp.path());
        require_refusal(run_gridwarp({"sample", "--input", string_file.string(), "--grid", good.grid.string(),
                                      "--output", output.string(), "--mode", "linear"}),
                        {string_file.string(), "string", "nearest"}, output, before);
    }
}

TEST_CASE("string input with --mode nearest works", "[cli][sample]") {
    // Nearest sampling of strings: positions from the ONNX nearest case, values picked by hand from
    // the fixture: the float output tells which input element each output point took.
    const FixtureCase c = load_case(onnx_case("test_gridsample_nearest"));
    const auto x = as_doubles(c.inputs.at(0).view());
    const auto y = as_doubles(c.outputs.at(0).view());
    Tensor strings(DType::String, c.inputs.at(0).shape());
    for (std::size_t i = 0; i < x.size(); ++i) strings.data_as<std::string>()[i] = label(x[i]);
    TempDir temp;
    io::write_npy(temp / "strings.npy", strings.view());
    require_success(run_gridwarp({"sample", "--input", (temp / "strings.npy").string(), "--grid",
                                  c.input_files.at(1).string(), "--output", (temp / "out.npy").string(), "--mode",
                                  "nearest"}));
    const Tensor out = io::read_npy(temp / "out.npy");
    REQUIRE(out.dtype() == DType::String);
    REQUIRE(out.numel() == static_cast<std::int64_t>(y.size()));
    for (std::size_t i = 0; i < y.size(); ++i) {
        INFO("output element " << i);
        const std::string& actual = out.data_as<std::string>()[i];
        if (y[i] == 0.0) {
            // Either the input's 0 or a point outside the input (zeros padding: "" for strings).
            CHECK((actual.empty() || actual == label(0.0)));
        } else {
            REQUIRE(std::count(x.begin(), x.end(), y[i]) == 1);
            CHECK(actual == label(y[i]));
        }
    }
}

TEST_CASE("bad option values are refused with one line naming the option", "[cli][errors]") {
    const SampleFiles good;
    const fs::path theta = onnx_case("test_affine_grid_2d") / "input_0.npy";  // (2, 2, 3)
    TempDir temp;
    const fs::path output = temp / "out.npy";
    const auto before = listing(temp.path());
    auto sample = [&](std::vector<std::string> extra) {
        std::vector<std::string> args{"sample", "--input", good.input.string(), "--grid", good.grid.string(),
                                      "--output", output.string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_gridwarp(args);
    };

    SECTION("unknown --mode") {
        require_refusal(sample({"--mode", "quadratic"}), {"--mode", "quadratic", "linear"}, output, before);
    }
    SECTION("unknown --padding") {
        require_refusal(sample({"--padding", "mirror"}), {"--padding", "mirror", "reflection"}, output, before);
    }
    SECTION("--size with fewer than 3 values") {
        require_refusal(run_gridwarp({"grid", "--theta", theta.string(), "--size", "2,3", "--output", output.string()}),
                        {"--size", "2 values"}, output, before);
        require_refusal(run_gridwarp({"grid", "--theta", theta.string(), "--size", "2", "--output", output.string()}),
                        {"--size", "1 values"}, output, before);
    }
    SECTION("theta's shape does not match --size") {
        // N differs.
        require_refusal(
            run_gridwarp({"grid", "--theta", theta.string(), "--size", "1,3,5,6", "--output", output.string()}),
            {theta.string(), "N"}, output, before);
        // A 3-D size for a 2-D theta.
        require_refusal(
            run_gridwarp({"grid", "--theta", theta.string(), "--size", "2,3,4,5,6", "--output", output.string()}),
            {theta.string(), "(2, 2, 3)"}, output, before);
    }
    SECTION("a non-floating --dtype") {
        require_refusal(run_gridwarp({"grid", "--theta", theta.string(), "--size", "2,3,5,6", "--output",
                                      output.string(), "--dtype", "int32"}),
                        {"--dtype", "int32"}, output, before);
        require_refusal(run_gridwarp({"grid", "--theta", theta.string(), "--size", "2,3,5,6", "--output",
                                      output.string(), "--dtype", "float99"}),
                        {"--dtype", "float99"}, output, before);
    }
}

TEST_CASE("command-line mistakes exit with 2 and name the nearest option or command", "[cli][errors][usage]") {
    const SampleFiles good;
    TempDir temp;
    const fs::path output = temp / "out.npy";
    const auto before = listing(temp.path());
    const std::vector<std::string> sample{"sample", "--input", good.input.string(), "--grid", good.grid.string(), "--output", output.string()};
    const auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = sample;
        args.insert(args.end(), extra.begin(), extra.end());
        return run_gridwarp(args);
    };
    const auto require_usage_error = [&](const RunResult& r, const std::vector<std::string>& needles) {
        require_refusal(r, needles, output, before);
        CHECK(r.status == 2);
    };
    SECTION("a value that does not convert") { require_usage_error(with({"--fill", "abc"}), {"--fill", "abc"}); }
    SECTION("a required option missing") {
        require_usage_error(run_gridwarp({"sample", "--input", good.input.string(), "--output", output.string()}), {"--grid"});
    }
    SECTION("a mistyped option, with its option's value") {
        require_usage_error(with({"--paddng", "border"}), {"unknown option '--paddng'", "did you mean '--padding'"});
        require_usage_error(with({"--mode=nearest", "--alignn-corners"}), {"'--alignn-corners'", "'--align-corners'"});
    }
    SECTION("a mistyped option before a required one") {
        require_usage_error(run_gridwarp({"affine", "--rotat", "5"}), {"unknown option '--rotat'", "did you mean '--rotate'"});
    }
    SECTION("an option nothing is near") { require_usage_error(with({"--zzzzzzzz"}), {"unknown option '--zzzzzzzz'"}); }
    SECTION("a mistyped mode or padding, with the nearest name") {
        require_usage_error(with({"--mode", "cubc"}), {"--mode", "'cubc'", "did you mean 'cubic'"});
        require_usage_error(with({"--mode", "lanczoz"}), {"did you mean 'lanczos'"});
        require_usage_error(with({"--mode", "xyzzy"}), {"--mode", "'xyzzy'", "BSpline"});
        require_usage_error(with({"--padding", "zero"}), {"--padding", "'zero'", "did you mean 'zeros'"});
        require_usage_error(run_gridwarp({"resample", "-i", good.input.string(), "-o", output.string(), "-n", "BSpine[3]"}),
                            {"--interpolation", "did you mean 'BSpline'"});
    }
    SECTION("a mistyped command") {
        require_usage_error(run_gridwarp({"afine", "-i", "x.png"}), {"unknown command 'afine'", "did you mean 'affine'"});
        require_usage_error(run_gridwarp({"resampel"}), {"did you mean 'resample'"});
    }
    SECTION("an extra argument") { require_usage_error(with({"surplus"}), {"surplus"}); }
    SECTION("help and version exit with 0") {
        CHECK(run_gridwarp({"sample", "--help"}).status == 0);
        CHECK(run_gridwarp({"--version"}).status == 0);
    }
}

TEST_CASE("an integer .npy theta needs --dtype", "[cli][grid][errors]") {
    // Identity theta as int64; expected grid from the definition (align_corners=0):
    // x_j = (2j + 1) / W - 1, y_i = (2i + 1) / H - 1, grid[0, i, j] = (x_j, y_i).
    TempDir temp;
    const fs::path theta = temp / "theta_int.npy";
    io::write_npy(theta, tensor_from(DType::Int64, {1, 2, 3}, {1, 0, 0, 0, 1, 0}).view());
    const fs::path output = temp / "grid.npy";
    const auto before = listing(temp.path());
    require_refusal(run_gridwarp({"grid", "--theta", theta.string(), "--size", "1,1,3,4", "--output", output.string()}),
                    {theta.string(), "int64", "--dtype"}, output, before);

    Tensor complex_theta(DType::Complex64, {1, 2, 3});
    io::write_npy(temp / "theta_complex.npy", complex_theta.view());
    const auto with_complex = listing(temp.path());
    require_refusal(run_gridwarp({"grid", "--theta", (temp / "theta_complex.npy").string(), "--size", "1,1,3,4",
                                  "--output", output.string(), "--dtype", "float32"}),
                    {(temp / "theta_complex.npy").string(), "complex"}, output, with_complex);

    require_success(run_gridwarp(
        {"grid", "--theta", theta.string(), "--size", "1,1,3,4", "--output", output.string(), "--dtype", "float32"}));
    std::vector<double> expected;
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 4; ++j) {
            expected.push_back((2.0 * j + 1) / 4 - 1);
            expected.push_back((2.0 * i + 1) / 3 - 1);
        }
    }
    const Tensor actual = io::read_npy(output);
    CHECK(compare(actual.view(), tensor_from(DType::Float32, {1, 3, 4, 2}, expected).view(), 1e-6, 1e-7) == "");
}

TEST_CASE("paths that cannot be resolved are not taken for the input", "[cli][errors]") {
    // loop -> loop: neither loop/x.npy nor loop/y.npy can be resolved; the run must fail because
    // the input cannot be read, not claim that the output would overwrite it.
    TempDir temp;
    fs::create_directory_symlink("loop", temp / "loop");
    const fs::path input = temp / "loop" / "x.npy";
    const fs::path output = temp / "loop" / "y.npy";
    const SampleFiles good;
    const auto before = listing(temp.path());
    const RunResult r =
        run_gridwarp({"sample", "--input", input.string(), "--grid", good.grid.string(), "--output", output.string()});
    INFO(describe(r));
    CHECK(r.status != 0);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find(input.string()) != std::string::npos);
    CHECK(r.err.find("overwrite") == std::string::npos);
    CHECK(listing(temp.path()) == before);
}

TEST_CASE("the output may not overwrite an input", "[cli][errors]") {
    const SampleFiles good;
    TempDir temp;
    const fs::path input = temp / "x.npy";
    const fs::path grid = temp / "g.npy";
    fs::copy_file(good.input, input);
    fs::copy_file(good.grid, grid);
    const std::string input_bytes = file_bytes(input);
    const std::string grid_bytes = file_bytes(grid);
    const auto before = listing(temp.path());

    auto refused = [&](const RunResult& r, const fs::path& named) {
        INFO(describe(r));
        CHECK(r.status != 0);
        CHECK(line_count(r.err) == 1);
        CHECK(r.err.find(named.string()) != std::string::npos);
        CHECK(lower(r.err).find("overwrite") != std::string::npos);
        CHECK(file_bytes(input) == input_bytes);
        CHECK(file_bytes(grid) == grid_bytes);
        CHECK(listing(temp.path()) == before);
    };

    SECTION("output is the input") {
        refused(run_gridwarp({"sample", "--input", input.string(), "--grid", grid.string(), "--output", input.string()}),
                input);
    }
    SECTION("output is the input, spelled differently") {
        const fs::path other_spelling = temp.path() / "." / "x.npy";
        refused(run_gridwarp({"sample", "--input", input.string(), "--grid", grid.string(), "--output",
                              other_spelling.string()}),
                other_spelling);
    }
    SECTION("output is a hard link to the input") {
        const fs::path link = temp / "link.npy";
        fs::create_hard_link(input, link);
        const auto with_link = listing(temp.path());
        const RunResult r =
            run_gridwarp({"sample", "--input", input.string(), "--grid", grid.string(), "--output", link.string()});
        INFO(describe(r));
        CHECK(r.status != 0);
        CHECK(line_count(r.err) == 1);
        CHECK(file_bytes(input) == input_bytes);
        CHECK(listing(temp.path()) == with_link);
    }
    SECTION("output is the grid") {
        refused(run_gridwarp({"sample", "--input", input.string(), "--grid", grid.string(), "--output", grid.string()}),
                grid);
    }
    SECTION("grid output is the theta") {
        const fs::path theta = temp / "theta.npy";
        fs::copy_file(onnx_case("test_affine_grid_2d") / "input_0.npy", theta);
        const std::string theta_bytes = file_bytes(theta);
        const RunResult r =
            run_gridwarp({"grid", "--theta", theta.string(), "--size", "2,3,5,6", "--output", theta.string()});
        INFO(describe(r));
        CHECK(r.status != 0);
        CHECK(line_count(r.err) == 1);
        CHECK(r.err.find(theta.string()) != std::string::npos);
        CHECK(file_bytes(theta) == theta_bytes);
    }
}

TEST_CASE("output into a directory that does not exist is refused", "[cli][errors]") {
    const SampleFiles good;
    TempDir temp;
    const fs::path output = temp / "no_such_dir" / "out.npy";
    const auto before = listing(temp.path());
    const RunResult r =
        run_gridwarp({"sample", "--input", good.input.string(), "--grid", good.grid.string(), "--output", output.string()});
    require_refusal(r, {output.string(), "directory"}, output, {});
    CHECK(listing(temp.path()) == before);
    CHECK_FALSE(fs::exists(output.parent_path()));

    const RunResult g = run_gridwarp({"grid", "--theta", (onnx_case("test_affine_grid_2d") / "input_0.npy").string(),
                                      "--size", "2,3,5,6", "--output", output.string()});
    require_refusal(g, {output.string(), "directory"}, output, {});
    CHECK(listing(temp.path()) == before);
}

TEST_CASE("an existing output file is replaced only on success", "[cli][errors]") {
    const FixtureCase c = load_case(onnx_case("test_gridsample_bilinear"));
    TempDir temp;
    const fs::path output = temp / "out.npy";
    const std::string old_contents = "old contents, not even a .npy file\n";
    write_bytes(output, old_contents);
    const auto before = listing(temp.path());

    // Failures of every kind leave the old file as it was, and no temporary beside it.
    const std::vector<std::vector<std::string>> failing = {
        {"sample", "--input", (temp / "missing.npy").string(), "--grid", c.input_files.at(1).string(), "--output",
         output.string()},
        {"sample", "--input", c.input_files.at(0).string(), "--grid", c.input_files.at(1).string(), "--output",
         output.string(), "--mode", "bogus"},
        {"sample", "--input", c.input_files.at(0).string(), "--grid",
         (onnx_case("test_gridsample_volumetric_bilinear_align_corners_0") / "input_1.npy").string(), "--output",
         output.string()},
        {"grid", "--theta", (onnx_case("test_affine_grid_2d") / "input_0.npy").string(), "--size", "1,1,5,6",
         "--output", output.string()},
    };
    for (const auto& args : failing) {
        const RunResult r = run_gridwarp(args);
        INFO(describe(r));
        CHECK(r.status != 0);
        CHECK(line_count(r.err) == 1);
        CHECK(file_bytes(output) == old_contents);
        CHECK(listing(temp.path()) == before);
    }

    // Success replaces it with the result.
    require_success(run_gridwarp(
        {"sample", "--input", c.input_files.at(0).string(), "--grid", c.input_files.at(1).string(), "--output", output.string()}));
    const Tensor actual = io::read_npy(output);
    CHECK(compare(actual.view(), c.outputs.at(0).view(), c.rtol, c.atol) == "");
    CHECK(listing(temp.path()) == before);
}

// ---------------------------------------------------------------------------------------------
// 4. Help, version, aliases, threads, quiet

TEST_CASE("each subcommand's help shows examples", "[cli][help]") {
    for (const char* command : {"sample", "grid"}) {
        INFO("gridwarp " << command << " --help");
        const RunResult r = run_gridwarp({command, "--help"});
        INFO(describe(r));
        CHECK(r.status == 0);
        const auto at = r.out.find("Examples:");
        REQUIRE(at != std::string::npos);
        CHECK(r.out.find(std::string("gridwarp ") + command + " ", at) != std::string::npos);
    }
    const RunResult top = run_gridwarp({"--help"});
    CHECK(top.status == 0);
    CHECK(top.out.find("sample") != std::string::npos);
    CHECK(top.out.find("grid") != std::string::npos);
}

TEST_CASE("the version flag prints the project version", "[cli][version]") {
    // The version the top-level CMakeLists.txt declares.
    const std::string cmake = file_bytes(data_dir().parent_path().parent_path() / "CMakeLists.txt");
    std::smatch match;
    REQUIRE(std::regex_search(cmake, match, std::regex(R"(project\s*\(\s*gridwarp\s+VERSION\s+([0-9][0-9.]*))")));
    const std::string version = match[1].str();
    const RunResult r = run_gridwarp({"--version"});
    INFO(describe(r));
    CHECK(r.status == 0);
    CHECK(r.out == "gridwarp " + version + "\n");
}

TEST_CASE("mode aliases bilinear, bicubic and trilinear work", "[cli][aliases]") {
    const std::vector<std::pair<std::string, std::string>> aliases = {
        {"bilinear", "test_gridsample_bilinear"},
        {"bilinear", "test_gridsample_bilinear_align_corners_1_additional_1"},
        {"bicubic", "test_gridsample_bicubic"},
        {"bicubic", "test_gridsample_bicubic_align_corners_1_additional_1"},
        {"trilinear", "test_gridsample_volumetric_bilinear_align_corners_0"},
        {"trilinear", "test_gridsample_volumetric_bilinear_align_corners_1"},
    };
    for (const auto& [alias, name] : aliases) {
        INFO("--mode " << alias << " on " << name);
        const FixtureCase c = load_case(onnx_case(name));
        TempDir temp;
        auto args = case_arguments(c, temp / "out.npy");
        const auto mode = std::find(args.begin(), args.end(), "--mode");
        REQUIRE(mode != args.end());
        *(mode + 1) = alias;
        require_success(run_gridwarp(args));
        const Tensor actual = io::read_npy(temp / "out.npy");
        CHECK(compare(actual.view(), c.outputs.at(0).view(), c.rtol, c.atol) == "");
    }
}

TEST_CASE("one and two threads give identical outputs", "[cli][threads]") {
    std::mt19937 rng(12345);
    TempDir temp;
    const Tensor x = random_tensor(DType::Float32, {2, 3, 37, 41}, -5, 5, rng);
    const Tensor grid = random_tensor(DType::Float32, {2, 29, 31, 2}, -1.3, 1.3, rng);
    io::write_npy(temp / "x.npy", x.view());
    io::write_npy(temp / "g.npy", grid.view());
    for (const char* mode : {"linear", "nearest", "cubic"}) {
        for (const char* padding : {"zeros", "border", "reflection"}) {
            INFO(mode << " " << padding);
            std::vector<std::string> args{"sample", "-i", (temp / "x.npy").string(), "-g", (temp / "g.npy").string(),
                                          "--mode", mode, "--padding", padding, "--threads"};
            auto one = args;
            one.insert(one.end(), {"1", "-o", (temp / "y1.npy").string()});
            auto two = args;
            two.insert(two.end(), {"2", "-o", (temp / "y2.npy").string()});
            require_success(run_gridwarp(one));
            require_success(run_gridwarp(two));
            const Tensor y1 = io::read_npy(temp / "y1.npy");
            const Tensor y2 = io::read_npy(temp / "y2.npy");
            CHECK(y1.shape() == Shape{2, 3, 29, 31});
            CHECK(compare_exact(y1.view(), y2.view()) == "");
        }
    }
    // The grid command too.
    const fs::path theta = onnx_case("test_affine_grid_3d") / "input_0.npy";
    require_success(run_gridwarp({"grid", "-t", theta.string(), "-s", "2,1,9,10,11", "-o", (temp / "a1.npy").string(),
                                  "--threads", "1"}));
    require_success(run_gridwarp({"grid", "-t", theta.string(), "-s", "2,1,9,10,11", "-o", (temp / "a2.npy").string(),
                                  "--threads", "2"}));
    CHECK(compare_exact(io::read_npy(temp / "a1.npy").view(), io::read_npy(temp / "a2.npy").view()) == "");
}

namespace {

// A .npy file written by hand (not by gridwarp's writer): float64 values given in C order, stored
// big- or little-endian, in C or Fortran order.
void write_float64_npy(const fs::path& file, const Shape& shape, const std::vector<double>& values, bool big_endian, bool fortran) {
    std::string shape_text = "(";
    for (const auto extent : shape) shape_text += std::to_string(extent) + ", ";
    std::string header = std::string("{'descr': '") + (big_endian ? ">" : "<") + "f8', 'fortran_order': " + (fortran ? "True" : "False") +
                         ", 'shape': " + shape_text + "), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::string bytes("\x93NUMPY\x01\x00", 8);
    bytes += static_cast<char>(header.size() & 0xff);
    bytes += static_cast<char>(header.size() >> 8);
    bytes += header;
    const Shape strides = contiguous_strides(shape);
    std::vector<std::int64_t> index(shape.size(), 0);
    for (std::size_t n = 0; n < values.size(); ++n) {
        // The n-th element in file order: C order, or the first axis fastest.
        std::int64_t offset = 0;
        for (std::size_t a = 0; a < shape.size(); ++a) offset += index[a] * strides[a];
        char element[8];
        std::memcpy(element, &values[static_cast<std::size_t>(offset)], 8);
        if (big_endian) std::reverse(element, element + 8);
        bytes.append(element, 8);
        for (std::size_t step = 0; step < shape.size(); ++step) {
            const std::size_t a = fortran ? step : shape.size() - 1 - step;
            if (++index[a] < shape[a]) break;
            index[a] = 0;
        }
    }
    std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("sample and affine read .npy in either byte order and either order alike", "[cli][npy]") {
    std::mt19937 rng(20261128);
    TempDir temp;
    const Shape shape{1, 2, 9, 11};
    const Tensor x = random_tensor(DType::Float64, shape, -5, 5, rng);
    const std::vector<double> values = as_doubles(x.view());
    io::write_npy(temp / "grid.npy", random_tensor(DType::Float32, {1, 7, 8, 2}, -1.2, 1.2, rng).view());
    std::string first_sampled, first_rotated;
    for (const bool big_endian : {false, true}) {
        for (const bool fortran : {false, true}) {
            INFO((big_endian ? "big" : "little") << "-endian, " << (fortran ? "Fortran" : "C") << " order");
            const fs::path input = temp / "x.npy";
            write_float64_npy(input, shape, values, big_endian, fortran);
            const std::string written = file_bytes(input);
            require_success(run_gridwarp({"sample", "-i", input.string(), "-g", (temp / "grid.npy").string(), "-o",
                                          (temp / "sampled.npy").string(), "--mode", "cubic"}));
            require_success(run_gridwarp({"affine", "-i", input.string(), "-o", (temp / "rotated.npy").string(), "--rotate", "10"}));
            CHECK(file_bytes(input) == written);  // the reader's byte swap stays in memory
            const std::string sampled = file_bytes(temp / "sampled.npy"), rotated = file_bytes(temp / "rotated.npy");
            if (first_sampled.empty()) {
                first_sampled = sampled, first_rotated = rotated;
                CHECK(io::read_npy(temp / "sampled.npy").shape() == Shape{1, 2, 7, 8});
                CHECK(io::read_npy(temp / "rotated.npy").shape() == shape);
            }
            CHECK(sampled == first_sampled);
            CHECK(rotated == first_rotated);
        }
    }
}

TEST_CASE("quiet runs print errors only, verbose runs report", "[cli][quiet]") {
    const FixtureCase c = load_case(onnx_case("test_gridsample_bilinear"));
    TempDir temp;
    auto sample = [&](const std::vector<std::string>& flags) {
        std::vector<std::string> args{"sample", "-i", c.input_files.at(0).string(), "-g", c.input_files.at(1).string(),
                                      "-o", (temp / "out.npy").string()};
        args.insert(args.end(), flags.begin(), flags.end());
        return run_gridwarp(args);
    };
    // -v has something to say, so the quiet runs below have something to suppress.
    const RunResult verbose = sample({"-v"});
    require_success(verbose);
    CHECK_FALSE(verbose.err.empty());
    CHECK(verbose.err.find("out.npy") != std::string::npos);

    for (const auto& flags : std::vector<std::vector<std::string>>{{"-q"}, {"--quiet"}, {"-q", "-v"}}) {
        fs::remove(temp / "out.npy");
        const RunResult r = sample(flags);
        INFO(flags.size() << " flags, first " << flags.front());
        require_success(r);
        CHECK(r.out.empty());
        CHECK(r.err.empty());
        const Tensor actual = io::read_npy(temp / "out.npy");
        CHECK(compare(actual.view(), c.outputs.at(0).view(), c.rtol, c.atol) == "");
    }
    const RunResult g = run_gridwarp({"grid", "-q", "-v", "-t", (onnx_case("test_affine_grid_2d") / "input_0.npy").string(),
                                      "-s", "2,3,5,6", "-o", (temp / "grid.npy").string()});
    require_success(g);
    CHECK(g.out.empty());
    CHECK(g.err.empty());

    // Errors still show under -q.
    fs::remove(temp / "out.npy");
    const RunResult failed = sample({"-q", "--mode", "bogus"});
    CHECK(failed.status != 0);
    CHECK(line_count(failed.err) == 1);
    CHECK_FALSE(fs::exists(temp / "out.npy"));
}
