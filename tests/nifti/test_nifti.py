#!/usr/bin/python3
"""The NIfTI codec against nibabel: fixtures written by nibabel, gridwarp run on them, outputs read
back by nibabel (and by Python's gzip and zlib modules). nibabel is the oracle for every expected
value; nothing here is copied from gridwarp's own output.

    /usr/bin/python3 tests/nifti/test_nifti.py --gridwarp build/app/gridwarp

ctest runs it (label io). Needs Debian's python3-nibabel and python3-numpy.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import rotation  # noqa: E402

GRIDWARP = None
LPS = np.diag([-1.0, -1.0, 1.0])


def run(*args, ok=True):
    result = subprocess.run([GRIDWARP, *map(str, args)], capture_output=True, text=True)
    if ok and result.returncode != 0:
        raise AssertionError(f"gridwarp {' '.join(map(str, args))} failed ({result.returncode}): {result.stderr}")
    return result


def info(path, *extra):
    return json.loads(run("info", "--json", path, *extra).stdout)


def ras_affine_from_info(description):
    """The RAS affine that gridwarp's LPS geometry describes."""
    spacing = np.array(description["spacing"])
    direction = np.array(description["direction"])
    origin = np.array(description["origin"])
    affine = np.eye(4)
    affine[:3, :3] = LPS @ direction @ np.diag(spacing)
    affine[:3, 3] = LPS @ origin
    return affine


def affine_of(linear, offset):
    a = np.eye(4)
    a[:3, :3] = linear
    a[:3, 3] = offset
    return a


OBLIQUE = affine_of(rotation(0.3, -0.2, 0.5) @ np.diag([1.2, 0.9, 2.5]), [-40.5, 12.25, 7.0])
OTHER = affine_of(rotation(-0.1, 0.4, 1.1) @ np.diag([1.2, 0.9, 2.5]), [20.0, -63.0, 33.0])
SHEARED = affine_of(np.array([[1.1, 0.3, 0.0], [0.0, 0.9, 0.2], [0.1, 0.0, 2.0]]), [-3.0, 4.0, 5.5])


def pattern(shape, dtype):
    grid = np.indices(shape).astype(np.float64)
    values = sum((k + 3) * g for k, g in enumerate(grid)) - 7
    return values.astype(dtype)


class NiftiTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = lambda name: os.path.join(self.dir.name, name)

    def tearDown(self):
        self.dir.cleanup()

    def save(self, name, data, affine=OBLIQUE, qform=None, qcode=1, scode=1, klass=nib.Nifti1Image, header=None):
        image = klass(data, None, header=header)
        image.set_sform(affine, code=scode)
        image.set_qform(affine if qform is None else qform, code=qcode)
        path = self.path(name)
        nib.save(image, path)
        return path

    def assert_affine(self, actual, expected, tolerance=1e-4):
        np.testing.assert_allclose(actual, expected, atol=tolerance, rtol=0)

    def assert_refused(self, args, path):
        result = run(*args, ok=False)
        self.assertEqual(result.returncode, 1, result.stderr)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn(os.path.basename(path), lines[0])

    # --- geometry rules -------------------------------------------------------------------------

    def test_sform_wins_over_a_different_qform(self):
        path = self.save("s2q1.nii.gz", pattern((6, 5, 4), np.int16), affine=OBLIQUE, qform=OTHER, qcode=1, scode=2)
        self.assert_affine(ras_affine_from_info(info(path)), nib.load(path).affine)
        self.assert_affine(ras_affine_from_info(info(path)), nib.load(path).header.get_sform())

    def test_itk_rule_takes_the_qform_when_sform_code_is_not_scanner(self):
        path = self.save("s2q1.nii.gz", pattern((6, 5, 4), np.int16), affine=OBLIQUE, qform=OTHER, qcode=1, scode=2)
        itk = ras_affine_from_info(info(path, "--nifti-geometry", "itk"))
        self.assert_affine(itk, nib.load(path).header.get_qform())
        self.assertGreater(np.abs(itk[:3, 3] - OBLIQUE[:3, 3]).max(), 10)  # the two rules really differ here

    def test_qform_when_sform_code_is_zero(self):
        path = self.save("q_only.nii", pattern((6, 5, 4), np.float32), affine=OTHER, qform=OBLIQUE, qcode=2, scode=0)
        self.assert_affine(ras_affine_from_info(info(path)), nib.load(path).header.get_qform())

    def test_pixdims_alone_with_a_warning(self):
        path = self.save("no_xform.nii", pattern((6, 5, 4), np.float32), qcode=0, scode=0)
        result = run("info", "--json", path)
        description = json.loads(result.stdout)
        zooms = nib.load(path).header.get_zooms()
        self.assert_affine(ras_affine_from_info(description), np.diag([*zooms, 1.0]))
        self.assertIn("neither sform nor qform", result.stderr)

    def test_shear_is_kept_exactly(self):
        path = self.save("sheared.nii.gz", pattern((6, 5, 4), np.float32), affine=SHEARED, qcode=0, scode=2)
        self.assert_affine(ras_affine_from_info(info(path)), SHEARED, 1e-6)
        self.assertEqual(run("info", path, "--nifti-geometry", "itk", ok=False).returncode, 1)  # ITK refuses shear
        # A new grid: the sform holds the sheared geometry (nibabel's slicing gives the expected affine).
        out = self.path("sheared_half.nii.gz")
        run("resize", "-i", path, "-o", out, "--size", "3,5,2")
        written = nib.load(out)
        expected = SHEARED @ affine_of(np.diag([2.0, 1.0, 2.0]), [0.5, 0.0, 0.5])
        self.assert_affine(written.header.get_sform(), expected, 1e-5)
        self.assertEqual(int(written.header["qform_code"]), 0)
        self.assertEqual(int(written.header["sform_code"]), 2)

    def test_spatial_units_scale_the_whole_affine(self):
        header = nib.Nifti1Header()
        header.set_xyzt_units("micron", "sec")
        path = self.save("um.nii", pattern((6, 5, 4), np.float32), header=header)
        self.assert_affine(ras_affine_from_info(info(path)), affine_of(OBLIQUE[:3, :3] * 1e-3, OBLIQUE[:3, 3] * 1e-3), 1e-7)
        out = self.path("um_small.nii")
        run("resize", "-i", path, "-o", out, "--size", "3,5,2")
        written = nib.load(out)
        self.assertEqual(written.header.get_xyzt_units(), ("micron", "sec"))
        self.assert_affine(written.affine, OBLIQUE @ affine_of(np.diag([2.0, 1.0, 2.0]), [0.5, 0.0, 0.5]), 1e-4)

    # --- the header carried to the output ------------------------------------------------------

    def test_codes_intent_descrip_units_tr_and_cal_are_kept(self):
        header = nib.Nifti1Header()
        header.set_intent("t test", (12.0,), name="tstat")
        header["descrip"] = b"made by nibabel for gridwarp"
        header["aux_file"] = b"lut.txt"
        header.set_xyzt_units("mm", "msec")
        header["toffset"] = 2.5
        header["cal_min"], header["cal_max"] = -3.0, 7.0
        header.set_dim_info(freq=0, phase=1, slice=2)
        header["slice_code"] = 1
        header["slice_start"], header["slice_end"] = 0, 3
        header["slice_duration"] = 0.5
        data = pattern((6, 5, 4, 3), np.float32)
        path = self.save("stats.nii.gz", data, qcode=2, scode=4, header=header)
        header = nib.load(path).header
        header.set_zooms((1.2, 0.9, 2.5, 2000.0))  # TR 2000 ms
        nib.save(nib.Nifti1Image(data, None, header=header), path)
        source = nib.load(path).header

        same_grid = self.path("turned.nii.gz")
        run("affine", "-i", path, "-o", same_grid, "--rotate", "10")
        new_grid = self.path("small.nii.gz")
        run("resize", "-i", path, "-o", new_grid, "--size", "3,5,2")
        for out in (same_grid, new_grid):
            h = nib.load(out).header
            self.assertEqual((int(h["qform_code"]), int(h["sform_code"])), (2, 4))
            self.assertEqual(h.get_intent(), source.get_intent())
            self.assertEqual(bytes(h["descrip"]), bytes(source["descrip"]))
            self.assertEqual(bytes(h["aux_file"]), bytes(source["aux_file"]))
            self.assertEqual(h.get_xyzt_units(), ("mm", "msec"))
            self.assertEqual(float(h["pixdim"][4]), 2000.0)
            self.assertEqual(float(h["toffset"]), 2.5)
            self.assertEqual((float(h["cal_min"]), float(h["cal_max"])), (-3.0, 7.0))
            self.assertEqual(tuple(h.get_data_shape())[3:], (3,))
        kept = nib.load(same_grid).header
        self.assertEqual(kept.get_dim_info(), (0, 1, 2))
        self.assertEqual(int(kept["slice_code"]), 1)
        self.assert_affine(kept.get_sform(), source.get_sform(), 0)  # the input's grid: bit for bit
        dropped = nib.load(new_grid).header
        self.assertEqual(dropped.get_dim_info(), (None, None, None))
        self.assertEqual(int(dropped["slice_code"]), 0)

    def test_resample_takes_the_references_codes(self):
        moving = self.save("moving.nii.gz", pattern((6, 5, 4), np.float32), qcode=1, scode=2)
        reference = self.save("reference.nii", np.zeros((4, 4, 3), np.uint8), affine=OTHER, qcode=2, scode=3)
        out = self.path("moved.nii.gz")
        run("resample", "-i", moving, "-r", reference, "-o", out)
        h = nib.load(out).header
        self.assertEqual((int(h["qform_code"]), int(h["sform_code"])), (2, 3))
        self.assert_affine(nib.load(out).affine, nib.load(reference).affine, 1e-5)
        self.assertEqual(nib.load(out).get_data_dtype(), np.float32)

    # --- values ------------------------------------------------------------------------------

    def test_scaled_integers_are_sampled_as_values_and_stored_back(self):
        data = pattern((6, 5, 4), np.int16)
        image = nib.Nifti1Image(data, OBLIQUE)
        image.header.set_slope_inter(0.5, 10.0)
        path = self.path("scaled.nii.gz")
        nib.save(image, path)
        values = nib.load(path).get_fdata()
        description = info(path)
        self.assertEqual(description["range"], [values.min(), values.max()])
        self.assertEqual(description["stored_dtype"], "int16")
        out = self.path("identity.nii.gz")
        run("affine", "-i", path, "-o", out, "--rotate", "0")
        written = nib.load(out)
        self.assertEqual(written.get_data_dtype(), np.int16)
        self.assertEqual((written.dataobj.slope, written.dataobj.inter), (0.5, 10.0))  # nibabel moves them there on load
        np.testing.assert_array_equal(np.asanyarray(written.dataobj.get_unscaled()), data)
        for copied in (self.path("copied.nii"), self.path("copied.nii.gz")):  # no transform: the stored values copied
            run("resample", "-i", path, "-o", copied)
            written = nib.load(copied)
            self.assertEqual(written.get_data_dtype(), np.int16)
            self.assertEqual((written.dataobj.slope, written.dataobj.inter), (0.5, 10.0))
            np.testing.assert_array_equal(np.asanyarray(written.dataobj.get_unscaled()), data)
        as_float = self.path("identity_float.nii")
        run("resample", "-i", path, "-o", as_float, "--output-type", "float")
        np.testing.assert_array_equal(nib.load(as_float).get_fdata(), values)
        # Halfway between voxels along x: the mean of scaled neighbours, rounded back to int16 steps.
        shifted = self.path("half.nii")
        matrix = self.path("half.txt")
        with open(matrix, "w") as f:
            f.write("1 0 0 0.5\n0 1 0 0\n0 0 1 0\n")
        run("affine", "-i", path, "-o", shifted, "--matrix", matrix)
        got = nib.load(shifted).get_fdata()
        expected = (values[:-1] + values[1:]) / 2
        np.testing.assert_allclose(got[:-1], np.round((expected - 10.0) / 0.5) * 0.5 + 10.0, atol=1e-12)

    def test_nan_and_infinities_are_kept(self):
        data = pattern((6, 5, 4), np.float32)
        data[1, 2, 3], data[4, 0, 0], data[0, 4, 1] = np.nan, np.inf, -np.inf
        path = self.save("nonfinite.nii", data)
        out = self.path("nonfinite_out.nii.gz")
        run("affine", "-i", path, "-o", out, "--rotate", "0", "--mode", "nearest")
        np.testing.assert_array_equal(nib.load(out).get_fdata(), data)

    def test_zero_weight_taps_keep_nan_and_infinities_where_they_have_weight(self):
        # docs/semantics.md: a tap of weight exactly zero contributes nothing. An identity through
        # linear or cubic taps returns every value in place (0 * inf would be NaN around each one);
        # half a voxel along x spreads a value to the two outputs that weigh it, not along y or z.
        data = pattern((6, 5, 4), np.float32)
        data[1, 2, 3], data[4, 0, 0], data[0, 4, 1] = np.nan, np.inf, -np.inf
        path = self.save("nonfinite_linear.nii", data)
        for mode in ("linear", "cubic"):
            turned = self.path(f"identity_{mode}.nii")
            run("affine", "-i", path, "-o", turned, "--rotate", "0", "--mode", mode)
            np.testing.assert_array_equal(nib.load(turned).get_fdata(), data)
            resampled = self.path(f"resampled_{mode}.nii.gz")
            run("resample", "-i", path, "-o", resampled, "--mode", mode)
            np.testing.assert_array_equal(nib.load(resampled).get_fdata(), data)
        shifted = self.path("half_nonfinite.nii")
        matrix = self.path("half_nonfinite.txt")
        with open(matrix, "w") as f:
            f.write("1 0 0 0.5\n0 1 0 0\n0 0 1 0\n")
        run("affine", "-i", path, "-o", shifted, "--matrix", matrix)
        got = nib.load(shifted).get_fdata()
        with np.errstate(invalid="ignore"):
            expected = (data[:-1].astype(np.float64) + data[1:]) / 2
        np.testing.assert_allclose(got[:-1], expected, rtol=1e-6)
        # NaN (x = 1) and inf (x = 4) reach two outputs each, -inf (x = 0) one.
        self.assertEqual(int(np.count_nonzero(~np.isfinite(got[:-1]))), 5)

    # --- variants of the format --------------------------------------------------------------

    def test_nifti2_reads_and_writes_nifti2(self):
        data = pattern((6, 5, 4), np.float64)
        path = self.save("two.nii.gz", data, klass=nib.Nifti2Image)
        self.assert_affine(ras_affine_from_info(info(path)), nib.load(path).affine)
        out = self.path("two_out.nii")
        run("affine", "-i", path, "-o", out, "--rotate", "0", "--mode", "nearest")
        written = nib.load(out)
        self.assertIsInstance(written, nib.Nifti2Image)
        np.testing.assert_array_equal(written.get_fdata(), data)

    def test_large_sizes_write_nifti2(self):
        data = np.arange(40000, dtype=np.uint8).reshape(40000, 1, 1)
        path = self.save("long.nii", np.broadcast_to(data, (40000, 1, 2)).copy(), klass=nib.Nifti2Image)
        out = self.path("long_out.nii")
        run("affine", "-i", path, "-o", out, "--rotate", "0")
        self.assertIsInstance(nib.load(out), nib.Nifti2Image)

    def test_hdr_img_pairs_and_gzipped_img(self):
        data = pattern((6, 5, 4), np.int16)
        pair = nib.Nifti1Pair(data, OBLIQUE)
        path = self.path("pair.hdr")
        nib.save(pair, path)
        self.assert_affine(ras_affine_from_info(info(path)), nib.load(path).affine)
        self.assert_affine(ras_affine_from_info(info(self.path("pair.img"))), nib.load(path).affine)
        out = self.path("pair_out.hdr")
        run("affine", "-i", path, "-o", out, "--rotate", "0")
        self.assertTrue(os.path.exists(self.path("pair_out.img")))
        np.testing.assert_array_equal(np.asanyarray(nib.load(out).dataobj), data)
        # The data file gzipped (.img.gz beside the .hdr).
        with open(self.path("pair.img"), "rb") as f, gzip.open(self.path("zpair.img.gz"), "wb") as g:
            g.write(f.read())
        with open(path, "rb") as f, open(self.path("zpair.hdr"), "wb") as g:
            g.write(f.read())
        out = self.path("zpair_out.nii")
        run("affine", "-i", self.path("zpair.hdr"), "-o", out, "--rotate", "0")
        np.testing.assert_array_equal(np.asanyarray(nib.load(out).dataobj), data)

    def test_big_endian(self):
        data = pattern((6, 5, 4), np.float32)
        header = nib.Nifti1Header(endianness=">")
        path = self.save("big.nii", data.astype(">f4"), header=header)
        self.assertEqual(nib.load(path).header.endianness, ">")
        out = self.path("big_out.nii.gz")
        run("affine", "-i", path, "-o", out, "--rotate", "0", "--mode", "nearest")
        np.testing.assert_array_equal(nib.load(out).get_fdata(), data)
        self.assert_affine(nib.load(out).affine, nib.load(path).affine, 0)

    def test_vector_fields_of_intent_1006_and_1007(self):
        for intent in ("vector", "displacement vector"):
            data = pattern((6, 5, 4, 1, 3), np.float32)
            header = nib.Nifti1Header()
            header.set_intent(intent)
            path = self.save(f"field_{intent[0]}.nii.gz", data, header=header)
            description = info(path)
            self.assertEqual(description["channels"], 3)
            self.assertEqual(description["size"], [6, 5, 4])
            out = self.path(f"field_{intent[0]}_out.nii.gz")
            run("affine", "-i", path, "-o", out, "--rotate", "0", "--mode", "nearest")
            written = nib.load(out)
            self.assertEqual(written.header.get_intent()[0], intent)
            self.assertEqual(written.shape, (6, 5, 4, 1, 3))
            np.testing.assert_array_equal(written.get_fdata(), data)

    def test_rgb24_and_complex(self):
        rgb = np.zeros((6, 5, 4), dtype=[("R", "u1"), ("G", "u1"), ("B", "u1")])
        rgb["R"], rgb["G"], rgb["B"] = pattern((6, 5, 4), np.uint8), 7, pattern((6, 5, 4), np.uint8)[::-1]
        path = self.save("rgb.nii", rgb)
        self.assertEqual(info(path)["channels"], 3)
        out = self.path("rgb_out.nii")
        run("affine", "-i", path, "-o", out, "--rotate", "0", "--mode", "nearest")
        written = nib.load(out)
        self.assertEqual(int(written.header["datatype"]), 128)
        np.testing.assert_array_equal(np.asanyarray(written.dataobj), rgb)
        c = (pattern((6, 5, 4), np.float32) + 1j * pattern((6, 5, 4), np.float32)[::-1]).astype(np.complex64)
        path = self.save("complex.nii", c)
        out = self.path("complex_out.nii")
        run("affine", "-i", path, "-o", out, "--rotate", "0", "--mode", "nearest")
        np.testing.assert_array_equal(np.asanyarray(nib.load(out).dataobj), c)

    def test_the_file_named_is_read_not_its_sibling(self):
        compressed = self.save("sub.nii.gz", np.full((4, 4, 3), 5, np.int16))
        self.save("sub.nii", np.full((4, 4, 3), 9, np.int16))
        self.assertEqual(info(compressed)["range"], [5, 5])

    @unittest.skipUnless(shutil.which("mrconvert"), "MRtrix3 is not installed")
    def test_mrtrix3_reads_the_parallel_gzip_output(self):
        data = np.random.default_rng(3).integers(-2000, 2000, (90, 80, 70)).astype(np.int16)  # ~1 MB: 2 blocks
        path = self.save("mr_input.nii", data)
        out = self.path("mr_out.nii.gz")
        run("affine", "-i", path, "-o", out, "--rotate", "0", "--threads", "2")
        converted = self.path("mr_converted.nii")
        subprocess.run(["mrconvert", "-quiet", out, converted], check=True)
        np.testing.assert_array_equal(np.asanyarray(nib.load(converted).dataobj), data)

    # --- refused files -----------------------------------------------------------------------

    def corrupt(self, name, offset, value, fmt):
        path = self.save(name, pattern((6, 5, 4), np.int16))
        with open(path, "r+b") as f:
            f.seek(offset)
            f.write(np.array([value], dtype=fmt).tobytes())
        return path

    def test_corrupt_headers_are_refused_with_one_line(self):
        cases = [
            self.corrupt("magic.nii", 344, 0x00313131, "<u4"),     # magic "111"
            self.corrupt("sizeof.nii", 0, 349, "<i4"),
            self.corrupt("bitpix.nii", 72, 32, "<i2"),             # int16 with 32 bits
            self.corrupt("dim0.nii", 40, 0, "<i2"),
            self.corrupt("negdim.nii", 42, -6, "<i2"),
            self.corrupt("voxoffset.nii", 108, np.nan, "<f4"),
            self.corrupt("inf_slope.nii", 112, np.inf, "<f4"),
            self.corrupt("datatype.nii", 70, 3, "<i2"),
        ]
        truncated = self.save("truncated.nii", pattern((6, 5, 4), np.int16))
        with open(truncated, "r+b") as f:
            f.truncate(352 + 100)
        cases.append(truncated)
        gz = self.save("truncated.nii.gz", np.random.default_rng(1).integers(0, 30000, (40, 40, 40)).astype(np.int16))
        with open(gz, "rb") as f:
            head = f.read()
        with open(gz, "wb") as f:
            f.write(head[: len(head) // 2])
        cases.append(gz)
        for path in cases:
            with self.subTest(file=os.path.basename(path)):
                out = self.path("never.nii")
                self.assert_refused(["affine", "-i", path, "-o", out, "--rotate", "5"], path)
                self.assertFalse(os.path.exists(out))
                self.assertEqual([n for n in os.listdir(self.dir.name) if n.startswith(".gridwarp-")], [])

    # --- parallel gzip output ----------------------------------------------------------------

    def test_parallel_gzip_output_is_one_standard_stream(self):
        rng = np.random.default_rng(7)
        data = (rng.normal(0, 50, (96, 96, 80)) + pattern((96, 96, 80), np.float64)).astype(np.int16)  # ~1.5 MB, 2+ blocks
        path = self.save("big_input.nii", data)
        for level in ("0", "1", "5", "12"):
            with self.subTest(level=level):
                out = self.path(f"out{level}.nii.gz")
                run("affine", "-i", path, "-o", out, "--rotate", "0", "--threads", "2", "--compression-level", level)
                with open(out, "rb") as f:
                    raw = f.read()
                with open(path, "rb") as f:
                    original = f.read()
                expected_voxels = original[352:]
                via_gzip = gzip.decompress(raw)
                via_zlib = zlib.decompress(raw, 16 + zlib.MAX_WBITS)  # one member: zlib alone reads it all
                self.assertEqual(via_gzip, via_zlib)
                self.assertEqual(via_gzip[352:], expected_voxels)
                np.testing.assert_array_equal(np.asanyarray(nib.load(out).dataobj), data)
                if level == "0":
                    self.assertGreater(len(raw), len(via_gzip))
        self.assertLessEqual(os.path.getsize(self.path("out12.nii.gz")), os.path.getsize(self.path("out5.nii.gz")))
        # The gzip program accepts the stream as it is.
        self.assertEqual(subprocess.run(["gzip", "-t", self.path("out5.nii.gz")]).returncode, 0)
        # The default level writes no more than zlib level 6 (+1 %).
        default = self.path("default.nii.gz")
        run("affine", "-i", path, "-o", default, "--rotate", "0")
        with open(path, "rb") as f:
            zlib6 = len(gzip.compress(f.read(), compresslevel=6))
        self.assertLessEqual(os.path.getsize(default), zlib6 * 1.01)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--gridwarp", required=True)
    arguments, rest = parser.parse_known_args()
    GRIDWARP = os.path.abspath(arguments.gridwarp)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
