#!/usr/bin/python3
"""antsApplyTransforms' interpolators through `gridwarp resample --padding itk`, voxel for voxel
against ITK itself: itk_resample_peer (tests/bench/itk_resample_peer.cpp) runs ResampleImageFilter
with the interpolator antsApplyTransforms -n builds (B-spline of order 0 to 5 with its mirror
prefilter; the windowed sincs of radius 3, zero outside; Gaussian and MultiLabel). The B-spline
orders are also compared with scipy.ndimage.map_coordinates where every tap is inside the input.

The peer itself is checked first, against computations written here from ITK's documentation:
its linear equals gridwarp's, its BSpline[1] is linear, its B-splines equal scipy's mirror
B-splines, its sincs equal a numpy windowed sinc, a sinc on the grid returns the voxel, and its
Gaussian and MultiLabel equal numpy's erf-weighted mean and label vote.

    /usr/bin/python3 tests/cli/test_ants_interpolators.py --gridwarp build/app/gridwarp \\
        --itk-peer build/tests/bench/itk_resample_peer
"""
import os
import subprocess
import sys

import nibabel as nib
import numpy as np
from scipy import ndimage, special

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FLIP, FolderTestCase, arguments, main, rotation, run  # noqa: E402

# gridwarp's --mode spelling and the peer's (antsApplyTransforms -n) name: compared on float32.
AGAINST_ITK = [
    ("BSpline", "bspline"),  # order 3
    ("BSpline[0]", "bspline[0]"),
    ("BSpline[1]", "bspline[1]"),
    ("BSpline[2]", "bspline[2]"),
    ("BSpline[3]", "bspline[3]"),
    ("BSpline[4]", "bspline[4]"),
    ("BSpline[5]", "bspline[5]"),
    ("LanczosWindowedSinc", "lanczoswindowedsinc"),
    ("HammingWindowedSinc", "hammingwindowedsinc"),
    ("CosineWindowedSinc", "cosinewindowedsinc"),
    ("WelchWindowedSinc", "welchwindowedsinc"),
    ("BlackmanWindowedSinc", "blackmanwindowedsinc"),
]
# Gaussian[sigma,alpha] (sigma in mm; defaults: the spacing and 1) on float32, within RELATIVE.
GAUSSIAN_AGAINST_ITK = [
    ("Gaussian", "gaussian"),
    ("Gaussian[0.7,2.5]", "gaussian[0.7,2.5]"),
    ("Gaussian[2,1]", "gaussian[2,1]"),
    # One sigma per axis, x first: the spacing (1.2, 1, 0.9 mm), which is ITK's default sigma.
    ("Gaussian[1.2x1x0.9,1.5]", "gaussian[,1.5]"),
]
# MultiLabel[sigma,alpha] (defaults: the spacing and 4) on an int16 label map: every voxel equal.
MULTILABEL_AGAINST_ITK = [
    ("MultiLabel", "multilabel"),
    ("MultiLabel[0.6,2]", "multilabel[0.6,2]"),
    ("MultiLabel[1.5,1.5]", "multilabel[1.5,1.5]"),
]
# The label map's values: not contiguous, one negative, one beyond int8.
LABELS = np.array([0, 3, 7, 42, -5, 1000], dtype=np.int16)
# The same on int16, where ITK truncates toward zero on the cast and gridwarp may round: one unit.
AGAINST_ITK_INT16 = [
    ("BSpline[3]", "bspline[3]"),
    ("LanczosWindowedSinc", "lanczoswindowedsinc"),
]
# B-spline order: gridwarp's --mode, against scipy's map_coordinates(order, mode="mirror") on float64.
AGAINST_SCIPY = {2: "BSpline[2]", 3: "BSpline[3]", 4: "BSpline[4]", 5: "BSpline[5]"}
GRIDWARP_OPTIONS = ["--padding", "itk", "--nifti-geometry", "itk"]  # read and sampled as ITK does
RELATIVE = 1e-3  # |gridwarp - ITK| <= RELATIVE * max(1, |ITK|)
RELATIVE_SCIPY = 1e-4

SHAPE = (20, 22, 18)
# Voxel to RAS world: x mirrored, anisotropic voxels, an origin off the centre.
AFFINE = np.array([[-1.2, 0, 0, 13.1], [0, 1.0, 0, -9.4], [0, 0, 0.9, 4.3], [0, 0, 0, 1]])
# The transform (ITK's: output LPS point to input LPS point): a few degrees and a fraction of a
# voxel, chosen so that no point falls within 1e-4 voxel of halfway between two voxels, where the
# edge of ITK's domain and BSpline[0]'s ties lie and rounding could go either way (setUpClass checks).
MATRIX = rotation(np.radians(3.0), np.radians(-2.0), np.radians(4.0))
TRANSLATION = np.array([0.45, -0.19, 0.45])
CENTER = (FLIP @ AFFINE @ np.array([(n - 1) / 2 for n in SHAPE] + [1.0]))[:3]

# ITK's window functions (itkWindowedSincInterpolateImageFunction.h), radius m = 3.
RADIUS = 3
WINDOWS = {
    "lanczoswindowedsinc": lambda x: np.sinc(x / RADIUS),
    "hammingwindowedsinc": lambda x: 0.54 + 0.46 * np.cos(np.pi * x / RADIUS),
    "cosinewindowedsinc": lambda x: np.cos(np.pi * x / (2 * RADIUS)),
    "welchwindowedsinc": lambda x: 1 - x * x / RADIUS ** 2,
    "blackmanwindowedsinc": lambda x: 0.42 + 0.5 * np.cos(np.pi * x / RADIUS) + 0.08 * np.cos(2 * np.pi * x / RADIUS),
}


def content(seed):
    """Smooth noise over a level that is not zero at the edges, a bright box and a dark ball:
    smooth parts and sharp steps, so that the kernels and the boundary rules all show."""
    rng = np.random.default_rng(seed)
    volume = 150 + 400 * ndimage.gaussian_filter(rng.normal(size=SHAPE), 1.5, mode="wrap")
    volume[5:12, 6:15, 4:11] += 150
    i, j, k = np.indices(SHAPE)
    volume[(i - 13) ** 2 + (j - 7) ** 2 + (k - 12) ** 2 < 16] -= 90
    return volume


def write_volume(path, data):
    image = nib.Nifti1Image(data, AFFINE)
    image.set_qform(AFFINE, code=1)
    image.set_sform(AFFINE, code=1)
    nib.save(image, path)


def write_itk_affine(path, matrix, translation, center):
    parameters = " ".join("%.17g" % v for v in list(matrix.ravel()) + list(translation))
    with open(path, "w") as f:
        f.write("#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n"
                "Parameters: %s\nFixedParameters: %s\n" % (parameters, " ".join("%.17g" % v for v in center)))


def source_indices(matrix, translation, center):
    """The continuous input index of each output voxel (the output takes the input's grid):
    (3,) + SHAPE. ITK maps the output point x to M (x - c) + c + t, in LPS."""
    index = np.indices(SHAPE).reshape(3, -1).astype(np.float64)
    lps = (FLIP @ AFFINE)[:3, :3] @ index + (FLIP @ AFFINE)[:3, 3:]
    moved = matrix @ (lps - center[:, None]) + (center + translation)[:, None]
    back = np.linalg.inv(FLIP @ AFFINE)
    return (back[:3, :3] @ moved + back[:3, 3:]).reshape((3,) + SHAPE)


def inside_itk(u, margin=1e-6):
    """ResampleImageFilter's rule: an index within half a voxel of the grid is sampled, one
    farther out takes the default value. Points within MARGIN of that edge are left out."""
    n = np.array(SHAPE, dtype=np.float64).reshape((3,) + (1,) * 3)
    return np.all((u >= -0.5 + margin) & (u < n - 0.5 - margin), axis=0)


def interior(u, taps_each_side=3):
    """Points at least TAPS_EACH_SIDE voxels from the edge voxels' centres: with 3, every
    B-spline tap (up to order 5) falls inside the input."""
    n = np.array(SHAPE, dtype=np.float64).reshape((3,) + (1,) * 3)
    return np.all((u >= taps_each_side) & (u <= n - 1 - taps_each_side), axis=0)


def windowed_sinc(volume, u, window):
    """ITK's WindowedSincInterpolateImageFunction, radius 3, ConstantBoundaryCondition: taps
    floor(u) - 2 .. floor(u) + 3 weighted window(x) sinc(x) of their distance x, zero outside;
    on an axis where u is a whole number the weights are 1 on that voxel and 0 elsewhere."""
    points = u.reshape(3, -1)
    taps, weights = [], []
    for axis in range(3):
        base = np.floor(points[axis])
        distance = points[axis] - base
        offsets = np.arange(-RADIUS + 1, RADIUS + 1)
        x = distance[:, None] - offsets[None, :]
        w = window(x) * np.sinc(x)
        w[distance == 0] = (offsets == 0).astype(np.float64)
        taps.append(base[:, None].astype(np.int64) + offsets[None, :])
        weights.append(w)
    out = np.zeros(points.shape[1])
    for a in range(2 * RADIUS):
        for b in range(2 * RADIUS):
            for c in range(2 * RADIUS):
                i, j, k = taps[0][:, a], taps[1][:, b], taps[2][:, c]
                inside = (i >= 0) & (i < SHAPE[0]) & (j >= 0) & (j < SHAPE[1]) & (k >= 0) & (k < SHAPE[2])
                value = np.zeros(points.shape[1])
                value[inside] = volume[i[inside], j[inside], k[inside]]
                out += weights[0][:, a] * weights[1][:, b] * weights[2][:, c] * value
    return out.reshape(u.shape[1:])


def gaussian_axis_weights(u, extent, sigma, alpha):
    """ITK's GaussianInterpolateImageFunction along one axis, at pixel positions u (any shape):
    voxels floor(u + 1/2 - cut) .. ceil(u + 1/2 + cut) - 1 (cut = sigma alpha, in voxels) clipped
    to the axis, each weighted erf((i + 1/2 - u) s) - erf((i - 1/2 - u) s), s = 1 / (sqrt(2) sigma).
    Returns the offsets from the first voxel and, per offset, (index, weight) with weight 0 where
    the voxel is outside the region."""
    cut = sigma * alpha
    first = np.maximum(0, np.floor(u + 0.5 - cut)).astype(np.int64)
    end = np.minimum(extent, np.ceil(u + 0.5 + cut)).astype(np.int64)
    s = 1.0 / (np.sqrt(2.0) * sigma)
    taps = []
    for offset in range(int(np.ceil(2 * cut)) + 1):
        index = first + offset
        weight = special.erf((index + 0.5 - u) * s) - special.erf((index - 0.5 - u) * s)
        inside = index < end
        taps.append((np.where(inside, index, 0), np.where(inside, weight, 0.0)))
    return taps


def gaussian_terms(u, sigma_voxels, alpha):
    """Every voxel of each point's region: (flat index, weight) per combination of axis taps."""
    axes = [gaussian_axis_weights(u[axis], SHAPE[axis], sigma_voxels[axis], alpha) for axis in range(3)]
    for i, wi in axes[0]:
        for j, wj in axes[1]:
            for k, wk in axes[2]:
                yield (i * SHAPE[1] + j) * SHAPE[2] + k, wi * wj * wk


def gaussian_mean(volume, u, sigma_voxels, alpha):
    """ITK's Gaussian: the weighted mean of each point's region (renormalised)."""
    flat = volume.ravel()
    weighted, total = np.zeros(u.shape[1:]), np.zeros(u.shape[1:])
    for index, weight in gaussian_terms(u, sigma_voxels, alpha):
        weighted += weight * flat[index]
        total += weight
    with np.errstate(invalid="ignore"):  # points outside ITK's domain: no voxel, NaN (not compared)
        return weighted / total


def label_vote(labels, u, sigma_voxels, alpha):
    """ITK's MultiLabel: per point the label whose voxels' weights sum to the most."""
    flat = labels.ravel()
    sums = {label: np.zeros(u.shape[1:]) for label in np.unique(labels)}
    for index, weight in gaussian_terms(u, sigma_voxels, alpha):
        for label, total in sums.items():
            total += np.where(flat[index] == label, weight, 0.0)
    names = np.array(list(sums))
    return names[np.argmax(np.stack([sums[label] for label in names]), axis=0)].astype(np.float64)


def load(path):
    return np.asarray(nib.load(path).dataobj, dtype=np.float64)


class Volumes(FolderTestCase):
    """The inputs and the transform, written once per test class."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.volume = content(5)
        write_volume(cls.path("f32.nii.gz"), cls.volume.astype(np.float32))
        write_volume(cls.path("f64.nii.gz"), cls.volume)
        write_volume(cls.path("i16.nii.gz"), np.round(cls.volume * 10).astype(np.int16))
        # Labels in bands of a smoother field: regions of a few voxels, with boundaries at every angle.
        field = ndimage.gaussian_filter(np.random.default_rng(11).normal(size=SHAPE), 2.0, mode="wrap")
        cls.labels = LABELS[np.digitize(field, np.quantile(field, np.linspace(0, 1, len(LABELS) + 1)[1:-1]))]
        write_volume(cls.path("labels.nii.gz"), cls.labels)
        write_itk_affine(cls.path("rigid.tfm"), MATRIX, TRANSLATION, CENTER)
        write_itk_affine(cls.path("identity.tfm"), np.eye(3), np.zeros(3), CENTER)
        cls.source = source_indices(MATRIX, TRANSLATION, CENTER)
        halfway = np.abs(cls.source - np.floor(cls.source) - 0.5).min()
        assert halfway > 1e-4, "a point %g voxel from halfway: choose another transform" % halfway
        # The same float32 values as the file, for the oracles.
        cls.volume32 = cls.volume.astype(np.float32).astype(np.float64)

    @classmethod
    def itk(cls, name, input_name="f32.nii.gz", transform="rigid.tfm"):
        """The peer's output with interpolator NAME, as float64."""
        out = cls.path("itk-%s-%s" % (name.replace("[", "").replace("]", ""), input_name))
        result = subprocess.run([arguments().itk_peer, cls.path(input_name), out, cls.path(transform), "1", name],
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise AssertionError("itk_resample_peer %s: %s" % (name, result.stderr))
        return load(out)

    def gridwarp(self, mode, input_name="f32.nii.gz", transform="rigid.tfm"):
        """gridwarp resample's output with --mode MODE, as float64, after checking its voxel type."""
        out = self.path("gridwarp-%s-%s" % (mode.replace("[", "").replace("]", ""), input_name))
        result = run("resample", "-i", self.path(input_name), "-o", out, "-t", self.path(transform), "--mode", mode,
                     *GRIDWARP_OPTIONS)
        self.assertEqual(result.returncode, 0, "gridwarp resample --mode %s: %s" % (mode, result.stderr))
        self.assertEqual(nib.load(out).get_data_dtype(), nib.load(self.path(input_name)).get_data_dtype())
        return load(out)

    def assert_close(self, got, expected, relative, absolute=0.0, where=None, what=""):
        """|got - expected| <= absolute + relative * max(1, |expected|) at every voxel (of WHERE)."""
        if where is None:
            where = np.ones(got.shape, dtype=bool)
        self.assertGreater(where.sum(), 0, what)
        error = np.abs(got - expected)
        allowed = absolute + relative * np.maximum(1.0, np.abs(expected))
        bad = where & (error > allowed)
        if bad.any():
            worst = np.unravel_index(np.argmax(np.where(where, error / allowed, 0)), got.shape)
            self.fail("%s: %d of %d voxels differ; worst at %s: %r against %r (source index %s)"
                      % (what, bad.sum(), where.sum(), tuple(int(v) for v in worst), got[worst], expected[worst],
                         np.round(self.source[(slice(None),) + worst], 4)))


class TheOracle(Volumes):
    """itk_resample_peer does what ITK's documentation says, independently of the modes under test."""

    def test_linear_equals_gridwarp_linear(self):
        self.assert_close(self.gridwarp("linear"), self.itk("linear"), 1e-5, what="linear")

    def test_bspline_of_order_one_is_linear_between_the_edge_voxels(self):
        # Within half a voxel outside, linear repeats the edge voxel where the B-spline mirrors.
        where = interior(self.source, taps_each_side=0)
        self.assertLess(where.sum(), inside_itk(self.source).sum())
        self.assert_close(self.itk("bspline[1]"), self.itk("linear"), 1e-5, where=where, what="bspline[1]")

    def test_bsplines_equal_scipy_mirror_bsplines(self):
        inside = inside_itk(self.source)
        for order in range(6):
            with self.subTest(order=order):
                expected = ndimage.map_coordinates(self.volume32, self.source, order=order, mode="mirror", prefilter=True)
                got = self.itk("bspline[%d]" % order)
                self.assert_close(got, expected, 1e-5, where=inside, what="bspline[%d]" % order)
                self.assertTrue(np.all(got[~inside_itk(self.source, -1e-6)] == 0), "outside not 0")

    def test_windowed_sincs_equal_a_numpy_windowed_sinc(self):
        inside = inside_itk(self.source)
        for name, window in WINDOWS.items():
            with self.subTest(name=name):
                expected = windowed_sinc(self.volume32, self.source, window)
                got = self.itk(name)
                self.assert_close(got, expected, 1e-5, where=inside, what=name)
                self.assertTrue(np.all(got[~inside_itk(self.source, -1e-6)] == 0), "outside not 0")

    def test_gaussian_equals_numpy_erf_weights(self):
        inside = inside_itk(self.source)
        spacing = np.abs(np.diag(AFFINE)[:3])
        for sigma, alpha, name in [(None, 1.0, "gaussian"), (0.7, 2.5, "gaussian[0.7,2.5]")]:
            with self.subTest(name=name):
                sigma_voxels = np.ones(3) if sigma is None else sigma / spacing
                expected = gaussian_mean(self.volume32, self.source, sigma_voxels, alpha)
                got = self.itk(name)
                self.assert_close(got, expected, 1e-5, where=inside, what=name)
                self.assertTrue(np.all(got[~inside_itk(self.source, -1e-6)] == 0), "outside not 0")

    def test_multilabel_is_the_label_of_most_weight(self):
        inside = inside_itk(self.source)
        spacing = np.abs(np.diag(AFFINE)[:3])
        for sigma, alpha, name in [(None, 4.0, "multilabel"), (0.6, 2.0, "multilabel[0.6,2]")]:
            with self.subTest(name=name):
                sigma_voxels = np.ones(3) if sigma is None else sigma / spacing
                expected = label_vote(self.labels, self.source, sigma_voxels, alpha)
                got = self.itk(name, "labels.nii.gz")
                self.assert_close(got, expected, 0.0, where=inside, what=name)
                self.assertTrue(set(np.unique(got)) <= set(LABELS.tolist()))

    def test_a_sinc_on_the_grid_returns_the_voxel(self):
        for name in WINDOWS:
            with self.subTest(name=name):
                self.assert_close(self.itk(name, transform="identity.tfm"), self.volume32, 1e-5, what=name)


class AgainstItk(Volumes):
    """gridwarp resample --padding itk --mode X equals antsApplyTransforms -n X, voxel for voxel."""

    def test_float32(self):
        for mode, name in AGAINST_ITK:
            with self.subTest(mode=mode):
                self.assert_close(self.gridwarp(mode), self.itk(name), RELATIVE, what=mode)

    def test_gaussian_float32(self):
        for mode, name in GAUSSIAN_AGAINST_ITK:
            with self.subTest(mode=mode):
                self.assert_close(self.gridwarp(mode), self.itk(name), RELATIVE, what=mode)

    def test_multilabel_int16_every_voxel_equal(self):
        for mode, name in MULTILABEL_AGAINST_ITK:
            with self.subTest(mode=mode):
                got = self.gridwarp(mode, "labels.nii.gz")
                self.assert_close(got, self.itk(name, "labels.nii.gz"), 0.0, what=mode + " int16")
                self.assertTrue(set(np.unique(got)) <= set(LABELS.tolist()) | {0})

    def test_int16(self):
        for mode, name in AGAINST_ITK_INT16:
            with self.subTest(mode=mode):
                self.assert_close(self.gridwarp(mode, "i16.nii.gz"), self.itk(name, "i16.nii.gz"), 1e-4, absolute=1.0,
                                  what=mode + " int16")

    def test_ants_spellings(self):
        """-n, -f and -u as antsApplyTransforms spells them: the same output as --mode, --fill and --output-type."""
        out = self.path("ants-spelling.nii.gz")
        result = run("resample", "-d", "3", "-i", self.path("f32.nii.gz"), "-o", out, "-t", self.path("rigid.tfm"), "-n",
                     "BSpline[3]", "-u", "default", *GRIDWARP_OPTIONS)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(nib.load(out).get_data_dtype(), np.float32)
        self.assert_close(load(out), self.itk("bspline[3]"), RELATIVE, what="-n BSpline[3]")
        for ants, ours in ((["-f", "7", "-u", "float", "--interpolation", "Linear"], ["--fill", "7", "--output-type", "float"]),
                           (["--default-value", "-3", "--output-data-type", "double"], ["--fill", "-3", "--output-type", "double"]),
                           # A full antsApplyTransforms line: -e 0|3, -v 0|1 and --float change nothing here.
                           (["-e", "0", "-v", "1", "--float", "-n", "Linear", "-u", "float"], ["--mode", "linear", "--output-type", "float"]),
                           (["-e", "3", "-v", "0", "--float", "-u", "float"], ["--output-type", "float"]),
                           (["--input-image-type", "1", "--verbose", "0", "-u", "float"], ["--output-type", "float"])):
            with self.subTest(ants=ants):
                outputs = []
                for spelling in (ants, ours):
                    out = self.path("spelling-%d.nii" % len(outputs))
                    result = run("resample", "-i", self.path("i16.nii.gz"), "-o", out, "-t", self.path("rigid.tfm"), *spelling,
                                 *GRIDWARP_OPTIONS)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    outputs.append(nib.load(out))
                self.assertEqual(outputs[0].get_data_dtype(), outputs[1].get_data_dtype())
                self.assertNotEqual(outputs[0].get_data_dtype(), np.int16)
                self.assertTrue(np.array_equal(outputs[0].get_fdata(), outputs[1].get_fdata()))
        tensors = run("resample", "-d", "3", "-e", "2", "-i", self.path("f32.nii.gz"), "-o", self.path("tensors.nii"))
        self.assertEqual(tensors.returncode, 1, tensors.stderr)
        self.assertIn("-e 2", tensors.stderr)
        self.assertEqual(len(tensors.stderr.strip().splitlines()), 1, tensors.stderr)
        for bad in (["-e", "7"], ["-v", "2"]):
            result = run("resample", "-i", self.path("f32.nii.gz"), "-o", self.path("bad.nii"), *bad)
            self.assertEqual(result.returncode, 2, result.stderr)
        both = run("resample", "-i", self.path("f32.nii.gz"), "-o", self.path("both.nii"), "-t", self.path("rigid.tfm"), "-n",
                   "Linear", "--mode", "nearest")
        self.assertEqual(both.returncode, 2, both.stderr)
        self.assertFalse(os.path.exists(self.path("both.nii")))
        wrong = run("resample", "-d", "2", "-i", self.path("f32.nii.gz"), "-o", self.path("wrong.nii"))
        self.assertEqual(wrong.returncode, 1, wrong.stderr)
        self.assertIn("f32.nii.gz: -d 2 was given, but the image is 3-D", wrong.stderr)
        self.assertFalse(os.path.exists(self.path("wrong.nii")))


class AgainstScipy(Volumes):
    """gridwarp's B-splines equal scipy's (mirror boundary, prefiltered) where every tap is inside."""

    def test_float64_interior(self):
        where = interior(self.source)
        for order, mode in AGAINST_SCIPY.items():
            with self.subTest(mode=mode):
                expected = ndimage.map_coordinates(self.volume, self.source, order=order, mode="mirror", prefilter=True)
                self.assert_close(self.gridwarp(mode, "f64.nii.gz"), expected, RELATIVE_SCIPY, where=where, what=mode)


if __name__ == "__main__":
    main(lambda parser: parser.add_argument("--itk-peer", required=True))
