// gridwarp.read / gridwarp.write and the Image they pass: a file's pixels as a NumPy view with
// the geometry and header the file gave, read and written by gridwarp::io as the commands do.
#include "commands.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "array_bridge.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/nifti_image.hpp"

namespace gridwarp::python {

namespace {

using ImageHandle = std::shared_ptr<io::Image>;

std::shared_ptr<io::Image> read(const std::filesystem::path& path, const std::string& nifti_geometry, bool keep_orientation,
                                std::optional<std::uint64_t> max_memory, std::optional<int> threads) {
    io::ReadOptions options;
    options.nifti_geometry = io::parse_nifti_geometry_rule(nifti_geometry);
    options.keep_orientation = keep_orientation;
    if (max_memory) options.memory.max_bytes = *max_memory;
    options.threads = threads.value_or(0);
    py::gil_scoped_release released;
    return std::make_shared<io::Image>(io::read_image(path, options));
}

void write(const io::Image& image, const std::filesystem::path& path, std::optional<int> compression_level, std::optional<int> quality,
           std::optional<int> threads) {
    io::WriteOptions options;
    options.compression_level = compression_level.value_or(-1);
    options.quality = quality.value_or(-1);
    options.threads = threads.value_or(0);
    py::gil_scoped_release released;
    io::write_image(path, image, options);
}

// The (N, C, D1..Dr) view of the pixels; the Image stays alive while the array does.
py::array pixel_array(const py::object& self) {
    auto& image = self.cast<io::Image&>();
    const TensorView view = image.nchw();
    std::vector<py::ssize_t> strides;
    for (const std::int64_t stride : view.strides) strides.push_back(static_cast<py::ssize_t>(stride * static_cast<std::int64_t>(dtype_size(view.dtype))));
    return py::array(numpy_dtype(view.dtype, "image"), std::vector<py::ssize_t>(view.shape.begin(), view.shape.end()), strides, view.data, self);
}

// The image (kind, format, header, geometry) holding `array`'s values, of any dtype and shape
// (N, C, D1..Dr): what still holds is kept. The geometry maps voxel indices to the world whatever
// the extent, so it stays while the spatial rank does; the scaling stays for floating values; the
// channel order only for as many channels.
std::shared_ptr<io::Image> with_array(const io::Image& image, py::handle array) {
    const BorrowedArray values = BorrowedArray::borrow(array, "array", false);
    const ConstTensorView& view = values.view();
    if (view.rank() < 3) throw py::value_error("array: shape " + shape_to_string(view.shape) + ", expected (N, C, D1..Dr) with r >= 1");
    const Shape spatial(view.shape.begin() + 2, view.shape.end());
    io::Image copy = io::Image::describe_like(image, spatial);
    copy.batch = view.shape[0];
    copy.channels = view.shape[1];
    copy.pixels = Tensor(view.dtype, Shape{0});
    if (spatial.size() == image.spatial.size()) copy.geometry = image.geometry;
    if (copy.channels != image.channels) copy.channel_order.clear();
    if (!is_floating(view.dtype)) copy.scaling.reset();
    copy.exif_orientation = image.exif_orientation;
    copy.allocate();
    copy_elements(view, copy.nchw());
    return std::make_shared<io::Image>(std::move(copy));
}

// A volume (with a geometry) or a tensor from an array (N, C, D1..Dr) and, for a volume, its
// spacing, origin and direction (ITK's LPS millimetres, innermost axis first, direction row-major)
// or a nibabel-style affine: (r + 1) x (r + 1), voxel index (innermost first) to RAS millimetres.
std::shared_ptr<io::Image> make_image(py::handle array, std::optional<std::vector<double>> spacing, std::optional<std::vector<double>> origin,
                                      std::optional<std::vector<double>> direction, py::object affine) {
    const BorrowedArray values = BorrowedArray::borrow(array, "array", false);
    const ConstTensorView& view = values.view();
    if (view.rank() < 3) throw py::value_error("array: shape " + shape_to_string(view.shape) + ", expected (N, C, D1..Dr) with r >= 1");
    const std::size_t r = view.rank() - 2;
    io::Image image;
    image.batch = view.shape[0];
    image.channels = view.shape[1];
    image.spatial = Shape(view.shape.begin() + 2, view.shape.end());
    image.layout = io::ChannelLayout::Planar;
    image.pixels = Tensor(view.dtype, Shape{0});
    const bool located = spacing || origin || direction || !affine.is_none();
    if (!affine.is_none() && (spacing || origin || direction)) throw py::value_error("affine: give it or spacing/origin/direction, not both");
    image.kind = located ? io::FileKind::Volume : io::FileKind::Tensor;
    image.format = located ? "nifti" : "npy";
    if (located) {
        io::Geometry geometry = io::Geometry::identity(r);
        if (!affine.is_none()) {
            const auto matrix = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(affine);
            if (!matrix || matrix.ndim() != 2 || matrix.shape(0) != static_cast<py::ssize_t>(r + 1) || matrix.shape(1) != static_cast<py::ssize_t>(r + 1)) {
                throw py::value_error("affine: a " + std::to_string(r + 1) + "x" + std::to_string(r + 1) + " matrix for a " + std::to_string(r) + "-D image");
            }
            const auto m = matrix.unchecked<2>();
            for (std::size_t j = 0; j < r; ++j) {
                double length = 0.0;
                for (std::size_t i = 0; i < r; ++i) length += m(i, j) * m(i, j);
                length = std::sqrt(length);
                if (!(length > 0.0) || !std::isfinite(length)) throw py::value_error("affine: column " + std::to_string(j) + " has no length");
                geometry.spacing[j] = length;
                for (std::size_t i = 0; i < r; ++i) geometry.direction[i * r + j] = (i < 2 ? -1.0 : 1.0) * m(i, j) / length;  // RAS -> LPS
            }
            for (std::size_t i = 0; i < r; ++i) geometry.origin[i] = (i < 2 ? -1.0 : 1.0) * m(i, r);
        } else {
            const auto take = [&](const std::optional<std::vector<double>>& given, std::vector<double>& into, std::size_t count, const char* name) {
                if (!given) return;
                if (given->size() != count) {
                    throw py::value_error(std::string(name) + ": " + std::to_string(given->size()) + " values, expected " + std::to_string(count) +
                                          " for a " + std::to_string(r) + "-D image");
                }
                into = *given;
            };
            take(spacing, geometry.spacing, r, "spacing");
            take(origin, geometry.origin, r, "origin");
            take(direction, geometry.direction, r * r, "direction");
            for (const double value : geometry.spacing) {
                if (!(value > 0.0) || !std::isfinite(value)) throw py::value_error("spacing: every value must be positive and finite");
            }
        }
        image.geometry = geometry;
    }
    image.allocate();
    copy_elements(view, image.nchw());
    return std::make_shared<io::Image>(std::move(image));
}

// A NIfTI image another program holds (nibabel's): its header's bytes and its values in the
// file's voxel order (C-ordered, x fastest; float64 where the header scales them), as the Image
// read_image would make of the file.
std::shared_ptr<io::Image> image_from_nifti(const py::bytes& header_bytes, py::handle values) {
    const std::string bytes = header_bytes;
    const std::filesystem::path named = "the nibabel image";
    auto header = std::make_shared<io::NiftiHeader>(
        io::parse_nifti_header(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), named));
    header->single_file = true;  // a pair's header describes the same image
    header->vox_offset = header->version == 2 ? 544 : 352;
    io::Image image = io::nifti_image_description(header, io::ReadOptions{}, named);
    const BorrowedArray array = BorrowedArray::borrow(values, "values", false);
    const ConstTensorView& view = array.view();
    const Shape storage = image.storage_shape();
    if (view.dtype != image.dtype()) {
        throw py::type_error("values: " + std::string(dtype_name(view.dtype)) + ", but the header makes " + std::string(dtype_name(image.dtype())));
    }
    if (shape_numel(view.shape) != shape_numel(storage) || view.strides != contiguous_strides(view.shape)) {
        throw py::value_error("values: shape " + shape_to_string(view.shape) + ", expected a C-ordered array of the header's " +
                              std::to_string(shape_numel(storage)) + " values");
    }
    image.allocate();
    copy_elements(ConstTensorView(view.dtype, view.data, storage), image.pixels.view());
    return std::make_shared<io::Image>(std::move(image));
}

// The header gridwarp's NIfTI writer gives this image (a single .nii), as bytes.
py::bytes nifti_header_bytes(const io::Image& image) {
    std::size_t size = 0;
    const auto bytes = io::serialize_nifti_header(io::nifti_header_for(image), size);
    return py::bytes(reinterpret_cast<const char*>(bytes.data()), size);
}

py::object geometry_of(const io::Image& image) {
    if (!image.geometry) return py::none();
    py::dict geometry;
    geometry["spacing"] = image.geometry->spacing;
    geometry["origin"] = image.geometry->origin;
    geometry["direction"] = image.geometry->direction;
    return geometry;
}

py::object nifti_of(const io::Image& image) {
    if (!image.nifti) return py::none();
    const io::NiftiHeader& h = *image.nifti;
    py::dict header;
    header["version"] = h.version;
    header["dim"] = h.dim;
    header["pixdim"] = h.pixdim;
    header["datatype"] = h.datatype;
    header["scl_slope"] = h.scl_slope;
    header["scl_inter"] = h.scl_inter;
    header["xyzt_units"] = h.xyzt_units;
    header["intent_code"] = h.intent_code;
    header["intent_name"] = h.intent_name;
    header["descrip"] = h.descrip;
    header["qform_code"] = h.qform_code;
    header["sform_code"] = h.sform_code;
    header["srow"] = h.srow;
    return header;
}

}  // namespace

void add_image_functions(py::module_& module) {
    // A file the library refuses is a bad argument, as for the tensor functions: ValueError.
    py::register_exception_translator([](std::exception_ptr error) {
        try {
            if (error) std::rethrow_exception(error);
        } catch (const io::FileError& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        }
    });
    py::class_<io::Image, std::shared_ptr<io::Image>>(module, "Image",
                                                      "A file's pixels with its geometry and header, as gridwarp.read gives them.")
        .def(py::init(&make_image), py::arg("array"), py::kw_only(), py::arg("spacing") = py::none(), py::arg("origin") = py::none(),
             py::arg("direction") = py::none(), py::arg("affine") = py::none(),
             "An image from an array (N, C, D1..Dr), copied. With spacing/origin/direction (ITK's LPS millimetres, innermost axis "
             "first, direction row-major) or affine (nibabel's: (r+1)x(r+1), voxel index to RAS millimetres) it is a volume, "
             "written with that geometry; without, a tensor.")
        .def_property_readonly("array", &pixel_array,
                               "The pixels as a NumPy view (N, C, D1..Dr), in the file's memory (no copy); channels in "
                               "channel_order.")
        .def_property_readonly("kind", [](const io::Image& image) { return std::string(io::file_kind_name(image.kind)); })
        .def_property_readonly("format", [](const io::Image& image) { return image.format; })
        .def_property_readonly("dtype", [](const io::Image& image) { return numpy_dtype(image.dtype(), "image"); })
        .def_property_readonly("spatial_shape", [](const io::Image& image) { return image.spatial; }, "(D1..Dr), outermost first")
        .def_property_readonly("channels", [](const io::Image& image) { return image.channels; })
        .def_property_readonly("channel_order", [](const io::Image& image) { return image.channel_order; },
                               "'BGR' or 'BGRA' for colour photos (as OpenCV orders them), else ''")
        .def_property_readonly("geometry", &geometry_of,
                               "Volumes: spacing, origin and direction (row-major) in ITK's LPS millimetres, innermost axis first; "
                               "else None")
        .def_property_readonly("nifti", &nifti_of, "The NIfTI header's fields a NIfTI output keeps, or None")
        .def_property_readonly("warnings", [](const io::Image& image) { return image.warnings; })
        .def("with_array", &with_array, py::arg("array"),
             "The same image (header, geometry, format) holding array's values, of any dtype and shape (N, C, D1..Dr); the "
             "geometry is kept while the spatial rank is, the scaling for floating values.")
        .def("__repr__", [](const io::Image& image) {
            return "<gridwarp.Image " + std::string(io::file_kind_name(image.kind)) + " " + image.format + " " +
                   std::string(dtype_name(image.dtype())) + " " + shape_to_string(image.nchw().shape) + ">";
        });
    module.def("_image_from_nifti", &image_from_nifti, py::arg("header"), py::arg("values"),
               "An Image from a NIfTI header's bytes and its values in the file's voxel order (Image.from_nibabel).");
    module.def("_nifti_header_bytes", &nifti_header_bytes, py::arg("image"),
               "The header gridwarp's NIfTI writer gives the image, as bytes (Image.to_nibabel).");
    module.def("read", &read, py::arg("path"), py::kw_only(), py::arg("nifti_geometry") = "standard", py::arg("keep_orientation") = false,
               py::arg("max_memory") = py::none(), py::arg("threads") = py::none(),
               "Reads an image, volume or tensor file as the commands do (docs/formats.md); raises ValueError naming the file "
               "and the problem.");
    module.def("write", &write, py::arg("image"), py::arg("path"), py::kw_only(), py::arg("compression_level") = py::none(),
               py::arg("quality") = py::none(), py::arg("threads") = py::none(),
               "Writes an Image atomically, the format chosen by the extension, keeping its header and geometry.");
}

}  // namespace gridwarp::python
