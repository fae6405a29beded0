#!/usr/bin/python3
"""EXIF orientation: JPEG, PNG and WebP files that declare orientations 1-8 are read as Pillow's
ImageOps.exif_transpose shows them, --keep-orientation reads the stored pixels, info reports the
tag, a damaged tag is ignored, and outputs carry no tag.

    /usr/bin/python3 tests/cli/test_exif_orientation.py --gridwarp build/app/gridwarp
"""
import os
import sys

import numpy as np
from PIL import Image, ImageOps

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

STORED = np.random.default_rng(0).integers(0, 255, (30, 50, 3)).astype(np.uint8)


def save_with_orientation(path, orientation, **options):
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(STORED).save(path, exif=exif.tobytes(), **options)


class Orientation(FolderTestCase):
    def identity(self, source, out, *extra):
        result = run("affine", "-i", source, "-o", out, "--scale", "1", *extra)
        self.assertEqual(result.returncode, 0, result.stderr)
        return np.asarray(Image.open(out).convert("RGB"))

    def test_every_orientation_reads_as_viewers_show_it(self):
        for extension, options, tolerance in (("png", {}, 0), ("webp", {"lossless": True}, 0), ("jpg", {"quality": 95}, 4)):
            for orientation in range(1, 9):
                with self.subTest(format=extension, orientation=orientation):
                    source = self.path(f"o{orientation}.{extension}")
                    save_with_orientation(source, orientation, **options)
                    shown = np.asarray(ImageOps.exif_transpose(Image.open(source)).convert("RGB")).astype(int)
                    got = self.identity(source, self.path(f"out{orientation}_{extension}.png")).astype(int)
                    self.assertEqual(got.shape, shown.shape)
                    self.assertLessEqual(np.abs(got - shown).mean(), tolerance)
                    self.assertNotIn(0x0112, Image.open(self.path(f"out{orientation}_{extension}.png")).getexif())

    def test_keep_orientation_reads_the_stored_pixels(self):
        source = self.path("turned.png")
        save_with_orientation(source, 6)
        got = self.identity(source, self.path("kept.png"), "--keep-orientation")
        np.testing.assert_array_equal(got, STORED)

    def test_info_reports_the_tag(self):
        source = self.path("info.png")
        save_with_orientation(source, 8)
        result = run("info", source)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("orientation: EXIF 8 (turned 90 degrees counter-clockwise), applied", result.stdout)
        self.assertIn("size:      30 x 50", result.stdout)

    def test_a_damaged_tag_is_ignored(self):
        # An IFD offset past the end of the EXIF block: the pixels are read as stored, without error.
        source = self.path("damaged.png")
        block = b"MM\x00\x2a\x00\x00\xff\xf0"
        Image.fromarray(STORED).save(source, exif=block)
        got = self.identity(source, self.path("damaged_out.png"))
        np.testing.assert_array_equal(got, STORED)


if __name__ == "__main__":
    main()
