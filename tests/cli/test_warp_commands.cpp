// gridwarp affine, flow and info on images, volumes and flows, run as a real process.
// Inputs are made here (write_image, write_npy, .flo bytes); expected outputs come from index
// arithmetic (identity, integer shifts, quarter turns), from the documented formulas computed here,
// or from other commands on the same data (`grid` + `sample`, which the fixture tests pin against
// ONNX and PyTorch), never from the command under test itself.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/flow_io.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/npy.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// Helpers

// Runs gridwarp and requires success with nothing on stderr but gridwarp's own info lines (no
// warnings, no library noise).
RunResult run_ok(const std::vector<std::string>& args) {
    const RunResult r = run_gridwarp(args);
    std::string command = "gridwarp";
    for (const auto& a : args) command += " " + a;
    INFO(command << "\n" << describe(r));
    REQUIRE(r.status == 0);
    std::istringstream lines(r.err);
    for (std::string line; std::getline(lines, line);) CHECK(line.rfind("gridwarp: info: ", 0) == 0);
    return r;
}

std::string number(double value) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
    return buffer;
}

// Rows of a matrix as text, one row per line.
std::string matrix_text(const std::vector<double>& values, std::size_t columns) {
    std::string text = "# a matrix\n";
    for (std::size_t i = 0; i < values.size(); ++i) text += number(values[i]) + ((i + 1) % columns == 0 ? "\n" : " ");
    return text;
}

// Pixels 1..255 (uint8) or nonzero int16: the fill value 0 shows wherever the warp left the input.
Tensor nonzero_random(DType type, const Shape& shape, std::mt19937& rng) {
    Tensor t = type == DType::UInt8 ? random_tensor(type, shape, 1, 255, rng) : random_tensor(type, shape, -3000, 3000, rng);
    auto values = as_doubles(t.view());
    for (auto& v : values) {
        if (v == 0) v = 1;
    }
    return tensor_from(type, shape, values);
}

io::Image rgb_image(std::int64_t height, std::int64_t width, std::mt19937& rng, DType type = DType::UInt8) {
    io::Image image;
    image.kind = io::FileKind::Raster;
    image.format = "png";
    image.channels = 3;
    image.spatial = {height, width};
    image.layout = io::ChannelLayout::Interleaved;
    image.channel_order = "BGR";
    image.pixels = nonzero_random(type, {height, width, 3}, rng);
    return image;
}

io::Geometry oblique_geometry() {
    const double a = 0.4, b = 0.25;
    // R_z(a) R_x(b), row-major.
    const double ca = std::cos(a), sa = std::sin(a), cb = std::cos(b), sb = std::sin(b);
    return io::Geometry{{0.5, 1.25, 2.0}, {-10.5, 3.25, 7.0}, {ca, -sa * cb, sa * sb, sa, ca * cb, -ca * sb, 0, sb, cb}};
}

io::Image int16_volume(std::int64_t depth, std::int64_t height, std::int64_t width, std::mt19937& rng) {
    io::Image image;
    image.kind = io::FileKind::Volume;
    image.format = "nifti";
    image.channels = 1;
    image.spatial = {depth, height, width};
    image.layout = io::ChannelLayout::Interleaved;
    image.pixels = nonzero_random(DType::Int16, {depth, height, width, 1}, rng);
    image.geometry = oblique_geometry();
    return image;
}

// A map from an output pixel (x, y, z) to the input pixel it reads, or false where it reads outside.
using IndexMap = std::function<bool(std::int64_t x, std::int64_t y, std::int64_t z, std::int64_t& xi, std::int64_t& yi,
                                    std::int64_t& zi)>;

// The expected output by index arithmetic: the input's pixel where the map lands inside, else 0.
// Works on the interleaved storage (H, W, C) or (D, H, W, C) of `input`.
Tensor warp_by_index(const io::Image& input, const Shape& output_spatial, const IndexMap& map) {
    const Shape& in = input.spatial;
    const bool volume = in.size() == 3;
    const std::int64_t D = volume ? in[0] : 1, H = in[volume ? 1 : 0], W = in[volume ? 2 : 1], C = input.channels;
    const std::int64_t oD = volume ? output_spatial[0] : 1, oH = output_spatial[volume ? 1 : 0], oW = output_spatial[volume ? 2 : 1];
    const auto source = as_doubles(input.pixels.view());
    std::vector<double> result(static_cast<std::size_t>(oD * oH * oW * C), 0.0);
    for (std::int64_t z = 0; z < oD; ++z)
        for (std::int64_t y = 0; y < oH; ++y)
            for (std::int64_t x = 0; x < oW; ++x) {
                std::int64_t xi, yi, zi = 0;
                if (!map(x, y, z, xi, yi, zi)) continue;
                if (xi < 0 || xi >= W || yi < 0 || yi >= H || zi < 0 || zi >= D) continue;
                for (std::int64_t c = 0; c < C; ++c) {
                    result[static_cast<std::size_t>(((z * oH + y) * oW + x) * C + c)] =
                        source[static_cast<std::size_t>(((zi * H + yi) * W + xi) * C + c)];
                }
            }
    Shape shape = output_spatial;
    shape.push_back(C);
    return tensor_from(input.dtype(), shape, result);
}

// Turning counter-clockwise on screen (y down) about the centre c = ((W-1)/2, (H-1)/2): a point right
// of the centre goes above it. The output at p reads the input at c + R^-1 (p - c - shift), where
// R(90) maps (dx, dy) to (dy, -dx). Only for quarter turns where every position is an integer.
IndexMap quarter_turn(int degrees, std::int64_t width, std::int64_t height, std::array<std::int64_t, 3> shift = {0, 0, 0}) {
    return [=](std::int64_t x, std::int64_t y, std::int64_t z, std::int64_t& xi, std::int64_t& yi, std::int64_t& zi) {
        // Twice the coordinates, so that half-integer centres stay integers.
        const std::int64_t cx2 = width - 1, cy2 = height - 1;
        const std::int64_t dx2 = 2 * (x - shift[0]) - cx2, dy2 = 2 * (y - shift[1]) - cy2;
        std::int64_t sx2 = 0, sy2 = 0;  // R^-1 (dx, dy)
        switch (((degrees % 360) + 360) % 360) {
            case 0: sx2 = dx2; sy2 = dy2; break;
            case 90: sx2 = -dy2; sy2 = dx2; break;    // inverse of (dx, dy) -> (dy, -dx)
            case 180: sx2 = -dx2; sy2 = -dy2; break;
            case 270: sx2 = dy2; sy2 = -dx2; break;   // inverse of (dx, dy) -> (-dy, dx)
            default: FAIL("not a quarter turn");
        }
        REQUIRE((cx2 + sx2) % 2 == 0);
        REQUIRE((cy2 + sy2) % 2 == 0);
        xi = (cx2 + sx2) / 2;
        yi = (cy2 + sy2) / 2;
        zi = z - shift[2];
        return true;
    };
}

// (1, C, H, W) planar tensor of an interleaved (H, W, C) image's pixels, copied element by element.
Tensor planar_of(const io::Image& image) {
    const std::int64_t H = image.spatial[0], W = image.spatial[1], C = image.channels;
    const auto values = as_doubles(image.pixels.view());
    std::vector<double> planar(values.size());
    for (std::int64_t c = 0; c < C; ++c)
        for (std::int64_t y = 0; y < H; ++y)
            for (std::int64_t x = 0; x < W; ++x) {
                planar[static_cast<std::size_t>((c * H + y) * W + x)] = values[static_cast<std::size_t>((y * W + x) * C + c)];
            }
    return tensor_from(image.dtype(), {1, C, H, W}, planar);
}

// The documented normalization of one axis: N(u) = a u + c.
std::pair<double, double> normalization(std::int64_t d, bool align_corners) {
    const double n = static_cast<double>(d);
    if (align_corners) return d == 1 ? std::pair{1.0, 0.0} : std::pair{2.0 / (n - 1), -1.0};
    return {2.0 / n, 1.0 / n - 1.0};
}

// theta = N_in M N_out^-1 for r x (r+1) M; shapes outermost-first, M rows innermost-first. Computed
// with full (r+1) x (r+1) matrices, independently of gridwarp's per-element formula.
std::vector<double> theta_from_matrix(const std::vector<double>& m, const Shape& in, const Shape& out, bool align_corners) {
    const std::size_t r = in.size(), n = r + 1;
    auto homogeneous = [&](const std::vector<double>& rows) {
        std::vector<double> h(n * n, 0.0);
        std::copy(rows.begin(), rows.end(), h.begin());
        h[n * n - 1] = 1.0;
        return h;
    };
    auto multiply = [&](const std::vector<double>& a, const std::vector<double>& b) {
        std::vector<double> c(n * n, 0.0);
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < n; ++j)
                for (std::size_t k = 0; k < n; ++k) c[i * n + j] += a[i * n + k] * b[k * n + j];
        return c;
    };
    std::vector<double> n_in(n * n, 0.0), n_out_inverse(n * n, 0.0);
    for (std::size_t k = 0; k < r; ++k) {
        const auto [a_in, c_in] = normalization(in[r - 1 - k], align_corners);
        const auto [a_out, c_out] = normalization(out[r - 1 - k], align_corners);
        n_in[k * n + k] = a_in;
        n_in[k * n + r] = c_in;
        n_out_inverse[k * n + k] = 1.0 / a_out;  // u = (N - c) / a
        n_out_inverse[k * n + r] = -c_out / a_out;
    }
    n_in[n * n - 1] = n_out_inverse[n * n - 1] = 1.0;
    const auto theta = multiply(multiply(n_in, homogeneous(m)), n_out_inverse);
    return std::vector<double>(theta.begin(), theta.begin() + static_cast<std::ptrdiff_t>(r * n));
}

// The inverse of a 2x3 affine map, by hand.
std::vector<double> invert_2x3(const std::vector<double>& m) {
    const double det = m[0] * m[4] - m[1] * m[3];
    const double a = m[4] / det, b = -m[1] / det, c = -m[3] / det, d = m[0] / det;
    return {a, b, -(a * m[2] + b * m[5]), c, d, -(c * m[2] + d * m[5])};
}

// Little-endian .flo bytes for an (H, W, 2) float32 field given in C order.
std::string flo_bytes(std::int32_t width, std::int32_t height, const std::vector<float>& uv) {
    std::string bytes = "PIEH";
    auto put = [&](std::uint32_t v) {
        for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    };
    put(static_cast<std::uint32_t>(width));
    put(static_cast<std::uint32_t>(height));
    for (float value : uv) {
        std::uint32_t bits;
        std::memcpy(&bits, &value, 4);
        put(bits);
    }
    return bytes;
}

// Two NIfTI-1 headers (348 bytes) agree: every field byte for byte, except the float32 quaternion,
// qoffset and srow fields (bytes 256-327), which ITK recomputes from the direction it read and may
// round differently in the last bit; those agree to 1e-6.
void check_same_nifti_header(const std::string& actual, const std::string& expected) {
    REQUIRE(actual.size() >= 348);
    REQUIRE(expected.size() >= 348);
    CHECK(actual.substr(0, 256) == expected.substr(0, 256));    // sizes, datatype, pixdim, codes ...
    CHECK(actual.substr(328, 20) == expected.substr(328, 20));  // intent_name, magic
    for (std::size_t offset = 256; offset < 328; offset += 4) {
        float a, e;
        std::memcpy(&a, actual.data() + offset, 4);
        std::memcpy(&e, expected.data() + offset, 4);
        INFO("header float at byte " << offset);
        CHECK(a == Approx(e).margin(1e-6));
    }
}

nlohmann::json info_json(const fs::path& file) {
    const RunResult r = run_ok({"info", file.string(), "--json"});
    INFO(r.out);
    REQUIRE(line_count(r.out) == 1);
    return nlohmann::json::parse(r.out);
}

}  // namespace

// -------------------------------------------------------------------------------------------------
// 1. gridwarp affine: exact cases by index arithmetic

TEST_CASE("affine: identity, integer shift and quarter turns of a PNG are exact", "[cli][affine][exact]") {
    std::mt19937 rng(21);
    TempDir dir;
    for (const auto& [height, width] : std::vector<std::pair<std::int64_t, std::int64_t>>{{4, 6}, {5, 5}, {3, 7}}) {
        const io::Image input = rgb_image(height, width, rng);
        const fs::path in = dir / "in.png";
        io::write_image(in, input);
        struct Case {
            std::string name;
            std::vector<std::string> args;
            IndexMap map;
        };
        write_bytes(dir / "identity.txt", "1 0 0\n0 1 0\n");
        write_bytes(dir / "identity3.txt", "1 0 0\n0 1 0\n0 0 1\n");
        write_bytes(dir / "shift.txt", "1 0 -2\n0 1 1\n");  // output (x, y) reads input (x - 2, y + 1)
        const std::vector<Case> cases = {
            {"identity matrix", {"--matrix", (dir / "identity.txt").string()}, quarter_turn(0, width, height)},
            {"identity 3x3", {"--matrix", (dir / "identity3.txt").string()}, quarter_turn(0, width, height)},
            {"shift matrix", {"--matrix", (dir / "shift.txt").string()}, quarter_turn(0, width, height, {2, -1, 0})},
            {"--shift", {"--shift=2,-1"}, quarter_turn(0, width, height, {2, -1, 0})},
            {"--rotate 0", {"--rotate", "0"}, quarter_turn(0, width, height)},
            {"--rotate 90", {"--rotate", "90"}, quarter_turn(90, width, height)},
            {"--rotate 180", {"--rotate", "180"}, quarter_turn(180, width, height)},
            {"--rotate 270", {"--rotate", "270"}, quarter_turn(270, width, height)},
            {"--rotate -90", {"--rotate=-90"}, quarter_turn(270, width, height)},
            {"--rotate 450", {"--rotate", "450"}, quarter_turn(90, width, height)},
            {"--rotate 90 --shift", {"--rotate", "90", "--shift=1,-2"}, quarter_turn(90, width, height, {1, -2, 0})},
        };
        // Every mode on the first size; linear on the others.
        const std::vector<std::string> modes =
            width == 6 ? std::vector<std::string>{"linear", "nearest", "cubic"} : std::vector<std::string>{"linear"};
        for (const auto& c : cases) {
            for (const std::string& mode : modes) {
                INFO(height << "x" << width << " " << c.name << " --mode " << mode);
                const fs::path out = dir / "out.png";
                std::vector<std::string> args = {"affine", "-i", in.string(), "-o", out.string(), "--mode", mode};
                args.insert(args.end(), c.args.begin(), c.args.end());
                run_ok(args);
                const io::Image output = io::read_image(out);
                CHECK(output.dtype() == DType::UInt8);
                CHECK(output.channels == 3);
                CHECK(output.channel_order == "BGR");
                REQUIRE(output.spatial == input.spatial);
                CHECK(compare_exact(output.pixels.view(), warp_by_index(input, input.spatial, c.map).view()) == "");
            }
        }
    }
}

TEST_CASE("affine: quarter turns and shifts of an int16 NIfTI volume are exact and keep the header",
          "[cli][affine][exact][volume]") {
    std::mt19937 rng(22);
    TempDir dir;
    const io::Image input = int16_volume(3, 4, 6, rng);
    const fs::path in = dir / "in.nii";
    io::write_image(in, input);
    const std::string in_bytes = io::read_file_bytes(in);
    REQUIRE(in_bytes.size() > 348);
    write_bytes(dir / "identity.txt", "1 0 0 0\n0 1 0 0\n0 0 1 0\n");
    write_bytes(dir / "shift4.txt", "1 0 0 1\n0 1 0 0\n0 0 1 -1\n0 0 0 1\n");  // reads (x + 1, y, z - 1)
    struct Case {
        std::string name;
        std::vector<std::string> args;
        IndexMap map;
    };
    const std::int64_t W = 6, H = 4;
    const std::vector<Case> cases = {
        {"identity", {"--matrix", (dir / "identity.txt").string()}, quarter_turn(0, W, H)},
        {"shift 4x4", {"--matrix", (dir / "shift4.txt").string()}, quarter_turn(0, W, H, {-1, 0, 1})},
        {"--shift", {"--shift=1,-1,2"}, quarter_turn(0, W, H, {1, -1, 2})},
        {"--rotate 90", {"--rotate", "90"}, quarter_turn(90, W, H)},
        {"--rotate 180", {"--rotate", "180"}, quarter_turn(180, W, H)},
        {"--rotate 270", {"--rotate", "270"}, quarter_turn(270, W, H)},
        {"--rotate 90 --shift", {"--rotate", "90", "--shift=2,0,-1"}, quarter_turn(90, W, H, {2, 0, -1})},
    };
    for (const auto& c : cases) {
        for (const std::string extension : {".nii", ".nii.gz", ".nrrd", ".mha"}) {
            INFO(c.name << " -> " << extension);
            const fs::path out = dir / ("out" + extension);
            std::vector<std::string> args = {"affine", "-i", in.string(), "-o", out.string()};
            args.insert(args.end(), c.args.begin(), c.args.end());
            run_ok(args);
            const io::Image output = io::read_image(out);
            CHECK(output.kind == io::FileKind::Volume);
            CHECK(output.dtype() == DType::Int16);
            CHECK(output.channels == 1);
            REQUIRE(output.spatial == input.spatial);
            CHECK(compare_exact(output.pixels.view(), warp_by_index(input, input.spatial, c.map).view()) == "");
            // Same grid: same geometry, and for NIfTI the same 348-byte header.
            REQUIRE(output.geometry);
            const auto& g = *output.geometry;
            for (std::size_t i = 0; i < 3; ++i) {
                CHECK(g.spacing[i] == Approx(input.geometry->spacing[i]).margin(1e-6));
                CHECK(g.origin[i] == Approx(input.geometry->origin[i]).margin(1e-6));
            }
            for (std::size_t i = 0; i < 9; ++i) CHECK(g.direction[i] == Approx(input.geometry->direction[i]).margin(1e-6));
            if (extension == std::string(".nii")) {
                const std::string out_bytes = io::read_file_bytes(out);
                REQUIRE(out_bytes.size() == in_bytes.size());
                check_same_nifti_header(out_bytes, in_bytes);
            }
        }
    }
}

TEST_CASE("affine: --size is a canvas about the centre and --crop a box, on the input's voxel grid", "[cli][affine][volume][geometry]") {
    std::mt19937 rng(23);
    TempDir dir;
    const io::Image input = int16_volume(4, 6, 8, rng);  // D, H, W
    const fs::path in = dir / "in.nii.gz";
    io::write_image(in, input);
    const io::Geometry& g = *input.geometry;
    const std::int16_t* in_values = input.pixels.data_as<std::int16_t>();
    // Output pixel (x, y, z) reads input pixel corner + (x, y, z); zero outside. Sizes W, H, D.
    struct Case {
        std::vector<std::string> args;
        std::array<std::int64_t, 3> size, corner;
    };
    const std::vector<Case> cases{
        {{"--size", "4,12,2"}, {4, 12, 2}, {2, -3, 1}},            // (8 - 4) / 2, (6 - 12) / 2, (4 - 2) / 2
        {{"--size", "4x12x2", "--rotate", "0"}, {4, 12, 2}, {2, -3, 1}},
        {{"--crop", "1,2,0,5,3,4"}, {5, 3, 4}, {1, 2, 0}},
        {{"--crop", "-2,0,1,4,4,2"}, {4, 4, 2}, {-2, 0, 1}},
    };
    for (const Case& c : cases) {
        INFO(c.args.front() << " " << c.args[1]);
        const fs::path out = dir / "out.nii.gz";
        std::vector<std::string> args = {"affine", "-i", in.string(), "-o", out.string()};
        args.insert(args.end(), c.args.begin(), c.args.end());
        run_ok(args);
        const io::Image output = io::read_image(out);
        REQUIRE(output.spatial == Shape{c.size[2], c.size[1], c.size[0]});
        REQUIRE(output.geometry);
        const io::Geometry& r = *output.geometry;
        for (int row = 0; row < 3; ++row) {
            double origin = g.origin[row];
            for (int axis = 0; axis < 3; ++axis) origin += g.direction[row * 3 + axis] * g.spacing[axis] * static_cast<double>(c.corner[axis]);
            CHECK(r.origin[row] == Approx(origin).margin(1e-5));
            CHECK(r.spacing[row] == Approx(g.spacing[row]).margin(1e-6));
        }
        for (int i = 0; i < 9; ++i) CHECK(r.direction[i] == Approx(g.direction[i]).margin(1e-6));
        const std::int16_t* out_values = output.pixels.data_as<std::int16_t>();
        int mismatches = 0;
        for (std::int64_t z = 0; z < c.size[2]; ++z) {
            for (std::int64_t y = 0; y < c.size[1]; ++y) {
                for (std::int64_t x = 0; x < c.size[0]; ++x) {
                    const std::int64_t ix = x + c.corner[0], iy = y + c.corner[1], iz = z + c.corner[2];
                    const bool inside = ix >= 0 && ix < 8 && iy >= 0 && iy < 6 && iz >= 0 && iz < 4;
                    const std::int16_t expected = inside ? in_values[(iz * 6 + iy) * 8 + ix] : 0;
                    mismatches += out_values[(z * c.size[1] + y) * c.size[0] + x] != expected;
                }
            }
        }
        CHECK(mismatches == 0);
    }
}

// -------------------------------------------------------------------------------------------------
// 2. gridwarp affine against grid + sample, and --matrix against --theta

TEST_CASE("affine --theta on an image equals grid + sample on the same pixels as .npy", "[cli][affine][theta]") {
    std::mt19937 rng(24);
    TempDir dir;
    const io::Image input = rgb_image(9, 11, rng);
    io::write_image(dir / "in.png", input);
    io::write_npy(dir / "in.npy", planar_of(input).view());
    write_bytes(dir / "theta.txt", "0.8 -0.3 0.1\n0.25 0.9 -0.05\n");
    struct Case {
        std::string mode, padding;
        bool align_corners;
        std::int64_t out_w, out_h;
    };
    const std::vector<Case> cases = {
        {"linear", "zeros", false, 11, 9},   {"linear", "border", true, 11, 9},  {"nearest", "reflection", false, 11, 9},
        {"cubic", "zeros", true, 11, 9},     {"linear", "zeros", false, 7, 13}, {"cubic", "reflection", false, 5, 4},
        {"nearest", "border", true, 14, 3},
    };
    for (const auto& c : cases) {
        INFO(c.mode << " " << c.padding << " align_corners=" << c.align_corners << " size " << c.out_w << "x" << c.out_h);
        std::vector<std::string> sampling = {"--mode", c.mode, "--padding", c.padding};
        if (c.align_corners) sampling.push_back("--align-corners");
        std::vector<std::string> grid = {"grid", "--theta", (dir / "theta.txt").string(), "--size",
                                         "1,3," + std::to_string(c.out_h) + "," + std::to_string(c.out_w), "-o",
                                         (dir / "grid.npy").string()};
        if (c.align_corners) grid.push_back("--align-corners");
        run_ok(grid);
        std::vector<std::string> sample = {"sample", "-i", (dir / "in.npy").string(), "-g", (dir / "grid.npy").string(), "-o",
                                           (dir / "expected.npy").string()};
        sample.insert(sample.end(), sampling.begin(), sampling.end());
        run_ok(sample);
        std::vector<std::string> affine = {"affine", "-i", (dir / "in.png").string(), "-o", (dir / "out.png").string(),
                                           "--theta", (dir / "theta.txt").string(), "--size",
                                           std::to_string(c.out_w) + "," + std::to_string(c.out_h), "--antialias", "off"};
        affine.insert(affine.end(), sampling.begin(), sampling.end());
        run_ok(affine);
        const Tensor expected = io::read_npy(dir / "expected.npy");
        const io::Image output = io::read_image(dir / "out.png");
        REQUIRE(output.spatial == Shape{c.out_h, c.out_w});
        CHECK(compare_exact(output.nchw(), expected.view()) == "");
    }
}

TEST_CASE("affine --matrix equals --theta computed by the documented normalization", "[cli][affine][matrix]") {
    std::mt19937 rng(25);
    TempDir dir;
    SECTION("2-D, float32 .npy and float32 TIFF, sizes changed") {
        const Tensor x = random_tensor(DType::Float32, {1, 2, 9, 12}, -5, 5, rng);
        io::write_npy(dir / "in.npy", x.view());
        const std::vector<double> m = {0.9, -0.2, 1.3, 0.15, 1.1, -0.7};
        write_bytes(dir / "m.txt", matrix_text(m, 3));
        for (bool align_corners : {false, true}) {
            for (const Shape& out : {Shape{9, 12}, Shape{7, 15}}) {
                INFO("align_corners " << align_corners << " output " << shape_to_string(out));
                const auto theta = theta_from_matrix(m, {9, 12}, out, align_corners);
                io::write_npy(dir / "theta.npy", tensor_from(DType::Float64, {1, 2, 3}, theta).view());
                const std::string size = std::to_string(out[1]) + "," + std::to_string(out[0]);
                std::vector<std::string> common = {"--size", size, "--mode", "cubic", "--padding", "border"};
                if (align_corners) common.push_back("--align-corners");
                auto a = std::vector<std::string>{"affine", "-i", (dir / "in.npy").string(), "-o", (dir / "a.npy").string(),
                                                  "--matrix", (dir / "m.txt").string()};
                auto b = std::vector<std::string>{"affine", "-i", (dir / "in.npy").string(), "-o", (dir / "b.npy").string(),
                                                  "--theta", (dir / "theta.npy").string()};
                a.insert(a.end(), common.begin(), common.end());
                b.insert(b.end(), common.begin(), common.end());
                run_ok(a);
                run_ok(b);
                const Tensor ya = io::read_npy(dir / "a.npy"), yb = io::read_npy(dir / "b.npy");
                REQUIRE(ya.shape() == Shape{1, 2, out[0], out[1]});
                CHECK(compare(ya.view(), yb.view(), 1e-5, 1e-5) == "");
            }
        }
    }
    SECTION("3-D: a 3x4 and its 4x4 form, against theta") {
        const Tensor x = random_tensor(DType::Float64, {1, 1, 5, 6, 7}, -5, 5, rng);
        io::write_npy(dir / "in.npy", x.view());
        const std::vector<double> m = {0.95, 0.1, -0.05, 0.4, -0.1, 1.05, 0.2, -0.3, 0.05, -0.15, 0.9, 0.6};
        write_bytes(dir / "m34.txt", matrix_text(m, 4));
        std::vector<double> m44 = m;
        m44.insert(m44.end(), {0, 0, 0, 1});
        write_bytes(dir / "m44.txt", matrix_text(m44, 4));
        const auto theta = theta_from_matrix(m, {5, 6, 7}, {4, 6, 8}, false);
        io::write_npy(dir / "theta.npy", tensor_from(DType::Float64, {1, 3, 4}, theta).view());
        for (const std::string& source : {std::string("m34.txt"), std::string("m44.txt"), std::string("theta.npy")}) {
            const std::string option = source == "theta.npy" ? "--theta" : "--matrix";
            run_ok({"affine", "-i", (dir / "in.npy").string(), "-o", (dir / ("y_" + source + ".npy")).string(), option,
                    (dir / source).string(), "--size", "8,6,4"});
        }
        const Tensor y34 = io::read_npy(dir / "y_m34.txt.npy"), y44 = io::read_npy(dir / "y_m44.txt.npy"),
                     yt = io::read_npy(dir / "y_theta.npy.npy");
        REQUIRE(y34.shape() == Shape{1, 1, 4, 6, 8});
        CHECK(compare_exact(y34.view(), y44.view()) == "");
        CHECK(compare(y34.view(), yt.view(), 1e-9, 1e-9) == "");
    }
    SECTION("--matrix Minv --inverse equals --matrix M") {
        const io::Image input = rgb_image(10, 13, rng, DType::UInt8);
        io::write_image(dir / "in.tif", input);
        const Tensor xf = random_tensor(DType::Float32, {1, 3, 10, 13}, -1, 1, rng);
        io::write_npy(dir / "inf.npy", xf.view());
        // Exactly invertible in binary: the two runs agree bit for bit.
        const std::vector<double> exact = {2, 0, 1, 0, 0.5, 3};
        write_bytes(dir / "m_exact.txt", matrix_text(exact, 3));
        write_bytes(dir / "minv_exact.txt", matrix_text(invert_2x3(exact), 3));
        CHECK(invert_2x3(exact) == std::vector<double>{0.5, 0, -0.5, 0, 2, -6});
        run_ok({"affine", "-i", (dir / "in.tif").string(), "-o", (dir / "a.tif").string(), "--matrix", (dir / "m_exact.txt").string()});
        run_ok({"affine", "-i", (dir / "in.tif").string(), "-o", (dir / "b.tif").string(), "--matrix",
                (dir / "minv_exact.txt").string(), "--inverse"});
        CHECK(compare_exact(io::read_image(dir / "a.tif").pixels.view(), io::read_image(dir / "b.tif").pixels.view()) == "");
        // A general map (rotation, scale, shear): equal up to the rounding of the inversion.
        const std::vector<double> m = {0.8, -0.45, 3.2, 0.35, 0.95, -1.6};
        write_bytes(dir / "m.txt", matrix_text(m, 3));
        std::vector<double> minv = invert_2x3(m);
        minv.insert(minv.end(), {0, 0, 1});  // the 3x3 form
        write_bytes(dir / "minv.txt", matrix_text(minv, 3));
        for (const std::string mode : {"linear", "cubic"}) {
            run_ok({"affine", "-i", (dir / "inf.npy").string(), "-o", (dir / "a.npy").string(), "--matrix", (dir / "m.txt").string(),
                    "--mode", mode});
            run_ok({"affine", "-i", (dir / "inf.npy").string(), "-o", (dir / "b.npy").string(), "--matrix",
                    (dir / "minv.txt").string(), "--inverse", "--mode", mode});
            CHECK(compare(io::read_npy(dir / "a.npy").view(), io::read_npy(dir / "b.npy").view(), 1e-5, 1e-6) == "");
        }
    }
}

// -------------------------------------------------------------------------------------------------
// 3. gridwarp flow

TEST_CASE("flow: a .flo field equals the same field as .npy, bit for bit", "[cli][flow]") {
    std::mt19937 rng(26);
    TempDir dir;
    const std::int32_t height = 7, width = 9;
    const io::Image input = rgb_image(height, width, rng);
    io::write_image(dir / "in.png", input);
    const Tensor field = random_tensor(DType::Float32, {height, width, 2}, -2.5, 2.5, rng);
    std::vector<float> uv(field.data_as<float>(), field.data_as<float>() + field.numel());
    // Unknown in the .flo by Middlebury's three marks, NaN in the .npy: pixels (1, 1), (2, 2), (3, 3).
    uv[2 * 10] = 1e9f;
    uv[2 * 20 + 1] = -std::numeric_limits<float>::infinity();
    uv[2 * 30] = std::numeric_limits<float>::quiet_NaN();
    write_bytes(dir / "f.flo", flo_bytes(width, height, uv));
    std::vector<double> with_nan(uv.begin(), uv.end());
    for (const int p : {10, 20, 30}) with_nan[2 * p] = std::numeric_limits<double>::quiet_NaN();
    io::write_npy(dir / "f.npy", tensor_from(DType::Float32, {height, width, 2}, with_nan).view());
    for (const std::string mode : {"linear", "nearest", "cubic"}) {
        INFO("mode " << mode);
        run_ok({"flow", "-i", (dir / "in.png").string(), "-f", (dir / "f.flo").string(), "-o", (dir / "a.png").string(), "--mode",
                mode, "--fill", "7"});
        run_ok({"flow", "-i", (dir / "in.png").string(), "-f", (dir / "f.npy").string(), "-o", (dir / "b.png").string(), "--mode",
                mode, "--fill", "7"});
        const io::Image a = io::read_image(dir / "a.png"), b = io::read_image(dir / "b.png");
        REQUIRE(a.spatial == Shape{height, width});
        CHECK(a.channels == 3);
        CHECK(compare_exact(a.pixels.view(), b.pixels.view()) == "");
        // The unknown vector gives the fill value in every channel.
        const auto* p = a.pixels.data_as<std::uint8_t>();
        for (int c = 0; c < 3; ++c) CHECK(p[10 * 3 + c] == 7);
    }
}

TEST_CASE("flow: a constant integer flow equals an integer shift", "[cli][flow][exact]") {
    std::mt19937 rng(27);
    TempDir dir;
    const std::int64_t height = 6, width = 8, dx = 2, dy = -1;
    const io::Image input = rgb_image(height, width, rng);
    io::write_image(dir / "in.png", input);
    std::vector<double> constant;
    for (std::int64_t i = 0; i < height * width; ++i) {
        constant.push_back(static_cast<double>(dx));
        constant.push_back(static_cast<double>(dy));
    }
    io::write_npy(dir / "f.npy", tensor_from(DType::Float32, {height, width, 2}, constant).view());
    std::vector<float> uv(constant.begin(), constant.end());
    write_bytes(dir / "f.flo", flo_bytes(static_cast<std::int32_t>(width), static_cast<std::int32_t>(height), uv));
    // out(x) = in(x + flow): reads (x + 2, y - 1); the same as --shift -2,1 (moves the picture left, down).
    const Tensor expected = warp_by_index(input, input.spatial, quarter_turn(0, width, height, {-dx, -dy, 0}));
    for (const std::string flow : {"f.npy", "f.flo"}) {
        for (const std::string mode : {"linear", "nearest", "cubic"}) {
            INFO(flow << " " << mode);
            run_ok({"flow", "-i", (dir / "in.png").string(), "-f", (dir / flow).string(), "-o", (dir / "out.png").string(),
                    "--mode", mode});
            CHECK(compare_exact(io::read_image(dir / "out.png").pixels.view(), expected.view()) == "");
        }
    }
    run_ok({"affine", "-i", (dir / "in.png").string(), "-o", (dir / "shift.png").string(), "--shift=-2,1"});
    CHECK(compare_exact(io::read_image(dir / "shift.png").pixels.view(), expected.view()) == "");

    SECTION("a vector NIfTI displacement on an int16 volume") {
        const io::Image volume = int16_volume(3, 4, 5, rng);
        io::write_image(dir / "v.nii.gz", volume);
        io::Image displacement;
        displacement.kind = io::FileKind::Volume;
        displacement.channels = 3;
        displacement.spatial = volume.spatial;
        displacement.layout = io::ChannelLayout::Interleaved;
        displacement.geometry = volume.geometry;
        std::vector<double> d;
        for (std::int64_t i = 0; i < 3 * 4 * 5; ++i) d.insert(d.end(), {1.0, 0.0, -1.0});
        displacement.pixels = tensor_from(DType::Float32, {3, 4, 5, 3}, d);
        io::write_image(dir / "d.nii.gz", displacement);
        run_ok({"flow", "-i", (dir / "v.nii.gz").string(), "-f", (dir / "d.nii.gz").string(), "-o", (dir / "w.nii.gz").string()});
        const io::Image warped = io::read_image(dir / "w.nii.gz");
        CHECK(warped.dtype() == DType::Int16);
        CHECK(compare_exact(warped.pixels.view(), warp_by_index(volume, volume.spatial, quarter_turn(0, 5, 4, {-1, 0, 1})).view()) ==
              "");
        REQUIRE(warped.geometry);
        for (int i = 0; i < 3; ++i) CHECK(warped.geometry->origin[i] == Approx(volume.geometry->origin[i]).margin(1e-6));
    }
    SECTION("a KITTI PNG: valid pixels shift, invalid ones give the fill value") {
        io::Image kitti;
        kitti.kind = io::FileKind::Raster;
        kitti.channels = 3;
        kitti.spatial = {height, width};
        kitti.layout = io::ChannelLayout::Interleaved;
        std::vector<double> bgr;
        for (std::int64_t y = 0; y < height; ++y)
            for (std::int64_t x = 0; x < width; ++x) {
                const bool valid = (x + y) % 3 != 0;
                bgr.insert(bgr.end(), {valid ? 1.0 : 0.0, 32768.0 + 64 * dy, 32768.0 + 64 * dx});  // B, G (v), R (u)
            }
        kitti.pixels = tensor_from(DType::UInt16, {height, width, 3}, bgr);
        io::write_image(dir / "kitti.png", kitti);
        run_ok({"flow", "-i", (dir / "in.png").string(), "-f", (dir / "kitti.png").string(), "-o", (dir / "k.png").string(),
                "--fill", "200"});
        const auto out = as_doubles(io::read_image(dir / "k.png").pixels.view());
        const auto want = as_doubles(expected.view());
        for (std::int64_t y = 0; y < height; ++y)
            for (std::int64_t x = 0; x < width; ++x)
                for (std::int64_t c = 0; c < 3; ++c) {
                    const std::size_t i = static_cast<std::size_t>((y * width + x) * 3 + c);
                    INFO("x " << x << " y " << y);
                    CHECK(out[i] == ((x + y) % 3 != 0 ? (want[i] == 0 ? 200 : want[i]) : 200));
                }
    }
}

TEST_CASE("flow --units normalized --absolute with an AffineGrid grid equals sample", "[cli][flow][grid]") {
    std::mt19937 rng(28);
    TempDir dir;
    io::write_npy(dir / "x.npy", random_tensor(DType::Float32, {1, 2, 8, 10}, -3, 3, rng).view());
    write_bytes(dir / "theta.txt", "0.9 -0.25 0.1\n0.3 0.85 -0.2\n");
    for (const std::string dtype : {"float64", "float32"}) {
        for (bool align_corners : {false, true}) {
            for (const std::string mode : {"linear", "nearest", "cubic"}) {
                INFO("grid " << dtype << " align_corners " << align_corners << " " << mode);
                std::vector<std::string> grid = {"grid", "--theta", (dir / "theta.txt").string(), "--size", "1,2,6,11", "-o",
                                                 (dir / "g.npy").string(), "--dtype", dtype};
                std::vector<std::string> sampling = {"--mode", mode, "--padding", "reflection"};
                if (align_corners) {
                    grid.push_back("--align-corners");
                    sampling.push_back("--align-corners");
                }
                run_ok(grid);
                std::vector<std::string> sample = {"sample", "-i", (dir / "x.npy").string(), "-g", (dir / "g.npy").string(), "-o",
                                                   (dir / "s.npy").string()};
                std::vector<std::string> flow = {"flow", "-i", (dir / "x.npy").string(), "-f", (dir / "g.npy").string(), "-o",
                                                 (dir / "f.npy").string(), "--units", "normalized", "--absolute",
                                                 "--antialias", "off"};
                sample.insert(sample.end(), sampling.begin(), sampling.end());
                flow.insert(flow.end(), sampling.begin(), sampling.end());
                run_ok(sample);
                run_ok(flow);
                const Tensor s = io::read_npy(dir / "s.npy"), f = io::read_npy(dir / "f.npy");
                REQUIRE(f.shape() == Shape{1, 2, 6, 11});
                CHECK(compare_exact(f.view(), s.view()) == "");
            }
        }
    }
}

// -------------------------------------------------------------------------------------------------
// 4. gridwarp info

TEST_CASE("info --json describes images, volumes, tensors and flows", "[cli][info]") {
    TempDir dir;
    SECTION("PNG") {
        io::Image image;
        image.kind = io::FileKind::Raster;
        image.channels = 3;
        image.spatial = {5, 7};
        image.layout = io::ChannelLayout::Interleaved;
        std::vector<double> values(5 * 7 * 3);
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(10 + (i * 7) % 200);
        values[17] = 3;
        values[40] = 251;
        image.pixels = tensor_from(DType::UInt8, {5, 7, 3}, values);
        io::write_image(dir / "a.png", image);
        const auto info = info_json(dir / "a.png");
        CHECK(info.at("kind") == "image");
        CHECK(info.at("format") == "png");
        CHECK(info.at("size") == nlohmann::json::array({7, 5}));
        CHECK(info.at("channels") == 3);
        CHECK(info.at("channel_order") == "BGR");
        CHECK(info.at("dtype") == "uint8");
        CHECK(info.at("range") == nlohmann::json::array({3.0, 251.0}));
        CHECK_FALSE(info.contains("spacing"));
    }
    SECTION("16-bit grey PNG") {
        io::Image image;
        image.kind = io::FileKind::Raster;
        image.channels = 1;
        image.spatial = {2, 3};
        image.layout = io::ChannelLayout::Interleaved;
        image.pixels = tensor_from(DType::UInt16, {2, 3, 1}, {100, 65535, 7, 300, 400, 500});
        io::write_image(dir / "g.png", image);
        const auto info = info_json(dir / "g.png");
        CHECK(info.at("size") == nlohmann::json::array({3, 2}));
        CHECK(info.at("channels") == 1);
        CHECK_FALSE(info.contains("channel_order"));
        CHECK(info.at("dtype") == "uint16");
        CHECK(info.at("range") == nlohmann::json::array({7.0, 65535.0}));
    }
    SECTION("NIfTI") {
        std::mt19937 rng(29);
        io::Image volume = int16_volume(3, 4, 6, rng);
        std::vector<double> values = as_doubles(volume.pixels.view());
        for (auto& v : values) v = std::clamp(v, -2000.0, 2000.0);
        values[5] = -2500;
        values[50] = 2999;
        volume.pixels = tensor_from(DType::Int16, {3, 4, 6, 1}, values);
        io::write_image(dir / "v.nii.gz", volume);
        const auto info = info_json(dir / "v.nii.gz");
        CHECK(info.at("kind") == "volume");
        CHECK(info.at("format") == "nifti");
        CHECK(info.at("size") == nlohmann::json::array({6, 4, 3}));
        CHECK(info.at("channels") == 1);
        CHECK(info.at("dtype") == "int16");
        CHECK(info.at("range") == nlohmann::json::array({-2500.0, 2999.0}));
        const io::Geometry g = oblique_geometry();
        for (int i = 0; i < 3; ++i) {
            CHECK(info.at("spacing").at(i).get<double>() == Approx(g.spacing[i]).margin(1e-6));
            CHECK(info.at("origin").at(i).get<double>() == Approx(g.origin[i]).margin(1e-6));
            for (int j = 0; j < 3; ++j) {
                INFO("direction row " << i << " column " << j);
                CHECK(info.at("direction").at(i).at(j).get<double>() == Approx(g.direction[i * 3 + j]).margin(1e-6));
            }
        }
    }
    SECTION(".npy tensor, with a NaN") {
        std::vector<double> values(2 * 3 * 4 * 5);
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.25 * static_cast<double>(i) - 7;
        values[3] = std::numeric_limits<double>::quiet_NaN();
        io::write_npy(dir / "t.npy", tensor_from(DType::Float32, {2, 3, 4, 5}, values).view());
        const auto info = info_json(dir / "t.npy");
        CHECK(info.at("kind") == "tensor");
        CHECK(info.at("format") == "npy");
        CHECK(info.at("size") == nlohmann::json::array({5, 4}));
        CHECK(info.at("batch") == 2);
        CHECK(info.at("channels") == 3);
        CHECK(info.at("dtype") == "float32");
        CHECK(info.at("range") == nlohmann::json::array({-7.0, 0.25 * 119 - 7}));
        CHECK(info.at("non_finite_values") == 1);
    }
    SECTION(".flo") {
        write_bytes(dir / "f.flo", flo_bytes(3, 2, {1, 2, -3, 4, 5, 6, 7, 8, 1e9f, 0, -0.5f, 9}));
        const auto info = info_json(dir / "f.flo");
        CHECK(info.at("kind") == "flow");
        CHECK(info.at("format") == "flo");
        CHECK(info.at("size") == nlohmann::json::array({3, 2}));
        CHECK(info.at("channels") == 2);
        CHECK(info.at("range") == nlohmann::json::array({-3.0, 9.0}));
        CHECK(info.at("non_finite_values") == 2);
    }
}

TEST_CASE("info works on every bundled sample in data/", "[cli][info][data]") {
    const fs::path data = data_dir().parent_path().parent_path() / "data";
    REQUIRE(fs::exists(data / "card.png"));
    REQUIRE(fs::exists(data / "brain.nii.gz"));
    REQUIRE(fs::exists(data / "swirl.flo"));
    CHECK(info_json(data / "card.png").at("kind") == "image");
    CHECK(info_json(data / "brain.nii.gz").at("kind") == "volume");
    CHECK(info_json(data / "swirl.flo").at("kind") == "flow");
    CHECK(info_json(data / "card.png").at("size") == nlohmann::json::array({320, 240}));
    CHECK(info_json(data / "swirl.flo").at("size") == nlohmann::json::array({320, 240}));
    // And every other image, volume or flow there, in text form too.
    for (const auto& entry : fs::directory_iterator(data)) {
        const std::string extension = entry.path().extension().string();
        if (extension == ".md" || extension == ".py" || extension == ".tfm") continue;
        INFO(entry.path().string());
        (void)info_json(entry.path());
        const RunResult text = run_ok({"info", entry.path().string()});
        CHECK(text.out.find("size:") != std::string::npos);
    }
}

// -------------------------------------------------------------------------------------------------
// 5. Errors

TEST_CASE("affine and flow refuse bad inputs with one line and leave nothing behind", "[cli][affine][flow][errors]") {
    std::mt19937 rng(30);
    TempDir dir;
    const fs::path inputs = dir / "in", outputs = dir / "out";
    fs::create_directory(inputs);
    fs::create_directory(outputs);
    const io::Image image = rgb_image(6, 8, rng);
    const fs::path png = inputs / "img.png";
    io::write_image(png, image);
    const fs::path nii = inputs / "vol.nii.gz";
    io::write_image(nii, int16_volume(3, 4, 5, rng));
    write_bytes(inputs / "identity.txt", "1 0 0\n0 1 0\n");
    const fs::path out = outputs / "o.png";
    auto refuse = [&](const std::vector<std::string>& args, const std::vector<std::string>& needles, fs::path output) {
        const auto before = listing(output.parent_path());
        require_refusal(run_gridwarp(args), needles, output, before);
        CHECK(listing(outputs).empty());
    };

    SECTION("corrupt input: garbage named .png") {
        const fs::path bad = inputs / "bad.png";
        write_bytes(bad, std::string(300, 'x'));
        refuse({"affine", "-i", bad.string(), "-o", out.string(), "--rotate", "90"}, {bad.string()}, out);
    }
    SECTION("corrupt input: a truncated PNG") {
        std::mt19937 noise(1);
        io::Image big = rgb_image(40, 40, noise);
        io::write_image(inputs / "big.png", big);
        const std::string bytes = io::read_file_bytes(inputs / "big.png");
        const fs::path cut = inputs / "cut.png";
        write_bytes(cut, bytes.substr(0, bytes.size() / 2));
        refuse({"affine", "-i", cut.string(), "-o", out.string(), "--rotate", "90"}, {cut.string()}, out);
    }
    SECTION("corrupt input: a truncated .nii.gz") {
        const std::string bytes = io::read_file_bytes(nii);
        const fs::path cut = inputs / "cut.nii.gz";
        write_bytes(cut, bytes.substr(0, bytes.size() / 2));
        const fs::path o = outputs / "o.nii.gz";
        refuse({"affine", "-i", cut.string(), "-o", o.string(), "--rotate", "90"}, {cut.string()}, o);
    }
    SECTION("corrupt input: garbage named .nii") {
        const fs::path bad = inputs / "bad.nii";
        write_bytes(bad, std::string(400, '\x07'));
        const fs::path o = outputs / "o.nii";
        refuse({"affine", "-i", bad.string(), "-o", o.string(), "--rotate", "90"}, {bad.string()}, o);
    }
    SECTION("unreadable flow") {
        const fs::path bad = inputs / "bad.flo";
        write_bytes(bad, "PIEH\x08\0\0\0\x06\0\0\0short");
        refuse({"flow", "-i", png.string(), "-f", bad.string(), "-o", out.string()}, {bad.string()}, out);
        const fs::path missing = inputs / "missing.flo";
        refuse({"flow", "-i", png.string(), "-f", missing.string(), "-o", out.string()}, {missing.string()}, out);
        const fs::path garbage = inputs / "garbage.npy";
        write_bytes(garbage, "not numpy");
        refuse({"flow", "-i", png.string(), "-f", garbage.string(), "-o", out.string()}, {garbage.string()}, out);
    }
    SECTION("flow rank mismatch") {
        const fs::path f3 = inputs / "f3.npy";
        io::write_npy(f3, Tensor(DType::Float32, {2, 6, 8, 3}).view());
        refuse({"flow", "-i", png.string(), "-f", f3.string(), "-o", out.string()}, {f3.string()}, out);
        const fs::path f2 = inputs / "f2.npy";
        io::write_npy(f2, Tensor(DType::Float32, {4, 5, 2}).view());
        const fs::path o = outputs / "o.nii.gz";
        refuse({"flow", "-i", nii.string(), "-f", f2.string(), "-o", o.string()}, {f2.string()}, o);
        const fs::path batch = inputs / "batch.npy";
        io::write_npy(batch, Tensor(DType::Float32, {2, 6, 8, 2}).view());
        refuse({"flow", "-i", png.string(), "-f", batch.string(), "-o", out.string()}, {batch.string()}, out);
    }
    SECTION("--matrix of the wrong shape") {
        const fs::path m = inputs / "m.txt";
        write_bytes(m, "1 0 0 0\n0 1 0 0\n0 0 1 0\n");  // 3x4 for an image
        refuse({"affine", "-i", png.string(), "-o", out.string(), "--matrix", m.string()}, {m.string()}, out);
        const fs::path m2 = inputs / "m2.txt";
        write_bytes(m2, "1 0 0\n0 1 0\n");  // 2x3 for a volume
        const fs::path o = outputs / "o.nii.gz";
        refuse({"affine", "-i", nii.string(), "-o", o.string(), "--matrix", m2.string()}, {m2.string()}, o);
        const fs::path bottom = inputs / "bottom.txt";
        write_bytes(bottom, "1 0 0\n0 1 0\n0 1 1\n");  // not 0 0 1
        refuse({"affine", "-i", png.string(), "-o", out.string(), "--matrix", bottom.string()}, {bottom.string()}, out);
    }
    SECTION("a singular matrix with --inverse") {
        const fs::path m = inputs / "singular.txt";
        write_bytes(m, "1 2 3\n2 4 5\n");
        refuse({"affine", "-i", png.string(), "-o", out.string(), "--matrix", m.string(), "--inverse"}, {m.string(), "singular"},
               out);
    }
    SECTION("two transform sources at once") {
        const fs::path m = inputs / "identity.txt";
        refuse({"affine", "-i", png.string(), "-o", out.string(), "--matrix", m.string(), "--rotate", "90"}, {"--matrix", "--rotate"},
               out);
        refuse({"affine", "-i", png.string(), "-o", out.string(), "--matrix", m.string(), "--theta", m.string()}, {"--theta", "--matrix"},
               out);
        refuse({"affine", "-i", png.string(), "-o", out.string(), "--theta", m.string(), "--shift=1,1"}, {"--theta", "--shift"}, out);
        refuse({"affine", "-i", png.string(), "-o", out.string(), "--rotate", "90", "--inverse"}, {"--inverse"}, out);
        refuse({"affine", "-i", png.string(), "-o", out.string()}, {"--theta"}, out);
    }
    SECTION("bad option values name the option") {
        refuse({"affine", "-i", png.string(), "-o", out.string(), "--shift=1,2,3"}, {"--shift"}, out);
        refuse({"affine", "-i", png.string(), "-o", out.string(), "--rotate", "90", "--size", "4,4,4"}, {"--size"}, out);
        refuse({"affine", "-i", png.string(), "-o", out.string(), "--rotate", "10", "--scale", "0"}, {"--scale"}, out);
        const fs::path f = inputs / "f.npy";
        io::write_npy(f, Tensor(DType::Float32, {6, 8, 2}).view());
        refuse({"flow", "-i", png.string(), "-f", f.string(), "-o", out.string(), "--units", "furlongs"}, {"--units"}, out);
    }
    SECTION("output equal to the input") {
        const std::string before = io::read_file_bytes(png);
        const auto inputs_before = listing(inputs);
        require_refusal(run_gridwarp({"affine", "-i", png.string(), "-o", png.string(), "--rotate", "90"}), {png.string()},
                        inputs / "never-written", inputs_before);
        CHECK(io::read_file_bytes(png) == before);
        CHECK(listing(inputs) == inputs_before);
        const fs::path f = inputs / "f.npy";
        io::write_npy(f, Tensor(DType::Float32, {6, 8, 2}).view());
        const std::string flow_before = io::read_file_bytes(f);
        require_refusal(run_gridwarp({"flow", "-i", png.string(), "-f", f.string(), "-o", f.string()}), {f.string()},
                        inputs / "never-written", listing(inputs));
        CHECK(io::read_file_bytes(f) == flow_before);
        const fs::path spelled = inputs / "." / "img.png";
        require_refusal(run_gridwarp({"affine", "-i", png.string(), "-o", spelled.string(), "--shift=1,1"}), {"img.png"},
                        inputs / "never-written", listing(inputs));
        CHECK(io::read_file_bytes(png) == before);
    }
    SECTION("output into a missing directory") {
        const fs::path missing = outputs / "missing" / "o.png";
        require_refusal(run_gridwarp({"affine", "-i", png.string(), "-o", missing.string(), "--rotate", "90"}), {missing.string()},
                        missing, {});
        CHECK(listing(outputs).empty());
        const fs::path missing_nii = outputs / "nowhere" / "o.nii.gz";
        io::write_npy(inputs / "f3.npy", Tensor(DType::Float32, {3, 4, 5, 3}).view());
        require_refusal(
            run_gridwarp({"flow", "-i", nii.string(), "-f", (inputs / "f3.npy").string(), "-o", missing_nii.string()}),
            {missing_nii.string()}, missing_nii, {});
        CHECK(listing(outputs).empty());
    }
    SECTION("an output format that cannot hold the pixels") {
        io::Image deep = rgb_image(4, 5, rng, DType::UInt16);
        io::write_image(inputs / "deep.png", deep);
        const fs::path jpg = outputs / "o.jpg";
        refuse({"affine", "-i", (inputs / "deep.png").string(), "-o", jpg.string(), "--rotate", "90"}, {jpg.string(), "uint16"}, jpg);
        const fs::path tif = outputs / "o.tif";
        io::write_npy(inputs / "b.npy", Tensor(DType::Bool, {1, 3, 4, 5}).view());
        refuse({"affine", "-i", (inputs / "b.npy").string(), "-o", tif.string(), "--rotate", "90"}, {tif.string()}, tif);
        const fs::path two = outputs / "two.png";
        io::write_npy(inputs / "n2.npy", Tensor(DType::UInt8, {2, 1, 4, 5}).view());
        refuse({"affine", "-i", (inputs / "n2.npy").string(), "-o", two.string(), "--rotate", "90"}, {two.string()}, two);
    }
}

// --------------------------------------------------------------------------------------------
// The memory budget (--max-memory): every output a command line or a small file sizes is checked
// before it is allocated. Each limit below is the output's bytes worked out by hand: the budget
// of exactly those bytes runs, one byte less is refused with one line naming the option.
// --------------------------------------------------------------------------------------------

TEST_CASE("budget: --max-memory bounds each command's output, by the bytes it needs", "[cli][budget]") {
    std::mt19937 rng(32);
    TempDir dir;
    const fs::path out_dir = dir / "out";
    fs::create_directory(out_dir);
    auto runs_at_and_refused_below = [&](std::vector<std::string> args, std::uint64_t bytes, const fs::path& output,
                                         const std::vector<std::string>& needles) {
        args.push_back("--max-memory");
        args.push_back(std::to_string(bytes - 1));
        {
            INFO("one byte short: " << bytes - 1);
            const auto before = listing(out_dir);
            const RunResult refused = run_gridwarp(args);
            std::vector<std::string> all = needles;
            all.push_back("needs " + std::to_string(bytes) + " bytes");
            all.push_back("--max-memory " + std::to_string(bytes - 1) + " bytes");
            require_refusal(refused, all, output, before);
        }
        args.back() = std::to_string(bytes);
        const RunResult ran = run_gridwarp(args);
        INFO(describe(ran));
        CHECK(ran.status == 0);
        fs::remove(output);
    };

    const fs::path volume = dir / "v.nii";
    io::write_image(volume, int16_volume(3, 4, 5, rng));
    const fs::path png = dir / "i.png";
    io::write_image(png, rgb_image(6, 8, rng));

    SECTION("affine --size: W x H x D voxels of the input's type; 512^3 (and 1024^3 int16) fit the default") {
        const fs::path o = out_dir / "o.nii";
        // int16: 2 bytes a voxel.
        runs_at_and_refused_below({"affine", "-i", volume.string(), "-o", o.string(), "--size", "7,6,5"}, 7 * 6 * 5 * 2, o,
                                  {"--size"});
        const RunResult big = run_gridwarp({"affine", "-i", volume.string(), "-o", o.string(), "--size", "512,512,512", "--explain"});
        INFO(describe(big));
        CHECK(big.status == 0);
        // 1024^3 int16 is 2 GiB, the default exactly; one more slice is refused.
        CHECK(run_gridwarp({"affine", "-i", volume.string(), "-o", o.string(), "--size", "1024,1024,1024", "--explain"}).status == 0);
        const RunResult over = run_gridwarp({"affine", "-i", volume.string(), "-o", o.string(), "--size", "1024,1024,1025", "--explain"});
        require_refusal(over, {"--size", "needs 2149580800 bytes", "--max-memory 2147483648 bytes (2 GiB)"}, o, {});
        // Suffixes are powers of 1024; 0 lifts the budget.
        CHECK(run_gridwarp({"affine", "-i", volume.string(), "-o", o.string(), "--size", "1024,1024,1025", "--explain",
                            "--max-memory", "3G"}).status == 0);
        CHECK(run_gridwarp({"affine", "-i", volume.string(), "-o", o.string(), "--size", "1024,1024,1025", "--explain",
                            "--max-memory", "0"}).status == 0);
        require_refusal(run_gridwarp({"affine", "-i", volume.string(), "-o", o.string(), "--size", "7,6,5", "--max-memory", "419"}),
                        {"needs 420 bytes"}, o, {});
        CHECK(run_gridwarp({"affine", "-i", volume.string(), "-o", o.string(), "--size", "16,16,16", "--max-memory", "8K"}).status == 0);
        fs::remove(o);
        require_refusal(run_gridwarp({"affine", "-i", volume.string(), "-o", o.string(), "--size", "16,16,17", "--max-memory", "8K"}),
                        {"needs 8704 bytes", "--max-memory 8192 bytes (8 KiB)"}, o, {});
        // The deprecated count of values: alone it replaces the byte budget (0 lifts every limit).
        CHECK(run_gridwarp({"affine", "-i", volume.string(), "-o", o.string(), "--size", "1024,1024,1025", "--explain",
                            "--max-voxels", "0"}).status == 0);
        require_refusal(run_gridwarp({"affine", "-i", volume.string(), "-o", o.string(), "--size", "7,6,5", "--max-voxels", "209"}),
                        {"is 210 values, more than --max-voxels 209"}, o, {});
    }
    SECTION("an unreadable budget is refused naming the option") {
        const fs::path o = out_dir / "o.nii";
        for (const char* bad : {"lots", "-1", "4Q"}) {
            INFO(bad);
            require_refusal(run_gridwarp({"affine", "-i", volume.string(), "-o", o.string(), "--rotate", "5", "--max-memory", bad}),
                            {"--max-memory"}, o, {});
        }
    }
    SECTION("resample: the output grid and a floating copy of an integer input") {
        const fs::path o = out_dir / "o.nii";
        // 3x4x5 int16 voxels: 120 bytes out; as float64, 480 bytes out and 480 for the copy.
        runs_at_and_refused_below({"resample", "-i", volume.string(), "-o", o.string()}, 120, o, {volume.string()});
        runs_at_and_refused_below({"resample", "-i", volume.string(), "-o", o.string(), "--output-type", "float64"}, 480, o,
                                  {volume.string()});
        const fs::path reference = dir / "ref.nii";
        io::write_image(reference, int16_volume(6, 7, 8, rng));
        runs_at_and_refused_below({"resample", "-i", volume.string(), "-r", reference.string(), "-o", o.string()}, 6 * 7 * 8 * 2, o,
                                  {reference.string()});
    }
    SECTION("sample: N x C of the tensor at every grid point, in the tensor's type") {
        const fs::path x = dir / "x.npy", g = dir / "g.npy", y = out_dir / "y.npy";
        io::write_npy(x, Tensor(DType::Float64, {2, 3, 4, 4}).view());
        io::write_npy(g, Tensor(DType::Float32, {2, 5, 7, 2}).view());
        runs_at_and_refused_below({"sample", "-i", x.string(), "-g", g.string(), "-o", y.string()}, 2 * 3 * 5 * 7 * 8, y,
                                  {x.string(), g.string()});
    }
    SECTION("flow: the input's channels at every point of the field") {
        const fs::path f = dir / "f.npy", o = out_dir / "o.png";
        io::write_npy(f, Tensor(DType::Float32, {10, 12, 2}).view());
        runs_at_and_refused_below({"flow", "-i", png.string(), "-f", f.string(), "-o", o.string()}, 10 * 12 * 3, o, {f.string()});
        // A field in an encoded image is decoded under the same budget: a 12x10 KITTI PNG is 720
        // bytes of uint16 (its 360-byte output and 144-byte input fit).
        io::Image kitti;
        kitti.kind = io::FileKind::Raster;
        kitti.channels = 3;
        kitti.spatial = {10, 12};
        kitti.layout = io::ChannelLayout::Interleaved;
        kitti.pixels = Tensor(DType::UInt16, {10, 12, 3});
        const fs::path k = dir / "k.png";
        io::write_image(k, kitti);
        runs_at_and_refused_below({"flow", "-i", png.string(), "-f", k.string(), "-o", o.string()}, 720, o, {k.string()});
    }
    SECTION("grid: rank values a point, C not counted") {
        const fs::path theta = dir / "theta.txt", g = out_dir / "g.npy";
        write_bytes(theta, "1 0 0\n0 1 0\n");
        runs_at_and_refused_below({"grid", "--theta", theta.string(), "--size", "1,9,5,7", "-o", g.string()}, 5 * 7 * 2 * 4, g,
                                  {"--size"});
    }
}
