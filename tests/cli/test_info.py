#!/usr/bin/python3
"""gridwarp info on what a file holds beyond one image: a NIfTI series' time axis and TR (against
the header nibabel wrote) and a multi-page TIFF's pages (written by Pillow), which every command
reads as a stack.

    /usr/bin/python3 tests/cli/test_info.py --gridwarp build/app/gridwarp
"""
import json
import os
import sys

import nibabel as nib
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402


class Info(FolderTestCase):
    def info(self, name):
        text = run("info", self.path(name))
        self.assertEqual(text.returncode, 0, text.stderr)
        as_json = run("info", self.path(name), "--json")
        self.assertEqual(as_json.returncode, 0, as_json.stderr)
        return text.stdout, text.stderr, json.loads(as_json.stdout)

    def test_a_series_shows_its_time_axis_and_tr(self):
        for units, zoom, shown in (("sec", 2.5, "TR 2.5 s"), ("msec", 800.0, "TR 800 ms"), ("unknown", 3.0, "TR 3 (no time unit")):
            with self.subTest(units=units):
                image = nib.Nifti1Image(np.zeros((6, 5, 4, 7), np.int16), np.eye(4))
                image.header.set_xyzt_units("mm", units)
                image.header.set_zooms((1, 1, 1, zoom))
                nib.save(image, self.path("series.nii.gz"))
                text, _, info = self.info("series.nii.gz")
                self.assertEqual(info["time"], {"volumes": 7, "tr": zoom, "tr_unit": {"sec": "s", "msec": "ms"}.get(units, "")})
                self.assertIn("time:      7 volumes, " + shown, text)
                self.assertIn("channels:  7 (the volumes of the time axis)", text)

    def test_a_volume_has_no_time_axis(self):
        nib.save(nib.Nifti1Image(np.zeros((6, 5, 4), np.int16), np.eye(4)), self.path("volume.nii"))
        text, _, info = self.info("volume.nii")
        self.assertNotIn("time", info)
        self.assertNotIn("time:", text)

    def test_a_multi_page_tiff_shows_its_pages(self):
        pages = [Image.fromarray(np.full((10, 12), 40 * i, np.uint8)) for i in range(3)]
        pages[0].save(self.path("pages.tif"), save_all=True, append_images=pages[1:])
        text, err, info = self.info("pages.tif")
        self.assertEqual(info["pages"], 3)
        self.assertEqual(info["batch"], 3)
        self.assertIn("pages:     3\n", text)
        self.assertEqual(err, "")
        # Every page is read: a PNG cannot hold them, and the command says so in one line.
        result = run("affine", "-i", self.path("pages.tif"), "-o", self.path("first.png"), "--rotate", "0")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("got 3 item(s) of size 12 x 10", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertFalse(os.path.exists(self.path("first.png")))
        pages[0].save(self.path("one.tif"))
        _, err, info = self.info("one.tif")
        self.assertNotIn("pages", info)
        self.assertEqual(err, "")


if __name__ == "__main__":
    main()
