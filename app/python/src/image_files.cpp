// gridwarp.read / gridwarp.write and the Image they pass: a file's pixels as a NumPy view with
// the geometry and header the file gave, read and written by gridwarp::io as the commands do.
#include "commands.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <memory>
#include <optional>
#include <string>

#include "array_bridge.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"

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

// The same image (kind, format, header, geometry, scaling) holding `array`'s values instead.
std::shared_ptr<io::Image> with_array(const io::Image& image, py::handle array) {
    const BorrowedArray values = BorrowedArray::borrow(array, "array", false);
    const ConstTensorView pixels = image.nchw();
    if (values.view().dtype != pixels.dtype) {
        throw py::type_error("array: " + std::string(dtype_name(values.view().dtype)) + ", but the image holds " +
                             std::string(dtype_name(pixels.dtype)));
    }
    if (values.view().shape != pixels.shape) {
        throw py::value_error("array: shape " + shape_to_string(values.view().shape) + ", but the image is " + shape_to_string(pixels.shape));
    }
    auto copy = std::make_shared<io::Image>(io::Image::allocate_like(image, image.spatial));
    copy->geometry = image.geometry;
    copy->exif_orientation = image.exif_orientation;
    copy_elements(values.view(), copy->nchw());
    return copy;
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
             "The same image (header, geometry, format) holding array's values: same shape (N, C, D1..Dr) and dtype.")
        .def("__repr__", [](const io::Image& image) {
            return "<gridwarp.Image " + std::string(io::file_kind_name(image.kind)) + " " + image.format + " " +
                   std::string(dtype_name(image.dtype())) + " " + shape_to_string(image.nchw().shape) + ">";
        });
    module.def("read", &read, py::arg("path"), py::kw_only(), py::arg("nifti_geometry") = "standard", py::arg("keep_orientation") = false,
               py::arg("max_memory") = py::none(), py::arg("threads") = py::none(),
               "Reads an image, volume or tensor file as the commands do (docs/formats.md); raises ValueError naming the file "
               "and the problem.");
    module.def("write", &write, py::arg("image"), py::arg("path"), py::kw_only(), py::arg("compression_level") = py::none(),
               py::arg("quality") = py::none(), py::arg("threads") = py::none(),
               "Writes an Image atomically, the format chosen by the extension, keeping its header and geometry.");
}

}  // namespace gridwarp::python
