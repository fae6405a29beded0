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

PathLike = Any  # str or os.PathLike

# The gridwarp commands of the same names, run in this process; options are their long options
# with "_" for "-" (docs/cli.md). Each writes `output` and returns its path.
def affine(input: PathLike, output: PathLike, **options: Any) -> str: ...
def resize(input: PathLike, output: PathLike, **options: Any) -> str: ...
def flow(input: PathLike, flow: PathLike, output: PathLike, **options: Any) -> str: ...
def resample(
    moving: PathLike,
    output: PathLike,
    reference: Optional[PathLike] = None,
    transforms: Sequence[PathLike] | PathLike = (),
    **options: Any,
) -> str: ...
