// The file-level functions, where the io library and the commands are built: affine, flow,
// resample and resize (commands.cpp); read, write and Image (image_files.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace gridwarp::python {

namespace py = pybind11;

void add_command_functions(py::module_& module);
void add_image_functions(py::module_& module);

}  // namespace gridwarp::python
