// gridwarp resample against ITK as an independent oracle: the real binary runs on files that ITK
// writes here (oblique, anisotropic, offset grids; ITK transform files, plain matrices and
// displacement fields), and its output is compared with itk::ResampleImageFilter on the voxels
// whose source position lies well inside the moving image (the two tools treat the outer half
// voxel differently by design, see docs/semantics.md).
#include <catch2/catch.hpp>

#include <itkAffineTransform.h>
#include <itkBSplineTransform.h>
#include <itkCompositeTransform.h>
#include <itkDisplacementFieldTransform.h>
#include <itkEuler2DTransform.h>
#include <itkEuler3DTransform.h>
#include <itkHDF5TransformIOFactory.h>
#include <itkImage.h>
#include <itkImageFileReader.h>
#include <itkImageFileWriter.h>
#include <itkImageRegionConstIteratorWithIndex.h>
#include <itkImageRegionIteratorWithIndex.h>
#include <itkLinearInterpolateImageFunction.h>
#include <itkMatlabTransformIOFactory.h>
#include <itkMetaImageIOFactory.h>
#include <itkNearestNeighborInterpolateImageFunction.h>
#include <itkNiftiImageIOFactory.h>
#include <itkNrrdImageIOFactory.h>
#include <itkResampleImageFilter.h>
#include <itkScaleSkewVersor3DTransform.h>
#include <itkScaleTransform.h>
#include <itkSimilarity2DTransform.h>
#include <itkSimilarity3DTransform.h>
#include <itkTransformFactoryBase.h>
#include <itkTransformFileReader.h>
#include <itkTransformFileWriter.h>
#include <itkTranslationTransform.h>
#include <itkTxtTransformIOFactory.h>
#include <itkVector.h>
#include <itkVersorRigid3DTransform.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gridwarp/io/image.hpp"
#include "gridwarp/io/nifti.hpp"
#include "support/support.hpp"

namespace {

namespace fs = std::filesystem;
using gridwarp::test::RunResult;
using gridwarp::test::run_gridwarp;
using gridwarp::test::TempDir;

using Image2F = itk::Image<float, 2>;
using Image3F = itk::Image<float, 3>;
using Image3S = itk::Image<short, 3>;
using Image3U = itk::Image<unsigned char, 3>;
using Image4F = itk::Image<float, 4>;
template <unsigned D>
using FieldF = itk::Image<itk::Vector<float, D>, D>;
template <unsigned D>
using FieldD = itk::Image<itk::Vector<double, D>, D>;
template <unsigned D>
using TransformD = itk::Transform<double, D, D>;

void register_itk() {
    static std::once_flag once;
    std::call_once(once, [] {
        itk::NiftiImageIOFactory::RegisterOneFactory();
        itk::MetaImageIOFactory::RegisterOneFactory();
        itk::NrrdImageIOFactory::RegisterOneFactory();
        itk::HDF5TransformIOFactory::RegisterOneFactory();
        itk::TxtTransformIOFactory::RegisterOneFactory();
        itk::MatlabTransformIOFactory::RegisterOneFactory();
        itk::TransformFactoryBase::RegisterDefaultTransforms();
    });
}

// Set GRIDWARP_TEST_REPORT=1 to print the largest differences seen against ITK.
void report(const std::string& line) {
    if (std::getenv("GRIDWARP_TEST_REPORT")) std::cout << "[resample] " << line << std::endl;
}

std::string sci(double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.3e", value);
    return buffer;
}

// ---------------------------------------------------------------------------------------------
// Grids and images

template <unsigned D>
struct GridSpec {
    std::array<itk::SizeValueType, D> size{};
    std::array<double, D> spacing{};
    std::array<double, D> origin{};
    itk::Matrix<double, D, D> direction;
};

itk::Matrix<double, 3, 3> rotation3(double ax, double ay, double az, bool flip_last = false) {
    auto euler = itk::Euler3DTransform<double>::New();
    euler->SetRotation(ax, ay, az);
    itk::Matrix<double, 3, 3> m = euler->GetMatrix();
    if (flip_last) {
        for (unsigned i = 0; i < 3; ++i) m(i, 2) = -m(i, 2);
    }
    return m;
}

itk::Matrix<double, 2, 2> rotation2(double angle, bool flip_last = false) {
    itk::Matrix<double, 2, 2> m;
    m(0, 0) = std::cos(angle);
    m(0, 1) = -std::sin(angle);
    m(1, 0) = std::sin(angle);
    m(1, 1) = std::cos(angle);
    if (flip_last) {
        m(0, 1) = -m(0, 1);
        m(1, 1) = -m(1, 1);
    }
    return m;
}

// Puts the grid's centre voxel at `centre`.
template <unsigned D>
void centre_grid(GridSpec<D>& grid, const itk::Point<double, D>& centre) {
    for (unsigned i = 0; i < D; ++i) {
        double offset = 0;
        for (unsigned j = 0; j < D; ++j) offset += grid.direction(i, j) * grid.spacing[j] * (grid.size[j] - 1) / 2.0;
        grid.origin[i] = centre[i] - offset;
    }
}

template <unsigned D>
itk::Point<double, D> grid_centre(const GridSpec<D>& grid) {
    itk::Point<double, D> centre;
    for (unsigned i = 0; i < D; ++i) {
        centre[i] = grid.origin[i];
        for (unsigned j = 0; j < D; ++j) centre[i] += grid.direction(i, j) * grid.spacing[j] * (grid.size[j] - 1) / 2.0;
    }
    return centre;
}

template <class TImage, class F>
typename TImage::Pointer make_image(const GridSpec<TImage::ImageDimension>& grid, F&& value) {
    constexpr unsigned D = TImage::ImageDimension;
    auto image = TImage::New();
    typename TImage::SizeType size;
    typename TImage::SpacingType spacing;
    typename TImage::PointType origin;
    for (unsigned i = 0; i < D; ++i) {
        size[i] = grid.size[i];
        spacing[i] = grid.spacing[i];
        origin[i] = grid.origin[i];
    }
    typename TImage::RegionType region;
    region.SetSize(size);
    image->SetRegions(region);
    image->SetSpacing(spacing);
    image->SetOrigin(origin);
    image->SetDirection(grid.direction);
    image->Allocate();
    for (itk::ImageRegionIteratorWithIndex<TImage> it(image, region); !it.IsAtEnd(); ++it) it.Set(value(it.GetIndex()));
    return image;
}

template <class TImage>
void write_itk(const TImage* image, const fs::path& file) {
    register_itk();
    auto writer = itk::ImageFileWriter<TImage>::New();
    writer->SetFileName(file.string());
    writer->SetInput(image);
    writer->Update();
}

template <class TImage>
typename TImage::Pointer read_itk(const fs::path& file) {
    register_itk();
    auto reader = itk::ImageFileReader<TImage>::New();
    reader->SetFileName(file.string());
    reader->Update();
    typename TImage::Pointer image = reader->GetOutput();
    image->DisconnectPipeline();
    return image;
}

template <class Precision = double>
void write_transform(const itk::Object* transform, const fs::path& file) {
    register_itk();
    auto writer = itk::TransformFileWriterTemplate<Precision>::New();
    writer->SetInput(transform);
    writer->SetFileName(file.string());
    writer->Update();
}

// The transform a file holds as ITK (and antsApplyTransforms) reads it: the list's first entry,
// which for a composite file is the composite itself.
template <unsigned D>
typename TransformD<D>::Pointer read_transform(const fs::path& file) {
    register_itk();
    auto reader = itk::TransformFileReaderTemplate<double>::New();
    reader->SetFileName(file.string());
    reader->Update();
    auto* transform = dynamic_cast<TransformD<D>*>(reader->GetTransformList()->front().GetPointer());
    REQUIRE(transform != nullptr);
    return transform;
}

// A (d+1)x(d+1) homogeneous text matrix mapping reference points to moving points.
template <unsigned D>
void write_plain_matrix(const itk::Matrix<double, D, D>& matrix, const itk::Vector<double, D>& offset, const fs::path& file) {
    std::ofstream out(file);
    char buffer[64];
    for (unsigned i = 0; i <= D; ++i) {
        for (unsigned j = 0; j <= D; ++j) {
            const double value = i == D ? (j == D ? 1.0 : 0.0) : j == D ? offset[i] : matrix(i, j);
            std::snprintf(buffer, sizeof buffer, "%.17g", value);
            out << (j ? " " : "") << buffer;
        }
        out << "\n";
    }
}

template <class TImage>
typename TImage::Pointer itk_resample(const TImage* moving, const itk::ImageBase<TImage::ImageDimension>* reference,
                                      const TransformD<TImage::ImageDimension>* transform, bool nearest) {
    using Filter = itk::ResampleImageFilter<TImage, TImage, double, double>;
    auto filter = Filter::New();
    filter->SetInput(moving);
    filter->SetTransform(transform);
    if (nearest) {
        filter->SetInterpolator(itk::NearestNeighborInterpolateImageFunction<TImage, double>::New());
    } else {
        filter->SetInterpolator(itk::LinearInterpolateImageFunction<TImage, double>::New());
    }
    filter->SetOutputParametersFromImage(reference);
    filter->SetDefaultPixelValue(0);
    filter->Update();
    typename TImage::Pointer output = filter->GetOutput();
    output->DisconnectPipeline();
    return output;
}

template <class TImage>
double value_range(const TImage* image) {
    double lo = INFINITY, hi = -INFINITY;
    for (itk::ImageRegionConstIteratorWithIndex<TImage> it(image, image->GetLargestPossibleRegion()); !it.IsAtEnd(); ++it) {
        lo = std::min<double>(lo, it.Get());
        hi = std::max<double>(hi, it.Get());
    }
    return hi - lo;
}

// ---------------------------------------------------------------------------------------------
// Comparison on the interior: voxels whose ITK continuous index into the moving image is at least
// `margin` voxels inside it (and, for nearest, not within 1e-3 of a .5 tie on any axis).

struct Agreement {
    std::size_t voxels = 0;
    std::size_t compared = 0;
    std::size_t failures = 0;
    double max_diff = 0;
    std::string first_failure;
};

template <unsigned D>
Agreement compare_interior(const itk::Image<float, D>* actual, const itk::Image<float, D>* expected,
                           const itk::Image<float, D>* moving, const TransformD<D>* transform, double tolerance,
                           bool avoid_ties, double margin = 1.0) {
    Agreement result;
    const auto moving_size = moving->GetLargestPossibleRegion().GetSize();
    REQUIRE(actual->GetLargestPossibleRegion().GetSize() == expected->GetLargestPossibleRegion().GetSize());
    for (itk::ImageRegionConstIteratorWithIndex<itk::Image<float, D>> it(expected, expected->GetLargestPossibleRegion());
         !it.IsAtEnd(); ++it) {
        ++result.voxels;
        itk::Point<double, D> point;
        expected->TransformIndexToPhysicalPoint(it.GetIndex(), point);
        const itk::Point<double, D> moved = transform->TransformPoint(point);
        itk::ContinuousIndex<double, D> index;
        moving->TransformPhysicalPointToContinuousIndex(moved, index);
        bool inside = true;
        for (unsigned k = 0; k < D; ++k) {
            if (!(index[k] >= margin && index[k] <= static_cast<double>(moving_size[k]) - 1 - margin)) inside = false;
            if (avoid_ties && std::fabs(index[k] - std::floor(index[k]) - 0.5) < 1e-3) inside = false;
        }
        if (!inside) continue;
        ++result.compared;
        const double a = actual->GetPixel(it.GetIndex());
        const double e = it.Get();
        const double diff = std::fabs(a - e);
        if (!(diff <= result.max_diff)) result.max_diff = std::isnan(diff) ? INFINITY : diff;
        if (!(diff <= tolerance)) {
            if (result.failures++ == 0) {
                std::ostringstream text;
                text << "at index " << it.GetIndex() << ": gridwarp " << a << ", ITK " << e << " (moving index " << index << ")";
                result.first_failure = text.str();
            }
        }
    }
    return result;
}

RunResult run_ok(const std::vector<std::string>& args) {
    RunResult result = run_gridwarp(args);
    std::string command = "gridwarp";
    for (const auto& arg : args) command += " " + arg;
    INFO(command);
    INFO(result.err);
    REQUIRE(result.status == 0);
    return result;
}

std::vector<std::string> resample_args(const fs::path& moving, const fs::path& output, const fs::path& reference,
                                       const std::vector<std::string>& transforms, const std::string& mode) {
    // ITK's ResampleImageFilter does not filter before shrinking.
    std::vector<std::string> args{"resample", "-i", moving.string(), "-o", output.string(), "--antialias", "off"};
    if (!reference.empty()) {
        args.push_back("-r");
        args.push_back(reference.string());
    }
    for (const auto& t : transforms) {
        args.push_back("-t");
        args.push_back(t);
    }
    args.push_back("--mode");
    args.push_back(mode);
    return args;
}

struct Case {
    std::string name;
    std::vector<std::string> arguments;  // the -t values, in order
    itk::Object::Pointer oracle_owner;    // keeps the oracle alive
    const itk::Object* oracle = nullptr;
};

template <unsigned D>
Case make_case(std::string name, std::vector<std::string> arguments, typename TransformD<D>::Pointer oracle) {
    Case c;
    c.name = std::move(name);
    c.arguments = std::move(arguments);
    c.oracle = oracle.GetPointer();
    c.oracle_owner = oracle.GetPointer();
    return c;
}

template <unsigned D>
typename TransformD<D>::Pointer compose(std::initializer_list<typename TransformD<D>::Pointer> parts) {
    auto composite = itk::CompositeTransform<double, D>::New();
    for (const auto& part : parts) composite->AddTransform(part);  // the last added acts first
    return composite.GetPointer();
}

// A -t list as antsApplyTransforms builds it: its parser hands the options over last first, so the
// composite holds them in reverse and the first listed acts first on output points: -t A -t B is
// B(A(p)).
template <unsigned D>
typename TransformD<D>::Pointer ants_chain(std::initializer_list<typename TransformD<D>::Pointer> listed) {
    auto composite = itk::CompositeTransform<double, D>::New();
    for (auto part = std::rbegin(listed); part != std::rend(listed); ++part) composite->AddTransform(*part);
    return composite.GetPointer();
}

template <unsigned D>
void check_geometry(const itk::ImageBase<D>* actual, const itk::ImageBase<D>* expected, double tolerance) {
    for (unsigned i = 0; i < D; ++i) {
        CHECK(std::fabs(actual->GetSpacing()[i] - expected->GetSpacing()[i]) <= tolerance);
        CHECK(std::fabs(actual->GetOrigin()[i] - expected->GetOrigin()[i]) <= tolerance);
        for (unsigned j = 0; j < D; ++j) CHECK(std::fabs(actual->GetDirection()(i, j) - expected->GetDirection()(i, j)) <= tolerance);
    }
    CHECK(actual->GetLargestPossibleRegion().GetSize() == expected->GetLargestPossibleRegion().GetSize());
}

// Runs every case in linear and nearest mode and compares with ITK on the interior.
template <unsigned D>
void cross_check(const std::vector<Case>& cases, const fs::path& moving_file, const fs::path& reference_file,
                 const TempDir& dir, std::size_t min_compared, const std::string& label) {
    using ImageF = itk::Image<float, D>;
    const auto moving = read_itk<ImageF>(moving_file);
    const auto reference = read_itk<ImageF>(reference_file);
    const double range = value_range(moving.GetPointer());
    double worst_linear = 0, worst_nearest = 0;
    std::size_t least_compared = SIZE_MAX;
    for (const auto& c : cases) {
        const auto* transform = dynamic_cast<const TransformD<D>*>(c.oracle);
        REQUIRE(transform != nullptr);
        for (const std::string mode : {"linear", "nearest"}) {
            INFO(label << " case " << c.name << ", --mode " << mode);
            const fs::path out = dir / (c.name + "_" + mode + ".nii.gz");
            run_ok(resample_args(moving_file, out, reference_file, c.arguments, mode));
            const auto actual = read_itk<ImageF>(out);
            check_geometry<D>(actual.GetPointer(), reference.GetPointer(), 1e-5);  // the reference's grid
            const bool nearest = mode == "nearest";
            const auto expected = itk_resample<ImageF>(moving.GetPointer(), reference.GetPointer(), transform, nearest);
            // Linear: float32 arithmetic against ITK's double; nearest copies voxels, so exact.
            const double tolerance = nearest ? 0.0 : 1e-4 * range;
            const Agreement agreement =
                compare_interior<D>(actual.GetPointer(), expected.GetPointer(), moving.GetPointer(), transform, tolerance, nearest);
            INFO(agreement.compared << " of " << agreement.voxels << " voxels compared, " << agreement.failures
                                    << " differ; first: " << agreement.first_failure);
            CHECK(agreement.compared >= min_compared);
            CHECK(agreement.failures == 0);
            report(label + " " + c.name + " " + mode + ": max |diff| " + sci(agreement.max_diff) + " over " +
                   std::to_string(agreement.compared) + "/" + std::to_string(agreement.voxels) + " voxels (range " +
                   std::to_string(range) + ")");
            (nearest ? worst_nearest : worst_linear) = std::max(nearest ? worst_nearest : worst_linear, agreement.max_diff);
            least_compared = std::min(least_compared, agreement.compared);
        }
    }
    report(label + ": worst linear |diff| " + sci(worst_linear) + " (" + sci(worst_linear / range) +
           " of the range), worst nearest |diff| " + sci(worst_nearest) + ", fewest voxels compared " +
           std::to_string(least_compared));
}

// ---------------------------------------------------------------------------------------------
// The 3-D scene: an oblique, anisotropic moving volume with a mirrored direction, a reference grid
// that differs in every respect, and transforms about the volume's centre.

struct Scene3 {
    GridSpec<3> moving_grid, reference_grid;
    fs::path moving_file, reference_file;
    itk::Point<double, 3> centre;
};

float smooth3(const itk::Index<3>& i) {
    const double x = static_cast<double>(i[0]), y = static_cast<double>(i[1]), z = static_cast<double>(i[2]);
    const double g1 = std::exp(-((x - 14) * (x - 14) + (y - 20) * (y - 20) + (z - 12) * (z - 12)) / (2 * 7.0 * 7.0));
    const double g2 = std::exp(-((x - 28) * (x - 28) + (y - 10) * (y - 10) + (z - 19) * (z - 19)) / (2 * 5.0 * 5.0));
    return static_cast<float>(100 * g1 - 60 * g2 + 25 * std::sin(0.31 * x + 0.07 * z) * std::cos(0.23 * y) + 0.8 * z + 10);
}

Scene3 make_scene3(const TempDir& dir) {
    Scene3 scene;
    scene.moving_grid.size = {40, 36, 30};
    scene.moving_grid.spacing = {1.1, 0.9, 1.4};
    scene.moving_grid.origin = {-20.5, 13.25, 7.75};
    scene.moving_grid.direction = rotation3(0.3, -0.2, 0.25, /*flip_last=*/true);
    scene.centre = grid_centre(scene.moving_grid);

    scene.reference_grid.size = {30, 28, 24};
    scene.reference_grid.spacing = {1.2, 1.05, 1.0};
    scene.reference_grid.direction = rotation3(-0.15, 0.1, -0.35);
    itk::Point<double, 3> reference_centre = scene.centre;
    reference_centre[0] += 1.5;
    reference_centre[1] -= 2.0;
    reference_centre[2] += 0.5;
    centre_grid(scene.reference_grid, reference_centre);

    scene.moving_file = dir / "moving.nii.gz";
    scene.reference_file = dir / "reference.nii.gz";
    write_itk(make_image<Image3F>(scene.moving_grid, smooth3).GetPointer(), scene.moving_file);
    write_itk(make_image<Image3F>(scene.reference_grid, [](const itk::Index<3>& i) { return static_cast<float>(i[0] + i[1] + i[2]); })
                  .GetPointer(),
              scene.reference_file);
    return scene;
}

itk::AffineTransform<double, 3>::Pointer make_affine3(const itk::Point<double, 3>& centre) {
    auto affine = itk::AffineTransform<double, 3>::New();
    itk::Matrix<double, 3, 3> m;
    m(0, 0) = 1.05, m(0, 1) = 0.04, m(0, 2) = -0.03;
    m(1, 0) = -0.02, m(1, 1) = 0.96, m(1, 2) = 0.05;
    m(2, 0) = 0.03, m(2, 1) = -0.04, m(2, 2) = 1.02;
    affine->SetCenter(centre);
    affine->SetMatrix(m);
    itk::Vector<double, 3> t;
    t[0] = 2.5, t[1] = -1.75, t[2] = 1.2;
    affine->SetTranslation(t);
    return affine;
}

itk::Euler3DTransform<double>::Pointer make_euler3(const itk::Point<double, 3>& centre) {
    auto euler = itk::Euler3DTransform<double>::New();
    itk::Point<double, 3> c = centre;
    c[0] += 3, c[1] -= 2, c[2] += 1;
    euler->SetCenter(c);
    euler->SetRotation(0.08, -0.06, 0.12);
    itk::Vector<double, 3> t;
    t[0] = -1.5, t[1] = 2.0, t[2] = 0.7;
    euler->SetTranslation(t);
    return euler;
}

// A smooth displacement field (mm) on its own oblique grid, covering only part of the scene so
// that both the interpolated and the zero-displacement regimes occur.
fs::path write_field3(const TempDir& dir, const itk::Point<double, 3>& centre, const std::string& name) {
    GridSpec<3> grid;
    grid.size = {22, 20, 16};
    grid.spacing = {2.0, 1.8, 2.2};
    grid.direction = rotation3(0.2, 0.15, -0.1);
    itk::Point<double, 3> c = centre;
    c[0] += 6, c[1] -= 4, c[2] += 3;
    centre_grid(grid, c);
    auto field = make_image<FieldF<3>>(grid, [](const itk::Index<3>& i) {
        itk::Vector<float, 3> v;
        v[0] = static_cast<float>(1.5 * std::sin(0.25 * i[0] + 0.1 * i[1]));
        v[1] = static_cast<float>(-1.2 * std::cos(0.2 * i[1] - 0.15 * i[2]));
        v[2] = static_cast<float>(0.8 * std::sin(0.3 * i[2] + 0.05 * i[0]) + 0.3);
        return v;
    });
    const fs::path file = dir / name;
    write_itk(field.GetPointer(), file);
    return file;
}

template <unsigned D>
typename TransformD<D>::Pointer read_field_transform(const fs::path& file) {
    auto transform = itk::DisplacementFieldTransform<double, D>::New();
    transform->SetDisplacementField(read_itk<FieldD<D>>(file));
    return transform.GetPointer();
}

}  // namespace

namespace {

// --fill V against ITK's default value V: voxels whose every linear tap misses the moving image on
// some axis (continuous index below -1 or above size) take V; the interior agrees as usual.
// `relative` bounds |gridwarp - V| / |V| there (0: exactly V, as docs/semantics.md promises).
struct FillCheck {
    std::size_t outside = 0, mismatches = 0, interior_failures = 0;
    double max_error = 0;
    std::string first;
};

FillCheck check_fill(const TempDir& dir, double relative) {
    const Scene3 scene = make_scene3(dir);
    const auto affine = make_affine3(scene.centre);
    const auto euler = make_euler3(scene.centre);
    write_transform(affine, dir / "affine.tfm");
    write_transform(euler, dir / "euler.tfm");
    const auto oracle = ants_chain<3>({read_transform<3>(dir / "affine.tfm"), read_transform<3>(dir / "euler.tfm")});
    const auto moving = read_itk<Image3F>(scene.moving_file);
    const auto reference = read_itk<Image3F>(scene.reference_file);
    constexpr float fill = -3.25f;

    auto filter = itk::ResampleImageFilter<Image3F, Image3F, double, double>::New();
    filter->SetInput(moving);
    filter->SetTransform(oracle);
    filter->SetInterpolator(itk::LinearInterpolateImageFunction<Image3F, double>::New());
    filter->SetOutputParametersFromImage(reference);
    filter->SetDefaultPixelValue(fill);
    filter->Update();
    const Image3F* expected = filter->GetOutput();

    const fs::path out = dir / "filled.nii.gz";
    auto args = resample_args(scene.moving_file, out, scene.reference_file,
                              {(dir / "affine.tfm").string(), (dir / "euler.tfm").string()}, "linear");
    args.insert(args.end(), {"--fill", "-3.25"});
    run_ok(args);
    const auto actual = read_itk<Image3F>(out);
    const auto size = moving->GetLargestPossibleRegion().GetSize();
    FillCheck result;
    for (itk::ImageRegionConstIteratorWithIndex<Image3F> it(actual, actual->GetLargestPossibleRegion()); !it.IsAtEnd(); ++it) {
        itk::Point<double, 3> point;
        reference->TransformIndexToPhysicalPoint(it.GetIndex(), point);
        itk::ContinuousIndex<double, 3> index;
        moving->TransformPhysicalPointToContinuousIndex(oracle->TransformPoint(point), index);
        bool outside = false;
        for (unsigned k = 0; k < 3; ++k) outside = outside || index[k] < -1.0001 || index[k] > static_cast<double>(size[k]) + 0.0001;
        if (!outside) continue;
        ++result.outside;
        REQUIRE(expected->GetPixel(it.GetIndex()) == fill);  // ITK: exactly its default value
        const double error = std::fabs(static_cast<double>(it.Get()) - fill) / std::fabs(fill);
        result.max_error = std::max(result.max_error, error);
        if (!(error <= relative) && result.mismatches++ == 0) {
            std::ostringstream text;
            text.precision(10);
            text << it.GetIndex() << " (moving index " << index << "): gridwarp " << it.Get() << ", ITK " << fill;
            result.first = text.str();
        }
    }
    result.interior_failures = compare_interior<3>(actual.GetPointer(), expected, moving.GetPointer(), oracle.GetPointer(),
                                                   1e-4 * value_range(moving.GetPointer()), false)
                                   .failures;
    return result;
}

}  // namespace

TEST_CASE("resample --fill: voxels mapped outside the moving image take ITK's default value", "[resample][itk]") {
    TempDir dir;
    const FillCheck fill = check_fill(dir, 1e-6);
    INFO(fill.mismatches << " of " << fill.outside << " outside voxels differ; first at " << fill.first);
    CHECK(fill.outside > 500);
    CHECK(fill.mismatches == 0);
    CHECK(fill.interior_failures == 0);
    report("--fill -3.25: " + std::to_string(fill.outside) + " outside voxels, max relative error " + sci(fill.max_error));
}

// docs/semantics.md: "A point all of whose taps fall outside on some axis gets exactly the fill
// value." lib/core/src/sampling_policies.hpp (ZerosPadding::bound) only short-cuts points beyond 6 voxels
// (kTapReach); nearer ones blend (1 - t) * fill + t * fill in float32, which rounds away from the
// fill value (-3.2499998 for -3.25). Kept as a visible known failure until the core is fixed.
TEST_CASE("resample --fill: every voxel whose taps all miss the image is exactly the fill value", "[resample][itk]") {
    TempDir dir;
    const FillCheck fill = check_fill(dir, 0.0);
    INFO(fill.mismatches << " of " << fill.outside << " outside voxels differ; first at " << fill.first);
    CHECK(fill.outside > 500);
    CHECK(fill.mismatches == 0);
}

// =============================================================================================
// 1. 3-D against itk::ResampleImageFilter

TEST_CASE("resample 3-D: linear and nearest agree with ITK's ResampleImageFilter", "[resample][itk]") {
    TempDir dir;
    const Scene3 scene = make_scene3(dir);

    const auto affine = make_affine3(scene.centre);
    const auto euler = make_euler3(scene.centre);
    auto translation = itk::TranslationTransform<double, 3>::New();
    itk::Vector<double, 3> shift;
    shift[0] = 3.3, shift[1] = -2.7, shift[2] = 1.9;
    translation->Translate(shift);

    write_transform(affine, dir / "affine.tfm");
    write_transform(affine, dir / "affine.mat");
    write_transform(euler, dir / "euler.tfm");
    write_transform(translation, dir / "translation.txt");
    write_plain_matrix<3>(affine->GetMatrix(), affine->GetOffset(), dir / "affine_plain.txt");
    auto composite_file = itk::CompositeTransform<double, 3>::New();
    composite_file->AddTransform(affine);
    composite_file->AddTransform(euler);
    write_transform(composite_file, dir / "composite.tfm");
    const fs::path field = write_field3(dir, scene.centre, "field.nii.gz");

    // Oracles from the files as ITK reads them back.
    const auto a = read_transform<3>(dir / "affine.tfm");
    const auto a_mat = read_transform<3>(dir / "affine.mat");
    const auto e = read_transform<3>(dir / "euler.tfm");
    const auto t = read_transform<3>(dir / "translation.txt");
    const auto f = read_field_transform<3>(field);
    const auto a_file = (dir / "affine.tfm").string(), mat_file = (dir / "affine.mat").string(),
               e_file = (dir / "euler.tfm").string(), t_file = (dir / "translation.txt").string(), f_file = field.string();

    std::vector<Case> cases;
    cases.push_back(make_case<3>("affine_tfm", {a_file}, a));
    cases.push_back(make_case<3>("affine_mat", {mat_file}, a_mat));
    cases.push_back(make_case<3>("affine_plain", {(dir / "affine_plain.txt").string() + ",lps"}, a));
    cases.push_back(make_case<3>("affine_inverse", {a_file + ",inverse"}, a->GetInverseTransform()));
    cases.push_back(make_case<3>("affine_mat_inverse_ants", {"[" + mat_file + ",1]"}, a_mat->GetInverseTransform()));
    cases.push_back(make_case<3>("euler", {e_file}, e));
    cases.push_back(make_case<3>("translation", {t_file}, t));
    // -t A -t B is antsApplyTransforms' chain: p -> B(A(p)).
    cases.push_back(make_case<3>("affine_then_euler", {a_file, e_file}, ants_chain<3>({a, e})));
    cases.push_back(make_case<3>("euler_then_affine", {e_file, a_file}, ants_chain<3>({e, a})));
    cases.push_back(make_case<3>("euler_translation_inverse_affine",
                                 {e_file, t_file, a_file + ",inverse"}, ants_chain<3>({e, t, a->GetInverseTransform()})));
    cases.push_back(make_case<3>("composite_file", {(dir / "composite.tfm").string()}, read_transform<3>(dir / "composite.tfm")));
    cases.push_back(make_case<3>("composite_file_inverse", {(dir / "composite.tfm").string() + ",inverse"},
                                 compose<3>({e->GetInverseTransform(), a->GetInverseTransform()})));
    // Displacement fields: ANTs' usual "-t warp -t affine" (affine first), and the other order.
    cases.push_back(make_case<3>("field_then_affine", {f_file, a_file}, ants_chain<3>({f, a})));
    cases.push_back(make_case<3>("affine_then_field", {a_file, f_file}, ants_chain<3>({a, f})));
    cases.push_back(make_case<3>("field_alone", {f_file}, f));

    // The reference grid has 30*28*24 = 20160 voxels; every case keeps well over a third inside.
    cross_check<3>(cases, scene.moving_file, scene.reference_file, dir, 6000, "3-D");

    // Beyond the interior: --padding border clamps taps, which is ITK's edge replication on
    // [-0.5, size - 0.5).
    {
        const auto moving = read_itk<Image3F>(scene.moving_file);
        const auto reference = read_itk<Image3F>(scene.reference_file);
        const double range = value_range(moving.GetPointer());
        const auto oracle = ants_chain<3>({a, e});
        const auto expected = itk_resample<Image3F>(moving.GetPointer(), reference.GetPointer(), oracle.GetPointer(), false);
        const fs::path border = dir / "border.nii.gz";
        auto args = resample_args(scene.moving_file, border, scene.reference_file, {a_file, e_file}, "linear");
        args.insert(args.end(), {"--padding", "border"});
        run_ok(args);
        const Agreement near_edge = compare_interior<3>(read_itk<Image3F>(border).GetPointer(), expected.GetPointer(),
                                                        moving.GetPointer(), oracle.GetPointer(), 1e-4 * range, false, -0.4999);
        INFO("border: " << near_edge.failures << " differ; first: " << near_edge.first_failure);
        CHECK(near_edge.compared > 17628);  // more than the interior comparison above
        CHECK(near_edge.failures == 0);

        report("3-D border padding on [-0.5, size-0.5): max |diff| " + sci(near_edge.max_diff) + " over " +
               std::to_string(near_edge.compared) + " voxels");
    }

    // The composite file's oracle (ITK's first list entry) is A(E(p)), the same as -t E -t A.
    const auto composite_oracle = read_transform<3>(dir / "composite.tfm");
    itk::Point<double, 3> p = scene.centre;
    p[0] += 4.0;
    const auto via_file = composite_oracle->TransformPoint(p);
    const auto via_parts = a->TransformPoint(e->TransformPoint(p));
    CHECK(via_file.EuclideanDistanceTo(via_parts) < 1e-9);
}

TEST_CASE("resample 3-D: the displacement field moves points as ITK's DisplacementFieldTransform", "[resample][itk]") {
    // Without a moving image in between: a field alone on an identity-like scene, sampled through
    // positions that straddle the field's edge, must equal ITK's transform of the same points.
    TempDir dir;
    const Scene3 scene = make_scene3(dir);
    const fs::path field = write_field3(dir, scene.centre, "field.nii.gz");
    const auto f = read_field_transform<3>(field);
    // A moving image that is linear in physical space turns the sampled value into the moved
    // point's coordinate exactly (linear interpolation reproduces affine functions).
    const auto moving_grid = scene.moving_grid;
    auto coordinate_image = [&](unsigned axis) {
        auto image = make_image<Image3F>(moving_grid, [](const itk::Index<3>&) { return 0.0f; });
        for (itk::ImageRegionIteratorWithIndex<Image3F> it(image, image->GetLargestPossibleRegion()); !it.IsAtEnd(); ++it) {
            itk::Point<double, 3> point;
            image->TransformIndexToPhysicalPoint(it.GetIndex(), point);
            it.Set(static_cast<float>(point[axis]));
        }
        return image;
    };
    double worst = 0;
    for (unsigned axis = 0; axis < 3; ++axis) {
        const fs::path moving_file = dir / ("coordinate" + std::to_string(axis) + ".nii.gz");
        write_itk(coordinate_image(axis).GetPointer(), moving_file);
        const fs::path out = dir / ("moved" + std::to_string(axis) + ".nii.gz");
        run_ok(resample_args(moving_file, out, scene.reference_file, {field.string()}, "linear"));
        const auto actual = read_itk<Image3F>(out);
        const auto moving = read_itk<Image3F>(moving_file);
        const auto expected = itk_resample<Image3F>(moving.GetPointer(), read_itk<Image3F>(scene.reference_file).GetPointer(),
                                                    f.GetPointer(), false);
        const Agreement agreement =
            compare_interior<3>(actual.GetPointer(), expected.GetPointer(), moving.GetPointer(), f.GetPointer(), 1e-3, false);
        INFO("axis " << axis << ": " << agreement.failures << " differ; first: " << agreement.first_failure);
        CHECK(agreement.compared > 6000);
        CHECK(agreement.failures == 0);
        worst = std::max(worst, agreement.max_diff);
    }
    report("3-D field coordinates: max |diff| " + sci(worst) + " mm");
}

TEST_CASE("resample 3-D: other linear kinds and float precision and HDF5 and field formats agree with ITK", "[resample][itk]") {
    TempDir dir;
    const Scene3 scene = make_scene3(dir);
    const auto affine = make_affine3(scene.centre);
    const auto euler = make_euler3(scene.centre);

    // ANTs writes its affine .mat files in single precision (AffineTransform_float_3_3).
    auto affine_float = itk::AffineTransform<float, 3>::New();
    {
        auto parameters = affine_float->GetParameters();
        for (unsigned i = 0; i < parameters.Size(); ++i) parameters[i] = static_cast<float>(affine->GetParameters()[i]);
        auto fixed = affine_float->GetFixedParameters();
        for (unsigned i = 0; i < fixed.Size(); ++i) fixed[i] = affine->GetFixedParameters()[i];
        affine_float->SetFixedParameters(fixed);
        affine_float->SetParameters(parameters);
    }
    write_transform<float>(affine_float, dir / "affine_float.mat");
    write_transform<float>(affine_float, dir / "affine_float.txt");
    // The oracle: the same single-precision parameters in a double transform.
    auto affine_from_float = itk::AffineTransform<double, 3>::New();
    {
        auto parameters = affine_from_float->GetParameters();
        for (unsigned i = 0; i < parameters.Size(); ++i) parameters[i] = affine_float->GetParameters()[i];
        auto fixed = affine_from_float->GetFixedParameters();
        for (unsigned i = 0; i < fixed.Size(); ++i) fixed[i] = affine_float->GetFixedParameters()[i];
        affine_from_float->SetFixedParameters(fixed);
        affine_from_float->SetParameters(parameters);
    }

    itk::Vector<double, 3> axis;
    axis[0] = 0.3, axis[1] = -0.5, axis[2] = 0.8;
    itk::Vector<double, 3> shift;
    shift[0] = -0.8, shift[1] = 1.6, shift[2] = -2.2;
    auto versor = itk::VersorRigid3DTransform<double>::New();
    versor->SetCenter(scene.centre);
    versor->SetRotation(axis, 0.13);
    versor->SetTranslation(shift);
    auto similarity = itk::Similarity3DTransform<double>::New();
    similarity->SetCenter(scene.centre);
    similarity->SetRotation(axis, -0.09);
    similarity->SetScale(1.07);
    similarity->SetTranslation(shift);
    auto scale = itk::ScaleTransform<double, 3>::New();
    scale->SetCenter(scene.centre);
    itk::FixedArray<double, 3> factors;
    factors[0] = 0.93, factors[1] = 1.08, factors[2] = 1.02;
    scale->SetScale(factors);
    auto skew = itk::ScaleSkewVersor3DTransform<double>::New();
    skew->SetCenter(scene.centre);
    skew->SetRotation(axis, 0.07);
    itk::Vector<double, 3> skew_scale;
    skew_scale[0] = 1.04, skew_scale[1] = 0.97, skew_scale[2] = 1.01;
    skew->SetScale(skew_scale);
    itk::Vector<double, 6> skews;
    skews[0] = 0.03, skews[1] = -0.02, skews[2] = 0.01, skews[3] = 0.02, skews[4] = -0.01, skews[5] = 0.015;
    skew->SetSkew(skews);
    skew->SetTranslation(shift);
    write_transform(versor, dir / "versor.tfm");
    write_transform(similarity, dir / "similarity.txt");
    write_transform(scale, dir / "scale.tfm");
    write_transform(skew, dir / "skew.tfm");
    write_transform(affine, dir / "affine.h5");
    auto composite = itk::CompositeTransform<double, 3>::New();
    composite->AddTransform(affine);
    composite->AddTransform(versor);
    write_transform(composite, dir / "composite.h5");

    // The field in double precision as MetaImage, and in single precision as NRRD.
    const fs::path field_nii = write_field3(dir, scene.centre, "field.nii.gz");
    const auto field_float = read_itk<FieldF<3>>(field_nii);
    auto field_double = FieldD<3>::New();
    field_double->CopyInformation(field_float);
    field_double->SetRegions(field_float->GetLargestPossibleRegion());
    field_double->Allocate();
    for (itk::ImageRegionIteratorWithIndex<FieldD<3>> it(field_double, field_double->GetLargestPossibleRegion()); !it.IsAtEnd(); ++it) {
        const auto v = field_float->GetPixel(it.GetIndex());
        itk::Vector<double, 3> w;
        for (unsigned k = 0; k < 3; ++k) w[k] = v[k] + 0.25 * std::sin(0.5 * it.GetIndex()[k]);  // not float-representable
        it.Set(w);
    }
    write_itk(field_double.GetPointer(), dir / "field64.mha");
    write_itk(field_float.GetPointer(), dir / "field.nrrd");

    const auto a = read_transform<3>(dir / "affine.h5");
    std::vector<Case> cases;
    cases.push_back(make_case<3>("affine_float_mat", {(dir / "affine_float.mat").string()}, affine_from_float.GetPointer()));
    cases.push_back(make_case<3>("affine_float_txt_inverse", {(dir / "affine_float.txt").string() + ",inverse"},
                                 affine_from_float->GetInverseTransform()));
    cases.push_back(make_case<3>("versor", {(dir / "versor.tfm").string()}, read_transform<3>(dir / "versor.tfm")));
    cases.push_back(make_case<3>("similarity", {(dir / "similarity.txt").string()}, read_transform<3>(dir / "similarity.txt")));
    cases.push_back(make_case<3>("scale", {(dir / "scale.tfm").string()}, read_transform<3>(dir / "scale.tfm")));
    cases.push_back(make_case<3>("scale_skew_versor", {(dir / "skew.tfm").string()}, read_transform<3>(dir / "skew.tfm")));
    cases.push_back(make_case<3>("affine_h5", {(dir / "affine.h5").string()}, a));
    cases.push_back(make_case<3>("composite_h5", {(dir / "composite.h5").string()}, read_transform<3>(dir / "composite.h5")));
    cases.push_back(make_case<3>("field64_mha_then_versor", {(dir / "field64.mha").string(), (dir / "versor.tfm").string()},
                                 ants_chain<3>({read_field_transform<3>(dir / "field64.mha"), read_transform<3>(dir / "versor.tfm")})));
    cases.push_back(make_case<3>("field_nrrd", {(dir / "field.nrrd").string()}, read_field_transform<3>(dir / "field.nrrd")));
    cross_check<3>(cases, scene.moving_file, scene.reference_file, dir, 6000, "3-D kinds");

    // The composite .h5 as ITK reads it is A(V(p)), as -t V -t A.
    itk::Point<double, 3> p = scene.centre;
    p[1] += 5.0;
    const auto via_file = read_transform<3>(dir / "composite.h5")->TransformPoint(p);
    CHECK(via_file.EuclideanDistanceTo(affine->TransformPoint(versor->TransformPoint(p))) < 1e-9);
}

// =============================================================================================
// 2. 2-D

TEST_CASE("resample 3-D: a composite .h5 holding an affine and a displacement field agrees with ITK", "[resample][itk]") {
    // What antsRegistration --write-composite-transform writes: linear and displacement field
    // transforms in one HDF5 file, the last listed acting first.
    TempDir dir;
    const Scene3 scene = make_scene3(dir);
    const auto affine = make_affine3(scene.centre);
    const auto field = read_field_transform<3>(write_field3(dir, scene.centre, "field.nii.gz"));
    auto affine_then_field = itk::CompositeTransform<double, 3>::New();
    affine_then_field->AddTransform(affine);
    affine_then_field->AddTransform(field);
    write_transform(affine_then_field, dir / "warp_first.h5");
    auto field_then_affine = itk::CompositeTransform<double, 3>::New();
    field_then_affine->AddTransform(field);
    field_then_affine->AddTransform(affine);
    write_transform(field_then_affine, dir / "affine_first.h5");

    std::vector<Case> cases;
    for (const std::string name : {"warp_first", "affine_first"}) {
        const fs::path file = dir / (name + ".h5");
        cases.push_back(make_case<3>("composite_" + name, {file.string()}, read_transform<3>(file)));
    }
    cross_check<3>(cases, scene.moving_file, scene.reference_file, dir, 6000, "3-D composite .h5 with a field");

    // A composite with a field inverts as a whole, the field numerically (tests/cli/test_points.py
    // checks the inverse itself).
    const RunResult inverted = run_gridwarp(resample_args(scene.moving_file, dir / "inverted.nii.gz", scene.reference_file,
                                                          {"[" + (dir / "warp_first.h5").string() + ",1]"}, "linear"));
    INFO(inverted.err);
    CHECK(inverted.status == 0);
    CHECK(fs::exists(dir / "inverted.nii.gz"));
}

TEST_CASE("resample 2-D: 2-D images with 2-D transforms agree with ITK", "[resample][itk]") {
    TempDir dir;
    GridSpec<2> moving_grid;
    moving_grid.size = {48, 40};
    moving_grid.spacing = {0.8, 1.1};
    moving_grid.origin = {10.5, -7.25};
    moving_grid.direction = rotation2(0.35);
    const itk::Point<double, 2> centre = grid_centre(moving_grid);

    GridSpec<2> reference_grid;
    reference_grid.size = {44, 38};
    reference_grid.spacing = {0.9, 1.0};
    reference_grid.direction = rotation2(-0.2, /*flip_last=*/true);
    itk::Point<double, 2> reference_centre = centre;
    reference_centre[0] -= 1.0;
    reference_centre[1] += 0.75;
    centre_grid(reference_grid, reference_centre);

    const fs::path moving_file = dir / "moving2d.nii", reference_file = dir / "reference2d.mha";
    write_itk(make_image<Image2F>(moving_grid,
                                  [](const itk::Index<2>& i) {
                                      const double x = static_cast<double>(i[0]), y = static_cast<double>(i[1]);
                                      return static_cast<float>(80 * std::exp(-((x - 20) * (x - 20) + (y - 18) * (y - 18)) / 120.0) +
                                                                30 * std::sin(0.27 * x) * std::cos(0.19 * y) + 0.5 * y);
                                  })
                  .GetPointer(),
              moving_file);
    write_itk(make_image<Image2F>(reference_grid, [](const itk::Index<2>&) { return 1.0f; }).GetPointer(), reference_file);

    auto euler = itk::Euler2DTransform<double>::New();
    itk::Point<double, 2> c = centre;
    c[0] += 2.0;
    euler->SetCenter(c);
    euler->SetAngle(0.15);
    itk::Vector<double, 2> t;
    t[0] = 1.7, t[1] = -2.3;
    euler->SetTranslation(t);
    auto affine = itk::AffineTransform<double, 2>::New();
    itk::Matrix<double, 2, 2> m;
    m(0, 0) = 0.95, m(0, 1) = 0.06, m(1, 0) = -0.04, m(1, 1) = 1.07;
    affine->SetCenter(centre);
    affine->SetMatrix(m);
    t[0] = -1.1, t[1] = 0.6;
    affine->SetTranslation(t);
    write_transform(euler, dir / "euler2d.tfm");
    write_transform(affine, dir / "affine2d.tfm");
    write_transform(affine, dir / "affine2d.mat");
    write_plain_matrix<2>(affine->GetMatrix(), affine->GetOffset(), dir / "affine2d_plain.txt");

    // A 2-D displacement field (2-component vectors, mm) on its own grid.
    GridSpec<2> field_grid;
    field_grid.size = {26, 22};
    field_grid.spacing = {1.6, 1.7};
    field_grid.direction = rotation2(0.1);
    centre_grid(field_grid, centre);
    write_itk(make_image<FieldF<2>>(field_grid,
                                    [](const itk::Index<2>& i) {
                                        itk::Vector<float, 2> v;
                                        v[0] = static_cast<float>(1.3 * std::sin(0.3 * i[0]));
                                        v[1] = static_cast<float>(-0.9 * std::cos(0.25 * i[1] + 0.1 * i[0]));
                                        return v;
                                    })
                  .GetPointer(),
              dir / "field2d.nii.gz");

    const auto e = read_transform<2>(dir / "euler2d.tfm");
    const auto a = read_transform<2>(dir / "affine2d.tfm");
    const auto a_mat = read_transform<2>(dir / "affine2d.mat");
    const auto f = read_field_transform<2>(dir / "field2d.nii.gz");
    const std::string e_file = (dir / "euler2d.tfm").string(), a_file = (dir / "affine2d.tfm").string();

    std::vector<Case> cases;
    cases.push_back(make_case<2>("euler2d", {e_file}, e));
    cases.push_back(make_case<2>("affine2d", {a_file}, a));
    cases.push_back(make_case<2>("affine2d_mat", {(dir / "affine2d.mat").string()}, a_mat));
    cases.push_back(make_case<2>("affine2d_plain", {(dir / "affine2d_plain.txt").string()}, a));
    cases.push_back(make_case<2>("euler2d_inverse", {e_file + ",inverse"}, e->GetInverseTransform()));
    cases.push_back(make_case<2>("affine_then_euler2d", {a_file, e_file}, ants_chain<2>({a, e})));
    cases.push_back(make_case<2>("field_then_euler2d", {(dir / "field2d.nii.gz").string(), e_file}, ants_chain<2>({f, e})));

    // 44*38 = 1672 reference pixels.
    cross_check<2>(cases, moving_file, reference_file, dir, 800, "2-D");
}

// =============================================================================================
// 3. Identity and exact shifts

namespace {

short pattern16(const itk::Index<3>& i) {
    return static_cast<short>(((i[0] * 37 + i[1] * 101 + i[2] * 7919) % 65536) - 32768);
}

float pattern32(const itk::Index<3>& i) {
    return static_cast<float>(std::sin(0.7 * i[0] + 1.3) * 1e3 + i[1] * 0.001 + i[2] * 17.25 + 1e-3);
}

GridSpec<3> oblique_grid() {
    GridSpec<3> grid;
    grid.size = {17, 13, 11};
    grid.spacing = {0.7, 1.3, 2.1};
    grid.origin = {-33.3, 21.7, -5.05};
    grid.direction = rotation3(0.4, 0.25, -0.6, true);
    return grid;
}

template <class TImage>
void require_same_voxels(const TImage* actual, const TImage* expected) {
    REQUIRE(actual->GetLargestPossibleRegion().GetSize() == expected->GetLargestPossibleRegion().GetSize());
    std::size_t mismatches = 0;
    std::string first;
    for (itk::ImageRegionConstIteratorWithIndex<TImage> it(expected, expected->GetLargestPossibleRegion()); !it.IsAtEnd(); ++it) {
        if (!(actual->GetPixel(it.GetIndex()) == it.Get())) {
            if (mismatches++ == 0) {
                std::ostringstream text;
                text << it.GetIndex() << ": " << +actual->GetPixel(it.GetIndex()) << " vs " << +it.Get();
                first = text.str();
            }
        }
    }
    INFO(mismatches << " voxels differ, first at " << first);
    CHECK(mismatches == 0);
}

nlohmann::json info_json(const fs::path& file) {
    const RunResult result = run_ok({"info", "--json", file.string()});
    return nlohmann::json::parse(result.out);
}

}  // namespace

TEST_CASE("resample: the identity reproduces the input bit for bit, header included", "[resample]") {
    TempDir dir;
    const GridSpec<3> grid = oblique_grid();
    auto identity = itk::AffineTransform<double, 3>::New();
    write_transform(identity, dir / "identity.tfm");
    auto identity_translation = itk::TranslationTransform<double, 3>::New();
    write_transform(identity_translation, dir / "identity_translation.txt");

    // MetaImage keeps the geometry in full double precision, and gridwarp's NIfTI writer keeps the
    // input's transforms field for field when the output grid is the input's, so both headers must
    // come back identical (ITK's own NIfTI writer re-encodes a direction it has read with a drift of
    // ~1e-8; gridwarp must not).
    auto check_type = [&](auto tag, const std::string& name, auto&& value, const std::string& extension) {
        using TImage = typename decltype(tag)::type;
        const fs::path moving = dir / (name + extension);
        write_itk(make_image<TImage>(grid, value).GetPointer(), moving);
        const auto input = read_itk<TImage>(moving);
        const nlohmann::json input_info = info_json(moving);
        // Each way of asking for the identity, in each mode (a mode per variant keeps the run short).
        const std::vector<std::tuple<fs::path, std::vector<std::string>, std::string>> variants{
            {fs::path(), {}, "linear"},
            {moving, {}, "nearest"},
            {fs::path(), {(dir / "identity.tfm").string()}, "cubic"},
            {moving, {(dir / "identity.tfm").string(), (dir / "identity_translation.txt").string() + ",inverse"}, "linear"},
            {moving, {(dir / "identity.tfm").string() + ",inverse"}, "cubic"}};
        int n = 0;
        for (const auto& [reference, transforms, mode] : variants) {
            INFO(name << extension << " mode " << mode << " case " << n);
            const fs::path out = dir / (name + "_out" + std::to_string(n++) + extension);
            run_ok(resample_args(moving, out, reference, transforms, mode));
            const auto output = read_itk<TImage>(out);
            require_same_voxels<TImage>(output.GetPointer(), input.GetPointer());
            check_geometry<3>(output.GetPointer(), input.GetPointer(), 0.0);
            if (n > 1) continue;
            const nlohmann::json output_info = info_json(out);
            const nlohmann::json& header = input_info;
            CHECK(output_info["dtype"] == input_info["dtype"]);
            CHECK(output_info["size"] == input_info["size"]);
            CHECK(output_info["spacing"] == header["spacing"]);
            CHECK(output_info["origin"] == header["origin"]);
            CHECK(output_info["direction"] == header["direction"]);
        }
    };
    for (const std::string extension : {".nii.gz", ".mha"}) {
        check_type(std::type_identity<Image3S>{}, "int16", pattern16, extension);
        check_type(std::type_identity<Image3F>{}, "float32", pattern32, extension);
    }
}

TEST_CASE("resample: a translation by whole voxels along the oblique axes is exact", "[resample]") {
    TempDir dir;
    const GridSpec<3> grid = oblique_grid();
    const fs::path moving16 = dir / "m16.nii.gz", moving32 = dir / "m32.nii.gz";
    write_itk(make_image<Image3S>(grid, pattern16).GetPointer(), moving16);
    write_itk(make_image<Image3F>(grid, pattern32).GetPointer(), moving32);
    // The shift in mm from the geometry the file really holds (NIfTI stores it in float32).
    const auto header = read_itk<Image3F>(moving32);
    const std::array<long, 3> steps{2, -1, 3};
    itk::ContinuousIndex<double, 3> zero, shifted;
    for (unsigned k = 0; k < 3; ++k) zero[k] = 0, shifted[k] = static_cast<double>(steps[k]);
    itk::Point<double, 3> p0, p1;
    header->TransformContinuousIndexToPhysicalPoint(zero, p0);
    header->TransformContinuousIndexToPhysicalPoint(shifted, p1);
    auto translation = itk::TranslationTransform<double, 3>::New();
    translation->Translate(p1 - p0);
    write_transform(translation, dir / "shift.tfm");
    write_plain_matrix<3>(itk::Matrix<double, 3, 3>::GetIdentity(), p1 - p0, dir / "shift_plain.txt");

    auto check_type = [&](auto tag, const fs::path& moving) {
        using TImage = typename decltype(tag)::type;
        const auto input = read_itk<TImage>(moving);
        int n = 0;
        for (const std::string mode : {"linear", "nearest", "cubic"}) {
            for (const std::string& transform : {(dir / "shift.tfm").string(), (dir / "shift_plain.txt").string() + ",lps"}) {
                INFO(moving.filename().string() << " mode " << mode << " transform " << transform);
                const fs::path out = dir / ("shifted" + std::to_string(n++) + "_" + moving.filename().string());
                run_ok(resample_args(moving, out, "", {transform}, mode));
                const auto output = read_itk<TImage>(out);
                // output[i] = input[i + steps] inside, the fill value (0) outside.
                auto expected = TImage::New();
                expected->SetRegions(input->GetLargestPossibleRegion());
                expected->Allocate();
                const auto size = input->GetLargestPossibleRegion().GetSize();
                std::size_t moved_voxels = 0;
                for (itk::ImageRegionIteratorWithIndex<TImage> it(expected, expected->GetLargestPossibleRegion()); !it.IsAtEnd(); ++it) {
                    itk::Index<3> source = it.GetIndex();
                    bool inside = true;
                    for (unsigned k = 0; k < 3; ++k) {
                        source[k] += steps[k];
                        inside = inside && source[k] >= 0 && source[k] < static_cast<long>(size[k]);
                    }
                    it.Set(inside ? input->GetPixel(source) : 0);
                    moved_voxels += inside;
                }
                CHECK(moved_voxels > 1000);
                require_same_voxels<TImage>(output.GetPointer(), expected.GetPointer());
            }
        }
    };
    check_type(std::type_identity<Image3S>{}, moving16);
    check_type(std::type_identity<Image3F>{}, moving32);
}

TEST_CASE("resample: a transform followed by its inverse gives the input back", "[resample][itk]") {
    TempDir dir;
    const Scene3 scene = make_scene3(dir);
    write_transform(make_affine3(scene.centre), dir / "affine.tfm");
    write_transform(make_euler3(scene.centre), dir / "euler.mat");
    const auto input = read_itk<Image3F>(scene.moving_file);
    const double range = value_range(input.GetPointer());
    auto identity = itk::AffineTransform<double, 3>::New();
    double worst = 0;
    int n = 0;
    for (const auto& transforms : std::vector<std::vector<std::string>>{
             {(dir / "affine.tfm").string(), (dir / "affine.tfm").string() + ",inverse"},
             {(dir / "affine.tfm").string() + ",inverse", (dir / "affine.tfm").string()},
             {"[" + (dir / "euler.mat").string() + ",1]", (dir / "euler.mat").string()},
             {(dir / "affine.tfm").string(), (dir / "euler.mat").string(), (dir / "euler.mat").string() + ",inverse",
              (dir / "affine.tfm").string() + ",inverse"}}) {
        for (const std::string mode : {"linear", "cubic"}) {
            INFO("case " << n << " mode " << mode);
            const fs::path out = dir / ("roundtrip" + std::to_string(n++) + ".nii.gz");
            run_ok(resample_args(scene.moving_file, out, "", transforms, mode));
            const auto output = read_itk<Image3F>(out);
            const Agreement agreement =
                compare_interior<3>(output.GetPointer(), input.GetPointer(), input.GetPointer(), identity.GetPointer(), 1e-4 * range, false);
            INFO(agreement.failures << " differ; first: " << agreement.first_failure);
            CHECK(agreement.compared > 30000);
            CHECK(agreement.failures == 0);
            worst = std::max(worst, agreement.max_diff);
        }
    }
    report("T then T^-1: max |diff| " + sci(worst) + " (range " + std::to_string(range) + ")");
}

// =============================================================================================
// 4. The output's geometry is the reference's, in ITK's LPS terms

TEST_CASE("resample: the output carries the reference grid's LPS geometry", "[resample][itk]") {
    TempDir dir;
    const Scene3 scene = make_scene3(dir);
    write_transform(make_euler3(scene.centre), dir / "euler.tfm");
    const auto reference = read_itk<Image3F>(scene.reference_file);
    const auto& grid = scene.reference_grid;
    for (const std::string name : {"out.nii.gz", "out.nii", "out.mha"}) {
        INFO(name);
        const fs::path out = dir / name;
        run_ok(resample_args(scene.moving_file, out, scene.reference_file, {(dir / "euler.tfm").string()}, "linear"));
        const nlohmann::json info = info_json(out);
        REQUIRE(info["size"].get<std::vector<int>>() == std::vector<int>{30, 28, 24});
        for (unsigned i = 0; i < 3; ++i) {
            CHECK(std::fabs(info["spacing"][i].get<double>() - grid.spacing[i]) <= 1e-5);
            CHECK(std::fabs(info["origin"][i].get<double>() - grid.origin[i]) <= 1e-5);
            CHECK(std::fabs(info["spacing"][i].get<double>() - reference->GetSpacing()[i]) <= 1e-5);
            CHECK(std::fabs(info["origin"][i].get<double>() - reference->GetOrigin()[i]) <= 1e-5);
            for (unsigned j = 0; j < 3; ++j) {
                // info's direction is row-major: row i, column j (column j = axis j's direction).
                CHECK(std::fabs(info["direction"][i][j].get<double>() - grid.direction(i, j)) <= 1e-5);
                CHECK(std::fabs(info["direction"][i][j].get<double>() - reference->GetDirection()(i, j)) <= 1e-5);
            }
        }
        const auto output = read_itk<Image3F>(out);
        check_geometry<3>(output.GetPointer(), reference.GetPointer(), 1e-5);
        auto intended = make_image<Image3F>(grid, [](const itk::Index<3>&) { return 0.0f; });
        check_geometry<3>(output.GetPointer(), intended.GetPointer(), 1e-5);
    }
}

// =============================================================================================
// 5. --output-type

TEST_CASE("resample --output-type: integers saturate and round half to even and floats keep fractions", "[resample]") {
    TempDir dir;
    GridSpec<3> grid = oblique_grid();
    grid.size = {8, 6, 5};
    const std::vector<double> values{-10.5, 300.0, 2.5, 3.5, 0.5, 1.5, 254.5, 255.5, 1e6, -1e6, 128.49, 127.5,
                                     255.0, 0.0, -0.4, 99.7, 256.0, 40000.0, -40000.0, 32767.5, -32768.5, 4.5};
    auto value_at = [&](const itk::Index<3>& i) {
        return values[static_cast<std::size_t>(i[0] + 8 * i[1] + 48 * i[2]) % values.size()];
    };
    const fs::path moving = dir / "floats.nii.gz";
    write_itk(make_image<Image3F>(grid, [&](const itk::Index<3>& i) { return static_cast<float>(value_at(i)); }).GetPointer(), moving);

    SECTION("uchar") {
        const fs::path out = dir / "uchar.nii.gz";
        auto args = resample_args(moving, out, "", {}, "linear");
        args.insert(args.end(), {"--output-type", "uchar"});
        run_ok(args);
        CHECK(info_json(out)["dtype"] == "uint8");
        const auto output = read_itk<Image3U>(out);
        auto expected = make_image<Image3U>(grid, [&](const itk::Index<3>& i) {
            return static_cast<unsigned char>(std::clamp(std::nearbyint(value_at(i)), 0.0, 255.0));
        });
        require_same_voxels<Image3U>(output.GetPointer(), expected.GetPointer());
        // Spot checks of the rules themselves: 300 saturates (a wrap would give 44), 2.5 -> 2, 3.5 -> 4.
        CHECK(+output->GetPixel({{1, 0, 0}}) == 255);
        CHECK(+output->GetPixel({{2, 0, 0}}) == 2);
        CHECK(+output->GetPixel({{3, 0, 0}}) == 4);
        CHECK(+output->GetPixel({{0, 0, 0}}) == 0);
        CHECK(+output->GetPixel({{6, 0, 0}}) == 254);
    }
    SECTION("short") {
        const fs::path out = dir / "short.nii.gz";
        auto args = resample_args(moving, out, "", {}, "nearest");
        args.insert(args.end(), {"--output-type", "short"});
        run_ok(args);
        CHECK(info_json(out)["dtype"] == "int16");
        const auto output = read_itk<Image3S>(out);
        auto expected = make_image<Image3S>(grid, [&](const itk::Index<3>& i) {
            return static_cast<short>(std::clamp(std::nearbyint(value_at(i)), -32768.0, 32767.0));
        });
        require_same_voxels<Image3S>(output.GetPointer(), expected.GetPointer());
    }
    SECTION("float output of a uint8 volume keeps fractions") {
        const fs::path bytes = dir / "bytes.nii.gz";
        GridSpec<3> g = oblique_grid();
        auto byte_at = [](const itk::Index<3>& i) { return static_cast<unsigned char>((i[0] * 37 + i[1] * 11 + i[2] * 5) % 256); };
        write_itk(make_image<Image3U>(g, byte_at).GetPointer(), bytes);
        // Half a voxel along the first (oblique) axis.
        const auto header = read_itk<Image3U>(bytes);
        itk::ContinuousIndex<double, 3> zero, half;
        zero.Fill(0);
        half.Fill(0);
        half[0] = 0.5;
        itk::Point<double, 3> p0, p1;
        header->TransformContinuousIndexToPhysicalPoint(zero, p0);
        header->TransformContinuousIndexToPhysicalPoint(half, p1);
        auto translation = itk::TranslationTransform<double, 3>::New();
        translation->Translate(p1 - p0);
        write_transform(translation, dir / "half.tfm");

        const fs::path out_float = dir / "half_float.nii.gz", out_byte = dir / "half_byte.nii.gz";
        auto args = resample_args(bytes, out_float, "", {(dir / "half.tfm").string()}, "linear");
        args.insert(args.end(), {"--output-type", "float"});
        run_ok(args);
        run_ok(resample_args(bytes, out_byte, "", {(dir / "half.tfm").string()}, "linear"));
        CHECK(info_json(out_float)["dtype"] == "float32");
        CHECK(info_json(out_byte)["dtype"] == "uint8");
        const auto as_float = read_itk<Image3F>(out_float);
        const auto as_byte = read_itk<Image3U>(out_byte);
        std::size_t fractional = 0, compared = 0, mismatches = 0, byte_mismatches = 0;
        for (itk::ImageRegionConstIteratorWithIndex<Image3U> it(header, header->GetLargestPossibleRegion()); !it.IsAtEnd(); ++it) {
            itk::Index<3> next = it.GetIndex();
            next[0] += 1;
            if (next[0] >= static_cast<long>(g.size[0])) continue;  // blends with the fill value there
            const double expected = (it.Get() + header->GetPixel(next)) / 2.0;
            const double got = as_float->GetPixel(it.GetIndex());
            ++compared;
            if (std::fabs(got - expected) > 1e-3) ++mismatches;
            if (std::fabs(got - std::round(got)) > 0.4) ++fractional;
            if (std::fabs(as_byte->GetPixel(it.GetIndex()) - expected) > 0.5 + 1e-3) ++byte_mismatches;
        }
        CHECK(compared > 1000);
        CHECK(mismatches == 0);
        CHECK(fractional > compared / 4);  // (a + b) / 2 with a + b odd is x.5, kept as such
        CHECK(byte_mismatches == 0);
    }
}

// =============================================================================================
// 6. Several channels: a 4-D series and a vector volume

TEST_CASE("resample: every channel of a 4-D series or vector volume takes the same mapping", "[resample]") {
    TempDir dir;
    const Scene3 scene = make_scene3(dir);
    write_transform(make_affine3(scene.centre), dir / "affine.tfm");
    const fs::path field = write_field3(dir, scene.centre, "field.nii.gz");
    const GridSpec<3>& g = scene.moving_grid;
    auto channel_value = [](unsigned c) {
        return [c](const itk::Index<3>& i) { return smooth3(i) * static_cast<float>(c + 1) + 10.0f * static_cast<float>(c) - 3.0f * i[0] * c; };
    };
    constexpr unsigned channels = 3;

    // The 4-D series: the 3-D geometry plus a unit time axis.
    GridSpec<4> g4;
    for (unsigned i = 0; i < 3; ++i) {
        g4.size[i] = g.size[i];
        g4.spacing[i] = g.spacing[i];
        g4.origin[i] = g.origin[i];
        for (unsigned j = 0; j < 3; ++j) g4.direction(i, j) = g.direction(i, j);
        g4.direction(i, 3) = g4.direction(3, i) = 0;
    }
    g4.size[3] = channels;
    g4.spacing[3] = 1;
    g4.origin[3] = 0;
    g4.direction(3, 3) = 1;
    const fs::path series = dir / "series.nii.gz";
    write_itk(make_image<Image4F>(g4,
                                  [&](const itk::Index<4>& i) {
                                      return channel_value(static_cast<unsigned>(i[3]))({{i[0], i[1], i[2]}});
                                  })
                  .GetPointer(),
              series);
    // The vector volume: 3-component voxels.
    const fs::path vectors = dir / "vectors.nii.gz";
    write_itk(make_image<FieldF<3>>(g,
                                    [&](const itk::Index<3>& i) {
                                        itk::Vector<float, 3> v;
                                        for (unsigned c = 0; c < channels; ++c) v[c] = channel_value(c)(i);
                                        return v;
                                    })
                  .GetPointer(),
              vectors);
    std::vector<fs::path> singles;
    for (unsigned c = 0; c < channels; ++c) {
        singles.push_back(dir / ("channel" + std::to_string(c) + ".nii.gz"));
        write_itk(make_image<Image3F>(g, channel_value(c)).GetPointer(), singles.back());
        const nlohmann::json single_info = info_json(singles.back());
        for (const auto& multi : {series, vectors}) {
            const nlohmann::json multi_info = info_json(multi);
            REQUIRE(multi_info["channels"] == channels);
            REQUIRE(multi_info["origin"] == single_info["origin"]);
            REQUIRE(multi_info["spacing"] == single_info["spacing"]);
            REQUIRE(multi_info["direction"] == single_info["direction"]);
        }
    }

    for (const auto& transforms : std::vector<std::vector<std::string>>{{(dir / "affine.tfm").string()},
                                                                        {field.string(), (dir / "affine.tfm").string()}}) {
        for (const std::string mode : {transforms.size() == 1 ? "cubic" : "nearest", "linear"}) {
            INFO("mode " << mode << ", " << transforms.size() << " transform(s)");
            std::vector<Image3F::Pointer> expected;
            for (unsigned c = 0; c < channels; ++c) {
                const fs::path out = dir / ("single" + std::to_string(c) + ".nii.gz");
                run_ok(resample_args(singles[c], out, scene.reference_file, transforms, mode));
                expected.push_back(read_itk<Image3F>(out));
            }
            const fs::path series_out = dir / "series_out.nii.gz", vectors_out = dir / "vectors_out.nii.gz";
            run_ok(resample_args(series, series_out, scene.reference_file, transforms, mode));
            run_ok(resample_args(vectors, vectors_out, scene.reference_file, transforms, mode));
            const auto series_result = read_itk<Image4F>(series_out);
            const auto vector_result = read_itk<FieldF<3>>(vectors_out);
            REQUIRE(series_result->GetLargestPossibleRegion().GetSize()[3] == channels);
            std::size_t series_mismatches = 0, vector_mismatches = 0, voxels = 0;
            for (unsigned c = 0; c < channels; ++c) {
                const auto& single = expected[c];
                for (itk::ImageRegionConstIteratorWithIndex<Image3F> it(single, single->GetLargestPossibleRegion()); !it.IsAtEnd(); ++it) {
                    const auto i = it.GetIndex();
                    ++voxels;
                    if (!(series_result->GetPixel({{i[0], i[1], i[2], static_cast<long>(c)}}) == it.Get())) ++series_mismatches;
                    if (!(vector_result->GetPixel(i)[c] == it.Get())) ++vector_mismatches;
                }
            }
            CHECK(voxels == 3u * 30 * 28 * 24);
            CHECK(series_mismatches == 0);
            CHECK(vector_mismatches == 0);
            CHECK(info_json(series_out)["channels"] == channels);
            CHECK(info_json(vectors_out)["channels"] == channels);
        }
    }
}

// =============================================================================================
// 7. Errors: non-zero exit, one stderr line naming the file, no output

TEST_CASE("resample errors name the file in one line and write nothing", "[resample][errors]") {
    TempDir dir;
    GridSpec<3> grid = oblique_grid();
    const fs::path moving = dir / "moving.nii.gz";
    write_itk(make_image<Image3F>(grid, pattern32).GetPointer(), moving);
    GridSpec<2> grid2;
    grid2.size = {9, 7};
    grid2.spacing = {1, 1};
    grid2.origin = {0, 0};
    grid2.direction = rotation2(0.1);
    const fs::path reference2d = dir / "reference2d.nii.gz";
    write_itk(make_image<Image2F>(grid2, [](const itk::Index<2>&) { return 0.0f; }).GetPointer(), reference2d);

    auto bspline = itk::BSplineTransform<double, 3, 3>::New();
    write_transform(bspline, dir / "bspline.tfm");
    write_transform(itk::AffineTransform<double, 2>::New(), dir / "affine2d.tfm");
    {
        std::ofstream(dir / "matrix3x3.txt") << "1 0 0\n0 1 0\n0 0 1\n";
        std::ofstream(dir / "singular.txt") << "1 0 0 0\n0 1 0 0\n0 0 0 5\n0 0 0 1\n";
    }
    auto singular = itk::AffineTransform<double, 3>::New();
    itk::Matrix<double, 3, 3> m;
    m.Fill(0);
    m(0, 0) = 1, m(1, 1) = 2, m(2, 0) = 2;  // rank 2
    singular->SetMatrix(m);
    write_transform(singular, dir / "singular.tfm");
    itk::Point<double, 3> origin;
    origin.Fill(0);
    const fs::path field = write_field3(dir, origin, "field.nii.gz");
    {
        std::ofstream(dir / "corrupt.nii.gz", std::ios::binary) << std::string(1000, '\x5a') << "not a volume";
        // A field cut short: a valid header, half its voxels.
        const auto bytes = std::filesystem::file_size(field);
        fs::copy_file(field, dir / "truncated_field.nii.gz");
        fs::resize_file(dir / "truncated_field.nii.gz", bytes / 2);
        GridSpec<2> g2 = grid2;
        write_itk(make_image<FieldF<2>>(g2, [](const itk::Index<2>&) { return itk::Vector<float, 2>(0.5f); }).GetPointer(),
                  dir / "field2d.nii.gz");
        // x + 3 sin(x) along x folds wherever 1 + 3 cos(x) < 0: no inverse there, and the
        // displacement stays within the grid.
        GridSpec<3> fold_grid;
        fold_grid.size = {40, 6, 6};
        fold_grid.spacing = {1.0, 1.0, 1.0};
        fold_grid.direction.SetIdentity();
        write_itk(make_image<FieldF<3>>(fold_grid, [](const itk::Index<3>& i) {
                      itk::Vector<float, 3> v(0.0f);
                      v[0] = static_cast<float>(3.0 * std::sin(static_cast<double>(i[0])));
                      return v;
                  }).GetPointer(),
                  dir / "folding.nii.gz");
    }

    struct ErrorCase {
        std::string name;
        std::vector<std::string> transforms;
        fs::path reference;
        fs::path named;  // the file the message must name
    };
    const std::vector<ErrorCase> cases{
        {"BSpline transform inverted (its control grid is too coarse)", {(dir / "bspline.tfm").string() + ",inverse"}, {}, dir / "bspline.tfm"},
        {"2-D ITK transform for a 3-D image", {(dir / "affine2d.tfm").string()}, {}, dir / "affine2d.tfm"},
        {"3x3 matrix for a 3-D image", {(dir / "matrix3x3.txt").string()}, {}, dir / "matrix3x3.txt"},
        {"singular text matrix inverted", {(dir / "singular.txt").string() + ",lps,inverse"}, {}, dir / "singular.txt"},
        {"singular ITK affine inverted", {"[" + (dir / "singular.tfm").string() + ",1]"}, {}, dir / "singular.tfm"},
        {"folding displacement field inverted", {(dir / "folding.nii.gz").string() + ",inverse"}, {}, dir / "folding.nii.gz"},
        {"folding displacement field inverted, ANTs syntax", {"[" + (dir / "folding.nii.gz").string() + ",1]"}, {}, dir / "folding.nii.gz"},
        {"corrupt field", {(dir / "corrupt.nii.gz").string()}, {}, dir / "corrupt.nii.gz"},
        {"truncated field", {(dir / "truncated_field.nii.gz").string()}, {}, dir / "truncated_field.nii.gz"},
        {"2-D field for a 3-D image", {(dir / "field2d.nii.gz").string()}, {}, dir / "field2d.nii.gz"},
        {"missing transform", {(dir / "no_such.tfm").string()}, {}, dir / "no_such.tfm"},
        {"reference of another dimension", {}, reference2d, reference2d},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        std::set<fs::path> before;
        for (const auto& entry : fs::directory_iterator(dir.path())) before.insert(entry.path());
        const fs::path out = dir / "out.nii.gz";
        const RunResult result = run_gridwarp(resample_args(moving, out, c.reference, c.transforms, "linear"));
        INFO("stderr: " << result.err);
        report(c.name + ": " + result.err.substr(0, result.err.find('\n')));
        CHECK(result.status != 0);
        CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
        CHECK((!result.err.empty() && result.err.back() == '\n'));
        CHECK(result.err.find(c.named.string()) != std::string::npos);
        CHECK(result.err.rfind("gridwarp: error: ", 0) == 0);
        CHECK_FALSE(fs::exists(out));
        std::set<fs::path> after;
        for (const auto& entry : fs::directory_iterator(dir.path())) after.insert(entry.path());
        CHECK((after == before));  // no temporary left behind either
    }
}

namespace io = gridwarp::io;

namespace {

// A small float32 NIfTI-1 file whose sform and qform hold different geometries (each given in
// gridwarp's LPS convention), written through gridwarp's header writer; ITK reads it as the oracle.
fs::path write_two_transform_nifti(const fs::path& file, const io::Geometry& sform, int sform_code, const io::Geometry& qform,
                                   int qform_code, int xyzt_units) {
    io::NiftiHeader header;
    header.dim = {3, 4, 3, 2, 1, 1, 1, 1};
    header.pixdim = {1, 1, 1, 1, 1, 1, 1, 1};
    header.datatype = 16;
    header.bitpix = 32;
    header.vox_offset = 352;
    header.xyzt_units = xyzt_units;
    header.qform_code = header.sform_code = 1;
    io::NiftiHeader with_sform = header;
    io::set_nifti_geometry(with_sform, sform);
    io::set_nifti_geometry(header, qform);  // quaternion and pixdim from the qform's geometry
    header.srow = with_sform.srow;
    header.sform_code = sform_code;
    header.qform_code = qform_code;
    std::size_t size = 0;
    const auto bytes = io::serialize_nifti_header(header, size);
    std::string contents(reinterpret_cast<const char*>(bytes.data()), size);
    contents.append(24 * sizeof(float), '\0');
    std::ofstream(file, std::ios::binary) << contents;
    return file;
}

io::Geometry lps_geometry(const std::array<double, 3>& spacing, const std::array<double, 3>& origin, const itk::Matrix<double, 3, 3>& direction) {
    io::Geometry g = io::Geometry::identity(3);
    for (unsigned i = 0; i < 3; ++i) {
        g.spacing[i] = spacing[i];
        g.origin[i] = origin[i];
        for (unsigned j = 0; j < 3; ++j) g.direction[i * 3 + j] = direction(i, j);
    }
    return g;
}

}  // namespace

TEST_CASE("nifti --nifti-geometry itk: the geometry ITK 5.2's NIfTI reader gives, case by case", "[resample][itk][nifti]") {
    TempDir dir;
    const io::Geometry a = lps_geometry({1.2, 0.9, 2.5}, {-40.5, 12.25, 7.0}, rotation3(0.3, -0.2, 0.5));
    const io::Geometry b = lps_geometry({1.2, 0.9, 2.5}, {20.0, -63.0, 33.0}, rotation3(-0.1, 0.4, 1.1));
    struct Case {
        std::string name;
        int sform_code, qform_code, units;
        bool differs_from_standard;  // the file is one where the two rules disagree
    };
    const std::vector<Case> cases = {
        {"sform aligned, qform scanner: ITK takes the qform", 2, 1, 2, true},
        {"sform scanner, qform scanner: ITK takes the sform", 1, 1, 2, false},
        {"sform only", 4, 0, 2, false},
        {"qform only", 0, 2, 2, false},
        {"microns: spacing scaled, origin not", 1, 1, 3, true},
        {"neither transform", 0, 0, 2, true},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        const fs::path file = write_two_transform_nifti(dir / "two.nii", a, c.sform_code, b, c.qform_code, c.units);
        const auto itk_image = read_itk<Image3F>(file);
        const nlohmann::json itk_rule = nlohmann::json::parse(run_ok({"info", "--json", "--nifti-geometry", "itk", file.string()}).out);
        const nlohmann::json standard = nlohmann::json::parse(run_ok({"info", "--json", file.string()}).out);
        double largest_difference = 0;
        for (unsigned i = 0; i < 3; ++i) {
            CHECK(std::fabs(itk_rule["spacing"][i].get<double>() - itk_image->GetSpacing()[i]) <= 1e-5);
            CHECK(std::fabs(itk_rule["origin"][i].get<double>() - itk_image->GetOrigin()[i]) <= 1e-4);
            largest_difference = std::max(largest_difference, std::fabs(standard["origin"][i].get<double>() - itk_image->GetOrigin()[i]));
            for (unsigned j = 0; j < 3; ++j) {
                CHECK(std::fabs(itk_rule["direction"][i][j].get<double>() - itk_image->GetDirection()(i, j)) <= 1e-5);
                largest_difference = std::max(largest_difference,
                                              std::fabs(standard["direction"][i][j].get<double>() - itk_image->GetDirection()(i, j)));
            }
        }
        if (c.differs_from_standard) CHECK(largest_difference > 1e-3);
    }
}

namespace {

// The matrix and offset gridwarp reports for a transform file (its steps, in file order).
std::vector<std::pair<std::vector<double>, std::vector<double>>> gridwarp_steps(const fs::path& file) {
    const nlohmann::json info = nlohmann::json::parse(run_ok({"info", "--json", file.string()}).out);
    std::vector<std::pair<std::vector<double>, std::vector<double>>> steps;
    for (const auto& step : info["steps"]) {
        std::vector<double> matrix;
        for (const auto& row : step["matrix"]) {
            for (const auto& v : row) matrix.push_back(v.get<double>());
        }
        steps.emplace_back(matrix, step["offset"].get<std::vector<double>>());
    }
    return steps;
}

template <unsigned D>
void check_same_map(const std::pair<std::vector<double>, std::vector<double>>& step, const TransformD<D>* transform) {
    const auto* linear = dynamic_cast<const itk::MatrixOffsetTransformBase<double, D, D>*>(transform);
    REQUIRE(linear);
    for (unsigned i = 0; i < D; ++i) {
        for (unsigned j = 0; j < D; ++j) CHECK(std::fabs(step.first[i * D + j] - linear->GetMatrix()(i, j)) <= 1e-12);
        CHECK(std::fabs(step.second[i] - linear->GetOffset()[i]) <= 1e-9);
    }
}

}  // namespace

TEST_CASE("ITK text transforms of the common linear kinds read without ITK give ITK's matrix and offset", "[resample][itk]") {
    TempDir dir;
    itk::Point<double, 3> centre;
    centre[0] = 12.5, centre[1] = -7.25, centre[2] = 30.0;
    itk::Vector<double, 3> shift;
    shift[0] = 3.5, shift[1] = -2.0, shift[2] = 0.75;
    std::vector<std::pair<std::string, TransformD<3>::Pointer>> kinds3;
    for (bool zyx : {false, true}) {
        auto euler = itk::Euler3DTransform<double>::New();
        euler->SetCenter(centre);
        euler->SetRotation(0.3, -0.45, 0.8);
        euler->SetComputeZYX(zyx);
        euler->SetTranslation(shift);
        kinds3.emplace_back(zyx ? "euler_zyx" : "euler", euler.GetPointer());
    }
    auto versor = itk::VersorRigid3DTransform<double>::New();
    itk::Versor<double> v;
    itk::Vector<double, 3> axis;
    axis[0] = 0.2, axis[1] = -0.5, axis[2] = 0.8;
    v.Set(axis, 0.7);
    versor->SetCenter(centre);
    versor->SetRotation(v);
    versor->SetTranslation(shift);
    kinds3.emplace_back("versor", versor.GetPointer());
    auto similarity = itk::Similarity3DTransform<double>::New();
    similarity->SetCenter(centre);
    similarity->SetRotation(v);
    similarity->SetScale(1.3);
    similarity->SetTranslation(shift);
    kinds3.emplace_back("similarity", similarity.GetPointer());
    auto affine = itk::AffineTransform<double, 3>::New();
    affine->SetCenter(centre);
    affine->SetMatrix(rotation3(0.1, 0.2, -0.3) * 1.1);
    affine->SetTranslation(shift);
    kinds3.emplace_back("affine", affine.GetPointer());
    for (const auto& [name, transform] : kinds3) {
        INFO(name);
        for (const char* extension : {".tfm", ".txt"}) {
            const fs::path file = dir / (name + extension);
            write_transform(transform.GetPointer(), file);
            const auto steps = gridwarp_steps(file);
            REQUIRE(steps.size() == 1);
            check_same_map<3>(steps[0], transform.GetPointer());
        }
    }
    auto translation = itk::TranslationTransform<double, 3>::New();
    translation->SetOffset(shift);
    write_transform(translation.GetPointer(), dir / "translation.tfm");
    const auto moved = gridwarp_steps(dir / "translation.tfm");
    REQUIRE(moved.size() == 1);
    for (unsigned i = 0; i < 3; ++i) CHECK(moved[0].second[i] == shift[i]);
    // A composite: its transforms in the file's order, the last acting first.
    auto composite = itk::CompositeTransform<double, 3>::New();
    composite->AddTransform(affine);
    composite->AddTransform(versor);
    write_transform(composite.GetPointer(), dir / "composite.tfm");
    const auto parts = gridwarp_steps(dir / "composite.tfm");
    REQUIRE(parts.size() == 2);
    check_same_map<3>(parts[0], affine.GetPointer());
    check_same_map<3>(parts[1], versor.GetPointer());

    itk::Point<double, 2> centre2;
    centre2[0] = -4.0, centre2[1] = 9.5;
    auto euler2 = itk::Euler2DTransform<double>::New();
    euler2->SetCenter(centre2);
    euler2->SetAngle(0.6);
    auto similarity2 = itk::Similarity2DTransform<double>::New();
    similarity2->SetCenter(centre2);
    similarity2->SetAngle(-0.4);
    similarity2->SetScale(0.8);
    for (const auto& [name, transform] : std::vector<std::pair<std::string, TransformD<2>::Pointer>>{
             {"euler2", euler2.GetPointer()}, {"similarity2", similarity2.GetPointer()}}) {
        INFO(name);
        const fs::path file = dir / (name + ".tfm");
        write_transform(transform.GetPointer(), file);
        const auto steps = gridwarp_steps(file);
        REQUIRE(steps.size() == 1);
        check_same_map<2>(steps[0], transform.GetPointer());
    }
}

// =============================================================================================
// 8. --padding itk: every voxel equals itk::ResampleImageFilter, edges and outside included
//
// ITK's rule (itkResampleImageFilter.hxx, Linear/NonlinearThreadedGenerateData): a point whose
// continuous index fails the interpolator's IsInsideBuffer, [-0.5, size - 0.5) per axis
// (itkImageFunction.h/.hxx), gets the default pixel value; inside, LinearInterpolateImageFunction
// repeats the edge voxel for taps beyond it and NearestNeighborInterpolateImageFunction rounds
// halves up. The exact scenes use dyadic geometry and transforms, so that both tools compute the
// same continuous indices bit for bit and points fall exactly on -0.5, size - 0.5 and on .5 ties.

namespace {

struct ItkRuleCheck {
    std::size_t voxels = 0, compared = 0, outside = 0, on_low_edge = 0, on_high_edge = 0, ties = 0, near_excluded = 0;
    std::size_t failures = 0;
    double max_diff = 0;
    std::string first_failure;
};

// Resamples with gridwarp (--padding itk --fill FILL) and with ITK (default value FILL), both in
// TImage's pixel type, and compares every voxel. Voxels whose continuous index lies within `near`
// of an edge or (nearest) a .5 tie, without being exactly on it, are left out and counted: there
// the two tools' last-bit differences in computing the index may decide differently.
template <class TImage>
ItkRuleCheck check_itk_rule(const fs::path& moving_file, const fs::path& reference_file, const std::vector<std::string>& transforms,
                            const TransformD<TImage::ImageDimension>* oracle, const std::string& mode, double fill,
                            double tolerance, double near, const std::vector<std::string>& extra_args, const fs::path& out) {
    constexpr unsigned D = TImage::ImageDimension;
    using Pixel = typename TImage::PixelType;
    const auto moving = read_itk<TImage>(moving_file);
    const auto reference = read_itk<TImage>(reference_file);
    const bool nearest = mode == "nearest";

    auto filter = itk::ResampleImageFilter<TImage, TImage, double, double>::New();
    filter->SetInput(moving);
    filter->SetTransform(oracle);
    if (nearest) {
        filter->SetInterpolator(itk::NearestNeighborInterpolateImageFunction<TImage, double>::New());
    } else {
        filter->SetInterpolator(itk::LinearInterpolateImageFunction<TImage, double>::New());
    }
    filter->SetOutputParametersFromImage(reference);
    filter->SetDefaultPixelValue(static_cast<Pixel>(fill));
    filter->Update();
    const TImage* expected = filter->GetOutput();

    std::ostringstream fill_text;
    fill_text.precision(17);
    fill_text << fill;
    auto args = resample_args(moving_file, out, reference_file, transforms, mode);
    args.insert(args.end(), {"--padding", "itk", "--fill", fill_text.str()});
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    run_ok(args);
    const auto actual = read_itk<TImage>(out);
    REQUIRE(actual->GetLargestPossibleRegion().GetSize() == expected->GetLargestPossibleRegion().GetSize());

    const auto size = moving->GetLargestPossibleRegion().GetSize();
    ItkRuleCheck result;
    for (itk::ImageRegionConstIteratorWithIndex<TImage> it(expected, expected->GetLargestPossibleRegion()); !it.IsAtEnd(); ++it) {
        ++result.voxels;
        itk::Point<double, D> point;
        expected->TransformIndexToPhysicalPoint(it.GetIndex(), point);
        itk::ContinuousIndex<double, D> u;
        moving->TransformPhysicalPointToContinuousIndex(oracle->TransformPoint(point), u);
        bool inside = true, low = false, high = false, tie = false, close = false;
        for (unsigned k = 0; k < D; ++k) {
            const double hi = static_cast<double>(size[k]) - 0.5;
            inside = inside && u[k] >= -0.5 && u[k] < hi;
            low = low || u[k] == -0.5;
            high = high || u[k] == hi;
            const double from_half = std::fabs(u[k] - std::floor(u[k]) - 0.5);
            tie = tie || from_half == 0;
            close = close || (u[k] != -0.5 && std::fabs(u[k] + 0.5) < near) || (u[k] != hi && std::fabs(u[k] - hi) < near) ||
                    (nearest && from_half != 0 && from_half < near);
        }
        if (close) {
            ++result.near_excluded;
            continue;
        }
        ++result.compared;
        result.outside += inside ? 0 : 1;
        result.on_low_edge += low ? 1 : 0;
        result.on_high_edge += high ? 1 : 0;
        result.ties += tie && inside ? 1 : 0;
        const double a = static_cast<double>(actual->GetPixel(it.GetIndex()));
        const double e = static_cast<double>(it.Get());
        const double diff = std::fabs(a - e);
        if (!(diff <= result.max_diff)) result.max_diff = std::isnan(diff) ? INFINITY : diff;
        if (!(diff <= tolerance) && result.failures++ == 0) {
            std::ostringstream text;
            text.precision(10);
            text << "at index " << it.GetIndex() << ": gridwarp " << a << ", ITK " << e << " (moving index " << u << ")";
            result.first_failure = text.str();
        }
    }
    return result;
}

void require_agreement(const ItkRuleCheck& check, const std::string& label) {
    INFO(label << ": " << check.compared << " of " << check.voxels << " voxels compared (" << check.near_excluded
               << " within a hair of an edge or tie left out), " << check.outside << " outside, " << check.failures
               << " differ; first " << check.first_failure);
    CHECK(check.failures == 0);
    CHECK(check.outside > 0);
    CHECK(check.compared + check.near_excluded == check.voxels);
    report("--padding itk " + label + ": max |diff| " + sci(check.max_diff) + ", " + std::to_string(check.compared) + "/" +
           std::to_string(check.voxels) + " compared, " + std::to_string(check.outside) + " outside, " +
           std::to_string(check.on_low_edge) + " on -0.5, " + std::to_string(check.on_high_edge) + " on size-0.5, " +
           std::to_string(check.ties) + " ties, " + std::to_string(check.near_excluded) + " left out");
}

template <class TImage>
double largest_magnitude(const TImage* image) {
    double largest = 0;
    for (itk::ImageRegionConstIteratorWithIndex<TImage> it(image, image->GetLargestPossibleRegion()); !it.IsAtEnd(); ++it) {
        largest = std::max(largest, std::fabs(static_cast<double>(it.Get())));
    }
    return largest;
}

// A dyadic grid with the identity direction: every index-to-point computation is exact.
template <unsigned D>
GridSpec<D> dyadic_grid(std::array<itk::SizeValueType, D> size, std::array<double, D> spacing, std::array<double, D> origin) {
    GridSpec<D> grid;
    grid.size = size;
    grid.spacing = spacing;
    grid.origin = origin;
    grid.direction.SetIdentity();
    return grid;
}

}  // namespace

TEST_CASE("resample --padding itk 2-D: every pixel equals ITK, exactly on the edges and ties", "[resample][itk]") {
    TempDir dir;
    // Moving: 6 x 5 pixels of 1 x 2 mm; physical x in [0, 6], y in [-2, 8]. Reference: 32 x 24 of
    // 0.25 x 0.5 mm from (-1.25, -3.5), a power of two along x so that ITK's scanline arithmetic
    // (index + i/32 * span) is exact too.
    const auto moving_grid = dyadic_grid<2>({6, 5}, {1.0, 2.0}, {0.5, -1.0});
    const auto reference_grid = dyadic_grid<2>({32, 24}, {0.25, 0.5}, {-1.25, -3.5});
    const fs::path moving_file = dir / "moving.nii.gz", reference_file = dir / "reference.nii.gz";
    write_itk(make_image<Image2F>(moving_grid, [](const itk::Index<2>& i) { return static_cast<float>((i[0] * 7 + i[1] * 13) % 17 * 3.25 - 20); })
                  .GetPointer(),
              moving_file);
    write_itk(make_image<Image2F>(reference_grid, [](const itk::Index<2>&) { return 0.0f; }).GetPointer(), reference_file);

    itk::Point<double, 2> centre;
    centre[0] = 3.0, centre[1] = 3.0;  // the moving image's centre
    auto shift = itk::AffineTransform<double, 2>::New();
    itk::Vector<double, 2> t;
    t[0] = 0.25, t[1] = -0.5;
    shift->SetTranslation(t);
    auto quarter_turn = itk::AffineTransform<double, 2>::New();  // exactly 90 degrees, then a shift
    itk::Matrix<double, 2, 2> m;
    m(0, 0) = 0, m(0, 1) = -1, m(1, 0) = 1, m(1, 1) = 0;
    quarter_turn->SetCenter(centre);
    quarter_turn->SetMatrix(m);
    t[0] = 0.5, t[1] = -0.75;
    quarter_turn->SetTranslation(t);
    auto turn_and_scale = itk::AffineTransform<double, 2>::New();  // a rotation by atan(1.5), scaled by 0.9
    m(0, 0) = 0.5, m(0, 1) = -0.75, m(1, 0) = 0.75, m(1, 1) = 0.5;
    turn_and_scale->SetCenter(centre);
    turn_and_scale->SetMatrix(m);
    t[0] = -0.25, t[1] = 1.0;
    turn_and_scale->SetTranslation(t);

    const double tolerance = 1e-6 * largest_magnitude(read_itk<Image2F>(moving_file).GetPointer());
    for (const auto& [name, transform] : std::vector<std::pair<std::string, TransformD<2>::Pointer>>{
             {"shift", shift.GetPointer()}, {"quarter_turn", quarter_turn.GetPointer()}, {"turn_and_scale", turn_and_scale.GetPointer()}}) {
        const fs::path file = dir / (name + ".tfm");
        write_transform(transform.GetPointer(), file);
        const auto oracle = read_transform<2>(file);
        for (const std::string mode : {"linear", "nearest"}) {
            const std::string label = "2-D " + name + " " + mode;
            INFO(label);
            // Linear: float32 weights and sums against ITK's double, one rounding to float at the end.
            const auto check = check_itk_rule<Image2F>(moving_file, reference_file, {file.string()}, oracle.GetPointer(), mode, -7.5,
                                                       mode == "nearest" ? 0.0 : tolerance, 1e-9, {}, dir / (name + mode + ".nii.gz"));
            require_agreement(check, label);
            CHECK(check.near_excluded == 0);
            CHECK(check.on_low_edge > 0);
            CHECK(check.on_high_edge > 0);
            if (mode == "nearest") CHECK(check.ties > 0);
        }
    }
}

TEST_CASE("resample --padding itk 3-D: float, int16 and uint8 volumes equal ITK voxel for voxel", "[resample][itk]") {
    TempDir dir;
    // Moving: 5 x 4 x 3 voxels of 1 x 0.5 x 2 mm from the origin; reference 32 x 24 x 16 of
    // 0.25 x 0.25 x 0.5 mm around it, reaching beyond it on every side.
    const auto moving_grid = dyadic_grid<3>({5, 4, 3}, {1.0, 0.5, 2.0}, {0.0, 0.0, 0.0});
    const auto reference_grid = dyadic_grid<3>({32, 24, 16}, {0.25, 0.25, 0.5}, {-1.75, -2.0, -2.5});
    const fs::path reference_file = dir / "reference.nii.gz";
    write_itk(make_image<Image3F>(reference_grid, [](const itk::Index<3>&) { return 0.0f; }).GetPointer(), reference_file);
    const fs::path float_file = dir / "float.nii.gz", short_file = dir / "short.nii.gz", byte_file = dir / "byte.nii.gz";
    write_itk(make_image<Image3F>(moving_grid,
                                  [](const itk::Index<3>& i) { return static_cast<float>((i[0] * 7 + i[1] * 13 + i[2] * 29) % 31 * 1.5 - 20); })
                  .GetPointer(),
              float_file);
    write_itk(make_image<Image3S>(moving_grid,
                                  [](const itk::Index<3>& i) { return static_cast<short>((i[0] * 37 + i[1] * 101 + i[2] * 211) % 2000 - 1000); })
                  .GetPointer(),
              short_file);
    write_itk(make_image<Image3U>(moving_grid,
                                  [](const itk::Index<3>& i) { return static_cast<unsigned char>((i[0] * 7 + i[1] * 13 + i[2] * 29) % 200 + 20); })
                  .GetPointer(),
              byte_file);

    itk::Point<double, 3> centre;
    centre[0] = 2.0, centre[1] = 0.75, centre[2] = 2.0;  // the moving volume's centre
    auto turn = itk::AffineTransform<double, 3>::New();  // axes permuted with a sign: exact quarter turns
    itk::Matrix<double, 3, 3> m;
    m.Fill(0);
    m(0, 2) = 1, m(1, 0) = 1, m(2, 1) = -1;
    turn->SetCenter(centre);
    turn->SetMatrix(m);
    itk::Vector<double, 3> t;
    t[0] = 0.25, t[1] = -0.5, t[2] = 0.75;
    turn->SetTranslation(t);
    write_transform(turn.GetPointer(), dir / "turn.tfm");
    auto shift = itk::AffineTransform<double, 3>::New();
    t[0] = -0.5, t[1] = 0.125, t[2] = 1.0;
    shift->SetTranslation(t);
    write_transform(shift.GetPointer(), dir / "shift.tfm");

    for (const std::string name : {"turn", "shift"}) {
        const fs::path file = dir / (name + ".tfm");
        const auto oracle = read_transform<3>(file);
        const std::vector<std::string> transforms{file.string()};
        const auto expect_edges = [](const ItkRuleCheck& check, bool ties) {
            CHECK(check.near_excluded == 0);
            CHECK(check.on_low_edge > 0);
            CHECK(check.on_high_edge > 0);
            if (ties) CHECK(check.ties > 0);
        };
        {
            const std::string label = "3-D float " + name + " linear";
            INFO(label);
            const double tolerance = 1e-6 * largest_magnitude(read_itk<Image3F>(float_file).GetPointer());
            const auto check = check_itk_rule<Image3F>(float_file, reference_file, transforms, oracle.GetPointer(), "linear", -7.25,
                                                       tolerance, 1e-9, {}, dir / (name + "_float_linear.nii.gz"));
            require_agreement(check, label);
            expect_edges(check, false);
        }
        {
            // An integer volume sampled into float, as antsApplyTransforms computes; ITK resamples
            // the same values read as float.
            const std::string label = "3-D int16 as float " + name + " linear";
            INFO(label);
            const double tolerance = 1e-6 * largest_magnitude(read_itk<Image3F>(short_file).GetPointer());
            const auto check = check_itk_rule<Image3F>(short_file, reference_file, transforms, oracle.GetPointer(), "linear", -7.25,
                                                       tolerance, 1e-9, {"--output-type", "float"}, dir / (name + "_short_linear.nii.gz"));
            require_agreement(check, label);
            expect_edges(check, false);
        }
        for (const auto& [type, file_in] : std::vector<std::pair<std::string, fs::path>>{{"float", float_file}, {"int16", short_file}, {"uint8", byte_file}}) {
            const std::string label = "3-D " + type + " " + name + " nearest";
            INFO(label);
            const fs::path out = dir / (name + "_" + type + "_nearest.nii.gz");
            ItkRuleCheck check;
            if (type == "float") {
                check = check_itk_rule<Image3F>(file_in, reference_file, transforms, oracle.GetPointer(), "nearest", -7.25, 0.0, 1e-9, {}, out);
            } else if (type == "int16") {
                check = check_itk_rule<Image3S>(file_in, reference_file, transforms, oracle.GetPointer(), "nearest", -7, 0.0, 1e-9, {}, out);
            } else {
                check = check_itk_rule<Image3U>(file_in, reference_file, transforms, oracle.GetPointer(), "nearest", 250, 0.0, 1e-9, {}, out);
            }
            require_agreement(check, label);
            expect_edges(check, true);
        }
    }
}

TEST_CASE("resample --padding itk: oblique grids, rotations and a displacement field agree with ITK", "[resample][itk]") {
    TempDir dir;
    // 2-D: an oblique moving image, a rotation and a shift that push a third of it outside.
    GridSpec<2> moving2;
    moving2.size = {24, 20};
    moving2.spacing = {0.8, 1.1};
    moving2.origin = {10.5, -7.25};
    moving2.direction = rotation2(0.35);
    const itk::Point<double, 2> centre2 = grid_centre(moving2);
    GridSpec<2> reference2;
    reference2.size = {30, 26};
    reference2.spacing = {0.9, 1.0};
    reference2.direction = rotation2(-0.2, /*flip_last=*/true);
    centre_grid(reference2, centre2);
    const fs::path moving2_file = dir / "moving2.mha", reference2_file = dir / "reference2.mha";
    write_itk(make_image<Image2F>(moving2,
                                  [](const itk::Index<2>& i) {
                                      return static_cast<float>(30 * std::sin(0.27 * i[0]) * std::cos(0.19 * i[1]) + 0.5 * i[1] + 4);
                                  })
                  .GetPointer(),
              moving2_file);
    write_itk(make_image<Image2F>(reference2, [](const itk::Index<2>&) { return 0.0f; }).GetPointer(), reference2_file);
    auto euler2 = itk::Euler2DTransform<double>::New();
    euler2->SetCenter(centre2);
    euler2->SetAngle(0.5);
    itk::Vector<double, 2> t2;
    t2[0] = 6.3, t2[1] = -4.1;
    euler2->SetTranslation(t2);
    write_transform(euler2.GetPointer(), dir / "euler2.tfm");
    const auto oracle2 = read_transform<2>(dir / "euler2.tfm");
    // Linear: float32 arithmetic against ITK's double, and positions within 1e-6 voxel of a whole
    // voxel snapped to it (docs/resample.md): 1e-5 of the largest value covers both.
    for (const std::string mode : {"linear", "nearest"}) {
        const std::string label = "oblique 2-D " + mode;
        INFO(label);
        const double tolerance = mode == "nearest" ? 0.0 : 1e-5 * largest_magnitude(read_itk<Image2F>(moving2_file).GetPointer());
        const auto check = check_itk_rule<Image2F>(moving2_file, reference2_file, {(dir / "euler2.tfm").string()}, oracle2.GetPointer(), mode,
                                                   -3.0, tolerance, 1e-9, {}, dir / ("oblique2_" + mode + ".nii.gz"));
        require_agreement(check, label);
        CHECK(check.outside > check.voxels / 10);
        CHECK(check.near_excluded <= 2);
    }

    // 3-D: an oblique, anisotropic, mirrored moving volume; an Euler rotation with a shift, alone and
    // after a displacement field (ITK's per-point path).
    GridSpec<3> moving3;
    moving3.size = {20, 18, 14};
    moving3.spacing = {1.1, 0.9, 1.4};
    moving3.origin = {-20.5, 13.25, 7.75};
    moving3.direction = rotation3(0.3, -0.2, 0.25, /*flip_last=*/true);
    const itk::Point<double, 3> centre3 = grid_centre(moving3);
    GridSpec<3> reference3;
    reference3.size = {24, 22, 18};
    reference3.spacing = {1.2, 1.0, 1.1};
    reference3.direction = rotation3(-0.15, 0.1, -0.35);
    centre_grid(reference3, centre3);
    const fs::path moving3_file = dir / "moving3.mha", reference3_file = dir / "reference3.mha";
    write_itk(make_image<Image3F>(moving3, smooth3).GetPointer(), moving3_file);
    write_itk(make_image<Image3F>(reference3, [](const itk::Index<3>&) { return 0.0f; }).GetPointer(), reference3_file);
    auto euler3 = itk::Euler3DTransform<double>::New();
    euler3->SetCenter(centre3);
    euler3->SetRotation(0.2, -0.15, 0.3);
    itk::Vector<double, 3> t3;
    t3[0] = 4.0, t3[1] = -3.0, t3[2] = 2.5;
    euler3->SetTranslation(t3);
    write_transform(euler3.GetPointer(), dir / "euler3.tfm");
    const fs::path field = write_field3(dir, centre3, "field3.nii.gz");
    const auto euler_oracle = read_transform<3>(dir / "euler3.tfm");
    const auto field_oracle = ants_chain<3>({euler_oracle, read_field_transform<3>(field)});
    const double largest = largest_magnitude(read_itk<Image3F>(moving3_file).GetPointer());
    struct Chain {
        std::string name;
        std::vector<std::string> transforms;
        const TransformD<3>* oracle;
        double near, linear_tolerance;
    };
    // The field is interpolated by each tool in its own arithmetic: positions agree to ~1e-7
    // voxel there, so the hair around edges and ties is wider and linear values agree to 1e-4.
    const std::vector<Chain> chains{
        {"euler", {(dir / "euler3.tfm").string()}, euler_oracle.GetPointer(), 1e-9, 1e-5 * largest},
        {"field_then_euler", {(dir / "euler3.tfm").string(), field.string()}, field_oracle.GetPointer(), 1e-5, 1e-4 * largest},
    };
    for (const auto& chain : chains) {
        for (const std::string mode : {"linear", "nearest"}) {
            const std::string label = "oblique 3-D " + chain.name + " " + mode;
            INFO(label);
            const auto check = check_itk_rule<Image3F>(moving3_file, reference3_file, chain.transforms, chain.oracle, mode, -3.0,
                                                       mode == "nearest" ? 0.0 : chain.linear_tolerance, chain.near, {},
                                                       dir / ("oblique3_" + chain.name + mode + ".nii.gz"));
            require_agreement(check, label);
            CHECK(check.outside > check.voxels / 10);
            CHECK(check.near_excluded <= check.voxels / 1000);
        }
    }
}

TEST_CASE("resample --padding itk: refused with cubic and outside resample, in one line", "[resample][errors]") {
    TempDir dir;
    const fs::path moving = dir / "moving.nii.gz";
    write_itk(make_image<Image3F>(dyadic_grid<3>({4, 3, 2}, {1, 1, 1}, {0, 0, 0}), [](const itk::Index<3>& i) { return static_cast<float>(i[0]); })
                  .GetPointer(),
              moving);
    const fs::path out = dir / "out.nii.gz";
    auto cubic = resample_args(moving, out, {}, {}, "cubic");
    cubic.insert(cubic.end(), {"--padding", "itk"});
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {cubic, "use BSpline[3]"},
        {{"flow", "-i", moving.string(), "-f", moving.string(), "-o", out.string(), "--padding", "itk"}, "only resample"},
        {{"affine", "-i", moving.string(), "-o", out.string(), "--padding", "itk"}, "only resample"},
    };
    for (const auto& [args, expected] : cases) {
        INFO(args[0]);
        const RunResult result = run_gridwarp(args);
        INFO("stderr: " << result.err);
        CHECK(result.status != 0);
        CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
        CHECK(result.err.find("--padding itk") != std::string::npos);
        CHECK(result.err.find(expected) != std::string::npos);
        CHECK_FALSE(fs::exists(out));
    }
}
