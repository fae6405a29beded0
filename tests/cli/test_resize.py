#!/usr/bin/python3
"""gridwarp resize: by size (W,H and WxH), factor, percentage and voxel size. Grids against
nibabel's affine arithmetic (and MRtrix3's mrgrid where installed), values against scipy's
map_coordinates and OpenCV's resize, and the refusals.

    /usr/bin/python3 tests/cli/test_resize.py --gridwarp build/app/gridwarp
"""
import os
import shutil
import subprocess
import sys

import cv2
import nibabel as nib
import numpy as np
from scipy import ndimage

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

CARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "card.png")
AFFINE = np.array([[0.9, 0.1, 0, -20], [-0.1, 0.9, 0.05, 10], [0, -0.05, 1.2, 5], [0, 0, 0, 1]])


class Resize(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        rng = np.random.default_rng(1)
        cls.volume = ndimage.gaussian_filter(rng.normal(100, 30, (41, 37, 23)), 1.5).astype(np.float32)
        nib.save(nib.Nifti1Image(cls.volume, AFFINE), cls.path("vol.nii"))

    def resize(self, source, out, *args):
        result = run("resize", "-i", source, "-o", out, *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return out

    def test_voxel_size_keeps_the_field_of_view_centred(self):
        out = self.resize(self.path("vol.nii"), self.path("iso2.nii"), "--voxel-size", "2", "--antialias", "off")
        got = nib.load(out)
        spacing = np.linalg.norm(AFFINE[:3, :3], axis=0)
        size = np.maximum(1, np.round(np.array(self.volume.shape) * spacing / 2)).astype(int)
        step = 2 / spacing
        start = (np.array(self.volume.shape) - 1) / 2 - step * (size - 1) / 2
        index_map = np.eye(4)
        index_map[:3, :3] = np.diag(step)
        index_map[:3, 3] = start
        self.assertEqual(got.shape, tuple(size))
        np.testing.assert_allclose(got.affine, AFFINE @ index_map, atol=1e-4)
        # Values: linear interpolation at those input indices, edge-clamped.
        j = np.meshgrid(*[np.arange(s) for s in size], indexing="ij")
        positions = [start[a] + step[a] * j[a] for a in range(3)]
        expected = ndimage.map_coordinates(self.volume.astype(np.float64), positions, order=1, mode="nearest")
        np.testing.assert_allclose(np.asanyarray(got.dataobj), expected, rtol=1e-5, atol=1e-3)

    def test_voxel_size_grid_equals_mrgrid(self):
        if shutil.which("mrgrid") is None:
            self.skipTest("MRtrix3's mrgrid is not installed")
        out = self.resize(self.path("vol.nii"), self.path("iso15.nii"), "--voxel-size", "1.5,2,2.5")
        peer = self.path("mrgrid.nii")
        subprocess.run(["mrgrid", self.path("vol.nii"), "regrid", "-voxel", "1.5,2,2.5", peer, "-force", "-quiet"], check=True)
        ours, theirs = nib.load(out), nib.load(peer)
        self.assertEqual(ours.shape, theirs.shape)
        np.testing.assert_allclose(ours.affine, theirs.affine, atol=1e-4)
        # Ties: 33, 41 and 25 voxels of 2 mm at 4 mm are 16.5, 20.5 and 12.5 voxels.
        nib.save(nib.Nifti1Image(np.zeros((33, 41, 25), np.float32), np.diag([2.0, 2.0, 2.0, 1.0])), self.path("ties.nii"))
        out = self.resize(self.path("ties.nii"), self.path("ties4.nii"), "--voxel-size", "4")
        subprocess.run(["mrgrid", self.path("ties.nii"), "regrid", "-voxel", "4", peer, "-force", "-quiet"], check=True)
        self.assertEqual(nib.load(out).shape, nib.load(peer).shape)
        np.testing.assert_allclose(nib.load(out).affine, nib.load(peer).affine, atol=1e-4)

    def test_voxel_size_rounds_ties_down(self):
        # The rule mrgrid follows (observed with Debian's mrtrix3 3.0.3): 16.5 -> 16, 20.5 -> 20, 12.5 -> 12; 6.67 -> 7.
        nib.save(nib.Nifti1Image(np.zeros((33, 41, 25), np.float32), np.diag([2.0, 2.0, 2.0, 1.0])), self.path("ties.nii"))
        self.assertEqual(nib.load(self.resize(self.path("ties.nii"), self.path("t4.nii"), "--voxel-size", "4")).shape, (16, 20, 12))
        self.assertEqual(nib.load(self.resize(self.path("ties.nii"), self.path("t3.nii"), "--voxel-size", "3")).shape, (22, 27, 17))

    def test_size_factor_and_percentage_agree(self):
        by_size = self.resize(CARD, self.path("s.png"), "--size", "150,100")
        by_x = self.resize(CARD, self.path("x.png"), "--size", "150x100")
        h, w = cv2.imread(CARD, cv2.IMREAD_UNCHANGED).shape[:2]
        half_percent = self.resize(CARD, self.path("p.png"), "--scale", "50%")
        half_factor = self.resize(CARD, self.path("f.png"), "--scale", "0.5")
        np.testing.assert_array_equal(cv2.imread(by_size, cv2.IMREAD_UNCHANGED), cv2.imread(by_x, cv2.IMREAD_UNCHANGED))
        np.testing.assert_array_equal(cv2.imread(half_percent, cv2.IMREAD_UNCHANGED), cv2.imread(half_factor, cv2.IMREAD_UNCHANGED))
        self.assertEqual(cv2.imread(half_percent).shape[:2], (round(h * 0.5), round(w * 0.5)))
        self.assertEqual(cv2.imread(by_size).shape[:2], (100, 150))

    def test_enlarging_matches_opencv_with_bright_edges(self):
        card = cv2.imread(CARD, cv2.IMREAD_UNCHANGED)
        h, w = card.shape[:2]
        out = self.resize(CARD, self.path("big.png"), "--size", f"{2 * w},{2 * h}")
        ours = cv2.imread(out, cv2.IMREAD_UNCHANGED).astype(int)
        theirs = cv2.resize(card, (2 * w, 2 * h), interpolation=cv2.INTER_LINEAR).astype(int)
        self.assertLessEqual(np.abs(ours - theirs).max(), 1)
        self.assertLess(abs(ours[0].mean() - theirs[0].mean()), 0.5)

    def test_fit_and_one_sided_sizes_keep_the_aspect(self):
        def size_of(path):
            return tuple(cv2.imread(path, cv2.IMREAD_UNCHANGED).shape[1::-1])

        def half_up(value):  # round half away from zero, as the docs state
            return int(np.floor(value + 0.5))

        width, height = size_of(CARD)
        for args, expected in ((["--size", "160x"], (160, half_up(height * 160 / width))),
                               (["--size", "x77"], (half_up(width * 77 / height), 77)),
                               (["--size", ",50"], (half_up(width * 50 / height), 50)),
                               (["--fit", "100x100"], (100, half_up(height * 100 / width))),
                               (["--fit", "1000x100"], (half_up(width * 100 / height), 100)),
                               (["--fit", "1000x1000"], (1000, half_up(height * 1000 / width)))):
            with self.subTest(args=args):
                self.assertEqual(size_of(self.resize(CARD, self.path("fit.png"), *args)), expected)
        # The box holds the image as displayed: a JPEG stored 60x20 with EXIF orientation 6 shows 20x60.
        stored = np.full((20, 60, 3), 128, np.uint8)
        exif = (b"Exif\0\0II*\0" + (8).to_bytes(4, "little") + (1).to_bytes(2, "little") +
                (0x0112).to_bytes(2, "little") + (3).to_bytes(2, "little") + (1).to_bytes(4, "little") +
                (6).to_bytes(2, "little") + b"\0\0" + (0).to_bytes(4, "little"))
        encoded = cv2.imencode(".jpg", stored)[1].tobytes()
        with open(self.path("turned.jpg"), "wb") as f:
            f.write(encoded[:2] + b"\xff\xe1" + (len(exif) + 2).to_bytes(2, "big") + exif + encoded[2:])
        self.assertEqual(size_of(self.resize(self.path("turned.jpg"), self.path("turned_fit.png"), "--fit", "10x10")), (3, 10))
        volume = nib.load(self.resize(self.path("vol.nii"), self.path("vol_fit.nii"), "--size", "20xx"))
        self.assertEqual(volume.shape, (20, half_up(37 * 20 / 41), half_up(23 * 20 / 41)))
        for bad in (["--size", "512"], ["--size", "x"], ["--size", "10x20x"], ["--fit", "100"]):
            result = run("resize", "-i", CARD, "-o", self.path("bad.png"), *bad)
            self.assertNotEqual(result.returncode, 0)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertIn(bad[0], result.stderr)

    def test_refusals_are_one_line(self):
        cases = [
            (["--size", "10,10", "--scale", "2"], "exactly one of --size, --fit, --scale or --voxel-size"),
            (["--scale", "abc"], "--scale"),
            (["--size", "10"], "--size"),
            (["--voxel-size", "1"], "--voxel-size needs a volume"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                out = self.path("refused.png")
                result = run("resize", "-i", CARD, "-o", out, *args)
                self.assertNotEqual(result.returncode, 0)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertIn(needle, result.stderr)
                self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    main()
