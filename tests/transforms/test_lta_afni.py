#!/usr/bin/python3
"""FreeSurfer LTA and AFNI .aff12.1D transforms against ITK .tfm files of the same world map.

    /usr/bin/python3 tests/transforms/test_lta_afni.py --gridwarp build/app/gridwarp

The images are made by nibabel with geometry that breaks naive readers (LAS, LPS and oblique
storage, anisotropic voxels). One known map, reference LPS point -> moving LPS point, is written
here from the formats' own documentation:
  - ITK .tfm (AffineTransform_double_3_3: the 3x3 matrix row by row, then the translation);
  - LTA (FreeSurfer utils/transform.cpp LTAprint layout) as LINEAR_RAS_TO_RAS, LINEAR_VOX_TO_VOX
    and LINEAR_PHYSVOX_TO_PHYSVOX, with volume infos computed from the images as FreeSurfer's
    getVolGeom/MRIxfmCRS2XYZ define them (cras = the centre voxel dims/2);
  - AFNI .aff12.1D (3dAllineate -help: base-to-source DICOM = LPS coordinates; an oblique
    dataset's coordinates are its nearest axis-aligned grid about the first voxel).
Each must resample like the .tfm, and one case must equal scipy's map_coordinates of the world map.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import nibabel as nib
import numpy as np
from scipy import ndimage

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FLIP, gridwarp, main, rotation  # noqa: E402


def affine(direction, sizes, origin):
    a = np.eye(4)
    a[:3, :3] = np.asarray(direction) @ np.diag(sizes)
    a[:3, 3] = origin
    return a


def save_image(path, data, ras_affine):
    image = nib.Nifti1Image(data.astype(np.float32), ras_affine)
    image.set_qform(ras_affine, code=1)
    image.set_sform(ras_affine, code=1)
    image.to_filename(path)


def smooth_volume(shape, seed):
    rng = np.random.default_rng(seed)
    return ndimage.gaussian_filter(rng.normal(size=shape), 1.5) * 100 + 50


def write_tfm(path, lps_map):
    params = list(lps_map[:3, :3].ravel()) + list(lps_map[:3, 3])
    with open(path, "w") as f:
        f.write("#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n")
        f.write("Parameters: " + " ".join(repr(float(v)) for v in params) + "\n")
        f.write("FixedParameters: 0 0 0\n")


def volume_info(name, shape, ras_affine):
    """FreeSurfer's VOL_GEOM fields of an image (getVolGeom), as LTAprint writes them."""
    sizes = np.sqrt((ras_affine[:3, :3] ** 2).sum(axis=0))
    axes = ras_affine[:3, :3] / sizes
    centre = ras_affine @ np.append(np.asarray(shape[:3]) / 2.0, 1.0)
    row = lambda v: " ".join("%.15e" % x for x in v)
    return [
        "valid = 1  # volume info valid",
        "filename = %s" % name,
        "volume = %d %d %d" % tuple(shape[:3]),
        "voxelsize = " + row(sizes),
        "xras   = " + row(axes[:, 0]),
        "yras   = " + row(axes[:, 1]),
        "zras   = " + row(axes[:, 2]),
        "cras   = " + row(centre[:3]),
    ]


def lta_text(lta_type, matrix, src_info, dst_info, nxforms=1):
    lines = ["# transform file test.lta", "# created by test_lta_afni.py", ""]
    lines.append("type      = %d # %s" % (lta_type, {0: "LINEAR_VOX_TO_VOX", 1: "LINEAR_RAS_TO_RAS"}.get(lta_type, "")))
    lines.append("nxforms   = %d" % nxforms)
    lines.append("mean      = 0.0000 0.0000 0.0000")
    lines.append("sigma     = 10000.0000")
    lines.append("1 4 4")
    for r in range(4):
        lines.append(" ".join("%.15e" % v for v in matrix[r]))
    lines.append("src volume info")
    lines += src_info
    lines.append("dst volume info")
    lines += dst_info
    lines.append("subject unknown")
    lines.append("fscale 0.100000")
    return "\n".join(lines) + "\n"


def afni_cardinal(ras_affine):
    """AFNI's coordinates of a dataset (thd_niftiread.c): the nearest axis-aligned grid, with the
    first voxel where it is, in DICOM (LPS) order. Returns voxel -> AFNI LPS."""
    lps = FLIP @ ras_affine
    sizes = np.sqrt((lps[:3, :3] ** 2).sum(axis=0))
    direction = lps[:3, :3] / sizes
    card = np.zeros((3, 3))
    used = set()
    for c in np.argsort(-np.abs(direction).max(axis=0)):  # the most axis-aligned columns first
        order = [r for r in np.argsort(-np.abs(direction[:, c])) if r not in used]
        r = order[0]
        used.add(r)
        card[r, c] = np.sign(direction[r, c])
    return affine(card, sizes, lps[:3, 3])


class Case:
    """A moving and a reference image and one world map between them, in every format."""

    def __init__(self, folder, name, mov_affine, mov_shape, ref_affine, ref_shape, lps_map, seed):
        self.folder, self.name = folder, name
        self.mov, self.ref = self.path("mov.nii.gz"), self.path("ref.nii.gz")
        self.mov_affine, self.ref_affine = mov_affine, ref_affine
        self.mov_shape, self.ref_shape = mov_shape, ref_shape
        self.data = smooth_volume(mov_shape, seed)
        save_image(self.mov, self.data, mov_affine)
        save_image(self.ref, np.zeros(ref_shape), ref_affine)
        self.lps_map = lps_map  # reference LPS point -> moving LPS point
        write_tfm(self.path("map.tfm"), lps_map)
        ras_to_ras = np.linalg.inv(FLIP @ lps_map @ FLIP)  # src (moving) RAS -> dst (reference) RAS
        src = volume_info("mov.nii.gz", mov_shape, mov_affine)
        dst = volume_info("ref.nii.gz", ref_shape, ref_affine)
        vox2vox = np.linalg.inv(ref_affine) @ ras_to_ras @ mov_affine
        src_sizes = np.sqrt((mov_affine[:3, :3] ** 2).sum(axis=0))
        dst_sizes = np.sqrt((ref_affine[:3, :3] ** 2).sum(axis=0))
        physvox = np.diag(np.append(dst_sizes, 1)) @ vox2vox @ np.diag(np.append(1 / src_sizes, 1))
        self.write("ras2ras.lta", lta_text(1, ras_to_ras, src, dst))
        self.write("vox2vox.lta", lta_text(0, vox2vox, src, dst))
        self.write("physvox.lta", lta_text(2, physvox, src, dst))
        afni = afni_cardinal(mov_affine) @ np.linalg.inv(FLIP @ mov_affine) @ lps_map @ (FLIP @ ref_affine) @ np.linalg.inv(
            afni_cardinal(ref_affine))
        self.write("map.aff12.1D", "# 3dAllineate matrices (DICOM-to-DICOM, row-major), 1 row per sub-brick\n" +
                   " ".join("%.10f" % v for v in afni[:3, :].ravel()) + "\n")

    def path(self, name):
        return os.path.join(self.folder, self.name + "_" + name)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)

    def resample(self, transform, out_name):
        """TRANSFORM: one -t argument, or a list of them (a chain, the first acting first)."""
        out = self.path(out_name)
        chain = [transform] if isinstance(transform, str) else transform
        options = [option for t in chain for option in ("-t", t)]
        # The world-map oracle interpolates without filtering first.
        result = subprocess.run([gridwarp(), "resample", "-i", self.mov, "-r", self.ref, "-o", out, "--antialias", "off", *options],
                                capture_output=True, text=True, timeout=120)
        return result, out

    def world_oracle(self):
        """The output by the world map alone: reference voxel -> LPS -> moving LPS -> moving voxel."""
        ijk = np.indices(self.ref_shape).reshape(3, -1)
        ref_points = FLIP @ self.ref_affine @ np.vstack([ijk, np.ones(ijk.shape[1])])
        mov_index = np.linalg.inv(FLIP @ self.mov_affine) @ self.lps_map @ ref_points
        values = ndimage.map_coordinates(self.data, mov_index[:3], order=1, mode="grid-constant", cval=0.0)
        inside = np.all((mov_index[:3] >= 1) & (mov_index[:3] <= np.array(self.mov_shape)[:, None] - 2), axis=0)
        return values.reshape(self.ref_shape), inside.reshape(self.ref_shape)


class Formats(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="gridwarp-lta-afni-")
        lps_map = np.eye(4)
        lps_map[:3, :3] = rotation(0.12, -0.08, 0.2) @ np.diag([1.05, 0.97, 1.02])
        lps_map[:3, 3] = [3.5, -2.25, 4.0]
        las = np.diag([-1.0, 1.0, 1.0])
        lps = np.diag([-1.0, -1.0, 1.0])
        cls.cases = [
            # Reference stored LAS, moving oblique RAS; anisotropic voxels on both.
            Case(cls.folder, "oblique", affine(rotation(0.3, 0.1, -0.2), [1.5, 1.2, 2.5], [-20, -15, -12]), (26, 28, 14),
                 affine(las, [2.0, 1.75, 2.5], [22, -20, -14]), (20, 22, 12), lps_map, 1),
            # Moving stored LPS (negative determinant of the RAS affine), reference RAS.
            Case(cls.folder, "axes", affine(lps, [1.25, 1.5, 2.0], [18, 20, -14]), (28, 26, 14),
                 affine(np.eye(3), [1.8, 2.0, 2.2], [-18, -20, -12]), (20, 20, 11), lps_map, 2),
            # Both oblique (the reference too), so AFNI's cardinal grids matter on both sides.
            Case(cls.folder, "both_oblique", affine(rotation(-0.2, 0.25, 0.1), [1.4, 1.4, 2.0], [-18, -20, -15]), (26, 28, 16),
                 affine(rotation(0.15, 0.0, 0.35) @ las, [2.0, 2.0, 2.0], [20, -18, -10]), (18, 18, 11), lps_map, 3),
        ]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, ignore_errors=True)

    def resampled(self, case, transform, out_name):
        result, out = case.resample(transform, out_name)
        self.assertEqual(result.returncode, 0, result.stderr)
        return np.asanyarray(nib.load(out).dataobj), result.stderr

    def test_every_format_resamples_like_the_tfm(self):
        for case in self.cases:
            expected, _ = self.resampled(case, case.path("map.tfm"), "tfm.nii.gz")
            self.assertGreater(np.abs(expected).max(), 1.0)
            for name in ["ras2ras.lta", "vox2vox.lta", "physvox.lta", "map.aff12.1D"]:
                with self.subTest(case=case.name, file=name):
                    got, stderr = self.resampled(case, case.path(name), name + ".nii.gz")
                    self.assertNotIn("warning", stderr, "no warning for matching volume infos")
                    np.testing.assert_allclose(got, expected, rtol=0, atol=2e-3)

    def test_the_tfm_and_lta_equal_the_world_map(self):
        case = self.cases[0]
        oracle, inside = case.world_oracle()
        self.assertGreater(inside.sum(), 500)
        for name in ["map.tfm", "vox2vox.lta", "map.aff12.1D"]:
            with self.subTest(file=name):
                got, _ = self.resampled(case, case.path(name), "world_" + name + ".nii.gz")
                np.testing.assert_allclose(got[inside], oracle[inside], rtol=0, atol=2e-3)

    def test_tags_and_inverse(self):
        case = self.cases[0]
        # A tag names the format whatever the file is called.
        for source, renamed, tag in [("ras2ras.lta", "ras2ras_as.txt", "lta"), ("map.aff12.1D", "map_as.txt", "afni")]:
            shutil.copy(case.path(source), case.path(renamed))
            expected, _ = self.resampled(case, case.path(source), "tag_expected.nii.gz")
            got, _ = self.resampled(case, case.path(renamed) + "," + tag, "tag_got.nii.gz")
            np.testing.assert_array_equal(got, expected)
        # Without a tag or an extension, an LTA is known by its first lines.
        shutil.copy(case.path("ras2ras.lta"), case.path("registration"))
        expected, _ = self.resampled(case, case.path("ras2ras.lta"), "content_expected.nii.gz")
        got, _ = self.resampled(case, case.path("registration"), "content_got.nii.gz")
        np.testing.assert_array_equal(got, expected)
        # Inverse: mov and ref swapped roles, the map inverted, against the .tfm inverted.
        for name in ["vox2vox.lta", "map.aff12.1D"]:
            with self.subTest(file=name):
                out_tfm, out_got = case.path("inv_tfm.nii.gz"), case.path("inv_got.nii.gz")
                for transform, out in [(case.path("map.tfm") + ",inverse", out_tfm), (case.path(name) + ",inverse", out_got)]:
                    result = subprocess.run([gridwarp(), "resample", "-i", case.mov, "-r", case.ref, "-o", out, "-t", transform],
                                            capture_output=True, text=True, timeout=120)
                    self.assertEqual(result.returncode, 0, result.stderr)
                expected = np.asanyarray(nib.load(out_tfm).dataobj)
                np.testing.assert_allclose(np.asanyarray(nib.load(out_got).dataobj), expected, rtol=0, atol=2e-3)
                self.assertGreater(np.abs(expected).max(), 1.0)

    def test_float32_last_row_as_freesurfer_writes_it(self):
        # mri_concatenate_lta computes in float32: its last row can read 0 0 0 0.99999988 (1 - 2^-23)
        # or 1.00000012. Within 1e-6 it is exactly 0 0 0 1; farther off it is refused.
        case = self.cases[0]
        exact = case.path("ras2ras.lta")
        with open(exact) as f:
            text = f.read()
        expected, _ = self.resampled(case, exact, "row_exact.nii.gz")
        last = " ".join("%.15e" % v for v in [0.0, 0.0, 0.0, 1.0])
        self.assertIn(last, text)
        for label, row in [("below", "0 0 0 0.99999988"), ("above", "0 0 0 1.00000012"), ("zeros", "1.2e-08 -3e-09 0 1")]:
            with self.subTest(row=label):
                case.write("row_" + label + ".lta", text.replace(last, row))
                got, _ = self.resampled(case, case.path("row_" + label + ".lta"), "row_" + label + ".nii.gz")
                np.testing.assert_array_equal(got, expected)
        case.write("row_far.lta", text.replace(last, "0 0 0 1.001"))
        result, out = case.resample(case.path("row_far.lta"), "row_far.nii.gz")
        self.assertEqual(result.returncode, 1)
        self.assertIn("last row of the LTA matrix must be 0 0 0 1", result.stderr)
        self.assertFalse(os.path.exists(out))

    def test_lta_for_other_volumes_warns_once(self):
        case = self.cases[1]
        with open(case.path("ras2ras.lta")) as f:
            text = f.read()
        # The dst volume the file names is 4 mm elsewhere than the reference given.
        lines = text.splitlines()
        dst = lines.index("dst volume info")
        cras = [i for i in range(dst, len(lines)) if lines[i].startswith("cras")][0]
        values = [float(v) for v in lines[cras].split("=")[1].split()]
        lines[cras] = "cras   = %.15e %.15e %.15e" % (values[0] + 4, values[1], values[2])
        case.write("moved_dst.lta", "\n".join(lines) + "\n")
        expected, _ = self.resampled(case, case.path("ras2ras.lta"), "warn_expected.nii.gz")
        got, stderr = self.resampled(case, case.path("moved_dst.lta"), "warn_got.nii.gz")
        warnings = [line for line in stderr.splitlines() if "warning" in line]
        self.assertEqual(len(warnings), 1, stderr)
        self.assertIn("moved_dst.lta", warnings[0])
        self.assertIn("differ from the volumes the LTA names", warnings[0])
        self.assertIn("dst (ref.nii.gz) vs the reference grid", warnings[0])
        # A RAS-to-RAS file applies to the images given, as FreeSurfer applies it.
        np.testing.assert_array_equal(got, expected)
        # In a chain only the ends are known: the dst of an LTA that acts after another transform
        # is that transform's output space, not the reference grid, so nothing is said of it...
        write_tfm(case.path("identity.tfm"), np.eye(4))
        _, stderr = self.resampled(case, [case.path("identity.tfm"), case.path("moved_dst.lta")], "warn_chain_last.nii.gz")
        self.assertNotIn("warning", stderr)
        # ...while an LTA that acts first still has its dst checked against the reference.
        _, stderr = self.resampled(case, [case.path("moved_dst.lta"), case.path("identity.tfm")], "warn_chain_first.nii.gz")
        self.assertIn("dst (ref.nii.gz) vs the reference grid", stderr)


class Refusals(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="gridwarp-lta-afni-bad-")
        cls.case = Case(cls.folder, "c", affine(np.eye(3), [2, 2, 2], [-10, -10, -10]), (10, 10, 10),
                        affine(np.eye(3), [2, 2, 2], [-10, -10, -10]), (10, 10, 10), np.eye(4), 4)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, ignore_errors=True)

    def refused(self, name, text, needle):
        self.case.write(name, text)
        result, out = self.case.resample(self.case.path(name), "refused_" + name + ".nii.gz")
        lines = result.stderr.strip().splitlines()
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn(self.case.path(name), lines[0])
        self.assertIn(needle, lines[0])
        self.assertFalse(os.path.exists(out))

    def test_lta_refusals(self):
        with open(self.case.path("vox2vox.lta")) as f:
            good = f.read()
        self.refused("type14.lta", good.replace("type      = 0", "type      = 14"), "REGISTER_DAT")
        self.refused("type7.lta", good.replace("type      = 0", "type      = 7"), "LTA type 7")
        matrix_start = good.index("1 4 4\n") + len("1 4 4\n")
        two_rows = good[matrix_start:].split("\n")[:2]
        self.refused("truncated.lta", good[:matrix_start] + "\n".join(two_rows) + "\n", "ends inside the 4x4 matrix")
        self.refused("cut_row.lta", good[: matrix_start + 30], "expected 4 numbers in row 1")
        first_row = good[matrix_start:].split("\n")[0]
        self.refused("nan.lta", good.replace(first_row, "nan " + first_row.split(" ", 1)[1]), "finite number")
        self.refused("two.lta", good.replace("nxforms   = 1", "nxforms   = 2"), "exactly one")
        self.refused("huge.lta", good.replace("nxforms   = 1", "nxforms   = 99999999999"), "exactly one")
        self.refused("invalid.lta", good.replace("valid = 1", "valid = 0", 1), "needs valid src and dst volume info")
        self.refused("notype.lta", good.replace("type      = 0", ""), "no 'type = N' line")
        self.refused("singular.lta", lta_text(1, np.diag([1.0, 0.0, 1.0, 1.0]), [], []), "singular")

    def test_afni_refusals(self):
        row = " ".join(["1", "0", "0", "0", "0", "1", "0", "0", "0", "0", "1", "0"])
        self.refused("eleven.aff12.1D", "1 0 0 0 0 1 0 0 0 0 1\n", "expected 12 numbers")
        self.refused("rows.aff12.1D", (row + "\n") * 3, "holds 3 matrices")
        self.refused("inf.aff12.1D", row.replace("1", "inf", 1) + "\n", "finite number")
        self.refused("empty.aff12.1D", "# nothing\n", "no matrix rows")
        self.refused("wide.aff12.1D", "0 " * 1000000 + "\n", "more than 64 words")
        self.refused("long.aff12.1D", "0 0 0 0 0 0 0 0 0 0 0 0\n" * 100001, "more than 100000 matrix rows")

    def test_hostile_sizes(self):
        self.refused("newlines.lta", "\n" * (8 << 20), "no 'type = N' line")
        self.refused("big.lta", "#" * ((16 << 20) + 1), "more than a transform text file holds")


if __name__ == "__main__":
    main()
