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
    max_taps: int = 2**34,
) -> Any: ...
def affine_grid(theta: ArrayLike, size: Sequence[int], align_corners: bool = False) -> Any: ...  # theta's kind of array
def simd_targets() -> list[str]: ...
def simd_target() -> str: ...

PathLike = Any  # str or os.PathLike
FileLike = Any  # a path or an Image

# The gridwarp commands of the same names, run in this process; options are their long options
# with "_" for "-" (docs/cli.md). With an output path each writes it and returns the path;
# without one it returns the result as an Image.
def affine(input: FileLike, output: Optional[PathLike] = None, **options: Any) -> Any: ...
def resize(input: FileLike, output: Optional[PathLike] = None, **options: Any) -> Any: ...
def flow(input: FileLike, flow: PathLike, output: Optional[PathLike] = None, **options: Any) -> Any: ...
def resample(
    moving: FileLike,
    output: Optional[PathLike] = None,
    reference: Optional[FileLike] = None,
    transforms: Sequence[PathLike] | PathLike = (),
    **options: Any,
) -> Any: ...
def reorient(input: FileLike, output: Optional[PathLike] = None, to: str = "RAS", **options: Any) -> Any: ...
def jacobian(
    reference: FileLike,
    transforms: Sequence[PathLike] | PathLike,
    output: Optional[PathLike] = None,
    moving: Optional[FileLike] = None,
    **options: Any,
) -> Any: ...
def convert_transform(
    transforms: Sequence[PathLike] | PathLike,
    output: PathLike,
    reference: Optional[FileLike] = None,
    moving: Optional[FileLike] = None,
    **options: Any,
) -> str: ...

class Image:
    """A file's pixels with its geometry and header, as read() gives them."""
    def __init__(
        self,
        array: ArrayLike,  # (N, C, D1..Dr), copied
        *,
        spacing: Optional[Sequence[float]] = None,  # LPS mm, innermost axis first
        origin: Optional[Sequence[float]] = None,
        direction: Optional[Sequence[float]] = None,  # row-major r x r
        affine: Optional[ArrayLike] = None,  # nibabel's (r+1) x (r+1): voxel index to RAS mm
    ) -> None: ...
    @staticmethod
    def from_nibabel(image: Any) -> "Image": ...  # a nibabel Nifti1Image / Nifti2Image
    def to_nibabel(self) -> Any: ...  # a nibabel Nifti1Image (Nifti2Image for NIfTI-2)
    @property
    def array(self) -> npt.NDArray[Any]: ...  # (N, C, D1..Dr), a view of the file's pixels
    @property
    def kind(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def spatial_shape(self) -> list[int]: ...
    @property
    def channels(self) -> int: ...
    @property
    def channel_order(self) -> str: ...
    @property
    def geometry(self) -> Optional[dict[str, list[float]]]: ...
    @property
    def nifti(self) -> Optional[dict[str, Any]]: ...
    @property
    def warnings(self) -> list[str]: ...
    def with_array(self, array: ArrayLike) -> "Image": ...  # any dtype and shape (N, C, D1..Dr)

def map_points(
    points: ArrayLike,
    transforms: Sequence[str],
    *,
    space: str = "ras",
    from_moving: bool = False,
    reference: Optional[PathLike] = None,
    moving: Optional[PathLike] = None,
    tolerance: float = 1e-5,
    threads: Optional[int] = None,
) -> npt.NDArray[np.float64]: ...
def read(
    path: PathLike,
    *,
    nifti_geometry: str = "standard",
    keep_orientation: bool = False,
    max_memory: Optional[int] = None,
    threads: Optional[int] = None,
) -> Image: ...
def write(
    image: Image,
    path: PathLike,
    *,
    compression_level: Optional[int] = None,
    quality: Optional[int] = None,
    threads: Optional[int] = None,
) -> None: ...
