#!/usr/bin/python3
"""Start-up: commands that do not sample never load Highway's library (its static initializer
calibrates a timer for milliseconds); sampling loads it and still finds the processor's targets.
The program loads no codec or logging library at start-up: each costs time whether used or not.

    /usr/bin/python3 tests/cli/test_startup.py --gridwarp build/app/gridwarp
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, gridwarp, main  # noqa: E402


def loaded_libraries(*args):
    environment = dict(os.environ, LD_DEBUG="files")
    result = subprocess.run([gridwarp(), *args], capture_output=True, text=True, env=environment)
    return result, [line for line in result.stderr.splitlines() if "file=" in line or "calling init:" in line]


class Startup(FolderTestCase):
    def test_version_and_help_do_not_load_highway(self):
        for args in (["--version"], ["--help"], ["affine", "--help"]):
            result, lines = loaded_libraries(*args)
            self.assertEqual(result.returncode, 0, result.stderr[-500:])
            self.assertFalse([line for line in lines if "libhwy" in line], args)

    def test_version_loads_only_the_runtimes(self):
        runtimes = ("ld-linux", "libc.so", "libm.so", "libstdc++.so", "libgcc_s.so", "libgomp.so", "libpthread.so",
                    "libdl.so", "libasan.so", "libubsan.so", "liblsan.so")
        result, lines = loaded_libraries("--version")
        self.assertEqual(result.returncode, 0, result.stderr[-500:])
        self.assertTrue(result.stdout.startswith("gridwarp "), result.stdout)
        loaded = {line.split("file=")[1].split()[0] for line in lines if "file=" in line}
        self.assertIn("libc.so.6", loaded)
        # The C++ runtime is linked in (a sanitizer build keeps the shared one for its new/delete).
        if not any("san.so" in name for name in loaded):
            self.assertFalse(any(name.startswith("libstdc++") for name in loaded), loaded)
        self.assertEqual({name for name in loaded if not any(runtime in name for runtime in runtimes)}, set())

    def test_sampling_loads_highway_on_demand(self):
        np.save(self.path("x.npy"), np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
        result, lines = loaded_libraries("affine", "-i", self.path("x.npy"), "-o", self.path("y.npy"), "--rotate", "90")
        self.assertEqual(result.returncode, 0, result.stderr[-500:])
        self.assertTrue([line for line in lines if "libhwy" in line])
        np.testing.assert_array_equal(np.load(self.path("y.npy"))[0, 0], np.rot90(np.arange(16, dtype=np.float32).reshape(4, 4)))


if __name__ == "__main__":
    main()
