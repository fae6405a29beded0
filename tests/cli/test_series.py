#!/usr/bin/python3
"""4-D series through gridwarp resample (issue 33, item 3).

    /usr/bin/python3 tests/cli/test_series.py --gridwarp build/app/gridwarp

The expectation for every volume of a resampled series is that volume, cut out of the series by
nibabel into a 3-D file of its own, resampled alone by gridwarp with the same options (and, for a
per-volume list, with its own transform): byte for byte. The series' header (TR, toffset, units,
description) is read back with nibabel.
"""
import os
import shutil
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

VOLUMES = 8
TR, TOFFSET = 2.5, 1.25


def itk_entry(index, kind, matrix, translation, centre):
    values = " ".join(repr(float(v)) for v in list(np.ravel(matrix)) + list(translation))
    return (f"#Transform {index}\nTransform: {kind}\nParameters: {values}\n"
            f"FixedParameters: {' '.join(repr(float(c)) for c in centre)}\n")


def rotation(angle_degrees, axis):
    a = np.deg2rad(angle_degrees)
    c, s = np.cos(a), np.sin(a)
    i, j = [(1, 2), (0, 2), (0, 1)][axis]
    m = np.eye(3)
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


def head_motion(volume):
    """Volume i's transform: a small rotation and shift, different for each volume."""
    kind = "MatrixOffsetTransformBase_double_3_3" if volume % 2 == 0 else "AffineTransform_float_3_3"
    matrix = rotation(1.5 * volume - 5, volume % 3)
    translation = [0.4 * volume - 1.0, 0.7 - 0.2 * volume, 0.3 * (volume % 3)]
    return kind, matrix, translation, [1.0, -2.0, 3.0]


class Series(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        rng = np.random.default_rng(33)
        data = rng.integers(-3000, 3000, size=(12, 10, 9, VOLUMES), dtype=np.int16)
        # An oblique moving grid with anisotropic voxels and a negative determinant.
        affine = np.diag([-2.0, 2.2, 2.5, 1.0])
        affine[:3, :3] = affine[:3, :3] @ rotation(7, 2)
        affine[:3, 3] = [10.0, -12.0, -9.0]
        series = nib.Nifti1Image(data, affine)
        header = series.header
        header.set_xyzt_units("mm", "sec")
        header["pixdim"][4] = TR
        header["toffset"] = TOFFSET
        header["descrip"] = b"series fixture"
        header.set_qform(affine, code=1)
        header.set_sform(affine, code=1)
        nib.save(series, cls.path("bold.nii.gz"))
        for v in range(VOLUMES):
            one = nib.Nifti1Image(data[..., v], affine)
            one.header.set_qform(affine, code=1)
            one.header.set_sform(affine, code=1)
            nib.save(one, cls.path(f"bold_{v}.nii.gz"))
        # The reference: another grid (size, voxels, origin) labelled template space.
        ref_affine = np.diag([1.7, 1.9, 2.1, 1.0])
        ref_affine[:3, 3] = [-8.0, -14.0, -10.0]
        reference = nib.Nifti1Image(np.zeros((11, 12, 10), np.float32), ref_affine)
        reference.header.set_qform(ref_affine, code=4)
        reference.header.set_sform(ref_affine, code=4)
        nib.save(reference, cls.path("ref.nii.gz"))
        reference_4d = nib.Nifti1Image(np.zeros((11, 12, 10, 3), np.float32), ref_affine)
        reference_4d.header.set_qform(ref_affine, code=4)
        reference_4d.header.set_sform(ref_affine, code=4)
        nib.save(reference_4d, cls.path("ref4d.nii.gz"))
        # A registration affine, one per-volume list as one ITK file and as a folder.
        with open(cls.path("bold_to_t1.tfm"), "w") as f:
            f.write("#Insight Transform File V1.0\n" + itk_entry(0, "AffineTransform_double_3_3",
                                                                  rotation(-4, 0) * 1.02, [1.5, -0.5, 2.0], [0, 0, 0]))
        os.mkdir(cls.path("hmc"))
        entries = []
        for v in range(VOLUMES):
            entry = itk_entry(0, *head_motion(v))
            with open(cls.path(f"hmc_{v}.tfm"), "w") as f:
                f.write("#Insight Transform File V1.0\n" + entry)
            shutil.copy(cls.path(f"hmc_{v}.tfm"), cls.path(os.path.join("hmc", f"vol{v:04d}.tfm")))
            entries.append(itk_entry(v, *head_motion(v)))
        with open(cls.path("hmc.txt"), "w") as f:
            f.write("#Insight Transform File V1.0\n" + "".join(entries))
        with open(cls.path("hmc_short.txt"), "w") as f:
            f.write("#Insight Transform File V1.0\n" + "".join(entries[:-1]))
        os.mkdir(cls.path("hmc_long"))
        for v in range(VOLUMES + 1):
            shutil.copy(cls.path(f"hmc_{v % VOLUMES}.tfm"), cls.path(os.path.join("hmc_long", f"vol{v:04d}.tfm")))

    def resample(self, moving, output, *options):
        result = run("resample", "-i", self.path(moving), "-o", self.path(output), "--threads", "2", *options)
        self.assertEqual(result.returncode, 0, result.stderr)
        return nib.load(self.path(output))

    def assert_volumes_equal_alone(self, series, name, options_for_volume):
        """Volume v of `series` equals bold_v resampled alone with options_for_volume(v)."""
        values = np.asanyarray(series.dataobj.get_unscaled())
        self.assertEqual(values.shape[3], VOLUMES)
        for v in range(VOLUMES):
            alone = self.resample(f"bold_{v}.nii.gz", f"{name}_alone_{v}.nii.gz", *options_for_volume(v))
            expected = np.asanyarray(alone.dataobj.get_unscaled())
            self.assertEqual(values.dtype, expected.dtype)
            self.assertEqual(values[..., v].tobytes(), expected.tobytes(), f"volume {v}")
            np.testing.assert_allclose(series.affine, alone.affine, atol=1e-5)
        # The volumes differ: a test that sampled one volume 8 times would fail.
        self.assertFalse(np.array_equal(values[..., 0], values[..., 1]))

    def test_one_transform_every_volume(self):
        series = self.resample("bold.nii.gz", "one.nii.gz", "-r", self.path("ref.nii.gz"), "-t", self.path("bold_to_t1.tfm"))
        self.assertEqual(series.get_data_dtype(), np.int16)  # an int16 series stays int16
        self.assert_volumes_equal_alone(series, "one", lambda v: ["-r", self.path("ref.nii.gz"), "-t", self.path("bold_to_t1.tfm")])

    def test_header_of_the_series_kept(self):
        series = self.resample("bold.nii.gz", "header.nii.gz", "-r", self.path("ref.nii.gz"), "-t", self.path("bold_to_t1.tfm"))
        header = series.header
        self.assertEqual(tuple(header["dim"][:5]), (4, 11, 12, 10, VOLUMES))
        self.assertAlmostEqual(float(header["pixdim"][4]), TR)
        self.assertAlmostEqual(float(header["toffset"]), TOFFSET)
        self.assertEqual(header.get_xyzt_units(), ("mm", "sec"))
        self.assertEqual(bytes(header["descrip"]).rstrip(b"\0"), b"series fixture")
        self.assertEqual(int(header["sform_code"]), 4)  # the reference's space
        np.testing.assert_allclose(series.affine, nib.load(self.path("ref.nii.gz")).affine, atol=1e-5)

    def test_four_d_reference_gives_its_grid(self):
        three = self.resample("bold.nii.gz", "ref3.nii.gz", "-r", self.path("ref.nii.gz"))
        four = self.resample("bold.nii.gz", "ref4.nii.gz", "-r", self.path("ref4d.nii.gz"))
        self.assertEqual(three.shape, (11, 12, 10, VOLUMES))
        self.assertEqual(np.asanyarray(three.dataobj).tobytes(), np.asanyarray(four.dataobj).tobytes())

    def test_float_output_and_plain_nii(self):
        options = ["-r", self.path("ref.nii.gz"), "-t", self.path("bold_to_t1.tfm"), "--output-type", "float", "--mode", "cubic"]
        series = self.resample("bold.nii.gz", "float.nii", *options)
        self.assertEqual(series.get_data_dtype(), np.float32)
        self.assert_volumes_equal_alone(series, "float", lambda v: options)

    def test_per_volume_itk_file(self):
        series = self.resample("bold.nii.gz", "hmc_file.nii.gz", "-t", self.path("hmc.txt") + ",per-volume")
        self.assert_volumes_equal_alone(series, "hmc_file", lambda v: ["-t", self.path(f"hmc_{v}.tfm")])

    def test_per_volume_folder_composed_in_place(self):
        # One-shot: head motion acts first, then the registration, in one interpolation.
        chain = ["-r", self.path("ref.nii.gz"), "-t", self.path("bold_to_t1.tfm")]
        series = self.resample("bold.nii.gz", "hmc_folder.nii.gz", *chain, "-t", self.path("hmc") + ",per-volume")
        self.assert_volumes_equal_alone(series, "hmc_folder", lambda v: chain + ["-t", self.path(f"hmc_{v}.tfm")])

    def test_one_shot_with_a_displacement_field(self):
        # fMRIPrep's order: head motion, then a distortion field (on the BOLD grid), then the registration.
        moving = nib.load(self.path("bold_0.nii.gz"))
        field = np.zeros(moving.shape + (1, 3), np.float32)
        field[..., 0, 1] = np.linspace(-2.0, 2.0, moving.shape[1])[None, :, None]  # along y, as EPI distortion
        warp = nib.Nifti1Image(field, moving.affine)
        warp.header.set_intent("vector")
        nib.save(warp, self.path("sdc_warp.nii.gz"))
        chain = ["-r", self.path("ref.nii.gz"), "-t", self.path("bold_to_t1.tfm"), "-t", self.path("sdc_warp.nii.gz")]
        series = self.resample("bold.nii.gz", "one_shot.nii.gz", *chain, "-t", self.path("hmc.txt") + ",per-volume")
        self.assert_volumes_equal_alone(series, "one_shot", lambda v: chain + ["-t", self.path(f"hmc_{v}.tfm")])

    def convert(self, transform, output):
        result = run("convert-transform", "-t", self.path(transform), "-o", self.path(output), "-i", self.path("bold_0.nii.gz"),
                     "-r", self.path("bold_0.nii.gz"), "-q")
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_per_volume_afni_rows(self):
        # 3dvolreg's -1Dmatrix_save: one row per volume. Each row alone (a one-row file) is read by
        # the single-transform reader; the rows together as one per-volume list must agree.
        rows = []
        for v in range(VOLUMES):
            self.convert(f"hmc_{v}.tfm", f"hmc_{v}.aff12.1D")
            rows += [line for line in open(self.path(f"hmc_{v}.aff12.1D")) if not line.startswith("#")]
        with open(self.path("hmc_volreg.1D"), "w") as f:
            f.write("# 3dvolreg matrices (DICOM-to-DICOM, row-by-row):\n" + "".join(rows))
        series = self.resample("bold.nii.gz", "hmc_afni.nii.gz", "-t", self.path("hmc_volreg.1D") + ",per-volume")
        self.assert_volumes_equal_alone(series, "hmc_afni", lambda v: ["-t", self.path(f"hmc_{v}.aff12.1D")])
        refused = run("resample", "-i", self.path("bold.nii.gz"), "-o", self.path("refused.nii.gz"), "-t", self.path("hmc_volreg.1D"))
        self.assertEqual(refused.returncode, 1)
        self.assertIn("per-volume", refused.stderr)

    def test_per_volume_mcflirt_folder(self):
        # MCFLIRT's bold.mat/MAT_0000, MAT_0001, ...: FSL matrices without an extension, named by ,fsl.
        os.mkdir(self.path("bold.mat"))
        for v in range(VOLUMES):
            self.convert(f"hmc_{v}.tfm", os.path.join("bold.mat", f"MAT_{v:04d}") + ",fsl")
        series = self.resample("bold.nii.gz", "hmc_fsl.nii.gz", "-t", self.path("bold.mat") + ",fsl,per-volume")
        self.assert_volumes_equal_alone(series, "hmc_fsl",
                                        lambda v: ["-t", self.path(os.path.join("bold.mat", f"MAT_{v:04d}")) + ",fsl"])

    def test_per_volume_inverse_inverts_each_in_place(self):
        series = self.resample("bold.nii.gz", "hmc_inverse.nii.gz", "-t", self.path("hmc.txt") + ",per-volume,inverse")
        self.assert_volumes_equal_alone(series, "hmc_inverse", lambda v: ["-t", self.path(f"hmc_{v}.tfm") + ",inverse"])

    def test_flow_every_volume(self):
        # gridwarp's spatial order is (D, H, W): nibabel's (12, 10, 9) volumes take a (9, 10, 12, 3) field.
        field = np.zeros((9, 10, 12, 3), np.float32)
        field[..., 0] = np.linspace(-1.5, 1.5, 12)
        field[..., 2] = 0.75
        np.save(self.path("flow.npy"), field)
        result = run("flow", "-i", self.path("bold.nii.gz"), "--flow", self.path("flow.npy"), "-o", self.path("flow_out.nii.gz"))
        self.assertEqual(result.returncode, 0, result.stderr)
        series = nib.load(self.path("flow_out.nii.gz"))
        self.assertAlmostEqual(float(series.header["pixdim"][4]), TR)
        values = np.asanyarray(series.dataobj.get_unscaled())
        for v in range(VOLUMES):
            result = run("flow", "-i", self.path(f"bold_{v}.nii.gz"), "--flow", self.path("flow.npy"), "-o", self.path(f"flow_{v}.nii.gz"))
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(values[..., v].tobytes(), np.asanyarray(nib.load(self.path(f"flow_{v}.nii.gz")).dataobj.get_unscaled()).tobytes())

    def assert_refused(self, moving, *options, mentions=()):
        output = self.path("refused.nii.gz")
        result = run("resample", "-i", self.path(moving), "-o", output, *options)
        stderr = result.stderr
        self.assertEqual(result.returncode, 1, stderr)
        self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertTrue(stderr.startswith("gridwarp: error:"), stderr)
        for text in mentions:
            self.assertIn(text, stderr)
        self.assertFalse(os.path.exists(output))
        self.assertEqual([n for n in os.listdir(self.folder) if n.startswith("refused") or ".gridwarp" in n], [])

    def test_count_mismatch_refused(self):
        self.assert_refused("bold.nii.gz", "-t", self.path("hmc_short.txt") + ",per-volume",
                            mentions=(self.path("hmc_short.txt"), "7 transform", "8 volume"))
        self.assert_refused("bold.nii.gz", "-t", self.path("hmc_long") + ",per-volume",
                            mentions=(self.path("hmc_long"), "9 transform", "8 volume"))

    def test_per_volume_with_one_volume_refused(self):
        self.assert_refused("bold_0.nii.gz", "-t", self.path("hmc.txt") + ",per-volume", mentions=(self.path("hmc.txt"), "4-D"))


if __name__ == "__main__":
    main()
