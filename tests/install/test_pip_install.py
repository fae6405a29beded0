#!/usr/bin/python3
"""`pip install .` as docs/python.md gives it: a fresh venv made from Debian's python3 with
--system-site-packages, pip's --no-build-isolation (Debian's setuptools and wheel, no network),
timed and reported against the goal of 6 minutes (issue 62): a figure, not a verdict, because this
machine's VMs differ by more than the margin (docs/performance.md, "Python"). Then, from the venv
and outside the source tree: the module imports, a torch tensor comes back a tensor, `gridwarp` is
on the venv's PATH and `python -m gridwarp` runs the command line.

Exits 77 (skipped) where venv, pip or wheel is missing.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

GOAL_S = 360


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    args = parser.parse_args()
    for module in ("venv", "pip", "wheel"):
        if subprocess.run(["/usr/bin/python3", "-c", f"import {module}"], capture_output=True).returncode != 0:
            print(f"skipped: Debian's python3 has no {module} (python3-venv, python3-pip, python3-wheel)")
            sys.exit(77)
    folder = tempfile.mkdtemp(prefix="gridwarp-pip-")
    try:
        venv = os.path.join(folder, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True)
        # A copy of the tree as a clone has it (no build folders), so that the install builds from nothing.
        source = os.path.join(folder, "source")
        files = subprocess.run(["git", "-C", args.source, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                               capture_output=True, check=True).stdout.decode().split("\0")
        for name in filter(None, files):
            if os.path.isfile(os.path.join(args.source, name)):
                os.makedirs(os.path.dirname(os.path.join(source, name)), exist_ok=True)
                shutil.copy2(os.path.join(args.source, name), os.path.join(source, name))
        os.sync()  # the timed build does not pay for writing back what earlier tests left dirty
        start = time.monotonic()
        done = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index", "."], cwd=source,
                              capture_output=True, text=True)
        seconds = time.monotonic() - start
        print(f"pip install .: {seconds:.0f} s (goal {GOAL_S} s{'' if seconds <= GOAL_S else ', missed'}), {os.cpu_count()} CPUs")
        if done.returncode != 0:
            sys.exit("pip install failed:\n" + done.stdout[-3000:] + done.stderr[-3000:])
        python, command = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin", "gridwarp")
        check = ("import gridwarp, torch\n"
                 "assert gridwarp.__file__.startswith(%r)\n"
                 "y = gridwarp.grid_sample(torch.rand(1, 1, 5, 5), torch.zeros(1, 2, 2, 2))\n"
                 "assert isinstance(y, torch.Tensor)\n") % venv
        subprocess.run([python, "-c", check], cwd=folder, check=True)
        version = subprocess.run([command, "--version"], capture_output=True, text=True, check=True).stdout
        assert version.startswith("gridwarp "), version
        card = os.path.join(args.source, "data", "card.png")
        out = os.path.join(folder, "rotated.png")
        subprocess.run([python, "-m", "gridwarp", "affine", "-i", card, "-o", out, "--rotate", "5", "-q"], cwd=folder, check=True)
        assert os.path.getsize(out) > 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
