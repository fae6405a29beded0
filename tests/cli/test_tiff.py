#!/usr/bin/python3
"""gridwarp's own TIFF codec against OpenCV, Pillow and hand-built files: every common form
(grey of 1 to 16 bits, min-is-white, grey and alpha, RGB(A), palettes, floats, signed integers;
strips, tiles, separate planes; LZW, Deflate, PackBits, JPEG, CCITT) decodes to the pixels OpenCV or
Pillow give; a multi-page TIFF is warped page by page exactly as each page alone, written back as
pages, and counted by `info`; pages that differ, and damaged files, are refused in one line.

    /usr/bin/python3 tests/cli/test_tiff.py --gridwarp build/app/gridwarp
"""
import json
import os
import struct
import sys

import cv2
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, as_npy_image, main, run  # noqa: E402

RNG = np.random.default_rng(11)


def smooth(height, width, channels, maximum, dtype):
    y, x = np.mgrid[0:height, 0:width]
    planes = [(x * (c + 3) + y * (5 - c)) % (maximum + 1) for c in range(channels)]
    values = np.stack(planes, axis=-1).astype(np.int64) + RNG.integers(0, 3, (height, width, channels))
    return np.clip(values, 0, maximum).astype(dtype)


def handmade_tiff(path, samples_by_plane, bits, photometric, *, tile=None, sample_format=1, extra=None, orientation=1):
    """An uncompressed little-endian TIFF built byte by byte: `samples_by_plane` is a list of
    (H, W) planes stored separately when there are several (PlanarConfiguration 2), in tiles of
    `tile` (W, H) when given, else in one strip per 3 rows. Sub-byte samples are packed MSB first."""
    planes = [np.asarray(p) for p in samples_by_plane]
    height, width = planes[0].shape

    def pack_rows(plane, x0, y0, w, h):
        rows = []
        for y in range(y0, y0 + h):
            row = np.zeros(w, plane.dtype)
            inside = plane[y, x0:x0 + w] if y < height else np.zeros(0, plane.dtype)
            row[:len(inside)] = inside
            if bits < 8:
                row_bits = "".join(format(int(v), f"0{bits}b") for v in row)
                row_bits += "0" * (-len(row_bits) % 8)
                rows.append(bytes(int(row_bits[i:i + 8], 2) for i in range(0, len(row_bits), 8)))
            else:
                rows.append(row.astype(row.dtype.newbyteorder("<")).tobytes())
        return b"".join(rows)

    chunks = []
    for plane in planes:
        if tile:
            tw, th = tile
            for y0 in range(0, height, th):
                for x0 in range(0, width, tw):
                    chunks.append(pack_rows(plane, x0, y0, tw, th))
        else:
            for y0 in range(0, height, 3):
                chunks.append(pack_rows(plane, 0, y0, width, min(3, height - y0)))
    data = b"".join(chunks)
    offsets, at = [], 8
    for chunk in chunks:
        offsets.append(at)
        at += len(chunk)
    count = len(planes)
    tags = {256: (4, [width]), 257: (4, [height]), 258: (3, [bits] * count), 259: (3, [1]), 262: (3, [photometric]),
            274: (3, [orientation]), 277: (3, [count]), 284: (3, [2 if count > 1 else 1]), 339: (3, [sample_format] * count)}
    if extra is not None:
        tags[338] = (3, [extra])
    if tile:
        tags.update({322: (4, [tile[0]]), 323: (4, [tile[1]]), 324: (4, offsets), 325: (4, [len(c) for c in chunks])})
    else:
        tags.update({273: (4, offsets), 278: (4, [3]), 279: (4, [len(c) for c in chunks])})
    ifd_at = 8 + len(data)
    ifd_at += ifd_at % 2
    entries, overflow = [], b""
    overflow_at = ifd_at + 2 + 12 * len(tags) + 4
    for tag in sorted(tags):
        kind, values = tags[tag]
        packed = struct.pack("<" + ("H" if kind == 3 else "I") * len(values), *values)
        if len(packed) <= 4:
            entries.append(struct.pack("<HHI", tag, kind, len(values)) + packed.ljust(4, b"\0"))
        else:
            entries.append(struct.pack("<HHII", tag, kind, len(values), overflow_at + len(overflow)))
            overflow += packed
    with open(path, "wb") as f:
        f.write(b"II*\0" + struct.pack("<I", ifd_at) + data + b"\0" * (ifd_at - 8 - len(data)))
        f.write(struct.pack("<H", len(tags)) + b"".join(entries) + b"\0\0\0\0" + overflow)


def paged_tiff(path, pages, big=False):
    """Uncompressed 8-bit grey pages, one strip each, in a classic or BigTIFF file built byte by byte.
    `pages` is a list of ((H, W) uint8 plane, {tag: (type, [values])}) for the tags beyond the
    layout's (orientation, subfile type, with the type they are stored as)."""
    word, entry_size, count_format = ("Q", 20, "<Q") if big else ("I", 12, "<H")
    body = bytearray(b"II+\0" + struct.pack("<HHQ", 8, 0, 0) if big else b"II*\0" + struct.pack("<I", 0))
    link_at = 8 if big else 4  # where the offset of the next directory goes
    for plane, extra in pages:
        plane = np.ascontiguousarray(plane, np.uint8)
        height, width = plane.shape
        strip_at = len(body)
        body += plane.tobytes()
        body += b"\0" * (len(body) % 2)
        tags = {256: (4, [width]), 257: (4, [height]), 258: (3, [8]), 259: (3, [1]), 262: (3, [1]),
                273: (4, [strip_at]), 277: (3, [1]), 278: (4, [height]), 279: (4, [plane.size])}
        tags.update(extra)
        ifd_at = len(body)
        struct.pack_into("<" + word, body, link_at, ifd_at)
        body += struct.pack(count_format, len(tags))
        for tag in sorted(tags):
            kind, values = tags[tag]
            packed = struct.pack("<" + ("H" if kind == 3 else "I") * len(values), *values)
            body += struct.pack("<HHQ" if big else "<HHI", tag, kind, len(values)) + packed.ljust(entry_size - (12 if big else 8), b"\0")
        link_at = len(body)
        body += struct.pack("<" + word, 0)
    with open(path, "wb") as f:
        f.write(body)


class Tiff(FolderTestCase):
    def test_common_forms_decode_as_opencv_does(self):
        grey = smooth(37, 53, 1, 255, np.uint8)[:, :, 0]
        colour = smooth(37, 53, 3, 255, np.uint8)
        forms = {
            "grey8": lambda p: Image.fromarray(grey).save(p),
            "grey8_lzw": lambda p: Image.fromarray(grey).save(p, compression="tiff_lzw"),
            "grey1_g4": lambda p: Image.fromarray(grey > 128).save(p, compression="group4"),
            "grey1": lambda p: Image.fromarray(grey > 128).save(p),
            "grey16": lambda p: cv2.imwrite(p, smooth(37, 53, 1, 65535, np.uint16)[:, :, 0]),
            "rgb8": lambda p: Image.fromarray(colour).save(p),
            "rgb8_deflate": lambda p: Image.fromarray(colour).save(p, compression="tiff_adobe_deflate"),
            "rgb8_packbits": lambda p: Image.fromarray(colour).save(p, compression="packbits"),
            "rgb16": lambda p: cv2.imwrite(p, smooth(37, 53, 3, 65535, np.uint16)),
            "float32": lambda p: Image.fromarray(smooth(37, 53, 1, 1000, np.float32)[:, :, 0] / 7).save(p),
            "float32_rgb": lambda p: cv2.imwrite(p, smooth(37, 53, 3, 1000, np.float32) / 7, [cv2.IMWRITE_TIFF_COMPRESSION, 5]),
            "int16": lambda p: cv2.imwrite(p, (smooth(37, 53, 1, 60000, np.int32)[:, :, 0] - 30000).astype(np.int16)),
            "int32": lambda p: Image.fromarray(smooth(37, 53, 1, 60000, np.int32)[:, :, 0] - 30000, "I").save(p),
        }
        self.check_forms_decode_as_opencv(forms, ".tif")

    def test_forms_opencv_reads_otherwise_decode_as_pillow_shows_them(self):
        colour = smooth(21, 30, 3, 255, np.uint8)
        grey = smooth(21, 30, 1, 255, np.uint8)[:, :, 0]
        palette = Image.fromarray(colour).quantize(40)
        palette.save(self.path("palette.tif"))
        np.testing.assert_array_equal(self.decoded(self.path("palette.tif")),
                                      as_npy_image(np.asarray(palette.convert("RGB"))[:, :, ::-1]))
        # Alpha as stored (OpenCV's 8-bit reader, libtiff's RGBA interface, multiplies colours by it).
        rgba = smooth(21, 30, 4, 255, np.uint8)
        Image.fromarray(rgba, "RGBA").save(self.path("rgba.tif"), compression="tiff_lzw")
        np.testing.assert_array_equal(self.decoded(self.path("rgba.tif")), as_npy_image(rgba[:, :, [2, 1, 0, 3]]))
        Image.fromarray(np.dstack([grey, 255 - grey]), "LA").save(self.path("grey_alpha.tif"))
        bgra = np.dstack([grey, grey, grey, 255 - grey])
        np.testing.assert_array_equal(self.decoded(self.path("grey_alpha.tif")), as_npy_image(bgra))
        # JPEG-compressed YCbCr: libjpeg's RGB, as Pillow decodes it (both through libtiff's JPEG codec).
        Image.fromarray(colour).save(self.path("jpeg.tif"), compression="jpeg")
        with Image.open(self.path("jpeg.tif")) as shown:
            rgb = np.asarray(shown.convert("RGB"))
        got = self.decoded(self.path("jpeg.tif"))
        self.assertLessEqual(np.abs(got.astype(int) - as_npy_image(rgb[:, :, ::-1]).astype(int)).max(), 1)

    def test_tiles_planes_and_packed_bits_built_by_hand(self):
        grey = smooth(10, 13, 1, 255, np.uint8)[:, :, 0]
        rgb = smooth(10, 13, 3, 65535, np.uint16)
        cases = {
            # (planes, bits, photometric, options) -> the pixels gridwarp must give, (H, W[, C]) in BGR
            "tiled": ([grey], 8, 1, {"tile": (16, 16)}, grey),
            "tiled_rgb16_planes": ([rgb[:, :, c] for c in range(3)], 16, 2, {"tile": (16, 16)}, rgb[:, :, ::-1]),
            "planes": ([rgb[:, :, c] for c in range(3)], 16, 2, {}, rgb[:, :, ::-1]),
            "min_is_white": ([grey], 8, 0, {}, 255 - grey),
            "min_is_white16": ([rgb[:, :, 0]], 16, 0, {}, 65535 - rgb[:, :, 0]),
            "grey2": ([grey // 64], 2, 1, {}, (grey // 64) * 85),
            "grey4_tiled": ([grey // 16], 4, 1, {"tile": (16, 16)}, (grey // 16) * 17),
            "int8": ([grey.astype(np.int8)], 8, 1, {"sample_format": 2}, grey.astype(np.int8)),
            "float64": ([grey / 3.0], 64, 1, {"sample_format": 3}, grey / 3.0),
            "uint32": ([grey.astype(np.uint32) * 70000], 32, 1, {}, grey.astype(np.uint32) * 70000),
        }
        for name, (planes, bits, photometric, options, expected) in cases.items():
            with self.subTest(form=name):
                source = self.path(name + ".tif")
                handmade_tiff(source, planes, bits, photometric, **options)
                np.testing.assert_array_equal(self.decoded(source), as_npy_image(np.asarray(expected)))

    def test_orientation_turns_every_depth(self):
        stored = smooth(6, 9, 1, 65535, np.uint16)[:, :, 0]
        handmade_tiff(self.path("turned.tif"), [stored], 16, 1, orientation=6)
        # Orientation 6: the stored rows are shown turned 90 degrees clockwise.
        np.testing.assert_array_equal(self.decoded(self.path("turned.tif")), as_npy_image(np.rot90(stored, -1)))
        out = self.path("kept.npy")
        result = run("affine", "-i", self.path("turned.tif"), "-o", out, "--scale", "1", "--mode", "nearest", "--keep-orientation", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        np.testing.assert_array_equal(np.load(out), as_npy_image(stored))

    def test_orientation_is_the_tag_of_the_page_read(self):
        stored = smooth(6, 9, 1, 255, np.uint8)[:, :, 0]
        thumbnail = stored[::3, ::3]
        turned = as_npy_image(np.rot90(stored, -1))  # orientation 6: shown turned 90 degrees clockwise
        cases = {
            # A reduced-resolution preview first (NewSubfileType 1), turned; the page itself is not.
            "thumbnail_first.tif": ([(thumbnail, {254: (4, [1]), 274: (3, [6])}), (stored, {274: (3, [1])})], False, stored),
            "thumbnail_first_untagged_page.tif": ([(thumbnail, {254: (4, [1]), 274: (3, [6])}), (stored, {})], False, stored),
            "long_typed.tif": ([(stored, {274: (4, [6])})], False, turned),
            "bigtiff.tif": ([(stored, {274: (3, [6])})], True, turned),
            "bigtiff_long_typed.tif": ([(stored, {274: (4, [6])})], True, turned),
        }
        for name, (pages, big, expected) in cases.items():
            with self.subTest(name):
                paged_tiff(self.path(name), pages, big=big)
                with Image.open(self.path(name)) as image:  # Pillow reads it
                    self.assertEqual(image.size, (pages[0][0].shape[1], pages[0][0].shape[0]))
                expected_image = expected if expected is turned else as_npy_image(expected)
                np.testing.assert_array_equal(self.decoded(self.path(name)), expected_image)

    def test_damaged_ccitt_and_jpeg_strips_are_refused(self):
        # libtiff reports damage inside these codecs' data as warnings, not errors.
        rng = np.random.default_rng(5)
        Image.fromarray(rng.random((64, 64)) > 0.5).save(self.path("fax.tif"), compression="group4")
        Image.fromarray((rng.random((64, 64, 3)) * 255).astype(np.uint8)).save(self.path("photo.tif"), compression="jpeg")
        for name in ("fax.tif", "photo.tif"):
            with self.subTest(name):
                with Image.open(self.path(name)) as image:
                    offset, size = image.tag_v2[273][0], image.tag_v2[279][0]
                with open(self.path(name), "rb") as f:
                    data = bytearray(f.read())
                for at in range(offset + size // 2, offset + size - 2):  # the strip's second half
                    data[at] = (data[at] * 7 + 13) & 0xFF
                damaged = self.path("damaged_" + name)
                with open(damaged, "wb") as f:
                    f.write(data)
                self.assertEqual(run("info", self.path(name)).returncode, 0)
                out = self.path("out_" + name + ".png")
                result = run("affine", "-i", damaged, "-o", out, "--scale", "1")
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(damaged, result.stderr)
                self.assertIn("damaged", result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertFalse(os.path.exists(out))

    def test_written_tiffs_read_back_in_opencv_and_pillow(self):
        cases = {
            "grey8": smooth(41, 29, 1, 255, np.uint8)[:, :, 0],
            "bgr8": smooth(41, 29, 3, 255, np.uint8),
            "bgra8": smooth(41, 29, 4, 255, np.uint8),
            "grey16": smooth(41, 29, 1, 65535, np.uint16)[:, :, 0],
            "bgr16": smooth(41, 29, 3, 65535, np.uint16),
            "int16_bgr": (smooth(41, 29, 3, 60000, np.int32) - 30000).astype(np.int16),
            "float32": smooth(41, 29, 1, 1000, np.float32)[:, :, 0] / 7,
            "float64": smooth(41, 29, 1, 1000, np.float64)[:, :, 0] / 7,
            "strips": smooth(300, 500, 3, 255, np.uint8),  # several strips of 256 KiB
        }
        for name, pixels in cases.items():
            with self.subTest(image=name):
                source = self.path(f"{name}.npy")
                np.save(source, as_npy_image(pixels))
                out = self.path(f"{name}.tif")
                result = run("affine", "-i", source, "-o", out, "--scale", "1", "--mode", "nearest", "-q")
                self.assertEqual(result.returncode, 0, result.stderr)
                if name != "bgra8":  # (OpenCV multiplies 8-bit colours by alpha)
                    np.testing.assert_array_equal(cv2.imread(out, cv2.IMREAD_UNCHANGED), pixels)
                if name in ("grey8", "bgr8", "bgra8", "grey16", "float32", "strips"):
                    with Image.open(out) as image:
                        shown = np.asarray(image)
                    rgb = pixels if pixels.ndim == 2 else pixels[:, :, [2, 1, 0] + ([3] if pixels.shape[2] == 4 else [])]
                    np.testing.assert_array_equal(shown, rgb)

    def test_every_page_is_warped_as_it_would_be_alone(self):
        pages = [smooth(48, 64, 3, 255, np.uint8) + np.uint8(40 * i) for i in range(3)]
        Image.fromarray(pages[0]).save(self.path("stack.tif"), save_all=True, compression="tiff_lzw",
                                       append_images=[Image.fromarray(p) for p in pages[1:]])
        for i, page in enumerate(pages):
            Image.fromarray(page).save(self.path(f"page{i}.tif"))
        with open(self.path("flow.flo"), "wb") as f:
            field = np.dstack([np.full((48, 64), 1.25), np.full((48, 64), -0.5)]).astype(np.float32)
            f.write(b"PIEH" + struct.pack("<ii", 64, 48) + field.tobytes())
        commands = {
            "affine": ["affine", "--rotate", "7", "--mode", "cubic"],
            "resize": ["resize", "--size", "37x29"],
            "flow": ["flow", "--flow", self.path("flow.flo")],
        }
        for name, command in commands.items():
            with self.subTest(command=name):
                out = self.path(f"stack_{name}.tif")
                result = run(command[0], "-i", self.path("stack.tif"), "-o", out, *command[1:], "-q")
                self.assertEqual(result.returncode, 0, result.stderr)
                written, read = cv2.imreadmulti(out, flags=cv2.IMREAD_UNCHANGED)
                self.assertTrue(written)
                self.assertEqual(len(read), 3)
                with Image.open(out) as image:
                    self.assertEqual(image.n_frames, 3)
                for i in range(3):
                    alone = self.path(f"page{i}_{name}.tif")
                    result = run(command[0], "-i", self.path(f"page{i}.tif"), "-o", alone, *command[1:], "-q")
                    self.assertEqual(result.returncode, 0, result.stderr)
                    np.testing.assert_array_equal(read[i], cv2.imread(alone, cv2.IMREAD_UNCHANGED))
        result = run("info", self.path("stack.tif"), "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout)["pages"], 3)

    def test_a_page_of_another_size_or_type_is_refused(self):
        first = Image.fromarray(smooth(20, 30, 3, 255, np.uint8))
        others = {"size": Image.fromarray(smooth(21, 30, 3, 255, np.uint8)),
                  "type": Image.fromarray(smooth(20, 30, 1, 255, np.uint8)[:, :, 0])}
        for name, other in others.items():
            with self.subTest(differs_in=name):
                source = self.path(f"mixed_{name}.tif")
                first.save(source, save_all=True, append_images=[first, other])
                out = self.path(f"mixed_{name}_out.tif")
                result = run("affine", "-i", source, "-o", out, "--rotate", "3")
                self.assertNotEqual(result.returncode, 0)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertIn(source, result.stderr)
                self.assertIn("page 3", result.stderr)
                self.assertFalse(os.path.exists(out))

    def test_damaged_image_data_is_refused_naming_the_file(self):
        pixels = smooth(40, 50, 3, 255, np.uint8)
        Image.fromarray(pixels).save(self.path("whole.tif"), compression="tiff_adobe_deflate")
        with open(self.path("whole.tif"), "rb") as f:
            data = bytearray(f.read())
        # Pillow writes the pixels first, then the directory: damage the deflate stream in place.
        for at in range(40, 80):
            data[at] ^= 0x5A
        with open(self.path("damaged.tif"), "wb") as f:
            f.write(data)
        out = self.path("damaged_out.png")
        result = run("affine", "-i", self.path("damaged.tif"), "-o", out, "--scale", "1")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("damaged.tif", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    main()
