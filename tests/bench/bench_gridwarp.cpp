// bench_gridwarp: gridwarp against its peers in the same run, on identical inputs, with the same
// thread count (docs/performance.md). Not a test: it prints a table (or JSON with --json).
//
// Every workload runs gridwarp `--reps` times after one warm-up run, then its peer likewise, and
// reports the medians. Throughput is output points (pixels or voxels) per second;
// ratio = gridwarp throughput / peer throughput. "% of memory limit" compares the bytes a workload
// must move at least (input + explicit grid + output, each once) per second with the bandwidth of a
// plain parallel copy measured at the start of the same run.
#include <itkAffineTransform.h>
#include <itkImage.h>
#include <itkLinearInterpolateImageFunction.h>
#include <itkMultiThreaderBase.h>
#include <itkResampleImageFilter.h>
#include <itkVersion.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gridwarp/grid_sample.hpp"
#include "gridwarp/positions.hpp"

using namespace gridwarp;

namespace {

struct Config {
    int threads = 2;
    int reps = 7;
    bool json = false;
    std::int64_t size2d = 2048;   // W1-W3, W7 and the padding / align_corners rows
    std::int64_t size_rgb = 4096; // W4
    std::int64_t size3d = 256;    // W5
    std::int64_t size3d_grid = 128;  // W6
    std::int64_t copy_mb = 256;   // bytes of the copy that measures the memory limit
    std::set<std::string> only;   // workload ids to run; empty: all
};

void usage() {
    std::puts(
        "usage: bench_gridwarp [--json] [--quick] [--threads T] [--reps R] [--only W1,W4,...]\n"
        "                      [--size2d N] [--size-rgb N] [--size3d N] [--size3d-grid N] [--copy-mb M]\n"
        "                      [--gap-ms G]\n"
        "  --quick       small sizes and 3 repetitions (a smoke run of a few seconds)\n"
        "  --threads T   threads for gridwarp, OpenCV and ITK alike (default 2)\n"
        "  --reps R      timed runs per program and workload; medians are reported (default 7)\n"
        "  --only LIST   workload ids (W1, W2, W3, W4, W5, W6, W7, W1-border, W1-reflection, W1-ac1, ...)\n"
        "  --gap-ms G    pause G ms before every timed run (default 0)\n"
        "  --json        print JSON instead of the table");
}

using Clock = std::chrono::steady_clock;

template <class Fn>
double seconds(Fn&& fn) {
    const auto t0 = Clock::now();
    fn();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

struct Timings {
    std::vector<double> a, b;
};

// Optional pause before every timed run (--gap-ms; off by default). On a virtual machine an idle
// vCPU can take milliseconds to wake, so a pause mostly measures that; without one, the other
// library's idle worker threads may still spin for a moment after its last run, which is why each
// program's runs are taken together (after a warm-up run) rather than alternately.
int g_gap_ms = 0;

void pause_between_runs() {
    if (g_gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(g_gap_ms));
}

std::vector<double> timed_runs(int reps, const std::function<void()>& fn) {
    fn();  // warm-up: first touch of the output, thread start-up
    std::vector<double> runs;
    for (int r = 0; r < reps; ++r) {
        pause_between_runs();
        runs.push_back(seconds(fn));
    }
    return runs;
}

// gridwarp's runs, then the peer's.
Timings measure(int reps, const std::function<void()>& a, const std::function<void()>& b) {
    Timings t;
    t.a = timed_runs(reps, a);
    t.b = timed_runs(reps, b);
    return t;
}

struct Row {
    std::string id;
    std::string what;
    std::string peer;
    std::vector<double> gridwarp_runs, peer_runs;  // seconds
    double points = 0;  // output points
    double bytes = 0;   // least bytes the gridwarp run moves
    double goal = 0;    // ratio goal; 0: none
    double max_diff = std::numeric_limits<double>::quiet_NaN();
    std::string diff_note;
    // Time per output point of the position source alone (PositionSource::row, one thread, in
    // rows of 256 points as the kernel asks for them): the part of gridwarp's time that the
    // kernel does not control.
    double source_ns = std::numeric_limits<double>::quiet_NaN();
};

// Median time per point of reading every position of `positions` once, on one thread.
double source_time_per_point(const PositionSource& positions, int reps) {
    const Shape& spatial = positions.output_shape();
    const auto rank = static_cast<std::int64_t>(spatial.size());
    const std::int64_t width = spatial.back();
    const std::int64_t rows = shape_numel(Shape(spatial.begin(), spatial.end() - 1));
    std::vector<double> xyz_double(static_cast<std::size_t>(256 * rank));
    std::vector<float> xyz_float(static_cast<std::size_t>(256 * rank));
    std::vector<std::int64_t> outer(static_cast<std::size_t>(std::max<std::int64_t>(rank - 1, 1)));
    const bool doubles = positions.coordinate_dtype() == DType::Float64;
    auto read_all = [&] {
        for (std::int64_t n = 0; n < positions.batch(); ++n) {
            for (std::int64_t r = 0; r < rows; ++r) {
                std::int64_t rest = r;
                for (std::int64_t axis = rank - 2; axis >= 0; --axis) {
                    outer[static_cast<std::size_t>(axis)] = rest % spatial[static_cast<std::size_t>(axis)];
                    rest /= spatial[static_cast<std::size_t>(axis)];
                }
                for (std::int64_t start = 0; start < width; start += 256) {
                    const std::int64_t count = std::min<std::int64_t>(256, width - start);
                    if (doubles) {
                        positions.row(n, outer.data(), start, count, xyz_double.data());
                    } else {
                        positions.row(n, outer.data(), start, count, xyz_float.data());
                    }
                }
            }
        }
    };
    const std::vector<double> runs = timed_runs(std::max(reps, 3), read_all);
    return median(runs) * 1e9 / static_cast<double>(positions.batch() * rows * width);
}

std::string read_cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            return colon == std::string::npos ? line : line.substr(colon + 2);
        }
    }
    return "unknown";
}

std::string read_loadavg() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return a + " " + b + " " + c;
}

// Bytes per second of a plain parallel copy (read + write counted), the memory limit of this run.
double measure_copy_bandwidth(std::int64_t megabytes, int threads, int reps) {
    const std::size_t n = static_cast<std::size_t>(megabytes) * (1u << 20) / sizeof(float);
    std::vector<float> src(n), dst(n);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) {
        src[static_cast<std::size_t>(i)] = static_cast<float>(i & 1023);
        dst[static_cast<std::size_t>(i)] = 0.0f;
    }
    auto copy = [&] {
#pragma omp parallel num_threads(threads)
        {
            const std::size_t parts = static_cast<std::size_t>(omp_get_num_threads());
            const std::size_t me = static_cast<std::size_t>(omp_get_thread_num());
            const std::size_t begin = n * me / parts, end = n * (me + 1) / parts;
            std::memcpy(dst.data() + begin, src.data() + begin, (end - begin) * sizeof(float));
        }
    };
    copy();
    std::vector<double> runs;
    for (int r = 0; r < std::max(reps, 3); ++r) runs.push_back(seconds(copy));
    return 2.0 * static_cast<double>(n * sizeof(float)) / median(runs);
}

// ---------------------------------------------------------------------------------------------
// 2-D: a smooth explicit grid (a slight zoom-out and rotation plus a sinusoidal displacement, so
// that some points fall outside near the edges), as a normalized gridwarp grid and as OpenCV maps
// holding the very pixel positions that gridwarp computes from that grid.

struct Case2d {
    Tensor input;  // (1, 1, n, n) float32
    Tensor grid;   // (1, n, n, 2) float32, normalized
    cv::Mat src, map_x, map_y;
};

void smooth_position_2d(std::int64_t x, std::int64_t y, std::int64_t n, double& px, double& py) {
    const double centre = 0.5 * static_cast<double>(n - 1), scale = 1.04, angle = 5.0 * M_PI / 180.0;
    const double dx = static_cast<double>(x) - centre, dy = static_cast<double>(y) - centre;
    const double amplitude = 0.002 * static_cast<double>(n), period = static_cast<double>(n) / 7.0;
    px = centre + scale * (std::cos(angle) * dx - std::sin(angle) * dy) + amplitude * std::sin(2 * M_PI * y / period);
    py = centre + scale * (std::sin(angle) * dx + std::cos(angle) * dy) + amplitude * std::cos(2 * M_PI * x / period);
}

Case2d make_case_2d(std::int64_t n, bool align_corners, std::mt19937& rng) {
    Case2d c;
    c.input = Tensor(DType::Float32, {1, 1, n, n});
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    float* in = c.input.data_as<float>();
    for (std::int64_t i = 0; i < n * n; ++i) in[i] = uniform(rng);
    c.src = cv::Mat(static_cast<int>(n), static_cast<int>(n), CV_32FC1, in);  // shares the buffer

    c.grid = Tensor(DType::Float32, {1, n, n, 2});
    c.map_x = cv::Mat(static_cast<int>(n), static_cast<int>(n), CV_32FC1);
    c.map_y = cv::Mat(static_cast<int>(n), static_cast<int>(n), CV_32FC1);
    float* g = c.grid.data_as<float>();
    const float extent = static_cast<float>(n);
    const double d = static_cast<double>(n);
    for (std::int64_t y = 0; y < n; ++y) {
        for (std::int64_t x = 0; x < n; ++x) {
            double px, py;
            smooth_position_2d(x, y, n, px, py);
            const float gx = static_cast<float>(align_corners ? 2.0 * px / (d - 1) - 1.0 : (2.0 * px + 1.0) / d - 1.0);
            const float gy = static_cast<float>(align_corners ? 2.0 * py / (d - 1) - 1.0 : (2.0 * py + 1.0) / d - 1.0);
            g[(y * n + x) * 2] = gx;
            g[(y * n + x) * 2 + 1] = gy;
            // gridwarp's unnormalization in float (docs/semantics.md), so both see the same positions.
            auto pixel = [&](float v) {
                return align_corners ? (v + 1.0f) / 2.0f * (extent - 1.0f) : ((v + 1.0f) * extent - 1.0f) / 2.0f;
            };
            c.map_x.at<float>(static_cast<int>(y), static_cast<int>(x)) = pixel(gx);
            c.map_y.at<float>(static_cast<int>(y), static_cast<int>(x)) = pixel(gy);
        }
    }
    return c;
}

double max_abs_diff_f32(const float* a, const float* b, std::int64_t count) {
    double worst = 0;
    for (std::int64_t i = 0; i < count; ++i) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
    return worst;
}

struct Variant2d {
    std::string id;
    Interpolation mode;
    Padding padding;
    bool align_corners;
    int cv_interpolation;
    int cv_border;
    double goal;
};

void run_2d(const Config& config, std::vector<Row>& rows, std::mt19937& rng) {
    const std::int64_t n = config.size2d;
    const std::vector<Variant2d> variants = {
        {"W1", Interpolation::Linear, Padding::Zeros, false, cv::INTER_LINEAR, cv::BORDER_CONSTANT, 4.0},
        {"W2", Interpolation::Cubic, Padding::Zeros, false, cv::INTER_CUBIC, cv::BORDER_CONSTANT, 2.0},
        {"W3", Interpolation::Nearest, Padding::Zeros, false, cv::INTER_NEAREST, cv::BORDER_CONSTANT, 1.5},
        {"W1-border", Interpolation::Linear, Padding::Border, false, cv::INTER_LINEAR, cv::BORDER_REPLICATE, 0},
        {"W1-reflection", Interpolation::Linear, Padding::Reflection, false, cv::INTER_LINEAR, cv::BORDER_REFLECT, 0},
        {"W1-ac1", Interpolation::Linear, Padding::Zeros, true, cv::INTER_LINEAR, cv::BORDER_CONSTANT, 0},
        {"W2-border", Interpolation::Cubic, Padding::Border, false, cv::INTER_CUBIC, cv::BORDER_REPLICATE, 0},
        {"W2-reflection", Interpolation::Cubic, Padding::Reflection, false, cv::INTER_CUBIC, cv::BORDER_REFLECT, 0},
        {"W3-border", Interpolation::Nearest, Padding::Border, false, cv::INTER_NEAREST, cv::BORDER_REPLICATE, 0},
    };
    bool any = config.only.empty() || config.only.count("W7");
    for (const auto& v : variants) any = any || config.only.count(v.id);
    if (!any) return;

    Case2d cases[2] = {make_case_2d(n, false, rng), Case2d{}};
    bool have_ac1 = false;
    Tensor out(DType::Float32, {1, 1, n, n});
    cv::Mat dst(static_cast<int>(n), static_cast<int>(n), CV_32FC1);
    const double points = static_cast<double>(n * n);
    const double bytes = points * (4 + 8 + 4);  // input, grid, output

    for (const auto& v : variants) {
        if (!config.only.empty() && !config.only.count(v.id)) continue;
        if (v.align_corners && !have_ac1) {
            cases[1] = make_case_2d(n, true, rng);
            have_ac1 = true;
        }
        const Case2d& c = cases[v.align_corners ? 1 : 0];
        const GridPositions positions(c.grid.view());
        SampleOptions options;
        options.mode = v.mode;
        options.padding = v.padding;
        options.align_corners = v.align_corners;
        options.threads = config.threads;
        const Timings t = measure(
            config.reps, [&] { grid_sample(c.input.view(), positions, out.view(), options); },
            [&] { cv::remap(c.src, dst, c.map_x, c.map_y, v.cv_interpolation, v.cv_border, cv::Scalar(0)); });
        Row row;
        row.id = v.id;
        row.what = "2-D float32 1ch " + std::to_string(n) + "^2 grid, " + std::string(interpolation_name(v.mode)) + ", " +
                   std::string(padding_name(v.padding)) + (v.align_corners ? ", align_corners=1" : "");
        static const char* const kInterNames[] = {"INTER_NEAREST", "INTER_LINEAR", "INTER_CUBIC"};
        row.peer = std::string("cv::remap ") + kInterNames[v.cv_interpolation] + " float maps";
        row.gridwarp_runs = t.a;
        row.peer_runs = t.b;
        row.points = points;
        row.bytes = bytes;
        row.goal = v.goal;
        row.max_diff = max_abs_diff_f32(out.data_as<float>(), dst.ptr<float>(), n * n);
        row.diff_note = v.mode == Interpolation::Nearest ? "" : "OpenCV quantises positions to 1/32 pixel";
        row.source_ns = source_time_per_point(positions, config.reps);
        rows.push_back(row);
    }

    if (config.only.empty() || config.only.count("W7")) {
        const Case2d& c = cases[0];
        const GridPositions positions(c.grid.view());
        SampleOptions many;
        many.threads = config.threads;
        SampleOptions one;
        one.threads = 1;
        Tensor out1(DType::Float32, {1, 1, n, n});
        const Timings t = measure(
            config.reps, [&] { grid_sample(c.input.view(), positions, out.view(), many); },
            [&] { grid_sample(c.input.view(), positions, out1.view(), one); });
        Row row;
        row.id = "W7";
        row.what = "W1 on " + std::to_string(config.threads) + " threads vs 1 thread";
        row.peer = "gridwarp, 1 thread";
        row.gridwarp_runs = t.a;
        row.peer_runs = t.b;
        row.points = points;
        row.bytes = bytes;
        row.goal = 1.8;
        row.max_diff = max_abs_diff_f32(out.data_as<float>(), out1.data_as<float>(), n * n);
        rows.push_back(row);
    }
}

// ---------------------------------------------------------------------------------------------
// W4: uint8 HWC colour image sampled in place through strides, affine in pixel space.

void run_rgb(const Config& config, std::vector<Row>& rows, std::mt19937& rng) {
    if (!config.only.empty() && !config.only.count("W4")) return;
    const std::int64_t n = config.size_rgb;
    const int size = static_cast<int>(n);
    cv::Mat src(size, size, CV_8UC3), dst_cv(size, size, CV_8UC3), dst_gw(size, size, CV_8UC3);
    {
        std::uniform_int_distribution<int> byte(0, 255);
        for (std::int64_t i = 0; i < n * n * 3; ++i) src.data[i] = static_cast<unsigned char>(byte(rng));
    }
    // Output pixel -> input pixel: a rotation by 10 degrees and a zoom-out by 1.05 about the centre.
    const double centre = 0.5 * static_cast<double>(n - 1), s = 1.05, a = 10.0 * M_PI / 180.0;
    const double m00 = s * std::cos(a), m01 = -s * std::sin(a), m10 = s * std::sin(a), m11 = s * std::cos(a);
    const std::vector<double> matrix = {m00, m01, centre - m00 * centre - m01 * centre,
                                        m10, m11, centre - m10 * centre - m11 * centre};
    const cv::Mat m(2, 3, CV_64F, const_cast<double*>(matrix.data()));

    // gridwarp reads and writes the interleaved buffers as (1, 3, H, W) through strides.
    const ConstTensorView in(DType::UInt8, src.data, {1, 3, n, n}, {0, 1, 3 * n, 3});
    const TensorView out(DType::UInt8, dst_gw.data, {1, 3, n, n}, {0, 1, 3 * n, 3});
    // What `gridwarp affine --matrix` builds: float64 positions in pixel space.
    const AffinePositions positions(matrix, 1, {n, n}, false, DType::Float64, CoordinateSpace::Pixel);
    SampleOptions options;
    options.threads = config.threads;
    const Timings t = measure(
        config.reps, [&] { grid_sample(in, positions, out, options); },
        [&] {
            cv::warpAffine(src, dst_cv, m, src.size(), cv::INTER_LINEAR | cv::WARP_INVERSE_MAP, cv::BORDER_CONSTANT,
                           cv::Scalar::all(0));
        });
    Row row;
    row.id = "W4";
    row.what = "2-D uint8 3ch HWC " + std::to_string(n) + "^2, affine (fused, pixel space), linear, zeros";
    row.peer = "cv::warpAffine INTER_LINEAR|WARP_INVERSE_MAP";
    row.gridwarp_runs = t.a;
    row.peer_runs = t.b;
    row.points = static_cast<double>(n * n);
    row.bytes = static_cast<double>(n * n * 3 * 2);
    row.goal = 1.0;
    double worst = 0;
    for (std::int64_t i = 0; i < n * n * 3; ++i) worst = std::max(worst, std::fabs(double(dst_gw.data[i]) - dst_cv.data[i]));
    row.max_diff = worst;
    row.diff_note = "OpenCV uses 10-bit fixed-point positions and weights; gridwarp is exact";
    row.source_ns = source_time_per_point(positions, config.reps);
    rows.push_back(row);
}

// ---------------------------------------------------------------------------------------------
// 3-D: W5 (affine against ITK) and W6 (explicit grid against the memory limit).

using Image3 = itk::Image<float, 3>;

void run_3d_affine(const Config& config, std::vector<Row>& rows, std::mt19937& rng) {
    if (!config.only.empty() && !config.only.count("W5")) return;
    const std::int64_t n = config.size3d;
    const std::int64_t count = n * n * n;
    Tensor input(DType::Float32, {1, 1, n, n, n});
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    for (std::int64_t i = 0; i < count; ++i) input.data_as<float>()[i] = uniform(rng);

    // Output voxel -> input voxel (x, y, z rows): rotations of 10 degrees about z and 5 about x,
    // a zoom-out by 1.05 and a shift, about the centre.
    const double centre = 0.5 * static_cast<double>(n - 1);
    const double az = 10.0 * M_PI / 180.0, ax = 5.0 * M_PI / 180.0, s = 1.05;
    const double rz[3][3] = {{std::cos(az), -std::sin(az), 0}, {std::sin(az), std::cos(az), 0}, {0, 0, 1}};
    const double rx[3][3] = {{1, 0, 0}, {0, std::cos(ax), -std::sin(ax)}, {0, std::sin(ax), std::cos(ax)}};
    double a[3][3];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            a[i][j] = 0;
            for (int k = 0; k < 3; ++k) a[i][j] += s * rz[i][k] * rx[k][j];
        }
    std::vector<double> matrix(12);
    for (int i = 0; i < 3; ++i) {
        double t = centre + 1.5;
        for (int j = 0; j < 3; ++j) {
            matrix[static_cast<std::size_t>(i * 4 + j)] = a[i][j];
            t -= a[i][j] * centre;
        }
        matrix[static_cast<std::size_t>(i * 4 + 3)] = t;
    }

    const AffinePositions positions(matrix, 1, {n, n, n}, false, DType::Float64, CoordinateSpace::Pixel);
    Tensor out(DType::Float32, {1, 1, n, n, n});
    SampleOptions options;
    options.threads = config.threads;

    // ITK: the same voxels (index order x, y, z is C order of (z, y, x)), unit spacing, zero origin,
    // so physical points are voxel indices and the transform is the same matrix.
    auto image = Image3::New();
    Image3::RegionType region;
    Image3::SizeType image_size;
    image_size.Fill(static_cast<itk::SizeValueType>(n));
    region.SetSize(image_size);
    image->SetRegions(region);
    image->Allocate();
    std::memcpy(image->GetBufferPointer(), input.data(), static_cast<std::size_t>(count) * sizeof(float));
    using Transform = itk::AffineTransform<double, 3>;
    auto transform = Transform::New();
    Transform::MatrixType itk_matrix;
    Transform::OutputVectorType translation;
    for (unsigned i = 0; i < 3; ++i) {
        for (unsigned j = 0; j < 3; ++j) itk_matrix(i, j) = matrix[i * 4 + j];
        translation[i] = matrix[i * 4 + 3];
    }
    transform->SetMatrix(itk_matrix);
    transform->SetTranslation(translation);
    auto interpolator = itk::LinearInterpolateImageFunction<Image3, double>::New();
    auto filter = itk::ResampleImageFilter<Image3, Image3, double>::New();
    filter->SetInput(image);
    filter->SetTransform(transform);
    filter->SetInterpolator(interpolator);
    filter->SetSize(image_size);
    filter->SetOutputSpacing(1.0);
    Image3::PointType origin;
    origin.Fill(0.0);
    filter->SetOutputOrigin(origin);
    filter->SetDefaultPixelValue(0.0f);

    const Timings t = measure(
        config.reps, [&] { grid_sample(input.view(), positions, out.view(), options); },
        [&] {
            filter->Modified();
            filter->Update();
        });

    // Compare where every tap is inside: ITK treats the half-pixel band at the edges differently.
    const float* itk_out = filter->GetOutput()->GetBufferPointer();
    const float* gw = out.data_as<float>();
    double worst = 0;
    const double hi = static_cast<double>(n - 1);
    for (std::int64_t z = 0; z < n; ++z)
        for (std::int64_t y = 0; y < n; ++y)
            for (std::int64_t x = 0; x < n; ++x) {
                bool inside = true;
                for (int k = 0; k < 3 && inside; ++k) {
                    const double* r = matrix.data() + k * 4;
                    const double p = r[0] * x + r[1] * y + r[2] * z + r[3];
                    inside = p >= 0.001 && p <= hi - 0.001;
                }
                const std::int64_t i = (z * n + y) * n + x;
                if (inside) worst = std::max(worst, std::fabs(static_cast<double>(gw[i]) - itk_out[i]));
            }

    Row row;
    row.id = "W5";
    row.what = "3-D float32 " + std::to_string(n) + "^3, affine (fused, pixel space), linear, zeros";
    row.peer = "itk::ResampleImageFilter, linear, AffineTransform";
    row.gridwarp_runs = t.a;
    row.peer_runs = t.b;
    row.points = static_cast<double>(count);
    row.bytes = static_cast<double>(count) * 8;
    row.goal = 5.0;
    row.max_diff = worst;
    row.diff_note = "over voxels whose taps are all inside (ITK clamps in the half-voxel edge band)";
    row.source_ns = source_time_per_point(positions, config.reps);
    rows.push_back(row);
}

void run_3d_grid(const Config& config, std::vector<Row>& rows, std::mt19937& rng, double copy_bandwidth) {
    if (!config.only.empty() && !config.only.count("W6")) return;
    const std::int64_t n = config.size3d_grid;
    const std::int64_t count = n * n * n;
    Tensor input(DType::Float32, {1, 1, n, n, n});
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    for (std::int64_t i = 0; i < count; ++i) input.data_as<float>()[i] = uniform(rng);
    Tensor grid(DType::Float32, {1, n, n, n, 3});
    float* g = grid.data_as<float>();
    const double d = static_cast<double>(n), centre = 0.5 * (d - 1), amplitude = 0.01 * d, period = d / 3.0;
    for (std::int64_t z = 0; z < n; ++z)
        for (std::int64_t y = 0; y < n; ++y)
            for (std::int64_t x = 0; x < n; ++x) {
                const double p[3] = {centre + 1.03 * (x - centre) + amplitude * std::sin(2 * M_PI * z / period),
                                     centre + 1.03 * (y - centre) + amplitude * std::sin(2 * M_PI * x / period),
                                     centre + 1.03 * (z - centre) + amplitude * std::cos(2 * M_PI * y / period)};
                for (int k = 0; k < 3; ++k) g[((z * n + y) * n + x) * 3 + k] = static_cast<float>((2.0 * p[k] + 1.0) / d - 1.0);
            }
    const GridPositions positions(grid.view());
    Tensor out(DType::Float32, {1, 1, n, n, n});
    SampleOptions options;
    options.threads = config.threads;
    const std::vector<double> runs =
        timed_runs(config.reps, [&] { grid_sample(input.view(), positions, out.view(), options); });
    Row row;
    row.id = "W6";
    row.what = "3-D float32 " + std::to_string(n) + "^3 grid, linear, zeros";
    row.peer = "memory limit (copy of the same bytes)";
    row.gridwarp_runs = runs;
    row.points = static_cast<double>(count);
    row.bytes = static_cast<double>(count) * (4 + 12 + 4);
    row.peer_runs = {row.bytes / copy_bandwidth};
    row.goal = 0;
    row.source_ns = source_time_per_point(positions, config.reps);
    rows.push_back(row);
}

std::string fixed(double value, int digits) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
    return buffer;
}

}  // namespace

int main(int argc, char** argv) {
    Config config;
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_gridwarp: %s needs a value\n", arg.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (arg == "--json") config.json = true;
        else if (arg == "--quick") quick = true;
        else if (arg == "--threads") config.threads = std::stoi(value());
        else if (arg == "--reps") config.reps = std::stoi(value());
        else if (arg == "--size2d") config.size2d = std::stoll(value());
        else if (arg == "--size-rgb") config.size_rgb = std::stoll(value());
        else if (arg == "--size3d") config.size3d = std::stoll(value());
        else if (arg == "--size3d-grid") config.size3d_grid = std::stoll(value());
        else if (arg == "--copy-mb") config.copy_mb = std::stoll(value());
        else if (arg == "--gap-ms") g_gap_ms = std::stoi(value());
        else if (arg == "--only") {
            std::stringstream list(value());
            std::string id;
            while (std::getline(list, id, ',')) config.only.insert(id);
        } else if (arg == "--help" || arg == "-h") {
            usage();
            return 0;
        } else {
            std::fprintf(stderr, "bench_gridwarp: unknown argument %s\n", arg.c_str());
            usage();
            return 2;
        }
    }
    if (quick) {
        // Explicit sizes given after --quick still win only if they came later; keep it simple.
        config.size2d = std::min<std::int64_t>(config.size2d, 512);
        config.size_rgb = std::min<std::int64_t>(config.size_rgb, 1024);
        config.size3d = std::min<std::int64_t>(config.size3d, 64);
        config.size3d_grid = std::min<std::int64_t>(config.size3d_grid, 64);
        config.copy_mb = std::min<std::int64_t>(config.copy_mb, 64);
        config.reps = std::min(config.reps, 3);
    }
    if (config.threads < 1 || config.reps < 1) {
        std::fprintf(stderr, "bench_gridwarp: --threads and --reps must be positive\n");
        return 2;
    }

    // The same thread count for everybody.
    cv::setNumThreads(config.threads);
    itk::MultiThreaderBase::SetGlobalMaximumNumberOfThreads(static_cast<itk::ThreadIdType>(std::max(config.threads, 1)));
    itk::MultiThreaderBase::SetGlobalDefaultNumberOfThreads(static_cast<itk::ThreadIdType>(config.threads));

    const std::string load_before = read_loadavg();
    const double copy_bandwidth = measure_copy_bandwidth(config.copy_mb, config.threads, config.reps);
    std::mt19937 rng(12345);
    std::vector<Row> rows;
    run_2d(config, rows, rng);
    run_rgb(config, rows, rng);
    run_3d_affine(config, rows, rng);
    run_3d_grid(config, rows, rng, copy_bandwidth);
    const std::string load_after = read_loadavg();

    struct Derived {
        double gw_s, peer_s, gw_mpix, peer_mpix, ratio, percent;
    };
    auto derive = [&](const Row& r) {
        Derived d{};
        d.gw_s = median(r.gridwarp_runs);
        d.peer_s = median(r.peer_runs);
        d.gw_mpix = r.points / d.gw_s / 1e6;
        d.peer_mpix = r.points / d.peer_s / 1e6;
        d.ratio = d.peer_s / d.gw_s;
        d.percent = 100.0 * r.bytes / d.gw_s / copy_bandwidth;
        return d;
    };

    if (config.json) {
        nlohmann::json out;
        out["cpu"] = read_cpu_model();
        out["threads"] = config.threads;
        out["reps"] = config.reps;
        out["copy_bandwidth_GBps"] = copy_bandwidth / 1e9;
        out["loadavg_before"] = load_before;
        out["loadavg_after"] = load_after;
        out["opencv"] = CV_VERSION;
        out["itk"] = itk::Version::GetITKVersion();
        for (const Row& r : rows) {
            const Derived d = derive(r);
            nlohmann::json j;
            j["workload"] = r.id;
            j["description"] = r.what;
            j["gridwarp_ms"] = d.gw_s * 1e3;
            j["gridwarp_Mpix_per_s"] = d.gw_mpix;
            j["peer"] = r.peer;
            j["peer_ms"] = d.peer_s * 1e3;
            j["peer_Mpix_per_s"] = d.peer_mpix;
            j["ratio"] = d.ratio;
            j["percent_of_memory_limit"] = d.percent;
            j["bytes"] = r.bytes;
            if (r.goal > 0) {
                j["goal"] = r.goal;
                j["goal_met"] = d.ratio >= r.goal;
            }
            if (!std::isnan(r.max_diff)) j["max_abs_diff"] = r.max_diff;
            if (!r.diff_note.empty()) j["diff_note"] = r.diff_note;
            if (!std::isnan(r.source_ns)) j["position_source_ns_per_point_1_thread"] = r.source_ns;
            j["gridwarp_runs_ms"] = nlohmann::json::array();
            for (double s : r.gridwarp_runs) j["gridwarp_runs_ms"].push_back(s * 1e3);
            j["peer_runs_ms"] = nlohmann::json::array();
            for (double s : r.peer_runs) j["peer_runs_ms"].push_back(s * 1e3);
            out["rows"].push_back(j);
        }
        std::puts(out.dump(2).c_str());
        return 0;
    }

    std::printf("cpu: %s; threads: %d; medians of %d runs; OpenCV %s, ITK %s\n", read_cpu_model().c_str(),
                config.threads, config.reps, CV_VERSION, itk::Version::GetITKVersion());
    std::printf("memory limit: plain copy %.1f GB/s (read + write); load average before %s, after %s\n\n",
                copy_bandwidth / 1e9, load_before.c_str(), load_after.c_str());
    std::printf("| workload | gridwarp Mpix/s | peer | peer Mpix/s | ratio | %% of mem. limit | goal | met | max abs diff |\n");
    std::printf("|---|---:|---|---:|---:|---:|---:|---|---:|\n");
    for (const Row& r : rows) {
        const Derived d = derive(r);
        std::printf("| %s | %.1f | %s | %.1f | %.2f | %.0f%% | %s | %s | %s |\n", r.id.c_str(), d.gw_mpix, r.peer.c_str(),
                    d.peer_mpix, d.ratio, d.percent, r.goal > 0 ? (">= " + fixed(r.goal, 1)).c_str() : "-",
                    r.goal > 0 ? (d.ratio >= r.goal ? "yes" : "no") : "-",
                    std::isnan(r.max_diff) ? "-" : fixed(r.max_diff, r.max_diff >= 1 ? 0 : 4).c_str());
    }
    std::printf("\n");
    for (const Row& r : rows) {
        const Derived d = derive(r);
        std::printf("%-14s %s: gridwarp %.2f ms, peer %.2f ms", r.id.c_str(), r.what.c_str(), d.gw_s * 1e3, d.peer_s * 1e3);
        if (!std::isnan(r.source_ns)) {
            std::printf("; position source alone %.2f ns/point on 1 thread (gridwarp: %.2f ns/point on %d)",
                        r.source_ns, d.gw_s * 1e9 / r.points, config.threads);
        }
        std::printf("\n");
    }
    return 0;
}
