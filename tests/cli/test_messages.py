#!/usr/bin/python3
"""Messages that say what to do: an output name no format writes lists the extensions gridwarp
writes (before any work, no file left); a folder of bare MCFLIRT matrices names the tag that reads
it; an image command given a volume it cannot write as an image gives its size x first; a --size
of the wrong arity exits 2 with the spelling that keeps the aspect.

    /usr/bin/python3 tests/cli/test_messages.py --gridwarp build/app/gridwarp
"""
import os
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

CARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "card.png")


class Messages(FolderTestCase):
    def one_line(self, result, *needles):
        self.assertNotEqual(result.returncode, 0)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        for needle in needles:
            self.assertIn(needle, result.stderr)

    def test_unknown_output_extension_lists_the_formats(self):
        for name, said in (("out.xyz", "'.xyz'"), ("out", "a name without an extension")):
            with self.subTest(name):
                result = run("affine", "-i", CARD, "-o", self.path(name), "--rotate", "3")
                self.one_line(result, self.path(name), said, ".png", ".nii.gz", ".tif", ".npy")
                self.assertFalse(os.path.exists(self.path(name)))
                self.assertFalse([f for f in os.listdir(self.folder) if f.startswith(name) or "gridwarp" in f])

    def test_folder_of_bare_matrices_names_the_fsl_tag(self):
        os.makedirs(self.path("mats"))
        for volume in range(2):
            np.savetxt(os.path.join(self.path("mats"), f"MAT_{volume:04d}"), np.eye(4), fmt="%.6f")
        nib.save(nib.Nifti1Image(np.zeros((5, 5, 5, 2), np.float32), np.eye(4)), self.path("series.nii.gz"))
        result = run("resample", "-i", self.path("series.nii.gz"), "-o", self.path("moved.nii.gz"), "-t",
                     self.path("mats") + ",per-volume")
        self.one_line(result, self.path("mats") + ",fsl,per-volume")
        result = run("resample", "-i", self.path("series.nii.gz"), "-o", self.path("moved.nii.gz"), "-t",
                     self.path("mats") + ",fsl,per-volume")
        self.assertEqual(result.returncode, 0, result.stderr)
        os.remove(self.path("moved.nii.gz"))


class Sizes(FolderTestCase):
    def test_a_volume_written_as_an_image_is_described_x_first(self):
        nib.save(nib.Nifti1Image(np.zeros((176, 240, 256), np.uint8), np.eye(4)), self.path("t1.nii.gz"))
        result = run("affine", "-i", self.path("t1.nii.gz"), "-o", self.path("t1.png"), "--rotate", "0")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("size 176 x 240 x 256 (W x H x D)", result.stderr)
        self.assertFalse(os.path.exists(self.path("t1.png")))

    def test_every_writer_gives_sizes_x_first(self):
        nib.save(nib.Nifti1Image(np.zeros((176, 240, 256), np.uint8), np.eye(4)), self.path("t1.nii.gz"))
        np.save(self.path("four.npy"), np.zeros((1, 1, 5, 6, 7, 8), np.float32))  # N, C, then axes outermost first
        for source, target, expected in (("t1.nii.gz", "t1.tif", "size 176 x 240 x 256 (W x H x D)"),
                                         ("four.npy", "four.nii", "size 8 x 7 x 6 x 5 (W x H x D x axis 4)"),
                                         ("four.npy", "four.nrrd", "size 8 x 7 x 6 x 5 (W x H x D x axis 4)")):
            result = run("affine", "-i", self.path(source), "-o", self.path(target), "--scale", "1")
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertIn(expected, result.stderr)
            self.assertFalse(os.path.exists(self.path(target)))

    def test_a_size_of_the_wrong_arity_is_a_usage_error_with_the_spelling_that_works(self):
        result = run("resize", "-i", CARD, "-o", self.path("r.png"), "--size", "512")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("512x or x512", result.stderr)


SAMPLING_COMMANDS = ("sample", "affine", "resize", "flow", "resample")
ALL_COMMANDS = SAMPLING_COMMANDS + ("grid", "info", "batch", "convert-transform")


class Help(FolderTestCase):
    def help_of(self, command):
        result = run(command, "--help")
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def test_options_are_grouped_and_wrapped(self):
        for command in ALL_COMMANDS:
            text = self.help_of(command)
            options = text.split("Examples:")[0]
            self.assertLessEqual(max(len(line) for line in options.splitlines()), 100, command)
            if command == "batch":
                continue  # its own options only: the job's are the command's
            self.assertIn("Input and output:", text, command)
            self.assertIn("Resources:", text, command)
        for command in SAMPLING_COMMANDS:
            self.assertIn("Sampling:", self.help_of(command), command)

    def test_mode_help_is_short_names_generic_label_and_points_to_the_full_list(self):
        for command in SAMPLING_COMMANDS:
            text = self.help_of(command)
            mode = text[text.index("--mode"):]
            mode = mode[:mode.index("\n  -", 1)]
            self.assertIn("GenericLabel", mode, command)
            self.assertIn("gridwarp help modes", mode, command)
            self.assertLessEqual(len(" ".join(mode.split())), 260, command)

    def test_help_modes_lists_every_ants_name(self):
        result = run("help", "modes")
        self.assertEqual(result.returncode, 0, result.stderr)
        for name in ("linear", "nearest", "cubic", "BSpline[0-5]", "LanczosWindowedSinc", "HammingWindowedSinc",
                     "CosineWindowedSinc", "WelchWindowedSinc", "BlackmanWindowedSinc", "Gaussian[sigma,alpha]",
                     "MultiLabel[sigma,alpha]", "GenericLabel[kind]", "nearestneighbor", "bilinear", "bicubic"):
            self.assertIn(name, result.stdout)

    def test_help_topics(self):
        self.assertIn("reflection", run("help", "padding").stdout)
        self.assertIn("--voxel-size", run("help", "resize").stdout)
        result = run("help", "padd")
        self.assertEqual(result.returncode, 2)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn("did you mean 'padding'", result.stderr)


if __name__ == "__main__":
    main()
