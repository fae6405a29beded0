"""The Python functions validate as the command does (issue 57): one-line ValueError/TypeError with
the command's message, never a dead interpreter or another library's exception."""
import ctypes
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import gridwarp

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "data"


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class HandMadeDLPack:
    """A DLPack producer whose capsule declares whatever shape it is given, over 64 bytes of float32."""

    def __init__(self, shape):
        self.buffer = np.zeros(16, np.float32)
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.managed = _DLManagedTensor()
        tensor = self.managed.dl_tensor
        tensor.data = self.buffer.ctypes.data
        tensor.device = _DLDevice(1, 0)  # kDLCPU
        tensor.ndim = len(shape)
        tensor.dtype = _DLDataType(2, 32, 1)  # float32
        tensor.shape = self.shape

    def __dlpack__(self, stream=None):
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new_capsule(ctypes.addressof(self.managed), b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)


def test_dlpack_extents_are_checked():
    grid = np.zeros((1, 2, 2, 2), np.float32)
    with pytest.raises(ValueError, match="input: the DLPack tensor has a negative extent"):
        gridwarp.grid_sample(HandMadeDLPack([1, 1, -4, 4]), grid)
    with pytest.raises(ValueError, match="more than 2\\^62 bytes"):
        gridwarp.grid_sample(HandMadeDLPack([1, 1, 2 ** 40, 2 ** 40]), grid)
    # The same producer with a true shape is read in place.
    out = gridwarp.grid_sample(HandMadeDLPack([1, 1, 4, 4]), grid)
    assert out.shape == (1, 1, 2, 2)


def test_sizes_and_threads_as_the_command_takes_them():
    theta = np.eye(2, 3, dtype=np.float32)[None]
    # The interpreter must survive these: each used to end it.
    with pytest.raises(ValueError, match="^size: .*more than 2\\^62 bytes"):
        gridwarp.affine_grid(theta, [1, 1, 2 ** 62, 2])
    x, grid = np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 4, 4, 2), np.float32)
    with pytest.raises(ValueError, match="threads: 100000 is more than 4096"):
        gridwarp.grid_sample(x, grid, threads=100000)
    with pytest.raises(ValueError, match="threads: -1 is negative"):
        gridwarp.grid_sample(x, grid, threads=-1)


def test_gaussian_work_is_bounded_as_the_command_bounds_it():
    # Gaussian[200, 1]: 401^2 taps per point, 160801 x 120 x 160 = 3.1e9 in all, over max_taps 2^30.
    x, grid = np.zeros((1, 1, 120, 160), np.float32), np.zeros((1, 120, 160, 2), np.float32)
    with pytest.raises(ValueError, match="^mode Gaussian\\[200,1\\] reads 160801 values per output value.*max_taps"):
        gridwarp.grid_sample(x, grid, mode="Gaussian[200,1]", max_taps=2 ** 30)
    assert gridwarp.grid_sample(x[:, :, :4, :4], grid[:, :2, :2], mode="Gaussian[200,1]").shape == (1, 1, 2, 2)
    assert gridwarp.grid_sample(x, grid, mode="Gaussian").shape == (1, 1, 120, 160)


def test_affine_grid_overflow_in_a_child_interpreter():
    # A crash would show as a signal, not as the exception's message.
    code = ("import gridwarp, numpy as np\n"
            "try:\n gridwarp.affine_grid(np.eye(2, 3, dtype=np.float32)[None], [1, 1, 2 ** 62, 2])\n"
            "except ValueError as e:\n print('refused')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "refused"


def test_a_tensor_that_requires_grad_is_named():
    torch = pytest.importorskip("torch")
    x = torch.zeros(1, 1, 4, 4, requires_grad=True)
    with pytest.raises(ValueError, match="input requires grad.*input.detach\\(\\)"):
        gridwarp.grid_sample(x, torch.zeros(1, 4, 4, 2))
    assert gridwarp.grid_sample(x.detach(), torch.zeros(1, 4, 4, 2)).shape == (1, 1, 4, 4)


def test_file_function_messages_are_one_line(tmp_path):
    out = tmp_path / "out.png"
    with pytest.raises(ValueError) as refused:
        gridwarp.affine(SAMPLES / "card.png", out, rotate="1\n2")
    assert "\n" not in str(refused.value) and "1\\n2" in str(refused.value)
    with pytest.raises(ValueError, match="--help is not an option of an in-process run: see 'gridwarp affine --help'"):
        gridwarp.affine(SAMPLES / "card.png", out, help=True)
    with pytest.raises(ValueError, match="--compression-level: Value 99 not in range"):
        gridwarp.affine(SAMPLES / "card.png", out, rotate=3, compression_level=99)
    assert not out.exists()


def test_hostile_files_raise_and_the_interpreter_lives(tmp_path):
    hostile = pathlib.Path(__file__).resolve().parents[1] / "data" / "hostile"
    with pytest.raises(ValueError, match="png_second_ihdr.png: corrupt PNG: a second IHDR chunk"):
        gridwarp.read(hostile / "png_second_ihdr.png")
    with pytest.raises(ValueError, match=r"h5_mutant_segfault.h5: HDF5 crashed on it \(Segmentation fault\)"):
        gridwarp.resample(SAMPLES / "brain.nii.gz", tmp_path / "out.nii", transforms=[hostile / "h5_mutant_segfault.h5"])
    with pytest.raises(ValueError, match="h5_external_storage_passwd.h5: .* keeps its data in external files"):
        gridwarp.resample(SAMPLES / "brain.nii.gz", tmp_path / "out.nii", transforms=[hostile / "h5_external_storage_passwd.h5"])
    assert not (tmp_path / "out.nii").exists()
