#include "support/support.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "support/fixture_npy.hpp"

namespace gridwarp::test {

namespace fs = std::filesystem;

fs::path data_dir() { return GRIDWARP_TEST_DATA; }
fs::path binary() { return GRIDWARP_BINARY; }

std::vector<fs::path> case_dirs(const fs::path& root) {
    std::vector<fs::path> dirs;
    for (const auto& entry : fs::directory_iterator(root)) {
        if (entry.is_directory() && fs::exists(entry.path() / "case.json")) dirs.push_back(entry.path());
    }
    std::sort(dirs.begin(), dirs.end());
    return dirs;
}

FixtureCase load_case(const fs::path& dir) {
    FixtureCase c;
    c.dir = dir;
    c.spec = nlohmann::json::parse(read_whole_file(dir / "case.json"));
    for (const auto& input : c.spec.at("inputs")) {
        c.input_files.push_back(dir / input.at("file").get<std::string>());
        c.inputs.push_back(read_fixture_npy(c.input_files.back()));
    }
    for (const auto& output : c.spec.at("outputs")) {
        c.output_files.push_back(dir / output.at("file").get<std::string>());
        c.outputs.push_back(read_fixture_npy(c.output_files.back()));
    }
    c.rtol = c.spec.at("tolerance").at("rtol").get<double>();
    c.atol = c.spec.at("tolerance").at("atol").get<double>();
    return c;
}

SampleOptions options_for(Interpolation mode, Padding padding, bool align_corners, double fill) {
    SampleOptions options;
    options.mode = mode;
    options.padding = padding;
    options.align_corners = align_corners;
    options.fill = fill;
    return options;
}

SampleOptions case_options(const FixtureCase& c) {
    const auto& attributes = c.spec.at("attributes");
    SampleOptions options;
    if (attributes.contains("mode")) options.mode = parse_interpolation(attributes.at("mode").get<std::string>());
    if (attributes.contains("padding_mode")) options.padding = parse_padding(attributes.at("padding_mode").get<std::string>());
    options.align_corners = attributes.value("align_corners", 0) != 0;
    options.fill = c.spec.value("fill", 0.0);
    return options;
}

namespace {

template <class T>
double real_part(const T& value) {
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        return static_cast<float>(value);
    } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
        return value.real();
    } else {
        return static_cast<double>(value);
    }
}

template <class T>
double imag_part(const T& value) {
    if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
        return value.imag();
    } else {
        return 0.0;
    }
}

bool close(double actual, double expected, double rtol, double atol) {
    if (std::isnan(expected)) return std::isnan(actual);
    if (std::isinf(expected)) return actual == expected;
    return std::fabs(actual - expected) <= atol + rtol * std::fabs(expected);
}

std::string describe_index(std::int64_t flat, const Shape& shape) {
    Shape index(shape.size());
    for (std::size_t axis = shape.size(); axis-- > 0;) {
        index[axis] = flat % std::max<std::int64_t>(shape[axis], 1);
        flat /= std::max<std::int64_t>(shape[axis], 1);
    }
    return shape_to_string(index);
}

}  // namespace

std::string compare(const ConstTensorView& actual_view, const ConstTensorView& expected_view, double rtol, double atol) {
    if (actual_view.shape != expected_view.shape) {
        return "shape " + shape_to_string(actual_view.shape) + " != expected " + shape_to_string(expected_view.shape);
    }
    if (actual_view.dtype != expected_view.dtype) {
        return "dtype " + std::string(dtype_name(actual_view.dtype)) + " != expected " +
               std::string(dtype_name(expected_view.dtype));
    }
    const Tensor actual = Tensor::copy_of(actual_view);
    const Tensor expected = Tensor::copy_of(expected_view);
    return visit_dtype(actual.dtype(), [&](auto tag) -> std::string {
        using T = typename decltype(tag)::type;
        const T* a = actual.data_as<T>();
        const T* e = expected.data_as<T>();
        for (std::int64_t i = 0; i < actual.numel(); ++i) {
            bool ok;
            std::ostringstream message;
            message.precision(17);
            if constexpr (std::is_same_v<T, std::string>) {
                ok = a[i] == e[i];
                message << "'" << a[i] << "' != expected '" << e[i] << "'";
            } else {
                ok = close(real_part(a[i]), real_part(e[i]), rtol, atol) && close(imag_part(a[i]), imag_part(e[i]), rtol, atol);
                message << real_part(a[i]) << "+" << imag_part(a[i]) << "i != expected " << real_part(e[i]) << "+"
                        << imag_part(e[i]) << "i";
            }
            if (!ok) return "at " + describe_index(i, actual.shape()) + ": " + message.str();
        }
        return "";
    });
}

std::string compare_exact(const ConstTensorView& actual_view, const ConstTensorView& expected_view) {
    if (actual_view.shape != expected_view.shape || actual_view.dtype != expected_view.dtype) {
        return compare(actual_view, expected_view, 0, 0);
    }
    const Tensor actual = Tensor::copy_of(actual_view);
    const Tensor expected = Tensor::copy_of(expected_view);
    return visit_dtype(actual.dtype(), [&](auto tag) -> std::string {
        using T = typename decltype(tag)::type;
        const T* a = actual.data_as<T>();
        const T* e = expected.data_as<T>();
        for (std::int64_t i = 0; i < actual.numel(); ++i) {
            bool same;
            if constexpr (std::is_same_v<T, std::string>) {
                same = a[i] == e[i];
            } else if constexpr (std::is_same_v<T, bool>) {
                same = a[i] == e[i];
            } else {
                same = std::memcmp(&a[i], &e[i], sizeof(T)) == 0;
            }
            if (!same) {
                std::ostringstream message;
                message.precision(17);
                if constexpr (std::is_same_v<T, std::string>) {
                    message << "'" << a[i] << "' != '" << e[i] << "'";
                } else {
                    message << real_part(a[i]) << " != " << real_part(e[i]);
                }
                return "at " + describe_index(i, actual.shape()) + ": " + message.str();
            }
        }
        return "";
    });
}

std::vector<double> as_doubles(const ConstTensorView& tensor) {
    const Tensor converted = convert_to(tensor, DType::Float64);
    const double* values = converted.data_as<double>();
    return std::vector<double>(values, values + converted.numel());
}

Tensor tensor_from(DType type, const Shape& shape, const std::vector<double>& values) {
    Tensor source(DType::Float64, shape);
    if (static_cast<std::int64_t>(values.size()) != source.numel()) {
        throw std::invalid_argument("tensor_from: " + std::to_string(values.size()) + " values for shape " +
                                    shape_to_string(shape));
    }
    std::copy(values.begin(), values.end(), source.data_as<double>());
    return convert_to(source.view(), type);
}

Tensor random_tensor(DType type, const Shape& shape, double lo, double hi, std::mt19937& rng) {
    std::uniform_real_distribution<double> uniform(lo, hi);
    if (is_complex(type)) {
        Tensor result(type, shape);
        visit_dtype(type, [&](auto tag) {
            using T = typename decltype(tag)::type;
            if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
                using R = typename T::value_type;
                for (std::int64_t i = 0; i < result.numel(); ++i) {
                    const double re = uniform(rng);
                    result.data_as<T>()[i] = T(static_cast<R>(re), static_cast<R>(uniform(rng)));
                }
            }
            return 0;
        });
        return result;
    }
    std::vector<double> values(static_cast<std::size_t>(shape_numel(shape)));
    for (auto& v : values) v = uniform(rng);
    return tensor_from(type, shape, values);
}

namespace {

std::string shell_quote(const std::string& text) {
    std::string quoted = "'";
    for (char c : text) {
        if (c == '\'') quoted += "'\\''";
        else quoted += c;
    }
    return quoted + "'";
}

std::string slurp(const fs::path& file) {
    std::ifstream stream(file, std::ios::binary);
    std::stringstream buffer;
    buffer << stream.rdbuf();
    return buffer.str();
}

}  // namespace

RunResult run_gridwarp(const std::vector<std::string>& args) {
    TempDir scratch;
    std::string command = shell_quote(binary().string());
    for (const auto& arg : args) command += " " + shell_quote(arg);
    command += " >" + shell_quote((scratch / "out").string()) + " 2>" + shell_quote((scratch / "err").string()) + " </dev/null";
    const int raw = std::system(command.c_str());
    RunResult result;
    result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + (WIFSIGNALED(raw) ? WTERMSIG(raw) : 0);
    result.out = slurp(scratch / "out");
    result.err = slurp(scratch / "err");
    return result;
}

void write_bytes(const fs::path& file, const std::string& bytes) {
    std::ofstream stream(file, std::ios::binary | std::ios::trunc);
    stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(stream.good());
}

std::vector<std::string> listing(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

std::size_t line_count(const std::string& text) {
    if (text.empty()) return 0;
    std::size_t lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
    if (text.back() != '\n') ++lines;
    return lines;
}

std::string describe(const RunResult& r) {
    return "status " + std::to_string(r.status) + "\n--- stdout ---\n" + r.out + "\n--- stderr ---\n" + r.err;
}

void require_refusal(const RunResult& r, const std::vector<std::string>& needles, const fs::path& output,
                     const std::vector<std::string>& directory_before) {
    INFO(describe(r));
    CHECK(r.status != 0);
    CHECK(line_count(r.err) == 1);
    CHECK(r.out.empty());
    for (const auto& needle : needles) {
        INFO("stderr should mention '" << needle << "'");
        CHECK(lower(r.err).find(lower(needle)) != std::string::npos);
    }
    CHECK_FALSE(fs::exists(output));
    if (fs::exists(output.parent_path())) CHECK(listing(output.parent_path()) == directory_before);
}

TempDir::TempDir() {
    std::string pattern = (fs::temp_directory_path() / "gridwarp-test-XXXXXX").string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!::mkdtemp(buffer.data())) throw std::runtime_error("cannot create a temporary directory");
    path_ = buffer.data();
}

TempDir::~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
}

}  // namespace gridwarp::test
