from typing import Any, Optional, Sequence

import numpy as np
import numpy.typing as npt

__version__: str

# Anything with a NumPy or DLPack view of CPU memory: numpy.ndarray, torch.Tensor, ...
ArrayLike = Any

def grid_sample(
    input: ArrayLike,
    grid: ArrayLike,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool = False,
    *,
    fill: float = 0.0,
    threads: Optional[int] = None,
    out: Optional[ArrayLike] = None,
) -> Any: ...
def affine_grid(theta: ArrayLike, size: Sequence[int], align_corners: bool = False) -> npt.NDArray[Any]: ...
def simd_targets() -> list[str]: ...
def simd_target() -> str: ...
