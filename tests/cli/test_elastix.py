#!/usr/bin/python3
"""elastix TransformParameters files and ITK BSplineTransforms against transformix itself: points
mapped by `gridwarp points --space lps` equal transformix -def's output points (B-splines of order
1-3 on an oblique grid, elastix's column-by-column directions, Euler with and without ComputeZYX,
Similarity, Affine, an initial-transform chain), an ITK .tfm B-spline equals the elastix file of the
same grid, and broken files are refused in one line.

    /usr/bin/python3 tests/cli/test_elastix.py --gridwarp build/app/gridwarp
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

GRID_SIZE = (8, 7, 6)
GRID_SPACING = (5.0, 5.5, 6.0)
GRID_ORIGIN = (-15.0, -16.0, -14.0)


def rotation(a, b, c):
    ca, sa, cb, sb, cc, sc = np.cos(a), np.sin(a), np.cos(b), np.sin(b), np.cos(c), np.sin(c)
    return (np.array([[1, 0, 0], [0, ca, -sa], [0, sa, ca]]) @ np.array([[cb, 0, sb], [0, 1, 0], [-sb, 0, cb]]) @
            np.array([[cc, -sc, 0], [sc, cc, 0], [0, 0, 1]]))


GRID_DIRECTION = rotation(0.2, -0.1, 0.3)


def numbers(values):
    return " ".join(f"{v:.17g}" for v in np.ravel(values))


def elastix_file(transform, parameters, extra="", initial="NoInitialTransform", dimension=3):
    size = " ".join(["20"] * dimension)
    identity = numbers(np.eye(dimension))
    return (f'// elastix layout\n(Transform "{transform}")\n(NumberOfParameters {len(parameters)})\n'
            f"(TransformParameters {numbers(parameters)})\n"
            f'(InitialTransformParametersFileName "{initial}")\n(HowToCombineTransforms "Compose")\n'
            f"(FixedImageDimension {dimension})\n(MovingImageDimension {dimension})\n"
            f'(FixedInternalImagePixelType "float")\n(MovingInternalImagePixelType "float")\n'
            f"(Size {size})\n(Index {' '.join(['0'] * dimension)})\n(Spacing {' '.join(['1.5'] * dimension)})\n"
            f"(Origin {' '.join(['-10'] * dimension)})\n(Direction {identity})\n"
            f'(UseDirectionCosines "true")\n{extra}(ResampleInterpolator "FinalBSplineInterpolator")\n'
            f'(Resampler "DefaultResampler")\n(DefaultPixelValue 0)\n(ResultImageFormat "nii")\n(ResultImagePixelType "float")\n')


def bspline_entries(order):
    return (f"(GridSize {numbers(GRID_SIZE)})\n(GridIndex 0 0 0)\n(GridSpacing {numbers(GRID_SPACING)})\n"
            f"(GridOrigin {numbers(GRID_ORIGIN)})\n(GridDirection {numbers(GRID_DIRECTION.T)})\n"  # column by column
            f'(BSplineTransformSplineOrder {order})\n(UseCyclicTransform "false")\n')


class Elastix(FolderTestCase):
    def setUp(self):
        super().setUp()
        if not shutil.which("transformix"):
            self.skipTest("elastix is not installed")
        rng = np.random.default_rng(3)
        self.coefficients = rng.normal(0, 1.5, size=3 * int(np.prod(GRID_SIZE)))
        # Points inside the B-spline's valid region (control index 1 .. size - 2 for cubic) and a few outside it.
        index = rng.uniform([1.2, 1.2, 1.2], [5.8, 4.8, 3.8], size=(40, 3))
        outside = rng.uniform([-3, -3, -3], [10, 9, 8], size=(8, 3))
        index = np.vstack([index, outside])
        self.points_lps = index @ (GRID_DIRECTION @ np.diag(GRID_SPACING)).T + np.array(GRID_ORIGIN)
        np.save(self.path("points.npy"), self.points_lps)
        with open(self.path("points.txt"), "w") as f:
            f.write(f"point\n{len(self.points_lps)}\n" + "\n".join(numbers(p) for p in self.points_lps) + "\n")

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def transformix(self, parameters, points="points.txt"):
        out = self.path("transformix_" + os.path.basename(parameters))
        os.makedirs(out, exist_ok=True)
        peer = subprocess.run(["transformix", "-def", self.path(points), "-out", out, "-tp", parameters], capture_output=True, text=True)
        self.assertEqual(peer.returncode, 0, peer.stdout[-2000:])
        with open(os.path.join(out, "outputpoints.txt")) as f:
            text = f.read()
        return np.array([[float(v) for v in m.split()] for m in re.findall(r"OutputPoint = \[ ([^\]]*)\]", text)])

    def gridwarp(self, transform, points="points.npy"):
        output = self.path("mapped.npy")
        result = run("points", "-i", self.path(points), "-o", output, "-t", transform, "--space", "lps", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        return np.load(output)

    def test_bspline_of_each_order_equals_transformix(self):
        for order in (1, 2, 3):
            with self.subTest(order=order):
                parameters = self.write(f"bspline{order}.txt", elastix_file("BSplineTransform", self.coefficients, bspline_entries(order)))
                expected = self.transformix(parameters)
                self.assertGreater(np.abs(expected - self.points_lps).max(), 0.5)
                # transformix prints six decimals.
                np.testing.assert_allclose(self.gridwarp(parameters), expected, rtol=0, atol=2e-6)

    def test_linear_kinds_equal_transformix(self):
        centre = "(CenterOfRotationPoint 1.5 -2 3.25)\n"
        cases = {
            "euler_xyz": ("EulerTransform", [0.1, -0.2, 0.3, 4, -5, 6], centre + '(ComputeZYX "false")\n'),
            "euler_zyx": ("EulerTransform", [0.1, -0.2, 0.3, 4, -5, 6], centre + '(ComputeZYX "true")\n'),
            "affine": ("AffineTransform", [1.1, 0.1, -0.05, 0.02, 0.95, 0.1, -0.1, 0.05, 1.05, 3, -2, 1], centre),
            "translation": ("TranslationTransform", [3, -2, 1], ""),
        }
        for name, (kind, values, extra) in cases.items():
            with self.subTest(kind=name):
                parameters = self.write(name + ".txt", elastix_file(kind, values, extra))
                np.testing.assert_allclose(self.gridwarp(parameters), self.transformix(parameters), rtol=0, atol=2e-6)

    def test_similarity_is_itk_similarity3d(self):
        # Debian's transformix lacks the Similarity component: ITK's documented rule instead,
        # p' = s R(v) (p - c) + c + t with R the versor v's rotation.
        v = np.array([0.1, -0.05, 0.2])
        w = np.sqrt(1 - v @ v)
        x, y, z = v
        rotation_matrix = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                                    [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                                    [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        centre, translation, scale = np.array([1.5, -2, 3.25]), np.array([1, 2, -3]), 1.1
        parameters = self.write("similarity.txt", elastix_file("SimilarityTransform", [*v, *translation, scale],
                                                               "(CenterOfRotationPoint 1.5 -2 3.25)\n"))
        expected = (self.points_lps - centre) @ (scale * rotation_matrix).T + centre + translation
        np.testing.assert_allclose(self.gridwarp(parameters), expected, rtol=0, atol=1e-9)

    def test_initial_transform_acts_first(self):
        affine = self.write("TransformParameters.0.txt", elastix_file("AffineTransform", [1.05, 0.1, 0, -0.1, 0.95, 0.05, 0, 0.02, 1.1, 2, -1, 0.5],
                                                                      "(CenterOfRotationPoint 0 0 0)\n"))
        # elastix writes the path it was given; a relative one is found beside the file.
        chained = self.write("TransformParameters.1.txt", elastix_file("BSplineTransform", self.coefficients, bspline_entries(3),
                                                                        initial="TransformParameters.0.txt"))
        here = os.getcwd()
        os.chdir(self.path(""))
        try:
            expected = self.transformix(chained)
        finally:
            os.chdir(here)
        np.testing.assert_allclose(self.gridwarp(chained), expected, rtol=0, atol=2e-6)
        tagged = self.gridwarp(chained + ",elastix")
        np.testing.assert_allclose(tagged, expected, rtol=0, atol=2e-6)
        self.assertGreater(np.abs(expected - self.gridwarp(affine)).max(), 0.5)

    def test_itk_bspline_tfm_equals_the_elastix_grid(self):
        # ITK's BSplineTransform: fixed parameters size, origin, spacing, direction (row by row); the same grid as elastix's.
        fixed = list(GRID_SIZE) + list(GRID_ORIGIN) + list(GRID_SPACING) + list(GRID_DIRECTION.ravel())
        tfm = self.write("bspline.tfm", "#Insight Transform File V1.0\n#Transform 0\nTransform: BSplineTransform_double_3_3\n"
                                        f"Parameters: {numbers(self.coefficients)}\nFixedParameters: {numbers(fixed)}\n")
        parameters = self.write("bspline.txt", elastix_file("BSplineTransform", self.coefficients, bspline_entries(3)))
        np.testing.assert_allclose(self.gridwarp(tfm), self.transformix(parameters), rtol=0, atol=2e-6)
        # Inside an ITK composite with an affine (the last listed acts first).
        composite = self.write("composite.tfm", "#Insight Transform File V1.0\n#Transform 0\nTransform: CompositeTransform_double_3_3\n"
                                                "#Transform 1\nTransform: BSplineTransform_double_3_3\n"
                                                f"Parameters: {numbers(self.coefficients)}\nFixedParameters: {numbers(fixed)}\n"
                                                "#Transform 2\nTransform: TranslationTransform_double_3_3\nParameters: 1 2 3\nFixedParameters:\n")
        # The same transform in ITK's HDF5 layout (read by ITK in a process of its own).
        import h5py
        with h5py.File(self.path("bspline.h5"), "w") as f:
            group = f.create_group("TransformGroup").create_group("0")
            group.create_dataset("TransformType", data=np.array([b"BSplineTransform_double_3_3"], dtype=h5py.string_dtype("ascii")))
            group.create_dataset("TransformFixedParameters", data=np.array(fixed, dtype=np.float64))
            group.create_dataset("TransformParameters", data=self.coefficients)
        np.testing.assert_allclose(self.gridwarp(self.path("bspline.h5")), self.gridwarp(tfm), rtol=0, atol=1e-12)
        shifted = self.points_lps + np.array([1, 2, 3])
        np.save(self.path("shifted.npy"), shifted)
        np.testing.assert_allclose(self.gridwarp(composite), self.gridwarp(tfm, "shifted.npy"), rtol=0, atol=1e-12)

    def test_resample_and_field_output_follow_the_bspline(self):
        parameters = self.write("bspline.txt", elastix_file("BSplineTransform", self.coefficients, bspline_entries(3)))
        import nibabel as nib
        affine = np.diag([-1.5, -1.5, 1.5, 1.0])  # RAS of the LPS grid origin -10 -10 -10 with spacing 1.5
        affine[:3, 3] = [10, 10, -10]
        nib.save(nib.Nifti1Image(np.zeros((20, 20, 20), np.float32), affine), self.path("fixed.nii.gz"))
        result = run("convert-transform", "-t", parameters, "-r", self.path("fixed.nii.gz"), "-o", self.path("field.nii.gz"), "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        out = self.path("transformix_field")
        os.makedirs(out, exist_ok=True)
        peer = subprocess.run(["transformix", "-def", "all", "-out", out, "-tp", parameters], capture_output=True, text=True)
        self.assertEqual(peer.returncode, 0, peer.stdout[-2000:])
        expected = np.asanyarray(nib.load(os.path.join(out, "deformationField.nii")).dataobj).reshape(20, 20, 20, 3)
        got = np.asanyarray(nib.load(self.path("field.nii.gz")).dataobj).reshape(20, 20, 20, 3)
        self.assertGreater(np.abs(expected).max(), 0.5)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
        # transformix -jac all: the determinant of the spatial Jacobian, differentiated analytically;
        # gridwarp's central differences over one voxel agree to their truncation error.
        peer = subprocess.run(["transformix", "-jac", "all", "-out", out, "-tp", parameters], capture_output=True, text=True)
        self.assertEqual(peer.returncode, 0, peer.stdout[-2000:])
        result = run("jacobian", "-t", parameters, "-r", self.path("fixed.nii.gz"), "-o", self.path("jacobian.nii.gz"), "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        expected = np.asanyarray(nib.load(os.path.join(out, "spatialJacobian.nii")).dataobj)
        got = np.asanyarray(nib.load(self.path("jacobian.nii.gz")).dataobj)
        self.assertGreater(np.abs(expected - 1).max(), 0.2)
        # Outside the B-spline's valid region both are 1; on its border the differences straddle it.
        from scipy.ndimage import binary_erosion
        inside = binary_erosion(expected != 1.0, np.ones((3, 3, 3)))
        self.assertGreater(inside.sum(), 500)
        # Central differences over 1.5 mm voxels of a 5 mm B-spline: O(h^2) truncation, 0.047 at most here.
        np.testing.assert_allclose(got[inside], expected[inside], rtol=0, atol=0.06)
        self.assertLess(np.abs(got - expected)[inside].mean(), 0.01)
        far_outside = binary_erosion(expected == 1.0, np.ones((3, 3, 3)), border_value=1)
        np.testing.assert_array_equal(got[far_outside], 1.0)

    def test_broken_files_are_refused_in_one_line(self):
        good = elastix_file("BSplineTransform", self.coefficients, bspline_entries(3))
        cases = {
            "count.txt": (good.replace(f"(NumberOfParameters {len(self.coefficients)})", "(NumberOfParameters 12)"), "NumberOfParameters"),
            "short.txt": (good.replace(numbers(self.coefficients), numbers(self.coefficients[:-1])), "TransformParameters holds"),
            "huge.txt": (good.replace(f"(GridSize {numbers(GRID_SIZE)})", "(GridSize 100000 100000 100000)"), "NumberOfParameters"),
            "unclosed.txt": (good.replace("(GridIndex 0 0 0)", "(GridIndex 0 0 0"), "line"),
            "kind.txt": (elastix_file("SplineKernelTransform", [1, 2, 3]), "not supported"),
            "loop.txt": (elastix_file("TranslationTransform", [1, 2, 3], initial=self.path("loop.txt")), "names itself"),
            "missing.txt": (elastix_file("TranslationTransform", [1, 2, 3], initial=self.path("nowhere.txt")), "not beside it"),
            # A chain is read from one folder: a name elsewhere is looked up beside the file, never followed.
            "outside.txt": (elastix_file("TranslationTransform", [1, 2, 3], initial="/etc/passwd"), "not beside it"),
            "add.txt": (elastix_file("TranslationTransform", [1, 2, 3], initial=self.path("count.txt")).replace('"Compose"', '"Add"'), "Add"),
            "nan.txt": (good.replace("(GridSpacing 5", "(GridSpacing nan"), "finite"),
            "dimension.txt": (elastix_file("TranslationTransform", [1, 2], dimension=2), "Dimension"),
        }
        for name, (text, words) in cases.items():
            with self.subTest(case=name):
                self.write(name, text)
                refused = run("points", "-i", self.path("points.npy"), "-o", self.path("refused.npy"), "-t", self.path(name), "--space", "lps")
                self.assertNotEqual(refused.returncode, 0)
                self.assertIn(words, refused.stderr)
                self.assertEqual(len(refused.stderr.strip().splitlines()), 1, refused.stderr)
                self.assertFalse(os.path.exists(self.path("refused.npy")))


if __name__ == "__main__":
    main()
