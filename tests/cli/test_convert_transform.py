#!/usr/bin/python3
"""gridwarp convert-transform against the packages' documented conventions, computed here with
numpy and nibabel (not by gridwarp):

- FSL FLIRT: the matrix maps the moving image's FSL coordinates to the reference's; FSL coordinates
  are voxel indices scaled by the voxel sizes, x reversed first when the voxel-to-world matrix has a
  positive determinant (fslpy's voxToScaledVoxMat);
- FreeSurfer LTA, LINEAR_RAS_TO_RAS: moving (src) scanner RAS to reference (dst) scanner RAS, with
  each volume's dimensions, voxel sizes, direction columns (xras, yras, zras) and the RAS of voxel
  (N/2, N/2, N/2) (cras);
- NiftyReg: reference RAS to moving RAS; plain RAS and LPS 4x4 matrices; ITK text and Matlab files
  (reference LPS point to moving LPS point, read back by gridwarp itself only as the last check).

    /usr/bin/python3 tests/cli/test_convert_transform.py --gridwarp build/app/gridwarp
"""
import os
import shutil
import sys
import tempfile
import unittest

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FLIP, fsl_scaled_voxels, main, rotation, run  # noqa: E402


def image(folder, name, shape, zooms, axes, oblique=(0, 0, 0), origin=(0, 0, 0)):
    """A NIfTI volume with sform and qform set to the same vox-to-RAS affine: storage axes from
    AXES (a signed permutation), voxel sizes ZOOMS, an oblique rotation and an origin."""
    affine = np.eye(4)
    affine[:3, :3] = rotation(*oblique) @ np.array(axes, dtype=float) @ np.diag(zooms)
    affine[:3, 3] = origin
    img = nib.Nifti1Image(np.zeros(shape, dtype=np.float32), affine)
    img.set_sform(affine, code=1)
    img.set_qform(affine, code=1)
    path = os.path.join(folder, name)
    nib.save(img, path)
    return path, nib.load(path)


def read_matrix(path):
    return np.array([[float(v) for v in line.split()] for line in open(path) if line.strip() and not line.startswith("#")])


def lta_fields(path):
    lines = open(path).read().splitlines()
    start = lines.index("1 4 4") + 1
    matrix = np.array([[float(v) for v in lines[start + i].split()] for i in range(4)])
    blocks = {}
    current = None
    for line in lines[start + 4:]:
        if line.endswith("volume info"):
            current = blocks.setdefault(line.split()[0], {})
        elif current is not None and "=" in line:
            key, value = line.split("=", 1)
            current[key.strip()] = value.split("#")[0].strip()
    return matrix, blocks


def itk_tfm(path, matrix_lps, centre=(0.0, 0.0, 0.0), translation=None):
    m = matrix_lps[:3, :3]
    c = np.array(centre)
    t = matrix_lps[:3, 3] - c + m @ c if translation is None else np.array(translation)
    with open(path, "w") as f:
        f.write("#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n")
        f.write("Parameters: " + " ".join(repr(float(v)) for v in list(m.ravel()) + list(t)) + "\n")
        f.write("FixedParameters: " + " ".join(repr(float(v)) for v in c) + "\n")


class ConvertTransform(unittest.TestCase):
    GEOMETRIES = [
        # (storage axes, zooms, oblique angles): RAS-like (positive determinant), LAS (negative),
        # LPS with a permutation, oblique and anisotropic.
        ([[1, 0, 0], [0, 1, 0], [0, 0, 1]], (2.0, 2.0, 2.0), (0, 0, 0)),
        ([[-1, 0, 0], [0, 1, 0], [0, 0, 1]], (3.0, 3.0, 3.5), (0, 0, 0)),
        ([[0, -1, 0], [-1, 0, 0], [0, 0, 1]], (1.0, 1.2, 2.5), (0.1, -0.2, 0.3)),
        ([[1, 0, 0], [0, 0, 1], [0, -1, 0]], (0.8, 1.5, 1.1), (-0.15, 0.05, 0.25)),
    ]

    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="gridwarp-convert-")

    def tearDown(self):
        shutil.rmtree(self.folder)

    def pairs(self):
        for k, (axes_m, zooms_m, oblique_m) in enumerate(self.GEOMETRIES):
            axes_r, zooms_r, oblique_r = self.GEOMETRIES[(k + 1) % len(self.GEOMETRIES)]
            moving = image(self.folder, f"moving{k}.nii.gz", (20, 18, 16), zooms_m, axes_m, oblique_m, (-10, 12, 5))
            reference = image(self.folder, f"reference{k}.nii", (17, 21, 15), zooms_r, axes_r, oblique_r, (8, -6, 20))
            world = np.eye(4)  # reference LPS point -> moving LPS point
            world[:3, :3] = rotation(0.05 * (k + 1), -0.1, 0.07) * (1.0 + 0.02 * k)
            world[:3, 3] = [3.0 - k, -2.0, 5.5 + k]
            yield k, moving, reference, world

    def convert(self, transform, output, moving, reference):
        result = run("convert-transform", "-t", transform, "-o", output, "-i", moving, "-r", reference, "-q")
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_fsl_matrix(self):
        for k, (mpath, mimg), (rpath, rimg), world in self.pairs():
            with self.subTest(geometry=k):
                tfm = os.path.join(self.folder, f"w{k}.tfm")
                itk_tfm(tfm, world, centre=(1.5, -2.0, 4.0), translation=None)
                out = os.path.join(self.folder, f"w{k}.mat")
                self.convert(tfm, out + ",fsl", mpath, rpath)
                world_ras = FLIP @ world @ FLIP
                expected = fsl_scaled_voxels(rimg) @ np.linalg.inv(rimg.affine) @ np.linalg.inv(world_ras) @ mimg.affine @ \
                    np.linalg.inv(fsl_scaled_voxels(mimg))
                np.testing.assert_allclose(read_matrix(out), expected, atol=2e-8)

    def test_lta_ras_to_ras(self):
        for k, (mpath, mimg), (rpath, rimg), world in self.pairs():
            with self.subTest(geometry=k):
                tfm = os.path.join(self.folder, f"w{k}.tfm")
                itk_tfm(tfm, world)
                out = os.path.join(self.folder, f"w{k}.lta")
                self.convert(tfm, out, mpath, rpath)
                matrix, blocks = lta_fields(out)
                self.assertIn("type      = 1", open(out).read())
                np.testing.assert_allclose(matrix, np.linalg.inv(FLIP @ world @ FLIP), atol=1e-12)
                for block, img, path in (("src", mimg, mpath), ("dst", rimg, rpath)):
                    info = blocks[block]
                    self.assertEqual(info["valid"], "1")
                    self.assertEqual(info["filename"], path)
                    self.assertEqual([int(v) for v in info["volume"].split()], list(img.shape))
                    zooms = np.array(img.header.get_zooms()[:3])
                    np.testing.assert_allclose([float(v) for v in info["voxelsize"].split()], zooms, rtol=1e-6)
                    for axis, key in enumerate(("xras", "yras", "zras")):
                        np.testing.assert_allclose([float(v) for v in info[key].split()], img.affine[:3, axis] / zooms[axis],
                                                   atol=1e-6)
                    centre = img.affine @ np.array([img.shape[0] / 2, img.shape[1] / 2, img.shape[2] / 2, 1.0])
                    np.testing.assert_allclose([float(v) for v in info["cras"].split()], centre[:3], atol=1e-5)

    def test_world_matrices(self):
        (_, _, _, world) = next(iter(self.pairs()))
        tfm = os.path.join(self.folder, "w.tfm")
        itk_tfm(tfm, world, centre=(4.0, 5.0, 6.0))
        for tag, expected in (("ras", FLIP @ world @ FLIP), ("lps", world), ("niftyreg", FLIP @ world @ FLIP)):
            with self.subTest(tag=tag):
                out = os.path.join(self.folder, f"w_{tag}.txt")
                result = run("convert-transform", "-t", tfm, "-o", out + "," + tag, "-q")
                self.assertEqual(result.returncode, 0, result.stderr)
                np.testing.assert_allclose(read_matrix(out), expected, atol=2e-9)

    def test_info_prints_the_ras_map(self):
        import json
        (_, _, _, world) = next(iter(self.pairs()))
        tfm = os.path.join(self.folder, "w.tfm")
        itk_tfm(tfm, world, centre=(4.0, 5.0, 6.0))
        result = run("info", tfm, "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = np.array(json.loads(result.stdout)["reference_ras_to_moving_ras"])
        np.testing.assert_allclose(rows, (FLIP @ world @ FLIP)[:3], atol=1e-12)

    def test_itk_text_and_matlab_round_trip(self):
        (_, _, _, world) = next(iter(self.pairs()))
        tfm = os.path.join(self.folder, "w.tfm")
        itk_tfm(tfm, world, centre=(4.0, 5.0, 6.0))
        mat = os.path.join(self.folder, "w.mat")
        again = os.path.join(self.folder, "again.tfm")
        self.assertEqual(run("convert-transform", "-t", tfm, "-o", mat + ",itk", "-q").returncode, 0)
        self.assertEqual(run("convert-transform", "-t", mat, "-o", again, "-q").returncode, 0)
        # The Matlab file as ITK and ANTs write it: a 12-vector named by the type, then "fixed".
        data = open(mat, "rb").read()
        header = np.frombuffer(data[:20], dtype="<i4")
        self.assertEqual(list(header), [0, 12, 1, 0, len("AffineTransform_double_3_3") + 1])
        fields = dict(line.split(": ", 1) for line in open(again).read().splitlines() if ": " in line)
        parameters = np.array([float(v) for v in fields["Parameters"].split()])
        np.testing.assert_allclose(parameters[:9], world[:3, :3].ravel(), atol=1e-15)
        np.testing.assert_allclose(parameters[9:], world[:3, 3], atol=1e-12)
        self.assertEqual(fields["FixedParameters"].split(), ["0", "0", "0"])

    def test_a_chain_collapses(self):
        (_, _, _, world) = next(iter(self.pairs()))
        first, second = os.path.join(self.folder, "a.tfm"), os.path.join(self.folder, "b.tfm")
        other = np.eye(4)
        other[:3, :3] = rotation(0.3, 0.0, -0.2)
        other[:3, 3] = [1.0, 2.0, 3.0]
        itk_tfm(first, world)
        itk_tfm(second, other)
        out = os.path.join(self.folder, "chain.txt")
        # -t A -t B maps p to B(A(p)), as antsApplyTransforms does.
        result = run("convert-transform", "-t", first, "-t", second, "-o", out + ",lps", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        np.testing.assert_allclose(read_matrix(out), other @ world, atol=1e-9)
        inverted = os.path.join(self.folder, "inverse.txt")
        result = run("convert-transform", "-t", first + ",inverse", "-o", inverted + ",lps", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        np.testing.assert_allclose(read_matrix(inverted), np.linalg.inv(world), atol=1e-9)

    def test_every_format_reads_back(self):
        """Written by convert-transform, read back by gridwarp's reader of that format: the same map
        (FSL -> ITK -> LTA -> FSL among them, the matrix back to 1e-5)."""
        for k, (mpath, _), (rpath, _), world in self.pairs():
            tfm = os.path.join(self.folder, f"w{k}.tfm")
            itk_tfm(tfm, world, centre=(2.0, -1.0, 3.0))
            for name in ("x.lta", "x.aff12.1D", "x.mat,itk", "x.mat,fsl", "x.txt,niftyreg", "x.txt,ras", "x.txt,lps"):
                with self.subTest(geometry=k, output=name):
                    out = os.path.join(self.folder, name)
                    self.convert(tfm, out, mpath, rpath)
                    back = os.path.join(self.folder, "back.txt")
                    self.convert(out, back + ",lps", mpath, rpath)
                    np.testing.assert_allclose(read_matrix(back), world, atol=1e-7)
            with self.subTest(geometry=k, chain="fsl -> itk -> lta -> fsl"):
                fsl = os.path.join(self.folder, "first.mat")
                self.convert(tfm, fsl + ",fsl", mpath, rpath)
                chain = [(fsl + ",fsl", "hop.tfm"), ("hop.tfm", "hop.lta"), ("hop.lta", "again.mat,fsl")]
                for source, target in chain:
                    source = source if os.path.isabs(source) else os.path.join(self.folder, source)
                    self.convert(source, os.path.join(self.folder, target), mpath, rpath)
                np.testing.assert_allclose(read_matrix(os.path.join(self.folder, "again.mat")), read_matrix(fsl), atol=1e-5)

    def test_refusals(self):
        tfm = os.path.join(self.folder, "w.tfm")
        itk_tfm(tfm, np.eye(4))
        cases = [
            (["-t", tfm, "-o", os.path.join(self.folder, "x.txt")], "add a tag"),
            (["-t", tfm, "-o", os.path.join(self.folder, "x.mat")], "add a tag"),
            (["-t", tfm, "-o", os.path.join(self.folder, "x.mat") + ",fsl"], "-i"),
            (["-t", tfm, "-o", os.path.join(self.folder, "x.lta")], "-i"),
            (["-t", tfm, "-o", tfm], "w.tfm"),
            (["-t", tfm, "-o", os.path.join(self.folder, "x.tfm") + ",inverse"], "format tag only"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                result = run("convert-transform", *args)
                self.assertEqual(result.returncode, 1, result.stderr)
                lines = result.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, result.stderr)
                self.assertIn(needle, lines[0])
        self.assertEqual(sorted(os.listdir(self.folder)), ["w.tfm"])


if __name__ == "__main__":
    main()
