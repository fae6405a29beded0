#include "array_bridge.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace gridwarp::python {

namespace {

// Newer DLPack producers tag booleans with a code of their own; Debian's dlpack.h (0.6) predates it.
constexpr std::uint8_t kDLPackBoolCode = 6;

// NumPy's dtype names for numbers, bool and complex are the ONNX names parse_dtype reads.
DType dtype_of_numpy(const py::dtype& type, const char* role) {
    const std::string name = py::str(type.attr("name")).cast<std::string>();
    try {
        const DType parsed = parse_dtype(name);
        if (parsed != DType::String && parsed != DType::BFloat16) return parsed;
    } catch (const std::invalid_argument&) {
    }
    throw py::type_error(std::string(role) + ": NumPy dtype " + py::str(py::handle(type)).cast<std::string>() +
                         " has no gridwarp type (numbers, bool and complex only)");
}

DType dtype_of_dlpack(const DLDataType& type, const char* role) {
    if (type.lanes == 1) {
        switch (type.code) {
            case kDLFloat:
                if (type.bits == 16) return DType::Float16;
                if (type.bits == 32) return DType::Float32;
                if (type.bits == 64) return DType::Float64;
                break;
            case kDLBfloat:
                if (type.bits == 16) return DType::BFloat16;
                break;
            case kDLInt:
                if (type.bits == 8) return DType::Int8;
                if (type.bits == 16) return DType::Int16;
                if (type.bits == 32) return DType::Int32;
                if (type.bits == 64) return DType::Int64;
                break;
            case kDLUInt:
                if (type.bits == 8) return DType::UInt8;
                if (type.bits == 16) return DType::UInt16;
                if (type.bits == 32) return DType::UInt32;
                if (type.bits == 64) return DType::UInt64;
                break;
            case kDLComplex:
                if (type.bits == 64) return DType::Complex64;
                if (type.bits == 128) return DType::Complex128;
                break;
            case kDLPackBoolCode:
                if (type.bits == 8) return DType::Bool;
                break;
            default: break;
        }
    }
    throw py::type_error(std::string(role) + ": DLPack type (code " + std::to_string(type.code) + ", " + std::to_string(type.bits) +
                         " bits, " + std::to_string(type.lanes) + " lanes) has no gridwarp type");
}

// Byte strides as element strides where the core can use them: non-negative multiples of the item size.
bool element_strides(const py::array& array, Shape& strides) {
    const auto item = array.itemsize();
    strides.resize(static_cast<std::size_t>(array.ndim()));
    for (py::ssize_t k = 0; k < array.ndim(); ++k) {
        const auto bytes = array.strides(k);
        if (bytes < 0 || bytes % item != 0) return false;
        strides[static_cast<std::size_t>(k)] = bytes / item;
    }
    return true;
}

bool addressable(const py::array& array) {
    const auto flags = array.flags();
    return (flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) != 0 && array.dtype().attr("isnative").cast<bool>();
}

}  // namespace

BorrowedArray BorrowedArray::borrow(py::handle object, const char* role, bool writable) {
    BorrowedArray borrowed;
    const auto numpy = py::module_::import("numpy");
    py::object source = py::reinterpret_borrow<py::object>(object);
    py::object capsule;
    // torch refuses to export such a tensor with its own RuntimeError; gridwarp computes no gradient.
    if (py::hasattr(source, "requires_grad") && py::bool_(source.attr("requires_grad"))) {
        throw py::type_error(std::string(role) + ": the tensor requires grad, and gridwarp computes no gradients; pass tensor.detach()");
    }
    if (!py::isinstance<py::array>(source) && py::hasattr(source, "__dlpack__")) {
        try {
            capsule = source.attr("__dlpack__")();
        } catch (const py::error_already_set&) {
            // Some producers export only some types (torch before 2.0: no bool); take their NumPy view.
            if (!py::hasattr(source, "__array__")) throw;
        }
    }
    if (capsule) {
        if (!PyCapsule_IsValid(capsule.ptr(), "dltensor")) {
            throw py::type_error(std::string(role) + ": __dlpack__ did not return a DLPack capsule");
        }
        auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
        PyCapsule_SetName(capsule.ptr(), "used_dltensor");
        borrowed.dlpack_ = std::shared_ptr<DLManagedTensor>(managed, [](DLManagedTensor* tensor) {
            if (tensor->deleter != nullptr) tensor->deleter(tensor);
        });
        borrowed.keeper_ = source;
        const DLTensor& tensor = managed->dl_tensor;
        if (tensor.device.device_type != kDLCPU) {
            throw py::type_error(std::string(role) + ": the array lives on a device (DLPack device type " +
                                 std::to_string(tensor.device.device_type) + "); gridwarp samples CPU memory only");
        }
        const DType type = dtype_of_dlpack(tensor.dtype, role);
        if (tensor.ndim < 0 || tensor.ndim > 64 || (tensor.ndim > 0 && tensor.shape == nullptr)) {
            throw py::value_error(std::string(role) + ": the DLPack tensor declares " + std::to_string(tensor.ndim) + " dimensions");
        }
        Shape shape(tensor.shape, tensor.shape + tensor.ndim);
        unsigned __int128 bytes = dtype_size(type);
        for (std::int64_t extent : shape) {
            if (extent < 0) throw py::value_error(std::string(role) + ": the DLPack tensor has a negative extent, shape " + shape_to_string(shape));
            bytes *= static_cast<std::uint64_t>(extent);
            if (bytes > (static_cast<unsigned __int128>(1) << 62)) {
                throw py::value_error(std::string(role) + ": the DLPack tensor's shape " + shape_to_string(shape) + " holds more than 2^62 bytes");
            }
        }
        Shape strides = tensor.strides != nullptr ? Shape(tensor.strides, tensor.strides + tensor.ndim) : contiguous_strides(shape);
        const bool usable = std::all_of(strides.begin(), strides.end(), [](std::int64_t s) { return s >= 0; }) &&
                            (tensor.byte_offset + reinterpret_cast<std::uintptr_t>(tensor.data)) % dtype_size(type) == 0;
        if (usable) {
            borrowed.view_ = TensorView(type, static_cast<char*>(tensor.data) + tensor.byte_offset, std::move(shape), std::move(strides));
            return borrowed;
        }
        if (writable) return borrowed;
        // Negative strides (a flipped view): read a copy, through NumPy where it has the type.
        borrowed.dlpack_.reset();
        source = numpy.attr("from_dlpack")(source);
    }
    py::array array = py::isinstance<py::array>(source) ? py::reinterpret_borrow<py::array>(source)
                                                        : py::array(numpy.attr("asarray")(source));
    const DType type = dtype_of_numpy(array.dtype(), role);
    Shape strides;
    if (!addressable(array) || !element_strides(array, strides)) {
        if (writable) return borrowed;
        array = numpy.attr("ascontiguousarray")(array, array.dtype().attr("newbyteorder")("="));
        element_strides(array, strides);
    }
    if (writable && !array.writeable()) throw py::value_error(std::string(role) + ": the array is read-only");
    Shape shape(array.shape(), array.shape() + array.ndim());
    borrowed.keeper_ = array;
    borrowed.view_ = TensorView(type, const_cast<void*>(array.data()), std::move(shape), std::move(strides));
    return borrowed;
}

py::dtype numpy_dtype(DType type, const char* role) {
    if (type == DType::BFloat16) {
        throw py::type_error(std::string(role) + ": NumPy has no bfloat16; pass out= a bfloat16 tensor of the result's shape");
    }
    if (type == DType::String) throw py::type_error(std::string(role) + ": string tensors have no NumPy form here");
    return py::dtype(std::string(dtype_name(type)));
}

py::array new_array(DType type, const Shape& shape, const char* role) {
    return py::array(numpy_dtype(type, role), std::vector<py::ssize_t>(shape.begin(), shape.end()));
}

py::array adopt_tensor(Tensor&& tensor, const char* role) {
    const py::dtype type = numpy_dtype(tensor.dtype(), role);
    auto* owner = new Tensor(std::move(tensor));
    py::capsule keeper(owner, [](void* pointer) { delete static_cast<Tensor*>(pointer); });
    std::vector<py::ssize_t> strides;
    for (const std::int64_t stride : contiguous_strides(owner->shape())) {
        strides.push_back(static_cast<py::ssize_t>(stride * static_cast<std::int64_t>(dtype_size(owner->dtype()))));
    }
    return py::array(type, std::vector<py::ssize_t>(owner->shape().begin(), owner->shape().end()), strides, owner->data(), keeper);
}

bool share_memory(const ConstTensorView& a, const ConstTensorView& b) {
    const auto byte_range = [](const ConstTensorView& view) {
        const auto first = reinterpret_cast<std::uintptr_t>(view.data);
        std::uintptr_t last = first;
        for (std::size_t k = 0; k < view.shape.size(); ++k) {
            if (view.shape[k] == 0) return std::pair<std::uintptr_t, std::uintptr_t>(first, first);
            last += static_cast<std::uintptr_t>((view.shape[k] - 1) * view.strides[k]) * dtype_size(view.dtype);
        }
        return std::pair<std::uintptr_t, std::uintptr_t>(first, last + dtype_size(view.dtype));
    };
    const auto [a_begin, a_end] = byte_range(a);
    const auto [b_begin, b_end] = byte_range(b);
    return a_begin < b_end && b_begin < a_end && a_begin != a_end && b_begin != b_end;
}

}  // namespace gridwarp::python
