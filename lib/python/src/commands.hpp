// The file-level functions (affine, flow, resample, resize), where the commands are built.
#pragma once

#include <pybind11/pybind11.h>

namespace gridwarp::python {

namespace py = pybind11;

void add_command_functions(py::module_& module);

}  // namespace gridwarp::python
