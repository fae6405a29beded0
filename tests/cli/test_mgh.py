#!/usr/bin/python3
"""FreeSurfer MGH/MGZ volumes (issue 61, item 1) read and written by gridwarp, against nibabel.

    /usr/bin/python3 tests/cli/test_mgh.py --gridwarp build/app/gridwarp

Every input is written by nibabel (nibabel.freesurfer.mghformat.MGHImage, with its TR, flip angle,
TE and TI), or byte by byte here for the broken ones. The expected geometry is nibabel's
voxel-to-RAS matrix (MGHHeader.get_affine) turned to LPS, the expected voxels nibabel's array; every
file gridwarp writes is read back with nibabel.
"""
import gzip
import json
import os
import struct
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FLIP, FolderTestCase, main, run  # noqa: E402

TYPES = (np.uint8, np.int16, np.int32, np.float32)
SCAN = {"tr": 2300.0, "flip_angle": 0.15707964, "te": 2.98, "ti": 900.0}


def rotation(degrees, axis):
    a = np.deg2rad(degrees)
    c, s = np.cos(a), np.sin(a)
    i, j = [(1, 2), (0, 2), (0, 1)][axis]
    m = np.eye(3)
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


def oblique_affine(spacing=(1.2, 0.9, 2.5), offset=(-90.5, 110.25, -60.0)):
    affine = np.eye(4)
    affine[:3, :3] = rotation(10, 0) @ rotation(-20, 1) @ rotation(30, 2) @ np.diag(spacing)
    affine[:3, 3] = offset
    return affine


def voxels(shape, dtype, seed=0):
    """Values over the type's whole range (NaN and infinities among floats)."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        data = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
        data.flat[:2] = (info.min, info.max)
        return data
    data = rng.normal(0, 1000, size=shape).astype(dtype)
    data.flat[:3] = (np.nan, np.inf, -np.inf)
    return data


def save_mgh(path, data, affine, scan=None, dof=0):
    image = nib.MGHImage(data, affine)
    for key, value in (scan or {}).items():
        image.header[key] = value
    image.header["dof"] = dof
    if path.endswith(".mgh.gz"):  # nibabel names gzipped files .mgz only
        with gzip.open(path, "wb") as f:
            f.write(image.to_bytes())
    else:
        nib.save(image, path)
    return load_mgh(path)


def load_mgh(path):
    """nibabel's reading of an MGH file, gzipped or not, whatever its name."""
    with open(path, "rb") as f:
        data = f.read()
    return nib.MGHImage.from_bytes(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def lps(affine):
    """Spacing, origin and direction (row by row) of a voxel-to-RAS matrix, in LPS."""
    m = FLIP @ np.asarray(affine, float)
    spacing = np.linalg.norm(m[:3, :3], axis=0)
    return spacing, m[:3, 3], m[:3, :3] / spacing


def header_bytes(dims=(4, 4, 4, 1), type_code=3, version=1, good_ras=1, spacing=(1, 1, 1),
                 directions=(-1, 0, 0, 0, 0, -1, 0, 1, 0), centre=(0, 0, 0), dof=0):
    """An MGH header byte by byte (FreeSurfer's mghWrite order), 284 bytes."""
    fields = struct.pack(">7ih", version, *dims, type_code, dof, good_ras)
    fields += struct.pack(">15f", *spacing, *directions, *centre)
    return fields + bytes(284 - len(fields))


class Mgh(FolderTestCase):
    def info(self, path):
        result = run("info", path, "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout), result.stderr

    def assert_geometry(self, info, affine):
        spacing, origin, direction = lps(affine)
        np.testing.assert_allclose(info["spacing"], spacing, rtol=0, atol=1e-5)
        np.testing.assert_allclose(info["origin"], origin, rtol=0, atol=1e-4)
        np.testing.assert_allclose(info["direction"], direction, rtol=0, atol=1e-6)

    def assert_same_voxels(self, written, expected):
        # In native byte order (nibabel gives MGH voxels big-endian).
        written, expected = (np.asarray(a).astype(np.asarray(a).dtype.newbyteorder("=")) for a in (written, expected))
        self.assertEqual(written.dtype, expected.dtype)
        self.assertEqual(written.shape, expected.shape)
        self.assertEqual(written.tobytes(), expected.tobytes())  # bit for bit, NaN included

    def assert_refused(self, result, name, *phrases):
        self.assertNotEqual(result.returncode, 0)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("gridwarp: error:"), lines[0])
        self.assertIn(name, lines[0])
        for phrase in phrases:
            self.assertIn(phrase, lines[0])

    def assert_nothing_written(self):
        """No output and no staged file beside the inputs (whose names start with in_)."""
        self.assertEqual([n for n in os.listdir(self.folder) if not n.startswith("in_")], [])

    def test_info_gives_nibabels_geometry_types_and_frames(self):
        for dtype in TYPES:
            for shape in ((7, 6, 5), (7, 6, 5, 3)):
                for extension in (".mgh", ".mgz", ".mgh.gz"):
                    with self.subTest(dtype=dtype.__name__, shape=shape, extension=extension):
                        path = self.path(f"in_info_{dtype.__name__}_{len(shape)}{extension}")
                        data = voxels(shape, dtype)
                        image = save_mgh(path, data, oblique_affine(), SCAN)
                        info, _ = self.info(path)
                        self.assertEqual((info["kind"], info["format"]), ("volume", "mgh"))
                        self.assertEqual(info["size"], list(shape[:3]))
                        self.assertEqual(info["channels"], shape[3] if len(shape) == 4 else 1)
                        self.assertEqual(info["dtype"], np.dtype(dtype).name)
                        finite = data[np.isfinite(data)]
                        self.assertEqual(info["range"], [float(finite.min()), float(finite.max())])
                        self.assert_geometry(info, image.affine)

    def test_identity_resample_and_affine_round_trip_bit_for_bit_with_the_scan_parameters(self):
        for dtype in TYPES:
            for extension in (".mgh", ".mgz"):
                source = self.path(f"in_{dtype.__name__}{extension}")
                data = voxels((9, 8, 7, 2), dtype, seed=1)
                image = save_mgh(source, data, oblique_affine(), SCAN, dof=12)
                for command in (["resample", "-i", source, "-r", source], ["affine", "-i", source, "--scale", "1"]):
                    for output in (".mgh", ".mgz"):
                        with self.subTest(dtype=dtype.__name__, input=extension, command=command[0], output=output):
                            out = self.path("out" + output)
                            result = run(*command, "-o", out, "--mode", "nearest", "-q")
                            self.assertEqual(result.returncode, 0, result.stderr)
                            written = load_mgh(out)
                            self.assert_same_voxels(written.dataobj, data)
                            np.testing.assert_allclose(written.affine, image.affine, rtol=0, atol=1e-4)
                            for key, value in SCAN.items():
                                self.assertEqual(float(written.header[key]), np.float32(value), key)
                            self.assertEqual(int(written.header["dof"]), 12)
                            os.remove(out)

    def test_default_interpolation_on_the_own_grid_keeps_finite_values(self):
        source = self.path("in_linear.mgz")
        data = np.random.default_rng(2).normal(50, 20, size=(12, 10, 8)).astype(np.float32)
        image = save_mgh(source, data, oblique_affine())
        out = self.path("linear.mgz")
        result = run("resample", "-i", source, "-r", source, "-o", out, "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assert_same_voxels(load_mgh(out).dataobj, data)
        np.testing.assert_allclose(load_mgh(out).affine, image.affine, rtol=0, atol=1e-4)
        os.remove(out)

    def test_nifti_inputs_become_mgh_files_nibabel_reads_alike(self):
        for dtype in TYPES:
            for shape in ((9, 8, 7), (9, 8, 7, 4)):
                with self.subTest(dtype=dtype.__name__, shape=shape):
                    source = self.path("in_volume.nii.gz")
                    data = voxels(shape, dtype, seed=3)
                    nifti = nib.Nifti1Image(data, oblique_affine(spacing=(2.0, 1.5, 3.0)))
                    nifti.set_qform(nifti.affine, 1)
                    if len(shape) == 4:  # a series with its TR in milliseconds
                        nifti.header.set_xyzt_units("mm", "msec")
                        nifti.header["pixdim"][4] = 1250.0
                    nib.save(nifti, source)
                    for output in (".mgz", ".mgh"):
                        out = self.path("from_nifti" + output)
                        result = run("affine", "-i", source, "-o", out, "--scale", "1", "--mode", "nearest", "-q")
                        self.assertEqual(result.returncode, 0, result.stderr)
                        written = load_mgh(out)
                        self.assert_same_voxels(written.dataobj, data)
                        np.testing.assert_allclose(written.affine, nib.load(source).affine, rtol=0, atol=1e-4)
                        # MGH's TR is in milliseconds; a volume's NIfTI header has none.
                        self.assertEqual(float(written.header["tr"]), 1250.0 if len(shape) == 4 else 0.0)
                        os.remove(out)

    def test_mgh_series_becomes_a_nifti_series(self):
        source = self.path("in_series.mgz")
        data = voxels((9, 8, 7, 5), np.int16, seed=4)
        image = save_mgh(source, data, oblique_affine(), SCAN)
        out = self.path("series.nii.gz")
        result = run("resample", "-i", source, "-r", source, "-o", out, "--mode", "nearest", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        nifti = nib.load(out)
        self.assert_same_voxels(nifti.dataobj, data)
        np.testing.assert_allclose(nifti.affine, image.affine, rtol=0, atol=1e-4)
        # The TR carried over: MGH's milliseconds as NIfTI's seconds.
        self.assertEqual(nifti.header.get_xyzt_units()[1], "sec")
        self.assertAlmostEqual(float(nifti.header["pixdim"][4]), SCAN["tr"] / 1000.0, places=6)
        os.remove(out)

    def test_volumes_of_many_blocks_round_trip(self):
        # A volume of several MiB (many slices a block, and the compression level's trial), and one
        # whose slices are larger than a block (runs of rows).
        for shape, dtype in (((160, 120, 72), np.float32), ((700, 500, 3, 2), np.float32), ((300, 200, 40), np.int16),
                             ((256, 256, 20), np.uint8)):
            for output in (".mgz", ".mgh"):
                with self.subTest(shape=shape, dtype=dtype.__name__, output=output):
                    source = self.path("in_large.mgz")
                    data = voxels(shape, dtype, seed=5)
                    image = save_mgh(source, data, oblique_affine(), SCAN)
                    out = self.path("large" + output)
                    result = run("resample", "-i", source, "-r", source, "-o", out, "--mode", "nearest", "-q")
                    self.assertEqual(result.returncode, 0, result.stderr)
                    written = load_mgh(out)
                    self.assert_same_voxels(written.dataobj, data)
                    np.testing.assert_allclose(written.affine, image.affine, rtol=0, atol=1e-4)
                    os.remove(out)

    def test_resize_halves_the_grid_keeping_its_outer_edges(self):
        source = self.path("in_resize.mgz")
        image = save_mgh(source, voxels((20, 16, 12), np.float32, seed=6), oblique_affine())
        out = self.path("half.mgz")
        result = run("resize", "-i", source, "-o", out, "--scale", "0.5", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        written = load_mgh(out)
        self.assertEqual(written.shape, (10, 8, 6))
        # Output voxel i covers input voxels 2i and 2i + 1: its centre is input index 2i + 0.5.
        halves = np.array([[2, 0, 0, 0.5], [0, 2, 0, 0.5], [0, 0, 2, 0.5], [0, 0, 0, 1]])
        np.testing.assert_allclose(written.affine, image.affine @ halves, rtol=0, atol=1e-4)
        os.remove(out)

    def test_batch_reads_and_writes_mgz(self):
        rows = ["input,output"]
        inputs = []
        for i in range(3):
            source = self.path(f"in_batch_{i}.mgz")
            inputs.append((save_mgh(source, voxels((8, 7, 6), np.int16, seed=10 + i), oblique_affine(), SCAN), source))
            rows.append(f"{source},{self.path(f'batch_{i}.mgz')}")
        manifest = self.path("in_jobs.csv")
        with open(manifest, "w") as f:
            f.write("\n".join(rows) + "\n")
        result = run("batch", "affine", manifest, "--scale", "1", "--mode", "nearest", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        for i, (image, _) in enumerate(inputs):
            written = load_mgh(self.path(f"batch_{i}.mgz"))
            self.assert_same_voxels(written.dataobj, np.asarray(image.dataobj))
            self.assertEqual(float(written.header["te"]), np.float32(SCAN["te"]))
            os.remove(self.path(f"batch_{i}.mgz"))

    def test_types_mgh_cannot_hold_are_refused_naming_the_nearest(self):
        for dtype, nearest in ((np.uint16, "int32"), (np.int8, "int16"), (np.float64, "float32"), (np.int64, "float32")):
            with self.subTest(dtype=dtype.__name__):
                source = self.path("in_other_type.nii")
                nib.save(nib.Nifti1Image(np.ones((6, 5, 4), dtype), np.eye(4), dtype=dtype), source)
                for output in ("other.mgz", "other.mgh"):
                    result = run("affine", "-i", source, "-o", self.path(output), "--scale", "1")
                    self.assert_refused(result, output, "MGH holds uint8, int16, int32 and float32 voxels, not " + np.dtype(dtype).name,
                                        "--output-type " + nearest)
                    self.assert_nothing_written()
        # The advice works.
        out = self.path("converted.mgz")
        result = run("resample", "-i", source, "-o", out, "--output-type", "float32", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(load_mgh(out).get_data_dtype().name, "float32")
        os.remove(out)

    def test_good_ras_flag_zero_is_freesurfers_default_geometry(self):
        path = self.path("in_no_ras.mgh")
        save_mgh(path, voxels((8, 6, 4), np.float32), oblique_affine())
        with open(path, "r+b") as f:
            f.seek(28)
            f.write(struct.pack(">h", 0))
        # FreeSurfer's default (MRIallocHeader): 1 mm voxels, x_r = -1, y_s = -1, z_a = 1 (LIA), the
        # centre voxel (4, 3, 2) at RAS 0. (nibabel 5.0's default stores these cosines transposed,
        # y_s = 1, z_a = -1: LSP.)
        cosines = np.array([[-1, 0, 0], [0, 0, 1], [0, -1, 0]], float)  # columns x, y, z
        expected = np.eye(4)
        expected[:3, :3] = cosines
        expected[:3, 3] = -cosines @ np.array([4, 3, 2])
        info, stderr = self.info(path)
        self.assert_geometry(info, expected)
        self.assertIn("goodRASflag is 0", stderr)

    def test_the_documented_conformed_example(self):
        # docs/formats.md: 256^3 voxels of 1 mm along LIA, centre (1, 2, 3): P0 = (129, -126, 131).
        path = self.path("in_conformed.mgz")
        header = header_bytes(dims=(256, 256, 256, 1), type_code=0, centre=(1, 2, 3))
        with open(path, "wb") as f:
            f.write(gzip.compress(header + bytes(256 ** 3), compresslevel=1, mtime=0))
        info, _ = self.info(path)
        self.assertEqual(info["origin"], [-129.0, 126.0, 131.0])
        self.assert_geometry(info, load_mgh(path).affine)

    def test_broken_files_are_refused_in_one_line_with_no_output(self):
        volume = np.arange(64, dtype=">f4").tobytes()
        noise = np.random.default_rng(7).normal(size=16**3).astype(">f4").tobytes()  # does not compress
        broken = {
            "truncated.mgh": (header_bytes() + volume[:100], "truncated"),
            "truncated.mgz": (gzip.compress(header_bytes() + volume[:100], mtime=0), "truncated"),
            "cut_stream.mgz": (gzip.compress(header_bytes(dims=(16, 16, 16, 1)) + noise, mtime=0)[:8000], "truncated"),
            "dims_2e31.mgh": (header_bytes(dims=(2**31 - 1, 2**31 - 1, 2**31 - 1, 2**31 - 1)) + volume, "overflow"),
            "dims_2e31_bytes.mgh": (header_bytes(dims=(2**31 - 1, 2**31 - 1, 1, 1)) + volume, "more than 2^62 bytes"),
            "dims_huge.mgz": (gzip.compress(header_bytes(dims=(2**31 - 1, 1, 1, 1)), mtime=0), "truncated"),
            "dims_huge.mgh": (header_bytes(dims=(65536, 65536, 1, 1)) + volume, "truncated"),
            "dims_negative.mgh": (header_bytes(dims=(4, -(2**31), 4, 1)) + volume, "height"),
            "dims_zero.mgh": (header_bytes(dims=(4, 4, 4, 0)) + volume, "frame count is 0"),
            "type_unknown.mgh": (header_bytes(type_code=7) + volume, "unknown MGH data type 7"),
            "type_long.mgh": (header_bytes(type_code=2) + volume, "(LONG) is not supported"),
            "type_bitmap.mgh": (header_bytes(type_code=5) + volume, "(BITMAP) is not supported"),
            "type_tensor.mgh": (header_bytes(type_code=6) + volume, "(TENSOR) is not supported"),
            "version_2.mgh": (header_bytes(version=2) + volume, "version 2"),
            "header_cut.mgh": (header_bytes()[:100], "truncated MGH header"),
            "empty.mgz": (b"", "truncated MGH header"),
            "spacing_nan.mgh": (header_bytes(spacing=(1, float("nan"), 1)) + volume, "voxel size"),
            "directions_singular.mgh": (header_bytes(directions=(1, 0, 0, 1, 0, 0, 0, 0, 1)) + volume, "singular"),
            "spacing_zero.mgh": (header_bytes(spacing=(0, 1, 1)) + volume, "singular"),
        }
        for name, (data, phrase) in broken.items():
            path = self.path("in_" + name)
            with open(path, "wb") as f:
                f.write(data)
            for command in (["info", path], ["affine", "-i", path, "-o", self.path("out.mgz"), "--rotate", "5"],
                            ["resample", "-i", path, "-o", self.path("out.nii.gz")]):
                with self.subTest(file=name, command=command[0]):
                    result = run(*command)
                    self.assert_refused(result, "in_" + name, phrase)
                    self.assert_nothing_written()
        # The control: the same bytes, whole, are read (as nibabel reads them).
        path = self.path("in_control.mgh")
        with open(path, "wb") as f:
            f.write(header_bytes() + volume)
        info, _ = self.info(path)
        self.assertEqual(info["range"], [0.0, 63.0])
        self.assert_geometry(info, load_mgh(path).affine)


if __name__ == "__main__":
    main()
