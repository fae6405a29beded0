// Shared test helpers: fixture cases on disk, tolerant comparison, random tensors, the CLI.
#pragma once

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gridwarp/grid_sample.hpp"

namespace gridwarp::test {

std::filesystem::path data_dir();  // tests/data
std::filesystem::path binary();    // the built gridwarp executable (empty in a build without the io library)

// A case directory: case.json plus one .npy per input and output (the ONNX conformance layout).
struct FixtureCase {
    std::filesystem::path dir;
    nlohmann::json spec;
    std::vector<Tensor> inputs;
    std::vector<Tensor> outputs;
    std::vector<std::filesystem::path> input_files;
    std::vector<std::filesystem::path> output_files;
    double rtol = 0;
    double atol = 0;
};
std::vector<std::filesystem::path> case_dirs(const std::filesystem::path& root);
FixtureCase load_case(const std::filesystem::path& dir);
// GridSample options from a case's attributes (and the optional "fill").
SampleOptions case_options(const FixtureCase& c);
// Sample options of the given mode, padding, align_corners and fill (threads: the default).
SampleOptions options_for(Interpolation mode, Padding padding, bool align_corners, double fill = 0.0);

// Elementwise |actual - expected| <= atol + rtol * |expected| over real tensors (any dtype),
// NaN matching NaN. Returns "" when they match, else a description of the first mismatch.
std::string compare(const ConstTensorView& actual, const ConstTensorView& expected, double rtol, double atol);
// Exact equality of dtype, shape and every element (bitwise for floats, so -0 != +0 and NaN == NaN).
std::string compare_exact(const ConstTensorView& actual, const ConstTensorView& expected);

// Values of a real tensor as doubles, C order.
std::vector<double> as_doubles(const ConstTensorView& tensor);
// A tensor from doubles (rounded as convert_to does).
Tensor tensor_from(DType type, const Shape& shape, const std::vector<double>& values);
Tensor random_tensor(DType type, const Shape& shape, double lo, double hi, std::mt19937& rng);

// Runs the gridwarp binary with these arguments; returns the exit status and stderr.
struct RunResult {
    int status = -1;
    std::string err;
    std::string out;
};
RunResult run_gridwarp(const std::vector<std::string>& args);

// Files and directories.
void write_bytes(const std::filesystem::path& file, const std::string& bytes);
// Names in a directory, sorted (hidden files included: a leftover staging directory starts with '.').
std::vector<std::string> listing(const std::filesystem::path& dir);

// Checking runs of the binary.
std::string lower(std::string text);
std::size_t line_count(const std::string& text);
std::string describe(const RunResult& r);  // status, stdout and stderr, for INFO()
// A refusal, as every failed run must look: non-zero status, exactly one stderr line holding each of
// `needles` (case-insensitive), nothing on stdout, no output file, and the output's directory
// holding exactly what it held before (no staging directory left behind).
void require_refusal(const RunResult& r, const std::vector<std::string>& needles, const std::filesystem::path& output,
                     const std::vector<std::string>& directory_before);

// A fresh, empty temporary directory removed when the object goes away.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

}  // namespace gridwarp::test
