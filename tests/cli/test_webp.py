#!/usr/bin/python3
"""gridwarp's own WebP reader and writer against OpenCV: lossy and lossless files, with and without
alpha, decode to OpenCV's imread(IMREAD_UNCHANGED) pixels; what gridwarp writes (grey, colour and
colour with alpha, lossless by default or at a --quality) is byte for byte what cv2.imencode
writes; a cut-off file is refused in one line naming it.

    /usr/bin/python3 tests/cli/test_webp.py --gridwarp build/app/gridwarp
"""
import os
import sys

import cv2
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

RNG = np.random.default_rng(17)


def photo(height, width, channels=3):
    y, x = np.mgrid[0:height, 0:width]
    planes = [128 + 100 * np.sin(x / (6 + 3 * c)) * np.cos(y / (5 + 2 * c)) for c in range(channels)]
    return np.clip(np.stack(planes, axis=-1) + RNG.normal(0, 5, (height, width, channels)), 0, 255).astype(np.uint8)


class Webp(FolderTestCase):
    def test_every_form_decodes_as_opencv_does(self):
        colour, rgba = photo(41, 57), photo(41, 57, 4)
        forms = {
            "lossy": lambda p: cv2.imwrite(p, colour, [cv2.IMWRITE_WEBP_QUALITY, 80]),
            "lossless": lambda p: cv2.imwrite(p, colour),
            "lossy_alpha": lambda p: Image.fromarray(rgba, "RGBA").save(p, quality=70),
            "lossless_alpha": lambda p: Image.fromarray(rgba, "RGBA").save(p, lossless=True),
            "pillow_rgb": lambda p: Image.fromarray(colour).save(p, quality=90),
        }
        self.check_forms_decode_as_opencv(forms, ".webp")

    def test_writes_what_opencv_writes(self):
        sources = {"colour": photo(37, 49), "alpha": photo(37, 49, 4), "grey": photo(37, 49)[:, :, 0]}
        self.check_writes_as_opencv(sources, ".webp", (1, 60, 100), cv2.IMWRITE_WEBP_QUALITY)

    def test_a_cut_off_file_is_refused_naming_it(self):
        cv2.imwrite(self.path("whole.webp"), photo(64, 64), [cv2.IMWRITE_WEBP_QUALITY, 90])
        with open(self.path("whole.webp"), "rb") as f:
            data = f.read()
        with open(self.path("cut.webp"), "wb") as f:
            f.write(data[:len(data) * 2 // 3])
        out = self.path("cut_out.png")
        result = run("affine", "-i", self.path("cut.webp"), "-o", out, "--scale", "1")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("cut.webp", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    main()
