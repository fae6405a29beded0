"""nibabel interop: Image.from_nibabel / Image.to_nibabel against nibabel's own reading and writing
of the same NIfTI files, and nibabel images through the file functions, in memory."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import gridwarp

nib = pytest.importorskip("nibabel")

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "data"


def oblique_affine():
    a = np.radians(14.0)
    turn = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    affine = np.eye(4)
    affine[:3, :3] = turn @ np.diag([0.9, 1.1, 1.7])
    affine[:3, 3] = [-30.5, 12.25, -8.0]
    return affine


def made_images():
    """NIfTI images as nibabel makes them in memory: codes, units, intents, scaling, 4-D and 5-D."""
    rng = np.random.default_rng(3)
    images = {}
    volume = nib.Nifti1Image(rng.random((9, 8, 7)).astype(np.float32), oblique_affine())
    volume.header.set_sform(oblique_affine(), 4)
    volume.header.set_qform(oblique_affine(), 1)
    volume.header["descrip"] = b"made by nibabel"
    images["oblique float32, sform 4, qform 1"] = volume
    series = nib.Nifti1Image(rng.integers(-500, 500, (6, 5, 4, 3)).astype(np.int16), oblique_affine())
    series.header.set_xyzt_units("mm", "msec")
    series.header["pixdim"][4] = 1500.0
    images["int16 series, TR in ms"] = series
    field = nib.Nifti1Image(rng.standard_normal((5, 6, 4, 1, 3)).astype(np.float32), oblique_affine())
    field.header.set_intent(1007)
    images["vector field, intent 1007"] = field
    scaled = nib.Nifti1Image(rng.integers(0, 1000, (7, 6, 5)).astype(np.int16), oblique_affine())
    scaled.header.set_slope_inter(0.5, 10.0)
    images["int16 scaled 0.5, +10"] = scaled
    images["nifti-2 uint8"] = nib.Nifti2Image(rng.integers(0, 255, (5, 4, 3)).astype(np.uint8), oblique_affine())
    return images


def same_header_fields(ours, theirs):
    np.testing.assert_allclose(ours.affine, theirs.affine, atol=1e-5)
    assert int(ours.header["sform_code"]) == int(theirs.header["sform_code"])
    assert int(ours.header["qform_code"]) == int(theirs.header["qform_code"])
    np.testing.assert_allclose(ours.header.get_sform(), theirs.header.get_sform(), atol=1e-5)
    np.testing.assert_allclose(ours.header.get_qform(), theirs.header.get_qform(), atol=1e-5)
    np.testing.assert_allclose(ours.header.get_zooms(), theirs.header.get_zooms(), rtol=1e-6)
    assert ours.header.get_xyzt_units() == theirs.header.get_xyzt_units()
    assert ours.header.get_intent()[0] == theirs.header.get_intent()[0]
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours.get_fdata(), theirs.get_fdata(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(made_images()))
def test_from_nibabel_written_reads_back_in_nibabel_as_the_original(name, tmp_path):
    original = made_images()[name]
    path = tmp_path / "from_nibabel.nii.gz"
    gridwarp.write(gridwarp.Image.from_nibabel(original), path)
    written = nib.load(path)
    same_header_fields(written, original)
    assert written.header["descrip"] == original.header["descrip"]


@pytest.mark.parametrize("name", list(made_images()))
def test_to_nibabel_equals_nibabels_reading_of_gridwarps_file(name, tmp_path):
    path = tmp_path / "gridwarp.nii"
    gridwarp.write(gridwarp.Image.from_nibabel(made_images()[name]), path)
    ours = gridwarp.read(path).to_nibabel()
    assert isinstance(ours, type(made_images()[name]))
    same_header_fields(ours, nib.load(path))


def test_a_file_of_another_program_round_trips():
    original = nib.load(SAMPLES / "brain.nii.gz")  # SPM's, big-endian, codes 2
    same_header_fields(gridwarp.Image.from_nibabel(original).to_nibabel(), original)


def test_file_functions_take_and_give_nibabel_images(tmp_path):
    original = nib.load(SAMPLES / "brain.nii.gz")
    from_memory = gridwarp.affine(original, rotate=7, mode="nearest")
    assert isinstance(from_memory, nib.Nifti1Image)
    gridwarp.affine(SAMPLES / "brain.nii.gz", tmp_path / "from_file.nii", rotate=7, mode="nearest")
    same_header_fields(from_memory, nib.load(tmp_path / "from_file.nii"))


def test_in_memory_path_creates_no_temporary_file(tmp_path):
    """With TMPDIR empty and read-only, nibabel and gridwarp images go through resample in memory."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o500)
    script = (
        "import nibabel as nib, numpy as np, gridwarp\n"
        f"moving = nib.load({str(SAMPLES / 'brain.nii.gz')!r})\n"
        "image = gridwarp.Image.from_nibabel(moving)\n"
        "out = gridwarp.resample(image, reference=image, mode='linear')\n"
        "assert np.array_equal(out.array, image.array.astype(out.dtype))\n"
        "again = gridwarp.resample(moving, reference=moving, mode='nearest')\n"
        "assert isinstance(again, nib.Nifti1Image) and np.array_equal(again.get_fdata(), moving.get_fdata())\n"
    )
    environment = dict(os.environ, TMPDIR=str(tmp))
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment)
        assert done.returncode == 0, done.stderr
        assert list(tmp.iterdir()) == []
    finally:
        tmp.chmod(0o700)


def test_image_from_an_array_and_a_geometry(tmp_path):
    values = np.random.default_rng(5).random((1, 1, 5, 6, 7)).astype(np.float32)  # (N, C, z, y, x)
    image = gridwarp.Image(values, affine=oblique_affine())
    gridwarp.write(image, tmp_path / "made.nii.gz")
    written = nib.load(tmp_path / "made.nii.gz")
    np.testing.assert_allclose(written.affine, oblique_affine(), atol=1e-5)
    np.testing.assert_array_equal(written.get_fdata().transpose(2, 1, 0), values[0, 0])
    lps = gridwarp.Image(values, spacing=[0.5, 2.0, 3.0], origin=[1.0, 2.0, 3.0])
    assert lps.geometry["spacing"] == [0.5, 2.0, 3.0] and lps.kind == "volume"
    assert gridwarp.Image(values).kind == "tensor" and gridwarp.Image(values).geometry is None
    with pytest.raises(ValueError, match="spacing"):
        gridwarp.Image(values, spacing=[1.0, 1.0])
    with pytest.raises(ValueError, match="not both"):
        gridwarp.Image(values, spacing=[1.0, 1.0, 1.0], affine=np.eye(4))


def test_with_array_changes_dtype_and_shape_keeping_the_geometry(tmp_path):
    image = gridwarp.read(SAMPLES / "brain.nii.gz")
    cropped = image.with_array(image.array[:, :, :10].astype(np.float32))
    assert cropped.dtype == np.float32 and cropped.spatial_shape[0] == 10
    assert cropped.geometry == image.geometry
    gridwarp.write(cropped, tmp_path / "cropped.nii")
    written, original = nib.load(tmp_path / "cropped.nii"), nib.load(SAMPLES / "brain.nii.gz")
    assert written.shape == (33, 41, 10) and written.get_data_dtype() == np.float32
    np.testing.assert_allclose(written.affine, original.affine, atol=1e-6)
    np.testing.assert_array_equal(written.get_fdata(), original.get_fdata()[:, :, :10])


def test_in_memory_peak_is_the_output(tmp_path):
    """gridwarp.affine on an Image in memory adds its output and little else to the process's
    resident memory: no copy of the input, no file written and read back (peak RSS measured from a
    reset high-water mark, /proc/self/clear_refs)."""
    source = tmp_path / "volume.nii.gz"
    nib.save(nib.Nifti1Image(np.random.default_rng(1).random((160, 192, 192), dtype=np.float32), np.eye(4)), source)
    script = (
        "import gridwarp\n"
        "def status(key):\n"
        "    return int([l for l in open('/proc/self/status') if l.startswith(key)][0].split()[1]) * 1024\n"
        f"image = gridwarp.read({str(source)!r})\n"
        "before = status('VmRSS:')\n"
        "open('/proc/self/clear_refs', 'w').write('5')\n"
        "result = gridwarp.affine(image, rotate=10, threads=2)\n"
        "print(status('VmHWM:') - before, result.array.nbytes)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    grown, output = map(int, done.stdout.split())
    assert grown <= 1.25 * output + (16 << 20), (grown, output)
