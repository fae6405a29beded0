// The ITK peer of bench_fields.py: what an ITK program (antsApplyTransforms, ANTs' scripts) does
// with displacement fields, file in, file out, as the gridwarp commands it is timed against:
//   compose:  TransformToDisplacementFieldFilter of a CompositeTransform (the field acting first on
//             points, then the affine: gridwarp convert-transform -t FIELD -t AFFINE) on the
//             reference's grid, written as float32 vectors;
//   invert:   InvertDisplacementFieldImageFilter on the field's grid (double precision, written as
//             float32), iterated until its largest error is at most MAX_ERROR voxels, or ITERATIONS;
//   jacobian: DisplacementFieldJacobianDeterminantFilter with the image spacing, float32.
// ITK's default thread pool is limited to THREADS.
//   itk_field_peer compose FIELD AFFINE.tfm REFERENCE OUTPUT THREADS
//   itk_field_peer invert FIELD OUTPUT THREADS ITERATIONS MAX_ERROR
//   itk_field_peer jacobian FIELD OUTPUT THREADS
#include <itkCastImageFilter.h>
#include <itkCompositeTransform.h>
#include <itkDisplacementFieldJacobianDeterminantFilter.h>
#include <itkDisplacementFieldTransform.h>
#include <itkImage.h>
#include <itkImageFileReader.h>
#include <itkImageFileWriter.h>
#include <itkImageIOBase.h>
#include <itkImageIOFactory.h>
#include <itkInvertDisplacementFieldImageFilter.h>
#include <itkMultiThreaderBase.h>
#include <itkNiftiImageIOFactory.h>
#include <itkTransformFileReader.h>
#include <itkTransformToDisplacementFieldFilter.h>
#include <itkTxtTransformIOFactory.h>
#include <itkVector.h>

#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

namespace {

constexpr unsigned kDimension = 3;
using FloatField = itk::Image<itk::Vector<float, kDimension>, kDimension>;
using DoubleField = itk::Image<itk::Vector<double, kDimension>, kDimension>;

template <class Image>
typename Image::Pointer read(const std::string& file) {
    auto reader = itk::ImageFileReader<Image>::New();
    reader->SetFileName(file);
    reader->Update();
    return reader->GetOutput();
}

template <class Image>
void write(const Image* image, const std::string& file) {
    auto writer = itk::ImageFileWriter<Image>::New();
    writer->SetInput(image);
    writer->SetFileName(file);
    writer->SetUseCompression(true);  // only .nii.gz names are compressed
    writer->Update();
}

int compose(const std::string& field_file, const std::string& affine_file, const std::string& reference_file, const std::string& output) {
    auto field = itk::DisplacementFieldTransform<double, kDimension>::New();
    field->SetDisplacementField(read<DoubleField>(field_file));

    auto transforms = itk::TransformFileReaderTemplate<double>::New();
    transforms->SetFileName(affine_file);
    transforms->Update();
    auto* affine = dynamic_cast<itk::Transform<double, kDimension, kDimension>*>(transforms->GetTransformList()->front().GetPointer());
    if (!affine) throw std::runtime_error(affine_file + ": not a 3-D transform");

    // A composite applies the transform added last first.
    auto chain = itk::CompositeTransform<double, kDimension>::New();
    chain->AddTransform(affine);
    chain->AddTransform(field);

    // The reference's grid from its header alone, as gridwarp reads it: its voxels are not needed.
    auto io = itk::ImageIOFactory::CreateImageIO(reference_file.c_str(), itk::ImageIOFactory::IOFileModeEnum::ReadMode);
    if (!io) throw std::runtime_error(reference_file + ": no reader");
    io->SetFileName(reference_file);
    io->ReadImageInformation();
    FloatField::SizeType size;
    FloatField::SpacingType spacing;
    FloatField::PointType origin;
    FloatField::DirectionType direction;
    for (unsigned i = 0; i < kDimension; ++i) {
        size[i] = io->GetDimensions(i);
        spacing[i] = io->GetSpacing(i);
        origin[i] = io->GetOrigin(i);
        for (unsigned j = 0; j < kDimension; ++j) direction[j][i] = io->GetDirection(i)[j];
    }
    auto filter = itk::TransformToDisplacementFieldFilter<FloatField, double>::New();
    filter->SetTransform(chain);
    filter->SetSize(size);
    filter->SetOutputSpacing(spacing);
    filter->SetOutputOrigin(origin);
    filter->SetOutputDirection(direction);
    write(filter->GetOutput(), output);
    return 0;
}

int invert(const std::string& field_file, const std::string& output, unsigned iterations, double max_error_voxels) {
    auto filter = itk::InvertDisplacementFieldImageFilter<DoubleField>::New();
    filter->SetInput(read<DoubleField>(field_file));
    filter->SetMaximumNumberOfIterations(iterations);
    filter->SetMaxErrorToleranceThreshold(max_error_voxels);
    filter->SetMeanErrorToleranceThreshold(0.0);  // the largest error decides when to stop
    auto to_float = itk::CastImageFilter<DoubleField, FloatField>::New();
    to_float->SetInput(filter->GetOutput());
    write(to_float->GetOutput(), output);
    std::cerr << "itk_field_peer invert: last max error " << filter->GetMaxErrorNorm() << " voxels, mean " << filter->GetMeanErrorNorm()
              << "\n";
    return 0;
}

int jacobian(const std::string& field_file, const std::string& output) {
    using Determinants = itk::Image<float, kDimension>;
    auto filter = itk::DisplacementFieldJacobianDeterminantFilter<FloatField, float, Determinants>::New();
    filter->SetInput(read<FloatField>(field_file));
    filter->SetUseImageSpacingOn();
    write(filter->GetOutput(), output);
    return 0;
}

int usage() {
    std::cerr << "usage: itk_field_peer compose FIELD AFFINE.tfm REFERENCE OUTPUT THREADS\n"
                 "       itk_field_peer invert FIELD OUTPUT THREADS ITERATIONS MAX_ERROR_VOXELS\n"
                 "       itk_field_peer jacobian FIELD OUTPUT THREADS\n";
    return 2;
}

void limit_threads(const char* threads) { itk::MultiThreaderBase::SetGlobalDefaultNumberOfThreads(std::atoi(threads)); }

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage();
    const std::string command = argv[1];
    itk::NiftiImageIOFactory::RegisterOneFactory();
    itk::TxtTransformIOFactory::RegisterOneFactory();
    try {
        if (command == "compose" && argc == 7) {
            limit_threads(argv[6]);
            return compose(argv[2], argv[3], argv[4], argv[5]);
        }
        if (command == "invert" && argc == 7) {
            limit_threads(argv[4]);
            return invert(argv[2], argv[3], static_cast<unsigned>(std::atoi(argv[5])), std::atof(argv[6]));
        }
        if (command == "jacobian" && argc == 5) {
            limit_threads(argv[4]);
            return jacobian(argv[2], argv[3]);
        }
    } catch (const std::exception& e) {
        std::cerr << "itk_field_peer " << command << ": " << e.what() << "\n";
        return 1;
    }
    return usage();
}
