#!/usr/bin/python3
"""gridwarp affine --expand: the canvas is the bounding box of the turned input, each side rounded
to the nearest whole pixel, centres coinciding. Sizes against the box computed here, quarter turns
against numpy's rot90, content against scipy's rotation about the centre, and the refusals.

    /usr/bin/python3 tests/cli/test_affine_expand.py --gridwarp build/app/gridwarp
"""
import math
import os
import sys

import numpy as np
from PIL import Image
from scipy import ndimage

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402


def box(width, height, degrees, scale=1.0):
    c, s = abs(math.cos(math.radians(degrees))), abs(math.sin(math.radians(degrees)))
    return max(1, round(scale * (c * width + s * height))), max(1, round(scale * (s * width + c * height)))


class Expand(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        y, x = np.mgrid[0:48, 0:64]
        cls.photo = (128 + 100 * np.sin(x / 5.0) * np.cos(y / 7.0)).astype(np.uint8)
        Image.fromarray(cls.photo).save(cls.path("photo.png"))
        Image.fromarray(np.full((48, 64), 255, np.uint8)).save(cls.path("white.png"))

    def turn(self, source, *args):
        out = self.path("out.png")
        result = run("affine", "-i", self.path(source), "-o", out, *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return np.asarray(Image.open(out)).astype(np.float64)

    def test_sides_are_the_rounded_bounding_box(self):
        for degrees, scale in ((30, 1.0), (45, 1.0), (10, 1.0), (-70, 1.0), (30, 0.5), (0, 2.0)):
            args = ["--rotate", str(degrees), "--scale", str(scale), "--expand"]
            got = self.turn("photo.png", *args)
            width, height = box(64, 48, degrees, scale)
            self.assertEqual(got.shape, (height, width), args)

    def test_quarter_turns_are_exact_permutations(self):
        np.testing.assert_array_equal(self.turn("photo.png", "--rotate", "90", "--expand"), np.rot90(self.photo, 1))
        np.testing.assert_array_equal(self.turn("photo.png", "--rotate", "-90", "--expand"), np.rot90(self.photo, -1))
        np.testing.assert_array_equal(self.turn("photo.png", "--rotate", "180", "--expand"), np.rot90(self.photo, 2))

    def test_no_corner_is_cut(self):
        got = self.turn("white.png", "--rotate", "30", "--expand")
        # The turned rectangle reaches every side of its bounding box and keeps its area.
        touched = got > 0
        self.assertTrue(touched[0].any() and touched[-1].any() and touched[:, 0].any() and touched[:, -1].any())
        self.assertAlmostEqual(got.sum() / 255 / (64 * 48), 1.0, delta=0.02)

    def test_content_is_turned_about_the_centre(self):
        got = self.turn("photo.png", "--rotate", "30", "--expand")
        height, width = got.shape
        # scipy: output (row, col) reads input R^-1 (p - centre_out) + centre_in, counter-clockwise on screen.
        angle = math.radians(30)
        inverse = np.array([[math.cos(angle), math.sin(angle)], [-math.sin(angle), math.cos(angle)]])  # (row, col), y down
        centre_out = np.array([(height - 1) / 2, (width - 1) / 2])
        centre_in = np.array([(48 - 1) / 2, (64 - 1) / 2])
        expected = ndimage.affine_transform(self.photo.astype(np.float64), inverse, offset=centre_in - inverse @ centre_out,
                                            output_shape=(height, width), order=1, mode="constant", cval=0)
        inner = (slice(height // 2 - 10, height // 2 + 10), slice(width // 2 - 10, width // 2 + 10))
        self.assertLessEqual(np.abs(got[inner] - np.rint(expected[inner])).max(), 1)

    def test_refusals(self):
        for args in (["--expand"], ["--rotate", "30", "--expand", "--size", "100x100"], ["--crop", "0,0,10,10", "--expand"]):
            result = run("affine", "-i", self.path("photo.png"), "-o", self.path("bad.png"), *args)
            self.assertNotEqual(result.returncode, 0, args)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertIn("--expand", result.stderr)
            self.assertFalse(os.path.exists(self.path("bad.png")))


if __name__ == "__main__":
    main()
