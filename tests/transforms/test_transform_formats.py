#!/usr/bin/python3
"""One world-space affine written by every package's convention gives one resampled image.

    /usr/bin/python3 tests/transforms/test_transform_formats.py --gridwarp build/app/gridwarp

The files in tests/data/transforms are made by tests/fixtures/make_transform_fixtures.py from
each format's documentation. Every form of the map (FSL FLIRT .mat, NiftyReg, ,ras, ,lps, ITK
.tfm, and the inverses) must resample to the same image, equal to trilinear sampling (zeros
outside) at the positions this file computes from the images' affines and the world map alone.
"""
import json
import os
import sys
import tempfile
import unittest

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import main, run  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "transforms")


def best_affine(image):
    header = image.header
    if header["sform_code"] > 0:
        return header.get_sform()
    return header.get_qform()


def trilinear_zeros(volume, positions):
    """Samples volume (i, j, k) at continuous indices (3, N); taps outside count as zero."""
    base = np.floor(positions).astype(np.int64)
    frac = positions - base
    result = np.zeros(positions.shape[1])
    for corner in range(8):
        offset = np.array([(corner >> axis) & 1 for axis in range(3)])[:, None]
        tap = base + offset
        weight = np.prod(np.where(offset == 1, frac, 1 - frac), axis=0)
        inside = np.all((tap >= 0) & (tap < np.array(volume.shape)[:, None]), axis=0)
        values = np.zeros(positions.shape[1])
        values[inside] = volume[tap[0, inside], tap[1, inside], tap[2, inside]]
        result += weight * values
    return result


def expected_output(moving, reference, world):
    """The reference grid's points through the world map, looked up in the moving image."""
    shape = reference.shape[:3]
    index = np.stack([a.ravel() for a in np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")]).astype(np.float64)
    points = best_affine(reference) @ np.vstack([index, np.ones(index.shape[1])])
    moving_index = np.linalg.inv(best_affine(moving)) @ world @ points
    return trilinear_zeros(np.asanyarray(moving.dataobj, dtype=np.float64), moving_index[:3]).reshape(shape)


class TransformFormats(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="gridwarp_transforms_")
        with open(os.path.join(DATA, "transforms.json")) as f:
            self.record = json.load(f)
        self.world = np.array(self.record["world_ras"])

    def path(self, name):
        return os.path.join(self.folder, name)

    def resample(self, pair, label, transform):
        files = self.record["pairs"][pair]
        out = self.path(f"{pair}_{label}.nii")
        # The world-coordinate oracle interpolates without filtering first.
        result = run("resample", "-i", os.path.join(DATA, files["moving"]), "-r", os.path.join(DATA, files["reference"]),
                     "-o", out, "-t", transform, "--antialias", "off")
        self.assertEqual(result.returncode, 0, f"{label}: {result.stderr}")
        return nib.load(out).get_fdata()

    def check_pair(self, pair):
        files = self.record["pairs"][pair]
        moving = nib.load(os.path.join(DATA, files["moving"]))
        reference = nib.load(os.path.join(DATA, files["reference"]))
        expected = expected_output(moving, reference, self.world)
        # Most of the reference grid must land inside the moving image, or the test proves little.
        self.assertGreater(np.count_nonzero(expected), expected.size // 2)
        d = lambda name: os.path.join(DATA, f"{pair}{name}")
        forms = {
            "fsl detected": d("_flirt.mat"),
            "fsl tagged": d("_flirt.mat") + ",fsl",
            "fsl reverse inverted": d("_flirt_reverse.mat") + f",fsl,inverse,src={os.path.join(DATA, files['reference'])}"
                                    f",ref={os.path.join(DATA, files['moving'])}",
            "fsl src= ref= as given": d("_flirt.mat") + f",src={os.path.join(DATA, files['moving'])}"
                                      f",ref={os.path.join(DATA, files['reference'])}",
            "niftyreg": d("_niftyreg.txt") + ",niftyreg",
            "ras": d("_ras.txt") + ",ras",
            "ras reverse inverted": d("_ras_reverse.txt") + ",ras,inverse",
            "lps": d("_lps.txt") + ",lps",
            "itk tfm": d(".tfm"),
        }
        outputs = {label: self.resample(pair, label.replace(" ", "_").replace("=", ""), t) for label, t in forms.items()}
        scale = np.abs(expected).max()
        for label, got in outputs.items():
            with self.subTest(pair=pair, form=label):
                np.testing.assert_allclose(got, expected, rtol=0, atol=2e-6 * scale, err_msg=label)
                np.testing.assert_allclose(got, outputs["itk tfm"], rtol=0, atol=2e-6 * scale, err_msg=label)

    def test_las_moving_onto_oblique_ras_reference(self):
        self.check_pair("a")

    def test_qform_lps_moving_onto_oblique_las_reference(self):
        self.check_pair("b")

    def test_a_flirt_matrix_read_as_world_matrix_would_be_wrong(self):
        # The old reading (the .mat as an LPS world matrix) must not pass the same check.
        files = self.record["pairs"]["a"]
        moving = nib.load(os.path.join(DATA, files["moving"]))
        reference = nib.load(os.path.join(DATA, files["reference"]))
        got = self.resample("a", "flirt_as_lps", os.path.join(DATA, "a_flirt.mat") + ",lps")
        self.assertGreater(np.abs(got - expected_output(moving, reference, self.world)).max(), 0.1)

    def test_fsl_matrix_with_float32_last_row_as_convert_xfm_writes_it(self):
        # convert_xfm computes in float32; "0 0 0 1.00000012" (1 + 2^-23) is its 0 0 0 1.
        files = self.record["pairs"]["a"]
        with open(os.path.join(DATA, "a_flirt.mat")) as f:
            rows = f.read().strip().splitlines()
        self.assertEqual(rows[-1].split(), ["0", "0", "0", "1"])
        expected = self.resample("a", "flirt_exact", os.path.join(DATA, "a_flirt.mat") + ",fsl")
        for label, last in [("above", "0  0  0  1.00000012  "), ("below", "0 0 0 0.99999988"), ("far", "0 0 0 1.0001")]:
            with self.subTest(row=label):
                matrix = self.path(f"flirt_row_{label}.mat")
                with open(matrix, "w") as f:
                    f.write("\n".join(rows[:-1] + [last]) + "\n")
                if label != "far":
                    np.testing.assert_array_equal(self.resample("a", f"flirt_row_{label}", matrix + ",fsl"), expected)
                    continue
                result = run("resample", "-i", os.path.join(DATA, files["moving"]), "-r", os.path.join(DATA, files["reference"]),
                             "-o", self.path("far.nii"), "-t", matrix + ",fsl")
                self.assertEqual(result.returncode, 1)
                self.assertIn("last row of a homogeneous matrix must be 0 ... 0 1", result.stderr)

    def test_bare_matrix_is_refused_with_the_tags(self):
        matrix = self.path("registration.txt")
        with open(matrix, "w") as f:
            f.write("1 0 0 2\n0 1 0 0\n0 0 1 0\n0 0 0 1\n")
        files = self.record["pairs"]["a"]
        out = self.path("refused.nii")
        result = run("resample", "-i", os.path.join(DATA, files["moving"]), "-r", os.path.join(DATA, files["reference"]),
                     "-o", out, "-t", matrix)
        self.assertEqual(result.returncode, 1)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("gridwarp: error: " + matrix + ": "), lines[0])
        for tag in ("fsl", "lta", "afni", "niftyreg", "itk", "ras", "lps"):
            self.assertIn(tag, lines[0])
        self.assertFalse(os.path.exists(out))
        # Named, the same matrix is read.
        self.assertEqual(run("resample", "-i", os.path.join(DATA, files["moving"]), "-o", out, "-t", matrix + ",lps").returncode, 0)

    def test_explain_names_each_transform_convention(self):
        files = self.record["pairs"]["a"]
        result = run("resample", "-i", os.path.join(DATA, files["moving"]), "-r", os.path.join(DATA, files["reference"]),
                     "-o", self.path("explained.nii"), "--explain", "-t", os.path.join(DATA, "a_flirt.mat"),
                     "-t", os.path.join(DATA, "a_ras_reverse.txt") + ",ras,inverse", "-t", os.path.join(DATA, "a.tfm"))
        self.assertEqual(result.returncode, 0, result.stderr)
        text = result.stdout + result.stderr
        self.assertIn("a_flirt.mat (fsl)", text)
        self.assertIn("a_ras_reverse.txt (ras, inverted)", text)
        self.assertIn("a.tfm (itk)", text)
        self.assertFalse(os.path.exists(self.path("explained.nii")))

    def test_fsl_matrix_needs_3d_images(self):
        image = self.path("flat.nii")
        nib.save(nib.Nifti1Image(np.zeros((4, 5), np.float32), np.eye(4)), image)
        result = run("resample", "-i", image, "-o", self.path("flat_out.nii"), "-t", os.path.join(DATA, "a_flirt.mat"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("a_flirt.mat", result.stderr)


if __name__ == "__main__":
    main()
