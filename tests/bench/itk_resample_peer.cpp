// The ITK peer of bench_end_to_end: what an ITK user writes to resample a volume by a rigid
// transform onto its own grid. Reads and writes the file type given (int16 stays int16), linear
// interpolation, or with `multilabel` ITK's LabelImageGaussianInterpolateImageFunction as
// antsApplyTransforms -n MultiLabel applies it (sigma the voxel spacing, alpha 4); ITK's default
// thread pool limited to THREADS.
//   itk_resample_peer INPUT OUTPUT TRANSFORM.tfm THREADS [multilabel]
#include <itkEuler3DTransform.h>
#include <itkImage.h>
#include <itkImageFileReader.h>
#include <itkImageFileWriter.h>
#include <itkImageIOBase.h>
#include <itkLabelImageGaussianInterpolateImageFunction.h>
#include <itkLinearInterpolateImageFunction.h>
#include <itkMultiThreaderBase.h>
#include <itkNiftiImageIOFactory.h>
#include <itkResampleImageFilter.h>
#include <itkTransformFileReader.h>
#include <itkTxtTransformIOFactory.h>

#include <cstdlib>
#include <iostream>
#include <string>

template <class TPixel>
int resample(const char* input, const char* output, const char* transform_file, bool multilabel) {
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
    if (multilabel) {
        auto labels = itk::LabelImageGaussianInterpolateImageFunction<Image, double>::New();
        typename itk::LabelImageGaussianInterpolateImageFunction<Image, double>::ArrayType sigma;
        for (unsigned axis = 0; axis < 3; ++axis) sigma[axis] = reader->GetOutput()->GetSpacing()[axis];
        labels->SetSigma(sigma);
        labels->SetAlpha(4.0);
        filter->SetInterpolator(labels);
    } else {
        filter->SetInterpolator(itk::LinearInterpolateImageFunction<Image, double>::New());
    }
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

int main(int argc, char** argv) {
    if (argc != 5 && !(argc == 6 && std::string(argv[5]) == "multilabel")) {
        std::cerr << "usage: itk_resample_peer INPUT OUTPUT TRANSFORM THREADS [multilabel]\n";
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
        if (io->GetComponentType() == itk::IOComponentEnum::SHORT) return resample<short>(argv[1], argv[2], argv[3], argc == 6);
        return resample<float>(argv[1], argv[2], argv[3], argc == 6);
    } catch (const std::exception& e) {
        std::cerr << "itk_resample_peer: " << e.what() << "\n";
        return 1;
    }
}
