// ITK transform files (.tfm, .txt, .mat, .h5): linear transforms, translations, B-spline and
// displacement field transforms and composites of them, as affine and field steps. Part of the ITK module (backends.hpp). Text and Matlab files reach ITK only
// after transform_io.cpp checked them; an HDF5 file's declarations are checked here, before ITK
// builds transforms from them (it allocates whatever a B-spline's fixed parameters declare).
#include <itkBSplineTransform.h>
#include <itkCompositeTransform.h>
#include <itkDisplacementFieldTransform.h>
#include <itkHDF5TransformIOFactory.h>
#include <itkMatlabTransformIOFactory.h>
#include <itkMatrixOffsetTransformBase.h>
#include <itkTransformFactory.h>
#include <itkTransformFactoryBase.h>
#include <itkTransformFileReader.h>
#include <itkTranslationTransform.h>
#include <itkTxtTransformIOFactory.h>

// HDF5's C interface, by its Debian path: ITK's own H5Cpp.h needs an include folder the module is not given.
#include <hdf5/serial/hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

#include "gridwarp/io/error.hpp"
#include "gridwarp/io/transform_io.hpp"
#include "modules/module_functions.hpp"
#include "names.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

void register_itk_transforms() {
    static std::once_flag once;
    std::call_once(once, [] {
        itk::TransformFactoryBase::RegisterDefaultTransforms();
        itk::TransformFactory<itk::DisplacementFieldTransform<double, 2>>::RegisterTransform();
        itk::TransformFactory<itk::DisplacementFieldTransform<double, 3>>::RegisterTransform();
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

// A displacement field transform's field as gridwarp's DisplacementField: the vectors copied into
// a (Z, Y, X, D) float64 tensor that `result` keeps, with the field image's geometry.
template <unsigned D>
void append_displacement_field(const itk::DisplacementFieldTransform<double, D>& transform, TransformFile& result) {
    const auto* field = transform.GetDisplacementField();
    if (field == nullptr) throw std::invalid_argument("a displacement field transform without its field");
    const auto size = field->GetLargestPossibleRegion().GetSize();
    Shape shape;
    for (unsigned i = 0; i < D; ++i) shape.insert(shape.begin(), static_cast<std::int64_t>(size[i]));
    shape.push_back(D);
    auto vectors = std::make_shared<Tensor>(DType::Float64, shape);
    const std::size_t count = field->GetLargestPossibleRegion().GetNumberOfPixels();
    const auto* pixels = field->GetBufferPointer();
    double* out = vectors->template data_as<double>();
    for (std::size_t k = 0; k < count; ++k) {
        for (unsigned c = 0; c < D; ++c) {
            const double value = pixels[k][c];
            if (!std::isfinite(value)) throw std::invalid_argument("the displacement field holds a non-finite value");
            out[k * D + c] = value;
        }
    }
    std::vector<double> spacing(D), origin(D), direction(D * D);
    for (unsigned i = 0; i < D; ++i) {
        spacing[i] = field->GetSpacing()[i];
        origin[i] = field->GetOrigin()[i];
        for (unsigned j = 0; j < D; ++j) direction[i * D + j] = field->GetDirection()(i, j);
    }
    PointTransform step;
    step.field = std::make_shared<const DisplacementField>(std::const_pointer_cast<const Tensor>(vectors)->view(),
                                                           AffineMap::from_geometry(spacing, origin, direction));
    result.steps.push_back(std::move(step));
    result.buffers.push_back(std::move(vectors));
}

template <unsigned D>
bool append_itk_transform(const itk::TransformBaseTemplate<double>* transform, TransformFile& result) {
    if (const auto* composite = dynamic_cast<const itk::CompositeTransform<double, D>*>(transform)) {
        for (unsigned i = 0; i < composite->GetNumberOfTransforms(); ++i) {
            if (!append_itk_transform<D>(composite->GetNthTransformConstPointer(i), result)) return false;
        }
        return true;
    }
    if (const auto* displacement = dynamic_cast<const itk::DisplacementFieldTransform<double, D>*>(transform)) {
        append_displacement_field<D>(*displacement, result);
        return true;
    }
    if (const auto* bspline = dynamic_cast<const itk::BSplineTransform<double, D, 3>*>(transform)) {
        const auto& fixed = bspline->GetFixedParameters();
        const auto& parameters = bspline->GetParameters();
        append_bspline_transform(std::vector<double>(fixed.begin(), fixed.end()), std::vector<double>(parameters.begin(), parameters.end()), D, 3,
                                 result, "the transform file");
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
    result.steps.push_back(affine_step(std::move(map)));
    return true;
}

// An HDF5 handle, closed when it goes out of scope.
class Hdf5Handle {
public:
    Hdf5Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
    ~Hdf5Handle() {
        if (id_ >= 0) close_(id_);
    }
    Hdf5Handle(const Hdf5Handle&) = delete;
    Hdf5Handle& operator=(const Hdf5Handle&) = delete;
    hid_t operator*() const { return id_; }
    bool valid() const { return id_ >= 0; }

private:
    hid_t id_;
    herr_t (*close_)(hid_t);
};

// What the file is made of, before anything is read from it: every link hard (a soft or external
// link can name another file), every dataset's bytes inside the file (no external storage, no
// virtual dataset) and stored (a dataset with no bytes on disk reads as its fill value, as large
// as it declares), and everything the datasets declare within the budget, counted three times for
// the parameters (ITK's list, its field image, gridwarp's copy). docs/reliability.md, "HDF5".
struct Hdf5Census {
    const fs::path& file;
    std::string problem;
    std::uint64_t links = 0;
    std::uint64_t declared_bytes = 0;  // as the datasets' own types
    std::uint64_t parameter_values = 0;
};

constexpr std::uint64_t kMostHdf5Links = 1 << 20;

constexpr std::uint64_t kMostVariableLengthElements = 4096;
constexpr std::uint32_t kMostVariableLengthBytes = 1 << 16;

// A variable-length dataset (ITK's type and version strings) stores per element a sequence length
// (4 bytes, little-endian), then the global heap address of the bytes and their index there.
// libhdf5 allocates that length before it reads, whatever the heap holds, so the lengths are read
// here from the file itself: each at most 64 KiB (ITK's strings are under 100 bytes), their sum
// counted in the budget. Only contiguous storage (as ITK and h5py write strings) can be read so.
std::string variable_length_problem(hid_t set, H5D_layout_t layout, std::uint64_t points, const fs::path& file,
                                    std::uint64_t& lengths) {
    if (layout != H5D_CONTIGUOUS) return " holds variable-length values stored other than contiguously, which ITK never writes";
    if (points > kMostVariableLengthElements) return " holds more than 4096 variable-length values";
    const Hdf5Handle owner(H5Iget_file_id(set), H5Fclose);
    const Hdf5Handle creation(owner.valid() ? H5Fget_create_plist(*owner) : -1, H5Pclose);
    std::size_t address_bytes = 0, size_bytes = 0;
    if (!creation.valid() || H5Pget_sizes(*creation, &address_bytes, &size_bytes) < 0 || address_bytes == 0 || address_bytes > 8) {
        return ": cannot read the file's address size";
    }
    const haddr_t offset = H5Dget_offset(set);
    if (points == 0) return "";
    if (offset == HADDR_UNDEF) return ": variable-length values whose storage cannot be located";
    const std::size_t descriptor = 4 + address_bytes + 4;
    std::string bytes(static_cast<std::size_t>(points) * descriptor, '\0');
    std::ifstream in(file, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!in) return ": its variable-length values lie past the end of the file";
    for (std::uint64_t element = 0; element < points; ++element) {
        const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + element * descriptor;
        const std::uint32_t length = std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
        if (length > kMostVariableLengthBytes) {
            return " declares a variable-length value of " + std::to_string(length) + " bytes (at most 65536 in an ITK transform file)";
        }
        lengths += length;
    }
    return "";
}

herr_t take_census(hid_t root, const char* name, const H5L_info_t* link, void* data) {
    auto& census = *static_cast<Hdf5Census*>(data);
    const std::string where = std::string("/") + name;
    if (++census.links > kMostHdf5Links) {
        census.problem = "more than " + std::to_string(kMostHdf5Links) + " links: not an ITK transform file";
        return 1;
    }
    if (link->type != H5L_TYPE_HARD) {
        census.problem = where + " is " + (link->type == H5L_TYPE_SOFT ? "a soft link" : link->type == H5L_TYPE_EXTERNAL ? "an external link" : "a user-defined link") +
                         "; gridwarp reads only what the file itself holds";
        return 1;
    }
    H5O_info_t object{};
    if (H5Oget_info_by_name2(root, name, &object, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        census.problem = where + ": cannot read the object's header";
        return 1;
    }
    if (object.type != H5O_TYPE_DATASET) return 0;
    const Hdf5Handle set(H5Dopen2(root, name, H5P_DEFAULT), H5Dclose);
    const Hdf5Handle creation(set.valid() ? H5Dget_create_plist(*set) : -1, H5Pclose);
    const Hdf5Handle type(set.valid() ? H5Dget_type(*set) : -1, H5Tclose);
    const Hdf5Handle space(set.valid() ? H5Dget_space(*set) : -1, H5Sclose);
    if (!creation.valid() || !type.valid() || !space.valid()) {
        census.problem = where + ": cannot read the dataset's description";
        return 1;
    }
    if (H5Pget_external_count(*creation) != 0) {
        census.problem = where + " keeps its data in external files; gridwarp reads only what the file itself holds";
        return 1;
    }
    const H5D_layout_t layout = H5Pget_layout(*creation);
    if (layout == H5D_VIRTUAL || layout < 0) {
        census.problem = where + (layout < 0 ? ": an unreadable layout" : " is a virtual dataset; gridwarp reads only what the file itself holds");
        return 1;
    }
    const hssize_t points = H5Sget_simple_extent_npoints(*space);
    const std::size_t element_bytes = H5Tget_size(*type);
    if (points < 0 || element_bytes == 0) {
        census.problem = where + ": an unreadable size";
        return 1;
    }
    const unsigned __int128 bytes = static_cast<unsigned __int128>(points) * element_bytes;
    if (bytes > (std::uint64_t{1} << 62)) {
        census.problem = where + " declares more than 2^62 bytes";
        return 1;
    }
    const hsize_t stored = H5Dget_storage_size(*set);
    if (points > 0 && stored == 0) {
        census.problem = where + " declares " + std::to_string(points) + " values but stores none (it would read as its fill value)";
        return 1;
    }
    // Unfiltered data is stored whole; a shortfall is read as the fill value.
    if (H5Pget_nfilters(*creation) == 0 && H5Tis_variable_str(*type) <= 0 && stored < static_cast<hsize_t>(bytes)) {
        census.problem = where + " stores " + std::to_string(stored) + " of the " + std::to_string(static_cast<std::uint64_t>(bytes)) +
                         " bytes it declares (the rest would read as its fill value)";
        return 1;
    }
    if (H5Tis_variable_str(*type) > 0 || H5Tget_class(*type) == H5T_VLEN) {
        std::uint64_t lengths = 0;
        census.problem = variable_length_problem(*set, layout, static_cast<std::uint64_t>(points), census.file, lengths);
        if (!census.problem.empty()) {
            census.problem = where + census.problem;
            return 1;
        }
        census.declared_bytes += lengths;
    }
    census.declared_bytes += static_cast<std::uint64_t>(bytes);
    if (H5Tget_class(*type) == H5T_FLOAT) census.parameter_values += static_cast<std::uint64_t>(points);
    return 0;
}

void check_hdf5_structure(const fs::path& file, const MemoryBudget& budget) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    H5PLset_loading_state(0);  // a filter the file names never loads a plugin
    const Hdf5Handle h5(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!h5.valid()) throw FileError(file, "not an HDF5 file, or HDF5 cannot open it");
    Hdf5Census census{file, {}, 0, 0, 0};
    const herr_t visited = H5Lvisit(*h5, H5_INDEX_NAME, H5_ITER_NATIVE, take_census, &census);
    if (!census.problem.empty()) throw FileError(file, census.problem);
    if (visited < 0) throw FileError(file, "cannot list the file's objects: a damaged HDF5 file");
    check_memory_budget(file, "its datasets as declared", census.declared_bytes, 1, budget);
    check_memory_budget(file, "reading its " + std::to_string(census.parameter_values) + " parameters (three float64 copies)",
                        census.parameter_values, 3 * sizeof(double), budget);
}

// What an ITK HDF5 transform file declares (/TransformGroup/N: TransformType, TransformParameters,
// TransformFixedParameters, the last two also under the misspelled names ITK once wrote), read
// without reading the parameters themselves: ITK's reader would allocate them, and the transform,
// before anything is checked.
std::vector<ItkTransformDeclaration> hdf5_declarations(const fs::path& file) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // HDF5 prints its error stack on stderr; a FileError is the one report
    auto exists = [](hid_t location, const std::string& path) { return H5Lexists(location, path.c_str(), H5P_DEFAULT) > 0; };
    const Hdf5Handle h5(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!h5.valid()) throw FileError(file, "not an HDF5 file, or HDF5 cannot open it");
    if (!exists(*h5, "/TransformGroup")) throw FileError(file, "not an ITK transform file (no /TransformGroup)");
    const Hdf5Handle group(H5Gopen2(*h5, "/TransformGroup", H5P_DEFAULT), H5Gclose);
    H5G_info_t info{};
    if (!group.valid() || H5Gget_info(*group, &info) < 0) throw FileError(file, "cannot read /TransformGroup");
    std::vector<ItkTransformDeclaration> declarations;
    for (hsize_t i = 0; i < info.nlinks && i <= 65536; ++i) {  // the check refuses more than 65536
        ItkTransformDeclaration declaration;
        declaration.where = "/TransformGroup/" + std::to_string(i);
        const std::string type_path = declaration.where + "/TransformType";
        if (!exists(*h5, declaration.where) || !exists(*h5, type_path)) {
            throw FileError(file, declaration.where + ": expected a transform with a TransformType");
        }
        const Hdf5Handle type_set(H5Dopen2(*h5, type_path.c_str(), H5P_DEFAULT), H5Dclose);
        const Hdf5Handle stored_type(type_set.valid() ? H5Dget_type(*type_set) : -1, H5Tclose);
        const Hdf5Handle type_space(type_set.valid() ? H5Dget_space(*type_set) : -1, H5Sclose);
        if (!stored_type.valid() || !type_space.valid() || H5Tget_class(*stored_type) != H5T_STRING ||
            H5Tis_variable_str(*stored_type) <= 0 || H5Sget_simple_extent_npoints(*type_space) != 1) {
            throw FileError(file, type_path + ": expected one variable-length string");
        }
        const Hdf5Handle text_type(H5Tcopy(H5T_C_S1), H5Tclose);
        char* text = nullptr;
        if (!text_type.valid() || H5Tset_size(*text_type, H5T_VARIABLE) < 0 ||
            H5Dread(*type_set, *text_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text) < 0 || text == nullptr) {
            throw FileError(file, type_path + ": cannot read the transform type");
        }
        declaration.type.assign(text, strnlen(text, 256));
        H5free_memory(text);
        // The length of a parameter list, under either of the names ITK has written.
        auto list_length = [&](const char* name, const char* misspelled, bool& present) -> std::size_t {
            const std::string path = declaration.where + (exists(*h5, declaration.where + name) ? name : misspelled);
            present = exists(*h5, path);
            if (!present) return 0;
            const Hdf5Handle set(H5Dopen2(*h5, path.c_str(), H5P_DEFAULT), H5Dclose);
            const Hdf5Handle stored(set.valid() ? H5Dget_type(*set) : -1, H5Tclose);
            const Hdf5Handle space(set.valid() ? H5Dget_space(*set) : -1, H5Sclose);
            hsize_t length = 0;
            if (!stored.valid() || !space.valid() || H5Tget_class(*stored) != H5T_FLOAT ||
                H5Sget_simple_extent_ndims(*space) != 1 || H5Sget_simple_extent_dims(*space, &length, nullptr) != 1) {
                throw FileError(file, path + ": expected a list of floating-point numbers");
            }
            return static_cast<std::size_t>(length);
        };
        declaration.parameters = list_length("/TransformParameters", "/TranformParameters", declaration.has_parameters);
        declaration.fixed_parameters =
            list_length("/TransformFixedParameters", "/TranformFixedParameters", declaration.has_fixed_parameters);
        // A few fixed parameters are read for the check: a displacement field's declared size.
        if (declaration.has_fixed_parameters && declaration.fixed_parameters <= 64) {
            const std::string path = declaration.where + (exists(*h5, declaration.where + "/TransformFixedParameters")
                                                              ? "/TransformFixedParameters"
                                                              : "/TranformFixedParameters");
            const Hdf5Handle set(H5Dopen2(*h5, path.c_str(), H5P_DEFAULT), H5Dclose);
            std::vector<double> values(declaration.fixed_parameters);
            if (set.valid() && H5Dread(*set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0) {
                declaration.fixed_values = std::move(values);
            }
        }
        declarations.push_back(std::move(declaration));
    }
    return declarations;
}

bool finite_map(const AffineMap& map) {
    const auto finite = [](double v) { return std::isfinite(v); };
    return std::all_of(map.matrix.begin(), map.matrix.end(), finite) && std::all_of(map.offset.begin(), map.offset.end(), finite);
}

}  // namespace

TransformFile read_itk_hdf5_transform(const fs::path& file, std::size_t dimension, const MemoryBudget& budget) {
    check_hdf5_structure(file, budget);
    return read_itk_transform(file, dimension);
}

TransformFile read_itk_transform(const fs::path& file, std::size_t dimension) {
    register_itk_transforms();
    const std::string name = lowercase_filename(file);
    if (ends_with(name, ".h5") || ends_with(name, ".hdf5")) check_itk_transform_declarations(hdf5_declarations(file), dimension, file);
    TransformFile result;
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
            const bool known = dimension == 2 ? append_itk_transform<2>(transform.GetPointer(), result)
                                              : append_itk_transform<3>(transform.GetPointer(), result);
            if (!known) {
                throw FileError(file, "unsupported transform type " + transform->GetTransformTypeAsString() +
                                          " (gridwarp reads linear ITK transforms, translations, displacement field "
                                          "transforms, composites of them, and displacement field images)");
            }
        }
    } catch (const itk::ExceptionObject& e) {
        std::string message = e.GetDescription();
        message.erase(std::remove(message.begin(), message.end(), '\n'), message.end());
        throw FileError(file, "cannot read the transform: " + message);
    } catch (const std::invalid_argument& e) {
        throw FileError(file, e.what());
    }
    if (result.steps.empty()) throw FileError(file, "the file holds no transform");
    for (const auto& step : result.steps) {
        if (step.affine && !finite_map(*step.affine)) throw FileError(file, "the transform holds a non-finite value");
    }
    return result;
}

}  // namespace gridwarp::io::detail
