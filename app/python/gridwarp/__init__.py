"""gridwarp: exact N-D grid sampling (ONNX GridSample and AffineGrid) on NumPy arrays and tensors.

grid_sample and affine_grid read their inputs in place (NumPy arrays through their strides, other
CPU arrays through DLPack), release the GIL while they sample, and return the kind of array they were
given (NumPy for NumPy, a torch tensor for a tensor). affine,
resize, flow and resample run the gridwarp commands of the same names on files, in this process,
with the commands' defaults and checks; read and write move files to and from Image objects (an
array view with the file's geometry and header). docs/python.md has examples.
"""

import os as _os
import sys as _sys

from ._gridwarp import __version__, simd_target, simd_targets

__all__ = ["Image", "affine", "affine_grid", "convert_transform", "flow", "grid_sample", "jacobian", "map_points", "read", "reorient",
           "resample", "resize", "simd_target", "simd_targets", "write"]

try:  # built where the io library is
    from ._gridwarp import Image, map_points, read, write
except ImportError:
    pass

from . import _gridwarp

from numpy import ndarray as _ndarray

_compiled_grid_sample = _gridwarp.grid_sample

def _is_nibabel_nifti(value):
    return type(value).__module__.startswith("nibabel.") and hasattr(value, "dataobj") and \
        type(value).__name__ in ("Nifti1Image", "Nifti2Image", "Nifti1Pair", "Nifti2Pair")


def _from_nibabel(image):
    """An Image of a nibabel NIfTI image, in memory: its header (sform, qform, codes, zooms, units,
    intent, descrip) and values as gridwarp would read the file nibabel writes of it."""
    import numpy as np
    if not _is_nibabel_nifti(image):
        raise TypeError(f"a nibabel NIfTI image (Nifti1Image, Nifti2Image), got {type(image).__name__}")
    current = type(image)(image.dataobj, image.affine, image.header)  # the header brought up to date with the affine
    header = current.header
    if header["magic"] in (b"n+1", b"n+2"):  # where a single file's voxels start (nibabel sets it when it writes)
        header["vox_offset"] = 352 if header["magic"] == b"n+1" else 544
    slope, inter = header.get_slope_inter()
    scaled = slope is not None and not (slope == 1 and (inter is None or inter == 0))
    values = np.asarray(image.get_fdata(dtype=np.float64) if scaled else np.asanyarray(image.dataobj), order="A")
    if not scaled:
        values = values.astype(header.get_data_dtype(), copy=False)
    # nibabel's axes are x first: reversed, the same memory is gridwarp's voxel order (x fastest).
    return _gridwarp._image_from_nifti(header.binaryblock, np.ascontiguousarray(values.T))


def _to_nibabel(self):
    """This image as a nibabel Nifti1Image (Nifti2Image where gridwarp would write NIfTI-2), with
    the header gridwarp's NIfTI writer gives it (sform, qform, codes, zooms, units, intent) and its
    values (no copy where the layout allows)."""
    import io
    import nibabel as nib
    import numpy as np
    raw = _gridwarp._nifti_header_bytes(self)
    image_class = nib.Nifti2Image if int.from_bytes(raw[:4], "little") == 540 else nib.Nifti1Image
    header = image_class.header_class.from_fileobj(io.BytesIO(raw))
    values = self.array[0]  # (C, D1..Dr), x last
    if self.channels > 1 and header.get_data_dtype().fields is not None:
        raise ValueError("to_nibabel: RGB images are not converted; write them to a file")
    data = values.T.reshape(header.get_data_shape(), order="F")
    converted = image_class(data, header.get_best_affine(), header)  # the same affine: nibabel keeps the header's transforms
    if self.nifti is not None or self.geometry is not None:
        converted.header.set_slope_inter(*header.get_slope_inter())
    return converted



def _array_module(value):
    """The module of an array other than NumPy's that exchanges memory through DLPack, else None."""
    if type(value).__module__ == "numpy" or not hasattr(value, "__dlpack__"):
        return None
    return _sys.modules.get(type(value).__module__.split(".")[0])


def _without_grad(value, role):
    """`value`, refused if it is a tensor that requires grad while autograd is on (the result could
    not carry a gradient); under torch.no_grad(), its detached view (the same memory)."""
    if getattr(value, "requires_grad", False) is not True:
        return value
    if getattr(_sys.modules.get("torch"), "is_grad_enabled", lambda: True)():
        raise ValueError(f"{role} requires grad: gridwarp does not differentiate its sampling; pass {role}.detach(), "
                         "or call it under torch.no_grad()")
    return value.detach()


def _same_kind(result, template):
    """A NumPy result as the kind of array `template` is: a torch tensor for a tensor, through the
    array module's from_dlpack for other DLPack arrays (no copy either way), else as it is."""
    module = _array_module(template)
    if module is None:
        return result
    if module.__name__ == "torch":
        return module.from_numpy(result)
    from_dlpack = getattr(module, "from_dlpack", None)
    return from_dlpack(result) if from_dlpack is not None else result


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=False, *, fill=0.0, threads=None, out=None,
                max_taps=2**34):
    if type(input) is _ndarray and type(grid) is _ndarray:  # NumPy in, NumPy out: nothing to decide
        return _compiled_grid_sample(input, grid, mode, padding_mode, align_corners, fill, threads, out, max_taps)
    input, grid = _without_grad(input, "input"), _without_grad(grid, "grid")
    module = _array_module(input)
    if out is None and module is not None and module.__name__ == "torch" and input.dim() >= 3 and grid.dim() == input.dim():
        # The result made as a tensor of the input's dtype (bfloat16 included, which NumPy lacks).
        out = module.empty(tuple(input.shape[:2]) + tuple(grid.shape[1:-1]), dtype=input.dtype)
    result = _compiled_grid_sample(input, grid, mode, padding_mode, align_corners, fill, threads, out, max_taps)
    return result if out is not None else _same_kind(result, input)


def affine_grid(theta, size, align_corners=False):
    theta = _without_grad(theta, "theta")
    return _same_kind(_gridwarp.affine_grid(theta, size, align_corners), theta)


grid_sample.__doc__ = _gridwarp.grid_sample.__doc__.replace(
    "Returns a NumPy array (N, C, O1..Or) of the input's dtype. ",
    "Returns (N, C, O1..Or) of the input's dtype, the same kind of array as the input: a NumPy array\n"
    "for NumPy's, a torch tensor for a tensor (bfloat16 included), another DLPack array through its\n"
    "module's from_dlpack. A tensor that requires grad is refused while autograd is on (ValueError):\n"
    "detach it, or call under torch.no_grad(). ")
affine_grid.__doc__ = _gridwarp.affine_grid.__doc__.replace(
    "Returns a NumPy array (N, O1..Or, r) of theta's dtype.",
    "Returns (N, O1..Or, r) of theta's dtype, the same kind of array as theta (as grid_sample).")


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return _os.fspath(value) if isinstance(value, _os.PathLike) else str(value)


def _run(command, files, options, output, repeated=()):
    """Runs `gridwarp COMMAND` in this process on options by name ('_' for '-'), without a command line.

    files: (option, path or Image) pairs; an Image is sampled where it is, in memory. Each value
    goes through its option's conversion and checks, as on the command line. output=None returns
    the result as an Image, kept in memory."""
    if not hasattr(_gridwarp, "_run_command"):
        raise RuntimeError("this build of gridwarp has no file functions (built without the io library)")
    named, images = [], {}
    for option, value in files:
        if _is_nibabel_nifti(value):
            value = _from_nibabel(value)
        if isinstance(value, Image):
            images[option] = value
        else:
            named.append((option, [_text(value)]))
    if output is not None:
        named.append(("output", [_text(output)]))
    for name, value in options.items():
        if value is None:
            continue
        option = name.replace("_", "-")
        if option in repeated and isinstance(value, (list, tuple)):
            named.append((option, [_text(v) for v in value]))
        else:
            named.append((option, [_text(value)]))
    verbose = options.get("verbose") is True
    result = _gridwarp._run_command(command, named, images, output is None, verbose)
    if output is not None:
        return _os.fspath(output)
    # The kind of image it was given: a nibabel image for a nibabel image.
    return result.to_nibabel() if files and _is_nibabel_nifti(files[0][1]) else result


_FILES = """Files are paths or Image objects (gridwarp.read's, sampled in memory: no file is
    written for them). With output=None the result comes back as an Image, kept in memory;
    otherwise it is written to `output`, whose path is returned."""


def affine(input, output=None, **options):
    """gridwarp affine: warps an image or volume by a matrix, a rotation or a size.

    Options are the command's long options with '_' for '-': theta=, matrix=, inverse=True,
    rotate=, scale=, shift=(x, y), size=(w, h), crop=, mode=, padding=, fill=, align_corners=True,
    antialias=, threads=, ... (docs/cli.md). FILES
    """
    return _run("affine", [("input", input)], options, output)


def resize(input, output=None, **options):
    """gridwarp resize: resamples to size=(w, h[, d]), scale= or voxel_size= (docs/cli.md). FILES"""
    return _run("resize", [("input", input)], options, output)


def flow(input, flow, output=None, **options):
    """gridwarp flow: warps by a flow field file (units=, absolute=True, mode=, ...; docs/cli.md). FILES"""
    return _run("flow", [("input", input), ("flow", flow)], options, output)


def resample(moving, output=None, reference=None, transforms=(), **options):
    """gridwarp resample: puts `moving` onto `reference`'s grid through `transforms`.

    transforms are listed as antsApplyTransforms takes them (the first acts first on output
    points): file names, "FILE,inverse", or ITK, FSL (",fsl"), LTA, AFNI files and displacement
    fields (docs/resample.md). Other options: mode=, padding= ("itk" for antsApplyTransforms'
    edges), fill=, output_type=, antialias=, nifti_geometry=, threads=, ... FILES
    """
    files = [("input", moving)]
    if reference is not None:
        files.append(("reference", reference))
    if isinstance(transforms, (str, _os.PathLike)):
        transforms = [transforms]
    if any(isinstance(t, Image) for t in transforms):
        raise TypeError("transforms: give files (a transform is read by its format's conventions)")
    if transforms:
        options["transform"] = list(transforms)
    return _run("resample", files, options, output, repeated=("transform",))


def reorient(input, output=None, to="RAS", **options):
    """gridwarp reorient: the voxel axes permuted and flipped to point as `to` says ("RAS", "LPS",
    "LIA", ... or "like:FILE"), nothing interpolated: the same values at the same world positions. FILES
    """
    options["to"] = to
    return _run("reorient", [("input", input)], options, output)


def _transform_list(transforms):
    if isinstance(transforms, (str, _os.PathLike)):
        transforms = [transforms]
    if any(isinstance(t, Image) for t in transforms):
        raise TypeError("transforms: give files (a transform is read by its format's conventions)")
    return [_text(t) for t in transforms]


def jacobian(reference, transforms, output=None, moving=None, **options):
    """gridwarp jacobian: the determinant of the chain's spatial Jacobian at every voxel of `reference`.

    transforms as resample takes them (the first acts first); moving= only for transforms defined
    through the moving image (FSL, LTA). log=True writes its natural log (NaN where it is not
    positive); threads=, ... FILES
    """
    files = [("reference", reference)]
    if moving is not None:
        files.append(("moving", moving))
    options["transform"] = _transform_list(transforms)
    return _run("jacobian", files, options, output, repeated=("transform",))


def convert_transform(transforms, output, reference=None, moving=None, **options):
    """gridwarp convert-transform: writes the chain `transforms` (the first acting first) to `output`.

    A linear chain to a matrix file ("out.tfm", "out.mat,fsl", "reg.lta", ...); any chain to a
    displacement field on `reference`'s grid when `output` names a volume: "field.nii.gz" (ITK's
    layout) or "field.nii.gz,KIND" with KIND fsl (needs moving=), mrtrix, spm or world
    (docs/cli.md). reference and moving may be paths or Images. Returns `output`'s path.
    """
    files = []
    if reference is not None:
        files.append(("reference", reference))
    if moving is not None:
        files.append(("moving", moving))
    options["transform"] = _transform_list(transforms)
    if output is None:
        raise TypeError("convert_transform writes a file: give output")
    return _run("convert-transform", files, options, output, repeated=("transform",))


for _function in (affine, resize, flow, resample, jacobian, reorient):
    _function.__doc__ = _function.__doc__.replace("FILES", _FILES)

if "Image" in globals():
    Image.to_nibabel = _to_nibabel
    Image.from_nibabel = staticmethod(_from_nibabel)
    Image.from_nibabel.__doc__ = _from_nibabel.__doc__
