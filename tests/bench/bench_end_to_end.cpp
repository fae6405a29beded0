// bench_end_to_end: the gridwarp command against its peers on the same files, in the same run, with
// the same thread count: wall time from command to finished file, peak RSS, output size. The
// workloads of docs/performance.md's end-to-end table:
//   W-nii.gz  256^3 int16 head-like .nii.gz (made with gzip -6), rigid resample, linear:
//             gridwarp resample vs itk_resample_peer (ITK ResampleImageFilter, int16 in and out)
//   W-nii     256^3 float32 .nii, the same: gridwarp vs itk_resample_peer (float32)
//   W-bold    64x64x34x200 int16 .nii.gz BOLD-like series onto a 2 mm MNI grid (91x109x91) with one
//             affine, linear: gridwarp resample vs itk_series_peer (ITK, volume by volume, as
//             antsApplyTransforms -e 3 does)
//   W-labels  256^3 int16 label map (100 labels in 8^3 blocks), rigid: gridwarp resample --mode
//             GenericLabel vs itk_resample_peer multilabel (ITK's LabelImageGaussian, as
//             antsApplyTransforms -n MultiLabel), one run (the peer takes about 90 s)
//   W-sinc    128^3 float32 .nii, rigid, LanczosWindowedSinc: gridwarp resample --padding itk vs
//             itk_resample_peer lanczoswindowedsinc (ITK's WindowedSinc, radius 3, as antsApplyTransforms)
//   W-bspline the same with BSpline[3] vs ITK's BSplineInterpolateImageFunction (order 3)
//   W-bmp     4096^2 RGB .bmp, rotate 30 and scale 0.8, linear: gridwarp affine vs opencv_affine_peer
//   W-png     the same image as .png
//   W-npy     256^3 float32 .npy, affine --rotate 5: against gridwarp on the same volume as .nii
//   W-sample  gridwarp sample, 160^3 float32 X and an explicit (1, 160, 160, 160, 3) grid as .npy,
//             end to end, against torch.nn.functional.grid_sample's time in memory (files loaded
//             before the clock starts), the same threads; when python3-torch is installed
//   mrtransform (MRtrix3) on the two volume workloads when it is installed.
//   W-batch   1,000 PNGs of 256x256 RGB, rotate 15 and scale 0.9, cubic: gridwarp batch vs a
//             one-process python3-opencv loop (imread, warpAffine, imwrite; when python3-opencv is
//             installed) and vs a shell loop running gridwarp once per file (on the first 100 files;
//             compared per file); and `gridwarp --version`.
//   W-bmp1    300 BMPs of 256x256 RGB, the same warp on one core: gridwarp batch --jobs 1 --threads 1
//             vs the python3-opencv loop with one thread.
// Runs are alternated (gridwarp, peer, gridwarp, ...) and the median of --reps is reported.
//   bench_end_to_end [--reps 5] [--threads 2] [--workdir /tmp/gridwarp-e2e] [--bin DIR]
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "gridwarp/io/image.hpp"
#include "gridwarp/io/npy.hpp"

namespace fs = std::filesystem;

namespace {

struct Measurement {
    double seconds = 0;
    double peak_rss_mb = 0;
};

// Runs argv to completion; its wall time and peak RSS (from wait4, so only that process counts).
Measurement run(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
        // The programs' own messages would interleave with the table: they are measured, not read.
        const int null = ::open("/dev/null", O_WRONLY);
        if (null >= 0) {
            ::dup2(null, 1);
            ::dup2(null, 2);
        }
        execvp(args[0], args.data());
        _exit(127);
    }
    int status = 0;
    rusage usage{};
    wait4(pid, &status, 0, &usage);
    const auto stop = std::chrono::steady_clock::now();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::string command;
        for (const auto& a : argv) command += a + " ";
        throw std::runtime_error("failed: " + command);
    }
    return {std::chrono::duration<double>(stop - start).count(), usage.ru_maxrss / 1024.0};
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

std::uint64_t size_of(const fs::path& file) { return fs::exists(file) ? fs::file_size(file) : 0; }

bool on_path(const std::string& program) { return std::system(("command -v " + program + " > /dev/null 2>&1").c_str()) == 0; }

// A head-like volume: nested ellipsoids (scalp, skull, brain with folds, ventricles) with noise
// inside the head and exact zeros outside, as MR images of heads are.
gridwarp::io::Image head(gridwarp::DType dtype, std::int64_t n) {
    gridwarp::io::Image image;
    image.kind = gridwarp::io::FileKind::Volume;
    image.format = "nifti";
    image.spatial = {n, n, n};
    image.pixels = gridwarp::Tensor(dtype, {n, n, n, 1});
    gridwarp::io::Geometry geometry = gridwarp::io::Geometry::identity(3);
    geometry.origin = {128.0, 128.0, -128.0};  // LPS of RAS (-128, -128, -128)
    geometry.direction = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
    image.geometry = geometry;
    std::mt19937_64 random(1);
    std::normal_distribution<float> noise(0.0f, 5.0f);
    auto at = [n](std::int64_t i) { return -1.0f + 2.0f * static_cast<float>(i) / static_cast<float>(n - 1); };
    std::int64_t index = 0;
    for (std::int64_t k = 0; k < n; ++k) {
        for (std::int64_t j = 0; j < n; ++j) {
            for (std::int64_t i = 0; i < n; ++i, ++index) {
                const float x = at(i), y = at(j), z = at(k);
                const float r = std::sqrt((x / 0.80f) * (x / 0.80f) + (y / 0.92f) * (y / 0.92f) + (z / 0.85f) * (z / 0.85f));
                float v = 0;
                if (r < 1.0f) v = 300;
                if (r < 0.93f) v = 80;
                if (r < 0.88f) {
                    const float folds = std::sin(9 * x + 2 * std::sin(5 * y)) * std::cos(8 * y + 3 * z) * std::sin(7 * z + x);
                    v = folds > 0.1f ? 700 : 450;
                }
                if (r < 0.25f) v = 150;
                if (r < 1.0f) v += noise(random);
                if (dtype == gridwarp::DType::Int16) {
                    image.pixels.data_as<std::int16_t>()[index] = static_cast<std::int16_t>(std::clamp(std::round(v), 0.0f, 32767.0f));
                } else {
                    image.pixels.data_as<float>()[index] = v;
                }
            }
        }
    }
    return image;
}

void write_text(const fs::path& file, const std::string& text) {
    std::ofstream out(file);
    out << text;
}

struct Row {
    std::string workload, peer;
    double gridwarp_s, peer_s, gridwarp_best, peer_best, gridwarp_rss, peer_rss, in_out_mb;
    std::string note;
};

double best(const std::vector<double>& values) { return *std::min_element(values.begin(), values.end()); }

// A BOLD-like series: the head's ellipsoids on a 64 x 64 x 34 grid of 3 x 3 x 3.6 mm voxels, with
// fresh noise in each volume, as an int16 4-D NIfTI holds it (a volume per channel).
gridwarp::io::Image bold_series(std::int64_t volumes) {
    const std::int64_t nx = 64, ny = 64, nz = 34;
    gridwarp::io::Image image;
    image.kind = gridwarp::io::FileKind::Volume;
    image.format = "nifti";
    image.spatial = {nz, ny, nx};
    image.channels = volumes;
    image.layout = gridwarp::io::ChannelLayout::Planar;
    image.pixels = gridwarp::Tensor(gridwarp::DType::Int16, gridwarp::Shape{1, volumes, nz, ny, nx});
    gridwarp::io::Geometry geometry = gridwarp::io::Geometry::identity(3);
    geometry.spacing = {3.0, 3.0, 3.6};
    geometry.origin = {94.5, 110.0, -55.0};
    geometry.direction = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
    image.geometry = geometry;
    std::mt19937_64 random(2);
    std::normal_distribution<float> noise(0.0f, 12.0f);
    auto at = [](std::int64_t i, std::int64_t n) { return -1.0f + 2.0f * static_cast<float>(i) / static_cast<float>(n - 1); };
    auto* values = image.pixels.data_as<std::int16_t>();
    std::int64_t index = 0;
    for (std::int64_t t = 0; t < volumes; ++t) {
        for (std::int64_t k = 0; k < nz; ++k) {
            for (std::int64_t j = 0; j < ny; ++j) {
                for (std::int64_t i = 0; i < nx; ++i, ++index) {
                    const float x = at(i, nx), y = at(j, ny), z = at(k, nz);
                    const float r = std::sqrt((x / 0.80f) * (x / 0.80f) + (y / 0.92f) * (y / 0.92f) + (z / 0.95f) * (z / 0.95f));
                    float v = r < 0.88f ? (std::sin(9 * x + 2 * std::sin(5 * y)) * std::cos(8 * y + 3 * z) > 0.1f ? 900 : 700) : 0;
                    if (r < 1.0f) v += 150 + noise(random);
                    values[index] = static_cast<std::int16_t>(std::clamp(std::round(v), 0.0f, 32767.0f));
                }
            }
        }
    }
    return image;
}

// FSL's 2 mm MNI152 grid (91 x 109 x 91, RAS origin (-90, -126, -72)), empty: a reference.
// A label map: 100 labels (int16 values between 1 and 2000, not contiguous) in blocks of 8^3
// voxels, with the head's geometry.
gridwarp::io::Image label_map(std::int64_t n) {
    gridwarp::io::Image image = head(gridwarp::DType::Int16, n);
    std::mt19937_64 random(3);
    std::vector<std::int16_t> labels;
    for (std::int16_t value = 1; labels.size() < 100; value = static_cast<std::int16_t>(value + 1 + random() % 37)) labels.push_back(value);
    const std::int64_t blocks = (n + 7) / 8;
    std::vector<std::int16_t> block_label(static_cast<std::size_t>(blocks * blocks * blocks));
    for (auto& label : block_label) label = labels[random() % labels.size()];
    auto* voxels = image.pixels.data_as<std::int16_t>();
    for (std::int64_t k = 0, index = 0; k < n; ++k) {
        for (std::int64_t j = 0; j < n; ++j) {
            for (std::int64_t i = 0; i < n; ++i, ++index) {
                voxels[index] = block_label[static_cast<std::size_t>(((k / 8) * blocks + j / 8) * blocks + i / 8)];
            }
        }
    }
    return image;
}

gridwarp::io::Image mni_2mm() {
    gridwarp::io::Image image;
    image.kind = gridwarp::io::FileKind::Volume;
    image.format = "nifti";
    image.spatial = {91, 109, 91};
    image.pixels = gridwarp::Tensor(gridwarp::DType::UInt8, gridwarp::Shape{91, 109, 91, 1});
    gridwarp::io::Geometry geometry = gridwarp::io::Geometry::identity(3);
    geometry.spacing = {2.0, 2.0, 2.0};
    geometry.origin = {90.0, 126.0, -72.0};  // LPS of RAS (-90, -126, -72)
    geometry.direction = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
    image.geometry = geometry;
    return image;
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 5, threads = 2;
    fs::path workdir = "/tmp/gridwarp-e2e";
    fs::path bin = fs::canonical("/proc/self/exe").parent_path();
    std::string only;  // run only the workloads whose name holds this
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--reps") reps = std::atoi(argv[i + 1]);
        else if (flag == "--threads") threads = std::atoi(argv[i + 1]);
        else if (flag == "--workdir") workdir = argv[i + 1];
        else if (flag == "--bin") bin = argv[i + 1];
        else if (flag == "--only") only = argv[i + 1];
        else {
            std::cerr << "usage: bench_end_to_end [--reps N] [--threads N] [--workdir DIR] [--bin DIR] [--only TEXT]\n";
            return 2;
        }
    }
    const std::string gridwarp = (bin.parent_path().parent_path() / "app" / "gridwarp").string();
    const std::string itk_peer = (bin / "itk_resample_peer").string(), opencv_peer = (bin / "opencv_affine_peer").string();
    const std::string itk_series_peer = (bin / "itk_series_peer").string();
    const std::string t = std::to_string(threads);
    fs::create_directories(workdir);
    const fs::path i16 = workdir / "head_i16.nii", i16gz = workdir / "head_i16.nii.gz", f32 = workdir / "head_f32.nii";
    const fs::path bmp = workdir / "card4096.bmp", rigid = workdir / "rigid.tfm";
    const fs::path bold = workdir / "bold_i16.nii.gz", mni = workdir / "mni_2mm.nii.gz", bold_to_mni = workdir / "bold_to_mni.tfm";
    if (!fs::exists(bold)) {
        const fs::path plain = workdir / "bold_i16.nii";
        gridwarp::io::write_image(plain, bold_series(200));
        if (std::system(("gzip -6 -c " + plain.string() + " > " + bold.string()).c_str()) != 0) return 1;
        fs::remove(plain);
    }
    if (!fs::exists(mni)) gridwarp::io::write_image(mni, mni_2mm());
    // MNI points to BOLD points: a small rotation, a scale towards the smaller head, a shift.
    write_text(bold_to_mni, "#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n"
                            "Parameters: 0.93 -0.06 0.02 0.05 0.95 -0.08 -0.01 0.07 0.91 2.5 -4 6\nFixedParameters: 0 -18 18\n");
    if (!fs::exists(i16gz)) {
        gridwarp::io::write_image(i16, head(gridwarp::DType::Int16, 256));
        if (std::system(("gzip -6 -c " + i16.string() + " > " + i16gz.string()).c_str()) != 0) return 1;
    }
    if (!fs::exists(f32)) gridwarp::io::write_image(f32, head(gridwarp::DType::Float32, 256));
    const fs::path f32_128 = workdir / "head128_f32.nii";
    if (!fs::exists(f32_128)) gridwarp::io::write_image(f32_128, head(gridwarp::DType::Float32, 128));
    // The .npy rows: the 256^3 head as (1, 1, 256, 256, 256), and a 160^3 head with a grid that
    // rotates it by 0.2 rad about z and scales it by 0.9.
    const fs::path f32_npy = workdir / "head_f32.npy";
    if (!fs::exists(f32_npy)) gridwarp::io::write_npy(f32_npy, gridwarp::io::read_image(f32).nchw());
    const fs::path x160 = workdir / "x160.npy", grid160 = workdir / "grid160.npy";
    if (!fs::exists(grid160)) {
        gridwarp::io::write_npy(x160, head(gridwarp::DType::Float32, 160).nchw());
        constexpr std::int64_t n = 160;
        gridwarp::Tensor grid(gridwarp::DType::Float32, {1, n, n, n, 3});
        float* g = grid.data_as<float>();
        const double c = 0.9 * std::cos(0.2), s = 0.9 * std::sin(0.2);
        for (std::int64_t k = 0; k < n; ++k) {
            for (std::int64_t j = 0; j < n; ++j) {
                for (std::int64_t i = 0; i < n; ++i, g += 3) {
                    const double x = (2.0 * i + 1) / n - 1, y = (2.0 * j + 1) / n - 1, z = (2.0 * k + 1) / n - 1;
                    g[0] = static_cast<float>(c * x - s * y), g[1] = static_cast<float>(s * x + c * y), g[2] = static_cast<float>(0.9 * z);
                }
            }
        }
        gridwarp::io::write_npy(grid160, grid.view());
    }
    write_text(workdir / "torch_grid_sample.py",
               "import sys, time, numpy as np, torch\n"
               "torch.set_num_threads(int(sys.argv[3]))\n"
               "x = torch.from_numpy(np.load(sys.argv[1])); g = torch.from_numpy(np.load(sys.argv[2]))\n"
               "start = time.perf_counter()\n"
               "y = torch.nn.functional.grid_sample(x, g, mode='bilinear', padding_mode='zeros', align_corners=False)\n"
               "seconds = time.perf_counter() - start\n"
               "open(sys.argv[4], 'w').write(str(seconds))\n");
    const bool torch = std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0;
    const fs::path labels = workdir / "labels_i16.nii.gz";
    if (!fs::exists(labels)) gridwarp::io::write_image(labels, label_map(256));
    if (!fs::exists(bmp)) {
        cv::Mat card(4096, 4096, CV_8UC3);
        for (int y = 0; y < card.rows; ++y) {
            for (int x = 0; x < card.cols; ++x) {
                card.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>((x / 64 + y / 64) % 2 ? 230 : 20), static_cast<uchar>(x * 255 / 4095),
                                                     static_cast<uchar>(y * 255 / 4095));
            }
        }
        cv::imwrite(bmp.string(), card);
    }
    const fs::path png = workdir / "card4096.png";
    if (!fs::exists(png)) cv::imwrite(png.string(), cv::imread(bmp.string(), cv::IMREAD_UNCHANGED));
    write_text(rigid, "#Insight Transform File V1.0\n#Transform 0\nTransform: Euler3DTransform_double_3_3\n"
                      "Parameters: 0.08 -0.05 0.12 3.5 -2.25 1.75\nFixedParameters: 0 0 0 0\n");
    // mrtransform's -linear takes a 4x4 RAS matrix; its work (a rigid resample on the same grid) is the same.
    write_text(workdir / "rigid_mrtrix.txt", "0.9893 -0.1193 -0.0810 3.5\n0.1288 0.9872 0.0937 -2.25\n0.0688 -0.1055 0.9920 1.75\n0 0 0 1\n");
    const bool mrtrix = on_path("mrtransform");

    struct Workload {
        std::string name;
        std::vector<std::string> gridwarp, peer;
        std::string peer_name;
        fs::path gridwarp_out, input;
        double in_out_mb;
        std::vector<std::string> mrtrix;
        int most_reps = 0;       // 0: --reps; else at most this many, and the peer not warmed (a slow peer)
        std::string rss_note;    // the note where the output is not gzip
        fs::path peer_seconds;   // where set, the peer's time is what it writes there (an in-memory time)
    };
    const double mb = 1024.0 * 1024.0;
    std::vector<Workload> workloads = {
        {"256^3 int16 .nii.gz rigid resample, linear",
         {gridwarp, "resample", "-i", i16gz.string(), "-o", (workdir / "gw_i16.nii.gz").string(), "-t", rigid.string(), "--threads", t, "-q"},
         {itk_peer, i16gz.string(), (workdir / "itk_i16.nii.gz").string(), rigid.string(), t},
         "ITK ResampleImageFilter program",
         workdir / "gw_i16.nii.gz",
         i16gz,
         2 * 32.0,
         {"mrtransform", "-quiet", "-force", "-nthreads", t, "-interp", "linear", "-linear", (workdir / "rigid_mrtrix.txt").string(),
          "-template", i16gz.string(), i16gz.string(), (workdir / "mr_i16.nii.gz").string()}},
        {"256^3 float32 .nii rigid resample, linear",
         {gridwarp, "resample", "-i", f32.string(), "-o", (workdir / "gw_f32.nii").string(), "-t", rigid.string(), "--threads", t, "-q"},
         {itk_peer, f32.string(), (workdir / "itk_f32.nii").string(), rigid.string(), t},
         "ITK ResampleImageFilter program",
         workdir / "gw_f32.nii",
         f32,
         2 * 64.0,
         {"mrtransform", "-quiet", "-force", "-nthreads", t, "-interp", "linear", "-linear", (workdir / "rigid_mrtrix.txt").string(),
          "-template", f32.string(), f32.string(), (workdir / "mr_f32.nii").string()}},
        {"64x64x34x200 int16 .nii.gz series onto 2 mm MNI, one affine, linear",
         {gridwarp, "resample", "-i", bold.string(), "-r", mni.string(), "-o", (workdir / "gw_bold.nii.gz").string(), "-t",
          bold_to_mni.string(), "--threads", t, "-q"},
         {itk_series_peer, bold.string(), mni.string(), (workdir / "itk_bold.nii.gz").string(), bold_to_mni.string(), t},
         "ITK program, volume by volume (antsApplyTransforms -e 3's way)",
         workdir / "gw_bold.nii.gz",
         bold,
         (64.0 * 64 * 34 + 91.0 * 109 * 91) * 200 * 2 / mb,
         {}},
        {"256^3 int16 .nii.gz label map (100 labels) rigid resample, GenericLabel",
         {gridwarp, "resample", "-i", labels.string(), "-o", (workdir / "gw_labels.nii").string(), "-t", rigid.string(), "--mode",
          "GenericLabel", "--threads", t, "-q"},
         {itk_peer, labels.string(), (workdir / "itk_labels.nii").string(), rigid.string(), t, "multilabel"},
         "ITK LabelImageGaussianInterpolateImageFunction program (antsApplyTransforms -n MultiLabel)",
         workdir / "gw_labels.nii",
         labels,
         2 * 32.0,
         {},
         1,
         "RSS limit 1.2x (in + out) + 50 MB = 127 MB; the peer takes about 90 s, so 1 run"},
        {"128^3 float32 .nii rigid resample, LanczosWindowedSinc",
         {gridwarp, "resample", "-i", f32_128.string(), "-o", (workdir / "gw_sinc.nii").string(), "-t", rigid.string(), "--mode",
          "LanczosWindowedSinc", "--padding", "itk", "--threads", t, "-q"},
         {itk_peer, f32_128.string(), (workdir / "itk_sinc.nii").string(), rigid.string(), t, "lanczoswindowedsinc"},
         "ITK WindowedSincInterpolateImageFunction program (antsApplyTransforms -n LanczosWindowedSinc)",
         workdir / "gw_sinc.nii",
         f32_128,
         2 * 8.0,
         {}},
        {"128^3 float32 .nii rigid resample, BSpline[3]",
         {gridwarp, "resample", "-i", f32_128.string(), "-o", (workdir / "gw_bspline.nii").string(), "-t", rigid.string(), "--mode",
          "BSpline[3]", "--padding", "itk", "--threads", t, "-q"},
         {itk_peer, f32_128.string(), (workdir / "itk_bspline.nii").string(), rigid.string(), t, "bspline[3]"},
         "ITK BSplineInterpolateImageFunction program (antsApplyTransforms -n BSpline[3])",
         workdir / "gw_bspline.nii",
         f32_128,
         2 * 8.0,
         {}},
        {"4096^2 RGB .bmp rotate 30, scale 0.8, linear",
         {gridwarp, "affine", "-i", bmp.string(), "-o", (workdir / "gw_card.bmp").string(), "--rotate", "30", "--scale", "0.8",
          "--antialias", "off", "--threads", t, "-q"},
         {opencv_peer, bmp.string(), (workdir / "cv_card.bmp").string(), "30", "0.8", t},
         "OpenCV imread/warpAffine/imwrite",
         workdir / "gw_card.bmp",
         bmp,
         2 * 48.0,
         {}},
    };
    workloads.push_back({"4096^2 RGB .png rotate 30, scale 0.8, linear",
                         {gridwarp, "affine", "-i", png.string(), "-o", (workdir / "gw_card.png").string(), "--rotate", "30", "--scale", "0.8",
                          "--antialias", "off", "--threads", t, "-q"},
                         {opencv_peer, png.string(), (workdir / "cv_card.png").string(), "30", "0.8", t},
                         "OpenCV imread/warpAffine/imwrite (each with its default PNG level)",
                         workdir / "gw_card.png",
                         png,
                         2 * 48.0,
                         {},
                         0,
                         "in + out counts the decoded pixels; no RSS goal"});
    workloads.push_back({"256^3 float32 .npy affine --rotate 5, linear",
                         {gridwarp, "affine", "-i", f32_npy.string(), "-o", (workdir / "gw_rot.npy").string(), "--rotate", "5", "--threads", t, "-q"},
                         {gridwarp, "affine", "-i", f32.string(), "-o", (workdir / "gw_rot.nii").string(), "--rotate", "5", "--threads", t, "-q"},
                         "gridwarp on the same volume as .nii",
                         workdir / "gw_rot.npy",
                         f32_npy,
                         2 * 64.0,
                         {}});
    if (torch) {
        workloads.push_back({"160^3 float32 .npy sample at an explicit grid .npy, linear",
                             {gridwarp, "sample", "-i", x160.string(), "-g", grid160.string(), "-o", (workdir / "gw_y160.npy").string(),
                              "--threads", t, "-q"},
                             {"/usr/bin/python3", (workdir / "torch_grid_sample.py").string(), x160.string(), grid160.string(), t,
                              (workdir / "torch_seconds.txt").string()},
                             "torch grid_sample in memory (files loaded before the clock)",
                             workdir / "gw_y160.npy",
                             x160,
                             160.0 * 160 * 160 * 4 * (1 + 3 + 1) / mb,
                             {},
                             0,
                             "",
                             workdir / "torch_seconds.txt"});
    }
    std::vector<Row> rows;
    for (const auto& w : workloads) {
        if (!only.empty() && w.name.find(only) == std::string::npos) continue;
        std::vector<double> gw_s, gw_rss, peer_s, peer_rss, mr_s, mr_rss;
        run(w.gridwarp);  // warm the page cache
        if (w.most_reps == 0) run(w.peer);
        const int workload_reps = w.most_reps > 0 ? std::min(reps, w.most_reps) : reps;
        for (int r = 0; r < workload_reps; ++r) {
            const Measurement a = run(w.gridwarp);
            Measurement b = run(w.peer);
            if (!w.peer_seconds.empty()) {
                std::ifstream reported(w.peer_seconds);
                reported >> b.seconds;
            }
            gw_s.push_back(a.seconds), gw_rss.push_back(a.peak_rss_mb), peer_s.push_back(b.seconds), peer_rss.push_back(b.peak_rss_mb);
            if (mrtrix && !w.mrtrix.empty()) {
                const Measurement c = run(w.mrtrix);
                mr_s.push_back(c.seconds), mr_rss.push_back(c.peak_rss_mb);
            }
        }
        std::string note;
        if (w.gridwarp_out.extension() == ".gz") {
            // Our output against gzip -6 of the very same bytes.
            const fs::path plain = w.gridwarp_out.string() + ".raw", regz = w.gridwarp_out.string() + ".gzip6";
            std::system(("gzip -dc " + w.gridwarp_out.string() + " > " + plain.string() + " && gzip -6 -c " + plain.string() + " > " + regz.string()).c_str());
            char text[128];
            std::snprintf(text, sizeof text, "output %.2f MB = %.4fx gzip -6 of the same bytes", size_of(w.gridwarp_out) / mb,
                          static_cast<double>(size_of(w.gridwarp_out)) / static_cast<double>(size_of(regz)));
            note = text;
            fs::remove(plain), fs::remove(regz);
        } else if (!w.rss_note.empty()) {
            note = w.rss_note;
        } else {
            note = "RSS limit 1.15x (in + out) + 30 MB = " + std::to_string(static_cast<int>(1.15 * w.in_out_mb + 30)) + " MB";
        }
        rows.push_back({w.name, w.peer_name, median(gw_s), median(peer_s), best(gw_s), best(peer_s), median(gw_rss), median(peer_rss),
                        w.in_out_mb, note});
        if (!mr_s.empty()) {
            rows.push_back({w.name, "MRtrix3 mrtransform", median(gw_s), median(mr_s), best(gw_s), best(mr_s), median(gw_rss), median(mr_rss),
                            w.in_out_mb, ""});
        }
    }
    std::printf("threads %d, %d alternated runs each, page cache warm; times are median / best\n\n", threads, reps);
    std::printf("| workload | peer | gridwarp s | peer s | speed-up (medians) | speed-up (bests) | gridwarp peak RSS MB | peer peak RSS MB | in + out MB | note |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& r : rows) {
        std::printf("| %s | %s | %.3f / %.3f | %.3f / %.3f | %.2fx | %.2fx | %.0f | %.0f | %.0f | %s |\n", r.workload.c_str(), r.peer.c_str(),
                    r.gridwarp_s, r.gridwarp_best, r.peer_s, r.peer_best, r.peer_s / r.gridwarp_s, r.peer_best / r.gridwarp_best,
                    r.gridwarp_rss, r.peer_rss, r.in_out_mb, r.note.c_str());
    }
    if (!mrtrix) std::printf("\nmrtransform (MRtrix3) is not installed: its rows are left out.\n");
    if (!torch) std::printf("\npython3-torch is not installed: the sample row is left out.\n");

    // Many small files: one batch process against a Python loop and a shell loop.
    const fs::path pngs = workdir / "png";
    constexpr int kFiles = 1000, kShellFiles = 100;
    if (!fs::exists(pngs / "999.png")) {
        fs::create_directories(pngs);
        for (int f = 0; f < kFiles; ++f) {
            cv::Mat image(256, 256, CV_8UC3);
            for (int y = 0; y < 256; ++y) {
                for (int x = 0; x < 256; ++x) {
                    image.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>((x * 3 + f) & 255), static_cast<uchar>((y * 5 + 2 * f) & 255),
                                                          static_cast<uchar>(((x / 32 + y / 32) % 2) ? 200 : 40));
                }
            }
            cv::imwrite((pngs / (std::to_string(f) + ".png")).string(), image);
        }
    }
    const fs::path bmps = workdir / "bmp";
    constexpr int kBmpFiles = 300;
    if (!fs::exists(bmps / (std::to_string(kBmpFiles - 1) + ".bmp"))) {
        fs::create_directories(bmps);
        for (int f = 0; f < kBmpFiles; ++f) {
            cv::imwrite((bmps / (std::to_string(f) + ".bmp")).string(), cv::imread((pngs / (std::to_string(f) + ".png")).string()));
        }
    }
    std::string manifest = "input,output\n";
    for (int f = 0; f < kFiles; ++f) manifest += "png/" + std::to_string(f) + ".png,png_out/gw_" + std::to_string(f) + ".png\n";
    write_text(workdir / "batch.csv", manifest);
    std::string bmp_manifest = "input,output\n";
    for (int f = 0; f < kBmpFiles; ++f) bmp_manifest += "bmp/" + std::to_string(f) + ".bmp,bmp_out/gw_" + std::to_string(f) + ".bmp\n";
    write_text(workdir / "bmp_batch.csv", bmp_manifest);
    // loop.py FOLDER FILES THREADS EXTENSION
    write_text(workdir / "loop.py",
               "import sys, cv2\n"
               "cv2.setNumThreads(int(sys.argv[3]))\n"
               "ext = sys.argv[4]\n"
               "for f in range(int(sys.argv[2])):\n"
               "    image = cv2.imread(f'{sys.argv[1]}/{ext}/{f}.{ext}', cv2.IMREAD_UNCHANGED)\n"
               "    h, w = image.shape[:2]\n"
               "    m = cv2.getRotationMatrix2D(((w - 1) / 2, (h - 1) / 2), 15, 0.9)\n"
               "    cv2.imwrite(f'{sys.argv[1]}/{ext}_out/py_{f}.{ext}', cv2.warpAffine(image, m, (w, h), flags=cv2.INTER_CUBIC))\n");
    std::string shell = "for f in $(seq 0 " + std::to_string(kShellFiles - 1) + "); do " + gridwarp + " affine -i " + (pngs / "$f.png").string() +
                        " -o " + (workdir / "png_out" / "sh_$f.png").string() + " --rotate 15 --scale 0.9 --mode cubic --antialias off --threads " + t +
                        " -q || exit 1; done";
    fs::create_directories(workdir / "png_out");
    fs::create_directories(workdir / "bmp_out");
    const bool python = std::system("/usr/bin/python3 -c 'import cv2' > /dev/null 2>&1") == 0;
    const std::vector<std::string> batch_cmd{gridwarp, "batch", "affine", (workdir / "batch.csv").string(), "--rotate", "15", "--scale", "0.9",
                                             "--mode", "cubic", "--antialias", "off", "--progress", "none", "--jobs", t};
    const std::vector<std::string> python_cmd{"/usr/bin/python3", (workdir / "loop.py").string(), workdir.string(), std::to_string(kFiles), t, "png"};
    const std::vector<std::string> bmp_batch_cmd{gridwarp, "batch", "affine", (workdir / "bmp_batch.csv").string(), "--rotate", "15", "--scale", "0.9",
                                                 "--mode", "cubic", "--antialias", "off", "--progress", "none", "--jobs", "1", "--threads", "1"};
    const std::vector<std::string> bmp_python_cmd{"/usr/bin/python3", (workdir / "loop.py").string(), workdir.string(), std::to_string(kBmpFiles), "1", "bmp"};
    const std::vector<std::string> shell_cmd{"sh", "-c", shell};
    const int batch_reps = std::max(1, reps / 2);
    std::vector<double> gw_batch, py_loop, sh_loop, version, gw_bmp, py_bmp;
    run(batch_cmd);
    run(bmp_batch_cmd);
    for (int r = 0; r < batch_reps; ++r) {
        gw_batch.push_back(run(batch_cmd).seconds);
        if (python) py_loop.push_back(run(python_cmd).seconds);
        sh_loop.push_back(run(shell_cmd).seconds);
        gw_bmp.push_back(run(bmp_batch_cmd).seconds);
        if (python) py_bmp.push_back(run(bmp_python_cmd).seconds);
    }
    for (int r = 0; r < 21; ++r) version.push_back(run({gridwarp, "--version"}).seconds);
    const double per_file_batch = median(gw_batch) / kFiles, per_file_shell = median(sh_loop) / kShellFiles;
    std::printf("\nMany files: %d PNGs of 256x256 RGB, rotate 15, scale 0.9, cubic; median of %d runs\n\n", kFiles, batch_reps);
    std::printf("| way | ms per file | gridwarp batch's speed-up |\n|---|---|---|\n");
    std::printf("| gridwarp batch (one process, --jobs %s) | %.2f | 1.00x |\n", t.c_str(), 1e3 * per_file_batch);
    if (python) {
        const double per_file_python = median(py_loop) / kFiles;
        std::printf("| python3-opencv loop (one process, %s threads) | %.2f | %.2fx |\n", t.c_str(), 1e3 * per_file_python, per_file_python / per_file_batch);
    } else {
        std::printf("| python3-opencv loop | not installed (apt-get install python3-opencv) | - |\n");
    }
    std::printf("| shell loop, gridwarp per file (first %d files) | %.2f | %.2fx |\n", kShellFiles, 1e3 * per_file_shell, per_file_shell / per_file_batch);
    std::printf("\nOne core: %d BMPs of 256x256 RGB, the same warp; gridwarp batch --jobs 1 --threads 1 %.2f ms per file", kBmpFiles,
                1e3 * median(gw_bmp) / kBmpFiles);
    if (python) {
        std::printf(", python3-opencv loop (1 thread) %.2f ms per file: %.2fx\n", 1e3 * median(py_bmp) / kBmpFiles, median(py_bmp) / median(gw_bmp));
    } else {
        std::printf("\n");
    }
    std::printf("\n`gridwarp --version`: median %.1f ms, best %.1f ms (21 runs)\n", 1e3 * median(version), 1e3 * best(version));
    return 0;
}
