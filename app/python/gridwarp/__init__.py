"""gridwarp: exact N-D grid sampling (ONNX GridSample and AffineGrid) on NumPy arrays and tensors.

grid_sample and affine_grid read their inputs in place (NumPy arrays through their strides, other
CPU arrays through DLPack), release the GIL while they sample, and return NumPy arrays. affine,
resize, flow and resample run the gridwarp commands of the same names on files, in this process,
with the commands' defaults and checks; read and write move files to and from Image objects (an
array view with the file's geometry and header). docs/python.md has examples.
"""

import os as _os
import tempfile as _tempfile

from ._gridwarp import __version__, affine_grid, grid_sample, simd_target, simd_targets

__all__ = ["Image", "affine", "affine_grid", "flow", "grid_sample", "read", "resample", "resize", "simd_target", "simd_targets", "write"]

try:  # built where the io library is
    from ._gridwarp import Image, read, write
except ImportError:
    pass

from . import _gridwarp


def _text(value):
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return _os.fspath(value) if isinstance(value, _os.PathLike) else str(value)


# The lossless file type an Image goes through, by the format it was read from.
_PASSING_EXTENSIONS = {"nifti": ".nii", "npy": ".npy", "nrrd": ".nrrd", "metaimage": ".mha", "jpg": ".png", "jpeg": ".png"}


def _run(command, required, options, output):
    """Runs `gridwarp COMMAND` in this process: options are its long options, '_' for '-'.

    Image objects among the files go through a temporary file; output=None returns the result
    as an Image (read back from one)."""
    if not hasattr(_gridwarp, "_run_command"):
        raise RuntimeError("this build of gridwarp has no file functions (built without the io library)")
    with _tempfile.TemporaryDirectory(prefix="gridwarp-") as folder:
        def passed(value, name):
            if not isinstance(value, Image):
                return value
            path = _os.path.join(folder, name + _PASSING_EXTENSIONS.get(value.format, "." + value.format))
            write(value, path)
            return path

        first_image = next((value for _, value in required if isinstance(value, Image)), None)
        args = [command]
        for k, (flag, value) in enumerate(required):
            args += [flag, _text(passed(value, f"input{k}"))]
        target = output
        if output is None:
            like = first_image if first_image is not None else next(value for flag, value in required if flag == "--input")
            suffix = _PASSING_EXTENSIONS.get(like.format, "." + like.format) if isinstance(like, Image) else _suffix(like)
            target = _os.path.join(folder, "output" + suffix)
        args += ["--output", _text(target)]
        for name, value in options.items():
            if value is None or value is False:
                continue
            flag = "--" + name.replace("_", "-")
            if value is True:
                args.append(flag)
            else:
                args += [flag, _text(value)]
        _gridwarp._run_command(args)
        return _os.fspath(output) if output is not None else read(target)


def _suffix(path):
    name = _os.fspath(path).lower()
    for double in (".nii.gz", ".img.gz"):
        if name.endswith(double):
            return double
    return _os.path.splitext(name)[1]


_FILES = """Files are paths or Image objects (gridwarp.read's; they go through a temporary file).
    With output=None the result comes back as an Image; otherwise it is written to `output`,
    whose path is returned."""


def affine(input, output=None, **options):
    """gridwarp affine: warps an image or volume by a matrix, a rotation or a size.

    Options are the command's long options with '_' for '-': theta=, matrix=, inverse=True,
    rotate=, scale=, shift=(x, y), size=(w, h), crop=, mode=, padding=, fill=, align_corners=True,
    antialias=, threads=, ... (docs/cli.md). FILES
    """
    return _run("affine", [("--input", input)], options, output)


def resize(input, output=None, **options):
    """gridwarp resize: resamples to size=(w, h[, d]), scale= or voxel_size= (docs/cli.md). FILES"""
    return _run("resize", [("--input", input)], options, output)


def flow(input, flow, output=None, **options):
    """gridwarp flow: warps by a flow field file (units=, absolute=True, mode=, ...; docs/cli.md). FILES"""
    return _run("flow", [("--input", input), ("--flow", flow)], options, output)


def resample(moving, output=None, reference=None, transforms=(), **options):
    """gridwarp resample: puts `moving` onto `reference`'s grid through `transforms`.

    transforms are listed as antsApplyTransforms takes them (the first acts first on output
    points): file names, "FILE,inverse", or ITK, FSL (",fsl"), LTA, AFNI files and displacement
    fields (docs/resample.md). Other options: mode=, padding= ("itk" for antsApplyTransforms'
    edges), fill=, output_type=, antialias=, nifti_geometry=, threads=, ... FILES
    """
    required = [("--input", moving)]
    if reference is not None:
        required.append(("--reference", reference))
    if isinstance(transforms, (str, _os.PathLike)):
        transforms = [transforms]
    required += [("--transform", t) for t in transforms]
    return _run("resample", required, options, output)


for _function in (affine, resize, flow, resample):
    _function.__doc__ = _function.__doc__.replace("FILES", _FILES)
