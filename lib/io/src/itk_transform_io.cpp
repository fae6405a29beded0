// ITK transform files (.tfm, .txt, .mat, .h5): linear transforms, translations and composites of
// them, as affine steps. Part of the ITK module (backends.hpp).
#include <itkCompositeTransform.h>
#include <itkHDF5TransformIOFactory.h>
#include <itkMatlabTransformIOFactory.h>
#include <itkMatrixOffsetTransformBase.h>
#include <itkTransformFactoryBase.h>
#include <itkTransformFileReader.h>
#include <itkTranslationTransform.h>
#include <itkTxtTransformIOFactory.h>

#include <algorithm>
#include <mutex>

#include "formats.hpp"
#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

void register_itk_transforms() {
    static std::once_flag once;
    std::call_once(once, [] {
        itk::TransformFactoryBase::RegisterDefaultTransforms();
        itk::TxtTransformIOFactory::RegisterOneFactory();
        itk::MatlabTransformIOFactory::RegisterOneFactory();
        itk::HDF5TransformIOFactory::RegisterOneFactory();
    });
}

PointTransform affine_step(AffineMap map) {
    PointTransform step;
    step.affine = std::make_shared<const AffineMap>(std::move(map));
    return step;
}

template <unsigned D>
bool append_itk_transform(const itk::TransformBaseTemplate<double>* transform, std::vector<PointTransform>& steps) {
    if (const auto* composite = dynamic_cast<const itk::CompositeTransform<double, D>*>(transform)) {
        for (unsigned i = 0; i < composite->GetNumberOfTransforms(); ++i) {
            if (!append_itk_transform<D>(composite->GetNthTransformConstPointer(i), steps)) return false;
        }
        return true;
    }
    AffineMap map = AffineMap::identity(D);
    if (const auto* linear = dynamic_cast<const itk::MatrixOffsetTransformBase<double, D, D>*>(transform)) {
        const auto& matrix = linear->GetMatrix();
        const auto& offset = linear->GetOffset();
        for (unsigned i = 0; i < D; ++i) {
            for (unsigned j = 0; j < D; ++j) map.matrix[i * D + j] = matrix(i, j);
            map.offset[i] = offset[i];
        }
    } else if (const auto* translation = dynamic_cast<const itk::TranslationTransform<double, D>*>(transform)) {
        const auto& offset = translation->GetOffset();
        for (unsigned i = 0; i < D; ++i) map.offset[i] = offset[i];
    } else {
        return false;
    }
    steps.push_back(affine_step(std::move(map)));
    return true;
}

}  // namespace

std::vector<PointTransform> read_itk_transform(const fs::path& file, std::size_t dimension) {
    register_itk_transforms();
    std::vector<PointTransform> steps;
    try {
        auto reader = itk::TransformFileReaderTemplate<double>::New();
        reader->SetFileName(file.string());
        reader->Update();
        for (const auto& transform : *reader->GetTransformList()) {
            const unsigned input_dimension = transform->GetInputSpaceDimension();
            if (input_dimension != dimension || transform->GetOutputSpaceDimension() != dimension) {
                throw FileError(file, "a " + std::to_string(input_dimension) + "-D " + transform->GetTransformTypeAsString() +
                                          " cannot map " + std::to_string(dimension) + "-D images");
            }
            const bool known = dimension == 2 ? append_itk_transform<2>(transform.GetPointer(), steps)
                                              : append_itk_transform<3>(transform.GetPointer(), steps);
            if (!known) {
                throw FileError(file, "unsupported transform type " + transform->GetTransformTypeAsString() +
                                          " (gridwarp reads linear ITK transforms, translations, composites of them, "
                                          "and displacement field images)");
            }
        }
    } catch (const itk::ExceptionObject& e) {
        std::string message = e.GetDescription();
        message.erase(std::remove(message.begin(), message.end(), '\n'), message.end());
        throw FileError(file, "cannot read the transform: " + message);
    }
    if (steps.empty()) throw FileError(file, "the file holds no transform");
    return steps;
}

}  // namespace gridwarp::io::detail
