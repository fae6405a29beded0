"""Files nobody named are never read, special files never block, and names at the file system's
limit still write (issue 57).

    /usr/bin/python3 tests/reliability/test_untrusted_files.py --gridwarp build/app/gridwarp

Each refusal must exit 1 with one line "gridwarp: error: ..." naming the file, print nothing of any
other file's content, and write nothing.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import gridwarp, main, run  # noqa: E402

SECRET = "gridwarp-secret-first-line"


class Untrusted(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="gridwarp-untrusted-")
        # A 4-D series of 3 volumes, and a secret outside the transform folders.
        series = np.arange(6 * 5 * 4 * 3, dtype=np.float32).reshape(6, 5, 4, 3)
        nib.Nifti1Image(series, np.eye(4)).to_filename(self.path("series.nii"))
        with open(self.path("secret.txt"), "w") as f:
            f.write(SECRET + "\n1 0 0 0\n")

    def tearDown(self):
        shutil.rmtree(self.folder)

    def path(self, *names):
        return os.path.join(self.folder, *names)

    def assert_refused(self, result, names, out):
        lines = result.stderr.strip().splitlines()
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("gridwarp: error: "), lines[0])
        self.assertTrue(any(name in lines[0] for name in names), lines[0])
        self.assertNotIn(SECRET, result.stderr + result.stdout)
        self.assertFalse(os.path.exists(out))
        self.assertEqual([n for n in os.listdir(os.path.dirname(out)) if n.startswith(".gridwarp-")], [])

    def test_per_volume_fifo_is_refused_at_once(self):
        fifo = self.path("motion.fifo")
        os.mkfifo(fifo)
        for spec in (fifo + ",per-volume", fifo):
            with self.subTest(spec=spec):
                out = self.path("out.nii")
                self.assert_refused(run("resample", "-i", self.path("series.nii"), "-t", spec, "-o", out, timeout=20),
                                    ["motion.fifo"], out)

    def test_per_volume_folder_member_leading_out(self):
        folder = self.path("motion")
        os.mkdir(folder)
        identity = "1 0 0 0\n0 1 0 0\n0 0 1 0\n0 0 0 1\n"
        for i in (0, 2):
            with open(os.path.join(folder, "MAT_%04d" % i), "w") as f:
                f.write(identity)
        os.symlink(self.path("secret.txt"), os.path.join(folder, "MAT_0001"))
        out = self.path("out.nii")
        self.assert_refused(run("resample", "-i", self.path("series.nii"), "-t", folder + ",lps,per-volume", "-o", out),
                            ["motion"], out)
        # A link inside the folder is a member like any other.
        os.remove(os.path.join(folder, "MAT_0001"))
        os.symlink("MAT_0000", os.path.join(folder, "MAT_0001"))
        result = run("resample", "-i", self.path("series.nii"), "-t", folder + ",lps,per-volume", "-o", out)
        self.assertEqual(result.returncode, 0, result.stderr)
        np.testing.assert_array_equal(np.asanyarray(nib.load(out).dataobj), np.asanyarray(nib.load(self.path("series.nii")).dataobj))
        # A FIFO among the members is refused before any member is read.
        os.mkfifo(os.path.join(folder, "MAT_0003"))
        os.remove(out)
        self.assert_refused(run("resample", "-i", self.path("series.nii"), "-t", folder + ",lps,per-volume", "-o", out, timeout=20),
                            ["motion"], out)

    def test_output_name_of_255_bytes(self):
        # The longest name the file system takes: the staging name must fit as well.
        for suffix in (".nii", ".nii.gz", ".npy"):
            with self.subTest(suffix=suffix):
                name = "n" * (255 - len(suffix)) + suffix
                source = self.path("series.nii")
                if suffix == ".npy":
                    np.save(self.path("in.npy"), np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
                    source = self.path("in.npy")
                result = run("affine", "-i", source, "-o", self.path(name), "--scale", "1")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertTrue(os.path.exists(self.path(name)))
                self.assertEqual([n for n in os.listdir(self.folder) if n.startswith(".gridwarp-")], [])


class Hdf5InItsOwnProcess(unittest.TestCase):
    """ITK .h5 transforms are parsed by gridwarp-hdf5-reader: what HDF5 does there never reaches
    gridwarp's process, and what the file's structure would bring from elsewhere is refused."""

    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="gridwarp-h5-")
        nib.Nifti1Image(np.arange(8 * 7 * 6, dtype=np.float32).reshape(8, 7, 6), np.eye(4)).to_filename(self.path("in.nii"))
        with open(self.path("secret.bin"), "wb") as f:
            f.write(np.array([2.0, 0, 0, 0, 2.0, 0, 0, 0, 2.0, 5, 5, 5]).tobytes())

    def tearDown(self):
        shutil.rmtree(self.folder)

    def path(self, *names):
        return os.path.join(self.folder, *names)

    def write(self, name, parameters):
        with h5py.File(self.path(name), "w") as f:
            group = f.create_group("TransformGroup").create_group("0")
            group.create_dataset("TransformType", data=np.array([b"AffineTransform_double_3_3"], dtype=h5py.string_dtype("ascii")))
            group.create_dataset("TransformFixedParameters", data=np.zeros(3))
            parameters(group)
        return self.path(name)

    def test_a_valid_file_reads_as_its_text_twin(self):
        values = np.array([1, 0, 0, 0, 1, 0, 0, 0, 1, 1.5, -2, 0.5])
        h5 = self.write("shift.h5", lambda g: g.create_dataset("TransformParameters", data=values))
        with open(self.path("shift.tfm"), "w") as f:
            f.write("#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n"
                    "Parameters: " + " ".join(map(str, values)) + "\nFixedParameters: 0 0 0\n")
        outputs = []
        for transform in (h5, self.path("shift.tfm")):
            out = self.path(os.path.basename(transform) + ".nii")
            result = run("resample", "-i", self.path("in.nii"), "-t", transform, "-o", out)
            self.assertEqual(result.returncode, 0, result.stderr)
            outputs.append(np.asanyarray(nib.load(out).dataobj))
        np.testing.assert_array_equal(outputs[0], outputs[1])
        self.assertGreater(np.abs(outputs[0]).max(), 1)

    def test_external_storage_is_refused_everywhere(self):
        h5 = self.write("external.h5", lambda g: g.create_dataset("TransformParameters", shape=(12,), dtype="f8",
                                                                   external=[(self.path("secret.bin"), 0, 96)]))
        out = self.path("out.nii")
        for argv in (["info", "--json", h5], ["resample", "-i", self.path("in.nii"), "-t", h5, "-o", out],
                     ["convert-transform", "-t", h5, "-o", self.path("out.tfm")]):
            with self.subTest(command=argv[0]):
                result = run(*argv)
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertIn("external files", result.stderr)
                self.assertNotIn("5.0", result.stdout)
                self.assertFalse(os.path.exists(out) or os.path.exists(self.path("out.tfm")))

    def test_the_reader_crashing_is_one_error_line(self):
        # A reader that dies by a signal: gridwarp reports it and lives on.
        crash = self.path("crash")
        os.mkdir(crash)
        with open(os.path.join(crash, "gridwarp-hdf5-reader"), "w") as f:
            f.write("#!/bin/sh\nkill -SEGV $$\n")
        os.chmod(os.path.join(crash, "gridwarp-hdf5-reader"), 0o755)
        h5 = self.write("valid.h5", lambda g: g.create_dataset("TransformParameters", data=np.eye(4)[:3].T.ravel()))
        out = self.path("out.nii")
        result = subprocess.run([gridwarp(), "resample", "-i", self.path("in.nii"), "-t", h5, "-o", out], capture_output=True,
                                text=True, timeout=60, env=dict(os.environ, GRIDWARP_MODULE_DIR=crash))
        self.assertEqual(result.returncode, 1, result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn("valid.h5: HDF5 crashed on it (Segmentation fault)", lines[0])
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    main()
