#!/usr/bin/python3
"""DICOM series read as dcm2niix converts them: series written with pydicom (oblique, anisotropic
pixels, 2.5 mm slices, CT int16 with RescaleIntercept -1024, MR uint16, two series in one folder),
converted with dcm2niix, and gridwarp's NIfTI of the same series compared with nibabel: the same
value at every voxel and every voxel at the same world position (within 1e-4 mm), whichever way
each program orders the axes. Named by folder, by one of its files and by FOLDER,series=UID;
series with a missing slice, uneven spacing, mixed orientations or sizes refused in one line; RLE
read, a transfer syntax GDCM cannot decode refused by name.

    /usr/bin/python3 tests/cli/test_dicom.py --gridwarp build/app/gridwarp

Exits 77 (skipped) where pydicom or dcm2niix is missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import nibabel as nib
    import numpy as np
    import pydicom
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid
except ImportError as missing:
    print("skipped: %s" % missing)
    sys.exit(77)
if shutil.which("dcm2niix") is None:
    print("skipped: dcm2niix is not installed")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

CT_IMAGE_STORAGE = "1.2.840.10008.5.1.4.1.1.2"
MR_IMAGE_STORAGE = "1.2.840.10008.5.1.4.1.1.4"


def oblique_orientation():
    """Row and column direction cosines of a plane turned about two axes."""
    a, b = np.radians(17.0), np.radians(-11.0)
    turn = (np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]]) @
            np.array([[np.cos(b), 0, np.sin(b)], [0, 1, 0], [-np.sin(b), 0, np.cos(b)]]))
    return turn[:, 0], turn[:, 1]


def write_series(folder, pixels, modality, row, column, pixel_spacing=(0.8, 0.9), slice_spacing=2.5,
                 origin=(-40.0, -35.5, 12.25), rescale=None, series_number=1, description="series",
                 positions=None, names=None, series_uid=None):
    """One file per slice of `pixels` (slices, rows, columns), slice k at origin + k * spacing
    along the normal (or at positions[k]), files named slice_NNN.dcm in shuffled order."""
    os.makedirs(folder, exist_ok=True)
    row, column = np.asarray(row, float), np.asarray(column, float)
    normal = np.cross(row, column)
    series_uid = series_uid or generate_uid()
    study_uid, frame_uid = generate_uid(), generate_uid()
    sop_class = CT_IMAGE_STORAGE if modality == "CT" else MR_IMAGE_STORAGE
    order = np.random.default_rng(len(pixels)).permutation(len(pixels))
    for k in range(len(pixels)):
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = sop_class
        meta.MediaStorageSOPInstanceUID = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        name = names[k] if names else "slice_%03d.dcm" % order[k]
        ds = FileDataset(os.path.join(folder, name), {}, file_meta=meta, preamble=b"\0" * 128)
        ds.SOPClassUID = sop_class
        ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
        ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = study_uid, series_uid, frame_uid
        ds.Modality = modality
        ds.PatientName, ds.PatientID = "Phantom^Test", "gridwarp"
        ds.StudyDate = ds.SeriesDate = ds.AcquisitionDate = "20260101"
        ds.StudyTime = ds.SeriesTime = ds.AcquisitionTime = "120000"
        ds.SeriesNumber, ds.InstanceNumber, ds.AcquisitionNumber = series_number, k + 1, 1
        ds.SeriesDescription = description
        ds.ImageOrientationPatient = ["%.10f" % v for v in (*row, *column)]
        position = positions[k] if positions is not None else np.asarray(origin) + k * slice_spacing * normal
        ds.ImagePositionPatient = ["%.6f" % v for v in position]
        ds.PixelSpacing = ["%g" % v for v in pixel_spacing]
        ds.SliceThickness = "%g" % (slice_spacing * 2)  # deliberately not the spacing
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.Rows, ds.Columns = pixels.shape[1], pixels.shape[2]
        ds.BitsAllocated = ds.BitsStored = 16
        ds.HighBit = 15
        ds.PixelRepresentation = 1 if pixels.dtype == np.int16 else 0
        if rescale:
            ds.RescaleSlope, ds.RescaleIntercept = "%g" % rescale[0], "%g" % rescale[1]
            ds.RescaleType = "HU"
        if modality == "MR":
            ds.MagneticFieldStrength, ds.EchoTime, ds.RepetitionTime = "3", "30", "2000"
        ds.PixelData = np.ascontiguousarray(pixels[k]).tobytes()
        ds.is_little_endian, ds.is_implicit_VR = True, False
        ds.save_as(os.path.join(folder, name), write_like_original=False)
    return series_uid


def values(shape, dtype, low, high, seed):
    return np.random.default_rng(seed).integers(low, high, size=shape).astype(dtype)


class Dicom(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        row, column = oblique_orientation()
        cls.ct_pixels = values((9, 24, 20), np.int16, -1024, 3000, 1)  # stored values; HU = stored - 1024 below
        cls.ct_uid = write_series(cls.path("ct"), cls.ct_pixels, "CT", row, column, rescale=(1, -1024), description="CT oblique")
        cls.mr_pixels = values((7, 16, 22), np.uint16, 0, 65535, 2)
        cls.mr_uid = write_series(cls.path("mr"), cls.mr_pixels, "MR", [0, 1, 0], [0, 0, -1], pixel_spacing=(0.7, 1.1),
                                  slice_spacing=3.0, origin=(10, -20, 30), description="MR sagittal")
        # Two series in one folder.
        cls.both_ct = write_series(cls.path("two"), cls.ct_pixels[:5], "CT", row, column, rescale=(1, -1024),
                                   series_number=3, description="first", names=["a%02d.dcm" % k for k in range(5)])
        cls.both_mr = write_series(cls.path("two"), cls.mr_pixels, "MR", [1, 0, 0], [0, 1, 0], series_number=4,
                                   description="second", names=["b%02d.dcm" % k for k in range(7)])

    def dcm2niix(self, folder):
        out = tempfile.mkdtemp(prefix=os.path.basename(folder) + "_dcm2niix", dir=self.folder)  # a fresh one per run
        result = subprocess.run(["dcm2niix", "-z", "n", "-f", "%s", "-o", out, folder], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        return {name[:-4]: nib.load(os.path.join(out, name)) for name in os.listdir(out) if name.endswith(".nii")}

    def gridwarp_nifti(self, source, name):
        out = self.path(name + ".nii")
        result = run("resample", "-i", source, "-o", out, "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        return nib.load(out)

    def assert_same_voxels(self, ours, theirs):
        """Every voxel of theirs at the same world position in ours, with the same value."""
        self.assertEqual(sorted(ours.shape), sorted(theirs.shape))
        index_map = np.linalg.inv(ours.affine) @ theirs.affine  # their voxel index to ours
        rounded = np.round(index_map)
        linear = rounded[:3, :3]
        self.assertTrue(np.array_equal(np.abs(linear).sum(0), np.ones(3)) and np.array_equal(np.abs(linear).sum(1), np.ones(3)),
                        "the grids are not the same up to axis order and flips:\n%s" % index_map)
        corners = np.array([[i, j, k, 1] for i in (0, theirs.shape[0] - 1) for j in (0, theirs.shape[1] - 1)
                            for k in (0, theirs.shape[2] - 1)], float).T
        # World positions of the voxels each program puts at the same place (the largest error of an
        # affine map over a box is at a corner).
        their_world = theirs.affine @ corners
        our_world = ours.affine @ (rounded @ corners)
        self.assertLess(np.abs(their_world - our_world).max(), 1e-4)
        grid = np.indices(theirs.shape).reshape(3, -1)
        mapped = (linear @ grid + rounded[:3, 3:4]).astype(int)
        our_values = ours.get_fdata()[tuple(mapped)]
        their_values = theirs.get_fdata().reshape(-1)
        np.testing.assert_array_equal(our_values, their_values)

    def test_ct_oblique_rescaled_equals_dcm2niix(self):
        theirs = self.dcm2niix(self.path("ct"))
        self.assertEqual(len(theirs), 1, theirs)
        (expected,) = theirs.values()
        ours = self.gridwarp_nifti(self.path("ct"), "ct_folder")
        self.assert_same_voxels(ours, expected)
        # The values are Hounsfield units, independent of either program: stored - 1024.
        self.assertEqual(ours.get_fdata().min(), float(self.ct_pixels.min()) - 1024)
        # The slice spacing comes from the positions (2.5 mm), not SliceThickness (5 mm).
        self.assertTrue(np.allclose(sorted(ours.header.get_zooms()), sorted([0.8, 0.9, 2.5]), atol=1e-5))
        # Stored as dcm2niix stores it: the pixels' type with the rescale slope and intercept.
        self.assertEqual(ours.get_data_dtype(), expected.get_data_dtype())
        self.assertEqual((ours.dataobj.slope, ours.dataobj.inter), (expected.dataobj.slope, expected.dataobj.inter))

    def test_rescaled_series_to_formats_without_and_with_a_scaling(self):
        """An MGH output (no scaling, float64 refused: asked for float32) holds the values; an MRtrix3
        one the stored values and its scaling."""
        (expected,) = self.dcm2niix(self.path("ct")).values()
        values = np.sort(expected.get_fdata().reshape(-1))
        mgz = self.path("ct.mgz")
        result = run("resample", "-i", self.path("ct"), "-o", mgz, "--output-type", "float32", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        np.testing.assert_array_equal(np.sort(nib.load(mgz).get_fdata().reshape(-1)), values)
        if shutil.which("mrconvert") is None:
            return
        mif, converted = self.path("ct.mif"), self.path("ct_from_mif.nii")
        result = run("resample", "-i", self.path("ct"), "-o", mif, "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(mif, "rb") as f:
            self.assertIn(b"\nscaling: -1024,1\n", f.read(4096))
        subprocess.run(["mrconvert", "-quiet", "-force", mif, converted], check=True)
        np.testing.assert_array_equal(np.sort(nib.load(converted).get_fdata().reshape(-1)), values)

    def test_named_by_one_file_of_the_series(self):
        (expected,) = self.dcm2niix(self.path("ct")).values()
        ours = self.gridwarp_nifti(os.path.join(self.path("ct"), "slice_004.dcm"), "ct_file")
        self.assert_same_voxels(ours, expected)

    def test_mr_uint16_equals_dcm2niix(self):
        (expected,) = self.dcm2niix(self.path("mr")).values()
        ours = self.gridwarp_nifti(self.path("mr"), "mr")
        self.assert_same_voxels(ours, expected)
        self.assertEqual(ours.get_data_dtype(), np.uint16)

    def test_two_series_refused_untagged_and_read_by_uid(self):
        result = run("resample", "-i", self.path("two"), "-o", self.path("two.nii"), "-q")
        self.assertNotEqual(result.returncode, 0)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        for uid in (self.both_ct, self.both_mr):
            self.assertIn(uid, result.stderr)
        self.assertIn("'first'", result.stderr)
        self.assertIn("20x24x5", result.stderr)
        self.assertFalse(os.path.exists(self.path("two.nii")))
        theirs = self.dcm2niix(self.path("two"))
        self.assert_same_voxels(self.gridwarp_nifti(self.path("two") + ",series=" + self.both_ct, "two_ct"), theirs["3"])
        self.assert_same_voxels(self.gridwarp_nifti(self.path("two") + ",series=" + self.both_mr, "two_mr"), theirs["4"])

    def refused(self, folder, *words):
        out = self.path(os.path.basename(folder) + ".nii")
        result = run("resample", "-i", folder, "-o", out, "-q")
        self.assertNotEqual(result.returncode, 0)
        self.assertLess(result.returncode, 128, result.stderr)  # an error, not a signal
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn(folder, lines[0])
        for word in words:
            self.assertIn(word, lines[0])
        self.assertFalse(os.path.exists(out))

    def test_missing_slice_refused(self):
        row, column = oblique_orientation()
        normal = np.cross(row, column)
        positions = [np.array([0.0, 0, 0]) + k * 2.5 * normal for k in (0, 1, 2, 4, 5)]
        write_series(self.path("gap"), self.ct_pixels[:5], "CT", row, column, positions=positions)
        self.refused(self.path("gap"), "missing")

    def test_uneven_spacing_refused(self):
        positions = [[0, 0, z] for z in (0, 2.5, 5.0, 7.9, 10.0)]
        write_series(self.path("uneven"), self.ct_pixels[:5], "CT", [1, 0, 0], [0, 1, 0], positions=positions)
        self.refused(self.path("uneven"), "uneven")

    def test_mixed_orientation_and_size_refused(self):
        uid = write_series(self.path("mixed"), self.ct_pixels[:3], "CT", [1, 0, 0], [0, 1, 0], names=["m0.dcm", "m1.dcm", "m2.dcm"])
        write_series(self.path("mixed"), self.ct_pixels[:1], "CT", [1, 0, 0], [0, 0.9998477, 0.0174524], origin=(0, 0, 7.5),
                     names=["m3.dcm"], series_uid=uid)
        self.refused(self.path("mixed"), "orientations")
        uid = write_series(self.path("sizes"), self.ct_pixels[:3], "CT", [1, 0, 0], [0, 1, 0], names=["s0.dcm", "s1.dcm", "s2.dcm"])
        write_series(self.path("sizes"), self.ct_pixels[:1, :20], "CT", [1, 0, 0], [0, 1, 0], origin=(0, 0, 7.5),
                     names=["s3.dcm"], series_uid=uid)
        self.refused(self.path("sizes"), "sizes")

    def test_symbolic_link_out_of_the_folder_refused(self):
        write_series(self.path("linked"), self.mr_pixels[:2], "MR", [1, 0, 0], [0, 1, 0], names=["l0.dcm", "l1.dcm"])
        os.symlink(os.path.join(self.path("mr"), sorted(os.listdir(self.path("mr")))[0]), os.path.join(self.path("linked"), "l2.dcm"))
        self.refused(self.path("linked"), "symbolic link")

    def recoded(self, source, name, transfer_syntax, compress):
        """A copy of the series in `source` with its pixel data RLE-compressed (pydicom's encoder)
        or its transfer syntax relabelled."""
        shutil.copytree(source, self.path(name))
        for file in os.listdir(self.path(name)):
            ds = pydicom.dcmread(os.path.join(self.path(name), file))
            if compress:
                ds.compress(transfer_syntax)
            else:
                ds.file_meta.TransferSyntaxUID = transfer_syntax
            ds.save_as(os.path.join(self.path(name), file))
        return self.path(name)

    def test_rle_compressed_read_as_dcm2niix_reads_it(self):
        folder = self.recoded(self.path("mr"), "mr_rle", pydicom.uid.RLELossless, True)
        (expected,) = self.dcm2niix(folder).values()
        self.assert_same_voxels(self.gridwarp_nifti(folder, "mr_rle"), expected)

    def test_implicit_vr_read_as_dcm2niix_reads_it(self):
        """Implicit VR Little Endian (the default transfer syntax, as older scanners write it), re-encoded
        by pydicom: the element walk takes its lengths and binary values without VRs."""
        folder = self.path("mr_implicit")
        shutil.copytree(self.path("mr"), folder)
        for name in os.listdir(folder):
            ds = pydicom.dcmread(os.path.join(folder, name))
            ds.file_meta.TransferSyntaxUID = pydicom.uid.ImplicitVRLittleEndian
            ds.is_implicit_VR, ds.is_little_endian = True, True
            ds.save_as(os.path.join(folder, name), write_like_original=False)
        (expected,) = self.dcm2niix(folder).values()
        self.assert_same_voxels(self.gridwarp_nifti(folder, "mr_implicit"), expected)

    def test_undecodable_transfer_syntax_refused_by_name(self):
        rle = self.path("mr_rle")
        if not os.path.isdir(rle):
            self.recoded(self.path("mr"), "mr_rle", pydicom.uid.RLELossless, True)
        # Encapsulated (RLE) pixel data labelled MPEG-2, which GDCM does not decode.
        folder = self.recoded(rle, "mr_mpeg2", "1.2.840.10008.1.2.4.100", False)
        result = run("resample", "-i", folder, "-o", self.path("mr_mpeg2.nii"), "-q")
        self.assertNotEqual(result.returncode, 0)
        self.assertLess(result.returncode, 128, result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn("MPEG2", result.stderr)
        self.assertFalse(os.path.exists(self.path("mr_mpeg2.nii")))

    def test_info_lists_the_series_of_a_folder(self):
        result = run("info", self.path("two"), "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        listing = json.loads(result.stdout)
        self.assertEqual(listing["kind"], "dicom folder")
        by_uid = {series["uid"]: series for series in listing["series"]}
        self.assertEqual(set(by_uid), {self.both_ct, self.both_mr})
        self.assertEqual(by_uid[self.both_ct]["description"], "first")
        self.assertEqual(by_uid[self.both_ct]["size"], [20, 24, 5])
        self.assertEqual(by_uid[self.both_mr]["size"], [22, 16, 7])
        self.assertEqual(by_uid[self.both_mr]["orientation"], "LPS")
        self.assertIn("oblique", by_uid[self.both_ct]["orientation"])
        # A folder of one series is described as the volume it is.
        result = run("info", self.path("mr"), "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout)["size"], [22, 16, 7])

    def test_repetition_time_carried_as_dcm2niix_writes_it(self):
        (expected,) = self.dcm2niix(self.path("mr")).values()
        ours = self.gridwarp_nifti(self.path("mr"), "mr_tr")
        self.assertAlmostEqual(float(expected.header["pixdim"][4]), 2.0)  # RepetitionTime 2000 ms
        self.assertAlmostEqual(float(ours.header["pixdim"][4]), float(expected.header["pixdim"][4]), places=6)
        self.assertEqual(ours.header.get_xyzt_units()[1], "sec")
        out = self.path("mr_tr.mgz")
        result = run("resample", "-i", self.path("mr"), "-o", out, "--output-type", "int32", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(float(nib.load(out).header["tr"]), 2000.0)

    def test_one_slice_takes_its_thickness_as_dcm2niix_does(self):
        write_series(self.path("single"), self.mr_pixels[:1], "MR", [1, 0, 0], [0, 1, 0], slice_spacing=2.5)
        (expected,) = self.dcm2niix(self.path("single")).values()
        ours = self.gridwarp_nifti(self.path("single"), "single")
        self.assertAlmostEqual(sorted(expected.header.get_zooms())[-1], 5.0, places=5)  # SliceThickness
        self.assert_same_voxels(ours, expected)

    def test_twelve_bit_signed_values_sign_extended(self):
        """BitsStored 12 of 16, signed: the value is the low 12 bits' two's complement whatever the
        high bits hold (DICOM PS3.5 8.1.1), so the expectation is the values the pixels were made
        from. No peer at hand is a reference: dcm2niix 1.0.20220720 and Debian's pydicom 2.3 read
        such pixels as unsigned."""
        signed = values((3, 10, 12), np.int16, -2048, 2048, 5)
        stored = (signed.astype(np.int32) & 0x0FFF).astype(np.uint16).view(np.int16)  # high bits zero
        write_series(self.path("twelve"), stored, "CT", [1, 0, 0], [0, 1, 0], names=["t%d.dcm" % k for k in range(3)])
        for name in os.listdir(self.path("twelve")):
            ds = pydicom.dcmread(os.path.join(self.path("twelve"), name))
            ds.BitsStored, ds.HighBit = 12, 11
            ds.save_as(os.path.join(self.path("twelve"), name))
        ours = self.gridwarp_nifti(self.path("twelve"), "twelve")
        self.assertEqual(ours.get_fdata().min(), float(signed.min()))
        self.assertEqual(ours.get_fdata().max(), float(signed.max()))
        self.assertEqual(sorted(np.asarray(ours.dataobj).ravel().tolist()), sorted(signed.ravel().tolist()))

    def test_monochrome1_values_as_stored_as_dcm2niix_keeps_them(self):
        write_series(self.path("mono1"), self.mr_pixels[:3] // 16, "MR", [1, 0, 0], [0, 1, 0], names=["p%d.dcm" % k for k in range(3)])
        for name in os.listdir(self.path("mono1")):
            ds = pydicom.dcmread(os.path.join(self.path("mono1"), name))
            ds.PhotometricInterpretation = "MONOCHROME1"
            ds.save_as(os.path.join(self.path("mono1"), name))
        (expected,) = self.dcm2niix(self.path("mono1")).values()
        self.assert_same_voxels(self.gridwarp_nifti(self.path("mono1"), "mono1"), expected)

    def test_unknown_uid_lists_the_series(self):
        result = run("resample", "-i", self.path("two") + ",series=1.2.3", "-o", self.path("none.nii"), "-q")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(self.both_mr, result.stderr)


if __name__ == "__main__":
    main()
