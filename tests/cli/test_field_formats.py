#!/usr/bin/python3
"""Displacement fields in every package's convention: convert-transform -o FIELD,KIND writes a chain as
ITK's, FSL FNIRT's, MRtrix3's, SPM's or Workbench's dense field (each checked against a NumPy evaluation
of that package's documented rule and against the package's own converter where Debian has it), and
-t FIELD,KIND reads each back: resampling with the written field equals resampling with the chain.

    /usr/bin/python3 tests/cli/test_field_formats.py --gridwarp build/app/gridwarp
"""
import os
import shutil
import subprocess
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_support import main, run  # noqa: E402
import test_points  # noqa: E402
from test_points import FIELD_AFFINE, LPS, affine_lps, field_lps  # noqa: E402


def fsl_coordinates(affine, shape, voxel_index):
    """FSL's scaled-voxel coordinates: diag(pixdim) index, x mirrored when the voxel-to-world
    matrix has a positive determinant (FLIRT's and FNIRT's rule)."""
    pixdim = np.sqrt((affine[:3, :3] ** 2).sum(axis=0))
    index = np.array(voxel_index, dtype=np.float64)
    if np.linalg.det(affine[:3, :3]) > 0:
        index[:, 0] = shape[0] - 1 - index[:, 0]
    return index * pixdim


class FieldFormats(test_points.ObliqueReference):
    """The chain warp.nii.gz then affine.tfm on the oblique reference grid of test_points."""

    def setUp(self):
        super().setUp()
        i, j, k = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in (20, 16, 12)], indexing="ij")
        nib.save(nib.Nifti1Image((100 * np.sin(i / 4) * np.cos(j / 5) + 3 * k).astype(np.float32), FIELD_AFFINE), self.path("moving.nii.gz"))
        index = np.stack(np.meshgrid(*[np.arange(n) for n in self.size], indexing="ij"), -1).reshape(-1, 3).astype(np.float64)
        self.index = index
        self.grid = index @ self.index_to_lps.T + self.origin
        self.mapped = affine_lps(field_lps(self.grid, self.vectors))
        self.chain = ["-t", self.path("warp.nii.gz"), "-t", self.path("affine.tfm")]

    def convert(self, output, *extra):
        result = run("convert-transform", *self.chain, "-r", self.path("ref.nii.gz"), "-i", self.path("moving.nii.gz"), "-o", output, *extra,
                     "-q")
        self.assertEqual(result.returncode, 0, result.stderr)

    def values(self, name):
        """A written field's vectors as (voxels, 3) in x-fastest... NumPy (x, y, z) order flattened."""
        data = np.asanyarray(nib.load(self.path(name)).dataobj)
        return data.reshape(self.size + (3,)).reshape(-1, 3)

    def test_each_layout_is_its_package_rule(self):
        ras = LPS
        cases = {
            "itk": ((1, 3), "vector", self.mapped - self.grid),
            "world": ((1, 3), "vector", (self.mapped - self.grid) @ ras.T),
            "mrtrix": ((3,), "none", self.mapped @ ras.T),
            "spm": ((1, 3), "none", self.mapped @ ras.T),
        }
        moving_affine = FIELD_AFFINE
        moving_index = (self.mapped @ LPS.T - moving_affine[:3, 3]) @ np.linalg.inv(moving_affine[:3, :3]).T
        reference_affine = nib.load(self.path("ref.nii.gz")).affine
        cases["fsl"] = ((3,), "none", fsl_coordinates(moving_affine, (20, 16, 12), moving_index) -
                        fsl_coordinates(reference_affine, self.size, self.index))
        for kind, (trailing, intent, expected) in cases.items():
            with self.subTest(kind=kind):
                self.convert(self.path(f"{kind}.nii.gz") + f",{kind}")
                written = nib.load(self.path(f"{kind}.nii.gz"))
                self.assertEqual(written.shape, self.size + trailing)
                self.assertEqual(written.get_data_dtype(), np.float32)
                np.testing.assert_allclose(written.affine, reference_affine, atol=1e-6)
                if kind == "fsl":
                    self.assertEqual(int(written.header["intent_code"]), 2006)
                else:
                    self.assertEqual(written.header.get_intent()[0], intent)
                np.testing.assert_allclose(self.values(f"{kind}.nii.gz"), expected, rtol=0, atol=2e-5)

    def test_resampling_with_each_written_field_equals_the_chain(self):
        expected = self.resample("chain", *self.chain)
        self.assertGreater(np.abs(expected).max(), 10)
        for kind in ("itk", "fsl", "mrtrix", "spm", "world"):
            with self.subTest(kind=kind):
                self.convert(self.path(f"{kind}.nii.gz") + f",{kind}")
                got = self.resample(kind, "-t", self.path(f"{kind}.nii.gz") + ("" if kind in ("itk", "fsl") else f",{kind}"))
                np.testing.assert_allclose(got, expected, rtol=0, atol=2e-3)

    def resample(self, name, *transforms):
        result = run("resample", "-i", self.path("moving.nii.gz"), "-r", self.path("ref.nii.gz"), "-o", self.path(f"by_{name}.nii"),
                     *transforms, "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        return np.asanyarray(nib.load(self.path(f"by_{name}.nii")).dataobj)

    def test_workbench_converts_the_itk_field_to_the_same_world_and_fnirt_fields(self):
        if not shutil.which("wb_command"):
            self.skipTest("connectome-workbench is not installed")
        self.convert(self.path("itk.nii.gz"))
        peer = subprocess.run(["wb_command", "-convert-warpfield", "-from-itk", self.path("itk.nii.gz"), "-to-world",
                               self.path("wb_world.nii.gz"), "-to-fnirt", self.path("wb_fnirt.nii.gz"), self.path("moving.nii.gz")],
                              capture_output=True, text=True)
        self.assertEqual(peer.returncode, 0, peer.stderr)
        for kind, peer_file in (("world", "wb_world.nii.gz"), ("fsl", "wb_fnirt.nii.gz")):
            with self.subTest(kind=kind):
                self.convert(self.path(f"{kind}.nii.gz") + f",{kind}")
                np.testing.assert_allclose(self.values(f"{kind}.nii.gz"), self.values(peer_file), rtol=0, atol=2e-5)
        # Workbench's world fields look like ITK's (5-D, vector intent): untagged, one is refused, never misread.
        refused = run("resample", "-i", self.path("moving.nii.gz"), "-r", self.path("ref.nii.gz"), "-o", self.path("refused.nii"), "-t",
                      self.path("wb_world.nii.gz"))
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn(",world", refused.stderr)
        self.assertFalse(os.path.exists(self.path("refused.nii")))
        np.testing.assert_allclose(self.resample("wb_world", "-t", self.path("wb_world.nii.gz") + ",world"),
                                   self.resample("chain", *self.chain), rtol=0, atol=2e-3)

    def test_mrtrix3_warps_with_the_written_deformation_and_reads_its_displacement(self):
        if not shutil.which("mrtransform") or not shutil.which("warpconvert"):
            self.skipTest("MRtrix3 is not installed")
        self.convert(self.path("mrtrix.nii.gz") + ",mrtrix")
        peer = subprocess.run(["mrtransform", self.path("moving.nii.gz"), "-warp", self.path("mrtrix.nii.gz"), "-interp", "linear",
                               self.path("mrtrix_warped.nii"), "-force", "-quiet"], capture_output=True, text=True)
        self.assertEqual(peer.returncode, 0, peer.stderr)
        expected = self.on_reference_axes(nib.load(self.path("mrtrix_warped.nii")))
        got = self.resample("chain", *self.chain)
        # MRtrix3 samples up to the outer voxel centres only; compare where both sample inside.
        inside = self.inside_moving()
        np.testing.assert_allclose(got[inside], expected[inside], rtol=0, atol=2e-3)
        peer = subprocess.run(["warpconvert", self.path("mrtrix.nii.gz"), "deformation2displacement", self.path("displacement.nii"), "-force",
                               "-quiet"], capture_output=True, text=True)
        self.assertEqual(peer.returncode, 0, peer.stderr)
        # Untagged abs/rel, ,mrtrix tells a displacement field from a deformation by its values.
        np.testing.assert_allclose(self.resample("displacement", "-t", self.path("displacement.nii") + ",mrtrix"), got, rtol=0, atol=2e-3)

    def on_reference_axes(self, image):
        """An image MRtrix3 wrote on the reference grid with its axes in another order (its strides), put
        back in the reference's voxel order."""
        reference = nib.load(self.path("ref.nii.gz")).affine
        turn = nib.orientations.ornt_transform(nib.orientations.io_orientation(image.affine), nib.orientations.io_orientation(reference))
        data = nib.orientations.apply_orientation(np.asanyarray(image.dataobj), turn)
        self.assertTrue(np.allclose(image.affine @ nib.orientations.inv_ornt_aff(turn, image.shape), reference, atol=1e-4))
        return data

    def inside_moving(self):
        moving_index = (self.mapped @ LPS.T - FIELD_AFFINE[:3, 3]) @ np.linalg.inv(FIELD_AFFINE[:3, :3]).T
        return np.all((moving_index >= 0) & (moving_index <= np.array((19, 15, 11))), axis=1).reshape(self.size)

    def test_spm_deformation_written_by_numpy(self):
        # SPM's y_*.nii: 5-D (X, Y, Z, 1, 3) float32 of RAS millimetres, no intent; the same map as the chain.
        affine = nib.load(self.path("ref.nii.gz")).affine
        nib.save(nib.Nifti1Image((self.mapped @ LPS.T).reshape(self.size + (1, 3)).astype(np.float32), affine), self.path("y_subject.nii"))
        np.save(self.path("grid.npy"), self.grid)
        result = run("points", "-i", self.path("grid.npy"), "-o", self.path("mapped.npy"), "-t", self.path("y_subject.nii") + ",spm",
                     "--space", "lps", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        np.testing.assert_allclose(np.load(self.path("mapped.npy")), self.mapped, rtol=0, atol=2e-5)
        refused = run("points", "-i", self.path("grid.npy"), "-o", self.path("refused.npy"), "-t", self.path("y_subject.nii"))
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn(",spm", refused.stderr)

    def test_refusals(self):
        for args, words in ((["-o", self.path("no_moving.nii.gz") + ",fsl"], "-i MOVING"),
                            (["-o", self.path("matrix_kind.nii.gz") + ",lta", "-i", self.path("moving.nii.gz")], "no displacement field layout"),
                            (["-o", self.path("matrix.txt") + ",mrtrix"], "name a volume file")):
            with self.subTest(args=args):
                refused = run("convert-transform", *self.chain, "-r", self.path("ref.nii.gz"), *args)
                self.assertNotEqual(refused.returncode, 0)
                self.assertIn(words, refused.stderr)
                self.assertEqual(len(refused.stderr.strip().splitlines()), 1, refused.stderr)


class LinearFromMrtrix(test_points.ChainFixture):
    def test_transformconvert_itk_import_reads_back_as_ras(self):
        # MRtrix3's linear files map template points to moving points in RAS: ,ras reads them.
        if not shutil.which("transformconvert"):
            self.skipTest("MRtrix3 is not installed")
        peer = subprocess.run(["transformconvert", self.path("affine.tfm"), "itk_import", self.path("mrtrix.txt"), "-force", "-quiet"],
                              capture_output=True, text=True)
        self.assertEqual(peer.returncode, 0, peer.stderr)
        np.save(self.path("in.npy"), self.lps)
        mapped = {}
        for name, transform in (("itk", self.path("affine.tfm")), ("mrtrix", self.path("mrtrix.txt") + ",ras")):
            result = run("points", "-i", self.path("in.npy"), "-o", self.path(f"{name}.npy"), "-t", transform, "--space", "lps", "-q")
            self.assertEqual(result.returncode, 0, result.stderr)
            mapped[name] = np.load(self.path(f"{name}.npy"))
        np.testing.assert_allclose(mapped["itk"], affine_lps(self.lps), rtol=0, atol=1e-9)
        np.testing.assert_allclose(mapped["mrtrix"], mapped["itk"], rtol=0, atol=1e-5)


class InverseReport(test_points.ChainFixture):
    """resample --explain shows an inverse field's residual and the voxels where the field folds;
    the fold count is NumPy's: det(I + grad d) <= 0, np.gradient's differences, in millimetres."""

    def test_explain_shows_residual_and_folds(self):
        size = (40, 36, 32)
        spacing = np.array([1.0, 1.25, 1.5])
        index = np.stack(np.meshgrid(*[np.arange(n, dtype=np.float64) for n in size], indexing="ij"), -1)
        mm = index * spacing
        centre = np.array([20.0, 18.0, 16.0]) * spacing
        bump = np.exp(-(((mm - centre) ** 2).sum(-1)) / (2 * 2.0 ** 2))
        vectors = np.zeros(size + (3,))
        vectors[..., 0] = -2.5 * (mm[..., 0] - centre[0]) * bump + 0.3 * np.sin(mm[..., 1] / 6)
        vectors[..., 1] = 0.4 * np.cos(mm[..., 2] / 7)
        affine = np.diag([-spacing[0], -spacing[1], spacing[2], 1.0])  # LPS axes stored as RAS
        field = nib.Nifti1Image((vectors @ np.diag([1.0, 1.0, 1.0]))[:, :, :, None, :].astype(np.float32), affine)
        field.header.set_intent("vector")
        nib.save(field, self.path("folding.nii.gz"))
        stored = np.asanyarray(nib.load(self.path("folding.nii.gz")).dataobj)[:, :, :, 0, :].astype(np.float64)
        gradient = np.stack([np.stack(np.gradient(stored[..., k], *spacing), -1) for k in range(3)], -2)  # [..., component, axis]
        expected_folds = int((np.linalg.det(np.eye(3) + gradient) <= 0).sum())
        self.assertGreater(expected_folds, 0)
        nib.save(nib.Nifti1Image(np.ones(size, np.float32), affine), self.path("volume.nii.gz"))
        result = run("resample", "-i", self.path("volume.nii.gz"), "-o", self.path("out.nii.gz"), "-t", self.path("folding.nii.gz") + ",inverse",
                     "--explain")
        self.assertEqual(result.returncode, 0, result.stderr)
        report = result.stdout + result.stderr
        self.assertIn(f"folds (det(I + grad d) <= 0) at {expected_folds} voxel(s)", report)
        maximum = float(report.split("residual |phi(phi^-1(y)) - y| max ")[1].split(" mm")[0])
        self.assertLessEqual(maximum, 1e-6)
        # A field that folds everywhere does not invert: one line naming the file, nothing written.
        nib.save(field.__class__((-2.0 * mm[..., None, :] * np.array([1, 0, 0]))[:, :, :, None, :].reshape(size + (1, 3)).astype(np.float32),
                                 affine, field.header), self.path("folded.nii.gz"))
        refused = run("resample", "-i", self.path("volume.nii.gz"), "-o", self.path("refused.nii.gz"), "-t", self.path("folded.nii.gz") + ",inverse")
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("does not invert", refused.stderr)
        self.assertIn("folds", refused.stderr)
        self.assertEqual(len(refused.stderr.strip().splitlines()), 1, refused.stderr)
        self.assertFalse(os.path.exists(self.path("refused.nii.gz")))


if __name__ == "__main__":
    main()
