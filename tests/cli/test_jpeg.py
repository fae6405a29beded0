#!/usr/bin/python3
"""gridwarp's own JPEG reader and writer against OpenCV: grey, colour at every chroma subsampling,
progressive and restart-marker files decode to OpenCV's imread(IMREAD_UNCHANGED) pixels, CMYK files
(left to OpenCV) too, and a cut-off or corrupt file is refused in one line naming it; what gridwarp
writes is, byte for byte, what cv2.imencode writes at the same quality.

    /usr/bin/python3 tests/cli/test_jpeg.py --gridwarp build/app/gridwarp
"""
import os
import sys

import cv2
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

RNG = np.random.default_rng(11)


def photo(height, width):
    y, x = np.mgrid[0:height, 0:width]
    planes = [128 + 100 * np.sin(x / (7 + 3 * c)) * np.cos(y / (5 + 2 * c)) for c in range(3)]
    return np.clip(np.stack(planes, axis=-1) + RNG.normal(0, 6, (height, width, 3)), 0, 255).astype(np.uint8)


class Jpeg(FolderTestCase):
    def test_every_form_decodes_as_opencv_does(self):
        colour = photo(45, 61)
        forms = {
            "grey": lambda p: Image.fromarray(colour[:, :, 0]).save(p, quality=90),
            "colour420": lambda p: Image.fromarray(colour).save(p, quality=90, subsampling=2),
            "colour422": lambda p: Image.fromarray(colour).save(p, quality=90, subsampling=1),
            "colour444": lambda p: Image.fromarray(colour).save(p, quality=95, subsampling=0),
            "progressive": lambda p: Image.fromarray(colour).save(p, quality=80, progressive=True),
            "opencv_restart": lambda p: cv2.imwrite(p, colour, [cv2.IMWRITE_JPEG_QUALITY, 85, cv2.IMWRITE_JPEG_RST_INTERVAL, 2]),
            "cmyk": lambda p: Image.fromarray(colour).convert("CMYK").save(p, quality=90),
        }
        self.check_forms_decode_as_opencv(forms, ".jpg")

    def test_writes_what_opencv_writes(self):
        colour = photo(53, 70)
        sources = {"colour": colour, "grey": colour[:, :, 1]}
        self.check_writes_as_opencv(sources, ".jpg", (1, 50, 95, 100), cv2.IMWRITE_JPEG_QUALITY)

    def test_damaged_files_are_refused_naming_the_file(self):
        good = self.path("good.jpg")
        Image.fromarray(photo(64, 64)).save(good, quality=90)
        with open(good, "rb") as f:
            data = f.read()
        scan = data.index(b"\xff\xda")
        damaged = {
            "cut.jpg": data[:scan + (len(data) - scan) // 2],
            "corrupt.jpg": data[:scan + 40] + bytes([0xFF, 0x00] * 4) + b"\xff\xd0" + data[scan + 50:],
        }
        for name, content in damaged.items():
            with self.subTest(file=name):
                source = self.path(name)
                with open(source, "wb") as f:
                    f.write(content)
                out = self.path(name + ".png")
                result = run("affine", "-i", source, "-o", out, "--scale", "1")
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(name, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    main()
