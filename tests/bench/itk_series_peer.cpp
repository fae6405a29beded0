// The ITK peer of bench_end_to_end's 4-D workload: what antsApplyTransforms -e 3 does with a time
// series, written as an ITK user would: each volume extracted, resampled onto the reference's grid by
// one transform (linear), and copied into the 4-D output, which keeps the series' time spacing. int16
// in and out; ITK's default thread pool limited to THREADS.
//   itk_series_peer INPUT REFERENCE OUTPUT TRANSFORM.tfm THREADS
#include <itkExtractImageFilter.h>
#include <itkImage.h>
#include <itkImageFileReader.h>
#include <itkImageFileWriter.h>
#include <itkLinearInterpolateImageFunction.h>
#include <itkMultiThreaderBase.h>
#include <itkNiftiImageIOFactory.h>
#include <itkResampleImageFilter.h>
#include <itkTransformFileReader.h>
#include <itkTxtTransformIOFactory.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
    if (argc != 6) {
        std::cerr << "usage: itk_series_peer INPUT REFERENCE OUTPUT TRANSFORM THREADS\n";
        return 2;
    }
    itk::MultiThreaderBase::SetGlobalDefaultNumberOfThreads(std::atoi(argv[5]));
    itk::NiftiImageIOFactory::RegisterOneFactory();
    itk::TxtTransformIOFactory::RegisterOneFactory();
    using Series = itk::Image<short, 4>;
    using Volume = itk::Image<short, 3>;
    try {
        auto series_reader = itk::ImageFileReader<Series>::New();
        series_reader->SetFileName(argv[1]);
        series_reader->Update();
        const Series::Pointer series = series_reader->GetOutput();
        auto reference_reader = itk::ImageFileReader<Volume>::New();
        reference_reader->SetFileName(argv[2]);
        reference_reader->UpdateOutputInformation();
        const Volume* reference = reference_reader->GetOutput();
        auto transforms = itk::TransformFileReaderTemplate<double>::New();
        transforms->SetFileName(argv[4]);
        transforms->Update();
        auto* transform = dynamic_cast<itk::Transform<double, 3, 3>*>(transforms->GetTransformList()->front().GetPointer());
        if (!transform) throw std::runtime_error(std::string(argv[4]) + ": not a 3-D transform");

        // The output: the reference's 3-D grid, the series' time axis.
        const auto series_region = series->GetLargestPossibleRegion();
        const auto grid = reference->GetLargestPossibleRegion();
        Series::RegionType region;
        Series::SpacingType spacing;
        Series::PointType origin;
        Series::DirectionType direction;
        direction.SetIdentity();
        for (unsigned i = 0; i < 3; ++i) {
            region.SetSize(i, grid.GetSize(i));
            spacing[i] = reference->GetSpacing()[i];
            origin[i] = reference->GetOrigin()[i];
            for (unsigned j = 0; j < 3; ++j) direction[i][j] = reference->GetDirection()[i][j];
        }
        region.SetSize(3, series_region.GetSize(3));
        spacing[3] = series->GetSpacing()[3];
        origin[3] = series->GetOrigin()[3];
        auto output = Series::New();
        output->SetRegions(region);
        output->SetSpacing(spacing);
        output->SetOrigin(origin);
        output->SetDirection(direction);
        output->Allocate();

        for (itk::IndexValueType t = 0; t < static_cast<itk::IndexValueType>(series_region.GetSize(3)); ++t) {
            auto extract = itk::ExtractImageFilter<Series, Volume>::New();
            Series::RegionType one = series_region;
            one.SetIndex(3, t);
            one.SetSize(3, 0);
            extract->SetInput(series);
            extract->SetExtractionRegion(one);
            extract->SetDirectionCollapseToSubmatrix();
            auto filter = itk::ResampleImageFilter<Volume, Volume>::New();
            filter->SetInput(extract->GetOutput());
            filter->SetTransform(transform);
            filter->SetInterpolator(itk::LinearInterpolateImageFunction<Volume, double>::New());
            filter->SetOutputParametersFromImage(reference);
            filter->SetDefaultPixelValue(0);
            filter->Update();
            const short* from = filter->GetOutput()->GetBufferPointer();
            std::copy(from, from + grid.GetNumberOfPixels(), output->GetBufferPointer() + t * grid.GetNumberOfPixels());
        }
        auto writer = itk::ImageFileWriter<Series>::New();
        writer->SetInput(output);
        writer->SetFileName(argv[3]);
        writer->SetUseCompression(true);
        writer->Update();
    } catch (const std::exception& e) {
        std::cerr << "itk_series_peer: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
