#!/usr/bin/python3
"""gridwarp's own PNG codec against OpenCV and Pillow: every colour type, bit depth, transparency
form and interlacing Pillow and OpenCV write decodes to OpenCV's imread(IMREAD_UNCHANGED) pixels
(the common forms through gridwarp's own inflate and unfiltering, the others through libpng);
what gridwarp writes decodes in OpenCV and Pillow to the pixels it was given, at every level and
across several compressed blocks; every row filter at every pixel size unfilters exactly; a
benign libpng warning does not refuse the file, a CRC error in any image data chunk does.

    /usr/bin/python3 tests/cli/test_png.py --gridwarp build/app/gridwarp
"""
import io
import os
import struct
import sys
import zlib

import cv2
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, as_npy_image, main, run  # noqa: E402

RNG = np.random.default_rng(7)


def smooth(height, width, channels, maximum):
    """Photo-like values (ramps plus noise), so that every PNG filter gets chosen somewhere."""
    y, x = np.mgrid[0:height, 0:width]
    planes = [(x * (c + 1) + y * (3 - c)) % (maximum + 1) for c in range(channels)]
    values = np.stack(planes, axis=-1).astype(np.int64) + RNG.integers(0, 3, (height, width, channels))
    return np.clip(values, 0, maximum)


class Png(FolderTestCase):
    def test_every_form_decodes_as_opencv_does(self):
        grey = smooth(37, 53, 1, 255)[:, :, 0].astype(np.uint8)
        colour = smooth(37, 53, 3, 255).astype(np.uint8)
        forms = {
            "grey8": lambda p: Image.fromarray(grey).save(p),
            "grey1": lambda p: Image.fromarray(grey > 128).save(p),
            "grey4": lambda p: Image.fromarray(grey // 17).convert("L").save(p, bits=4),
            "grey16": lambda p: cv2.imwrite(p, smooth(37, 53, 1, 65535)[:, :, 0].astype(np.uint16)),
            "grey_alpha": lambda p: Image.fromarray(np.dstack([grey, 255 - grey]), "LA").save(p),
            "grey_trns": lambda p: Image.fromarray(grey).save(p, transparency=7),
            "rgb8": lambda p: Image.fromarray(colour).save(p),
            "rgb8_interlaced": lambda p: Image.fromarray(colour).save(p, optimize=False, interlace=1),
            "rgb_trns": lambda p: Image.fromarray(colour).save(p, transparency=(1, 2, 3)),
            "rgba8": lambda p: Image.fromarray(smooth(37, 53, 4, 255).astype(np.uint8), "RGBA").save(p),
            "rgb16": lambda p: cv2.imwrite(p, smooth(37, 53, 3, 65535).astype(np.uint16)),
            "rgba16": lambda p: cv2.imwrite(p, smooth(37, 53, 4, 65535).astype(np.uint16)),
            "palette": lambda p: Image.fromarray(colour).quantize(50).save(p),
            "palette_trns": lambda p: Image.fromarray(colour).quantize(50).save(p, transparency=3),
            "palette2": lambda p: Image.fromarray(colour).quantize(4).save(p, bits=2),
        }
        self.check_forms_decode_as_opencv(forms, ".png")

    def test_what_it_writes_reads_back_exactly(self):
        cases = {
            "grey8": smooth(41, 29, 1, 255).astype(np.uint8)[:, :, 0],
            "bgr8": smooth(41, 29, 3, 255).astype(np.uint8),
            "bgra8": smooth(41, 29, 4, 255).astype(np.uint8),
            "grey16": smooth(41, 29, 1, 65535).astype(np.uint16)[:, :, 0],
            "bgr16": smooth(41, 29, 3, 65535).astype(np.uint16),
            "bgra16": smooth(41, 29, 4, 65535).astype(np.uint16),
            # More than one compressed block (1 MiB of rows each), joined into one zlib stream.
            "blocks": smooth(700, 600, 3, 255).astype(np.uint8),
        }
        for name, pixels in cases.items():
            for level in ("default", "0", "1", "9"):
                with self.subTest(image=name, level=level):
                    source = self.path(f"{name}.npy")
                    np.save(source, as_npy_image(pixels))
                    out = self.path(f"{name}_{level}.png")
                    extra = [] if level == "default" else ["--compression-level", level]
                    result = run("affine", "-i", source, "-o", out, "--scale", "1", "--mode", "nearest", "-q", *extra)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    np.testing.assert_array_equal(cv2.imread(out, cv2.IMREAD_UNCHANGED), pixels)
                    # Read back by gridwarp too: rows of every filter type, unfiltered by its own decoder.
                    np.testing.assert_array_equal(self.decoded(out), as_npy_image(pixels))
                    with Image.open(out) as image:
                        image.load()  # Pillow checks the chunks' CRCs and the zlib stream as it decodes
                        if pixels.dtype == np.uint8:
                            shown = np.asarray(image)
                            rgb = pixels if pixels.ndim == 2 else pixels[:, :, [2, 1, 0] + ([3] if pixels.shape[2] == 4 else [])]
                            np.testing.assert_array_equal(shown, rgb)
                    with open(out, "rb") as f:
                        data = f.read()
                    stream = b"".join(data[at + 8:at + 8 + struct.unpack(">I", data[at:at + 4])[0]]
                                      for at in chunk_offsets(data) if data[at + 4:at + 8] == b"IDAT")
                    zlib.decompress(stream)  # the Adler-32 of the joined blocks is checked here

    def test_a_benign_warning_is_not_a_refusal(self):
        # An ancillary chunk with a wrong CRC: libpng drops it with a warning; the pixels are whole.
        pixels, data = small_png()
        text = b"tEXt" + b"Comment\x00hello"
        chunk = struct.pack(">I", len(text) - 4) + text + struct.pack(">I", zlib.crc32(text) ^ 1)
        damaged = self.path("damaged.png")
        with open(damaged, "wb") as f:
            f.write(data[:33] + chunk + data[33:])
        got = self.decoded(damaged)
        np.testing.assert_array_equal(got, as_npy_image(pixels[:, :, ::-1]))

    def test_damaged_image_data_is_refused_naming_the_file(self):
        # The zlib stream's Adler-32 alone in a second IDAT chunk, so that every row decodes before
        # libpng finds the mismatch (which it reports only as a warning).
        pixels, data = small_png()
        at = next(at for at in chunk_offsets(data) if data[at + 4:at + 8] == b"IDAT")
        length = struct.unpack(">I", data[at:at + 4])[0]
        stream = data[at + 8:at + 8 + length]

        def idat(payload):
            return struct.pack(">I", len(payload)) + b"IDAT" + payload + struct.pack(">I", zlib.crc32(b"IDAT" + payload))

        for name, check in (("split.png", stream[-4:]), ("bad.png", bytes([stream[-4] ^ 0xFF]) + stream[-3:])):
            with open(self.path(name), "wb") as f:
                f.write(data[:at] + idat(stream[:-4]) + idat(check) + data[at + 12 + length:])
        np.testing.assert_array_equal(self.decoded(self.path("split.png")), as_npy_image(pixels[:, :, ::-1]))
        out = self.path("bad_out.png")
        result = run("affine", "-i", self.path("bad.png"), "-o", out, "--scale", "1")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("bad.png", result.stderr)
        self.assertIn("incorrect data check", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertFalse(os.path.exists(out))

    def test_a_stream_with_data_past_the_image_reads_as_libpng_reads_it(self):
        # More rows in the zlib stream than the image has, over several IDAT chunks: libdeflate's
        # exact-size inflate refuses it and libpng (which warns and keeps the image) reads the file;
        # the chunks joined for libdeflate must not be what libpng is given.
        pixels, data = small_png()
        rows = b"".join(b"\x00" + row.tobytes() for row in np.concatenate([pixels, pixels[:4]]))
        stream = zlib.compress(rows, 6)

        def idat(payload):
            return struct.pack(">I", len(payload)) + b"IDAT" + payload + struct.pack(">I", zlib.crc32(b"IDAT" + payload))

        first = next(at for at in chunk_offsets(data) if data[at + 4:at + 8] == b"IDAT")
        iend = next(at for at in chunk_offsets(data) if data[at + 4:at + 8] == b"IEND")
        pieces = [stream[k:k + 97] for k in range(0, len(stream), 97)]
        with open(self.path("long.png"), "wb") as f:
            f.write(data[:first] + b"".join(idat(piece) for piece in pieces) + data[iend:])
        expected = cv2.imread(self.path("long.png"), cv2.IMREAD_UNCHANGED)
        self.assertIsNotNone(expected)
        np.testing.assert_array_equal(self.decoded(self.path("long.png")), as_npy_image(expected))


    def test_every_filter_at_every_pixel_size_unfilters_exactly(self):
        # Rows filtered by this file's own encoder (ISO 15948, 9.2), every type on the first row
        # (no row above) and on later ones, over uniform noise so that Paeth picks a, b and c and
        # meets ties; 8- and 16-bit grey, RGB and RGBA: pixels of 1, 2, 3, 4, 6 and 8 bytes.
        forms = {"grey8": (0, 1, np.uint8), "grey16": (0, 1, np.uint16), "rgb8": (2, 3, np.uint8),
                 "rgba8": (6, 4, np.uint8), "rgb16": (2, 3, np.uint16), "rgba16": (6, 4, np.uint16)}
        for name, (colour, channels, dtype) in forms.items():
            for first_filter in range(5):
                with self.subTest(form=name, first_row_filter=first_filter):
                    pixels = RNG.integers(0, np.iinfo(dtype).max + 1, (23, 19, channels), dtype=np.int64).astype(dtype)
                    filters = [(first_filter + row) % 5 for row in range(pixels.shape[0])]
                    source = self.path(f"{name}_{first_filter}.png")
                    with open(source, "wb") as f:
                        f.write(png_with_filters(pixels, colour, filters))
                    got = self.decoded(source)
                    expected = pixels[:, :, [2, 1, 0, 3][:channels]] if channels >= 3 else pixels
                    np.testing.assert_array_equal(got, as_npy_image(expected))

    def test_a_crc_error_in_a_later_image_data_chunk_is_refused(self):
        # The stream split over 97-byte IDAT chunks, the fifth one's CRC wrong: the chunks before it
        # have already been joined for the inflater when the error is found.
        pixels = RNG.integers(0, 256, (16, 16, 3), dtype=np.int64).astype(np.uint8)
        data = png_with_filters(pixels, 2, [4] * 16, piece=97)
        offsets = [at for at in chunk_offsets(data) if data[at + 4:at + 8] == b"IDAT"]
        self.assertGreater(len(offsets), 5)
        at = offsets[4]
        crc_at = at + 8 + struct.unpack(">I", data[at:at + 4])[0]
        damaged = data[:crc_at] + bytes([data[crc_at] ^ 1]) + data[crc_at + 1:]
        with open(self.path("bad_crc.png"), "wb") as f:
            f.write(damaged)
        out = self.path("bad_crc_out.png")
        result = run("affine", "-i", self.path("bad_crc.png"), "-o", out, "--scale", "1")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("bad_crc.png", result.stderr)
        self.assertIn("CRC error in its IDAT chunk", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertFalse(os.path.exists(out))


def filter_row(kind, row, above, pixel_bytes):
    """One row's bytes filtered as ISO 15948 9.2 states: each byte less its prediction from the
    byte a pixel to the left (a), the one above (b) and the one above-left (c), modulo 256."""
    x, b = row.astype(np.int64), above.astype(np.int64)
    a = np.concatenate([np.zeros(pixel_bytes, np.int64), x[:-pixel_bytes]])
    c = np.concatenate([np.zeros(pixel_bytes, np.int64), b[:-pixel_bytes]])
    if kind == 0:
        predicted = np.zeros_like(x)
    elif kind == 1:
        predicted = a
    elif kind == 2:
        predicted = b
    elif kind == 3:
        predicted = (a + b) // 2
    else:
        p = a + b - c
        pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
        predicted = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
    return ((x - predicted) % 256).astype(np.uint8)


def png_with_filters(pixels, colour, filters, piece=None):
    """A PNG of (H, W, C) pixels (uint8 or uint16, stored big-endian) with row r filtered by
    filters[r]; the zlib stream in IDAT chunks of `piece` bytes (one chunk when None)."""
    height, width, channels = pixels.shape
    depth = pixels.dtype.itemsize * 8
    rows = pixels.astype(pixels.dtype.newbyteorder(">")).reshape(height, -1).view(np.uint8)
    pixel_bytes = channels * pixels.dtype.itemsize
    above = np.zeros(rows.shape[1], np.uint8)
    filtered = b""
    for row, kind in zip(rows, filters):
        filtered += bytes([kind]) + filter_row(kind, row, above, pixel_bytes).tobytes()
        above = row
    stream = zlib.compress(filtered, 6)

    def chunk(kind, payload):
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    pieces = [stream] if piece is None else [stream[k:k + piece] for k in range(0, len(stream), piece)]
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + b"".join(chunk(b"IDAT", p) for p in pieces) +
            chunk(b"IEND", b""))


def small_png():
    """A 16x16 RGB image and the PNG Pillow writes of it."""
    pixels = smooth(16, 16, 3, 255).astype(np.uint8)
    encoded = io.BytesIO()
    Image.fromarray(pixels).save(encoded, format="PNG")
    return pixels, encoded.getvalue()


def chunk_offsets(data):
    at = 8
    while at + 8 <= len(data):
        yield at
        at += 12 + struct.unpack(">I", data[at:at + 4])[0]


if __name__ == "__main__":
    main()
