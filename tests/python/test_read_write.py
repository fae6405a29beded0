"""gridwarp.read and gridwarp.write against nibabel and Pillow, the independent readers."""
import pathlib

import nibabel as nib
import numpy as np
import pytest
from PIL import Image as PILImage

import gridwarp

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "data"

pytestmark = pytest.mark.skipif(not hasattr(gridwarp, "read"), reason="built without the io library")


def lps_affine(geometry):
    """The 4x4 RAS affine of an LPS geometry (x first), as nibabel gives it."""
    spacing, origin = np.array(geometry["spacing"]), np.array(geometry["origin"])
    direction = np.array(geometry["direction"]).reshape(3, 3)
    affine = np.eye(4)
    affine[:3, :3] = direction * spacing
    affine[:3, 3] = origin
    return np.diag([-1, -1, 1, 1]) @ affine


def test_nifti_read_as_nibabel_reads_it():
    image = gridwarp.read(SAMPLES / "brain.nii.gz")
    reference = nib.load(SAMPLES / "brain.nii.gz")
    assert image.kind == "volume" and image.format == "nifti"
    values = np.asanyarray(reference.dataobj)
    assert image.array.shape == (1, 1) + values.shape[::-1]
    np.testing.assert_array_equal(image.array[0, 0].transpose(2, 1, 0), values)
    np.testing.assert_allclose(lps_affine(image.geometry), reference.affine, atol=1e-5)
    assert image.nifti["sform_code"] == int(reference.header["sform_code"])


def test_written_volume_keeps_header_and_new_values(tmp_path):
    image = gridwarp.read(SAMPLES / "brain.nii.gz")
    doubled = image.with_array(image.array // 2)
    gridwarp.write(doubled, tmp_path / "half.nii.gz")
    written = nib.load(tmp_path / "half.nii.gz")
    reference = nib.load(SAMPLES / "brain.nii.gz")
    np.testing.assert_array_equal(np.asanyarray(written.dataobj), np.asanyarray(reference.dataobj) // 2)
    np.testing.assert_allclose(written.affine, reference.affine, atol=1e-5)
    assert written.header["descrip"] == reference.header["descrip"]
    # Another shape or dtype makes another image with what still holds (test_nibabel.py writes one).
    assert image.with_array(image.array[..., :3]).spatial_shape[-1] == 3
    assert image.with_array(image.array.astype(np.float64)).dtype == np.float64
    with pytest.raises(ValueError, match="shape"):
        image.with_array(image.array[0, 0, 0])


def test_photo_read_in_bgr_order_as_pillow_reads_it(tmp_path):
    image = gridwarp.read(SAMPLES / "card.png")
    rgb = np.asarray(PILImage.open(SAMPLES / "card.png").convert("RGB"))
    assert image.channel_order == "BGR" and image.array.shape == (1, 3) + rgb.shape[:2]
    np.testing.assert_array_equal(image.array[0, ::-1].transpose(1, 2, 0), rgb)
    gridwarp.write(image, tmp_path / "copy.png")
    np.testing.assert_array_equal(np.asarray(PILImage.open(tmp_path / "copy.png").convert("RGB")), rgb)


def test_sampled_array_written_with_the_volume_header(tmp_path):
    image = gridwarp.read(SAMPLES / "brain.nii.gz")
    x = image.array.astype(np.float32)
    identity = gridwarp.affine_grid(np.array([[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]], np.float32), x.shape)
    sampled = gridwarp.grid_sample(x, identity, "bilinear", align_corners=False)
    np.testing.assert_allclose(sampled, x, atol=0.1)  # float32 positions: weights a few ulps off 0 and 1
    gridwarp.write(image.with_array(np.rint(sampled).astype(image.dtype)), tmp_path / "same.nii")
    np.testing.assert_array_equal(np.asanyarray(nib.load(tmp_path / "same.nii").dataobj),
                                  np.asanyarray(nib.load(SAMPLES / "brain.nii.gz").dataobj))


def test_bad_files_raise_value_error(tmp_path):
    with pytest.raises(ValueError, match="nope.nii"):
        gridwarp.read(tmp_path / "nope.nii")
    (tmp_path / "bad.nii").write_bytes(b"not a nifti file at all" * 20)
    with pytest.raises(ValueError, match="bad.nii"):
        gridwarp.read(tmp_path / "bad.nii")
