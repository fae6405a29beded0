#!/usr/bin/python3
"""Every gridwarp command line in README.md and docs/*.md, run as written: the docs cannot drift from
the program. Each fenced code block runs line by line in a folder holding the repository's data/
(as the README's commands expect), in order, so a block's earlier lines make the files its later
ones read. A gridwarp line must not be a usage mistake (exit 2), and where it fails (exit 1) the
only acceptable reason is a file the example names that the reader is to supply ("no such file").
Python examples (blocks that import) run with the built package; the only acceptable failure is
again a file the reader supplies. Signature listings are not run.

    /usr/bin/python3 tests/docs/test_doc_commands.py --gridwarp build/app/gridwarp
"""
import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, gridwarp, main  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOCS = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
GRIDWARP_LINE = re.compile(r"^\s*(build/app/)?gridwarp\s")
# Lines that only set up the shell or install (not for a test to run).
SKIPPED = re.compile(r"^\s*(scripts/|sudo |apt|cmake |ctest |cd |python3 -m venv|\. |source |pip |hyperfine |sbatch )")
# Synopses ("[--jobs N]", "(--size W,H | ...)", "T]...") and diagrams describe, they do not run.
SYNOPSIS = re.compile(r" \[-|\[sampling options\]| \(--|\.\.\.|->| \[[a-z]+ \|")


def code_blocks(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for match in re.finditer(r"```([a-z]*)\n(.*?)```", text, re.S):
        line_number = text[:match.start()].count("\n") + 2
        yield match.group(1), match.group(2), line_number


def shell_lines(block):
    """Lines of a block, continuations joined, comments and blank lines dropped."""
    lines, pending = [], ""
    for line in block.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        lines.append(line)
    return lines


class DocCommands(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.bin = cls.path("bin")
        os.makedirs(cls.bin)
        os.symlink(gridwarp(), os.path.join(cls.bin, "gridwarp"))
        cls.fixtures = cls.path("fixtures")
        os.makedirs(cls.fixtures)
        cls.make_fixtures(cls.fixtures)

    @staticmethod
    def make_fixtures(folder):
        """The files the examples name most, made from the bundled data, so that those examples run
        to the end rather than stopping at a missing file."""
        import nibabel as nib
        import numpy as np
        from PIL import Image
        card = Image.open(os.path.join(ROOT, "data", "card.png")).convert("RGB")
        card.save(os.path.join(folder, "photo.jpg"), quality=90)
        card.save(os.path.join(folder, "photo.png"))
        brain = nib.load(os.path.join(ROOT, "data", "brain.nii.gz"))
        for name in ("t1.nii.gz", "moving.nii.gz", "fixed.nii.gz", "template.nii.gz", "mov.nii.gz", "fix.nii.gz"):
            nib.save(brain, os.path.join(folder, name))
        labels = (np.asanyarray(brain.dataobj) // 300).astype(np.int16)
        nib.save(nib.Nifti1Image(labels, brain.affine), os.path.join(folder, "labels.nii.gz"))
        np.save(os.path.join(folder, "X.npy"), np.random.default_rng(0).random((1, 1, 8, 8), np.float32))
        y, x = np.meshgrid(np.linspace(-1, 1, 6), np.linspace(-1, 1, 7), indexing="ij")
        grid = np.stack([x, y], -1)[None].astype(np.float32)
        np.save(os.path.join(folder, "G.npy"), grid)
        np.save(os.path.join(folder, "grid.npy"), grid)
        np.save(os.path.join(folder, "theta.npy"), np.array([[[0.9, -0.1, 0.0], [0.1, 0.9, 0.0]]], np.float32))
        subprocess.run([gridwarp(), "convert-transform", "-t", os.path.join(ROOT, "data", "tilt.tfm"), "-o",
                        os.path.join(folder, "affine.mat") + ",itk"], check=True, capture_output=True)
        import tifffile
        slide = np.asarray(card.resize((card.width * 3, card.height * 3)))
        tifffile.imwrite(os.path.join(folder, "slide.tif"), slide, tile=(256, 256), photometric="rgb")
        with open(os.path.join(folder, "jobs.csv"), "w") as f:
            f.write("input,output\nphoto.png,out/photo_turned.png\nphoto.jpg,out/photo_turned.jpg\n")

    def prepared_folder(self, name):
        """A folder of the fixtures, with data/ and build/app/gridwarp as the README's tree has them."""
        folder = self.path(name)
        os.makedirs(os.path.join(folder, "build", "app"))
        os.makedirs(os.path.join(folder, "out"))
        os.symlink(os.path.abspath(os.path.join(ROOT, "data")), os.path.join(folder, "data"))
        os.symlink(gridwarp(), os.path.join(folder, "build", "app", "gridwarp"))
        for name in os.listdir(self.fixtures):
            shutil.copy(os.path.join(self.fixtures, name), folder)
        return folder

    def run_block(self, block, where):
        folder = self.prepared_folder("block_" + re.sub(r"\W", "_", where))
        # A Slurm array task's variables, for the examples that run in one.
        environment = dict(os.environ, PATH=self.bin + os.pathsep + os.environ["PATH"], SLURM_ARRAY_TASK_ID="0",
                           SLURM_ARRAY_TASK_COUNT="1", SLURM_ARRAY_TASK_MIN="0", SLURM_ARRAY_TASK_MAX="0", SLURM_CPUS_PER_TASK="1")
        problems = []
        for line in shell_lines(block):
            if SKIPPED.match(line) or SYNOPSIS.search(line):
                continue
            result = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=folder, env=environment, capture_output=True,
                                    text=True, timeout=300)
            if not GRIDWARP_LINE.match(line) or SYNOPSIS.search(line):
                continue
            error = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
            self.outcomes.append(result.returncode == 0)
            # (batch exits 2 when its manifest is missing: the batch could not start.)
            if result.returncode != 0 and not (result.returncode in (1, 2) and "no such file" in error):
                problems.append(f"{where}: `{line.strip()}` exited {result.returncode}: {error}")
        return problems

    def run_python(self, block, where):
        package = os.path.join(os.path.dirname(os.path.dirname(gridwarp())), "python")
        if not os.path.isdir(os.path.join(package, "gridwarp")):
            print(f"{where}: not run: the Python package is not built in this tree (the sanitizer job's)", file=sys.stderr)
            return []
        folder = self.prepared_folder("python_" + re.sub(r"\W", "_", where))
        environment = dict(os.environ, PYTHONPATH=package + os.pathsep + os.environ.get("PYTHONPATH", ""))
        result = subprocess.run(["/usr/bin/python3", "-c", block], cwd=folder, env=environment, capture_output=True, text=True,
                                timeout=300)
        error = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
        if result.returncode != 0 and "no such file" not in error:
            return [f"{where}: the Python example failed: {error}"]
        return []

    def test_every_documented_command_runs(self):
        self.outcomes = []
        problems, commands = [], 0
        for path in DOCS:
            name = os.path.relpath(path, ROOT)
            for language, block, line_number in code_blocks(path):
                if language == "python":
                    if "import " in block:
                        problems += self.run_python(block, f"{name}:{line_number}")
                    continue
                if not any(GRIDWARP_LINE.match(line) for line in shell_lines(block)):
                    continue
                commands += sum(1 for line in shell_lines(block) if GRIDWARP_LINE.match(line) and not SYNOPSIS.search(line))
                problems += self.run_block(block, f"{name}:{line_number}")
        print(f"{commands} documented command lines: {sum(self.outcomes)} ran to the end, "
              f"{len(self.outcomes) - sum(self.outcomes)} stopped at a file the reader supplies", file=sys.stderr)
        self.assertGreater(commands, 50)
        self.assertEqual(problems, [], "\n".join(problems))


if __name__ == "__main__":
    main()
