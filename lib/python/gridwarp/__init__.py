"""gridwarp: exact N-D grid sampling (ONNX GridSample and AffineGrid) on NumPy arrays and tensors.

grid_sample and affine_grid read their inputs in place (NumPy arrays through their strides, other
CPU arrays through DLPack), release the GIL while they sample, and return NumPy arrays. affine,
resize, flow and resample run the gridwarp commands of the same names on files, in this process,
with the commands' defaults and checks. docs/python.md has examples.
"""

from ._gridwarp import __version__, affine_grid, grid_sample, simd_target, simd_targets

__all__ = ["affine", "affine_grid", "flow", "grid_sample", "resample", "resize", "simd_target", "simd_targets"]

import os as _os

from . import _gridwarp


def _text(value):
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return _os.fspath(value) if isinstance(value, _os.PathLike) else str(value)


def _run(command, required, options):
    """Runs `gridwarp COMMAND` in this process: options are its long options, '_' for '-'."""
    if not hasattr(_gridwarp, "_run_command"):
        raise RuntimeError("this build of gridwarp has no file functions (built without the io library)")
    args = [command]
    for flag, value in required:
        args += [flag, _text(value)]
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        else:
            args += [flag, _text(value)]
    _gridwarp._run_command(args)


def affine(input, output, **options):
    """gridwarp affine: warps an image or volume file by a matrix, a rotation or a size.

    Options are the command's long options with '_' for '-': theta=, matrix=, inverse=True,
    rotate=, scale=, shift=(x, y), size=(w, h), crop=, mode=, padding=, fill=, align_corners=True,
    antialias=, threads=, ... (docs/cli.md). Writes `output` and returns its path.
    """
    _run("affine", [("--input", input), ("--output", output)], options)
    return _os.fspath(output)


def resize(input, output, **options):
    """gridwarp resize: resamples a file to size=(w, h[, d]), scale= or voxel_size= (docs/cli.md)."""
    _run("resize", [("--input", input), ("--output", output)], options)
    return _os.fspath(output)


def flow(input, flow, output, **options):
    """gridwarp flow: warps a file by a flow field file (units=, absolute=True, mode=, ...; docs/cli.md)."""
    _run("flow", [("--input", input), ("--flow", flow), ("--output", output)], options)
    return _os.fspath(output)


def resample(moving, output, reference=None, transforms=(), **options):
    """gridwarp resample: puts `moving` onto `reference`'s grid through `transforms`.

    transforms are listed as antsApplyTransforms takes them (the first acts first on output
    points): file names, "FILE,inverse", or ITK, FSL (",fsl"), LTA, AFNI files and displacement
    fields (docs/resample.md). Other options: mode=, padding= ("itk" for antsApplyTransforms'
    edges), fill=, output_type=, antialias=, nifti_geometry=, threads=, ...
    Writes `output` and returns its path.
    """
    required = [("--input", moving), ("--output", output)]
    if reference is not None:
        required.append(("--reference", reference))
    if isinstance(transforms, (str, _os.PathLike)):
        transforms = [transforms]
    required += [("--transform", t) for t in transforms]
    _run("resample", required, options)
    return _os.fspath(output)
