"""The Python package against the ONNX conformance data, PyTorch and the gridwarp command."""
import json
import threading
import time
import tracemalloc

import numpy as np
import pytest

import gridwarp

torch = pytest.importorskip("torch")


def case_dirs(root):
    return sorted(path for path in root.iterdir() if (path / "case.json").exists())


def load_case(path):
    spec = json.loads((path / "case.json").read_text())
    inputs = [np.load(path / entry["file"]) for entry in spec["inputs"]]
    outputs = [np.load(path / entry["file"]) for entry in spec["outputs"]]
    return spec, inputs, outputs


def assert_same_bits(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes()


def test_onnx_conformance(data_dir, tmp_path, cli_sample):
    cases = case_dirs(data_dir / "onnx")
    assert len(cases) >= 26
    for path in cases:
        spec, inputs, outputs = load_case(path)
        attributes = spec["attributes"]
        align_corners = bool(attributes["align_corners"])
        tolerance = spec["tolerance"]
        if spec["op"] == "AffineGrid":
            actual = gridwarp.affine_grid(inputs[0], [int(v) for v in inputs[1]], align_corners)
        else:
            actual = gridwarp.grid_sample(inputs[0], inputs[1], attributes["mode"], attributes["padding_mode"], align_corners)
            assert_same_bits(actual, cli_sample(tmp_path, inputs[0], inputs[1], attributes["mode"], attributes["padding_mode"],
                                                align_corners))
        np.testing.assert_allclose(actual, outputs[0], rtol=tolerance["rtol"], atol=tolerance["atol"], err_msg=path.name)


def test_torch_fixtures(data_dir):
    cases = case_dirs(data_dir / "torch")
    assert len(cases) >= 30
    for path in cases:
        spec, (x, grid), (expected,) = load_case(path)
        attributes = spec["attributes"]
        actual = gridwarp.grid_sample(x, grid, attributes["mode"], attributes["padding_mode"], bool(attributes["align_corners"]))
        if attributes["mode"] == "nearest":
            assert_same_bits(actual, expected)
        else:
            np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5, err_msg=path.name)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_torch_2d_live(mode, padding_mode, align_corners):
    generator = torch.Generator().manual_seed(7)
    x = torch.rand(2, 3, 17, 23, generator=generator)
    grid = torch.rand(2, 9, 11, 2, generator=generator) * 2.6 - 1.3
    expected = torch.nn.functional.grid_sample(x, grid, mode, padding_mode, align_corners)
    actual = gridwarp.grid_sample(x, grid, mode, padding_mode, align_corners)
    assert isinstance(actual, torch.Tensor) and actual.dtype == x.dtype
    if mode == "nearest":
        assert_same_bits(actual.numpy(), expected.numpy())
    else:
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_torch_3d_linear_live(padding_mode):
    generator = torch.Generator().manual_seed(11)
    x = torch.rand(1, 2, 9, 10, 11, generator=generator)
    grid = torch.rand(1, 5, 6, 7, 3, generator=generator) * 2.4 - 1.2
    expected = torch.nn.functional.grid_sample(x, grid, "bilinear", padding_mode, False)
    actual = gridwarp.grid_sample(x, grid, "bilinear", padding_mode)
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, atol=2e-6)


def test_affine_grid_equals_torch():
    theta = torch.tensor([[[0.9, -0.3, 0.1], [0.25, 1.1, -0.2]]], dtype=torch.float64)
    for align_corners in (False, True):
        expected = torch.nn.functional.affine_grid(theta, [1, 1, 7, 9], align_corners).numpy()
        actual = gridwarp.affine_grid(theta, (1, 1, 7, 9), align_corners)
        assert isinstance(actual, torch.Tensor) and actual.dtype == torch.float64
        np.testing.assert_allclose(actual.numpy(), expected, rtol=1e-12, atol=1e-12)


NUMPY_DTYPES = ["float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "bool", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_every_dtype_equals_the_command(dtype, mode, tmp_path, cli_sample):
    rng = np.random.default_rng(5)
    x = (rng.random((1, 2, 6, 7)) * 200 - 50)
    if dtype.startswith("complex"):
        x = x + 1j * x[..., ::-1]
    x = x.astype(dtype)
    grid = (rng.random((1, 4, 5, 2)) * 2.4 - 1.2).astype(np.float32)
    actual = gridwarp.grid_sample(x, grid, mode, "border")
    assert_same_bits(actual, cli_sample(tmp_path, x, grid, mode, "border"))


def test_3d_cubic_equals_the_command(tmp_path, cli_sample):
    rng = np.random.default_rng(3)
    x = rng.random((1, 1, 8, 9, 10), dtype=np.float32)
    grid = (rng.random((1, 4, 5, 6, 3)) * 2.2 - 1.1).astype(np.float32)
    for padding_mode in ("zeros", "border", "reflection"):
        actual = gridwarp.grid_sample(x, grid, "bicubic", padding_mode)
        assert actual.shape == (1, 1, 4, 5, 6)
        assert_same_bits(actual, cli_sample(tmp_path, x, grid, "cubic", padding_mode))


def test_beyond_onnx_modes_equal_the_command(tmp_path, cli_sample):
    rng = np.random.default_rng(4)
    x = rng.random((1, 1, 12, 13), dtype=np.float32)
    grid = (rng.random((1, 5, 6, 2)) * 2 - 1).astype(np.float32)
    for mode in ("BSpline[3]", "LanczosWindowedSinc", "Gaussian[1.5]", "GenericLabel[Linear]"):
        assert_same_bits(gridwarp.grid_sample(x, grid, mode, "zeros", fill=0.5), cli_sample(tmp_path, x, grid, mode, "zeros", fill=0.5))


def test_strided_inputs_read_in_place():
    rng = np.random.default_rng(9)
    base = rng.random((2, 3, 300, 400), dtype=np.float32)
    grid_base = (rng.random((2, 40, 30, 3)) * 2 - 1).astype(np.float32)
    views = [
        (base[:, :, ::2, 1::3], grid_base[:, :, :, :2]),
        (base.transpose(0, 1, 3, 2), grid_base[:, :, :, 1:]),
        (np.broadcast_to(base[:1], base.shape), grid_base[..., :2]),
    ]
    for view, grid in views:
        expected = gridwarp.grid_sample(np.ascontiguousarray(view), np.ascontiguousarray(grid), "bilinear", "border")
        tracemalloc.start()
        actual = gridwarp.grid_sample(view, grid, "bilinear", "border")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert_same_bits(actual, expected)
        # Only the result is allocated: the input and the grid are read where they lie.
        assert peak < actual.nbytes + 65536, (peak, view.nbytes)
    # A flipped view (negative strides) is read from a copy, with the same result.
    flipped = base[:, :, ::-1]
    assert_same_bits(gridwarp.grid_sample(flipped, grid_base[..., :2]),
                     gridwarp.grid_sample(np.ascontiguousarray(flipped), grid_base[..., :2]))


def test_torch_strided_view_is_read_in_place():
    base = torch.rand(1, 2, 64, 80, 3)  # (N, C, H, W, extra): the last axis sliced away
    view = base[..., 1].transpose(2, 3)  # non-contiguous (N, C, W, H)
    assert not view.is_contiguous()
    grid = torch.rand(1, 10, 12, 2) * 2 - 1
    expected = torch.nn.functional.grid_sample(view.contiguous(), grid, "nearest", "zeros", False).numpy()
    tracemalloc.start()
    actual = gridwarp.grid_sample(view.numpy(), grid, "nearest")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert_same_bits(actual, expected)
    assert peak < actual.nbytes + 65536
    # The memory read is the tensor's own: a change made through the tensor shows in the next result.
    view.mul_(2)
    np.testing.assert_array_equal(gridwarp.grid_sample(base[..., 1].transpose(2, 3), grid, "nearest").numpy(), expected * 2)


def test_torch_dtypes_through_dlpack():
    x = torch.arange(2 * 20, dtype=torch.float32).reshape(1, 2, 4, 5)
    grid = torch.rand(1, 3, 3, 2, dtype=torch.float64) * 2 - 1
    for dtype in (torch.float16, torch.int16, torch.uint8, torch.bool):
        typed = x.to(dtype)
        actual = gridwarp.grid_sample(typed, grid, "nearest")
        assert actual.dtype == dtype
        expected = gridwarp.grid_sample(typed.numpy(), grid.numpy(), "nearest")
        assert_same_bits(actual.numpy(), expected)
    assert gridwarp.grid_sample(x.to(torch.bool), grid, "nearest").dtype == torch.bool
    # bfloat16: NumPy has no such dtype, so the result goes into a tensor given as out.
    x16 = x.to(torch.bfloat16)
    out = torch.empty(1, 2, 3, 3, dtype=torch.bfloat16)
    assert gridwarp.grid_sample(x16, grid, "bilinear", out=out) is out
    expected = gridwarp.grid_sample(x16.float().numpy(), grid.numpy(), "bilinear")
    np.testing.assert_allclose(out.float().numpy(), expected, rtol=1e-2)
    # Without out=, a bfloat16 tensor of the result (made as a tensor, never through NumPy).
    made = gridwarp.grid_sample(x16, grid, "bilinear")
    assert made.dtype == torch.bfloat16
    assert_same_bits(made.view(torch.int16).numpy(), out.view(torch.int16).numpy())


def test_out_argument():
    rng = np.random.default_rng(2)
    x = rng.random((1, 2, 8, 9), dtype=np.float32)
    grid = (rng.random((1, 5, 4, 2)) * 2 - 1).astype(np.float32)
    expected = gridwarp.grid_sample(x, grid)
    out = np.empty((1, 2, 5, 4), np.float32)
    assert gridwarp.grid_sample(x, grid, out=out) is out
    assert_same_bits(out, expected)
    strided = np.zeros((1, 2, 5, 8), np.float32)[..., ::2]  # written through its strides
    gridwarp.grid_sample(x, grid, out=strided)
    assert_same_bits(np.ascontiguousarray(strided), expected)
    flipped = np.zeros((1, 2, 5, 4), np.float32)[:, :, ::-1]  # written through a copy
    gridwarp.grid_sample(x, grid, out=flipped)
    assert_same_bits(np.ascontiguousarray(flipped), expected)
    tensor_out = torch.zeros(1, 2, 5, 4)
    gridwarp.grid_sample(torch.from_numpy(x), grid, out=tensor_out)
    assert_same_bits(tensor_out.numpy(), expected)
    with pytest.raises(ValueError, match="shape"):
        gridwarp.grid_sample(x, grid, out=np.empty((1, 2, 4, 4), np.float32))
    with pytest.raises(TypeError, match="float64"):
        gridwarp.grid_sample(x, grid, out=np.empty((1, 2, 5, 4), np.float64))
    with pytest.raises(ValueError, match="read-only"):
        readonly = np.empty((1, 2, 5, 4), np.float32)
        readonly.flags.writeable = False
        gridwarp.grid_sample(x, grid, out=readonly)
    same = np.zeros((1, 2, 8, 9), np.float32)
    with pytest.raises(ValueError, match="shares memory"):
        gridwarp.grid_sample(same, np.zeros((1, 8, 9, 2), np.float32), out=same)


def test_errors_name_the_problem():
    x = np.zeros((1, 1, 4, 4), np.float32)
    grid = np.zeros((1, 2, 2, 2), np.float32)
    with pytest.raises(ValueError, match="mode: unknown interpolation mode 'bogus'"):
        gridwarp.grid_sample(x, grid, "bogus")
    with pytest.raises(ValueError, match="padding_mode"):
        gridwarp.grid_sample(x, grid, padding_mode="wrap")
    with pytest.raises(ValueError):
        gridwarp.grid_sample(x, np.zeros((1, 2, 2, 3), np.float32))  # three coordinates for two axes
    with pytest.raises(ValueError):
        gridwarp.grid_sample(x, np.zeros((1, 2, 2, 2), np.int32))  # an integer grid
    with pytest.raises(TypeError, match="input"):
        gridwarp.grid_sample(np.zeros((1, 1, 2, 2), "datetime64[s]"), grid)
    with pytest.raises(ValueError, match="threads"):
        gridwarp.grid_sample(x, grid, threads=-1)
    with pytest.raises(TypeError):
        gridwarp.grid_sample(x, grid, "bilinear", "zeros", False, 0.0)  # fill is keyword-only
    with pytest.raises(ValueError):
        gridwarp.affine_grid(np.zeros((1, 2, 3), np.float32), (1, 1, 4, 4, 4))


def test_gil_is_released_while_sampling():
    rng = np.random.default_rng(1)
    x = rng.random((1, 1, 256, 256, 64), dtype=np.float32)
    grid = (rng.random((1, 64, 128, 128, 3)) * 2 - 1).astype(np.float32)
    expected = gridwarp.grid_sample(x, grid, threads=1)
    results = [None, None]
    started = time.perf_counter()
    gridwarp.grid_sample(x, grid, threads=1)
    one_call = time.perf_counter() - started

    def sample(slot):
        results[slot] = gridwarp.grid_sample(x, grid, threads=1)

    workers = [threading.Thread(target=sample, args=(slot,)) for slot in range(2)]
    ticks = 0
    for worker in workers:
        worker.start()
    while any(worker.is_alive() for worker in workers):
        ticks += 1
        time.sleep(0.001)
    for result in results:
        assert_same_bits(result, expected)
    # The main thread ran while both samplers did: with the GIL held it could not have ticked.
    assert ticks >= max(5, int(one_call / 0.001) // 4), (ticks, one_call)


def test_simd_targets_listed():
    assert gridwarp.simd_target() in gridwarp.simd_targets() + ["scalar"]
    assert isinstance(gridwarp.__version__, str)


def test_strings_as_onnx_string_tensors(tmp_path, cli_sample):
    words = np.array([[["ab", "c"], ["", "dé"]]], dtype=object)[None]  # (1, 1, 2, 2)... as (N, C, H, W)
    words = words.reshape(1, 1, 2, 2)
    grid = np.array([[[[-1, -1], [1, 1]], [[0.9, -0.9], [3, 3]]]], np.float32)  # corners, and one point outside
    actual = gridwarp.grid_sample(words, grid, "nearest", align_corners=True)
    assert actual.dtype == object
    assert actual.tolist() == [[[["ab", "dé"], ["c", ""]]]]
    assert gridwarp.grid_sample(words.astype(str), grid, "nearest", align_corners=True).tolist() == actual.tolist()
    with pytest.raises(ValueError):
        gridwarp.grid_sample(words, grid, "bilinear")


def test_torch_in_torch_out_shares_nothing_and_copies_nothing():
    """A tensor in gives a tensor out of its dtype; the result is new memory, and the input was read
    where it lies (a change made through it shows in the next result)."""
    x = torch.rand(1, 3, 40, 50, dtype=torch.float64)
    grid = torch.rand(1, 20, 30, 2, dtype=torch.float64) * 2 - 1
    result = gridwarp.grid_sample(x, grid, "bilinear")
    assert isinstance(result, torch.Tensor) and result.dtype == torch.float64 and tuple(result.shape) == (1, 3, 20, 30)
    x_bytes = (x.data_ptr(), x.data_ptr() + x.nelement() * x.element_size())
    r_bytes = (result.data_ptr(), result.data_ptr() + result.nelement() * result.element_size())
    assert r_bytes[1] <= x_bytes[0] or x_bytes[1] <= r_bytes[0]
    np.testing.assert_allclose(result.numpy(), torch.nn.functional.grid_sample(x, grid, "bilinear", "zeros", False).numpy(), atol=1e-12)
    x.mul_(3)
    np.testing.assert_allclose(gridwarp.grid_sample(x, grid, "bilinear").numpy(), result.numpy() * 3, rtol=1e-12)


def test_tensors_that_require_grad_are_refused_unless_autograd_is_off():
    x = torch.rand(1, 1, 6, 7, requires_grad=True)
    grid = torch.rand(1, 4, 5, 2) * 2 - 1
    with pytest.raises(ValueError, match="requires grad.*detach"):
        gridwarp.grid_sample(x, grid)
    with pytest.raises(ValueError, match="grid requires grad"):
        gridwarp.grid_sample(x.detach(), grid.requires_grad_())
    with torch.no_grad():
        result = gridwarp.grid_sample(x, grid.detach())
    expected = torch.nn.functional.grid_sample(x.detach(), grid.detach(), "bilinear", "zeros", False)
    np.testing.assert_allclose(result.numpy(), expected.numpy(), rtol=1e-5, atol=2e-6)
    with pytest.raises(ValueError, match="theta requires grad"):
        gridwarp.affine_grid(torch.eye(2, 3)[None].requires_grad_(), (1, 1, 4, 5))
