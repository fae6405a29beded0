"""What the Python test scripts share: the gridwarp binary under test and how to run it, and the
conventions several of them compute their expectations with (written here from the packages'
documentation, never from gridwarp's output).

A script puts this folder on sys.path, calls main() under `if __name__ == "__main__":`, and runs
gridwarp with run(...).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

FLIP = np.diag([-1.0, -1.0, 1.0, 1.0])  # RAS <-> LPS

_gridwarp = None
_arguments = None


def gridwarp():
    """The path of the gridwarp binary given with --gridwarp."""
    return _gridwarp


def arguments():
    """The parsed command line: --gridwarp and what main's add_arguments added."""
    return _arguments


def run(*args, text=True, timeout=120, **kwargs):
    """gridwarp with ARGS, its output captured."""
    return subprocess.run([_gridwarp, *map(str, args)], capture_output=True, text=text, timeout=timeout, **kwargs)


class FolderTestCase(unittest.TestCase):
    """Tests that share one fresh folder, made before the first and removed after the last:
    cls.folder, and cls.path(name) inside it. A setUpClass of its own calls super().setUpClass()."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="gridwarp-%s-" % cls.__name__.lower())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, ignore_errors=True)

    @classmethod
    def path(cls, name):
        return os.path.join(cls.folder, name)

    def decoded(self, source):
        """The pixels gridwarp reads from `source`, as the (1, C, H, W) it writes to .npy (an identity
        affine with nearest interpolation)."""
        out = self.path(os.path.basename(source) + ".npy")
        result = run("affine", "-i", source, "-o", out, "--scale", "1", "--mode", "nearest", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        return np.load(out)

    def check_writes_as_opencv(self, sources, extension, qualities, quality_flag):
        """Each source image (name -> pixels), written by gridwarp as `extension` with no quality and
        at each of `qualities`, is byte for byte what cv2.imencode writes with `quality_flag`."""
        import cv2  # only the image tests need it
        for name, pixels in sources.items():
            source = self.path(f"{name}.png")
            cv2.imwrite(source, pixels)
            for quality in (None, *qualities):
                with self.subTest(image=name, quality=quality):
                    out = self.path(f"{name}_{quality}{extension}")
                    extra = [] if quality is None else ["--quality", str(quality)]
                    result = run("affine", "-i", source, "-o", out, "--scale", "1", "--mode", "nearest", "-q", *extra)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    params = [] if quality is None else [quality_flag, quality]
                    written, expected = cv2.imencode(extension, pixels, params)
                    self.assertTrue(written)
                    with open(out, "rb") as f:
                        self.assertEqual(f.read(), expected.tobytes())

    def check_forms_decode_as_opencv(self, forms, extension):
        """Each form's file (name -> a function writing it to a path) decodes in gridwarp to the
        pixels OpenCV's imread(IMREAD_UNCHANGED) gives."""
        import cv2  # only the image tests need it
        for name, save in forms.items():
            with self.subTest(form=name):
                source = self.path(name + extension)
                save(source)
                expected = cv2.imread(source, cv2.IMREAD_UNCHANGED)
                self.assertIsNotNone(expected)
                np.testing.assert_array_equal(self.decoded(source), as_npy_image(expected))


def as_npy_image(pixels):
    """OpenCV's (H, W[, C]) as the (1, C, H, W) gridwarp writes to .npy."""
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    return pixels.transpose(2, 0, 1)[None]


def rotation(ax, ay, az):
    """Rz @ Ry @ Rx for angles in radians about x, y and z."""
    cx, sx, cy, sy, cz, sz = np.cos(ax), np.sin(ax), np.cos(ay), np.sin(ay), np.cos(az), np.sin(az)
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx


def fsl_scaled_voxels(img):
    """fslpy's voxToScaledVoxMat: voxel indices to FSL coordinates, the voxel sizes, x mirrored
    first when the voxel-to-world matrix has a positive determinant."""
    zooms = img.header.get_zooms()[:3]
    scale = np.diag(list(zooms) + [1.0])
    if np.linalg.det(img.affine[:3, :3]) > 0:
        flip = np.eye(4)
        flip[0, 0] = -1
        flip[0, 3] = (img.shape[0] - 1) * zooms[0]
        return flip @ scale
    return scale


def store_files(folder):
    """The files under `folder` (a Zarr store), as sorted paths relative to it."""
    names = []
    for parent, _, files in os.walk(folder):
        names += [os.path.relpath(os.path.join(parent, f), folder) for f in files]
    return sorted(names)


def assert_same_files(test, a, b):
    """`test` fails unless folders a and b hold the same files with the same bytes."""
    import filecmp
    test.assertEqual(store_files(a), store_files(b))
    for name in store_files(a):
        test.assertTrue(filecmp.cmp(os.path.join(a, name), os.path.join(b, name), shallow=False), name)


def halve(level):
    """The next level of `level` (C, ...spatial): each voxel the mean of its 2x2(x2) block, an odd
    edge over what there is; integers rounded to nearest, ties to even (NumPy's rounding)."""
    values = level.astype(np.float64)
    total = np.zeros((values.shape[0],) + tuple((n + 1) // 2 if n > 1 else 1 for n in values.shape[1:]))
    count = np.zeros(total.shape[1:])
    spatial = values.shape[1:]
    offsets = np.stack(np.meshgrid(*[[0, 1] if n > 1 else [0] for n in spatial], indexing="ij"), -1).reshape(-1, len(spatial))
    for offset in offsets:
        index = tuple(slice(o, None, 2 if n > 1 else 1) for o, n in zip(offset, spatial))
        part = values[(slice(None),) + index]
        target = tuple(slice(0, s) for s in part.shape[1:])
        total[(slice(None),) + target] += part
        count[target] += 1
    mean = total / count
    if np.issubdtype(level.dtype, np.integer):
        return np.round(mean).astype(level.dtype)
    return mean.astype(level.dtype)


def main(add_arguments=None):
    """Parses --gridwarp (and what add_arguments(parser) adds, which the tests read with
    arguments()), runs the script's tests, and exits 0 only if they were all run and passed."""
    global _gridwarp, _arguments
    parser = argparse.ArgumentParser()
    parser.add_argument("--gridwarp", required=True)
    if add_arguments:
        add_arguments(parser)
    _arguments, rest = parser.parse_known_args()
    _gridwarp = os.path.abspath(_arguments.gridwarp)
    outcome = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    sys.exit(0 if outcome.wasSuccessful() else 1)
