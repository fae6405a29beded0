#!/usr/bin/python3
"""MRtrix3 images (.mif, .mif.gz, .mih) against MRtrix3 itself: NIfTI volumes made with nibabel
(oblique, anisotropic, int16 and float32, 4-D) are converted by mrconvert into every stride layout,
both byte orders, with scaling and as each form of file; gridwarp must read each to the values and
world positions of mrconvert's own NIfTI conversion of that file (and of the source), and what
gridwarp writes must convert back in mrconvert to the source. Broken and hostile headers are refused
in one line with nothing written.

    /usr/bin/python3 tests/cli/test_mif.py --gridwarp build/app/gridwarp
"""
import gzip
import os
import shutil
import subprocess
import sys
import unittest

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, gridwarp, main, rotation, run  # noqa: E402

HAVE_MRTRIX = shutil.which("mrconvert") is not None and shutil.which("mrinfo") is not None


def oblique_affine(zooms, origin):
    affine = np.eye(4)
    affine[:3, :3] = rotation(0.12, -0.08, 0.2) @ np.diag(zooms)
    affine[:3, 3] = origin
    return affine


def mrtrix(command, *args):
    """An MRtrix3 command; its stdout."""
    result = subprocess.run([command, *map(str, args), "-quiet"], capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"{command} {' '.join(map(str, args))}: {result.stderr}")
    return result.stdout


def mif_file(header_lines, data=b"", end=True, offset=None):
    """A .mif's bytes: the header lines, END, and the data at `offset` (the first multiple of 16
    past the header when not given)."""
    text = "mrtrix image\n" + "".join(line + "\n" for line in header_lines)
    if offset is None:
        offset = len(text) + 32
        offset += -offset % 16
    text += f"file: . {offset}\n" + ("END\n" if end else "")
    head = text.encode()
    return head + b"\0" * (offset - len(head)) + data


def header_field(path, key):
    """The value of a key in a .mif's header, as written (not as MRtrix3 reorders it on reading)."""
    with open(path, "rb") as f:
        head = f.read(1 << 16).split(b"\nEND\n")[0].decode("latin-1")
    return [line.split(":", 1)[1].strip() for line in head.splitlines() if line.startswith(key + ":")]


class Sources(FolderTestCase):
    """The source volumes, written by nibabel."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        rng = np.random.default_rng(61)
        cls.sources = {
            "int16": nib.Nifti1Image(rng.integers(-3000, 3000, (9, 8, 7)).astype(np.int16),
                                     oblique_affine((1.5, 2.0, 2.5), (-20, 31, -12))),
            "float32_4d": nib.Nifti1Image(rng.normal(0, 100, (7, 6, 5, 3)).astype(np.float32),
                                          oblique_affine((2.5, 1.25, 3.0), (40, -8, 17))),
        }
        for name, image in cls.sources.items():
            nib.save(image, cls.path(name + ".nii"))

    def to_nifti(self, source, name):
        """What gridwarp reads from `source`, written to NIfTI unchanged (an identity warp, nearest)."""
        out = self.path(name + ".gw.nii")
        result = run("affine", "-i", source, "-o", out, "--scale", "1", "--mode", "nearest", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        return out

    def assert_same_volume(self, got, expected, atol=1e-4):
        """The two NIfTI files hold the same values at the same world positions (compared on
        their axes nearest RAS, so that any stride order of the files compares)."""
        got, expected = nib.as_closest_canonical(nib.load(got)), nib.as_closest_canonical(nib.load(expected))
        self.assertEqual(got.shape, expected.shape)
        np.testing.assert_allclose(got.affine, expected.affine, rtol=0, atol=atol)
        np.testing.assert_array_equal(got.get_fdata(), expected.get_fdata())


@unittest.skipUnless(HAVE_MRTRIX, "MRtrix3 (mrconvert, mrinfo) is not installed")
class ReadsWhatMrconvertWrites(Sources):
    def check_read(self, source, name, *mrconvert_options):
        converted = self.path(name)
        mrtrix("mrconvert", self.path(source + ".nii"), converted, *mrconvert_options, "-force")
        peer = self.path(name + ".mr.nii")
        mrtrix("mrconvert", converted, peer, "-force")
        ours = self.to_nifti(converted, name)
        self.assert_same_volume(ours, peer)
        self.assert_same_volume(ours, self.path(source + ".nii"))

    def test_every_stride_layout(self):
        layouts = {
            "int16": ["1,2,3", "-1,3,2", "3,2,1", "-3,-2,1"],
            # Volumes slowest, fastest (the channels interleaved, read in place) and between.
            "float32_4d": ["1,2,3,4", "-1,3,2,4", "3,2,1,4", "2,3,4,1", "-2,4,3,1", "1,3,4,2"],
        }
        for source, strides in layouts.items():
            for spec in strides:
                with self.subTest(source=source, strides=spec):
                    self.check_read(source, f"{source}_{spec.replace(',', '_')}.mif", "-strides", spec)

    def test_compressed_and_detached_headers(self):
        for source in self.sources:
            for form in (".mif.gz", ".mih"):
                with self.subTest(source=source, form=form):
                    self.check_read(source, source + "_strided" + form, "-strides", "-1,3,2" + (",4" if "4d" in source else ""))

    def test_a_mih_written_by_mrconvert_has_no_end_line(self):
        mrtrix("mrconvert", self.path("int16.nii"), self.path("noend.mih"), "-force")
        with open(self.path("noend.mih")) as f:
            self.assertNotIn("END", f.read())
        self.assert_same_volume(self.to_nifti(self.path("noend.mih"), "noend"), self.path("int16.nii"))

    def test_an_uncompressed_mif_gz_reads_as_mrtrix3_reads_it(self):
        mrtrix("mrconvert", self.path("float32_4d.nii"), self.path("plain.mif"), "-strides", "3,2,1,4", "-force")
        shutil.copy(self.path("plain.mif"), self.path("plain.mif.gz"))
        peer = self.path("plain.mif.gz.mr.nii")
        mrtrix("mrconvert", self.path("plain.mif.gz"), peer, "-force")
        self.assert_same_volume(self.to_nifti(self.path("plain.mif.gz"), "plain_gz"), peer)

    def test_big_endian_files(self):
        for source, datatype in (("int16", "int16be"), ("float32_4d", "float32be"), ("int16", "uint16be"), ("float32_4d", "float64be")):
            for form in (".mif", ".mif.gz"):
                with self.subTest(datatype=datatype, form=form):
                    name = f"{source}_{datatype}{form}"
                    converted = self.path(name)
                    mrtrix("mrconvert", self.path(source + ".nii"), converted, "-datatype", datatype, "-strides",
                           "3,2,1" + (",4" if "4d" in source else ""), "-force")
                    self.assertTrue(mrtrix("mrinfo", converted, "-datatype").strip().endswith("BE"))
                    peer = self.path(name + ".mr.nii")
                    mrtrix("mrconvert", converted, peer, "-force")
                    self.assert_same_volume(self.to_nifti(converted, name), peer)

    def test_scaled_values(self):
        for form in (".mif", ".mif.gz", ".mih"):
            with self.subTest(form=form):
                name = "scaled" + form
                converted = self.path(name)
                mrtrix("mrconvert", self.path("int16.nii"), converted, "-datatype", "int16be", "-scaling", "10,0.5", "-force")
                self.assertEqual(mrtrix("mrinfo", converted, "-multiplier").split(), ["0.5"])
                peer = self.path(name + ".mr.nii")
                mrtrix("mrconvert", converted, peer, "-force")
                ours = self.to_nifti(converted, name)
                self.assert_same_volume(ours, peer)
                info = run("info", converted, "--json")
                self.assertIn('"stored_dtype":"int16"', info.stdout)

    def test_headers_written_by_hand_read_as_mrtrix3_reads_them(self):
        # No transform (MRtrix3 centres the grid), a transform whose columns are not unit vectors
        # (MRtrix3 moves their length into the voxel sizes), comments, unknown keys, no END.
        values = np.arange(4 * 3 * 2, dtype=np.float32)
        cases = {
            "no_transform": ["dim: 4,3,2", "vox: 1.5,2,3", "layout: +0,+1,+2", "datatype: Float32LE"],
            "long_columns": ["dim: 4,3,2", "vox: 1,1,1", "layout: +0,+1,+2", "datatype: float32le  # any case",
                             "transform: 0,  2, 0, 5", "transform: -1.5, 0, 0, 7", "transform: 0, 0, 3, -2",
                             "my_key: kept: with a colon", "  comments: a comment line"],
        }
        for name, lines in cases.items():
            with self.subTest(header=name):
                source = self.path(name + ".mif")
                with open(source, "wb") as f:
                    f.write(mif_file(lines, values.tobytes()))
                peer = self.path(name + ".mr.nii")
                mrtrix("mrconvert", source, peer, "-force")
                self.assert_same_volume(self.to_nifti(source, name), peer)


@unittest.skipUnless(HAVE_MRTRIX, "MRtrix3 (mrconvert, mrinfo) is not installed")
class WritesWhatMrconvertReads(Sources):
    def write(self, source, out, *options):
        result = run("affine", "-i", source, "-o", out, "--scale", "1", "--mode", "nearest", "-q", *options)
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_mif_forms_convert_back_to_the_source(self):
        for source in self.sources:
            for form in (".mif", ".mif.gz", ".mih"):
                with self.subTest(source=source, form=form):
                    out = self.path(source + "_written" + form)
                    self.write(self.path(source + ".nii"), out)
                    peer = self.path(source + "_written" + form + ".mr.nii")
                    mrtrix("mrconvert", out, peer, "-force")
                    expected, got = nib.load(self.path(source + ".nii")), nib.load(peer)
                    np.testing.assert_allclose(got.affine, expected.affine, rtol=0, atol=1e-4)
                    np.testing.assert_array_equal(np.asanyarray(got.dataobj), np.asanyarray(expected.dataobj))
                    self.assertEqual(got.get_data_dtype().newbyteorder("="), expected.get_data_dtype().newbyteorder("="))
                    if form == ".mih":
                        self.assertTrue(os.path.isfile(self.path(source + "_written.dat")))
                    if form == ".mif":
                        with open(out, "rb") as f:
                            head = f.read(4096)
                        offset = int(head.split(b"file: . ")[1].split(b"\n")[0])
                        self.assertEqual(offset % 16, 0)

    def test_interleaved_channels_are_written_as_they_lie(self):
        # A colour photo's channels (OpenCV's order, B, G, R) are interleaved: volumes fastest.
        from PIL import Image as PILImage
        rgb = np.random.default_rng(7).integers(0, 256, (5, 6, 3)).astype(np.uint8)
        PILImage.fromarray(rgb).save(self.path("photo.png"))
        out = self.path("photo.mif")
        self.write(self.path("photo.png"), out)
        self.assertEqual(header_field(out, "layout"), ["+1,+2,+3,+0"])
        self.assertEqual(mrtrix("mrinfo", out, "-size").split(), ["6", "5", "1", "3"])
        # gridwarp places a photo's pixel (i, j) at LPS (i, j): RAS (-i, -j).
        expected = self.path("photo_expected.nii")
        nib.save(nib.Nifti1Image(rgb.transpose(1, 0, 2)[:, :, None, ::-1], np.diag([-1.0, -1, 1, 1])), expected)
        peer = self.path("photo.mr.nii")
        mrtrix("mrconvert", out, peer, "-force")
        self.assert_same_volume(peer, expected)

    def test_volumes_fastest_read_and_written_back(self):
        source = self.path("volumes_fastest.mif")
        mrtrix("mrconvert", self.path("float32_4d.nii"), source, "-strides", "2,3,4,1", "-force")
        out = self.path("volumes_fastest_out.mif")
        self.write(source, out)
        self.assertEqual(header_field(out, "layout"), ["+0,+1,+2,+3"])
        peer = self.path("volumes_fastest_out.mr.nii")
        mrtrix("mrconvert", out, peer, "-force")
        self.assert_same_volume(peer, self.path("float32_4d.nii"))

    def test_scaled_integers_keep_their_scaling(self):
        image = nib.Nifti1Image(self.sources["int16"].get_fdata().astype(np.int16), self.sources["int16"].affine)
        image.header.set_slope_inter(0.25, -7)
        nib.save(image, self.path("scaled_source.nii"))
        expected = nib.load(self.path("scaled_source.nii")).get_fdata()

        def check_scaled(written):
            self.assertEqual(mrtrix("mrinfo", written, "-datatype").split(), ["Int16LE"])
            self.assertEqual(mrtrix("mrinfo", written, "-multiplier").split(), ["0.25"])
            self.assertEqual(mrtrix("mrinfo", written, "-offset").split(), ["-7"])
            peer = written + ".mr.nii"
            mrtrix("mrconvert", written, peer, "-force")
            np.testing.assert_array_equal(nib.load(peer).get_fdata(), expected)

        for form in (".mif", ".mif.gz"):
            with self.subTest(form=form):
                out = self.path("scaled_out" + form)
                self.write(self.path("scaled_source.nii"), out)
                check_scaled(out)
                # resample without a transform copies the stored values with their scaling
                copied = self.path("scaled_copy" + form)
                result = run("resample", "-i", out, "-o", copied, "-q")
                self.assertEqual(result.returncode, 0, result.stderr)
                check_scaled(copied)

    def test_key_values_are_kept_where_they_hold(self):
        source = self.path("with_keys.mif")
        mrtrix("mrconvert", self.path("int16.nii"), source, "-strides", "-1,3,2", "-set_property", "my_key", "my value",
               "-set_property", "PhaseEncodingDirection", "j-", "-force")
        history = mrtrix("mrinfo", source, "-property", "command_history").strip()
        same_grid = self.path("with_keys_same.mif")
        self.write(source, same_grid)
        for key, value in (("my_key", "my value"), ("PhaseEncodingDirection", "j-"), ("command_history", history),
                           ("mrtrix_version", mrtrix("mrinfo", source, "-property", "mrtrix_version").strip())):
            self.assertEqual(mrtrix("mrinfo", same_grid, "-property", key).strip(), value, key)
        # On another grid the phase-encoding axis no longer describes the voxels.
        other_grid = self.path("with_keys_3mm.mif.gz")
        result = run("resize", "-i", source, "-o", other_grid, "--voxel-size", "3", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(mrtrix("mrinfo", other_grid, "-property", "my_key").strip(), "my value")
        self.assertEqual(mrtrix("mrinfo", other_grid, "-property", "PhaseEncodingDirection").strip(), "")

    def test_resample_onto_a_mif_reference(self):
        # The reference grid and the moving image both MRtrix3 files, the output NIfTI.
        reference = self.path("reference.mif")
        mrtrix("mrconvert", self.path("int16.nii"), reference, "-strides", "3,-2,1", "-force")
        out = self.path("resampled.nii")
        result = run("resample", "-i", self.path("float32_4d.nii"), "-r", reference, "-o", out, "--mode", "nearest", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        peer = self.path("reference.mr.nii")
        mrtrix("mrconvert", reference, peer, "-force")
        got, expected = nib.as_closest_canonical(nib.load(out)), nib.as_closest_canonical(nib.load(peer))
        np.testing.assert_allclose(got.affine, expected.affine, rtol=0, atol=1e-4)
        self.assertEqual(got.shape[:3], expected.shape)

    def test_python_read_and_write(self):
        package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(gridwarp()))), "python")
        sys.path.insert(0, package)
        try:
            import gridwarp as module
        except ImportError:
            self.skipTest("the Python package is not built in " + package)
        finally:
            sys.path.remove(package)
        if not hasattr(module, "read"):
            self.skipTest("the Python package was built without the io library")
        source = self.path("python_in.mif.gz")
        mrtrix("mrconvert", self.path("float32_4d.nii"), source, "-strides", "-1,3,2,4", "-force")
        image = module.read(source)
        self.assertEqual((image.kind, image.format), ("volume", "mif"))
        out = self.path("python_out.mif")
        module.write(image.with_array(image.array * 2), out)
        peer = self.path("python_out.mr.nii")
        mrtrix("mrconvert", out, peer, "-force")
        doubled = self.path("doubled.nii")
        nib.save(nib.Nifti1Image(self.sources["float32_4d"].get_fdata().astype(np.float32) * 2, self.sources["float32_4d"].affine), doubled)
        self.assert_same_volume(peer, doubled)


class RefusesBrokenFiles(Sources):
    VALID = ["dim: 4,3,2", "vox: 1,1,1", "layout: +0,+1,+2", "datatype: Int16LE", "transform: 1,0,0,0", "transform: 0,1,0,0",
             "transform: 0,0,1,0"]
    DATA = np.arange(24, dtype=np.int16).tobytes()

    def with_fields(self, **values):
        return [line for line in self.VALID if line.split(":")[0] not in values] + [f"{key}: {value}" for key, value in values.items()]

    def check_refused(self, name, contents, said, extra=None):
        source = self.path(name)
        if contents is not None:
            with open(source, "wb") as f:
                f.write(contents)
        extra = extra or []
        for command in (["info", source, *extra], ["affine", "-i", source, "-o", self.path("refused.nii"), "--scale", "1", *extra]):
            result = run(*command)
            self.assertNotEqual(result.returncode, 0, (name, command))
            lines = result.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, result.stderr)
            self.assertIn(source, lines[0])
            self.assertIn(said, lines[0])
            self.assertFalse(os.path.exists(self.path("refused.nii")))

    def test_the_valid_file_reads(self):
        with open(self.path("valid.mif"), "wb") as f:
            f.write(mif_file(self.VALID, self.DATA))
        out = self.to_nifti(self.path("valid.mif"), "valid")
        np.testing.assert_array_equal(np.asanyarray(nib.load(out).dataobj), np.arange(24, dtype=np.int16).reshape(2, 3, 4).T)

    def test_refusals(self):
        valid = mif_file(self.VALID, self.DATA)
        os.makedirs(self.path("a_folder"), exist_ok=True)
        os.makedirs(self.path("elsewhere"), exist_ok=True)
        with open(self.path("elsewhere/data.dat"), "wb") as f:
            f.write(self.DATA)
        detached = "mrtrix image\n" + "\n".join(self.VALID) + "\n"
        cases = [
            ("truncated.mif", valid[:-10], "truncated"),
            ("truncated.mif.gz", gzip.compress(valid)[:-30], ""),
            ("cut_header.mif.gz", gzip.compress(valid)[:60], ""),
            ("absurd_dim.mif", mif_file(self.with_fields(dim="100000,100000,100000"), self.DATA), "truncated"),
            ("overflowing_dim.mif",
             mif_file(self.with_fields(dim="4294967296,4294967296,4294967296,4294967296", layout="+0,+1,+2,+3"), self.DATA),
             "more voxels than any machine holds"),
            ("absurd_dim.mif.gz", gzip.compress(mif_file(self.with_fields(dim="4000,4000,4000"), self.DATA)),
             "compressed bytes can hold"),
            ("unknown_datatype.mif", mif_file(self.with_fields(datatype="Float16LE"), self.DATA), "is not an MRtrix3 type"),
            ("complex.mif", mif_file(self.with_fields(datatype="CFloat32LE"), self.DATA), "complex voxels are not supported"),
            ("bit.mif", mif_file(self.with_fields(datatype="Bit"), self.DATA), "1-bit voxels are not supported"),
            ("bad_layout.mif", mif_file(self.with_fields(layout="+0,+0,+2"), self.DATA), "its own rank"),
            ("bad_vox.mif", mif_file(self.with_fields(vox="1,nan,1"), self.DATA), "voxel size"),
            ("bad_transform.mif", mif_file(self.VALID[:-1] + ["transform: 0,0,1,inf"], self.DATA), "finite"),
            ("singular.mif", mif_file(self.VALID[:-1] + ["transform: 1,0,0,0"], self.DATA), "singular"),
            ("zero_scaling.mif", mif_file(self.VALID + ["scaling: 0,0"], self.DATA), "non-zero multiplier"),
            ("no_end.mif", mif_file(self.VALID, self.DATA, end=False), "no END line"),
            ("inside_header.mif", mif_file(self.VALID, self.DATA, offset=16), "inside the header"),
            ("not_mrtrix.mif", b"NIFTI-ish bytes\n" + self.DATA, "does not start with 'mrtrix image'"),
            ("no_dim.mif", mif_file(self.VALID[1:], self.DATA), "no 'dim' line"),
            ("directory.mih", (detached + "file: a_folder\n").encode(), "is not a regular file"),
            ("outside.mih", (detached + "file: elsewhere/../../" + os.path.basename(self.folder) + "_x/data.dat\n").encode(), "outside"),
            ("missing.mih", (detached + "file: nothing_here.dat\n").encode(), "does not exist"),
            ("numbered.mih", (detached + "file: data-[].dat\n").encode(), "numbered data files"),
            ("gz_names_a_file.mif.gz", gzip.compress((detached + "file: data.dat\nEND\n").encode()), "holds its voxels itself"),
        ]
        for name, contents, said in cases:
            with self.subTest(case=name):
                self.check_refused(name, contents, said)

    def test_data_files_in_another_folder_need_the_option(self):
        os.makedirs(self.path("elsewhere"), exist_ok=True)
        with open(self.path("elsewhere/data.dat"), "wb") as f:
            f.write(self.DATA)
        source = self.path("elsewhere_ok.mih")
        with open(source, "w") as f:
            f.write("mrtrix image\n" + "\n".join(self.VALID) + "\nfile: " + self.path("elsewhere/data.dat") + "\n")
        # Inside the header's folder (below it): read.
        result = run("info", source)
        self.assertEqual(result.returncode, 0, result.stderr)
        outside = os.path.join(os.path.dirname(self.folder), os.path.basename(self.folder) + "_outside")
        os.makedirs(outside, exist_ok=True)
        try:
            with open(os.path.join(outside, "data.dat"), "wb") as f:
                f.write(self.DATA)
            with open(source, "w") as f:
                f.write("mrtrix image\n" + "\n".join(self.VALID) + "\nfile: " + os.path.join(outside, "data.dat") + "\n")
            self.check_refused("elsewhere_ok.mih", None, "lies outside the header's folder")
            result = run("info", source, "--allow-outside-data-files")
            self.assertEqual(result.returncode, 0, result.stderr)
        finally:
            shutil.rmtree(outside)

    def test_compressed_voxels_stay_within_the_memory_budget(self):
        values = np.zeros((64, 64, 64), np.float32).tobytes()
        source = self.path("budget.mif.gz")
        with open(source, "wb") as f:
            f.write(gzip.compress(mif_file(self.with_fields(dim="64,64,64", datatype="Float32LE"), values)))
        self.check_refused("budget.mif.gz", None, "--max-memory", extra=["--max-memory", "100000"])


if __name__ == "__main__":
    main()
