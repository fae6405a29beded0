#!/usr/bin/python3
"""--quality for JPEG and WebP outputs and --compression-level for PNG outputs: what the files
carry, checked with Pillow and the PNG format (a JPEG's quantisation tables against Pillow's at the same
quality, a PNG's zlib header level), and the refusals.

    /usr/bin/python3 tests/cli/test_write_options.py --gridwarp build/app/gridwarp
"""
import os
import sys

from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

CARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "card.png")


def png_zlib_level(path):
    """FLEVEL of the first IDAT's zlib header: 0 fastest (levels 0-1), 1 fast (2-5), 2 default (6), 3 best (7-9)."""
    with open(path, "rb") as f:
        data = f.read()
    at = data.index(b"IDAT") + 4
    return data[at + 1] >> 6


class WriteOptions(FolderTestCase):
    def write(self, out, *args):
        result = run("affine", "-i", CARD, "-o", self.path(out), "--rotate", "5", "-q", *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return self.path(out)

    def test_jpeg_quality_sets_the_quantisation_tables(self):
        for quality in (30, 80):
            with self.subTest(quality=quality):
                ours = Image.open(self.write(f"q{quality}.jpg", "--quality", str(quality)))
                reference = self.path(f"pil{quality}.jpg")
                ours.convert("RGB").save(reference, quality=quality, subsampling=0)
                self.assertEqual(ours.quantization, Image.open(reference).quantization)
        # The default is OpenCV's 95.
        default = Image.open(self.write("default.jpg"))
        default.convert("RGB").save(self.path("pil95.jpg"), quality=95, subsampling=0)
        self.assertEqual(default.quantization, Image.open(self.path("pil95.jpg")).quantization)
        self.assertLess(os.path.getsize(self.path("q30.jpg")), os.path.getsize(self.path("q80.jpg")))
        # Every JPEG spelling takes --quality, .jpe too (written through OpenCV).
        for suffix in ("jpeg", "jpe", "JPG"):
            with self.subTest(suffix=suffix):
                other = Image.open(self.write(f"q30.{suffix}", "--quality", "30"))
                self.assertEqual(other.format, "JPEG")
                self.assertEqual(other.quantization, Image.open(self.path("pil30.jpg")).quantization)

    def test_webp_quality_is_lossy_below_100(self):
        lossy = Image.open(self.write("q50.webp", "--quality", "50"))
        lossless = Image.open(self.write("default.webp"))
        exact = Image.open(self.write("exact.png"))
        self.assertEqual(list(lossless.convert("RGB").getdata()), list(exact.convert("RGB").getdata()))
        self.assertNotEqual(list(lossy.convert("RGB").getdata()), list(exact.convert("RGB").getdata()))

    def test_png_compression_level(self):
        stored = self.write("l0.png", "--compression-level", "0")
        best = self.write("l9.png", "--compression-level", "9")
        default = self.write("default.png")
        self.assertEqual(png_zlib_level(stored), 0)
        self.assertEqual(png_zlib_level(best), 3)
        self.assertEqual(png_zlib_level(default), 1)  # level 4
        pixels = [list(Image.open(p).getdata()) for p in (stored, best, default)]
        self.assertEqual(pixels[0], pixels[1])
        self.assertEqual(pixels[0], pixels[2])
        self.assertGreater(os.path.getsize(stored), os.path.getsize(best))
        # Level 0 stores the rows: the file holds every byte of the scanlines.
        with Image.open(stored) as image:
            raw_bytes = image.size[0] * image.size[1] * len(image.getbands())
        self.assertGreater(os.path.getsize(stored), raw_bytes)

    def test_refusals(self):
        cases = [
            ("out.png", ["--quality", "50"], "JPEG and WebP", 1),
            ("out.nii", ["--quality", "50"], "JPEG and WebP", 1),
            ("out.png", ["--compression-level", "11"], "0 to 9", 1),
            ("out.jpg", ["--quality", "0"], "--quality", 2),
            ("out.jpg", ["--quality", "101"], "--quality", 2),
        ]
        for out, args, needle, status in cases:
            with self.subTest(out=out, args=args):
                result = run("affine", "-i", CARD, "-o", self.path(out), "--rotate", "5", *args)
                self.assertEqual(result.returncode, status, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertIn(needle, result.stderr)
                self.assertFalse(os.path.exists(self.path(out)))


if __name__ == "__main__":
    main()
