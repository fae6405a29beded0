#include "gridwarp/tensor.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <limits>
#include <stdexcept>

#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace gridwarp {

std::string shape_to_string(const Shape& shape) {
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) text += ", ";
        text += std::to_string(shape[i]);
    }
    if (shape.size() == 1) text += ",";
    return text + ")";
}

std::int64_t shape_numel(const Shape& shape) {
    std::int64_t count = 1;
    for (auto extent : shape) count *= extent;
    return count;
}

Shape contiguous_strides(const Shape& shape) {
    Shape strides(shape.size());
    std::int64_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        stride *= std::max<std::int64_t>(shape[i], 1);
    }
    return strides;
}

bool is_c_ordered(const ConstTensorView& view) {
    std::int64_t expected = 1;
    for (std::size_t a = view.shape.size(); a-- > 0;) {
        if (view.shape[a] == 1) continue;
        if (view.strides[a] != expected) return false;
        expected *= view.shape[a];
    }
    return true;
}

namespace {

// Buffers of at least this many bytes start on a huge-page boundary and ask Linux for transparent
// huge pages: a warp reads its input along slanted lines that touch a new 4 KiB page every few
// points, and on virtual machines every TLB miss walks two page tables (docs/performance.md).
constexpr std::size_t kHugePage = std::size_t{2} << 20;

template <class T>
std::shared_ptr<void> allocate_elements(std::int64_t count) {
    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(count, 1));
    if constexpr (std::is_trivially_copyable_v<T>) {
        if (n > std::numeric_limits<std::size_t>::max() / sizeof(T) - kHugePage) throw std::bad_alloc();
        const std::size_t bytes = n * sizeof(T);
        if (bytes >= kHugePage) {
#ifdef __linux__
            // Whole base pages, not huge ones: the last huge page's unused part is never resident.
            const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
            const std::size_t rounded = (bytes + page - 1) / page * page;
            // Fresh anonymous pages are zero already: mapping them directly saves writing every
            // byte twice (the kernel's zeroing, then a memset), which malloc cannot promise.
            // Over-map by one huge page to align the start, then give the slack back.
            const std::size_t mapped = rounded + kHugePage;
            void* region = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (region == MAP_FAILED) throw std::bad_alloc();
            const auto start = reinterpret_cast<std::uintptr_t>(region);
            const std::uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
            if (aligned > start) munmap(region, aligned - start);
            const std::size_t tail = start + mapped - (aligned + rounded);
            if (tail > 0) munmap(reinterpret_cast<void*>(aligned + rounded), tail);
            void* memory = reinterpret_cast<void*>(aligned);
            madvise(memory, rounded, MADV_HUGEPAGE);  // advice only: without it, 4 KiB pages
            return std::shared_ptr<void>(memory, [rounded](void* p) { munmap(p, rounded); });
#else
            const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
            void* memory = std::aligned_alloc(kHugePage, rounded);
            if (memory == nullptr) throw std::bad_alloc();
            std::memset(memory, 0, bytes);  // zeros, as value-initialisation gives (all-zero bits)
            return std::shared_ptr<void>(memory, [](void* p) { std::free(p); });
#endif
        }
    }
    // new T[n]() value-initialises: zeros for numbers, empty strings for std::string.
    return std::shared_ptr<void>(new T[n](), [](void* p) { delete[] static_cast<T*>(p); });
}

}  // namespace

Tensor::Tensor(DType type, Shape shape) : dtype_(type), shape_(std::move(shape)) {
    for (auto extent : shape_) {
        if (extent < 0) throw std::invalid_argument("Tensor: negative extent in shape " + shape_to_string(shape_));
    }
    // A product past 2^62 bytes wraps the element count; no machine holds it anyway.
    std::uint64_t bytes = dtype_size(type);
    for (auto extent : shape_) {
        if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(extent), &bytes) || bytes > (std::uint64_t{1} << 62)) {
            throw std::invalid_argument("Tensor: shape " + shape_to_string(shape_) + " holds more than 2^62 bytes");
        }
    }
    const auto count = numel();
    storage_ = visit_dtype(type, [count](auto tag) { return allocate_elements<typename decltype(tag)::type>(count); });
}

Tensor Tensor::adopt(DType type, Shape shape, std::shared_ptr<void> storage) {
    Tensor tensor;
    tensor.dtype_ = type;
    tensor.shape_ = std::move(shape);
    tensor.storage_ = std::move(storage);
    return tensor;
}

Tensor Tensor::reshaped(Shape shape) && {
    if (shape_numel(shape) != numel()) {
        throw std::invalid_argument("cannot reshape " + shape_to_string(shape_) + " to " + shape_to_string(shape));
    }
    shape_ = std::move(shape);
    return std::move(*this);
}

void copy_elements(ConstTensorView src, TensorView dst) {
    if (src.dtype != dst.dtype || src.shape != dst.shape) {
        throw std::invalid_argument("copy_elements: source " + std::string(dtype_name(src.dtype)) + " " +
                                    shape_to_string(src.shape) + " does not match destination " +
                                    std::string(dtype_name(dst.dtype)) + " " + shape_to_string(dst.shape));
    }
    const auto count = src.numel();
    if (count == 0) return;
    const auto rank = src.shape.size();
    const bool both_c_ordered = is_c_ordered(src) && is_c_ordered(dst);
    visit_dtype(src.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr bool bytes = std::is_trivially_copyable_v<T>;
        const T* in = src.typed<T>();
        T* out = dst.typed<T>();
        if (rank == 0) {
            out[0] = in[0];
            return;
        }
        if (bytes && both_c_ordered) {
            std::memcpy(out, in, static_cast<std::size_t>(count) * sizeof(T));
            return;
        }
        // A row (the innermost axis) at a time; the outer axes by odometer.
        const std::int64_t row = src.shape[rank - 1], in_step = src.strides[rank - 1], out_step = dst.strides[rank - 1];
        std::vector<std::int64_t> index(rank - 1, 0);
        std::int64_t in_offset = 0, out_offset = 0;
        for (std::int64_t done = 0; done < count; done += row) {
            if (bytes && in_step == 1 && out_step == 1) {
                std::memcpy(out + out_offset, in + in_offset, static_cast<std::size_t>(row) * sizeof(T));
            } else {
                for (std::int64_t i = 0; i < row; ++i) out[out_offset + i * out_step] = in[in_offset + i * in_step];
            }
            for (std::size_t axis = rank - 1; axis-- > 0;) {
                if (++index[axis] < src.shape[axis]) {
                    in_offset += src.strides[axis];
                    out_offset += dst.strides[axis];
                    break;
                }
                in_offset -= src.strides[axis] * (src.shape[axis] - 1);
                out_offset -= dst.strides[axis] * (dst.shape[axis] - 1);
                index[axis] = 0;
            }
        }
    });
}

Tensor Tensor::copy_of(ConstTensorView source) {
    Tensor result(source.dtype, source.shape);
    copy_elements(source, result.view());
    return result;
}

namespace {

template <class T>
double to_double(const T& value) {
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        return static_cast<float>(value);
    } else {
        return static_cast<double>(value);
    }
}

template <class T>
T from_double(double value) {
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        return T(static_cast<float>(value));
    } else if constexpr (std::is_same_v<T, bool>) {
        return !std::isnan(value) && std::nearbyint(value) >= 1.0;
    } else if constexpr (std::is_integral_v<T>) {
        if (std::isnan(value)) return T(0);
        const double rounded = std::nearbyint(value);
        if (rounded >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
        if (rounded <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
        return static_cast<T>(rounded);
    } else {
        return static_cast<T>(value);
    }
}

template <class T>
constexpr bool is_real_number = !std::is_same_v<T, std::string> && !std::is_same_v<T, std::complex<float>> &&
                                !std::is_same_v<T, std::complex<double>>;

}  // namespace

Tensor convert_to(const ConstTensorView& source, DType type, double offset, double scale) {
    // A contiguous source is read where it lies; any other is gathered first.
    Tensor gathered;
    const void* data = source.data;
    if (source.strides != contiguous_strides(source.shape)) {
        gathered = Tensor::copy_of(source);
        data = gathered.data();
    }
    Tensor result(type, source.shape);
    const auto count = result.numel();
    const bool plain = offset == 0.0 && scale == 1.0;
    visit_dtype(source.dtype, [&](auto from_tag) {
        using From = typename decltype(from_tag)::type;
        visit_dtype(type, [&](auto to_tag) {
            using To = typename decltype(to_tag)::type;
            if constexpr (is_real_number<From> && is_real_number<To>) {
                const From* in = static_cast<const From*>(data);
                To* out = result.data_as<To>();
                if (plain) {
                    for (std::int64_t i = 0; i < count; ++i) out[i] = from_double<To>(to_double(in[i]));
                } else {
                    for (std::int64_t i = 0; i < count; ++i) out[i] = from_double<To>((to_double(in[i]) - offset) / scale);
                }
            } else {
                throw std::invalid_argument("convert_to(): cannot convert " + std::string(dtype_name(source.dtype)) +
                                            " to " + std::string(dtype_name(type)));
            }
        });
    });
    return result;
}

Tensor convert_to(const ConstTensorView& source, DType type) { return convert_to(source, type, 0.0, 1.0); }

}  // namespace gridwarp
