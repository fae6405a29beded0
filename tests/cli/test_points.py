#!/usr/bin/python3
"""gridwarp points and gridwarp jacobian against a NumPy evaluation of ITK's conventions: an affine .tfm (centre, LPS),
a NIfTI displacement field (LPS vectors, linear between its voxels), their chain in resample's
order, RAS and LPS, the inverse by --from-moving, the tables' other cells kept, GIFTI surfaces
made and read back by nibabel, and refusals.

    /usr/bin/python3 tests/cli/test_points.py --gridwarp build/app/gridwarp
"""
import base64
import csv
import os
import re
import shutil
import subprocess
import sys

import nibabel as nib
import numpy as np
from nibabel.gifti import GiftiCoordSystem, GiftiDataArray, GiftiImage, GiftiMetaData

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

LPS = np.diag([-1.0, -1.0, 1.0])
MATRIX = np.array([[0.9, -0.2, 0.05], [0.25, 1.1, 0.0], [-0.1, 0.02, 0.95]])
TRANSLATION = np.array([3.0, -4.5, 2.25])
CENTRE = np.array([1.0, 2.0, -3.0])
FIELD_AFFINE = np.array([[2.0, 0.0, 0.0, -20.0], [0.0, 2.5, 0.0, -18.0], [0.0, 0.0, 3.0, -12.0], [0, 0, 0, 1.0]])


def affine_lps(points):
    """ITK's AffineTransform: A (p - c) + c + t, in LPS."""
    return (points - CENTRE) @ MATRIX.T + CENTRE + TRANSLATION


def field_values(shape):
    i, j, k = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape], indexing="ij")
    return np.stack([np.sin(i / 3.0) * 1.5, np.cos(j / 4.0) * 0.8 + 0.1 * k, 0.05 * i * j / 10.0], axis=-1)


def field_lps(points, vectors):
    """p + d(p): d trilinear at p's continuous index in the field's LPS grid."""
    index_to_lps = LPS @ FIELD_AFFINE[:3, :3]
    index = (points - LPS @ FIELD_AFFINE[:3, 3]) @ np.linalg.inv(index_to_lps).T
    out = []
    for p, x in zip(points, index):
        base = np.floor(x).astype(int)
        f = x - base
        d = np.zeros(3)
        for corner in np.ndindex(2, 2, 2):
            weight = np.prod([f[a] if corner[a] else 1 - f[a] for a in range(3)])
            d += weight * vectors[tuple(base + np.array(corner))]
        out.append(p + d)
    return np.array(out)


class ChainFixture(FolderTestCase):
    """An affine .tfm and a NIfTI field, and points inside the field."""

    def setUp(self):
        super().setUp()
        with open(self.path("affine.tfm"), "w") as f:
            parameters = " ".join(f"{v:.17g}" for v in list(MATRIX.ravel()) + list(TRANSLATION))
            f.write("#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n"
                    f"Parameters: {parameters}\nFixedParameters: {' '.join(f'{v:.17g}' for v in CENTRE)}\n")
        self.vectors = field_values((20, 16, 12))
        warp = nib.Nifti1Image(self.vectors[:, :, :, None, :].astype(np.float64), FIELD_AFFINE)
        warp.header.set_intent("vector")
        nib.save(warp, self.path("warp.nii.gz"))
        # Points well inside the field (its voxels 3..15, 3..12, 2..9), in LPS.
        rng = np.random.default_rng(7)
        index = rng.uniform([3, 3, 2], [15, 12, 9], size=(40, 3))
        self.lps = (index @ FIELD_AFFINE[:3, :3].T + FIELD_AFFINE[:3, 3]) @ LPS.T

    def write_csv(self, name, points, extra=True):
        with open(self.path(name), "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["label", "x", "y", "z", "t", "comment"] if extra else ["x", "y", "z"])
            for k, p in enumerate(points):
                out.writerow([k, *(repr(float(v)) for v in p), 0, f"point {k}, kept"] if extra else [repr(float(v)) for v in p])
        return self.path(name)

    def read_csv(self, name):
        with open(self.path(name), newline="") as f:
            rows = list(csv.DictReader(f))
        return np.array([[float(r["x"]), float(r["y"]), float(r["z"])] for r in rows]), rows

    def points(self, *args):
        result = run("points", *args, "-q")
        self.assertEqual(result.returncode, 0, result.stderr)

class Points(ChainFixture):
    def test_affine_in_lps_and_ras(self):
        self.points("-i", self.write_csv("in.csv", self.lps), "-o", self.path("lps.csv"), "-t", self.path("affine.tfm"), "--space", "lps")
        mapped, rows = self.read_csv("lps.csv")
        np.testing.assert_allclose(mapped, affine_lps(self.lps), rtol=0, atol=1e-12)
        self.assertEqual([r["comment"] for r in rows], [f"point {k}, kept" for k in range(len(rows))])
        self.assertEqual([r["label"] for r in rows], [str(k) for k in range(len(rows))])
        ras = self.lps @ LPS.T
        self.points("-i", self.write_csv("ras.csv", ras), "-o", self.path("ras_out.csv"), "-t", self.path("affine.tfm"))
        np.testing.assert_allclose(self.read_csv("ras_out.csv")[0], affine_lps(self.lps) @ LPS.T, rtol=0, atol=1e-12)

    def test_chain_with_a_field_in_resample_order(self):
        # -t warp -t affine: the warp acts first on the points, then the affine, as resample maps them.
        self.points("-i", self.write_csv("in.csv", self.lps, extra=False), "-o", self.path("out.csv"), "-t", self.path("warp.nii.gz"),
                    "-t", self.path("affine.tfm"), "--space", "lps")
        expected = affine_lps(field_lps(self.lps, self.vectors))
        np.testing.assert_allclose(self.read_csv("out.csv")[0], expected, rtol=0, atol=1e-9)

    def test_from_moving_inverts_the_chain(self):
        self.points("-i", self.write_csv("in.csv", self.lps), "-o", self.path("out.csv"), "-t", self.path("warp.nii.gz"),
                    "-t", self.path("affine.tfm"), "--space", "lps")
        self.points("-i", self.path("out.csv"), "-o", self.path("back.csv"), "-t", self.path("warp.nii.gz"), "-t", self.path("affine.tfm"),
                    "--space", "lps", "--from-moving", "--tolerance", "1e-9")
        np.testing.assert_allclose(self.read_csv("back.csv")[0], self.lps, rtol=0, atol=1e-8)

    def test_inverse_field_undoes_the_field(self):
        # -t warp,inverse: the field inverted on its own grid. At the field's voxel points it undoes
        # the field to the iteration's tolerance; between them, to its linear interpolation.
        index = np.stack(np.meshgrid(np.arange(4, 15), np.arange(4, 11), np.arange(3, 8), indexing="ij"), -1).reshape(-1, 3)
        voxel_points = (index @ FIELD_AFFINE[:3, :3].T + FIELD_AFFINE[:3, 3]) @ LPS.T
        for name, points, tolerance in (("voxels", voxel_points, 1e-5), ("between", self.lps, 0.05)):
            with self.subTest(points=name):
                self.points("-i", self.write_csv(f"{name}.csv", points, extra=False), "-o", self.path(f"{name}_inv.csv"), "-t",
                            self.path("warp.nii.gz") + ",inverse", "--space", "lps")
                inverse, _ = self.read_csv(f"{name}_inv.csv")
                np.testing.assert_allclose(field_lps(inverse, self.vectors), points, rtol=0, atol=tolerance)
        # The same inverse, read by resample: a volume warped by the field and then by its inverse
        # comes back where the field is smooth.
        self.points("-i", self.write_csv("fwd.csv", voxel_points, extra=False), "-o", self.path("fwd_inv.csv"), "-t",
                    self.path("warp.nii.gz"), "-t", self.path("warp.nii.gz") + ",inverse", "--space", "lps")
        np.testing.assert_allclose(self.read_csv("fwd_inv.csv")[0], voxel_points, rtol=0, atol=0.05)

    def test_npy_and_tsv(self):
        np.save(self.path("in.npy"), self.lps.astype(np.float32))
        self.points("-i", self.path("in.npy"), "-o", self.path("out.npy"), "-t", self.path("affine.tfm"), "--space", "lps")
        out = np.load(self.path("out.npy"))
        self.assertEqual((out.dtype, out.shape), (np.float32, (40, 3)))
        np.testing.assert_allclose(out, affine_lps(self.lps.astype(np.float32).astype(np.float64)), rtol=0, atol=1e-5)
        with open(self.path("in.tsv"), "w") as f:
            f.write("x\ty\tz\tname\n" + "".join(f"{p[0]!r}\t{p[1]!r}\t{p[2]!r}\tn{k}\n" for k, p in enumerate(self.lps)))
        self.points("-i", self.path("in.tsv"), "-o", self.path("out.tsv"), "-t", self.path("affine.tfm"), "--space", "lps")
        with open(self.path("out.tsv")) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], "x\ty\tz\tname")
        got = np.array([[float(v) for v in line.split("\t")[:3]] for line in lines[1:]])
        np.testing.assert_allclose(got, affine_lps(self.lps), rtol=0, atol=1e-12)
        self.assertEqual([line.split("\t")[3] for line in lines[1:]], [f"n{k}" for k in range(40)])

    def test_ants_csv_layout(self):
        # antsApplyTransformsToPoints' CSV as ANTs writes it: x,y,z,t,label,comment, an empty comment
        # cell at the end of each row, exponents, CRLF line ends.
        with open(self.path("ants.csv"), "w", newline="") as f:
            f.write("x,y,z,t,label,comment\r\n-1.25e+01,2.5,3,0,1,\r\n4,-5.5,6.125e0,0,2,\r\n")
        self.points("-i", self.path("ants.csv"), "-o", self.path("ants_out.csv"), "-t", self.path("affine.tfm"), "--space", "lps")
        with open(self.path("ants_out.csv")) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], "x,y,z,t,label,comment")
        self.assertEqual([line.split(",")[3:] for line in lines[1:]], [["0", "1", ""], ["0", "2", ""]])
        got = np.array([[float(v) for v in line.split(",")[:3]] for line in lines[1:]])
        np.testing.assert_allclose(got, affine_lps(np.array([[-12.5, 2.5, 3.0], [4.0, -5.5, 6.125]])), rtol=0, atol=1e-12)

    def test_large_table_in_blocks(self):
        # Over 1 MiB a table is parsed and written in one block per thread: the rows come back in
        # order with blank lines, CRLF, quotes and a last line without a line end, and a problem is
        # reported at its own line whichever block holds it.
        rng = np.random.default_rng(3)
        points = rng.uniform(-40, 40, size=(30000, 3))
        lines = ["id,x,y,z,note"]
        for k, p in enumerate(points):
            lines.append(f'{k},{p[0]!r},"{p[1]!r}",{p[2]!r},"row {k}, quoted"' + ("\r" if k % 7 == 0 else ""))
            if k % 1000 == 999:
                lines.append("")
        text = "\n".join(lines)
        self.assertGreater(len(text), 2 << 20)
        with open(self.path("large.csv"), "w", newline="") as f:
            f.write(text)
        for threads in ("1", "2", "3"):
            with self.subTest(threads=threads):
                self.points("-i", self.path("large.csv"), "-o", self.path(f"large_{threads}.csv"), "-t", self.path("affine.tfm"), "--space", "lps",
                            "--threads", threads)
                mapped, rows = self.read_csv(f"large_{threads}.csv")
                np.testing.assert_allclose(mapped, affine_lps(points), rtol=0, atol=1e-12)
                self.assertEqual([r["note"] for r in rows], [f"row {k}, quoted" for k in range(len(points))])
                self.assertEqual([r["id"] for r in rows], [str(k) for k in range(len(points))])
        for row in (5, 25000):
            broken = list(lines)
            line_index = row + 1 + row // 1000  # the header, and a blank line after each thousand rows
            broken[line_index] = broken[line_index].replace(",", ",oops", 1)
            with open(self.path("broken.csv"), "w", newline="") as f:
                f.write("\n".join(broken))
            with self.subTest(row=row):
                result = run("points", "-i", self.path("broken.csv"), "-o", self.path("broken_out.csv"), "-t", self.path("affine.tfm"),
                             "--threads", "2")
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(f"line {line_index + 1}: column x holds 'oops", result.stderr)
                self.assertFalse(os.path.exists(self.path("broken_out.csv")))

    def test_refusals_name_the_file_and_write_nothing(self):
        with open(self.path("no_x.csv"), "w") as f:
            f.write("a,y,z\n1,2,3\n")
        with open(self.path("bad.csv"), "w") as f:
            f.write("x,y,z\n1,2,3\n4,nan,6\n")
        with open(self.path("short.csv"), "w") as f:
            f.write("x,y,z\n1,2\n")
        for name, words in (("no_x.csv", "no x and y"), ("bad.csv", "line 3"), ("short.csv", "too few")):
            with self.subTest(name=name):
                result = run("points", "-i", self.path(name), "-o", self.path("refused.csv"), "-t", self.path("affine.tfm"))
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(name, result.stderr)
                self.assertIn(words, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertFalse(os.path.exists(self.path("refused.csv")))


def pointset_data(document):
    """The <Data> text of a GIFTI document's first DataArray (its pointset here) and what lies around it."""
    match = re.search(rb"<Data>(.*?)</Data>", document, re.S)
    return document[:match.start(1)], match.group(1), document[match.end(1):]


class GiftiSurfaces(ChainFixture):
    """GIFTI surfaces written by nibabel in each encoding, data type and index order, mapped by
    gridwarp points and read back by nibabel: the vertices equal the NumPy evaluation in RAS, and
    every byte of the file but the vertices' data is as it was."""

    def setUp(self):
        super().setUp()
        self.ras = self.lps @ LPS.T
        rng = np.random.default_rng(11)
        self.triangles = rng.integers(0, len(self.ras), size=(30, 3)).astype(np.int32)
        self.thickness = rng.uniform(1, 4, size=len(self.ras)).astype(np.float32)

    def surface(self, name, encoding="B64GZ", datatype="NIFTI_TYPE_FLOAT32", ordering="C", vertices=None):
        """A surface as FreeSurfer's and Workbench's look: metadata, a coordinate system, the
        triangles and a per-vertex array after the vertices."""
        vertices = self.ras if vertices is None else vertices
        coordinates = GiftiCoordSystem(dataspace="NIFTI_XFORM_SCANNER_ANAT", xformspace="NIFTI_XFORM_TALAIRACH",
                                       xform=np.array([[1, 0, 0, 2.5], [0, 1, 0, -1], [0, 0, 1, 4], [0, 0, 0, 1.0]]))
        image = GiftiImage(meta=GiftiMetaData({"AnatomicalStructurePrimary": "CortexLeft", "UserName": "a <b> & 'c'"}), darrays=[
            GiftiDataArray(vertices.astype(np.float32 if datatype.endswith("32") else np.float64), intent="NIFTI_INTENT_POINTSET",
                           datatype=datatype, encoding=encoding, ordering=ordering, coordsys=coordinates,
                           meta={"GeometricType": "Anatomical", "AnatomicalStructureSecondary": "GrayWhite"}),
            GiftiDataArray(self.triangles, intent="NIFTI_INTENT_TRIANGLE", datatype="NIFTI_TYPE_INT32", encoding=encoding),
            GiftiDataArray(self.thickness, intent="NIFTI_INTENT_SHAPE", datatype="NIFTI_TYPE_FLOAT32", encoding=encoding)])
        nib.save(image, self.path(name))
        return self.path(name)

    def check_kept(self, source, output):
        """Everything of `source` but the pointset's <Data> text is in `output` byte for byte, and
        nibabel reads the same triangles, metadata and per-vertex values from both."""
        with open(source, "rb") as f:
            before, _, after = pointset_data(f.read())
        with open(output, "rb") as f:
            out_before, _, out_after = pointset_data(f.read())
        self.assertEqual(out_before, before)
        self.assertEqual(out_after, after)
        read, written = nib.load(source), nib.load(output)
        np.testing.assert_array_equal(written.darrays[1].data, self.triangles)
        np.testing.assert_array_equal(written.darrays[2].data, read.darrays[2].data)  # nibabel's ASCII keeps 6 decimals
        self.assertEqual(dict(written.meta), dict(read.meta))
        self.assertEqual(dict(written.darrays[0].meta), dict(read.darrays[0].meta))
        np.testing.assert_array_equal(written.darrays[0].coordsys.xform, read.darrays[0].coordsys.xform)
        for attribute in ("datatype", "encoding", "endian", "ind_ord"):
            self.assertEqual(getattr(written.darrays[0], attribute), getattr(read.darrays[0], attribute))

    def mapped(self, source, output, *transforms):
        self.points("-i", source, "-o", self.path(output), *transforms)
        return self.path(output)

    def test_every_encoding_type_and_order_through_an_affine(self):
        for encoding in ("ASCII", "B64BIN", "B64GZ"):
            for datatype in ("NIFTI_TYPE_FLOAT32", "NIFTI_TYPE_FLOAT64"):
                for ordering in ("C", "F") if encoding != "ASCII" else ("C",):
                    with self.subTest(encoding=encoding, datatype=datatype, ordering=ordering):
                        name = f"{encoding}_{datatype[-2:]}_{ordering}"
                        source = self.surface(f"{name}.surf.gii", encoding, datatype, ordering)
                        output = self.mapped(source, f"{name}_out.surf.gii", "-t", self.path("affine.tfm"))
                        vertices = nib.load(source).darrays[0].data.astype(np.float64)
                        expected = affine_lps(vertices @ LPS.T) @ LPS.T
                        got = nib.load(output).darrays[0].data
                        self.assertEqual(got.dtype, np.float32 if datatype.endswith("32") else np.float64)
                        # float32 data are rounded once on the way out: half a unit in the last place of ~60 mm.
                        np.testing.assert_allclose(got, expected, rtol=0, atol=4e-6 if datatype.endswith("32") else 1e-12)
                        self.check_kept(source, output)

    def test_field_chain_and_its_inverse(self):
        source = self.surface("chain.surf.gii", "B64GZ", "NIFTI_TYPE_FLOAT64")
        output = self.mapped(source, "chain_out.surf.gii", "-t", self.path("warp.nii.gz"), "-t", self.path("affine.tfm"))
        expected = affine_lps(field_lps(self.lps, self.vectors)) @ LPS.T
        np.testing.assert_allclose(nib.load(output).darrays[0].data, expected, rtol=0, atol=1e-9)
        self.check_kept(source, output)
        back = self.mapped(output, "chain_back.surf.gii", "-t", self.path("warp.nii.gz"), "-t", self.path("affine.tfm"),
                           "--from-moving", "--tolerance", "1e-9")
        np.testing.assert_allclose(nib.load(back).darrays[0].data, self.ras, rtol=0, atol=1e-8)

    def test_big_endian_data(self):
        # nibabel writes the machine's byte order; the same values big-endian, as a SPARC or PowerPC tool would write them.
        source = self.surface("little.surf.gii", "B64BIN", "NIFTI_TYPE_FLOAT32")
        with open(source, "rb") as f:
            before, data, after = pointset_data(f.read())
        swapped = np.frombuffer(base64.b64decode(data), "<f4").astype(">f4").tobytes()
        before = before.replace(b'Endian="LittleEndian"', b'Endian="BigEndian"', 1)
        with open(self.path("big.surf.gii"), "wb") as f:
            f.write(before + base64.b64encode(swapped) + after)
        vertices = nib.load(self.path("big.surf.gii")).darrays[0].data.astype(np.float64)
        np.testing.assert_array_equal(vertices, self.ras.astype(np.float32))
        output = self.mapped(self.path("big.surf.gii"), "big_out.surf.gii", "-t", self.path("affine.tfm"))
        self.assertIn(b'Endian="BigEndian"', open(output, "rb").read())
        np.testing.assert_allclose(nib.load(output).darrays[0].data, affine_lps(vertices @ LPS.T) @ LPS.T, rtol=0, atol=4e-6)

    def test_vertices_to_and_from_tables(self):
        # A surface's vertices written as a table are RAS; a table is not written as a surface (it has no triangles).
        source = self.surface("table.surf.gii", "B64GZ", "NIFTI_TYPE_FLOAT64")
        self.points("-i", source, "-o", self.path("vertices.csv"), "-t", self.path("affine.tfm"))
        np.testing.assert_allclose(self.read_csv("vertices.csv")[0], affine_lps(self.lps) @ LPS.T, rtol=0, atol=1e-12)
        self.points("-i", source, "-o", self.path("vertices.npy"))
        np.testing.assert_array_equal(np.load(self.path("vertices.npy")), self.ras)

    def refused(self, source, words, output="refused.surf.gii", *extra):
        result = run("points", "-i", source, "-o", self.path(output), "-t", self.path("affine.tfm"), *extra)
        self.assertNotEqual(result.returncode, 0)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn(words, result.stderr)
        self.assertFalse(os.path.exists(self.path(output)))
        return result.stderr

    def hostile(self, name, document):
        with open(self.path(name), "wb") as f:
            f.write(document)
        return self.path(name)

    def test_hostile_files_are_refused_in_one_line(self):
        with open(self.surface("good.surf.gii", "B64GZ"), "rb") as f:
            good = f.read()
        before, data, after = pointset_data(good)
        compressed = bytearray(base64.b64decode(data))
        compressed[len(compressed) // 2] ^= 0xFF
        with open(self.surface("good_b64.surf.gii", "B64BIN"), "rb") as f:
            b64_before, b64_data, b64_after = pointset_data(f.read())
        cases = {
            "truncated": (good[:len(good) // 2], "truncated"),
            "not_base64": (before + data[:10] + b"!" + data[11:] + after, "not base64"),
            "short_base64": (before + data[:-3] + after, "groups of four"),
            "corrupt_zlib": (before + base64.b64encode(bytes(compressed)) + after, "zlib"),
            "more_claimed": (before.replace(b'Dim0="40"', b'Dim0="41"', 1) + data + after, "Dim0 x Dim1 = 41 x 3"),
            "fewer_claimed": (b64_before.replace(b'Dim0="40"', b'Dim0="39"', 1) + b64_data + b64_after, "Dim0 x Dim1 = 39 x 3"),
            "huge_claim": (before.replace(b'Dim0="40"', b'Dim0="1000000000000"', 1) + data + after, "compressed bytes can hold"),
            "huge_b64_claim": (b64_before.replace(b'Dim0="40"', b'Dim0="99999999999999999"', 1) + b64_data + b64_after, "Dim0 x Dim1"),
            "not_a_count": (before.replace(b'Dim0="40"', b'Dim0="-4"', 1) + data + after, "not a count"),
            "two_dims": (before.replace(b'Dim1="3"', b'Dim1="2"', 1) + data + after, "expected 3"),
            "external": (before.replace(b'Encoding="GZipBase64Binary"', b'Encoding="ExternalFileBinary"', 1) + data + after,
                         "ExternalFileBinary"),
            "integers": (before.replace(b'NIFTI_TYPE_FLOAT32', b'NIFTI_TYPE_INT32', 1) + data + after, "NIFTI_TYPE_FLOAT32"),
            "no_pointset": (good.replace(b"NIFTI_INTENT_POINTSET", b"NIFTI_INTENT_SHAPE"), "no DataArray has Intent NIFTI_INTENT_POINTSET"),
            "markup_in_data": (before + b"<b>" + data + b"</b>" + after, "holds markup"),
            "mismatched_tags": (good.replace(b"</MetaData>", b"</Meta>", 1), "</Meta> where </MetaData>"),
            "not_gifti": (b'<?xml version="1.0"?><html><body/></html>', "root element is <html>"),
            "not_xml": (bytes(range(256)) * 4, "outside the <GIFTI> element"),
            "deep": (b"<GIFTI>" + b"<a>" * 100000 + b"</a>" * 100000 + b"</GIFTI>", "nest more than"),
            "empty": (b"", "no <GIFTI> element"),
        }
        for name, (document, words) in cases.items():
            with self.subTest(case=name):
                source = self.hostile(f"{name}.surf.gii", document)
                self.assertIn(f"{name}.surf.gii", self.refused(source, words, f"{name}_refused.surf.gii"))

    def test_refusals_of_the_command(self):
        source = self.surface("plain.surf.gii")
        self.refused(source, "RAS", "lps_refused.surf.gii", "--space", "lps")
        self.refused(source, "RAS", "lps_refused.csv", "--space", "lps")
        self.refused(self.write_csv("table.csv", self.ras), "written only from a GIFTI input", "from_table_refused.surf.gii")


def rotation(ax, ay, az):
    cx, sx, cy, sy, cz, sz = np.cos(ax), np.sin(ax), np.cos(ay), np.sin(ay), np.cos(az), np.sin(az)
    return (np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]]) @ np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
            @ np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]]))


class ObliqueReference(ChainFixture):
    """An oblique reference grid (ref.nii.gz) inside the field."""

    def setUp(self):
        super().setUp()
        self.direction = rotation(0.2, -0.1, 0.3)
        self.spacing = np.array([1.7, 1.9, 2.1])
        self.size = (9, 7, 6)  # x, y, z
        centre_lps = ((np.array([10.0, 8.0, 6.0]) @ FIELD_AFFINE[:3, :3].T) + FIELD_AFFINE[:3, 3]) @ LPS.T
        self.index_to_lps = self.direction @ np.diag(self.spacing)
        self.origin = centre_lps - self.index_to_lps @ ((np.array(self.size) - 1) / 2)
        affine = np.eye(4)
        affine[:3, :3] = LPS @ self.index_to_lps
        affine[:3, 3] = LPS @ self.origin
        nib.save(nib.Nifti1Image(np.zeros(self.size, np.float32), affine), self.path("ref.nii.gz"))


class Jacobian(ObliqueReference):
    """gridwarp jacobian on the oblique grid: det of the chain's Jacobian by central differences one
    voxel either side, in physical units (direction and spacing)."""

    def expected(self, chain):
        index = np.stack(np.meshgrid(*[np.arange(n) for n in self.size], indexing="ij"), -1).astype(np.float64)
        columns = []
        for a in range(3):
            step = np.zeros(3)
            step[a] = 1
            ahead = chain((index + step).reshape(-1, 3) @ self.index_to_lps.T + self.origin)
            behind = chain((index - step).reshape(-1, 3) @ self.index_to_lps.T + self.origin)
            columns.append((ahead - behind) / 2)
        jacobian = np.stack(columns, -1)  # (voxels, 3 components, 3 index axes)
        return (np.linalg.det(jacobian) / np.linalg.det(self.index_to_lps)).reshape(self.size)

    def jacobian(self, output, *args):
        result = run("jacobian", "-r", self.path("ref.nii.gz"), "-o", self.path(output), *args, "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        return np.asanyarray(nib.load(self.path(output)).dataobj)

    def test_linear_chain_is_det_a(self):
        got = self.jacobian("linear.nii.gz", "-t", self.path("affine.tfm"))
        np.testing.assert_allclose(got, np.full(self.size, np.linalg.det(MATRIX)), rtol=1e-6)

    def test_field_and_affine_on_an_oblique_grid(self):
        got = self.jacobian("chain.nii.gz", "-t", self.path("warp.nii.gz"), "-t", self.path("affine.tfm"))
        expected = self.expected(lambda p: affine_lps(field_lps(p, self.vectors)))
        self.assertEqual(got.dtype, np.float32)
        np.testing.assert_allclose(got, expected, rtol=2e-6)
        log = self.jacobian("log.nii.gz", "-t", self.path("warp.nii.gz"), "-t", self.path("affine.tfm"), "--log")
        np.testing.assert_allclose(log, np.log(expected), rtol=0, atol=2e-6)

    def test_field_on_its_own_grid_at_every_voxel(self):
        # One field on its own grid is differenced where its vectors lie, past the edge a zero vector:
        # every voxel, the edges included, for float32 and float64 vectors.
        index_to_lps = LPS @ FIELD_AFFINE[:3, :3]
        for dtype in (np.float32, np.float64):
            with self.subTest(dtype=dtype.__name__):
                vectors = self.vectors.astype(dtype)
                padded = np.pad(vectors.astype(np.float64), ((1, 1), (1, 1), (1, 1), (0, 0)))
                jacobian = np.empty(vectors.shape[:3] + (3, 3))
                for a in range(3):
                    ahead, behind = [slice(1, -1)] * 3, [slice(1, -1)] * 3
                    ahead[a], behind[a] = slice(2, None), slice(None, -2)
                    jacobian[..., :, a] = index_to_lps[:, a] + (padded[tuple(ahead)] - padded[tuple(behind)]) / 2
                expected = np.linalg.det(jacobian) / np.linalg.det(index_to_lps)
                warp = nib.Nifti1Image(vectors[:, :, :, None, :], FIELD_AFFINE)
                warp.header.set_intent("vector")
                field, output = self.path(f"own_{dtype.__name__}.nii"), self.path(f"own_jdet_{dtype.__name__}.nii")
                nib.save(warp, field)
                result = run("jacobian", "-t", field, "-r", field, "-o", output, "-q")
                self.assertEqual(result.returncode, 0, result.stderr)
                got = np.asanyarray(nib.load(output).dataobj)
                self.assertEqual(got.shape, vectors.shape[:3])
                np.testing.assert_allclose(got, expected, rtol=1e-6, atol=0)

    def test_resample_modulate_multiplies_by_the_determinant(self):
        i, j, k = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in (20, 16, 12)], indexing="ij")
        nib.save(nib.Nifti1Image((100 + 50 * np.sin(i / 4) * np.cos(j / 5) + k).astype(np.int16), FIELD_AFFINE), self.path("counts.nii.gz"))
        chain = ["-t", self.path("warp.nii.gz"), "-t", self.path("affine.tfm")]
        outputs = {}
        for name, extra in (("plain", []), ("modulated", ["--modulate"])):
            result = run("resample", "-i", self.path("counts.nii.gz"), "-r", self.path("ref.nii.gz"), "-o", self.path(f"{name}.nii"),
                         *chain, "--output-type", "float", *extra, "-q")
            self.assertEqual(result.returncode, 0, result.stderr)
            outputs[name] = np.asanyarray(nib.load(self.path(f"{name}.nii")).dataobj).astype(np.float64)
        determinant = self.expected(lambda p: affine_lps(field_lps(p, self.vectors)))
        np.testing.assert_allclose(outputs["modulated"], outputs["plain"] * determinant, rtol=1e-6, atol=1e-4)
        self.assertGreater(np.abs(determinant - 1).max(), 0.1)
        refused = run("resample", "-i", self.path("counts.nii.gz"), "-r", self.path("ref.nii.gz"), "-o", self.path("refused.nii"), *chain,
                      "--modulate")
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("--output-type", refused.stderr)
        self.assertFalse(os.path.exists(self.path("refused.nii")))

    def smooth_field(self):
        """The same map as an ITK displacement field (gridwarp) and an MRtrix3 deformation field
        (absolute RAS positions) on the oblique grid; returns the grid's LPS points and index."""
        if not shutil.which("warp2metric") or not shutil.which("warpinvert"):
            self.skipTest("MRtrix3 is not installed")
        index = np.stack(np.meshgrid(*[np.arange(n) for n in self.size], indexing="ij"), -1).reshape(-1, 3).astype(np.float64)
        points = index @ self.index_to_lps.T + self.origin

        def chain(p):
            return p + np.stack([1.5 * np.sin(p[:, 0] / 6) + 0.02 * p[:, 1], 0.8 * np.cos(p[:, 1] / 5) * np.sin(p[:, 2] / 7),
                                 0.003 * p[:, 0] * p[:, 2]], -1)
        affine = nib.load(self.path("ref.nii.gz")).affine
        field = nib.Nifti1Image((chain(points) - points).reshape(self.size + (3,))[:, :, :, None, :], affine)
        field.header.set_intent("vector")
        nib.save(field, self.path("smooth_warp.nii.gz"))
        nib.save(nib.Nifti1Image((chain(points) @ LPS.T).reshape(self.size + (3,)), affine), self.path("deformation.nii.gz"))
        return points, index

    def test_equals_mrtrix3_warp2metric_inside_the_grid(self):
        # warp2metric -jdet differences one-sidedly at the grid's edge, gridwarp past it: the outer layer differs by design.
        self.smooth_field()
        peer = subprocess.run(["warp2metric", self.path("deformation.nii.gz"), "-jdet", self.path("mrtrix_jdet.nii"), "-force", "-quiet"],
                              capture_output=True, text=True)
        self.assertEqual(peer.returncode, 0, peer.stderr)
        got = self.jacobian("smooth_jdet.nii", "-t", self.path("smooth_warp.nii.gz"))
        expected = np.asanyarray(nib.load(self.path("mrtrix_jdet.nii")).dataobj)
        inside = (slice(1, -1),) * 3
        np.testing.assert_allclose(got[inside], expected[inside], rtol=0, atol=2e-6)

    def test_inverse_equals_mrtrix3_warpinvert_inside_the_grid(self):
        # warpinvert leaves about 5e-3 mm (measured 4.3e-3 here); gridwarp's inverse meets the field to 1e-6 mm at its voxels.
        points, index = self.smooth_field()
        peer = subprocess.run(["warpinvert", self.path("deformation.nii.gz"), self.path("mrtrix_inverse.nii"), "-force", "-quiet"],
                              capture_output=True, text=True)
        self.assertEqual(peer.returncode, 0, peer.stderr)
        expected = np.asanyarray(nib.load(self.path("mrtrix_inverse.nii")).dataobj).reshape(-1, 3) @ LPS.T
        np.save(self.path("grid_points.npy"), points)
        self.points("-i", self.path("grid_points.npy"), "-o", self.path("grid_inverse.npy"), "-t", self.path("smooth_warp.nii.gz") + ",inverse",
                    "--space", "lps")
        got = np.load(self.path("grid_inverse.npy"))
        inside = np.all((index >= 2) & (index <= np.array(self.size) - 3), axis=1)
        np.testing.assert_allclose(got[inside], expected[inside], rtol=0, atol=1e-2)
    def test_chain_written_as_one_field(self):
        # convert-transform -o FIELD.nii.gz -r REF: ITK's displacement field (LPS mm, float32) of the
        # whole chain at REF's voxels; resampling with it equals resampling with the chain.
        result = run("convert-transform", "-t", self.path("warp.nii.gz"), "-t", self.path("affine.tfm"), "-r", self.path("ref.nii.gz"),
                     "-o", self.path("composed.nii.gz"), "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        written = nib.load(self.path("composed.nii.gz"))
        self.assertEqual(written.shape, self.size + (1, 3))
        self.assertEqual(written.header.get_intent()[0], "vector")
        self.assertEqual(written.get_data_dtype(), np.float32)
        np.testing.assert_allclose(written.affine, nib.load(self.path("ref.nii.gz")).affine, atol=1e-6)
        index = np.stack(np.meshgrid(*[np.arange(n) for n in self.size], indexing="ij"), -1).reshape(-1, 3).astype(np.float64)
        points = index @ self.index_to_lps.T + self.origin
        expected = affine_lps(field_lps(points, self.vectors)) - points
        np.testing.assert_allclose(np.asanyarray(written.dataobj).reshape(-1, 3), expected, rtol=0, atol=1e-5)
        # A smooth moving volume on the field's grid, resampled both ways.
        i, j, k = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in (20, 16, 12)], indexing="ij")
        nib.save(nib.Nifti1Image((100 * np.sin(i / 4) * np.cos(j / 5) + 3 * k).astype(np.float32), FIELD_AFFINE), self.path("moving.nii.gz"))
        outputs = {}
        for name, chain in (("chain", ["-t", self.path("warp.nii.gz"), "-t", self.path("affine.tfm")]),
                            ("field", ["-t", self.path("composed.nii.gz")])):
            result = run("resample", "-i", self.path("moving.nii.gz"), "-r", self.path("ref.nii.gz"), "-o", self.path(f"by_{name}.nii"),
                         *chain, "-q")
            self.assertEqual(result.returncode, 0, result.stderr)
            outputs[name] = np.asanyarray(nib.load(self.path(f"by_{name}.nii")).dataobj)
        np.testing.assert_allclose(outputs["field"], outputs["chain"], rtol=0, atol=1e-3)
        self.assertGreater(np.abs(outputs["chain"]).max(), 10)
        for args, words in ((["-o", self.path("no_ref.nii.gz")], "-r REF"),
                            (["-r", self.path("ref.nii.gz"), "-o", self.path("tagged.nii.gz") + ",afni"], "no displacement field layout"),
                            (["-r", self.path("ref.nii.gz"), "-o", self.path("matrix.tfm")], "cannot be written as a matrix")):
            with self.subTest(args=args):
                refused = run("convert-transform", "-t", self.path("warp.nii.gz"), *args)
                self.assertNotEqual(refused.returncode, 0)
                self.assertIn(words, refused.stderr)


if __name__ == "__main__":
    main()
