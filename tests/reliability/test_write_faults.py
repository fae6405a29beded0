#!/usr/bin/python3
"""Faults while writing: outputs that are not regular files, a full file system, concurrent writers
of one output, and the staging folders of killed writers.

    /usr/bin/python3 tests/reliability/test_write_faults.py --gridwarp build/app/gridwarp [--full-disk]

Without --full-disk it runs everything but the full file system; with it, only that (it mounts a small
tmpfs, and exits 77, "skipped", where mounting is not permitted). Detached-header pairs written by
concurrent processes are read back by a parser of this file's own (numpy, zlib, gzip), not by
gridwarp. ctest runs both halves (label cli).
"""
import argparse
import errno
import gzip
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import unittest
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

GRIDWARP = None
FAULT_LIBRARY = None


def run(*args):
    return subprocess.run([GRIDWARP, *map(str, args)], capture_output=True, text=True, timeout=120)


def save_tensor(path, array):
    np.save(path, array.reshape((1, 1) + array.shape))


def staging_left(folder):
    return [name for name in os.listdir(folder) if name.startswith(".gridwarp-")]


def assert_refused(test, result, name):
    test.assertEqual(result.returncode, 1, result.stderr)
    lines = result.stderr.strip().splitlines()
    test.assertEqual(len(lines), 1, result.stderr)
    test.assertTrue(lines[0].startswith("gridwarp: error:"), lines[0])
    test.assertIn(name, lines[0])


# A reader for the detached pairs gridwarp writes through ITK (uncompressed or zlib/gzip data),
# independent of gridwarp's own readers.
def read_detached(header_path):
    fields = {}
    with open(header_path, encoding="latin-1") as header:
        for line in header:
            line = line.rstrip("\n")
            if header_path.endswith(".mhd") and "=" in line:
                key, value = line.split("=", 1)
                fields[key.strip()] = value.strip()
            elif header_path.endswith(".nhdr") and ": " in line and not line.startswith("#"):
                key, value = line.split(": ", 1)
                fields[key.strip().lower()] = value.strip()
    folder = os.path.dirname(header_path)
    if header_path.endswith(".mhd"):
        sizes = [int(v) for v in fields["DimSize"].split()]
        data_name = fields["ElementDataFile"]
        dtype = {"MET_FLOAT": "<f4", "MET_UCHAR": "u1", "MET_SHORT": "<i2"}[fields["ElementType"]]
        compressed = fields.get("CompressedData", "False").lower() == "true"
        raw = open(os.path.join(folder, data_name), "rb").read()
        data = zlib.decompress(raw) if compressed else raw
    else:
        sizes = [int(v) for v in fields["sizes"].split()]
        data_name = fields.get("data file", fields.get("datafile"))
        dtype = {"float": "<f4", "uchar": "u1", "unsigned char": "u1", "short": "<i2"}[fields["type"]]
        raw = open(os.path.join(folder, data_name), "rb").read()
        data = gzip.decompress(raw) if fields["encoding"] in ("gzip", "gz") else raw
    values = np.frombuffer(data, dtype=dtype)
    if values.size != int(np.prod(sizes)):
        raise AssertionError(f"{header_path}: header declares {sizes}, data file {data_name} holds {values.size} values")
    return sizes, values


class SpecialOutputs(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="gridwarp-special-")
        self.input = os.path.join(self.folder, "in.npy")
        save_tensor(self.input, np.arange(64, dtype=np.float32).reshape(8, 8))

    def tearDown(self):
        shutil.rmtree(self.folder)

    def check_refused_then_replaced(self, output, still_special):
        result = run("affine", "-i", self.input, "-o", output, "--scale", "1")
        assert_refused(self, result, os.path.basename(output))
        self.assertIn("--replace-special-output", result.stderr)
        self.assertTrue(still_special(), "the special file was touched")
        self.assertEqual(staging_left(self.folder), [])
        result = run("affine", "-i", self.input, "-o", output, "--scale", "1", "--replace-special-output")
        self.assertEqual(result.returncode, 0, result.stderr)
        mode = os.lstat(output).st_mode
        self.assertTrue(stat.S_ISREG(mode), "not replaced by a regular file")
        np.testing.assert_array_equal(np.load(output).reshape(8, 8), np.arange(64, dtype=np.float32).reshape(8, 8))

    def test_symbolic_link(self):
        target = os.path.join(self.folder, "elsewhere.npy")
        open(target, "wb").write(b"keep")
        link = os.path.join(self.folder, "link.npy")
        os.symlink(target, link)
        self.check_refused_then_replaced(link, lambda: os.path.islink(link) and open(target, "rb").read() == b"keep")
        self.assertEqual(open(target, "rb").read(), b"keep")  # replacing the link leaves its target alone

    def test_fifo(self):
        fifo = os.path.join(self.folder, "pipe.npy")
        os.mkfifo(fifo)
        self.check_refused_then_replaced(fifo, lambda: stat.S_ISFIFO(os.lstat(fifo).st_mode))

    def test_device_node(self):
        node = os.path.join(self.folder, "null.npy")
        try:
            os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            self.skipTest("creating a device node is not permitted here")
        self.check_refused_then_replaced(node, lambda: stat.S_ISCHR(os.lstat(node).st_mode))

    def test_directory_is_always_refused(self):
        directory = os.path.join(self.folder, "out.npy")
        os.mkdir(directory)
        assert_refused(self, run("affine", "-i", self.input, "-o", directory, "--scale", "1", "--replace-special-output"), "out.npy")
        self.assertTrue(os.path.isdir(directory))


class ConcurrentWriters(unittest.TestCase):
    """8 processes write the same output at once, each an image of its own size and value: the
    output must be one writer's complete image, header and data from the same run."""

    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="gridwarp-concurrent-")
        self.inputs = []
        for k in range(8):
            path = os.path.join(self.folder, f"in{k}.npy")
            save_tensor(path, np.full((20 + 4 * k, 30 + 4 * k), k, dtype=np.float32))
            self.inputs.append(path)

    def tearDown(self):
        shutil.rmtree(self.folder)

    def write_all_at_once(self, output):
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda k: run("affine", "-i", self.inputs[k], "-o", output, "--scale", "1", "--threads", "1"),
                                    range(8)))
        for result in results:
            self.assertEqual(result.returncode, 0, result.stderr)

    def check_rounds(self, name, read):
        output = os.path.join(self.folder, name)
        for _ in range(5):
            self.write_all_at_once(output)
            sizes, values = read(output)
            k = int(values[0])
            self.assertEqual(sorted(sizes), sorted([30 + 4 * k, 20 + 4 * k]), f"{name}: header of writer {k}, sizes {sizes}")
            self.assertTrue(np.all(values == k), f"{name}: data from several writers")
            self.assertEqual(staging_left(self.folder), [])

    def test_nhdr_pairs(self):
        self.check_rounds("out.nhdr", read_detached)

    def test_mhd_pairs(self):
        self.check_rounds("out.mhd", read_detached)

    def test_single_file(self):
        self.check_rounds("out.npy", lambda path: ((lambda a: (list(a.shape[2:]), a.ravel()))(np.load(path))))


class KilledWriters(unittest.TestCase):
    def test_dead_writers_staging_is_removed_live_ones_kept(self):
        folder = tempfile.mkdtemp(prefix="gridwarp-staging-")
        try:
            host = "".join(c if c.isalnum() or c in "._" else "_" for c in socket.gethostname())[:40]
            finished = subprocess.Popen(["true"])
            finished.wait()
            dead = os.path.join(folder, f".gridwarp-{host}-{finished.pid}-AbC123")
            live = os.path.join(folder, f".gridwarp-{host}-{os.getpid()}-XyZ789")
            other_host = os.path.join(folder, f".gridwarp-elsewhere-{finished.pid}-QqQ000")
            for path in (dead, live, other_host):
                os.mkdir(path)
                open(os.path.join(path, "partial.nii"), "wb").write(b"\0" * 1000)
            # A single-file output is staged as a lone file named after its target.
            dead_file = os.path.join(folder, f".gridwarp-{host}-{finished.pid}-dEf456-partial.nii")
            live_file = os.path.join(folder, f".gridwarp-{host}-{os.getpid()}-gHi789-partial.nii")
            for path in (dead_file, live_file):
                open(path, "wb").write(b"\0" * 1000)
            source = os.path.join(folder, "in.npy")
            save_tensor(source, np.ones((4, 4), dtype=np.float32))
            result = run("affine", "-i", source, "-o", os.path.join(folder, "out.npy"), "--scale", "1")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertFalse(os.path.exists(dead), "a dead writer's staging folder was left")
            self.assertTrue(os.path.exists(live), "a live writer's staging folder was removed")
            self.assertTrue(os.path.exists(other_host), "another host's staging folder was removed")
            self.assertFalse(os.path.exists(dead_file), "a dead writer's staged file was left")
            self.assertTrue(os.path.exists(live_file), "a live writer's staged file was removed")
        finally:
            shutil.rmtree(folder)

    def test_killed_writer_leaves_named_staging_and_no_output(self):
        folder = tempfile.mkdtemp(prefix="gridwarp-killed-")
        try:
            source = os.path.join(folder, "in.npy")
            save_tensor(source, np.random.default_rng(1).random((2048, 2048), dtype=np.float32))
            output = os.path.join(folder, "out.nii.gz")
            process = subprocess.Popen([GRIDWARP, "affine", "-i", source, "-o", output, "--rotate", "3", "--size", "6000,6000",
                                        "--compression-level", "12", "--threads", "1"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Kill it once its staged file exists (it is made before the sampling starts).
            for _ in range(600):
                if staging_left(folder) or process.poll() is not None:
                    break
                subprocess.run(["sleep", "0.01"])
            process.kill()
            process.wait()
            left = staging_left(folder)
            self.assertFalse(os.path.exists(output), "a killed writer published its output")
            if left:
                self.assertTrue(left[0].startswith(f".gridwarp-"), left)
                self.assertIn(f"-{process.pid}-", left[0])
            self.assertEqual(run("affine", "-i", source, "-o", os.path.join(folder, "again.npy"), "--size", "8,8").returncode, 0)
            self.assertEqual(staging_left(folder), [], "the next run did not remove what the killed writer staged")
        finally:
            shutil.rmtree(folder)


# What a write failure on a full file system must say (strerror(ENOSPC), or gridwarp's own words).
DISK_FULL = r"no space left on (the )?(device|file system)"


class PairPublishing(unittest.TestCase):
    """Issue 32: a pair whose write fails (a half of the target is a folder) leaves the earlier pair
    whole, byte for byte, whichever half is in the way and whichever half is named."""

    PAIRS = [("out.hdr", "out.img"), ("out.img", "out.hdr"), ("out.hdr.gz", "out.img.gz"), ("out.nhdr", "out.raw.gz"),
             ("out.mhd", "out.zraw"), ("out.mih", "out.dat")]

    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="gridwarp-pairs-")
        self.earlier = os.path.join(self.folder, "earlier.npy")
        save_tensor(self.earlier, np.arange(48, dtype=np.float32).reshape(6, 8))
        self.later = os.path.join(self.folder, "later.npy")
        save_tensor(self.later, np.full((10, 12), 7, dtype=np.float32))
        self.output = os.path.join(self.folder, "out")
        os.mkdir(self.output)

    def tearDown(self):
        shutil.rmtree(self.folder)

    def contents(self):
        found = {}
        for name in sorted(os.listdir(self.output)):
            path = os.path.join(self.output, name)
            found[name] = "<folder>" if os.path.isdir(path) else open(path, "rb").read()
        return found

    def test_a_half_in_the_way_leaves_the_earlier_pair(self):
        for named, partner in self.PAIRS:
            for in_the_way in (named, partner):
                with self.subTest(named=named, in_the_way=in_the_way):
                    target = os.path.join(self.output, named)
                    written = run("affine", "-i", self.earlier, "-o", target, "--scale", "1")
                    self.assertEqual(written.returncode, 0, written.stderr)
                    self.assertEqual(sorted(os.listdir(self.output)), sorted([named, partner]))
                    # The other half of the earlier pair stays; the one in the way becomes a folder.
                    blocked = os.path.join(self.output, in_the_way)
                    os.remove(blocked)
                    os.mkdir(blocked)
                    before = self.contents()
                    result = run("affine", "-i", self.later, "-o", target, "--scale", "1")
                    assert_refused(self, result, in_the_way)
                    self.assertEqual(self.contents(), before, "the earlier pair changed")
                    self.assertEqual(staging_left(self.output), [])
                    shutil.rmtree(self.output)
                    os.mkdir(self.output)

    def test_a_pair_replaces_the_earlier_pair_whole(self):
        for named, partner in self.PAIRS:
            with self.subTest(named=named):
                target = os.path.join(self.output, named)
                for source in (self.earlier, self.later):
                    result = run("affine", "-i", source, "-o", target, "--scale", "1")
                    self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(sorted(os.listdir(self.output)), sorted([named, partner]))
                header = named if not named.startswith("out.img") else partner
                if header.endswith((".nhdr", ".mhd")):
                    sizes, values = read_detached(os.path.join(self.output, header))
                    self.assertEqual(sorted(sizes), [10, 12])
                    self.assertTrue(np.all(values == 7))
                shutil.rmtree(self.output)
                os.mkdir(self.output)


class FullDisk(unittest.TestCase):
    """Each format written onto a full tmpfs: one error line, exit 1, the earlier output untouched,
    no staging folder left."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="gridwarp-fulldisk-")
        cls.mount = os.path.join(cls.folder, "small")
        os.mkdir(cls.mount)
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", cls.mount], capture_output=True, text=True)
        if mounted.returncode != 0:
            shutil.rmtree(cls.folder)
            print(f"SKIP: cannot mount a tmpfs here ({mounted.stderr.strip()})")
            sys.exit(77)
        rng = np.random.default_rng(7)
        # Noise does not compress: every format needs about its raw size.
        cls.small = os.path.join(cls.folder, "small.npy")
        save_tensor(cls.small, rng.integers(0, 255, (8, 8)).astype(np.uint8))
        cls.large = os.path.join(cls.folder, "large.npy")
        save_tensor(cls.large, rng.integers(0, 255, (600, 600)).astype(np.uint8))

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["umount", cls.mount])
        shutil.rmtree(cls.folder)

    def check(self, name):
        output = os.path.join(self.mount, name)
        first = run("affine", "-i", self.small, "-o", output, "--scale", "1")
        self.assertEqual(first.returncode, 0, first.stderr)
        before = {f: open(os.path.join(self.mount, f), "rb").read() for f in os.listdir(self.mount)}
        result = run("affine", "-i", self.large, "-o", output, "--scale", "1")
        assert_refused(self, result, name)
        self.assertRegex(result.stderr.lower(), DISK_FULL, "the error does not say that the disk is full")
        after = {f: open(os.path.join(self.mount, f), "rb").read() for f in os.listdir(self.mount)}
        self.assertEqual(before, after, "the earlier output changed, or something was left")
        for f in list(after):
            os.remove(os.path.join(self.mount, f))

    def test_formats(self):
        for name in ["out.nii", "out.nii.gz", "out.hdr", "out.mha", "out.mhd", "out.nrrd", "out.nhdr", "out.bmp", "out.png",
                     "out.tif", "out.jpg", "out.npy", "out.mif", "out.mif.gz", "out.mih", "out.mgh", "out.mgz"]:
            with self.subTest(name=name):
                self.check(name)


class StorageErrors(unittest.TestCase):
    """A disk that fails writes with EIO, and a quota (EDQUOT) that an NFS client reports only at
    close, made by an LD_PRELOAD library (storage_faults.c) for the files under one folder: every
    format names the cause in its one error line, and the earlier output stays."""

    FORMATS = ["out.nii", "out.nii.gz", "out.hdr", "out.mha", "out.mhd", "out.nrrd", "out.nhdr", "out.bmp", "out.png",
               "out.tif", "out.jpg", "out.npy", "out.mif", "out.mif.gz", "out.mih", "out.mgh", "out.mgz"]
    FAULTS = [("write", errno.EIO), ("close", errno.EDQUOT)]

    def setUp(self):
        if not FAULT_LIBRARY:
            self.skipTest("no --fault-library given")
        self.folder = tempfile.mkdtemp(prefix="gridwarp-storage-")
        self.output = os.path.join(self.folder, "out")
        os.mkdir(self.output)
        self.earlier = os.path.join(self.folder, "earlier.npy")
        save_tensor(self.earlier, np.arange(64, dtype=np.uint8).reshape(8, 8))
        self.later = os.path.join(self.folder, "later.npy")
        save_tensor(self.later, np.full((10, 12), 7, dtype=np.uint8))

    def tearDown(self):
        shutil.rmtree(self.folder)

    def faulty_run(self, at, error, *args):
        environment = dict(os.environ, LD_PRELOAD=FAULT_LIBRARY, GRIDWARP_FAULT_FOLDER=os.path.realpath(self.output),
                           GRIDWARP_FAULT_AT=at, GRIDWARP_FAULT_ERRNO=str(error),
                           # An AddressSanitizer build wants its runtime first; the library only wraps libc.
                           ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
        return subprocess.run([GRIDWARP, *map(str, args)], capture_output=True, text=True, timeout=120, env=environment)

    def test_every_format_names_the_cause(self):
        for at, error in self.FAULTS:
            for name in self.FORMATS:
                with self.subTest(at=at, error=errno.errorcode[error], name=name):
                    target = os.path.join(self.output, name)
                    first = run("affine", "-i", self.earlier, "-o", target, "--scale", "1")
                    self.assertEqual(first.returncode, 0, first.stderr)
                    before = {f: open(os.path.join(self.output, f), "rb").read() for f in os.listdir(self.output)}
                    result = self.faulty_run(at, error, "affine", "-i", self.later, "-o", target, "--scale", "1")
                    assert_refused(self, result, name)
                    self.assertIn(os.strerror(error).lower(), result.stderr.lower(), "the error does not name the cause")
                    after = {f: open(os.path.join(self.output, f), "rb").read() for f in os.listdir(self.output)}
                    self.assertEqual(before, after, "the earlier output changed, or something was left")
                    shutil.rmtree(self.output)
                    os.mkdir(self.output)


class ReadOnlyFolder(unittest.TestCase):
    """An output folder on a read-only file system: the error names the cause, and the earlier
    output stays."""

    def test_read_only_file_system(self):
        folder = tempfile.mkdtemp(prefix="gridwarp-readonly-")
        mount = os.path.join(folder, "ro")
        os.mkdir(mount)
        try:
            mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mount], capture_output=True, text=True)
            if mounted.returncode != 0:
                self.skipTest(f"cannot mount a tmpfs here ({mounted.stderr.strip()})")
            try:
                source = os.path.join(folder, "in.npy")
                save_tensor(source, np.arange(64, dtype=np.uint8).reshape(8, 8))
                for name in ["out.png", "out.tif", "out.hdr", "out.nhdr", "out.npy"]:
                    self.assertEqual(run("affine", "-i", source, "-o", os.path.join(mount, name), "--scale", "1").returncode, 0)
                before = {f: open(os.path.join(mount, f), "rb").read() for f in os.listdir(mount)}
                remounted = subprocess.run(["mount", "-o", "remount,ro", mount], capture_output=True, text=True)
                if remounted.returncode != 0:
                    self.skipTest(f"cannot remount read-only here ({remounted.stderr.strip()})")
                for name in ["out.png", "out.tif", "out.hdr", "out.nhdr", "out.npy"]:
                    with self.subTest(name=name):
                        result = run("affine", "-i", source, "-o", os.path.join(mount, name), "--scale", "2")
                        assert_refused(self, result, name)
                        self.assertIn("read-only file system", result.stderr.lower())
                after = {f: open(os.path.join(mount, f), "rb").read() for f in os.listdir(mount)}
                self.assertEqual(before, after)
            finally:
                subprocess.run(["umount", mount])
        finally:
            shutil.rmtree(folder)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--gridwarp", required=True)
    parser.add_argument("--full-disk", action="store_true")
    parser.add_argument("--fault-library", help="storage_faults.c built as a shared library")
    arguments, rest = parser.parse_known_args()
    GRIDWARP = os.path.abspath(arguments.gridwarp)
    FAULT_LIBRARY = os.path.abspath(arguments.fault_library) if arguments.fault_library else None
    if arguments.full_disk:
        suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(case) for case in (FullDisk, ReadOnlyFolder))
    else:
        suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(case)
                                   for case in (SpecialOutputs, ConcurrentWriters, KilledWriters, PairPublishing, StorageErrors))
    outcome = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if outcome.wasSuccessful() else 1)
