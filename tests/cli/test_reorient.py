#!/usr/bin/python3
"""gridwarp reorient against nibabel's orientation transforms: the data permuted and flipped as
nibabel's ornt_transform/apply_orientation move it (bit for bit), every voxel at the same world
position, sform and qform each reordered (a header whose two differ keeps them different), 4-D
series, oblique volumes (axes paired as nibabel's io_orientation pairs them), like:REF, refusals.

    /usr/bin/python3 tests/cli/test_reorient.py --gridwarp build/app/gridwarp
"""
import os
import sys

import nibabel as nib
import numpy as np
from nibabel import orientations

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402


def rotation(a, b, c):
    ca, sa, cb, sb, cc, sc = np.cos(a), np.sin(a), np.cos(b), np.sin(b), np.cos(c), np.sin(c)
    return (np.array([[1, 0, 0], [0, ca, -sa], [0, sa, ca]]) @ np.array([[cb, 0, sb], [0, 1, 0], [-sb, 0, cb]]) @
            np.array([[cc, -sc, 0], [sc, cc, 0], [0, 0, 1]]))


def affine_of(linear, origin):
    affine = np.eye(4)
    affine[:3, :3] = linear
    affine[:3, 3] = origin
    return affine


class Reorient(FolderTestCase):
    def volume(self, name, shape, affine, dtype=np.int16, qform=None):
        data = (np.arange(np.prod(shape)) % 30011).reshape(shape).astype(dtype)
        image = nib.Nifti1Image(data, affine)
        image.set_sform(affine, code=2)
        image.set_qform(affine if qform is None else qform, code=1)
        image.header.set_dim_info(freq=0, phase=1, slice=2)
        image.header["slice_code"] = 3  # alternating increasing
        image.header["slice_start"] = 0
        image.header["slice_end"] = shape[2] - 1
        image.header["slice_duration"] = 0.05
        nib.save(image, self.path(name))
        return nib.load(self.path(name))

    def expected(self, image, code):
        turn = orientations.ornt_transform(orientations.io_orientation(image.affine), orientations.axcodes2ornt(tuple(code)))
        data = orientations.apply_orientation(np.asanyarray(image.dataobj), turn)
        sform = image.get_sform() @ orientations.inv_ornt_aff(turn, image.shape)
        qform = image.get_qform() @ orientations.inv_ornt_aff(turn, image.shape)
        return data, sform, qform

    def reorient(self, source, output, to):
        result = run("reorient", "-i", self.path(source), "-o", self.path(output), "--to", to, "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        return nib.load(self.path(output))

    def test_every_code_equals_nibabel(self):
        image = self.volume("las.nii.gz", (7, 6, 5), affine_of(np.diag([-1.5, 2.0, 2.5]), [10, -20, 5]))
        for code in ("RAS", "LPS", "LIA", "SPR", "AIL", "RSP"):
            with self.subTest(code=code):
                got = self.reorient("las.nii.gz", f"{code}.nii.gz", code)
                data, sform, qform = self.expected(image, code)
                np.testing.assert_array_equal(np.asanyarray(got.dataobj), data)
                self.assertEqual(got.get_data_dtype(), np.int16)
                self.assertEqual(nib.aff2axcodes(got.affine), tuple(code))
                np.testing.assert_allclose(got.get_sform(), sform, atol=1e-5)
                # NIfTI-1 keeps the quaternion's b, c, d in float32 and derives a = sqrt(1 - b^2 - c^2 - d^2): for a
                # half-turn a is ~0 and the float32 rounding moves the matrix by up to 1e-3 (nibabel's own writer too).
                np.testing.assert_allclose(got.get_qform(), qform, atol=2e-3)
                self.assertEqual((int(got.header["sform_code"]), int(got.header["qform_code"])), (2, 1))

    def test_oblique_4d_and_distinct_qform(self):
        linear = rotation(0.3, -0.2, 0.4) @ np.diag([1.2, 0.9, 2.0])
        flipped = linear @ np.diag([-1, 1, -1])
        # The qform a rigid shift of the sform: each must be reordered on its own.
        image = self.volume("oblique.nii.gz", (6, 5, 4, 3), affine_of(flipped, [3, 4, -5]), dtype=np.float32,
                            qform=affine_of(flipped, [4, 2, -6]))
        self.assertNotEqual(nib.aff2axcodes(image.affine), ("R", "A", "S"))
        got = self.reorient("oblique.nii.gz", "canonical.nii.gz", "RAS")
        canonical = nib.as_closest_canonical(image)
        np.testing.assert_array_equal(np.asanyarray(got.dataobj), np.asanyarray(canonical.dataobj))
        np.testing.assert_allclose(got.affine, canonical.affine, atol=1e-5)
        _, sform, qform = self.expected(image, "RAS")
        np.testing.assert_allclose(got.get_sform(), sform, atol=1e-5)
        np.testing.assert_allclose(got.get_qform(), qform, atol=2e-3)
        self.assertFalse(np.allclose(got.get_qform(), got.get_sform(), atol=0.5))
        self.assertEqual(got.shape[3], 3)
        # The slice axis (z) was flipped: alternating increasing becomes alternating decreasing.
        freq, phase, slice_axis = got.header.get_dim_info()
        turn = orientations.ornt_transform(orientations.io_orientation(image.affine), orientations.axcodes2ornt("RAS"))
        self.assertEqual(slice_axis, int(turn[2, 0]))
        if turn[2, 1] < 0:
            self.assertEqual(int(got.header["slice_code"]), 4)

    def test_like_a_reference_and_back(self):
        reference = self.volume("lia.nii.gz", (5, 6, 7), affine_of(np.array([[-1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]]), [0, 0, 0]))
        image = self.volume("ras.nii.gz", (7, 5, 6), affine_of(np.diag([1.1, 1.2, 1.3]), [1, 2, 3]))
        got = self.reorient("ras.nii.gz", "like.nii.gz", "like:" + self.path("lia.nii.gz"))
        self.assertEqual(nib.aff2axcodes(got.affine), nib.aff2axcodes(reference.affine))
        back = self.reorient("like.nii.gz", "back.nii.gz", "RAS")
        np.testing.assert_array_equal(np.asanyarray(back.dataobj), np.asanyarray(image.dataobj))
        np.testing.assert_allclose(back.affine, image.affine, atol=1e-6)

    def test_refusals(self):
        self.volume("v.nii.gz", (4, 4, 4), np.eye(4))
        for to, words in (("RRS", "not an orientation code"), ("RA", "not an orientation code"), ("like:" + self.path("none.nii"), "none.nii")):
            with self.subTest(to=to):
                refused = run("reorient", "-i", self.path("v.nii.gz"), "-o", self.path("out.nii.gz"), "--to", to)
                self.assertNotEqual(refused.returncode, 0)
                self.assertIn(words, refused.stderr)
                self.assertEqual(len(refused.stderr.strip().splitlines()), 1, refused.stderr)
                self.assertFalse(os.path.exists(self.path("out.nii.gz")))


if __name__ == "__main__":
    main()
