#!/usr/bin/python3
"""OME-Zarr stores (NGFF 0.4, Zarr v2) against zarr-python: stores zarr-python writes with every
codec (Blosc, Zstandard, zlib, gzip, none) and both dimension separators are read to their arrays,
with the level's scale and translation as a volume's spacing and origin; stores gridwarp writes
(whole or by tiles, every --chunk-codec) are read back by zarr-python; volumes warped by tiles
equal the in-memory path and agree with scipy's map_coordinates; damaged and hostile stores are
refused in one line with no output.

    /usr/bin/python3 tests/cli/test_zarr.py --gridwarp build/app/gridwarp
"""
import json
import os
import shutil
import sys

import numcodecs
import numpy as np
import zarr
from scipy.ndimage import map_coordinates

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

RNG = np.random.default_rng(64)
CODECS = {"blosc": numcodecs.Blosc("zstd", 5, numcodecs.Blosc.BITSHUFFLE), "zstd": numcodecs.Zstd(3), "zlib": numcodecs.Zlib(6),
          "gzip": numcodecs.GZip(5), "none": None}


def write_store(path, data, chunks, compressor, axes, scale=None, translation=None, separator="."):
    shutil.rmtree(path, ignore_errors=True)
    group = zarr.open_group(path, "w")
    group.create_dataset("0", data=data, chunks=chunks, compressor=compressor, dimension_separator=separator)
    transforms = [{"type": "scale", "scale": scale or [1.0] * data.ndim}]
    if translation:
        transforms.append({"type": "translation", "translation": translation})
    group.attrs["multiscales"] = [{"version": "0.4", "axes": axes, "datasets": [{"path": "0", "coordinateTransformations": transforms}]}]


SPACE = [{"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"]


def volume(shape):
    z, y, x = np.mgrid[0:shape[0], 0:shape[1], 0:shape[2]]
    return ((np.sin(x / 9) + np.cos(y / 13) + np.sin(z / 7)) * 9000 + 30000).astype(np.uint16)


class Zarr(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.volume = volume((70, 90, 110))
        write_store(cls.path("volume.zarr"), cls.volume, (32, 32, 32), CODECS["zlib"], SPACE, [2.0, 0.5, 0.25], [10.0, -3.0, 4.0])
        np.savetxt(cls.path("identity3.txt"), np.eye(3, 4))
        np.savetxt(cls.path("identity2.txt"), np.eye(2, 3))
        np.savetxt(cls.path("turn3.txt"), [[0.98, 0.17, 0.02, -10], [-0.17, 0.98, 0.05, 12], [0, -0.05, 1.0, 3]])
        np.savetxt(cls.path("turn2.txt"), [[0.98, 0.17, -10], [-0.17, 0.98, 12]])

    def read_back(self, store, rank):
        """What gridwarp reads from `store`, as the (1, C, ...) it writes to .npy."""
        out = self.path("read.npy")
        result = run("affine", "-i", store, "-o", out, "--matrix", self.path(f"identity{rank}.txt"), "--mode", "nearest", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        return np.load(out)

    def test_stores_written_by_zarr_python_are_read(self):
        image = (RNG.random((3, 150, 170)) * 255).astype(np.uint8)
        for name, compressor in CODECS.items():
            for separator in ".", "/":
                with self.subTest(codec=name, separator=separator):
                    store = self.path(f"v_{name}.zarr")
                    write_store(store, self.volume, (16, 32, 64), compressor, SPACE, separator=separator)
                    self.assertTrue(np.array_equal(self.read_back(store, 3)[0, 0], self.volume))
                    write_store(store, image, (1, 64, 64), compressor,
                                [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
                                separator=separator)
                    # An image's colours come in as BGR, as every raster's.
                    self.assertTrue(np.array_equal(self.read_back(store, 2)[0], image[::-1]))

    def test_a_missing_chunk_is_the_fill_value(self):
        store = self.path("sparse.zarr")
        write_store(store, self.volume, (32, 32, 32), None, SPACE)
        os.remove(os.path.join(store, "0", "1.1.1"))
        expected = self.volume.copy()
        expected[32:64, 32:64, 32:64] = 0
        self.assertTrue(np.array_equal(self.read_back(store, 3)[0, 0], expected))

    def test_scale_and_translation_are_the_geometry(self):
        result = run("info", self.path("volume.zarr"), "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        info = json.loads(result.stdout)
        self.assertEqual(info["spacing"], [0.25, 0.5, 2.0])
        self.assertEqual(info["origin"], [4.0, -3.0, 10.0])

    def test_stores_written_by_gridwarp_are_read_by_zarr_python(self):
        for codec in ["blosc", "zstd", "zlib", "gzip", "none"]:
            for by_tiles in "always", "never":
                with self.subTest(codec=codec, by_tiles=by_tiles):
                    out = self.path("out.zarr")
                    result = run("affine", "-i", self.path("volume.zarr"), "-o", out, "--matrix", self.path("identity3.txt"),
                                 "--chunk-codec", codec, "--by-tiles", by_tiles, "-q")
                    self.assertEqual(result.returncode, 0, result.stderr)
                    group = zarr.open_group(out, "r")
                    self.assertTrue(np.array_equal(group["0"][:], self.volume))
                    multiscale = group.attrs["multiscales"][0]
                    self.assertEqual(multiscale["version"], "0.4")
                    self.assertEqual([a["unit"] for a in multiscale["axes"]], ["micrometer"] * 3)
                    transforms = multiscale["datasets"][0]["coordinateTransformations"]
                    self.assertEqual(transforms[0]["scale"], [2.0, 0.5, 0.25])
                    self.assertEqual(transforms[1]["translation"], [10.0, -3.0, 4.0])
                    compressor = group["0"].compressor
                    self.assertEqual(None if compressor is None else compressor.codec_id, None if codec == "none" else codec)

    def test_an_image_store_round_trips_through_tiff(self):
        image = (RNG.random((90, 120, 3)) * 255).astype(np.uint8)
        import cv2
        cv2.imwrite(self.path("photo.png"), image)
        result = run("affine", "-i", self.path("photo.png"), "-o", self.path("photo.zarr"), "--rotate", "0", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        stored = zarr.open_group(self.path("photo.zarr"), "r")["0"][:]
        self.assertTrue(np.array_equal(stored, np.moveaxis(image[..., ::-1], -1, 0)))  # (c, y, x), RGB

    def test_volumes_by_tiles_equal_the_whole_and_scipy(self):
        for mode in "linear", "cubic", "nearest":
            with self.subTest(mode=mode):
                common = ["-i", self.path("volume.zarr"), "--matrix", self.path("turn3.txt"), "--mode", mode, "-q"]
                tiled = run("affine", *common, "-o", self.path("tiled.zarr"), "--by-tiles", "always", "--working-memory", "16M")
                whole = run("affine", *common, "-o", self.path("whole.zarr"), "--by-tiles", "never")
                self.assertEqual(tiled.returncode + whole.returncode, 0, tiled.stderr + whole.stderr)
                a = zarr.open_group(self.path("tiled.zarr"), "r")["0"][:]
                b = zarr.open_group(self.path("whole.zarr"), "r")["0"][:]
                self.assertTrue(np.array_equal(a, b))
                if mode == "linear":
                    m = np.loadtxt(self.path("turn3.txt"))
                    z, y, x = np.mgrid[0:70, 0:90, 0:110].astype(float)
                    p = [m[k, 0] * x + m[k, 1] * y + m[k, 2] * z + m[k, 3] for k in range(3)]
                    expected = map_coordinates(self.volume.astype(float), [p[2], p[1], p[0]], order=1, mode="constant")
                    inside = (p[0] >= 0) & (p[0] <= 109) & (p[1] >= 0) & (p[1] <= 89) & (p[2] >= 0) & (p[2] <= 69)
                    # Rounded to the nearest integer after float32 arithmetic (the sampler's for 16-bit pixels).
                    self.assertLessEqual(np.abs(a.astype(float) - expected)[inside].max(), 0.52)

    def test_resample_by_tiles_equals_the_whole(self):
        with open(self.path("rigid.tfm"), "w") as f:
            f.write("#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n"
                    "Parameters: 0.9848 0.1736 0 -0.1736 0.9848 0 0 0 1 1.5 -2.0 3.0\nFixedParameters: 12 10 60\n")
        for mode in "Linear", "NearestNeighbor", "GenericLabel[Linear]", "LanczosWindowedSinc":
            with self.subTest(mode=mode):
                common = ["-i", self.path("volume.zarr"), "-t", self.path("rigid.tfm"), "-n", mode, "-q"]
                tiled = run("resample", *common, "-o", self.path("tiled.zarr"), "--by-tiles", "always", "--working-memory", "16M")
                whole = run("resample", *common, "-o", self.path("whole.zarr"), "--by-tiles", "never")
                self.assertEqual(tiled.returncode + whole.returncode, 0, tiled.stderr + whole.stderr)
                self.assertTrue(np.array_equal(zarr.open_group(self.path("tiled.zarr"), "r")["0"][:],
                                               zarr.open_group(self.path("whole.zarr"), "r")["0"][:]))

    def test_raw_nifti_by_tiles_and_regions_equal_the_whole(self):
        import nibabel as nib
        affine = np.diag([0.8, 1.0, 1.2, 1.0])
        affine[:3, 3] = [5, -3, 2]
        data = self.volume.transpose(2, 1, 0)  # x fastest, as NIfTI stores it
        nib.save(nib.Nifti1Image(data, affine), self.path("little.nii"))
        nib.save(nib.Nifti1Image(data.astype(">u2"), affine), self.path("big_endian.nii"))
        scaled = nib.Nifti1Image(data.astype(np.int16) // 2, affine)
        scaled.header.set_slope_inter(2.0, 1.0)
        nib.save(scaled, self.path("scaled.nii"))
        np.savetxt(self.path("turn_ras.txt"), [[0.99, 0.12, 0.02, -3], [-0.12, 0.99, 0.04, 5], [-0.02, -0.04, 1.0, 2], [0, 0, 0, 1]])
        for source in "little.nii", "big_endian.nii", "volume.zarr":
            for ending in ".nii", ".npy", ".zarr":
                if source.endswith(".zarr") and ending == ".zarr":
                    continue
                with self.subTest(source=source, output=ending):
                    common = ["resample", "-i", self.path(source), "-r", self.path(source), "-t", self.path("turn_ras.txt") + ",ras", "-q"]
                    for kind, extra in ("tiled", ["--by-tiles", "always", "--working-memory", "16M"]), ("whole", ["--by-tiles", "never"]):
                        folder = self.path(kind)
                        shutil.rmtree(folder, ignore_errors=True)
                        os.makedirs(folder)
                        result = run(*common, "-o", os.path.join(folder, "out" + ending), *extra)
                        self.assertEqual(result.returncode, 0, result.stderr)
                    tiled, whole = os.path.join(self.path("tiled"), "out" + ending), os.path.join(self.path("whole"), "out" + ending)
                    if ending == ".zarr":
                        names = sorted(os.path.relpath(os.path.join(f, n), tiled) for f, _, files in os.walk(tiled) for n in files)
                        self.assertEqual(names, sorted(os.path.relpath(os.path.join(f, n), whole) for f, _, files in os.walk(whole) for n in files))
                        for name in names:
                            with open(os.path.join(tiled, name), "rb") as a, open(os.path.join(whole, name), "rb") as b:
                                self.assertEqual(a.read(), b.read(), name)
                    else:
                        with open(tiled, "rb") as a, open(whole, "rb") as b:
                            self.assertEqual(a.read(), b.read())
        # Scaled values are not read by tiles: refused under always, read whole under auto.
        result = run("resample", "-i", self.path("scaled.nii"), "-r", self.path("scaled.nii"), "-t", self.path("turn_ras.txt") + ",ras",
                     "-o", self.path("scaled_out.zarr"), "--by-tiles", "always")
        self.assertEqual(result.returncode, 1)
        self.assertIn("values unscaled", result.stderr)
        self.assertFalse(os.path.exists(self.path("scaled_out.zarr")))

    def test_npy_inputs_by_tiles_equal_the_whole(self):
        image = (RNG.random((1, 3, 700, 900)) * 255).astype(np.uint8)
        np.save(self.path("image.npy"), image)
        np.save(self.path("volume_f4.npy"), self.volume[None, None].astype(np.float32) / 7)
        np.save(self.path("fortran.npy"), np.asfortranarray(image))
        for source, rank in ("image.npy", 2), ("volume_f4.npy", 3), ("fortran.npy", 2):
            for ending in ".zarr", ".npy":
                with self.subTest(source=source, output=ending):
                    outputs = []
                    for kind, by_tiles in ("tiled", "always"), ("whole", "never"):
                        out = self.path(kind + ending)
                        shutil.rmtree(out, ignore_errors=True)
                        result = run("affine", "-i", self.path(source), "-o", out, "--matrix", self.path(f"turn{rank}.txt"), "--mode", "cubic",
                                     "--by-tiles", by_tiles, "--working-memory", "16M", "-q")
                        if source == "fortran.npy" and by_tiles == "always":
                            # Fortran order is read whole: not by tiles.
                            self.assertEqual(result.returncode, 1)
                            self.assertIn("not read by tiles", result.stderr)
                            break
                        self.assertEqual(result.returncode, 0, result.stderr)
                        outputs.append(zarr.open_group(out, "r")["0"][:] if ending == ".zarr" else np.load(out))
                    if len(outputs) == 2:
                        self.assertTrue(np.array_equal(outputs[0], outputs[1], equal_nan=True))
        # A .npy cut short is refused by the tile reader as by the whole one: one line, no output.
        with open(self.path("image.npy"), "rb") as f:
            whole = f.read()
        with open(self.path("short.npy"), "wb") as f:
            f.write(whole[:len(whole) // 2])
        result = run("affine", "-i", self.path("short.npy"), "-o", self.path("short.zarr"), "--matrix", self.path("turn2.txt"),
                     "--by-tiles", "always", "-q")
        self.assertEqual(result.returncode, 1)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn("short.npy", result.stderr)
        self.assertFalse(os.path.exists(self.path("short.zarr")))

    def test_nearest_ties_fall_as_in_the_whole_input(self):
        # Every output point lies half-way between input voxels: each box's start must keep the
        # parity that rounding half to even sees.
        np.savetxt(self.path("half.txt"), [[0.5, 0, 0, 0.5], [0, 0.5, 0, 0.5], [0, 0, 0.5, 0.5]])
        common = ["-i", self.path("volume.zarr"), "--matrix", self.path("half.txt"), "--mode", "nearest", "-q"]
        tiled = run("affine", *common, "-o", self.path("tiled.zarr"), "--by-tiles", "always", "--working-memory", "16M")
        whole = run("affine", *common, "-o", self.path("whole.zarr"), "--by-tiles", "never")
        self.assertEqual(tiled.returncode + whole.returncode, 0, tiled.stderr + whole.stderr)
        a = zarr.open_group(self.path("tiled.zarr"), "r")["0"][:]
        self.assertTrue(np.array_equal(a, zarr.open_group(self.path("whole.zarr"), "r")["0"][:]))
        # Output index o reads input o / 2 + 1/2, rounded half to even (as numpy rounds).
        z, y, x = (np.round(0.5 * np.arange(n) + 0.5).astype(int) for n in self.volume.shape)
        self.assertTrue(np.array_equal(a, self.volume[np.ix_(z, y, x)]))

    def test_an_earlier_store_is_replaced_and_other_folders_are_not(self):
        out = self.path("again.zarr")
        for _ in range(2):
            result = run("affine", "-i", self.path("volume.zarr"), "-o", out, "--matrix", self.path("identity3.txt"), "-q")
            self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(np.array_equal(zarr.open_group(out, "r")["0"][:], self.volume))
        os.makedirs(self.path("plain.zarr"), exist_ok=True)
        with open(self.path("plain.zarr/notes.txt"), "w") as f:
            f.write("mine")
        result = run("affine", "-i", self.path("volume.zarr"), "-o", self.path("plain.zarr"), "--matrix", self.path("identity3.txt"))
        self.assertNotEqual(result.returncode, 0)
        self.assertTrue(os.path.exists(self.path("plain.zarr/notes.txt")))

    def hostile(self, name, change, expect):
        store = self.path(name)
        write_store(store, self.volume, (32, 32, 32), CODECS["zlib"], SPACE)
        change(store)
        out = self.path("hostile_out.zarr")
        result = run("affine", "-i", store, "-o", out, "--matrix", self.path("identity3.txt"))
        self.assertNotEqual(result.returncode, 0, name)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn(name, result.stderr)
        self.assertIn(expect, result.stderr)
        self.assertFalse(os.path.exists(out))

    def test_a_nan_fill_is_read_for_missing_float_chunks(self):
        store = self.path("nan_fill.zarr")
        data = self.volume.astype(np.float32)
        write_store(store, data, (32, 32, 32), None, SPACE)
        group = zarr.open_group(store, "r+")
        group["0"].fill_value = np.nan  # zarr-python writes it as the string "NaN"
        with open(os.path.join(store, "0", ".zarray")) as f:
            self.assertEqual(json.load(f)["fill_value"], "NaN")
        os.remove(os.path.join(store, "0", "1.1.1"))
        read = self.read_back(store, 3)[0, 0]
        self.assertTrue(np.isnan(read[32:64, 32:64, 32:64]).all())
        self.assertTrue(np.array_equal(read[:32], data[:32]))

    def test_hostile_stores_are_refused(self):
        def attrs(store, edit):
            path = os.path.join(store, ".zattrs")
            with open(path) as f:
                meta = json.load(f)
            edit(meta)
            with open(path, "w") as f:
                json.dump(meta, f)

        def zarray(store, edit):
            path = os.path.join(store, "0", ".zarray")
            with open(path) as f:
                meta = json.load(f)
            edit(meta)
            with open(path, "w") as f:
                json.dump(meta, f)

        def link_chunk(store):
            os.remove(os.path.join(store, "0", "0.0.0"))
            os.symlink("/etc/passwd", os.path.join(store, "0", "0.0.0"))

        def corrupt_chunk(store):
            with open(os.path.join(store, "0", "1.1.1"), "r+b") as f:
                f.seek(4)
                f.write(b"\x00" * 16)

        def set_dataset_path(path):
            return lambda store: attrs(store, lambda m: m["multiscales"][0]["datasets"][0].update(path=path))

        cases = [
            ("up.zarr", set_dataset_path("../volume.zarr/0"), "inside the store"),
            ("absolute.zarr", set_dataset_path("/tmp"), "relative"),
            ("link.zarr", link_chunk, "chunk 0.0.0"),
            ("corrupt.zarr", corrupt_chunk, "does not decode"),
            ("huge_chunks.zarr", lambda s: zarray(s, lambda m: m.update(chunks=[4096, 4096, 4096])), "--max-memory"),
            ("negative.zarr", lambda s: zarray(s, lambda m: m.update(shape=[-1, 90, 110])), "positive"),
            ("codec.zarr", lambda s: zarray(s, lambda m: m.update(compressor={"id": "lzma"})), "lzma"),
            ("order.zarr", lambda s: zarray(s, lambda m: m.update(order="F")), "C-ordered"),
            ("dtype.zarr", lambda s: zarray(s, lambda m: m.update(dtype="<c8")), "dtype"),
            ("scale.zarr", lambda s: attrs(s, lambda m: m["multiscales"][0]["datasets"][0]["coordinateTransformations"][0].update(scale=[0, 1, 1])),
             "scales"),
            ("json.zarr", lambda s: open(os.path.join(s, "0", ".zarray"), "w").write("{"), "JSON"),
            # Found by fuzz_zarr_store: numbers past 64 bits or with fractions, fills outside the
            # dtype, and chunk extents whose product wraps 64 bits.
            ("fraction.zarr", lambda s: zarray(s, lambda m: m.update(chunks=[32, 32.5, 32])), "whole numbers"),
            ("past64.zarr", lambda s: zarray(s, lambda m: m.update(shape=[1e19, 90, 110])), "whole numbers"),
            ("format.zarr", lambda s: zarray(s, lambda m: m.update(zarr_format=1e10)), "whole numbers"),
            ("fill.zarr", lambda s: zarray(s, lambda m: m.update(fill_value=70000)), "fill_value"),
            ("wrap.zarr", lambda s: zarray(s, lambda m: m.update(chunks=[2 ** 32, 2 ** 32, 2 ** 32])), "2^40"),
        ]
        for name, change, expect in cases:
            with self.subTest(name=name):
                self.hostile(name, change, expect)


if __name__ == "__main__":
    main()
