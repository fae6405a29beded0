"""gridwarp: exact N-D grid sampling (ONNX GridSample and AffineGrid) on NumPy arrays and tensors.

The functions read their inputs in place (NumPy arrays through their strides, other CPU arrays
through DLPack), release the GIL while they sample, and return NumPy arrays. docs/python.md
has examples.
"""

from ._gridwarp import __version__, affine_grid, grid_sample, simd_target, simd_targets

__all__ = ["affine_grid", "grid_sample", "simd_target", "simd_targets"]
