// gridwarp._gridwarp: the Python package's compiled half. The functions call the same library
// functions as the gridwarp command, so that both give the same bits.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <stdexcept>
#include <string>

#include "array_bridge.hpp"
#ifdef GRIDWARP_PYTHON_COMMANDS
#include "commands.hpp"
#endif
#include "gridwarp/grid_sample.hpp"
#include "gridwarp/positions.hpp"
#include "gridwarp/simd.hpp"

namespace gridwarp::python {

using namespace pybind11::literals;

namespace {

SamplingMode sampling_mode(const std::string& mode) {
    try {
        return parse_sampling_mode(mode);
    } catch (const std::invalid_argument& e) {
        throw py::value_error(std::string("mode: ") + e.what());
    }
}

SampleOptions sample_options(const SamplingMode& mode, const std::string& padding_mode, bool align_corners, double fill,
                             std::optional<int> threads) {
    SampleOptions options;
    apply_sampling_mode(options, mode);
    try {
        options.padding = parse_padding(padding_mode);
    } catch (const std::invalid_argument& e) {
        throw py::value_error(std::string("padding_mode: ") + e.what());
    }
    options.align_corners = align_corners;
    options.fill = fill;
    if (threads && *threads < 0) throw py::value_error("threads: " + std::to_string(*threads) + " is negative; give 0 or None for every core");
    if (threads && *threads > 4096) throw py::value_error("threads: " + std::to_string(*threads) + " is more than 4096 (the command's --threads range)");
    options.threads = threads.value_or(0);
    return options;
}

bool holds_text(py::handle input) {
    if (!py::isinstance<py::array>(input)) return false;
    const char kind = py::reinterpret_borrow<py::array>(input).dtype().kind();
    return kind == 'U' || kind == 'S' || kind == 'O';
}

// ONNX string tensors: NumPy's str, bytes and object arrays, copied into the core's strings (they
// have no view the core could read) and returned as an object array of str.
py::object grid_sample_text(py::handle input, const ConstTensorView& grid, const SampleOptions& options, py::handle out) {
    if (!out.is_none()) throw py::type_error("out: string results are new arrays; out= takes numbers only");
    const auto numpy = py::module_::import("numpy");
    const py::array source = py::reinterpret_borrow<py::array>(input);
    const Shape shape(source.shape(), source.shape() + source.ndim());
    Tensor strings(DType::String, shape);
    const py::list items = source.attr("ravel")().attr("tolist")();
    auto* text = strings.data_as<std::string>();
    for (std::size_t i = 0; i < items.size(); ++i) {
        const py::handle item = items[i];
        text[i] = py::isinstance<py::bytes>(item) ? item.cast<std::string>() : py::str(item).cast<std::string>();
    }
    Tensor sampled;
    {
        py::gil_scoped_release released;
        sampled = gridwarp::grid_sample(strings.view(), grid, options);
    }
    py::list values;
    const auto* result = sampled.data_as<std::string>();
    for (std::int64_t i = 0; i < sampled.numel(); ++i) values.append(py::str(result[i]));
    py::array array = numpy.attr("empty")(py::int_(sampled.numel()), "dtype"_a = "object");
    array[py::slice(0, sampled.numel(), 1)] = values;
    return array.attr("reshape")(std::vector<py::ssize_t>(sampled.shape().begin(), sampled.shape().end()));
}

py::object grid_sample(py::handle input, py::handle grid, const std::string& mode, const std::string& padding_mode,
                       bool align_corners, double fill, std::optional<int> threads, py::handle out, std::uint64_t max_taps) {
    const SamplingMode parsed_mode = sampling_mode(mode);
    SampleOptions options = sample_options(parsed_mode, padding_mode, align_corners, fill, threads);
    if (holds_text(input)) {
        const BorrowedArray g = BorrowedArray::borrow(grid, "grid", false);
        return grid_sample_text(input, g.view(), options, out);
    }
    const BorrowedArray x = BorrowedArray::borrow(input, "input", false);
    const BorrowedArray g = BorrowedArray::borrow(grid, "grid", false);
    resolve_gaussian_sigma(options, parsed_mode, {}, x.view().rank() - 2);
    const Shape shape = grid_sample_output_shape(x.view(), g.view());
    if (interpolation_kind(options.mode).gaussian && max_taps != 0) {
        const std::uint64_t taps = taps_in_all(options, x.view().shape, Shape(shape.begin() + 2, shape.end()));
        if (taps > max_taps) {
            throw py::value_error("mode " + mode + " reads " + std::to_string(taps_per_point(options, x.view().rank() - 2)) +
                                  " values per output value, " + std::to_string(taps) + " in all: more than max_taps " +
                                  std::to_string(max_taps) + "; lower sigma or alpha, or raise max_taps (0: no limit)");
        }
    }

    py::object result;
    std::optional<BorrowedArray> target;
    if (out.is_none()) {
        result = new_array(x.view().dtype, shape, "input");
        target = BorrowedArray::borrow(result, "out", true);
    } else {
        target = BorrowedArray::borrow(out, "out", true);
        const TensorView& view = target->view();
        if (target->in_place()) {
            if (view.dtype != x.view().dtype) {
                throw py::type_error("out: " + std::string(dtype_name(view.dtype)) + ", but the input is " + std::string(dtype_name(x.view().dtype)));
            }
            if (view.shape != shape) {
                throw py::value_error("out: shape " + shape_to_string(view.shape) + ", but the result is " + shape_to_string(shape));
            }
            if (share_memory(view, x.view()) || share_memory(view, g.view())) {
                throw py::value_error("out: shares memory with the input or the grid");
            }
            result = py::reinterpret_borrow<py::object>(out);
        } else {
            // Strides the core cannot write through: sample into a new array and assign it.
            result = grid_sample(input, grid, mode, padding_mode, align_corners, fill, threads, py::none(), max_taps);
            out.attr("__setitem__")(py::ellipsis(), result);
            return py::reinterpret_borrow<py::object>(out);
        }
    }
    {
        py::gil_scoped_release released;
        grid_sample_into(x.view(), g.view(), target->view(), options);
    }
    return result;
}

py::array affine_grid(py::handle theta, const std::vector<std::int64_t>& size, bool align_corners) {
    const BorrowedArray matrices = BorrowedArray::borrow(theta, "theta", false);
    Tensor grid;
    try {
        py::gil_scoped_release released;
        grid = gridwarp::affine_grid(matrices.view(), size, align_corners);
    } catch (const std::invalid_argument& e) {
        throw py::value_error(std::string("size: ") + e.what());
    }
    return adopt_tensor(std::move(grid), "theta");
}

}  // namespace

}  // namespace gridwarp::python

PYBIND11_MODULE(_gridwarp, module) {
    namespace py = pybind11;
    using namespace gridwarp::python;
    module.doc() = "gridwarp's sampler: ONNX GridSample and AffineGrid, exact, on NumPy arrays and DLPack tensors";
    module.def("grid_sample", &grid_sample, py::arg("input"), py::arg("grid"), py::arg("mode") = "bilinear",
               py::arg("padding_mode") = "zeros", py::arg("align_corners") = false, py::arg("fill") = 0.0,
               py::arg("threads") = py::none(), py::arg("out") = py::none(), py::arg("max_taps") = gridwarp::kDefaultMaxTaps,
               R"(Samples input (N, C, D1..Dr) at the normalized positions of grid (N, O1..Or, r).

ONNX GridSample (opsets 16, 20, 22) with PyTorch's argument names, for any number of spatial
axes r and every dtype (numbers, bool, complex; str, bytes and object arrays as ONNX strings). input and grid are NumPy arrays or CPU tensors with __dlpack__
(torch tensors included), read in place through their strides. grid is float16, bfloat16,
float32 or float64; grid[..., 0] is x (the innermost axis).

mode: "bilinear"/"linear", "nearest", "bicubic"/"cubic", or any mode of the gridwarp command
    ("BSpline[3]", "LanczosWindowedSinc", "Gaussian[1.5]" with sigma in pixels,
    "GenericLabel[Linear]", ...), in any case.
padding_mode: "zeros", "border" or "reflection".
align_corners: -1 and 1 are the centres of the corner pixels (True) or their outer edges (False).
fill: read for taps outside the input under zeros padding and written for non-finite positions.
threads: worker threads; None or 0 uses every core. The GIL is released while sampling.
out: an array of the result's shape and the input's dtype to write into (returned).
max_taps: Gaussian and MultiLabel only: the most input values read in all (output values times
    values per point, which grow with sigma and alpha), 2**34 by default; 0: no limit.

Returns a NumPy array (N, C, O1..Or) of the input's dtype. Raises ValueError for arguments the
operator refuses and TypeError for types it cannot take.)");
    module.def("affine_grid", &affine_grid, py::arg("theta"), py::arg("size"), py::arg("align_corners") = false,
               R"(The grid of normalized positions of affine maps (ONNX AffineGrid, torch's affine_grid).

theta: (N, 2, 3) with size (N, C, H, W), or (N, 3, 4) with size (N, C, D, H, W), of a floating
    dtype; (N, r, r+1) with an (r+2)-long size for other ranks.
Returns a NumPy array (N, O1..Or, r) of theta's dtype.)");
    module.attr("__version__") = GRIDWARP_VERSION;
#ifdef GRIDWARP_PYTHON_COMMANDS
    add_command_functions(module);
    add_image_functions(module);
#endif
    module.def("simd_targets", &gridwarp::simd_targets, "The SIMD targets compiled in and supported by this processor.");
    module.def("simd_target", &gridwarp::simd_target, "The SIMD target the sampler uses now (GRIDWARP_ISA caps it).");
}
