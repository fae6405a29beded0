// Python arrays seen as gridwarp tensor views, without copying their memory: NumPy arrays through
// the buffer their ndarray describes, everything else with __dlpack__ (torch tensors, CuPy on the
// CPU, JAX, ...) through DLPack.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>

#include "gridwarp/tensor.hpp"

struct DLManagedTensor;

namespace gridwarp::python {

namespace py = pybind11;

// A view of a Python array's memory and what keeps that memory alive. Release it with the GIL
// held (a NumPy producer's DLPack deleter drops a Python reference).
class BorrowedArray {
public:
    // `object`: a numpy.ndarray, an object with __dlpack__, or else anything numpy.asarray takes
    // (converted, so copied). `role` names the argument in messages ("input", "grid", "out").
    // Memory the core cannot address in place (negative or unaligned strides, another byte order)
    // is copied for reading; for writing (`writable`) the view is then empty and in_place() false.
    static BorrowedArray borrow(py::handle object, const char* role, bool writable);

    const TensorView& view() const { return view_; }
    bool in_place() const { return view_.data != nullptr; }

private:
    py::object keeper_;                        // the ndarray or the producer's object
    std::shared_ptr<DLManagedTensor> dlpack_;  // the consumed DLPack tensor, deleted on release
    TensorView view_;
};

// The NumPy dtype of a gridwarp dtype; TypeError where NumPy has none (bfloat16, strings).
py::dtype numpy_dtype(DType type, const char* role);
// A new C-ordered ndarray of `type` and `shape`.
py::array new_array(DType type, const Shape& shape, const char* role);
// The Tensor as an ndarray that owns it (no copy).
py::array adopt_tensor(Tensor&& tensor, const char* role);
// Whether two views' byte ranges overlap.
bool share_memory(const ConstTensorView& a, const ConstTensorView& b);

}  // namespace gridwarp::python
