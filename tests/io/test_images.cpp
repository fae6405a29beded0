// Raster images (OpenCV), volumes with geometry (ITK) and flow fields, at the library level.
// Inputs are made here (write_image, or bytes built by hand for .flo and corrupt files); the NIfTI
// fixtures in tests/data/images were written by nibabel (tests/fixtures/make_image_fixtures.py),
// and their expected voxels and geometry come from nibabel and numpy, never from gridwarp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
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

// Distinct values spread over the type's whole range, with its extremes first (integers), or
// fractions, -0, huge and tiny magnitudes and NaN (floats).
Tensor patterned(DType type, const Shape& shape, std::uint64_t seed) {
    Tensor tensor(type, shape);
    visit_dtype(type, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            T* p = tensor.data_as<T>();
            for (std::int64_t i = 0; i < tensor.numel(); ++i) {
                p[i] = static_cast<T>(static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull + seed * 0x632BE59BD9B4E019ull);
            }
            if (tensor.numel() >= 2) {
                p[0] = std::numeric_limits<T>::min();
                p[1] = std::numeric_limits<T>::max();
            }
        } else if constexpr (std::is_floating_point_v<T>) {
            T* p = tensor.data_as<T>();
            for (std::int64_t i = 0; i < tensor.numel(); ++i) {
                p[i] = static_cast<T>(static_cast<double>((i * 37 + static_cast<std::int64_t>(seed)) % 101) * 0.375 - 17.0 +
                                      static_cast<double>(i) * 1e-3);
            }
            if (tensor.numel() >= 5) {
                p[0] = static_cast<T>(-0.0);
                p[1] = static_cast<T>(1e30);
                p[2] = static_cast<T>(-1e-30);
                p[3] = std::numeric_limits<T>::quiet_NaN();
                p[4] = std::numeric_limits<T>::lowest();
            }
        }
        return 0;
    });
    return tensor;
}

// nifticlib (under ITK's NIfTI reader) replaces NaN and infinite floats with 0 when it reads, so
// NIfTI round trips are checked on finite values (see the NaN test below).
void without_non_finite(Tensor& tensor) {
    visit_dtype(tensor.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_floating_point_v<T>) {
            T* p = tensor.data_as<T>();
            for (std::int64_t i = 0; i < tensor.numel(); ++i) {
                if (!std::isfinite(p[i])) p[i] = static_cast<T>(42.5);
            }
        }
        return 0;
    });
}

io::Image raster(DType type, std::int64_t height, std::int64_t width, std::int64_t channels, std::uint64_t seed) {
    io::Image image;
    image.kind = io::FileKind::Raster;
    image.format = "png";
    image.channels = channels;
    image.spatial = {height, width};
    image.layout = io::ChannelLayout::Interleaved;
    image.pixels = patterned(type, {height, width, channels}, seed);
    return image;
}

// A rotation: R_z(a) R_x(b) R_y(c) for 3-D, R(a) for 2-D; row-major.
std::vector<double> oblique_direction(std::size_t dimension) {
    const double a = 0.5, b = -0.3, c = 0.2;
    if (dimension == 2) return {std::cos(a), -std::sin(a), std::sin(a), std::cos(a)};
    auto multiply = [](const std::vector<double>& x, const std::vector<double>& y) {
        std::vector<double> z(9, 0.0);
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j)
                for (int k = 0; k < 3; ++k) z[i * 3 + j] += x[i * 3 + k] * y[k * 3 + j];
        return z;
    };
    const std::vector<double> rz{std::cos(a), -std::sin(a), 0, std::sin(a), std::cos(a), 0, 0, 0, 1};
    const std::vector<double> rx{1, 0, 0, 0, std::cos(b), -std::sin(b), 0, std::sin(b), std::cos(b)};
    const std::vector<double> ry{std::cos(c), 0, std::sin(c), 0, 1, 0, -std::sin(c), 0, std::cos(c)};
    return multiply(multiply(rz, rx), ry);
}

io::Geometry oblique_geometry(std::size_t dimension) {
    io::Geometry geometry;
    // Values a float32 holds exactly: NIfTI stores spacing and origin as float32.
    geometry.spacing = {0.5, 1.25, 2.0};
    geometry.origin = {-10.5, 3.25, 7.0};
    geometry.spacing.resize(dimension);
    geometry.origin.resize(dimension);
    geometry.direction = oblique_direction(dimension);
    return geometry;
}

io::Image volume(DType type, const Shape& spatial, std::int64_t channels, io::ChannelLayout layout, std::uint64_t seed) {
    io::Image image;
    image.kind = io::FileKind::Volume;
    image.format = "nifti";
    image.channels = channels;
    image.spatial = spatial;
    image.layout = layout;
    Shape storage;
    if (layout == io::ChannelLayout::Interleaved) {
        storage = spatial;
        storage.push_back(channels);
    } else {
        storage = {1, channels};
        storage.insert(storage.end(), spatial.begin(), spatial.end());
    }
    image.pixels = patterned(type, storage, seed);
    image.geometry = oblique_geometry(spatial.size());
    return image;
}

void check_geometry(const io::Geometry& actual, const io::Geometry& expected, double tolerance) {
    REQUIRE(actual.spacing.size() == expected.spacing.size());
    REQUIRE(actual.origin.size() == expected.origin.size());
    REQUIRE(actual.direction.size() == expected.direction.size());
    for (std::size_t i = 0; i < expected.spacing.size(); ++i) {
        INFO("axis " << i);
        CHECK(actual.spacing[i] == Approx(expected.spacing[i]).margin(tolerance).epsilon(0));
        CHECK(actual.origin[i] == Approx(expected.origin[i]).margin(tolerance).epsilon(0));
    }
    for (std::size_t i = 0; i < expected.direction.size(); ++i) {
        INFO("direction element " << i);
        CHECK(actual.direction[i] == Approx(expected.direction[i]).margin(tolerance).epsilon(0));
    }
}

// Runs `action`, which must throw a FileError naming `file` (its file() and the start of the message).
template <class Action>
void require_file_error(const fs::path& file, Action&& action) {
    INFO("file " << file.string());
    bool thrown = false;
    try {
        action();
    } catch (const io::FileError& e) {
        thrown = true;
        INFO("message: " << e.what());
        CHECK(e.file() == file);
        CHECK(std::string(e.what()).rfind(file.string() + ": ", 0) == 0);
    } catch (const std::exception& e) {
        FAIL("expected a FileError, got another exception: " << e.what());
    }
    CHECK(thrown);
}

// Little-endian .flo bytes: "PIEH", width, height, then (u, v) per pixel, rows top to bottom.
std::string flo_bytes(std::int32_t width, std::int32_t height, const std::vector<float>& uv) {
    std::string bytes = "PIEH";
    auto put = [&](const void* p) {
        unsigned char b[4];
        std::memcpy(b, p, 4);
        std::uint32_t v;
        std::memcpy(&v, b, 4);
        for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    };
    put(&width);
    put(&height);
    for (float value : uv) put(&value);
    return bytes;
}

std::vector<std::string> volume_extensions() { return {".nii", ".nii.gz", ".nrrd", ".nhdr", ".mha", ".mhd"}; }

std::string expected_volume_format(const std::string& extension) {
    if (extension == ".nii" || extension == ".nii.gz") return "nifti";
    if (extension == ".nrrd" || extension == ".nhdr") return "nrrd";
    return "metaimage";
}

}  // namespace

// -------------------------------------------------------------------------------------------------
// Raster images

TEST_CASE("images: PNG, TIFF and BMP round trips are exact", "[io][images][raster]") {
    struct Case {
        std::string extension;
        DType dtype;
        std::int64_t channels;
    };
    const std::vector<Case> cases = {
        {".png", DType::UInt8, 1},    {".png", DType::UInt8, 3},    {".png", DType::UInt8, 4},
        {".png", DType::UInt16, 1},   {".png", DType::UInt16, 3},   {".png", DType::UInt16, 4},
        {".tif", DType::UInt8, 1},    {".tif", DType::UInt8, 3},    {".tiff", DType::UInt16, 1},
        {".tif", DType::UInt16, 3},   {".tif", DType::Float32, 1},  {".tif", DType::Float32, 3},
        {".tif", DType::Int8, 1},     {".tif", DType::Int16, 1},    {".tif", DType::Int32, 1},
        {".tif", DType::Float64, 1},  {".tif", DType::Float32, 4},  {".tif", DType::UInt16, 4},
        {".tif", DType::Int16, 3},    {".tif", DType::Float64, 4},  {".tif", DType::UInt32, 2},
        {".tif", DType::Int64, 1},
        {".bmp", DType::UInt8, 1},    {".bmp", DType::UInt8, 3},
    };
    TempDir dir;
    std::uint64_t seed = 1;
    for (const auto& c : cases) {
        const std::string name = std::string(dtype_name(c.dtype)) + "_c" + std::to_string(c.channels) + c.extension;
        SECTION(name) {
            const io::Image written = raster(c.dtype, 7, 9, c.channels, seed);
            const fs::path file = dir / name;
            io::write_image(file, written);
            CHECK(listing(dir.path()) == std::vector<std::string>{name});
            const io::Image read = io::read_image(file);
            CHECK(read.kind == io::FileKind::Raster);
            CHECK(read.format == c.extension.substr(1));
            CHECK(read.dtype() == c.dtype);
            CHECK(read.channels == c.channels);
            CHECK(read.batch == 1);
            CHECK(read.spatial == Shape{7, 9});
            CHECK(read.layout == io::ChannelLayout::Interleaved);
            CHECK_FALSE(read.geometry);
            CHECK(read.channel_order == (c.channels == 3 ? "BGR" : c.channels == 4 ? "BGRA" : ""));
            CHECK(compare_exact(read.pixels.view(), written.pixels.view()) == "");
            CHECK(compare_exact(read.nchw(), written.nchw()) == "");
        }
        ++seed;
    }
}

TEST_CASE("images: the (N, C, H, W) view of an interleaved image indexes pixels by hand", "[io][images][raster]") {
    TempDir dir;
    const io::Image written = raster(DType::UInt8, 4, 5, 3, 11);
    io::write_image(dir / "a.png", written);
    const io::Image read = io::read_image(dir / "a.png");
    const ConstTensorView view = read.nchw();
    REQUIRE(view.shape == Shape{1, 3, 4, 5});
    const auto* stored = written.pixels.data_as<std::uint8_t>();
    for (std::int64_t c = 0; c < 3; ++c)
        for (std::int64_t y = 0; y < 4; ++y)
            for (std::int64_t x = 0; x < 5; ++x) {
                const auto* element = view.typed<std::uint8_t>() + c * view.strides[1] + y * view.strides[2] + x * view.strides[3];
                REQUIRE(*element == stored[(y * 5 + x) * 3 + c]);
            }
}

TEST_CASE("images: JPEG is lossy but keeps size, channels and dtype, and values approximately", "[io][images][raster]") {
    TempDir dir;
    for (std::int64_t channels : {1, 3}) {
        SECTION("channels " + std::to_string(channels)) {
            // A smooth image: JPEG keeps it to within a few levels.
            const std::int64_t height = 24, width = 32;
            io::Image written = raster(DType::UInt8, height, width, channels, 0);
            auto* p = written.pixels.data_as<std::uint8_t>();
            for (std::int64_t y = 0; y < height; ++y)
                for (std::int64_t x = 0; x < width; ++x)
                    for (std::int64_t c = 0; c < channels; ++c) p[(y * width + x) * channels + c] = static_cast<std::uint8_t>(20 + 3 * x + 2 * y + 30 * c);
            const fs::path file = dir / "smooth.jpg";
            io::write_image(file, written);
            const io::Image read = io::read_image(file);
            CHECK(read.format == "jpg");
            CHECK(read.dtype() == DType::UInt8);
            CHECK(read.channels == channels);
            CHECK(read.spatial == Shape{height, width});
            const auto a = as_doubles(read.pixels.view());
            const auto e = as_doubles(written.pixels.view());
            REQUIRE(a.size() == e.size());
            double worst = 0, total = 0;
            for (std::size_t i = 0; i < a.size(); ++i) {
                worst = std::max(worst, std::fabs(a[i] - e[i]));
                total += std::fabs(a[i] - e[i]);
            }
            CHECK(worst <= 12);
            CHECK(total / static_cast<double>(a.size()) <= 3);
        }
    }
}

TEST_CASE("images: WebP round trip (lossless by default) when OpenCV can write it", "[io][images][raster]") {
    TempDir dir;
    for (std::int64_t channels : {3, 4}) {
        io::Image written = raster(DType::UInt8, 6, 8, channels, 5);
        // WebP's lossless encoder may change the colour of fully transparent pixels (OpenCV does
        // not ask libwebp to keep it exactly): keep alpha above 0.
        if (channels == 4) {
            auto* p = written.pixels.data_as<std::uint8_t>();
            for (std::int64_t i = 3; i < written.pixels.numel(); i += 4) p[i] = std::max<std::uint8_t>(p[i], 1);
        }
        const fs::path file = dir / (std::to_string(channels) + "channels.webp");
        try {
            io::write_image(file, written);
        } catch (const io::FileError& e) {
            WARN("WebP not written, skipped: " << e.what());
            CHECK_FALSE(fs::exists(file));
            return;
        }
        const io::Image read = io::read_image(file);
        CHECK(read.format == "webp");
        CHECK(read.dtype() == DType::UInt8);
        CHECK(read.channels == channels);
        CHECK(read.spatial == Shape{6, 8});
        CHECK(compare_exact(read.pixels.view(), written.pixels.view()) == "");
    }
}

TEST_CASE("images: pixel types a format cannot hold are refused and nothing is written", "[io][images][raster][errors]") {
    TempDir dir;
    const fs::path png = dir / "f64.png";
    require_file_error(png, [&] { io::write_image(png, raster(DType::Float64, 3, 4, 1, 0)); });
    const fs::path jpg = dir / "i64.jpg";
    require_file_error(jpg, [&] { io::write_image(jpg, raster(DType::Int64, 3, 4, 3, 0)); });
    const fs::path jpg16 = dir / "u16.jpg";
    require_file_error(jpg16, [&] { io::write_image(jpg16, raster(DType::UInt16, 3, 4, 3, 0)); });
    // Half floats are a TIFF sample format few readers share.
    const fs::path tiff16 = dir / "f16.tif";
    require_file_error(tiff16, [&] { io::write_image(tiff16, raster(DType::Float16, 3, 4, 3, 0)); });
    const fs::path five = dir / "five.png";
    require_file_error(five, [&] { io::write_image(five, raster(DType::UInt8, 3, 4, 5, 0)); });
    CHECK(listing(dir.path()).empty());
}

// -------------------------------------------------------------------------------------------------
// Volumes

TEST_CASE("volumes: every dtype, scalar, vector and 4-D series, round trip through every format", "[io][images][volume]") {
    const std::vector<DType> dtypes = {DType::Int8,  DType::UInt8,  DType::Int16, DType::UInt16,  DType::Int32,
                                       DType::UInt32, DType::Int64, DType::UInt64, DType::Float32, DType::Float64};
    struct Layout {
        std::string name;
        std::int64_t channels;
        io::ChannelLayout layout;
    };
    const std::vector<Layout> layouts = {{"scalar", 1, io::ChannelLayout::Interleaved},
                                         {"vector3", 3, io::ChannelLayout::Interleaved},
                                         {"series4", 4, io::ChannelLayout::Planar}};
    const Shape spatial{2, 3, 4};  // D, H, W
    std::uint64_t seed = 100;
    for (const auto& extension : volume_extensions()) {
        for (const auto& layout : layouts) {
            for (DType dtype : dtypes) {
                ++seed;
                const std::string name = std::string(dtype_name(dtype)) + "_" + layout.name + extension;
                DYNAMIC_SECTION(name) {
                    TempDir dir;
                    io::Image written = volume(dtype, spatial, layout.channels, layout.layout, seed);
                    if (expected_volume_format(extension) == "nifti") without_non_finite(written.pixels);
                    const fs::path file = dir / name;
                    io::write_image(file, written);
                    const auto files = listing(dir.path());
                    // .nhdr and .mhd are detached headers: a header and a data file, nothing else.
                    const bool detached = extension == ".nhdr" || extension == ".mhd";
                    CHECK(files.size() == (detached ? 2u : 1u));
                    CHECK(std::count(files.begin(), files.end(), name) == 1);
                    for (const auto& f : files) CHECK(f.rfind(".gridwarp-", 0) != 0);

                    const io::Image read = io::read_image(file);
                    CHECK(read.kind == io::FileKind::Volume);
                    CHECK(read.format == expected_volume_format(extension));
                    CHECK(read.dtype() == dtype);
                    CHECK(read.batch == 1);
                    CHECK(read.channels == layout.channels);
                    CHECK(read.spatial == spatial);
                    // NIfTI stores vector components as volumes (dim 5): they read back planar,
                    // except 3 or 4 uint8 channels, stored as interleaved RGB24/RGBA32.
                    const bool nifti = expected_volume_format(extension) == "nifti";
                    const bool rgb = dtype == DType::UInt8 && layout.layout == io::ChannelLayout::Interleaved &&
                                     (layout.channels == 3 || layout.channels == 4);
                    const auto read_layout = nifti && layout.channels > 1 && !rgb ? io::ChannelLayout::Planar : layout.layout;
                    if (layout.channels > 1) CHECK(read.layout == read_layout);
                    CHECK(compare_exact(read.nchw(), written.nchw()) == "");
                    if (read.layout == layout.layout) CHECK(compare_exact(read.pixels.view(), written.pixels.view()) == "");
                    REQUIRE(read.geometry);
                    check_geometry(*read.geometry, *written.geometry, 1e-6);
                }
            }
        }
    }
}

TEST_CASE("volumes: NaN and infinities survive every volume format", "[io][images][volume][nan]") {
    // ITK's NIfTI reader replaced non-finite floats with 0; gridwarp's NIfTI codec keeps them, as
    // NRRD and MetaImage (through ITK) do.
    for (const auto& extension : volume_extensions()) {
        DYNAMIC_SECTION("NaN" << extension) {
            TempDir dir;
            io::Image written = volume(DType::Float32, {2, 2, 3}, 3, io::ChannelLayout::Interleaved, 1);
            float* p = written.pixels.data_as<float>();
            p[4] = std::numeric_limits<float>::quiet_NaN();
            p[5] = std::numeric_limits<float>::infinity();
            io::write_image(dir / ("n" + extension), written);
            const io::Image read = io::read_image(dir / ("n" + extension));
            const Tensor values = Tensor::copy_of(read.nchw());
            const Tensor expected = Tensor::copy_of(written.nchw());
            const float* q = values.data_as<float>();
            const float* e = expected.data_as<float>();
            for (std::int64_t i = 0; i < values.numel(); ++i) {
                INFO("element " << i);
                if (std::isnan(e[i])) CHECK(std::isnan(q[i]));
                else CHECK(q[i] == e[i]);
            }
        }
    }
}

TEST_CASE("volumes: 2-D images keep their 2x2 geometry", "[io][images][volume]") {
    for (const auto& extension : volume_extensions()) {
        DYNAMIC_SECTION("2-D" << extension) {
            TempDir dir;
            io::Image written = volume(DType::Float32, {5, 6}, 1, io::ChannelLayout::Interleaved, 7);
            if (expected_volume_format(extension) == "nifti") without_non_finite(written.pixels);
            const fs::path file = dir / ("flat" + extension);
            io::write_image(file, written);
            const io::Image read = io::read_image(file);
            CHECK(read.spatial == Shape{5, 6});
            CHECK(read.channels == 1);
            CHECK(compare_exact(read.nchw(), written.nchw()) == "");
            REQUIRE(read.geometry);
            check_geometry(*read.geometry, *written.geometry, 1e-6);
        }
    }
}

TEST_CASE("volumes: a detached header finds its data after the move into place", "[io][images][volume]") {
    // The data file is named in the header; both must end up side by side under their final names.
    for (const std::string extension : {".nhdr", ".mhd"}) {
        TempDir dir;
        const io::Image written = volume(DType::Int16, {3, 4, 5}, 1, io::ChannelLayout::Interleaved, 3);
        io::write_image(dir / ("v" + extension), written);
        const auto files = listing(dir.path());
        REQUIRE(files.size() == 2);
        const std::string header = io::read_file_bytes(dir / ("v" + extension));
        for (const auto& f : files) {
            if (f != "v" + extension) {
                INFO("data file " << f << " must be named in the header:\n" << header);
                CHECK(header.find(f) != std::string::npos);
            }
        }
        // The header refers to the data by a relative name: the pair still reads after a move.
        TempDir elsewhere;
        for (const auto& f : files) fs::rename(dir / f, elsewhere / f);
        const io::Image read = io::read_image(elsewhere / ("v" + extension));
        CHECK(compare_exact(read.nchw(), written.nchw()) == "");
    }
}

TEST_CASE("volumes: a NIfTI written by nibabel reads with the LPS geometry of its RAS affine", "[io][images][volume][nibabel]") {
    const auto expected = nlohmann::json::parse(io::read_file_bytes(data_dir() / "images" / "images.json"));
    const auto& e = expected.at("oblique_i2.nii.gz");
    const io::Image image = io::read_image(data_dir() / "images" / "oblique_i2.nii.gz");
    const auto shape = e.at("shape").get<std::vector<std::int64_t>>();  // nibabel (i, j, k)
    REQUIRE(shape.size() == 3);
    CHECK(image.kind == io::FileKind::Volume);
    CHECK(image.format == "nifti");
    CHECK(image.dtype() == DType::Int16);
    CHECK(image.channels == 1);
    REQUIRE(image.spatial == Shape{shape[2], shape[1], shape[0]});

    // The geometry: L = diag(-1, -1, 1) A, computed by numpy from the affine nibabel reads back.
    io::Geometry lps;
    lps.spacing = e.at("spacing").get<std::vector<double>>();
    lps.origin = e.at("origin").get<std::vector<double>>();
    lps.direction = e.at("direction").get<std::vector<double>>();
    REQUIRE(image.geometry);
    check_geometry(*image.geometry, lps, 1e-6);
    // And the same by hand from the affine: the first two rows of RAS flip to LPS.
    const auto affine = e.at("affine").get<std::vector<std::vector<double>>>();
    for (int row = 0; row < 3; ++row) {
        const double flip = row < 2 ? -1.0 : 1.0;
        CHECK(image.geometry->origin[row] == Approx(flip * affine[row][3]).margin(1e-6));
        for (int column = 0; column < 3; ++column) {
            const double physical = image.geometry->direction[row * 3 + column] * image.geometry->spacing[column];
            CHECK(physical == Approx(flip * affine[row][column]).margin(1e-6));
        }
    }

    // Voxels: nibabel's [i, j, k] is gridwarp's [k, j, i].
    const auto values = e.at("values").get<std::vector<double>>();
    const auto actual = as_doubles(image.nchw());
    REQUIRE(values.size() == actual.size());
    for (std::int64_t i = 0; i < shape[0]; ++i)
        for (std::int64_t j = 0; j < shape[1]; ++j)
            for (std::int64_t k = 0; k < shape[2]; ++k) {
                const double nib = values[static_cast<std::size_t>((i * shape[1] + j) * shape[2] + k)];
                const double ours = actual[static_cast<std::size_t>((k * shape[1] + j) * shape[0] + i)];
                INFO("i j k = " << i << " " << j << " " << k);
                REQUIRE(ours == nib);
                REQUIRE(nib == 100 * k + 10 * j + i - 37);  // the formula the script used
            }
}

TEST_CASE("volumes: a vector NIfTI written by nibabel reads as a volume per component", "[io][images][volume][nibabel]") {
    const auto expected = nlohmann::json::parse(io::read_file_bytes(data_dir() / "images" / "images.json"));
    const auto& e = expected.at("vector_f4.nii.gz");
    const auto shape = e.at("shape").get<std::vector<std::int64_t>>();  // (i, j, k, 1, c)
    REQUIRE(shape == std::vector<std::int64_t>{4, 3, 2, 1, 3});
    const auto values = e.at("values").get<std::vector<double>>();
    const fs::path file = data_dir() / "images" / "vector_f4.nii.gz";

    const io::Image image = io::read_image(file);
    CHECK(image.dtype() == DType::Float32);
    CHECK(image.channels == 3);
    CHECK(image.layout == io::ChannelLayout::Planar);
    REQUIRE(image.spatial == Shape{2, 3, 4});
    REQUIRE(image.geometry);
    check_geometry(*image.geometry, io::Geometry{{2.0, 1.0, 0.5}, {0, 0, 0}, {-1, 0, 0, 0, -1, 0, 0, 0, 1}}, 1e-6);

    const io::FlowField flow = io::read_flow(file);
    CHECK(flow.format == "nifti");
    REQUIRE(flow.field.shape() == Shape{1, 2, 3, 4, 3});
    REQUIRE(flow.geometry);
    const auto field = as_doubles(flow.field.view());
    for (std::int64_t i = 0; i < 4; ++i)
        for (std::int64_t j = 0; j < 3; ++j)
            for (std::int64_t k = 0; k < 2; ++k)
                for (std::int64_t c = 0; c < 3; ++c) {
                    const double nib = values[static_cast<std::size_t>(((i * 3 + j) * 2 + k) * 3 + c)];
                    INFO("i j k c = " << i << " " << j << " " << k << " " << c);
                    REQUIRE(nib == (c + 1) * (i + 0.25) - j + 0.5 * k);
                    REQUIRE(field[static_cast<std::size_t>(((k * 3 + j) * 4 + i) * 3 + c)] == nib);
                }
}

TEST_CASE("volumes: resampled_geometry keeps the physical extent", "[io][images][volume][geometry]") {
    SECTION("by hand, one axis-aligned case") {
        // 4 voxels of 2 mm starting at 10 (centres 10, 12, 14, 16; outer edges 9 and 17).
        const io::Geometry g{{2.0, 1.0}, {10.0, 0.0}, {1, 0, 0, 1}};
        const io::Geometry ac0 = io::resampled_geometry(g, {3, 4}, {3, 8}, false);
        // 8 voxels over [9, 17]: 1 mm each, first centre at 9.5.
        CHECK(ac0.spacing[0] == Approx(1.0));
        CHECK(ac0.origin[0] == Approx(9.5));
        CHECK(ac0.spacing[1] == Approx(1.0));
        CHECK(ac0.origin[1] == Approx(0.0).margin(1e-12));
        const io::Geometry ac1 = io::resampled_geometry(g, {3, 4}, {3, 8}, true);
        // 8 centres over [10, 16]: 6/7 mm apart, first at 10.
        CHECK(ac1.spacing[0] == Approx(6.0 / 7.0));
        CHECK(ac1.origin[0] == Approx(10.0));
        CHECK(ac1.direction == g.direction);
    }
    SECTION("oblique 3-D, both align_corners, the corners agree") {
        const io::Geometry g = oblique_geometry(3);
        const Shape old_spatial{4, 6, 8}, new_spatial{2, 9, 5};  // D, H, W
        for (bool align_corners : {false, true}) {
            INFO("align_corners " << align_corners);
            const io::Geometry r = io::resampled_geometry(g, old_spatial, new_spatial, align_corners);
            CHECK(r.direction == g.direction);
            // The physical point of continuous index t (innermost first) in a geometry.
            auto point = [](const io::Geometry& geometry, const std::vector<double>& t) {
                std::vector<double> p = geometry.origin;
                for (int row = 0; row < 3; ++row)
                    for (int axis = 0; axis < 3; ++axis) p[row] += geometry.direction[row * 3 + axis] * geometry.spacing[axis] * t[axis];
                return p;
            };
            // The extent's corners: outer edges of the edge voxels (align_corners 0) or corner centres (1).
            for (int corner = 0; corner < 8; ++corner) {
                std::vector<double> t_old(3), t_new(3);
                for (int axis = 0; axis < 3; ++axis) {
                    const bool high = (corner >> axis) & 1;
                    const double n_old = static_cast<double>(old_spatial[2 - axis]), n_new = static_cast<double>(new_spatial[2 - axis]);
                    if (align_corners) {
                        t_old[axis] = high ? n_old - 1 : 0;
                        t_new[axis] = high ? n_new - 1 : 0;
                    } else {
                        t_old[axis] = high ? n_old - 0.5 : -0.5;
                        t_new[axis] = high ? n_new - 0.5 : -0.5;
                    }
                }
                const auto a = point(g, t_old), b = point(r, t_new);
                for (int row = 0; row < 3; ++row) CHECK(b[row] == Approx(a[row]).margin(1e-9));
            }
            // And the spacing by hand.
            for (int axis = 0; axis < 3; ++axis) {
                const double n_old = static_cast<double>(old_spatial[2 - axis]), n_new = static_cast<double>(new_spatial[2 - axis]);
                const double expected = align_corners ? g.spacing[axis] * (n_old - 1) / (n_new - 1) : g.spacing[axis] * n_old / n_new;
                CHECK(r.spacing[axis] == Approx(expected));
            }
        }
    }
}

// -------------------------------------------------------------------------------------------------
// Refusals

TEST_CASE("images: corrupt, truncated and wrong-kind files are refused with a FileError naming the file", "[io][images][errors]") {
    TempDir dir;
    std::string garbage;
    for (int i = 0; i < 40; ++i) garbage += "this is not an image, only text " + std::to_string(i) + "\n";

    SECTION("garbage under an image or volume extension") {
        for (const std::string name : {"g.png", "g.jpg", "g.tif", "g.nii", "g.nii.gz", "g.nrrd", "g.nhdr", "g.mha", "g.mhd"}) {
            write_bytes(dir / name, garbage);
            require_file_error(dir / name, [&] { (void)io::read_image(dir / name); });
        }
    }
    SECTION("an empty file") {
        for (const std::string name : {"e.png", "e.nii", "e.nii.gz", "e.nrrd", "e.mha", "e.npy"}) {
            write_bytes(dir / name, "");
            require_file_error(dir / name, [&] { (void)io::read_image(dir / name); });
        }
    }
    SECTION("a directory") {
        for (const std::string name : {"d.png", "d.nii.gz", "d.npy"}) {
            fs::create_directory(dir / name);
            require_file_error(dir / name, [&] { (void)io::read_image(dir / name); });
        }
    }
    SECTION("a missing file") {
        require_file_error(dir / "missing.png", [&] { (void)io::read_image(dir / "missing.png"); });
        require_file_error(dir / "missing.nii", [&] { (void)io::read_image(dir / "missing.nii"); });
    }
    SECTION("a truncated PNG") {
        const fs::path whole = dir / "whole.png";
        std::mt19937 rng(9);
        io::Image noise = raster(DType::UInt8, 40, 40, 3, 9);
        noise.pixels = random_tensor(DType::UInt8, {40, 40, 3}, 0, 255, rng);  // incompressible
        io::write_image(whole, noise);
        const std::string bytes = io::read_file_bytes(whole);
        REQUIRE(bytes.size() > 1000);
        for (const std::size_t keep : {bytes.size() / 2, bytes.size() - 20, bytes.size() - 1, std::size_t{40}, std::size_t{8}}) {
            const fs::path cut = dir / ("cut" + std::to_string(keep) + ".png");
            write_bytes(cut, bytes.substr(0, keep));
            require_file_error(cut, [&] { (void)io::read_image(cut); });
        }
        // A damaged byte inside the pixel data (the IDAT chunk's CRC no longer matches).
        std::string damaged = bytes;
        damaged[bytes.size() / 2] = static_cast<char>(damaged[bytes.size() / 2] ^ 0x5a);
        write_bytes(dir / "damaged.png", damaged);
        require_file_error(dir / "damaged.png", [&] { (void)io::read_image(dir / "damaged.png"); });
        // Bytes after IEND are ignored, as libpng ignores them.
        write_bytes(dir / "trailing.png", bytes + "trailing bytes");
        CHECK(compare_exact(io::read_image(dir / "trailing.png").pixels.view(), noise.pixels.view()) == "");
    }
    SECTION("a BMP whose header declares more pixels than the file holds or than the memory budget") {
        // A 54-byte header (BITMAPINFOHEADER, 24 bits, uncompressed) and no pixel rows.
        auto bmp_header = [](std::int32_t width, std::int32_t height) {
            std::string h(54, '\0');
            auto put32 = [&](std::size_t at, std::uint32_t v) {
                for (int b = 0; b < 4; ++b) h[at + b] = static_cast<char>((v >> (8 * b)) & 0xff);
            };
            h[0] = 'B';
            h[1] = 'M';
            put32(2, 54);
            put32(10, 54);  // pixel data offset
            put32(14, 40);  // info header size
            put32(18, static_cast<std::uint32_t>(width));
            put32(22, static_cast<std::uint32_t>(height));
            h[26] = 1;   // planes
            h[28] = 24;  // bits per pixel
            return h;
        };
        auto message_of = [](const fs::path& file, const io::ReadOptions& options) {
            try {
                (void)io::read_image(file, options);
            } catch (const io::FileError& e) {
                return std::string(e.what());
            }
            return std::string("(read without an error)");
        };
        // Rows of 30000 pixels at 3 bytes are 90000 bytes (a multiple of 4): 30000 of them.
        write_bytes(dir / "huge.bmp", bmp_header(30000, -30000));
        io::ReadOptions unlimited;
        unlimited.memory.max_bytes = 0;
        const std::string huge = message_of(dir / "huge.bmp", unlimited);
        CHECK_THAT(huge, Catch::Contains("needs at least 2700000000 bytes") && Catch::Contains("holds 0"));
        // 100 x 100 pixels, 3 channels: 30000 values.
        write_bytes(dir / "small.bmp", bmp_header(100, 100) + std::string(300 * 100, '\0'));
        io::ReadOptions limited;
        limited.memory.max_bytes = 29999;
        CHECK_THAT(message_of(dir / "small.bmp", limited),
                   Catch::Contains("needs 30000 bytes (29.3 KiB), more than --max-memory 29999 bytes (29.3 KiB)"));
        limited.memory.max_bytes = 30000;
        CHECK(io::read_image(dir / "small.bmp", limited).pixels.numel() == 30000);
        // The deprecated count of values still bounds on its own.
        io::ReadOptions by_values;
        by_values.memory = {0, 29999};
        CHECK_THAT(message_of(dir / "small.bmp", by_values), Catch::Contains("30000 values, more than --max-voxels 29999"));
        by_values.memory.max_values = 30000;
        CHECK(io::read_image(dir / "small.bmp", by_values).pixels.numel() == 30000);
    }
    SECTION("a truncated .nii.gz and .nii") {
        for (const std::string extension : {".nii.gz", ".nii", ".nrrd", ".mha"}) {
            const fs::path whole = dir / ("whole" + extension);
            io::write_image(whole, volume(DType::Float32, {6, 7, 8}, 1, io::ChannelLayout::Interleaved, 4));
            const std::string bytes = io::read_file_bytes(whole);
            const fs::path cut = dir / ("cut" + extension);
            write_bytes(cut, bytes.substr(0, bytes.size() / 2));
            require_file_error(cut, [&] { (void)io::read_image(cut); });
        }
    }
    SECTION("hand-made uncompressed NRRD and MetaImage files, whole and truncated") {
        // int16 voxels 0, 1, ..., 23 of a 4 x 3 x 2 volume, little endian.
        std::string voxels;
        for (int v = 0; v < 24; ++v) {
            voxels.push_back(static_cast<char>(v * 1000 & 0xff));
            voxels.push_back(static_cast<char>((v * 1000 >> 8) & 0xff));
        }
        const std::string nrrd = "NRRD0004\ntype: int16\ndimension: 3\nsizes: 4 3 2\nspacings: 0.5 1 2\nencoding: raw\nendian: little\n\n";
        const std::string mha = "ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
                                "DimSize = 4 3 2\nElementSpacing = 0.5 1 2\nElementType = MET_SHORT\nElementDataFile = LOCAL\n";
        const std::string mhd = "ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
                                "DimSize = 4 3 2\nElementSpacing = 0.5 1 2\nElementType = MET_SHORT\nElementDataFile = h.raw\n";
        const std::string nhdr = "NRRD0004\ntype: int16\ndimension: 3\nsizes: 4 3 2\nspacings: 0.5 1 2\nencoding: raw\nendian: little\ndata file: h.raw\n\n";
        write_bytes(dir / "h.nrrd", nrrd + voxels);
        write_bytes(dir / "h.mha", mha + voxels);
        write_bytes(dir / "h.mhd", mhd);
        write_bytes(dir / "h.nhdr", nhdr);
        write_bytes(dir / "h.raw", voxels);
        for (const std::string name : {"h.nrrd", "h.mha", "h.mhd", "h.nhdr"}) {
            INFO(name);
            const io::Image image = io::read_image(dir / name);
            REQUIRE(image.spatial == Shape{2, 3, 4});
            REQUIRE(image.dtype() == DType::Int16);
            const auto values = as_doubles(image.nchw());
            for (int v = 0; v < 24; ++v) CHECK(values[static_cast<std::size_t>(v)] == static_cast<std::int16_t>(v * 1000));
            REQUIRE(image.geometry);
            check_geometry(*image.geometry, io::Geometry{{0.5, 1, 2}, {0, 0, 0}, {1, 0, 0, 0, 1, 0, 0, 0, 1}}, 1e-12);
        }
        const std::string cut = voxels.substr(0, voxels.size() - 6);
        write_bytes(dir / "h.nrrd", nrrd + cut);
        write_bytes(dir / "h.mha", mha + cut);
        write_bytes(dir / "h.raw", cut);
        for (const std::string name : {"h.nrrd", "h.mha", "h.mhd", "h.nhdr"}) {
            require_file_error(dir / name, [&] { (void)io::read_image(dir / name); });
        }
    }
    SECTION("a .png that is really a NIfTI, and a .nii that is really a PNG") {
        io::write_image(dir / "v.nii", volume(DType::UInt8, {2, 3, 4}, 1, io::ChannelLayout::Interleaved, 2));
        write_bytes(dir / "v.png", io::read_file_bytes(dir / "v.nii"));
        require_file_error(dir / "v.png", [&] { (void)io::read_image(dir / "v.png"); });
        io::write_image(dir / "p.png", raster(DType::UInt8, 3, 4, 1, 2));
        write_bytes(dir / "p.nii", io::read_file_bytes(dir / "p.png"));
        require_file_error(dir / "p.nii", [&] { (void)io::read_image(dir / "p.nii"); });
    }
}

// -------------------------------------------------------------------------------------------------
// Flow fields

TEST_CASE("flow: a .flo built byte by byte reads back", "[io][images][flow]") {
    TempDir dir;
    const std::int32_t width = 5, height = 3;
    std::vector<float> uv;
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
            uv.push_back(0.5f * static_cast<float>(x) - static_cast<float>(y));
            uv.push_back(1.25f * static_cast<float>(y) + 0.125f * static_cast<float>(x));
        }
    write_bytes(dir / "f.flo", flo_bytes(width, height, uv));
    const io::FlowField flow = io::read_flow(dir / "f.flo");
    CHECK(flow.format == "flo");
    CHECK_FALSE(flow.geometry);
    REQUIRE(flow.field.dtype() == DType::Float32);
    REQUIRE(flow.field.shape() == Shape{1, height, width, 2});
    const auto values = as_doubles(flow.field.view());
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
            CHECK(values[static_cast<std::size_t>((y * width + x) * 2)] == 0.5 * x - y);
            CHECK(values[static_cast<std::size_t>((y * width + x) * 2 + 1)] == 1.25 * y + 0.125 * x);
        }

    SECTION("unknown flow (|u| or |v| >= 1e9, infinite or NaN, as Middlebury's unknown_flow) reads as NaN in both components") {
        std::vector<float> marked = uv;
        marked[0] = 1e9f;             // pixel (0, 0): u unknown
        marked[2 * 3 + 1] = -1.5e9f;  // pixel (3, 0): v unknown
        marked[2 * 7] = 1e10f;        // pixel (2, 1): u unknown (what write_flo writes)
        marked[2 * 8] = 1.6e7f;       // pixel (3, 1): large but known (below 2^24; beyond it is refused)
        marked[2 * 9 + 1] = std::numeric_limits<float>::quiet_NaN();   // pixel (4, 1): v unknown
        marked[2 * 10] = -std::numeric_limits<float>::infinity();      // pixel (0, 2): u unknown
        marked[2 * 11 + 1] = std::numeric_limits<float>::infinity();   // pixel (1, 2): v unknown
        write_bytes(dir / "m.flo", flo_bytes(width, height, marked));
        const auto m = as_doubles(io::read_flow(dir / "m.flo").field.view());
        for (int p = 0; p < width * height; ++p) {
            INFO("pixel " << p);
            const bool unknown = p == 0 || p == 3 || p == 7 || p == 9 || p == 10 || p == 11;
            CHECK(std::isnan(m[static_cast<std::size_t>(2 * p)]) == unknown);
            CHECK(std::isnan(m[static_cast<std::size_t>(2 * p + 1)]) == unknown);
            if (!unknown) {
                CHECK(m[static_cast<std::size_t>(2 * p)] == static_cast<double>(marked[static_cast<std::size_t>(2 * p)]));
                CHECK(m[static_cast<std::size_t>(2 * p + 1)] == static_cast<double>(marked[static_cast<std::size_t>(2 * p + 1)]));
            }
        }
    }
    SECTION("truncated, oversized, or without the tag: refused") {
        const std::string bytes = flo_bytes(width, height, uv);
        write_bytes(dir / "short.flo", bytes.substr(0, bytes.size() - 4));
        require_file_error(dir / "short.flo", [&] { (void)io::read_flow(dir / "short.flo"); });
        write_bytes(dir / "header.flo", bytes.substr(0, 10));
        require_file_error(dir / "header.flo", [&] { (void)io::read_flow(dir / "header.flo"); });
        write_bytes(dir / "long.flo", bytes + std::string(8, '\0'));
        require_file_error(dir / "long.flo", [&] { (void)io::read_flow(dir / "long.flo"); });
        std::string tagged = bytes;
        tagged.replace(0, 4, "HEIP");
        write_bytes(dir / "tag.flo", tagged);
        require_file_error(dir / "tag.flo", [&] { (void)io::read_flow(dir / "tag.flo"); });
        write_bytes(dir / "empty.flo", "");
        require_file_error(dir / "empty.flo", [&] { (void)io::read_flow(dir / "empty.flo"); });
        require_file_error(dir / "missing.flo", [&] { (void)io::read_flow(dir / "missing.flo"); });
    }
    SECTION("write_flo writes these bytes") {
        Tensor field = tensor_from(DType::Float32, {height, width, 2}, std::vector<double>(uv.begin(), uv.end()));
        io::write_flo(dir / "w.flo", field.view());
        CHECK(io::read_file_bytes(dir / "w.flo") == flo_bytes(width, height, uv));
    }
}

TEST_CASE("flow: a KITTI 16-bit PNG decodes u, v and validity", "[io][images][flow]") {
    TempDir dir;
    const std::int64_t height = 2, width = 3;
    io::Image image = raster(DType::UInt16, height, width, 3, 0);
    auto* bgr = image.pixels.data_as<std::uint16_t>();
    // Per pixel: R (u), G (v), B (valid).
    const std::vector<std::array<int, 3>> rgb = {
        {32768, 32768, 1},       {32768 + 100, 32768 - 320, 1}, {0, 65535, 1},
        {32768 + 64, 32768, 0},  {32768 - 1, 32768 + 1, 7},    {40000, 20000, 0},
    };
    for (std::size_t p = 0; p < rgb.size(); ++p) {
        bgr[p * 3 + 0] = static_cast<std::uint16_t>(rgb[p][2]);
        bgr[p * 3 + 1] = static_cast<std::uint16_t>(rgb[p][1]);
        bgr[p * 3 + 2] = static_cast<std::uint16_t>(rgb[p][0]);
    }
    io::write_image(dir / "kitti.png", image);
    const io::FlowField flow = io::read_flow(dir / "kitti.png");
    CHECK(flow.format == "kitti");
    REQUIRE(flow.field.shape() == Shape{1, height, width, 2});
    const auto values = as_doubles(flow.field.view());
    for (std::size_t p = 0; p < rgb.size(); ++p) {
        INFO("pixel " << p);
        if (rgb[p][2] == 0) {
            CHECK(std::isnan(values[p * 2]));
            CHECK(std::isnan(values[p * 2 + 1]));
        } else {
            CHECK(values[p * 2] == (rgb[p][0] - 32768) / 64.0);
            CHECK(values[p * 2 + 1] == (rgb[p][1] - 32768) / 64.0);
        }
    }
    // Spot values by hand.
    CHECK(values[2] == 1.5625);
    CHECK(values[3] == -5.0);
    CHECK(values[4] == -512.0);
    CHECK(values[5] == 511.984375);

    SECTION("an 8-bit or single-channel PNG is not a KITTI flow") {
        io::write_image(dir / "u8.png", raster(DType::UInt8, 2, 3, 3, 1));
        require_file_error(dir / "u8.png", [&] { (void)io::read_flow(dir / "u8.png"); });
        io::write_image(dir / "gray.png", raster(DType::UInt16, 2, 3, 1, 1));
        require_file_error(dir / "gray.png", [&] { (void)io::read_flow(dir / "gray.png"); });
    }
}

TEST_CASE("flow: .npy fields of shape (H,W,2), (N,H,W,2) and (D,H,W,3)", "[io][images][flow]") {
    TempDir dir;
    std::mt19937 rng(3);
    struct Case {
        Shape stored;
        Shape expected;
        DType dtype;
    };
    const std::vector<Case> cases = {
        {{4, 5, 2}, {1, 4, 5, 2}, DType::Float32},
        {{3, 4, 5, 2}, {3, 4, 5, 2}, DType::Float64},
        {{2, 3, 4, 3}, {1, 2, 3, 4, 3}, DType::Float32},
        {{2, 2, 3, 4, 3}, {2, 2, 3, 4, 3}, DType::Float16},
    };
    for (const auto& c : cases) {
        const Tensor field = random_tensor(c.dtype, c.stored, -3, 3, rng);
        io::write_npy(dir / "f.npy", field.view());
        const io::FlowField flow = io::read_flow(dir / "f.npy");
        CHECK(flow.format == "npy");
        CHECK_FALSE(flow.geometry);
        REQUIRE(flow.field.shape() == c.expected);
        CHECK(flow.field.dtype() == c.dtype);
        CHECK(compare_exact(ConstTensorView(flow.field.dtype(), flow.field.data(), c.stored), field.view()) == "");
    }
    SECTION("shapes that are not flows are refused") {
        for (const Shape& shape : {Shape{4, 5, 3}, Shape{5, 2}, Shape{1, 2, 3, 4, 5, 2}, Shape{4}}) {
            INFO("shape " << shape_to_string(shape));
            io::write_npy(dir / "bad.npy", Tensor(DType::Float32, shape).view());
            require_file_error(dir / "bad.npy", [&] { (void)io::read_flow(dir / "bad.npy"); });
        }
        io::write_npy(dir / "complex.npy", Tensor(DType::Complex64, {4, 5, 2}).view());
        require_file_error(dir / "complex.npy", [&] { (void)io::read_flow(dir / "complex.npy"); });
    }
}

TEST_CASE("flow: vector volumes written by write_image read as fields with geometry", "[io][images][flow]") {
    TempDir dir;
    for (const std::string extension : {".nii.gz", ".nrrd", ".mha"}) {
        DYNAMIC_SECTION("3-D" << extension) {
            io::Image written = volume(DType::Float32, {2, 3, 4}, 3, io::ChannelLayout::Interleaved, 8);
            if (expected_volume_format(extension) == "nifti") without_non_finite(written.pixels);
            io::write_image(dir / ("d" + extension), written);
            const io::FlowField flow = io::read_flow(dir / ("d" + extension));
            CHECK(flow.format == expected_volume_format(extension));
            REQUIRE(flow.field.shape() == Shape{1, 2, 3, 4, 3});
            CHECK(compare_exact(ConstTensorView(flow.field.dtype(), flow.field.data(), Shape{2, 3, 4, 3}), written.pixels.view()) == "");
            REQUIRE(flow.geometry);
            check_geometry(*flow.geometry, *written.geometry, 1e-6);
        }
    }
    SECTION("a 2-D vector image with 2 components") {
        io::Image written = volume(DType::Float64, {3, 4}, 2, io::ChannelLayout::Interleaved, 9);
        without_non_finite(written.pixels);
        io::write_image(dir / "d2.nii", written);
        const io::FlowField flow = io::read_flow(dir / "d2.nii");
        REQUIRE(flow.field.shape() == Shape{1, 3, 4, 2});
        CHECK(compare_exact(ConstTensorView(flow.field.dtype(), flow.field.data(), Shape{3, 4, 2}), written.pixels.view()) == "");
    }
    SECTION("components that do not match the rank are refused") {
        io::write_image(dir / "scalar.nii", volume(DType::Float32, {2, 3, 4}, 1, io::ChannelLayout::Interleaved, 1));
        require_file_error(dir / "scalar.nii", [&] { (void)io::read_flow(dir / "scalar.nii"); });
        io::write_image(dir / "two.nii", volume(DType::Float32, {2, 3, 4}, 2, io::ChannelLayout::Interleaved, 1));
        require_file_error(dir / "two.nii", [&] { (void)io::read_flow(dir / "two.nii"); });
    }
    SECTION("formats that hold no flow are refused") {
        write_bytes(dir / "x.tif", "II*\0");
        require_file_error(dir / "x.tif", [&] { (void)io::read_flow(dir / "x.tif"); });
    }
}
