#!/usr/bin/python3
"""gridwarp batch stopped by Ctrl-C (SIGINT) or SIGTERM: no job starts after the signal, the running
one finishes, the report holds every row in order (the rest "not run") and was written line by line
while the jobs ran, the summary says so, the exit status is 128 + the signal, no staging file is
left, and --resume finishes the rest.

    /usr/bin/python3 tests/cli/test_batch_interrupt.py --gridwarp build/app/gridwarp
"""
import json
import os
import signal
import subprocess
import sys
import time

import cv2
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, gridwarp, main, run  # noqa: E402

ROWS = 40


def read_lines(path):
    with open(path) as f:
        return [line for line in f if line.endswith("\n")]


class Interrupt(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        rng = np.random.default_rng(3)
        cv2.imwrite(cls.path("photo.png"), (rng.random((900, 900, 3)) * 255).astype(np.uint8))
        with open(cls.path("jobs.csv"), "w") as f:
            f.write("input,output\n")
            for row in range(ROWS):
                f.write(f"{cls.path('photo.png')},{cls.path('out')}/{row:03d}.png\n")

    def interrupt(self, which):
        report = self.path(f"report_{which}.jsonl")
        batch = [gridwarp(), "batch", "affine", self.path("jobs.csv"), "--rotate", "7", "--mode", "cubic", "--jobs", "1",
                 "--threads", "1", "--report", report]
        process = subprocess.Popen(batch, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The report grows a line per finished job while the batch runs: wait for two.
        deadline = time.time() + 60
        while time.time() < deadline:
            if os.path.exists(report) and len(read_lines(report)) >= 2:
                break
            time.sleep(0.02)
        self.assertLess(time.time(), deadline, "no report line while the jobs ran")
        process.send_signal(which)
        _, stderr = process.communicate(timeout=60)
        self.assertEqual(process.returncode, 128 + which, stderr)
        lines = [json.loads(line) for line in read_lines(report)]
        self.assertEqual([line["row"] for line in lines], list(range(ROWS)))
        done = [line for line in lines if line["status"] == "done"]
        not_run = [line for line in lines if line["status"] == "not run"]
        self.assertGreaterEqual(len(done), 2)
        self.assertGreater(len(not_run), 0)
        self.assertEqual(len(done) + len(not_run), ROWS)
        self.assertIn("not run (" + ("interrupted" if which == signal.SIGINT else "terminated") + "; --resume continues)", stderr)
        written = sorted(os.listdir(self.path("out")))
        self.assertEqual(written, sorted(os.path.basename(line["outputs"][0]) for line in done))  # no staging files
        for line in done:
            self.assertEqual(cv2.imread(line["outputs"][0]).shape, (900, 900, 3))
        # --resume runs what was not run and skips the rest.
        result = run("batch", "affine", self.path("jobs.csv"), "--rotate", "7", "--mode", "cubic", "--report", report, "--resume",
                     timeout=600)
        self.assertEqual(result.returncode, 0, result.stderr)
        statuses = [json.loads(line)["status"] for line in read_lines(report)]
        self.assertEqual(statuses.count("skipped"), len(done))
        self.assertEqual(statuses.count("done"), ROWS - len(done))

    def test_sigint(self):
        self.interrupt(signal.SIGINT)

    def test_sigterm(self):
        for name in os.listdir(self.path("out")) if os.path.isdir(self.path("out")) else []:
            os.remove(os.path.join(self.path("out"), name))
        self.interrupt(signal.SIGTERM)


if __name__ == "__main__":
    main()
