// Volumes through ITK's ImageIO layer: NIfTI, NRRD and MetaImage, every scalar component type,
// vector pixels and 4-D series as channels, and the physical geometry.
#include <itkImageIOBase.h>
#include <itkImageIOFactory.h>
#include <itkMetaImageIOFactory.h>
#include <itkNiftiImageIOFactory.h>
#include <itkNrrdImageIOFactory.h>


#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>

#include "formats/raster_pixels.hpp"
#include "gridwarp/io/error.hpp"
#include "modules/module_functions.hpp"
#include "names.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

void register_itk_formats() {
    static std::once_flag once;
    std::call_once(once, [] {
        itk::NiftiImageIOFactory::RegisterOneFactory();
        itk::NrrdImageIOFactory::RegisterOneFactory();
        itk::MetaImageIOFactory::RegisterOneFactory();
    });
}

std::string format_name(const fs::path& file) {
    std::string name = file.filename().string();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    auto ends_with = [&](const std::string& suffix) {
        return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends_with(".nii") || ends_with(".nii.gz")) return "nifti";
    if (ends_with(".nrrd") || ends_with(".nhdr")) return "nrrd";
    return "metaimage";
}

DType dtype_for_component(itk::IOComponentEnum component, const fs::path& file) {
    using C = itk::IOComponentEnum;
    switch (component) {
        case C::UCHAR: return DType::UInt8;
        case C::CHAR: return DType::Int8;
        case C::USHORT: return DType::UInt16;
        case C::SHORT: return DType::Int16;
        case C::UINT: return DType::UInt32;
        case C::INT: return DType::Int32;
        case C::ULONG: return sizeof(unsigned long) == 8 ? DType::UInt64 : DType::UInt32;
        case C::LONG: return sizeof(long) == 8 ? DType::Int64 : DType::Int32;
        case C::ULONGLONG: return DType::UInt64;
        case C::LONGLONG: return DType::Int64;
        case C::FLOAT: return DType::Float32;
        case C::DOUBLE: return DType::Float64;
        default:
            throw FileError(file, "unsupported voxel component type '" +
                                      itk::ImageIOBase::GetComponentTypeAsString(component) + "'");
    }
}

itk::IOComponentEnum component_for_dtype(DType type, const fs::path& file) {
    using C = itk::IOComponentEnum;
    switch (type) {
        case DType::UInt8: return C::UCHAR;
        case DType::Int8: return C::CHAR;
        case DType::UInt16: return C::USHORT;
        case DType::Int16: return C::SHORT;
        case DType::UInt32: return C::UINT;
        case DType::Int32: return C::INT;
        case DType::UInt64: return C::ULONGLONG;
        case DType::Int64: return C::LONGLONG;
        case DType::Float32: return C::FLOAT;
        case DType::Float64: return C::DOUBLE;
        default:
            throw FileError(file, "volume formats cannot hold " + std::string(dtype_name(type)) +
                                      " voxels (write .npy, or convert to a numeric type)");
    }
}

}  // namespace

Image read_volume(const fs::path& file, bool with_pixels) {
    register_itk_formats();
    Image image;
    try {
        itk::ImageIOBase::Pointer io =
            itk::ImageIOFactory::CreateImageIO(file.string().c_str(), itk::ImageIOFactory::IOFileModeEnum::ReadMode);
        if (!io) throw FileError(file, "not a readable NIfTI, NRRD or MetaImage file (corrupt, or the wrong format)");
        io->SetFileName(file.string());
        io->ReadImageInformation();

        const unsigned dimensions = io->GetNumberOfDimensions();
        const auto components = static_cast<std::int64_t>(io->GetNumberOfComponents());
        if (dimensions < 2 || dimensions > 4) {
            throw FileError(file, "expected a 2-D, 3-D or 4-D image, got " + std::to_string(dimensions) + " dimensions");
        }
        if (dimensions == 4 && components > 1) {
            throw FileError(file, "4-D images with multi-component voxels are not supported");
        }
        const unsigned spatial_dimensions = std::min(dimensions, 3u);
        std::vector<std::int64_t> sizes(dimensions);  // innermost first
        for (unsigned i = 0; i < dimensions; ++i) sizes[i] = static_cast<std::int64_t>(io->GetDimensions(i));

        image.kind = FileKind::Volume;
        image.format = format_name(file);
        image.batch = 1;
        // A 4-D series becomes channels (a volume per channel); vector voxels interleave theirs.
        image.channels = dimensions == 4 ? sizes[3] : components;
        image.layout = dimensions == 4 ? ChannelLayout::Planar : ChannelLayout::Interleaved;
        for (unsigned i = spatial_dimensions; i-- > 0;) image.spatial.push_back(sizes[i]);

        Geometry geometry;
        for (unsigned i = 0; i < spatial_dimensions; ++i) {
            geometry.spacing.push_back(io->GetSpacing(i));
            geometry.origin.push_back(io->GetOrigin(i));
        }
        geometry.direction.assign(spatial_dimensions * spatial_dimensions, 0.0);
        for (unsigned j = 0; j < spatial_dimensions; ++j) {
            const std::vector<double> column = io->GetDirection(j);
            for (unsigned i = 0; i < spatial_dimensions; ++i) geometry.direction[i * spatial_dimensions + j] = column.at(i);
        }
        image.geometry = geometry;

        const DType dtype = dtype_for_component(io->GetComponentType(), file);
        const Shape storage_shape = image.storage_shape();
        if (!with_pixels) {
            image.pixels = Tensor(dtype, Shape(storage_shape.size(), 0));
            return image;
        }
        image.pixels = Tensor(dtype, storage_shape);
        if (static_cast<std::size_t>(io->GetImageSizeInBytes()) != image.pixels.nbytes()) {
            throw FileError(file, "the header describes " + std::to_string(io->GetImageSizeInBytes()) +
                                      " bytes of voxels, expected " + std::to_string(image.pixels.nbytes()));
        }
        itk::ImageIORegion region(dimensions);
        for (unsigned i = 0; i < dimensions; ++i) {
            region.SetIndex(i, 0);
            region.SetSize(i, static_cast<itk::SizeValueType>(sizes[i]));
        }
        io->SetIORegion(region);
        io->Read(image.pixels.data());
    } catch (const itk::ExceptionObject& e) {
        std::string message = e.GetDescription();
        message.erase(std::remove(message.begin(), message.end(), '\n'), message.end());
        throw FileError(file, "cannot read the volume: " + message);
    }
    return image;
}

void write_volume(const StagedFile& staged, const Image& image) {
    register_itk_formats();
    if (image.batch != 1) {
        throw FileError(staged.target, "a volume file holds one image, got N=" + std::to_string(image.batch) + " (write .npy)");
    }
    const auto spatial_dimensions = static_cast<unsigned>(image.spatial.size());
    if (spatial_dimensions < 2 || spatial_dimensions > 3) {
        throw FileError(staged.target, "volume files hold 2-D or 3-D images, got size " + image_size_text(image.spatial));
    }
    const auto component = component_for_dtype(image.dtype(), staged.target);
    // Several channels of a volume are written as the input had them: vector voxels, or a 4-D series.
    const bool series = image.layout == ChannelLayout::Planar && image.channels > 1 && spatial_dimensions == 3;
    const unsigned dimensions = series ? 4 : spatial_dimensions;
    const Geometry geometry = image.geometry ? *image.geometry : Geometry::identity(spatial_dimensions);
    if (geometry.dimension() != spatial_dimensions) {
        throw FileError(staged.target, "geometry of dimension " + std::to_string(geometry.dimension()) + " for a " +
                                    std::to_string(spatial_dimensions) + "-D image");
    }
    Tensor scratch;
    const void* data = pixels_in_layout(image, series ? ChannelLayout::Planar : ChannelLayout::Interleaved, scratch);
    try {
        itk::ImageIOBase::Pointer io =
            itk::ImageIOFactory::CreateImageIO(staged.file.string().c_str(), itk::ImageIOFactory::IOFileModeEnum::WriteMode);
        if (!io) throw FileError(staged.target, "no volume writer for this extension");
        io->SetNumberOfDimensions(dimensions);
        for (unsigned i = 0; i < dimensions; ++i) {
            const bool spatial = i < spatial_dimensions;
            io->SetDimensions(i, static_cast<itk::SizeValueType>(spatial ? image.spatial[spatial_dimensions - 1 - i] : image.channels));
            io->SetSpacing(i, spatial ? geometry.spacing[i] : 1.0);
            io->SetOrigin(i, spatial ? geometry.origin[i] : 0.0);
            std::vector<double> column(dimensions, 0.0);
            for (unsigned r = 0; r < dimensions; ++r) {
                column[r] = (spatial && r < spatial_dimensions) ? geometry.direction[r * spatial_dimensions + i] : (r == i ? 1.0 : 0.0);
            }
            io->SetDirection(i, column);
        }
        io->SetComponentType(component);
        const unsigned components = series ? 1u : static_cast<unsigned>(image.channels);
        io->SetNumberOfComponents(components);
        io->SetPixelType(components > 1 ? itk::IOPixelEnum::VECTOR : itk::IOPixelEnum::SCALAR);
        io->SetFileName(staged.file.string());
        io->SetUseCompression(true);
        itk::ImageIORegion region(dimensions);
        for (unsigned i = 0; i < dimensions; ++i) {
            region.SetIndex(i, 0);
            region.SetSize(i, io->GetDimensions(i));
        }
        io->SetIORegion(region);
        io->WriteImageInformation();
        io->Write(data);
    } catch (const itk::ExceptionObject& e) {
        std::string message = e.GetDescription();
        message.erase(std::remove(message.begin(), message.end(), '\n'), message.end());
        throw FileError(staged.target, "cannot write the volume: " + message);
    }
}

}  // namespace gridwarp::io::detail
