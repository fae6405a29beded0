#!/usr/bin/python3
"""FSL FNIRT displacement fields (NIfTI intent 2006: relative displacements in mm along the
reference's FSL axes) against the FLIRT matrix they encode: a field made here, with numpy and
nibabel, from a FLIRT matrix M (each reference voxel's FSL coordinates f displaced to M^-1 f) must
resample exactly as the matrix does.

    /usr/bin/python3 tests/transforms/test_fnirt_field.py --gridwarp build/app/gridwarp
"""
import os
import shutil
import sys
import tempfile
import unittest

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import fsl_scaled_voxels, main, run  # noqa: E402


def save(path, data, affine, intent=None):
    img = nib.Nifti1Image(data, affine)
    img.set_sform(affine, code=1)
    img.set_qform(affine, code=1)
    if intent is not None:
        img.header["intent_code"] = intent
    nib.save(img, path)
    return nib.load(path)


class FnirtField(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="gridwarp-fnirt-")

    def tearDown(self):
        shutil.rmtree(self.folder)

    def path(self, name):
        return os.path.join(self.folder, name)

    def make(self, moving_affine, reference_affine):
        rng = np.random.default_rng(5)
        z, y, x = np.meshgrid(np.arange(16), np.arange(18), np.arange(20), indexing="ij")
        values = (np.sin(x.T / 3.0) + np.cos(y.T / 4.0) * np.sin(z.T / 5.0)).astype(np.float32) * 100
        values += rng.normal(0, 1, values.shape).astype(np.float32)
        moving = save(self.path("moving.nii.gz"), values, moving_affine)
        reference = save(self.path("reference.nii.gz"), np.zeros((17, 19, 15), np.float32), reference_affine)
        # FLIRT's matrix: moving FSL coordinates -> reference FSL coordinates.
        m = np.eye(4)
        c, s = np.cos(0.12), np.sin(0.12)
        m[:3, :3] = np.array([[c, -s, 0.02], [s, c, -0.03], [0.01, 0.04, 1.0]]) * 1.03
        m[:3, 3] = [2.5, -3.0, 1.5]
        np.savetxt(self.path("flirt.mat"), m, fmt="%.10f")
        # The field on the reference grid: FSL coordinates f of each voxel, displaced to M^-1 f.
        grid = np.stack(np.meshgrid(np.arange(17), np.arange(19), np.arange(15), indexing="ij"), -1).reshape(-1, 3)
        homogeneous = np.c_[grid, np.ones(len(grid))]
        f = homogeneous @ fsl_scaled_voxels(reference).T
        target = f @ np.linalg.inv(m).T
        field = (target - f)[:, :3].reshape(17, 19, 15, 3).astype(np.float32)
        # An absolute field (convertwarp --absout) holds the targets themselves.
        self.absolute = target[:, :3].reshape(17, 19, 15, 3).astype(np.float32)
        return moving, reference, field

    def compare(self, field_name, *tags):
        out_matrix, out_field = self.path("by_matrix.nii.gz"), self.path("by_field.nii.gz")
        common = ["resample", "-i", self.path("moving.nii.gz"), "-r", self.path("reference.nii.gz"), "--mode", "linear"]
        result = run(*common, "-o", out_matrix, "-t", self.path("flirt.mat"))
        self.assertEqual(result.returncode, 0, result.stderr)
        result = run(*common, "-o", out_field, "-t", self.path(field_name) + "".join("," + t for t in tags))
        self.assertEqual(result.returncode, 0, result.stderr)
        a = np.asanyarray(nib.load(out_matrix).dataobj)
        b = np.asanyarray(nib.load(out_field).dataobj)
        self.assertGreater(np.count_nonzero(a), a.size // 3)
        # The field is stored as float32 millimetres: positions agree to about 1e-6 voxel.
        np.testing.assert_allclose(b, a, atol=2e-3 * np.abs(a).max())

    def test_neurological_and_radiological_images(self):
        oblique = np.eye(4)
        c, s = np.cos(0.2), np.sin(0.2)
        oblique[:3, :3] = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]) @ np.diag([2.0, 2.2, 2.5])
        oblique[:3, 3] = [-20, -18, -15]
        las = np.diag([-1.8, 2.0, 2.4, 1.0])
        las[:3, 3] = [15, -19, -18]
        for name, moving_affine, reference_affine in (("RAS moving, LAS reference", oblique, las),
                                                      ("LAS moving, RAS reference", las, oblique)):
            with self.subTest(name):
                _, reference, field = self.make(moving_affine, reference_affine)
                save(self.path("warp.nii.gz"), field, reference.affine, intent=2006)
                self.compare("warp.nii.gz")
                # Without the intent, the tag says it.
                save(self.path("untagged.nii.gz"), field, reference.affine)
                self.compare("untagged.nii.gz", "fsl")

    def test_absolute_fields(self):
        las = np.diag([-1.8, 2.0, 2.4, 1.0])
        las[:3, 3] = [15, -19, -18]
        _, reference, field = self.make(np.diag([2.0, 2.1, 2.2, 1.0]), las)
        save(self.path("absolute.nii.gz"), self.absolute, reference.affine, intent=2006)
        save(self.path("relative.nii.gz"), field, reference.affine, intent=2006)
        # Told apart by their values, as fslpy tells them, or by applywarp's words as tags.
        self.compare("absolute.nii.gz")
        self.compare("absolute.nii.gz", "abs")
        self.compare("relative.nii.gz", "rel")
        self.compare("relative.nii.gz", "relative")
        # A tag is obeyed: a relative field read as absolute maps elsewhere.
        result = run("resample", "-i", self.path("moving.nii.gz"), "-r", self.path("reference.nii.gz"), "-o",
                     self.path("wrong.nii.gz"), "-t", self.path("relative.nii.gz") + ",abs")
        self.assertEqual(result.returncode, 0, result.stderr)
        result = run("resample", "-i", self.path("moving.nii.gz"), "-r", self.path("reference.nii.gz"), "-o",
                     self.path("right.nii.gz"), "-t", self.path("relative.nii.gz"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertFalse(np.array_equal(np.asanyarray(nib.load(self.path("wrong.nii.gz")).dataobj),
                                        np.asanyarray(nib.load(self.path("right.nii.gz")).dataobj)))

    def test_untagged_fields_not_in_itk_form_are_refused(self):
        # FNIRT's field as FSL writes it without the intent (4-D, intent 0), the same as 5-D with no
        # intent, a 4-D "vector" that ITK would read as a time series, and NiftyReg's field: none is
        # ITK's by its header, and read as ITK's each would warp to a wrong image with exit 0.
        _, reference, field = self.make(np.diag([2.0, 2.0, 2.0, 1.0]), np.diag([2.0, 2.0, 2.0, 1.0]))
        cases = {
            "fnirt_intent0.nii.gz": (field, None, ""),
            "five_d_intent0.nii.gz": (field[:, :, :, None, :], None, ""),
            "four_d_vector.nii.gz": (field, 1007, ""),
            "niftyreg.nii.gz": (field[:, :, :, None, :], 1007, "NREG_TRANS"),
        }
        for name, (data, intent, intent_name) in cases.items():
            with self.subTest(name):
                image = nib.Nifti1Image(data, reference.affine)
                if intent is not None:
                    image.header["intent_code"] = intent
                image.header["intent_name"] = intent_name.encode()
                nib.save(image, self.path(name))
                out = self.path("out_" + name)
                result = run("resample", "-i", self.path("moving.nii.gz"), "-r", self.path("reference.nii.gz"), "-o", out,
                             "-t", self.path(name))
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertIn(name, result.stderr)
                self.assertIn("NiftyReg" if intent_name else ",fsl", result.stderr)
                self.assertFalse(os.path.exists(out))
        # ITK's own form is read untagged; the tag reads the 4-D intent-0 one as FSL's.
        itk = nib.Nifti1Image(np.zeros((17, 19, 15, 1, 3), np.float32), reference.affine)
        itk.header.set_intent("vector")
        nib.save(itk, self.path("itk.nii.gz"))
        for spec in (self.path("itk.nii.gz"), self.path("fnirt_intent0.nii.gz") + ",fsl"):
            result = run("resample", "-i", self.path("moving.nii.gz"), "-r", self.path("reference.nii.gz"), "-o",
                         self.path("ok.nii.gz"), "-t", spec)
            self.assertEqual(result.returncode, 0, result.stderr)

    def test_coefficients_refused(self):
        _, reference, field = self.make(np.diag([2.0, 2.0, 2.0, 1.0]), np.diag([2.0, 2.0, 2.0, 1.0]))
        save(self.path("coef.nii.gz"), field, reference.affine, intent=2007)
        result = run("resample", "-i", self.path("moving.nii.gz"), "-o", self.path("out.nii.gz"), "-t", self.path("coef.nii.gz"))
        self.assertEqual(result.returncode, 1)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn("fnirtfileutils", result.stderr)
        self.assertFalse(os.path.exists(self.path("out.nii.gz")))


if __name__ == "__main__":
    main()
