#!/usr/bin/python3
"""Outputs against inputs by the identity of the file, not its spelling (issue 32), and names with
control characters in errors.

    /usr/bin/python3 tests/reliability/test_output_identity.py --gridwarp build/app/gridwarp

Every refusal must exit 1 (2 for a batch that cannot start) with one line starting
"gridwarp: error:", leave every input byte for byte as it was, and write nothing. Pairs are made by
nibabel, not by gridwarp.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import nibabel as nib
import numpy as np

GRIDWARP = None


def run(*args, cwd=None):
    return subprocess.run([GRIDWARP, *map(str, args)], capture_output=True, timeout=120, cwd=cwd)


def snapshot(folder):
    """Every file under `folder` with its bytes (links as their targets, folders as markers)."""
    found = {}
    for base, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(base, name)
            key = os.path.relpath(path, folder)
            if os.path.islink(path):
                found[key] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                found[key] = ("folder",)
            else:
                with open(path, "rb") as f:
                    found[key] = f.read()
    return found


class Folder(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="gridwarp-identity-")
        volume = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
        nib.Nifti1Pair(volume, np.eye(4)).to_filename(self.path("p.img"))  # p.hdr + p.img
        nib.Nifti1Image(volume + 1, np.eye(4)).to_filename(self.path("other.nii"))
        np.save(self.path("in.npy"), np.arange(64, dtype=np.float32).reshape(1, 1, 8, 8))
        with open(self.path("theta.txt"), "w") as f:
            f.write("1 0 0\n0 1 0\n")

    def tearDown(self):
        shutil.rmtree(self.folder)

    def path(self, *names):
        return os.path.join(self.folder, *names)

    def assert_refused(self, args, names, status=1, cwd=None):
        before = snapshot(self.folder)
        result = run(*args, cwd=cwd)
        stderr = result.stderr.decode("utf-8", "replace")
        self.assertEqual(result.returncode, status, stderr)
        lines = stderr.splitlines()
        self.assertEqual(len(lines), 1, stderr)
        self.assertTrue(lines[0].startswith("gridwarp: error:"), lines[0])
        for name in names:
            self.assertIn(name, lines[0])
        self.assertEqual(snapshot(self.folder), before, "an input changed or something was written")
        return lines[0]


class OutputsAgainstInputs(Folder):
    def test_either_half_of_an_input_pair(self):
        for given, output in [("p.hdr", "p.img"), ("p.img", "p.hdr"), ("p.hdr", "p.hdr"), ("p.img", "p.img")]:
            with self.subTest(given=given, output=output):
                self.assert_refused(["affine", "-i", self.path(given), "-o", self.path(output), "--scale", "1"], [output])

    def test_a_reference_pair(self):
        for output in ("p.img", "p.hdr"):
            with self.subTest(output=output):
                self.assert_refused(["resample", "-i", self.path("other.nii"), "-r", self.path("p.hdr"), "-o", self.path(output)],
                                    [output, "p.hdr"])

    def test_other_spellings(self):
        os.mkdir(self.path("sub"))
        self.assert_refused(["affine", "-i", "p.hdr", "-o", "./sub/../p.img", "--scale", "1"], ["p.img"], cwd=self.folder)
        # A hard link to the input's data file, named as the output's data half.
        os.link(self.path("p.img"), self.path("q.img"))
        self.assert_refused(["affine", "-i", self.path("p.hdr"), "-o", self.path("q.hdr"), "--scale", "1"], ["q.hdr", "q.img"])
        # A symbolic link to the input, and a folder reached through a symbolic link.
        os.symlink("in.npy", self.path("alias.npy"))
        self.assert_refused(["affine", "-i", self.path("in.npy"), "-o", self.path("alias.npy"), "--scale", "1"], ["alias.npy"])
        os.symlink(".", self.path("here"))
        self.assert_refused(["affine", "-i", self.path("p.img"), "-o", self.path("here", "p.hdr"), "--scale", "1"], ["p.hdr"])

    def test_other_inputs(self):
        os.link(self.path("theta.txt"), self.path("theta_link.txt"))
        self.assert_refused(["affine", "-i", self.path("in.npy"), "--matrix", self.path("theta.txt"), "-o",
                             self.path("theta_link.txt")], ["theta_link.txt"])
        self.assert_refused(["grid", "--theta", self.path("theta.txt"), "--size", "1,1,4,4", "-o", "./theta.txt"],
                            ["theta.txt"], cwd=self.folder)
        self.assert_refused(["resample", "-i", self.path("other.nii"), "-t", self.path("p.hdr"), "-o", self.path("p.img")],
                            ["p.img"])

    def test_a_detached_headers_data_file(self):
        # A .nhdr naming another name's data file: writing that name's .nhdr replaces the data.
        raw = np.arange(24, dtype=np.float32).tobytes()
        open(self.path("data.raw"), "wb").write(raw)
        with open(self.path("x.nhdr"), "w") as f:
            f.write("NRRD0004\ntype: float\ndimension: 2\nsizes: 6 4\nencoding: raw\nendian: little\n"
                    "data file: y.zraw\n")
        os.rename(self.path("data.raw"), self.path("y.zraw"))
        self.assert_refused(["affine", "-i", self.path("x.nhdr"), "-o", self.path("y.mhd"), "--scale", "1"], ["y.mhd", "y.zraw"])

    def test_different_files_still_work(self):
        result = run("affine", "-i", self.path("p.hdr"), "-o", self.path("q.hdr"), "--scale", "1")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(os.path.exists(self.path("q.img")))


class BatchFiles(Folder):
    def manifest(self, rows, name="jobs.csv"):
        with open(self.path(name), "w") as f:
            f.write("input,output\n" + "".join(f"{i},{o}\n" for i, o in rows))
        return self.path(name)

    def test_report_is_the_manifest(self):
        jobs = self.manifest([("in.npy", "a.npy")])
        self.assert_refused(["batch", "affine", jobs, "--scale", "1", "--report", jobs], ["--report", "manifest"], status=2)
        os.mkdir(self.path("sub"))
        self.assert_refused(["batch", "affine", jobs, "--scale", "1", "--report", self.path("sub", "..", "jobs.csv")],
                            ["--report"], status=2)

    def test_report_is_an_input_or_an_output(self):
        jobs = self.manifest([("p.hdr", "a.nii"), ("in.npy", "b.npy")])
        self.assert_refused(["batch", "affine", jobs, "--scale", "1", "--report", self.path("p.img")], ["p.img", "row 0"],
                            status=2)
        self.assert_refused(["batch", "affine", jobs, "--scale", "1", "--report", self.path("in.npy")], ["in.npy", "row 1"],
                            status=2)
        self.assert_refused(["batch", "affine", jobs, "--scale", "1", "--report", self.path("b.npy")], ["b.npy", "row 1"],
                            status=2)

    def test_two_jobs_writing_one_file(self):
        jobs = self.manifest([("in.npy", "a.npy"), ("other.nii", "./a.npy")])
        self.assert_refused(["batch", "affine", jobs, "--scale", "1"], ["rows 0 and 1", "a.npy"], status=2)
        jobs = self.manifest([("in.npy", "out.hdr"), ("other.nii", "out.img")])
        self.assert_refused(["batch", "affine", jobs, "--scale", "1"], ["rows 0 and 1"], status=2)
        with open(self.path("inputs.csv"), "w") as f:
            f.write("input\nin.npy\nother.nii\n")
        self.assert_refused(["batch", "affine", self.path("inputs.csv"), "--scale", "1", "-o", self.path("c.npy")], ["rows 0 and 1"],
                            status=2)

    def test_a_job_overwriting_its_input_fails_alone(self):
        jobs = self.manifest([("p.hdr", "p.img"), ("in.npy", "fine.npy")])
        before = open(self.path("p.img"), "rb").read(), open(self.path("p.hdr"), "rb").read()
        result = run("batch", "affine", jobs, "--scale", "1")
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertEqual((open(self.path("p.img"), "rb").read(), open(self.path("p.hdr"), "rb").read()), before)
        self.assertTrue(os.path.exists(self.path("fine.npy")))


class NamesWithControlCharacters(Folder):
    def test_a_newline_in_a_name_stays_one_line(self):
        name = "bad\nname\t\x1b.png"
        open(self.path(name), "wb").write(b"not a png at all")
        for args in (["info", self.path(name)], ["affine", "-i", self.path(name), "-o", self.path("out.tif"), "--scale", "1"]):
            with self.subTest(command=args[0]):
                line = self.assert_refused(args, ["bad\\nname\\t\\x1b.png"])
                self.assertNotIn("\x1b", line)

    def test_a_newline_in_a_missing_name(self):
        self.assert_refused(["info", self.path("no\nsuch.nii")], ["no\\nsuch.nii"])
        # A command-line mistake quotes the value given.
        self.assert_refused(["affine", "-i", self.path("in.npy"), "-o", self.path("out.npy"), "--rotate", "1\n2"], ["1\\n2"],
                            status=2)  # the usage-error status (docs/cli.md)

    def test_a_batch_jobs_error_stays_one_line(self):
        name = "job\nin.png"
        open(self.path(name), "wb").write(b"not a png")
        with open(self.path("jobs.jsonl"), "w") as f:
            f.write('{"input": "job\\nin.png", "output": "out.png"}\n')
        result = run("batch", "affine", self.path("jobs.jsonl"), "--scale", "1")
        stderr = result.stderr.decode("utf-8", "replace")
        self.assertEqual(result.returncode, 3, stderr)
        lines = stderr.splitlines()
        self.assertEqual(len(lines), 2, stderr)  # the summary and the row's error
        self.assertIn("job\\nin.png", lines[1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--gridwarp", required=True)
    arguments, rest = parser.parse_known_args()
    GRIDWARP = os.path.abspath(arguments.gridwarp)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
