// The ITK peer of bench_end_to_end and the oracle of tests/cli/test_ants_interpolators.py: what
// antsApplyTransforms does to resample a volume by a transform onto its own grid, with ITK's
// ResampleImageFilter (default value 0) and the interpolator antsApplyTransforms -n builds for
// the name given (any case; linear by default):
//   linear, nearestneighbor, bspline or bspline[N] (order N = 0..5, default 3),
//   gaussian and multilabel (sigma the voxel spacing, alpha 1 and 4), or gaussian[SIGMA,ALPHA] and
//   multilabel[SIGMA,ALPHA] (SIGMA in mm for every axis; either may be empty for its default),
//   lanczoswindowedsinc, hammingwindowedsinc, cosinewindowedsinc, welchwindowedsinc,
//   blackmanwindowedsinc (radius 3, zero outside the image).
// The file's voxel type is kept: int16 as short, float64 as double, anything else as float.
// ITK's default thread pool is limited to THREADS.
//   itk_resample_peer INPUT OUTPUT TRANSFORM.tfm THREADS [INTERPOLATOR]
#include <itkBSplineInterpolateImageFunction.h>
#include <itkConstantBoundaryCondition.h>
#include <itkGaussianInterpolateImageFunction.h>
#include <itkImage.h>
#include <itkImageFileReader.h>
#include <itkImageFileWriter.h>
#include <itkImageIOBase.h>
#include <itkLabelImageGaussianInterpolateImageFunction.h>
#include <itkLinearInterpolateImageFunction.h>
#include <itkMultiThreaderBase.h>
#include <itkNearestNeighborInterpolateImageFunction.h>
#include <itkNiftiImageIOFactory.h>
#include <itkResampleImageFilter.h>
#include <itkTransformFileReader.h>
#include <itkTxtTransformIOFactory.h>
#include <itkWindowedSincInterpolateImageFunction.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

enum class Kind { linear, nearest_neighbor, bspline, gaussian, multilabel, lanczos, hamming, cosine, welch, blackman };

struct Interpolator {
    Kind kind = Kind::linear;
    unsigned spline_order = 3;
    std::optional<double> sigma;  // gaussian, multilabel: mm on every axis (default the spacing)
    std::optional<double> alpha;  // default 1 (gaussian), 4 (multilabel)
};

// "[SIGMA,ALPHA]" after gaussian or multilabel; false when malformed.
bool parse_sigma_alpha(const std::string& bracket, Interpolator& choice) {
    const std::size_t comma = bracket.find(',');
    const std::string sigma = bracket.substr(0, comma);
    const std::string alpha = comma == std::string::npos ? std::string() : bracket.substr(comma + 1);
    try {
        std::size_t used = 0;
        if (!sigma.empty()) {
            choice.sigma = std::stod(sigma, &used);
            if (used != sigma.size()) return false;
        }
        if (!alpha.empty()) {
            choice.alpha = std::stod(alpha, &used);
            if (used != alpha.size()) return false;
        }
    } catch (const std::exception&) {
        return false;
    }
    return true;
}

std::optional<Interpolator> parse_interpolator(std::string name) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (name == "linear") return Interpolator{Kind::linear};
    if (name == "nearestneighbor") return Interpolator{Kind::nearest_neighbor};
    if (name == "gaussian") return Interpolator{Kind::gaussian};
    if (name == "multilabel") return Interpolator{Kind::multilabel};
    if (name == "lanczoswindowedsinc") return Interpolator{Kind::lanczos};
    if (name == "hammingwindowedsinc") return Interpolator{Kind::hamming};
    if (name == "cosinewindowedsinc") return Interpolator{Kind::cosine};
    if (name == "welchwindowedsinc") return Interpolator{Kind::welch};
    if (name == "blackmanwindowedsinc") return Interpolator{Kind::blackman};
    for (const auto& [prefix, kind] : {std::pair{std::string("gaussian["), Kind::gaussian}, std::pair{std::string("multilabel["), Kind::multilabel}}) {
        if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 && name.back() == ']') {
            Interpolator choice{kind};
            if (!parse_sigma_alpha(name.substr(prefix.size(), name.size() - prefix.size() - 1), choice)) return std::nullopt;
            return choice;
        }
    }
    if (name == "bspline") return Interpolator{Kind::bspline, 3};
    if (name.size() == 10 && name.compare(0, 8, "bspline[") == 0 && name[8] >= '0' && name[8] <= '5' && name[9] == ']')
        return Interpolator{Kind::bspline, static_cast<unsigned>(name[8] - '0')};
    return std::nullopt;
}

template <class Image>
using InterpolatorPointer = typename itk::InterpolateImageFunction<Image, double>::Pointer;

// As antsApplyTransforms declares them: radius 3, zero outside the image, double arithmetic.
template <class Image, template <unsigned, class, class> class Window>
InterpolatorPointer<Image> windowed_sinc() {
    using Sinc = itk::WindowedSincInterpolateImageFunction<Image, 3, Window<3, double, double>,
                                                           itk::ConstantBoundaryCondition<Image>, double>;
    return Sinc::New().GetPointer();
}

template <class Image>
InterpolatorPointer<Image> make_interpolator(const Interpolator& choice, const Image& input) {
    double sigma[3];
    for (unsigned axis = 0; axis < 3; ++axis) sigma[axis] = choice.sigma.value_or(input.GetSpacing()[axis]);
    switch (choice.kind) {
    case Kind::linear: return itk::LinearInterpolateImageFunction<Image, double>::New().GetPointer();
    case Kind::nearest_neighbor: return itk::NearestNeighborInterpolateImageFunction<Image, double>::New().GetPointer();
    case Kind::bspline: {
        auto bspline = itk::BSplineInterpolateImageFunction<Image, double>::New();
        bspline->SetSplineOrder(choice.spline_order);
        return bspline.GetPointer();
    }
    case Kind::gaussian: {
        auto gaussian = itk::GaussianInterpolateImageFunction<Image, double>::New();
        gaussian->SetParameters(sigma, choice.alpha.value_or(1.0));
        return gaussian.GetPointer();
    }
    case Kind::multilabel: {
        auto labels = itk::LabelImageGaussianInterpolateImageFunction<Image, double>::New();
        labels->SetParameters(sigma, choice.alpha.value_or(4.0));
        return labels.GetPointer();
    }
    case Kind::lanczos: return windowed_sinc<Image, itk::Function::LanczosWindowFunction>();
    case Kind::hamming: return windowed_sinc<Image, itk::Function::HammingWindowFunction>();
    case Kind::cosine: return windowed_sinc<Image, itk::Function::CosineWindowFunction>();
    case Kind::welch: return windowed_sinc<Image, itk::Function::WelchWindowFunction>();
    case Kind::blackman: return windowed_sinc<Image, itk::Function::BlackmanWindowFunction>();
    }
    return nullptr;
}

template <class TPixel>
int resample(const char* input, const char* output, const char* transform_file, const Interpolator& choice) {
    using Image = itk::Image<TPixel, 3>;
    auto reader = itk::ImageFileReader<Image>::New();
    reader->SetFileName(input);
    reader->Update();
    auto transforms = itk::TransformFileReaderTemplate<double>::New();
    transforms->SetFileName(transform_file);
    transforms->Update();
    auto* transform = dynamic_cast<itk::Transform<double, 3, 3>*>(transforms->GetTransformList()->front().GetPointer());
    if (!transform) {
        std::cerr << "itk_resample_peer: " << transform_file << ": not a 3-D transform\n";
        return 1;
    }
    auto filter = itk::ResampleImageFilter<Image, Image>::New();
    filter->SetInput(reader->GetOutput());
    filter->SetTransform(transform);
    filter->SetInterpolator(make_interpolator(choice, *reader->GetOutput()));
    filter->SetReferenceImage(reader->GetOutput());
    filter->UseReferenceImageOn();
    filter->SetDefaultPixelValue(0);
    auto writer = itk::ImageFileWriter<Image>::New();
    writer->SetInput(filter->GetOutput());
    writer->SetFileName(output);
    writer->SetUseCompression(true);
    writer->Update();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::optional<Interpolator> choice;
    if (argc == 5) choice = Interpolator{};
    else if (argc == 6) choice = parse_interpolator(argv[5]);
    if (!choice) {
        std::cerr << "usage: itk_resample_peer INPUT OUTPUT TRANSFORM THREADS [INTERPOLATOR]\n"
                     "  INTERPOLATOR: linear (default), nearestneighbor, bspline, bspline[0..5], gaussian[SIGMA,ALPHA], multilabel[SIGMA,ALPHA],\n"
                     "  lanczoswindowedsinc, hammingwindowedsinc, cosinewindowedsinc, welchwindowedsinc, blackmanwindowedsinc\n";
        return 2;
    }
    itk::MultiThreaderBase::SetGlobalDefaultNumberOfThreads(std::atoi(argv[4]));
    itk::NiftiImageIOFactory::RegisterOneFactory();
    itk::TxtTransformIOFactory::RegisterOneFactory();
    try {
        auto io = itk::ImageIOFactory::CreateImageIO(argv[1], itk::ImageIOFactory::IOFileModeEnum::ReadMode);
        if (!io) throw std::runtime_error(std::string(argv[1]) + ": no reader");
        io->SetFileName(argv[1]);
        io->ReadImageInformation();
        switch (io->GetComponentType()) {
        case itk::IOComponentEnum::SHORT: return resample<short>(argv[1], argv[2], argv[3], *choice);
        case itk::IOComponentEnum::DOUBLE: return resample<double>(argv[1], argv[2], argv[3], *choice);
        default: return resample<float>(argv[1], argv[2], argv[3], *choice);
        }
    } catch (const std::exception& e) {
        std::cerr << "itk_resample_peer: " << e.what() << "\n";
        return 1;
    }
}
