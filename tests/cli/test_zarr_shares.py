#!/usr/bin/python3
"""OME-Zarr pyramids, shares and resumed runs: every level of --pyramid equals a NumPy 2x2(x2) mean
of the level above it (an odd edge averaged over what there is, integers rounded half to even), with
the scale and translation that puts each voxel at the centre of those it averages, and zarr-python
reads them; N runs of --tiles K/N, at once or one after another, fill one store byte for byte equal
to the single run; a store still being written is refused until its last share ends; a run killed
part way and run again with --resume gives the same bytes; misuse is refused in one line.

    /usr/bin/python3 tests/cli/test_zarr_shares.py --gridwarp build/app/gridwarp
"""
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import tifffile
import zarr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, assert_same_files, gridwarp, halve, main, run, store_files  # noqa: E402

RNG = np.random.default_rng(63)


class ZarrShares(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        y, x = np.mgrid[0:1300, 0:1100]
        smooth = np.stack([(np.sin(x / 17 + c) * np.cos(y / 23) * 120 + 128) for c in range(3)], -1)
        cls.photo = np.clip(smooth + RNG.normal(0, 20, smooth.shape), 0, 255).astype(np.uint8)
        tifffile.imwrite(cls.path("photo.tif"), cls.photo, tile=(256, 256), photometric="rgb")
        np.savetxt(cls.path("turn2.txt"), [[0.985, 0.17, -40], [-0.17, 0.985, 120]])

    def assert_refused(self, result, *phrases, output=None):
        self.assertNotEqual(result.returncode, 0)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        for phrase in phrases:
            self.assertIn(phrase, lines[0])
        if output:
            self.assertFalse(os.path.exists(output), output)

    def warp(self, out, *extra, wait=True):
        args = ["affine", "-i", self.path("photo.tif"), "-o", out, "--matrix", self.path("turn2.txt"), "--pyramid", "-q", *extra]
        if not wait:
            return subprocess.Popen([gridwarp(), *args], stderr=subprocess.PIPE, text=True)
        result = run(*args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result

    def test_pyramid_levels_are_means_of_the_level_above(self):
        out = self.path("levels.zarr")
        self.warp(out, "--by-tiles", "always")
        group = zarr.open_group(out, "r")
        multiscale = group.attrs["multiscales"][0]
        levels = [np.asarray(group[d["path"]]) for d in multiscale["datasets"]]
        # 1300 x 1100 halves to 650 x 550, then 325 x 275, which fits one 512 x 512 chunk.
        self.assertEqual([lv.shape for lv in levels], [(3, 1300, 1100), (3, 650, 550), (3, 325, 275)])
        for finer, coarser in zip(levels, levels[1:]):
            self.assertTrue(np.array_equal(halve(finer), coarser))
        for k, dataset in enumerate(multiscale["datasets"]):
            scale, translation = (t[t["type"]] for t in dataset["coordinateTransformations"])
            self.assertEqual(scale, [1.0, 2.0 ** k, 2.0 ** k])
            self.assertEqual(translation, [0.0, (2.0 ** k - 1) / 2, (2.0 ** k - 1) / 2])
        # The first level is what the same command writes without a pyramid.
        plain = self.path("plain.npy")
        result = run("affine", "-i", self.path("photo.tif"), "-o", plain, "--matrix", self.path("turn2.txt"), "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(np.array_equal(np.load(plain)[0], levels[0][::-1]))  # BGR in memory, RGB in the store

    def test_volume_pyramids_halve_every_axis_and_keep_the_geometry(self):
        np.savetxt(self.path("identity3.txt"), np.eye(3, 4))
        for dtype in "int16", "float32":
            with self.subTest(dtype=dtype):
                data = (RNG.random((37, 300, 261)) * 4000 - 1000).astype(dtype)
                source = self.path(f"volume_{dtype}.zarr")
                shutil.rmtree(source, ignore_errors=True)
                group = zarr.open_group(source, "w")
                group.create_dataset("0", data=data, chunks=(16, 64, 64))
                group.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"],
                                               "datasets": [{"path": "0", "coordinateTransformations": [
                                                   {"type": "scale", "scale": [4.0, 0.5, 0.25]},
                                                   {"type": "translation", "translation": [8.0, -2.0, 1.0]}]}]}]
                out = self.path(f"pyramid_{dtype}.zarr")
                result = run("affine", "-i", source, "-o", out, "--matrix", self.path("identity3.txt"), "--mode", "nearest",
                             "--pyramid-levels", "3", "-q")
                self.assertEqual(result.returncode, 0, result.stderr)
                written = zarr.open_group(out, "r")
                levels = [np.asarray(written[str(k)])[None] for k in range(4)]
                self.assertTrue(np.array_equal(levels[0][0], data))
                for finer, coarser in zip(levels, levels[1:]):
                    self.assertTrue(np.array_equal(halve(finer), coarser))
                datasets = written.attrs["multiscales"][0]["datasets"]
                self.assertEqual(len(datasets), 4)
                scale, translation = (t[t["type"]] for t in datasets[3]["coordinateTransformations"])
                self.assertEqual(scale, [32.0, 4.0, 2.0])
                self.assertEqual(translation, [8.0 + 14.0, -2.0 + 1.75, 1.0 + 0.875])

    def test_shares_fill_one_store_equal_to_the_single_run(self):
        os.makedirs(self.path("single"), exist_ok=True)
        single = os.path.join(self.path("single"), "out.zarr")
        self.warp(single, "--by-tiles", "always")
        for how in "at once", "in turn", "slurm":
            with self.subTest(how=how):
                folder = self.path(how.replace(" ", "_"))
                shutil.rmtree(folder, ignore_errors=True)
                os.makedirs(folder)
                out = os.path.join(folder, "out.zarr")
                if how == "at once":
                    runs = [self.warp(out, "--tiles", f"{k}/3", wait=False) for k in range(3)]
                    for process in runs:
                        _, errors = process.communicate(timeout=120)
                        self.assertEqual(process.returncode, 0, errors)
                elif how == "in turn":
                    for k in 2, 0:
                        self.warp(out, "--tiles", f"{k}/3")
                        # Unfinished: refused by gridwarp's reader until the last share ends.
                        self.assert_refused(run("info", out), "still being written")
                    self.warp(out, "--tiles", "1/3")
                else:
                    for task in 5, 6:
                        environment = dict(os.environ, SLURM_ARRAY_TASK_ID=str(task), SLURM_ARRAY_TASK_MIN="5", SLURM_ARRAY_TASK_COUNT="2")
                        args = ["affine", "-i", self.path("photo.tif"), "-o", out, "--matrix", self.path("turn2.txt"), "--pyramid", "-q",
                                "--tiles", "slurm"]
                        result = subprocess.run([gridwarp(), *args], capture_output=True, text=True, env=environment, timeout=120)
                        self.assertEqual(result.returncode, 0, result.stderr)
                assert_same_files(self, single, out)
                self.assertEqual(run("info", out).returncode, 0)

    def test_a_killed_run_resumed_gives_the_same_bytes(self):
        big = np.tile(self.photo[:, :, 0], (4, 5))
        tifffile.imwrite(self.path("big.tif"), big, tile=(512, 512))
        common = ["-i", self.path("big.tif"), "--rotate", "7", "--mode", "cubic", "--threads", "1", "--pyramid", "-q"]
        os.makedirs(self.path("whole_run"), exist_ok=True)
        os.makedirs(self.path("resumed_run"), exist_ok=True)
        whole = os.path.join(self.path("whole_run"), "big.zarr")
        resumed = os.path.join(self.path("resumed_run"), "big.zarr")
        result = run("affine", *common, "-o", whole, "--by-tiles", "always")
        self.assertEqual(result.returncode, 0, result.stderr)
        process = subprocess.Popen([gridwarp(), "affine", *common, "-o", resumed, "--resume"])
        first_level = os.path.join(resumed, "0")
        deadline = time.time() + 60
        while process.poll() is None and time.time() < deadline:
            if os.path.isdir(first_level) and sum(len(files) for _, _, files in os.walk(first_level)) > 8:
                process.send_signal(signal.SIGKILL)
                break
            time.sleep(0.005)
        process.wait()
        print("resumed run killed:", process.returncode == -signal.SIGKILL, file=sys.stderr)
        if process.returncode == -signal.SIGKILL:
            self.assertTrue(os.path.isdir(os.path.join(resumed, ".gridwarp-unfinished")))
            self.assert_refused(run("info", resumed), "still being written", "--resume")
        result = run("affine", *common, "-o", resumed, "--resume")
        self.assertEqual(result.returncode, 0, result.stderr)
        assert_same_files(self, whole, resumed)

    def test_misuse_is_refused(self):
        photo, turn = self.path("photo.tif"), self.path("turn2.txt")
        base = ["affine", "-i", photo, "--matrix", turn, "-q"]
        self.assert_refused(run(*base, "-o", self.path("shared.tif"), "--tiles", "0/2"), "--tiles", "not written in shares", output=self.path("shared.tif"))
        self.assert_refused(run(*base, "-o", self.path("p.nii"), "--pyramid"), "p.nii", "pyramid", output=self.path("p.nii"))
        self.assert_refused(run(*base, "-o", self.path("k.zarr"), "--tiles", "2/2"), "--tiles", "0 <= K < N", output=self.path("k.zarr"))
        self.assert_refused(run(*base, "-o", self.path("k.zarr"), "--tiles", "0/2", "--by-tiles", "never"), "--tiles", output=self.path("k.zarr"))
        # A store of another image, a finished one, or one another command or number of shares is
        # writing, is not written into.
        other = self.path("other.zarr")
        result = run(*base, "-o", other)
        self.assertEqual(result.returncode, 0, result.stderr)
        before = store_files(other)
        self.assert_refused(run(*base, "-o", other, "--pyramid", "--tiles", "0/2"), "other.zarr", "another image")
        self.assert_refused(run(*base, "-o", other, "--tiles", "0/2"), "other.zarr", "finished", "--resume")
        self.assertEqual(store_files(other), before)
        self.assertEqual(run(*base, "-o", other, "--resume").returncode, 0)
        self.assertEqual(store_files(other), before)
        counted = self.path("counted.zarr")
        self.warp(counted, "--tiles", "0/2")
        self.assert_refused(run("affine", "-i", photo, "-o", counted, "--matrix", turn, "--pyramid", "-q", "--tiles", "1/3"), "2 shares, not 3")
        np.savetxt(self.path("turn2b.txt"), [[0.99, 0.1, -4], [-0.1, 0.99, 12]])
        self.assert_refused(run("affine", "-i", photo, "-o", counted, "--matrix", self.path("turn2b.txt"), "--pyramid", "-q", "--tiles", "1/2"),
                            "another command")

if __name__ == "__main__":
    main()
