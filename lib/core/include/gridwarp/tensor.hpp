// Tensors: an owning, C-ordered Tensor and non-owning strided views over a caller's memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gridwarp/dtype.hpp"

namespace gridwarp {

using Shape = std::vector<std::int64_t>;

// "(1, 5, 5)": the form every shape takes in an error message.
std::string shape_to_string(const Shape& shape);
// Product of the extents; 1 for rank 0.
std::int64_t shape_numel(const Shape& shape);
// Element strides of a C-ordered (row-major) array of this shape.
Shape contiguous_strides(const Shape& shape);

// A strided view: element (i0, i1, ...) lives at data + sum(i_k * strides[k]) elements.
// Strides are in elements, not bytes, and may be any non-negative values (transposes, slices).
template <class Pointer>
struct BasicTensorView {
    DType dtype = DType::Float32;
    Pointer data = nullptr;
    Shape shape;
    Shape strides;

    BasicTensorView() = default;
    BasicTensorView(DType type, Pointer ptr, Shape extents, Shape element_strides)
        : dtype(type), data(ptr), shape(std::move(extents)), strides(std::move(element_strides)) {}
    // A C-ordered view.
    BasicTensorView(DType type, Pointer ptr, Shape extents)
        : dtype(type), data(ptr), shape(std::move(extents)), strides(contiguous_strides(shape)) {}
    // A mutable view converts to a const one.
    template <class Other, class = std::enable_if_t<std::is_convertible_v<Other, Pointer>>>
    BasicTensorView(const BasicTensorView<Other>& other)
        : dtype(other.dtype), data(other.data), shape(other.shape), strides(other.strides) {}

    std::int64_t rank() const { return static_cast<std::int64_t>(shape.size()); }
    std::int64_t numel() const { return shape_numel(shape); }

    template <class T>
    auto typed() const {
        using Element = std::conditional_t<std::is_const_v<std::remove_pointer_t<Pointer>>, const T, T>;
        return static_cast<Element*>(data);
    }
};

using TensorView = BasicTensorView<void*>;
using ConstTensorView = BasicTensorView<const void*>;

// Whether the elements lie in C order without gaps (an axis of extent 1 may have any stride).
bool is_c_ordered(const ConstTensorView& view);

// An owning, C-ordered tensor of any dtype. Elements start value-initialised (0, false, "").
// Move-only: copying pixel data should be a visible decision (clone()).
class Tensor {
public:
    Tensor() = default;
    Tensor(DType type, Shape shape);

    Tensor(Tensor&&) noexcept = default;
    Tensor& operator=(Tensor&&) noexcept = default;
    Tensor(const Tensor&) = delete;
    Tensor& operator=(const Tensor&) = delete;

    // Takes a C-ordered buffer that someone else allocated (an OpenCV or ITK image) without copying;
    // `storage` keeps it alive (its deleter releases the owner).
    static Tensor adopt(DType type, Shape shape, std::shared_ptr<void> storage);

    // The same elements under another shape with the same element count (no copy).
    Tensor reshaped(Shape shape) &&;

    // A C-ordered copy of any view (strided or not) of the same dtype.
    static Tensor copy_of(ConstTensorView source);
    Tensor clone() const { return copy_of(view()); }

    DType dtype() const { return dtype_; }
    const Shape& shape() const { return shape_; }
    std::int64_t rank() const { return static_cast<std::int64_t>(shape_.size()); }
    std::int64_t numel() const { return shape_numel(shape_); }
    std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }

    void* data() { return storage_.get(); }
    const void* data() const { return storage_.get(); }
    template <class T> T* data_as() { return static_cast<T*>(data()); }
    template <class T> const T* data_as() const { return static_cast<const T*>(data()); }

    TensorView view() { return TensorView(dtype_, data(), shape_); }
    ConstTensorView view() const { return ConstTensorView(dtype_, data(), shape_); }

private:
    DType dtype_ = DType::Float32;
    Shape shape_;
    std::shared_ptr<void> storage_;
};

// A C-ordered copy converted to another real numeric dtype (integers, bool, floating), through
// double: floating results round to nearest even, integer results round half to even and saturate.
// Throws std::invalid_argument for complex and string tensors.
Tensor convert_to(const ConstTensorView& source, DType type);
// The same of (value - offset) / scale: the stored values of a scaled image's values.
Tensor convert_to(const ConstTensorView& source, DType type, double offset, double scale);

// Copies src into dst element by element (shapes and dtypes must match; strides may differ).
void copy_elements(ConstTensorView src, TensorView dst);

}  // namespace gridwarp
