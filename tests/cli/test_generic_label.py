#!/usr/bin/python3
"""--mode GenericLabel[...] against an independent numpy implementation of its rule: each output
value is the input label whose taps' interpolation weights sum to the most (as if each label's
indicator image were interpolated and the largest taken), ties to the smaller label, taps outside
the input under zeros padding counting as the fill value. Weights and taps follow ONNX GridSample's
coordinate rule, written here from the operator's specification.

    /usr/bin/python3 tests/cli/test_generic_label.py --gridwarp build/app/gridwarp
"""
import os
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

LABELS = np.array([0, 2, 17, 1000], dtype=np.int16)  # not contiguous


def unnormalise(x, size, align_corners):
    return (x + 1) / 2 * (size - 1) if align_corners else ((x + 1) * size - 1) / 2


def cubic_weights(t):
    a = -0.75
    t1, s, s1 = t + 1, 1 - t, 2 - t
    return [((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a, ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1, ((a * s1 - 5 * a) * s1 + 8 * a) * s1 - 4 * a]


def axis_taps(u, mode):
    """(index, weight) pairs along one axis."""
    if mode == "linear":
        first = np.floor(u)
        t = u - first
        return [(int(first), 1 - t), (int(first) + 1, t)]
    first = np.floor(u) - 1
    return list(zip(range(int(first), int(first) + 4), cubic_weights(u - first - 1)))


def generic_label_2d(image, grid, mode, padding, align_corners, fill=0):
    """The rule, point by point: image (H, W), grid (Ho, Wo, 2) with x first."""
    height, width = image.shape
    out = np.empty(grid.shape[:2], dtype=image.dtype)
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            x, y = (float(v) for v in grid[i, j])
            u, v = unnormalise(x, width, align_corners), unnormalise(y, height, align_corners)
            sums = {}
            for row, wy in axis_taps(v, mode):
                for col, wx in axis_taps(u, mode):
                    w = wy * wx
                    if w == 0:
                        continue
                    if padding == "border":
                        row_c, col_c = min(max(row, 0), height - 1), min(max(col, 0), width - 1)
                        label = int(image[row_c, col_c])
                    elif 0 <= row < height and 0 <= col < width:
                        label = int(image[row, col])
                    else:
                        label = fill
                    sums[label] = sums.get(label, 0.0) + w
            best = max(sums.items(), key=lambda item: (item[1], -item[0]))
            out[i, j] = best[0]
    return out


class GenericLabel(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        rng = np.random.default_rng(11)
        # Blocks of labels, so that points see one, two or more labels among their taps.
        blocks = rng.choice(LABELS, size=(6, 7))
        cls.image = np.kron(blocks, np.ones((3, 2), dtype=np.int16))[:17, :13].astype(np.int16)
        np.save(cls.path("labels.npy"), cls.image[None, None])
        grid = rng.uniform(-1.15, 1.15, size=(1, 23, 29, 2))
        cls.grid = grid
        np.save(cls.path("grid.npy"), grid)

    def test_sample_matches_the_rule(self):
        for mode, spelling in [("linear", "GenericLabel"), ("linear", "genericlabel[Linear]"), ("cubic", "GenericLabel[Cubic]")]:
            for padding in ["zeros", "border"]:
                for align_corners in [False, True]:
                    with self.subTest(mode=spelling, padding=padding, align_corners=align_corners):
                        out = self.path("out.npy")
                        extra = ["--align-corners"] if align_corners else []
                        result = run("sample", "-i", self.path("labels.npy"), "-g", self.path("grid.npy"), "-o", out,
                                     "--mode", spelling, "--padding", padding, *extra)
                        self.assertEqual(result.returncode, 0, result.stderr)
                        got = np.load(out)[0, 0]
                        expected = generic_label_2d(self.image, self.grid[0], mode, padding, align_corners)
                        self.assertEqual(got.dtype, np.int16)
                        np.testing.assert_array_equal(got, expected)
                        self.assertTrue(set(np.unique(got)) <= set(LABELS.tolist()))

    def test_ties_go_to_the_smaller_label(self):
        # With align_corners, x = -1 + k/8 is u = 0.75 k exactly (width 13) and y = -0.5 is row 4:
        # k = 2, 6, 10, 14 fall halfway between two columns, weights 1/2 and 1/2.
        ks = [2, 6, 10, 14]
        grid = np.array([[[[-1 + k / 8, -0.5] for k in ks]]])
        np.save(self.path("ties_grid.npy"), grid)
        out = self.path("ties.npy")
        result = run("sample", "-i", self.path("labels.npy"), "-g", self.path("ties_grid.npy"), "-o", out, "--mode", "GenericLabel",
                     "--align-corners")
        self.assertEqual(result.returncode, 0, result.stderr)
        got = np.load(out)[0, 0, 0]
        ties = 0
        for k, value in zip(ks, got):
            left, right = self.image[4, int(0.75 * k)], self.image[4, int(0.75 * k) + 1]
            self.assertEqual(value, min(left, right), (k, left, right))
            ties += left != right
        self.assertGreater(ties, 0, "no point between two different labels")

    def test_nearest_neighbor_is_nearest(self):
        a, b = self.path("nn.npy"), self.path("nearest.npy")
        for spelling, out in [("GenericLabel[NearestNeighbor]", a), ("nearest", b)]:
            result = run("sample", "-i", self.path("labels.npy"), "-g", self.path("grid.npy"), "-o", out, "--mode", spelling)
            self.assertEqual(result.returncode, 0, result.stderr)
        np.testing.assert_array_equal(np.load(a), np.load(b))

    def test_resample_keeps_labels_and_dtype(self):
        rng = np.random.default_rng(3)
        volume = np.kron(rng.choice(LABELS, size=(5, 5, 4)), np.ones((3, 3, 3), dtype=np.int16)).astype(np.int16)
        nib.save(nib.Nifti1Image(volume, np.diag([1.5, 1.5, 2.0, 1.0])), self.path("seg.nii.gz"))
        with open(self.path("turn.tfm"), "w") as f:
            f.write("#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n"
                    "Parameters: 0.98 -0.17 0.02 0.17 0.98 -0.05 0 0.05 1.01 0.7 -0.4 0.9\nFixedParameters: 10 10 12\n")
        out = self.path("seg_out.nii.gz")
        result = run("resample", "-i", self.path("seg.nii.gz"), "-o", out, "-t", self.path("turn.tfm"), "--mode", "GenericLabel[Linear]")
        self.assertEqual(result.returncode, 0, result.stderr)
        got = nib.load(out)
        self.assertEqual(got.get_data_dtype(), np.int16)
        values = set(np.unique(np.asanyarray(got.dataobj)).tolist())
        self.assertTrue(values <= set(LABELS.tolist()), values)
        self.assertGreaterEqual(len(values), 3)
        # Linear interpolation of the same labels would make values the input never held.
        linear = self.path("seg_linear.nii.gz")
        self.assertEqual(run("resample", "-i", self.path("seg.nii.gz"), "-o", linear, "-t", self.path("turn.tfm")).returncode, 0)
        self.assertFalse(set(np.unique(np.asanyarray(nib.load(linear).dataobj)).tolist()) <= set(LABELS.tolist()))

    def test_refusals(self):
        result = run("sample", "-i", self.path("labels.npy"), "-g", self.path("grid.npy"), "-o", self.path("bad.npy"),
                     "--mode", "GenericLabel[Gaussian]")
        self.assertNotEqual(result.returncode, 0)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn("--mode", result.stderr)
        self.assertFalse(os.path.exists(self.path("bad.npy")))



class LabelMapWarning(FolderTestCase):
    """One warning line when an integer image that looks like a label map is interpolated between values."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        rng = np.random.default_rng(3)
        # 30 labels in blocks of 16 voxels along x: 15 of 16 neighbours equal, as in a segmentation.
        blocks = rng.integers(0, 30, (2, 8, 16))
        labels = np.kron(blocks, np.ones((16, 4, 4), dtype=np.int64)).astype(np.uint8)  # (32, 32, 64) as i (x), j, k
        nib.save(nib.Nifti1Image(labels, np.eye(4)), cls.path("labels.nii.gz"))
        scan = rng.normal(1000, 200, labels.shape).astype(np.int16)
        nib.save(nib.Nifti1Image(scan, np.eye(4)), cls.path("scan.nii.gz"))

    def stderr_of(self, *args):
        result = run(*args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stderr

    def test_linear_and_cubic_on_a_label_map_warn(self):
        for command in (["affine", "--rotate", "5"], ["resample"], ["resize", "--scale", "0.5"]):
            for mode in ("linear", "cubic", "BSpline[3]"):
                with self.subTest(command=command[0], mode=mode):
                    err = self.stderr_of(command[0], "-i", self.path("labels.nii.gz"), "-o", self.path("out.nii.gz"),
                                         *command[1:], "--mode", mode)
                    warnings = [line for line in err.splitlines() if line.startswith("gridwarp: warning:")]
                    self.assertEqual(len(warnings), 1, err)
                    self.assertIn("labels.nii.gz: looks like a label map (30 distinct values", warnings[0])
                    self.assertIn("GenericLabel", warnings[0])

    def test_no_warning_where_values_are_kept_or_the_image_is_a_scan(self):
        for source, mode in (("labels.nii.gz", "nearest"), ("labels.nii.gz", "GenericLabel"), ("labels.nii.gz", "MultiLabel"),
                             ("labels.nii.gz", "BSpline[0]"), ("scan.nii.gz", "linear")):
            with self.subTest(source=source, mode=mode):
                err = self.stderr_of("affine", "-i", self.path(source), "-o", self.path("out.nii.gz"), "--rotate", "5",
                                     "--mode", mode)
                self.assertNotIn("gridwarp: warning:", err)
        self.assertEqual(self.stderr_of("affine", "-i", self.path("labels.nii.gz"), "-o", self.path("out.nii.gz"), "--rotate", "5",
                                        "-q"), "")

    def test_messages_give_sizes_x_first(self):
        err = self.stderr_of("affine", "-i", self.path("labels.nii.gz"), "-o", self.path("out.nii.gz"), "--rotate", "5",
                             "--mode", "nearest")
        self.assertIn("size 32 x 32 x 64 (W x H x D)", err)

if __name__ == "__main__":
    main()
