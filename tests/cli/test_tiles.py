#!/usr/bin/python3
"""Sampling by tiles (docs/bigdata.md): tiled and striped TIFFs written by tifffile, warped by
`affine --by-tiles always` within a small --working-memory, give the very values of the in-memory
path for every map, interpolation and padding it serves; the output is a tiled, Deflate-compressed
TIFF that tifffile and OpenCV read; values agree with OpenCV's warpAffine; what cannot run by tiles
is refused under --by-tiles always and read whole under auto. With --large: a generated 40000 x
40000 RGB BigTIFF is rotated with a peak RSS under 1 GiB, random windows agreeing with OpenCV's
warpAffine of the matching input region, and a generated 1024^3 uint16 OME-Zarr volume is turned
within 1 GiB, random chunks agreeing with scipy's map_coordinates on the matching sub-volume.

    /usr/bin/python3 tests/cli/test_tiles.py --gridwarp build/app/gridwarp [--large]
"""
import json
import math
import os
import shutil
import subprocess
import sys

import cv2
import numpy as np
import tifffile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, arguments, gridwarp, halve, main, run  # noqa: E402

RNG = np.random.default_rng(63)


def triangle(t):
    """A wave of slope 1 between 0 and 255: smooth everywhere, so that OpenCV's 1/32-pixel
    coordinates move a value by at most one level."""
    return np.abs(t % 510 - 255)


def smooth_rgb(y, x):
    return np.stack([triangle(x + 2 * y), triangle(3 * x - y + 100), triangle((x * 2 + y * 2) // 3)], axis=-1).astype(np.uint8)


def stepped(y, x):
    """Steps of one level that differ from tile to tile: a tile in the wrong place shows."""
    return np.minimum(np.abs((x // 97 + y // 89) % 512 - 256), 255)


def large_pattern(y, x):
    """Slopes of at most 3 levels a pixel; channels 0 and 1 have a period of 512 pixels."""
    wave = lambda t: np.minimum(np.abs(t % 512 - 256), 255)  # noqa: E731
    return np.stack([wave(x + 2 * y), wave(3 * x - y), stepped(y, x)], axis=-1).astype(np.uint8)


def same_values(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def opencv_matrix(degrees, shift_x, shift_y):
    """A forward (input -> output) 2x3 matrix, as warpAffine and `affine --matrix M --inverse` take it."""
    a = math.radians(degrees)
    return np.array([[math.cos(a), math.sin(a), shift_x], [-math.sin(a), math.cos(a), shift_y]])


class ByTiles(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        y, x = np.mgrid[0:1500, 0:2100]
        rgb = smooth_rgb(y, x)
        rgb[::7, ::5] = RNG.integers(0, 256, rgb[::7, ::5].shape)  # sharp detail too
        cls.inputs = {
            "rgb": rgb,
            "grey16": (RNG.random((1300, 900)) * 60000).astype(np.uint16),
            "float32": (RNG.random((1000, 1200)) * 100 - 50).astype(np.float32),
            "rgba": (RNG.random((700, 1000, 4)) * 255).astype(np.uint8),
        }
        cls.inputs["float32"][5, 5] = np.nan
        tifffile.imwrite(cls.path("rgb.tif"), rgb, tile=(256, 256), compression="zlib", photometric="rgb")
        tifffile.imwrite(cls.path("grey16.tif"), cls.inputs["grey16"], tile=(128, 256))
        tifffile.imwrite(cls.path("float32.tif"), cls.inputs["float32"], tile=(256, 256), compression="zlib")
        tifffile.imwrite(cls.path("rgba.tif"), cls.inputs["rgba"], tile=(128, 128), photometric="rgb", extrasamples=[2])
        tifffile.imwrite(cls.path("strips.tif"), rgb, rowsperstrip=16, photometric="rgb")
        # Samples in planes (PlanarConfiguration 2), tiled and in strips, and the same pixels together.
        tifffile.imwrite(cls.path("planar.tif"), np.moveaxis(rgb, -1, 0), tile=(256, 256), compression="zlib", photometric="rgb",
                         planarconfig="separate")
        rgb16 = rgb.astype(np.uint16) * 257 + RNG.integers(0, 200, rgb.shape, dtype=np.uint16)
        tifffile.imwrite(cls.path("planar16_strips.tif"), np.moveaxis(rgb16, -1, 0), rowsperstrip=40, photometric="rgb",
                         planarconfig="separate")
        tifffile.imwrite(cls.path("rgb16.tif"), rgb16, rowsperstrip=40, photometric="rgb")
        np.savetxt(cls.path("theta.txt"), [[0.9, -0.2, 0.1], [0.25, 1.1, -0.05]])
        np.savetxt(cls.path("matrix.txt"), [[1.2, 0.3, -50], [-0.2, 0.8, 40]])

    def warp(self, source, output, *options, by_tiles="always"):
        result = run("affine", "-i", self.path(source), "-o", self.path(output), *options, "--by-tiles", by_tiles,
                     "--working-memory", "16M", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        return cv2.imread(self.path(output), cv2.IMREAD_UNCHANGED)

    def test_by_tiles_equals_the_whole_input_in_memory(self):
        maps = [["--rotate", "33", "--mode", "cubic"], ["--rotate", "10", "--scale", "2.5"],
                ["--theta", self.path("theta.txt")],
                ["--theta", self.path("theta.txt"), "--align-corners", "--mode", "cubic", "--padding", "border"],
                ["--matrix", self.path("matrix.txt"), "--mode", "lanczos"],
                ["--matrix", self.path("matrix.txt"), "--inverse", "--padding", "border", "--fill", "7"],
                ["--rotate", "200", "--expand", "--mode", "nearest"], ["--size", "3000x900", "--rotate", "5"]]
        for source in ["rgb", "grey16", "float32", "rgba", "strips"]:
            for options in maps:
                with self.subTest(source=source, options=" ".join(options)):
                    tiled = self.warp(f"{source}.tif", "tiled.tif", *options)
                    whole = self.warp(f"{source}.tif", "whole.tif", *options, by_tiles="never")
                    self.assertTrue(same_values(tiled, whole))

    def test_samples_in_planes_by_tiles_equal_the_samples_together(self):
        # A page whose samples are stored a plane each is read by tiles (--by-tiles always refuses
        # what cannot be), each tile's planes set side by side: the same pixels as stored together.
        for planar, together in ("planar.tif", "rgb.tif"), ("planar16_strips.tif", "rgb16.tif"):
            for options in [["--rotate", "33", "--mode", "cubic"], ["--matrix", self.path("matrix.txt"), "--mode", "lanczos"]]:
                with self.subTest(source=planar, options=" ".join(options)):
                    tiled = self.warp(planar, "tiled.tif", *options)
                    whole = self.warp(together, "whole.tif", *options, by_tiles="never")
                    self.assertEqual(tiled.shape[2], 3)
                    self.assertTrue(same_values(tiled, whole))

    def test_resize_by_tiles_equals_the_whole_input_in_memory(self):
        # Anti-aliased shrinks (the low-pass composed with the kind's taps, shrink_onto_grid), plain
        # shrinks and enlargements; every padding, as resize takes them.
        sizes = [["--scale", "25%"], ["--scale", "0.3", "--mode", "cubic"], ["--size", "700x"], ["--scale", "13%", "--padding", "reflection"],
                 ["--scale", "0.45", "--mode", "lanczos", "--padding", "zeros"], ["--scale", "0.5", "--antialias", "off"], ["--scale", "1.7"]]
        for source in ["rgb", "grey16", "float32", "strips"]:
            for options in sizes:
                with self.subTest(source=source, options=" ".join(options)):
                    images = []
                    for output, by_tiles in ("tiled.tif", "always"), ("whole.tif", "never"):
                        result = run("resize", "-i", self.path(f"{source}.tif"), "-o", self.path(output), *options, "--by-tiles", by_tiles,
                                     "--working-memory", "16M", "-q")
                        self.assertEqual(result.returncode, 0, result.stderr)
                        images.append(cv2.imread(self.path(output), cv2.IMREAD_UNCHANGED))
                    self.assertTrue(same_values(*images))

    def test_flow_by_tiles_equals_the_whole_input_in_memory(self):
        # Each output tile reads the input box its displacements reach (their extremes over the tile).
        y, x = np.mgrid[0:1500, 0:2100].astype(np.float32)
        flow = np.stack([np.sin(y / 90) * 60 + 3, np.cos(x / 70) * 45 - 2], -1).astype(np.float32)
        np.save(self.path("flow.npy"), flow[None])
        flow[400:420, 700:720] = np.nan  # points without a position take the fill
        np.save(self.path("holes.npy"), flow[None])
        for field in "flow.npy", "holes.npy":
            for options in [["--mode", "linear"], ["--mode", "cubic", "--padding", "border"], ["--mode", "nearest", "--fill", "9"]]:
                with self.subTest(field=field, options=" ".join(options)):
                    images = []
                    for output, by_tiles in ("tiled.tif", "always"), ("whole.tif", "never"):
                        result = run("flow", "-i", self.path("rgb.tif"), "-f", self.path(field), "-o", self.path(output), *options,
                                     "--by-tiles", by_tiles, "--working-memory", "16M", "-q")
                        self.assertEqual(result.returncode, 0, result.stderr)
                        images.append(cv2.imread(self.path(output), cv2.IMREAD_UNCHANGED))
                    self.assertTrue(same_values(*images))

    def test_output_is_a_tiled_deflate_tiff(self):
        self.warp("rgb.tif", "out.tif", "--rotate", "10")
        with tifffile.TiffFile(self.path("out.tif")) as tif:
            page = tif.pages[0]
            self.assertTrue(page.is_tiled)
            self.assertEqual((page.tilelength, page.tilewidth), (512, 512))
            self.assertEqual(int(page.compression), 8)  # Adobe Deflate
            self.assertEqual(page.shape, (1500, 2100, 3))
            # tifffile decodes Deflate and the predictor itself: RGB order, as OpenCV's BGR reversed.
            self.assertTrue(np.array_equal(page.asarray(), cv2.imread(self.path("out.tif"))[..., ::-1]))
        self.warp("rgb.tif", "stored.tif", "--rotate", "10", "--compression-level", "0")
        with tifffile.TiffFile(self.path("stored.tif")) as tif:
            self.assertEqual(int(tif.pages[0].compression), 1)

    def test_pyramid_levels_are_2x2_means_in_subifds(self):
        # Each reduced level sits in a SubIFD of the page, tiled as the page is, and is the 2x2 mean
        # of the level below it (odd edges over what there is, integers rounded half to even); the
        # page is the output without --pyramid. Written by tiles and whole alike, at any thread count.
        cases = [("rgb", ["--pyramid"], "always", [(1500, 2100), (750, 1050), (375, 525), (188, 263)]),
                 ("grey16", ["--pyramid-levels", "2"], "never", [(1300, 900), (650, 450), (325, 225)]),
                 ("float32", ["--pyramid"], "always", [(1000, 1200), (500, 600), (250, 300)])]
        for source, pyramid, by_tiles, sizes in cases:
            with self.subTest(source=source, by_tiles=by_tiles):
                outputs = []
                for output, threads, extra in ("one.tif", "1", pyramid), ("two.tif", "2", pyramid), ("flat.tif", "2", []):
                    result = run("affine", "-i", self.path(f"{source}.tif"), "-o", self.path(output), "--rotate", "8", *extra,
                                 "--by-tiles", by_tiles, "--working-memory", "16M", "--threads", threads, "-q")
                    self.assertEqual(result.returncode, 0, result.stderr)
                    with open(self.path(output), "rb") as f:
                        outputs.append(f.read())
                self.assertEqual(outputs[0], outputs[1])
                with tifffile.TiffFile(self.path("one.tif")) as tif:
                    self.assertEqual(len(tif.pages), 1)
                    self.assertEqual(len(tif.pages[0].subifds), len(sizes) - 1)
                    levels = [level.asarray() for level in tif.series[0].levels]
                    self.assertTrue(all(page.is_tiled and page.is_reduced for page in tif.series[0].levels[1].pages))
                self.assertEqual([level.shape[:2] for level in levels], sizes)
                flat = cv2.imread(self.path("flat.tif"), cv2.IMREAD_UNCHANGED)  # (LZW strips when written whole)
                self.assertTrue(same_values(levels[0], flat[..., ::-1] if flat.ndim == 3 else flat))
                for finer, coarser in zip(levels, levels[1:]):
                    channels_first = finer.reshape(finer.shape[:2] + (-1,)).transpose(2, 0, 1)
                    expected = halve(channels_first).transpose(1, 2, 0).reshape(coarser.shape)
                    self.assertTrue(same_values(expected, coarser))
                # libvips finds the same levels through the SubIFDs.
                subprocess.run(["vips", "copy", self.path("one.tif") + f"[subifd={len(sizes) - 2}]", self.path("vips.tif")], check=True)
                self.assertTrue(same_values(tifffile.imread(self.path("vips.tif")), levels[-1]))
        # A stack or a format without levels is refused before any work.
        result = run("affine", "-i", self.path("rgb.tif"), "-o", self.path("out.png"), "--pyramid", "--rotate", "8")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("TIFFs (.tif)", result.stderr)

    def test_ome_tiff_pixel_size_is_read_kept_and_scaled(self):
        # The pixel size an OME-TIFF states (tifffile's OME-XML, micrometres by default or in the
        # unit given) becomes the image's spacing; an .ome.tif output states its own: kept by
        # affine, scaled by resize, by tiles and whole alike; a level pyramid goes with it.
        rgb = self.inputs["rgb"]
        tifffile.imwrite(self.path("um.ome.tif"), rgb, tile=(256, 256), photometric="rgb",
                         metadata={"axes": "YXS", "PhysicalSizeX": 0.25, "PhysicalSizeY": 0.5})
        tifffile.imwrite(self.path("nm.ome.tif"), rgb, tile=(256, 256), photometric="rgb",
                         metadata={"axes": "YXS", "PhysicalSizeX": 250, "PhysicalSizeXUnit": "nm", "PhysicalSizeY": 500, "PhysicalSizeYUnit": "nm"})

        def pixel_size(name):
            with tifffile.TiffFile(self.path(name)) as tif:
                self.assertTrue(tif.is_ome)
                pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
                self.assertEqual(pixels.get("PhysicalSizeXUnit", "\u00b5m"), "\u00b5m")
                return pixels.get("PhysicalSizeX"), pixels.get("PhysicalSizeY"), tif.series[0].shape, len(tif.series[0].levels)

        for source in "um.ome.tif", "nm.ome.tif":
            info = json.loads(run("info", self.path(source), "--json").stdout)
            self.assertEqual(info["spacing"], [0.00025, 0.0005])
            for by_tiles in "always", "never":
                with self.subTest(source=source, by_tiles=by_tiles):
                    for output, options, expected in [
                            ("half.ome.tif", ["resize", "--scale", "0.5", "--pyramid"], (0.5, 1.0, (750, 1050, 3), 3)),
                            ("micron.ome.tif", ["resize", "--voxel-size", "0.001,0.001"], (1.0, 1.0, (750, 525, 3), 1)),
                            ("turned.ome.tif", ["affine", "--rotate", "10"], (0.25, 0.5, (1500, 2100, 3), 1))]:
                        result = run(options[0], "-i", self.path(source), "-o", self.path(output), *options[1:], "--by-tiles", by_tiles,
                                     "--working-memory", "16M", "-q")
                        self.assertEqual(result.returncode, 0, result.stderr)
                        self.assertEqual(pixel_size(output), expected)
        # Planes over pages: channels and Z as tifffile lays them out come back the same, names too.
        planes = RNG.integers(0, 60000, (3, 2, 120, 160)).astype(np.uint16)
        for axes, data, names in ("CYX", planes[0], ["DAPI", "GFP & co"]), ("ZCYX", planes, None):
            metadata = {"axes": axes, "PhysicalSizeX": 0.3, "PhysicalSizeY": 0.3}
            if names:
                metadata["Channel"] = {"Name": names}
            tifffile.imwrite(self.path("planes.ome.tif"), data, metadata=metadata)
            for output in "planes_out.ome.tif", "planes_out.tif":
                result = run("affine", "-i", self.path("planes.ome.tif"), "-o", self.path(output), "--rotate", "4", "-q")
                self.assertEqual(result.returncode, 0, result.stderr)
            with tifffile.TiffFile(self.path("planes_out.ome.tif")) as tif:
                self.assertEqual((tif.series[0].axes, tif.series[0].shape), (axes, data.shape))
                pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
                self.assertEqual((pixels["PhysicalSizeX"], pixels["PhysicalSizeY"]), (0.3, 0.3))
                channels = pixels["Channel"] if isinstance(pixels["Channel"], list) else [pixels["Channel"]]
                self.assertEqual([c.get("Name") for c in channels], names or [None, None])
            # (LZW strips: OpenCV decodes them, tifffile needs imagecodecs.)
            ome_pages = cv2.imreadmulti(self.path("planes_out.ome.tif"), flags=cv2.IMREAD_UNCHANGED)[1]
            plain_pages = cv2.imreadmulti(self.path("planes_out.tif"), flags=cv2.IMREAD_UNCHANGED)[1]
            self.assertEqual(len(ome_pages), data.size // data.shape[-1] // data.shape[-2])
            self.assertTrue(all(same_values(a, b) for a, b in zip(ome_pages, plain_pages)))
        # Without a pixel size (a PNG), the OME-XML states none; a unit nobody defines is left out, said once.
        cv2.imwrite(self.path("plain.png"), rgb[:300, :400])
        self.assertEqual(run("affine", "-i", self.path("plain.png"), "-o", self.path("plain.ome.tif"), "--rotate", "3").returncode, 0)
        self.assertEqual(pixel_size("plain.ome.tif"), (None, None, (300, 400, 3), 1))
        tifffile.imwrite(self.path("odd.ome.tif"), rgb[:300, :400], photometric="rgb",
                         metadata={"axes": "YXS", "PhysicalSizeX": 2, "PhysicalSizeXUnit": "furlong", "PhysicalSizeY": 2})
        result = run("affine", "-i", self.path("odd.ome.tif"), "-o", self.path("odd_out.ome.tif"), "--rotate", "3")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("'furlong' is not a length", result.stderr)
        self.assertEqual(pixel_size("odd_out.ome.tif")[:2], (None, None))

    def test_tiles_are_written_in_the_same_order_whatever_the_threads(self):
        one = run("affine", "-i", self.path("rgb.tif"), "-o", self.path("one.tif"), "--rotate", "7", "--by-tiles", "always", "--threads", "1")
        two = run("affine", "-i", self.path("rgb.tif"), "-o", self.path("two.tif"), "--rotate", "7", "--by-tiles", "always", "--threads", "2")
        self.assertEqual(one.returncode + two.returncode, 0, one.stderr + two.stderr)
        with open(self.path("one.tif"), "rb") as a, open(self.path("two.tif"), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_values_agree_with_opencv_warp_affine(self):
        y, x = np.mgrid[0:900, 0:1300]
        image = smooth_rgb(y, x)
        tifffile.imwrite(self.path("smooth.tif"), image, tile=(256, 256), photometric="rgb")
        matrix = opencv_matrix(10, -120.0, 90.0)
        np.savetxt(self.path("forward.txt"), matrix)
        ours = self.warp("smooth.tif", "ours.tif", "--matrix", self.path("forward.txt"), "--inverse")
        theirs = cv2.warpAffine(image[..., ::-1], matrix, (1300, 900), flags=cv2.INTER_LINEAR)
        # OpenCV rounds coordinates to 1/32 pixel; on slopes of at most 3 levels a pixel that moves a value by one.
        inside = cv2.warpAffine(np.full((900, 1300), 255, np.uint8), matrix, (1300, 900), flags=cv2.INTER_NEAREST) == 255
        inside = cv2.erode(inside.astype(np.uint8), np.ones((5, 5), np.uint8), borderType=cv2.BORDER_CONSTANT, borderValue=0) > 0
        difference = np.abs(ours.astype(int) - theirs.astype(int))[inside]
        self.assertLessEqual(difference.max(), 1)

    def test_what_cannot_run_by_tiles(self):
        for options, why in [(["--padding", "reflection"], "reflection"), (["--mode", "bspline"], "reach")]:
            with self.subTest(options=options):
                result = run("affine", "-i", self.path("rgb.tif"), "-o", self.path("no.tif"), "--rotate", "3", *options,
                             "--by-tiles", "always")
                self.assertNotEqual(result.returncode, 0)
                self.assertIn("--by-tiles always", result.stderr)
                self.assertIn(why, result.stderr)
                self.assertFalse(os.path.exists(self.path("no.tif")))
                # auto reads the input whole instead.
                result = run("affine", "-i", self.path("rgb.tif"), "-o", self.path("auto.tif"), "--rotate", "3", *options,
                             "--working-memory", "16M", "-q")
                self.assertEqual(result.returncode, 0, result.stderr)
        result = run("affine", "-i", self.path("rgb.tif"), "-o", self.path("no.png"), "--rotate", "3", "--by-tiles", "always")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("not written by tiles", result.stderr)

    def test_a_damaged_tile_is_refused_without_output(self):
        # A tile of samples together, and one plane of a page stored in planes (its last plane's tile).
        for source, tile in ("rgb.tif", 7), ("planar.tif", -3):
            with self.subTest(source=source):
                damaged = self.path("damaged.tif")
                with open(self.path(source), "rb") as f:
                    data = bytearray(f.read())
                with tifffile.TiffFile(self.path(source)) as tif:
                    offset = tif.pages[0].dataoffsets[tile]
                data[offset:offset + 64] = b"\xff" * 64
                with open(damaged, "wb") as f:
                    f.write(data)
                result = run("affine", "-i", damaged, "-o", self.path("from_damaged.tif"), "--rotate", "3", "--by-tiles", "always")
                self.assertNotEqual(result.returncode, 0)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertIn("damaged.tif", result.stderr)
                self.assertFalse(os.path.exists(self.path("from_damaged.tif")))


class LargerThanMemory(FolderTestCase):
    """A 40000 x 40000 RGB BigTIFF (4.8 GB of pixels) and a 1024^3 uint16 OME-Zarr volume (2 GiB),
    each turned within 1 GiB."""

    SIZE = 40000
    TILE = 512

    def setUp(self):
        if not arguments().large:
            self.skipTest("--large not given")

    def run_within_a_gibibyte(self, what, *args):
        """gridwarp ARGS, which must succeed with a peak RSS under 1 GiB."""
        process = subprocess.Popen([gridwarp(), *args, "-q"], stderr=subprocess.PIPE)
        _, status, usage = os.wait4(process.pid, 0)
        stderr = process.stderr.read().decode()
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, stderr)
        peak_mib = usage.ru_maxrss / 1024
        print(f"{what}: peak RSS {peak_mib:.0f} MiB", file=sys.stderr)
        self.assertLess(peak_mib, 1024)

    def test_rotated_within_a_gibibyte(self):
        size, tile = self.SIZE, self.TILE
        source = self.path("large.tif")

        periodic = large_pattern(*np.mgrid[0:tile, 0:tile])  # channels 0 and 1 repeat every tile

        def tiles():
            for y0 in range(0, size, tile):
                for x0 in range(0, size, tile):
                    pixels = periodic.copy()
                    pixels[..., 2] = stepped(np.arange(y0, y0 + tile)[:, None], np.arange(x0, x0 + tile)[None, :])
                    yield pixels

        tifffile.imwrite(source, tiles(), shape=(size, size, 3), dtype=np.uint8, tile=(tile, tile), photometric="rgb", bigtiff=True)
        matrix = opencv_matrix(10, 0.0, 0.0)
        centre = (size - 1) / 2
        matrix[:, 2] = [centre, centre] - matrix[:, :2] @ [centre, centre]  # about the centre
        np.savetxt(self.path("forward.txt"), matrix)
        output = self.path("large_rotated.tif")
        self.run_within_a_gibibyte("40000^2 RGB", "affine", "-i", source, "-o", output, "--matrix", self.path("forward.txt"), "--inverse",
                                   "--compression-level", "1")
        os.remove(source)  # the windows' input regions are computed, not read

        import zarr
        store = tifffile.imread(output, aszarr=True)
        rotated = zarr.open(store, mode="r")
        self.assertEqual(rotated.shape, (size, size, 3))
        inverse = cv2.invertAffineTransform(matrix)
        for _ in range(6):
            oy, ox = (int(v) for v in RNG.integers(2000, size - 2300, 2))
            window = rotated[oy:oy + 256, ox:ox + 256]
            corners = np.array([[ox, oy], [ox + 256, oy], [ox, oy + 256], [ox + 256, oy + 256]], float)
            mapped = corners @ inverse[:, :2].T + inverse[:, 2]
            x0, y0 = np.floor(mapped.min(axis=0)).astype(int) - 4
            x1, y1 = np.ceil(mapped.max(axis=0)).astype(int) + 4
            y, x = np.mgrid[y0:y1, x0:x1]
            region = large_pattern(y, x)
            shifted = matrix.copy()  # region pixel -> window pixel
            shifted[:, 2] += matrix[:, :2] @ [x0, y0] - [ox, oy]
            expected = cv2.warpAffine(region, shifted, (256, 256), flags=cv2.INTER_LINEAR)
            self.assertLessEqual(np.abs(window.astype(int) - expected.astype(int)).max(), 1, f"window at ({ox}, {oy})")
        store.close()

    def test_volume_resampled_within_a_gibibyte(self):
        import zarr
        from scipy.ndimage import map_coordinates
        n, chunk = 1024, 128

        def volume(z, y, x):
            return (30000 + 9000 * (np.sin(x / 37.0) + np.cos(y / 53.0)) + 7000 * np.sin(z / 29.0) + 40 * ((x * 7 + y * 3 + z) % 11)).astype(np.uint16)

        source = self.path("large.zarr")
        group = zarr.open_group(source, "w")
        array = group.create_dataset("0", shape=(n, n, n), chunks=(chunk,) * 3, dtype=np.uint16)
        for z0 in range(0, n, chunk):
            for y0 in range(0, n, chunk):
                z, y, x = np.ogrid[z0:z0 + chunk, y0:y0 + chunk, 0:n]
                array[z0:z0 + chunk, y0:y0 + chunk, :] = volume(z, y, x)
        group.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": a, "type": "space", "unit": "micrometer"} for a in "zyx"],
                                       "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1.0, 1.0, 1.0]}]}]}]
        # Output voxel (x, y, z) reads input voxel m @ (x, y, z, 1): a turn about z and a tilt, about the centre.
        a, b = np.radians(10), np.radians(4)
        turn = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]]) @ \
            np.array([[1, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
        centre = np.full(3, (n - 1) / 2)
        m = np.hstack([turn, (centre - turn @ centre)[:, None]])
        np.savetxt(self.path("turn3.txt"), m)
        output = self.path("large_turned.zarr")
        self.run_within_a_gibibyte("1024^3 uint16", "affine", "-i", source, "-o", output, "--matrix", self.path("turn3.txt"), "--mode", "linear")
        shutil.rmtree(source)  # the chunks' input regions are computed, not read
        turned = zarr.open_group(output, "r")["0"]
        self.assertEqual(turned.shape, (n, n, n))
        for _ in range(4):
            z0, y0, x0 = (int(v) * chunk for v in RNG.integers(1, n // chunk - 1, 3))
            got = turned[z0:z0 + chunk, y0:y0 + chunk, x0:x0 + chunk].astype(float)
            z, y, x = np.mgrid[z0:z0 + chunk, y0:y0 + chunk, x0:x0 + chunk].astype(float)
            p = [m[k, 0] * x + m[k, 1] * y + m[k, 2] * z + m[k, 3] for k in range(3)]  # x, y, z
            low = [int(np.floor(c.min())) - 2 for c in p]
            high = [int(np.ceil(c.max())) + 3 for c in p]
            zz, yy, xx = np.ogrid[low[2]:high[2], low[1]:high[1], low[0]:high[0]]
            region = volume(zz, yy, xx).astype(float)
            expected = map_coordinates(region, [p[2] - low[2], p[1] - low[1], p[0] - low[0]], order=1, mode="nearest")
            inside = (p[0] >= 0) & (p[0] <= n - 1) & (p[1] >= 0) & (p[1] <= n - 1) & (p[2] >= 0) & (p[2] <= n - 1)
            # Rounded to the nearest integer after float32 arithmetic (the sampler's for 16-bit voxels).
            self.assertLessEqual(np.abs(got - expected)[inside].max(), 0.52, f"chunk at ({x0}, {y0}, {z0})")
            outside = (np.minimum(np.minimum(p[0], p[1]), p[2]) <= -1) | (np.maximum(np.maximum(p[0], p[1]), p[2]) >= n)
            self.assertTrue((got[outside] == 0).all())


if __name__ == "__main__":
    main(lambda parser: parser.add_argument("--large", action="store_true"))
