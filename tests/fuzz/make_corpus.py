#!/usr/bin/python3
"""Writes the fuzz targets' seed corpus, tests/fuzz/corpus/<target>/, from the bundled and test files
and a few hand-made seeds (tests/fuzz/README.md). Deterministic: running it again gives the same files.

Run with Debian's Python (numpy, nibabel, OpenCV): /usr/bin/python3 tests/fuzz/make_corpus.py
Seeds of targets that take a selector byte (see each target's comment) start with that byte.
"""
import gzip
import hashlib
import io
import json
import shutil
import struct
import zlib
from pathlib import Path

import nibabel as nib
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
LARGEST_SEED = 16 * 1024  # bigger seeds slow every execution; the interesting bytes are headers


def put(target, name, data):
    if len(data) > LARGEST_SEED:
        raise SystemExit(f"seed {target}/{name} is {len(data)} bytes, more than {LARGEST_SEED}")
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def npy_bytes(array, fortran=False):
    buffer = io.BytesIO()
    np.save(buffer, np.asfortranarray(array) if fortran else array)
    return buffer.getvalue()


def npy_seeds():
    for file in sorted((ROOT / "tests" / "data" / "npy").glob("*.npy")):
        if file.stat().st_size <= 4096:
            put("fuzz_npy", file.name, file.read_bytes())
    # A few ONNX conformance and oracle inputs: real shapes of rank 3 to 5.
    picked = 0
    for file in sorted((ROOT / "tests" / "data" / "onnx").rglob("*.npy")):
        if file.stat().st_size <= 2048 and picked < 12:
            put("fuzz_npy", "onnx_" + hashlib.sha1(str(file.relative_to(ROOT)).encode()).hexdigest()[:10] + ".npy",
                file.read_bytes())
            picked += 1
    put("fuzz_npy", "rank6_ones.npy", npy_bytes(np.zeros((1,) * 6, np.float32)))
    put("fuzz_npy", "rank32.npy", npy_bytes(np.zeros((1,) * 32, np.uint8)))
    put("fuzz_npy", "fortran_u2.npy", npy_bytes(np.arange(24, dtype=">u2").reshape(2, 3, 4), fortran=True))
    put("fuzz_npy", "zero_extent.npy", npy_bytes(np.zeros((0, 3, 5), np.float64)))
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    header += b" " * (117 - len(header)) + b"\n"
    put("fuzz_npy", "version2.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header)) + header + bytes(24))
    put("fuzz_npy", "version3_utf8.npy", b"\x93NUMPY\x03\x00" + struct.pack("<I", len(header)) + header + bytes(24))


def flo_bytes(flow):
    height, width, _ = flow.shape
    return b"PIEH" + struct.pack("<ii", width, height) + flow.astype("<f4").tobytes()


def flo_seeds():
    # data/swirl.flo is 600 KB: its top-left corner, as a .flo of its own, keeps its values.
    swirl = (ROOT / "data" / "swirl.flo").read_bytes()
    width, height = struct.unpack("<ii", swirl[4:12])
    field = np.frombuffer(swirl[12:], "<f4").reshape(height, width, 2)
    put("fuzz_flo", "swirl_corner.flo", flo_bytes(field[:16, :16]))
    put("fuzz_flo", "one_pixel.flo", flo_bytes(np.array([[[0.5, -1.25]]], np.float32)))
    unknown = np.zeros((3, 4, 2), np.float32)
    unknown[1, 2] = (1e10, 0)
    unknown[2, 3] = (0, -1e9)
    put("fuzz_flo", "unknown_marks.flo", flo_bytes(unknown))
    put("fuzz_flo", "truncated.flo", flo_bytes(np.ones((2, 2, 2), np.float32))[:-4])


def png_chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def png16_rgb(rgb):
    """A 16-bit RGB PNG of an (H, W, 3) uint16 array, written chunk by chunk."""
    height, width, _ = rgb.shape
    rows = b"".join(b"\x00" + rgb[y].astype(">u2").tobytes() for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)) +
            png_chunk(b"IDAT", zlib.compress(rows, 9)) + png_chunk(b"IEND", b""))


def kitti_seeds():
    rng = np.random.default_rng(25)
    flow = np.zeros((4, 5, 3), np.uint16)
    flow[..., 0] = 32768 + rng.integers(-640, 640, (4, 5))
    flow[..., 1] = 32768 + rng.integers(-640, 640, (4, 5))
    flow[..., 2] = rng.integers(0, 2, (4, 5))
    put("fuzz_kitti_png", "kitti_4x5.png", b"\x00" + png16_rgb(flow))
    put("fuzz_kitti_png", "kitti_1x1_invalid.png", b"\x00" + png16_rgb(np.array([[[40000, 20000, 0]]], np.uint16)))
    put("fuzz_kitti_png", "kitti_bad_crc.png", b"\x01" + png16_rgb(flow)[:-1] + b"\x00")
    # Not KITTI: 8-bit grey, and the bundled card's PNG header cut short (its IDAT is 56 KB).
    grey = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 0, 0, 0, 0)) +
            png_chunk(b"IDAT", zlib.compress(b"\x00\x01\x02\x00\x03\x04")) + png_chunk(b"IEND", b""))
    put("fuzz_kitti_png", "grey8.png", b"\x00" + grey)
    put("fuzz_kitti_png", "card_head.png", b"\x00" + (ROOT / "data" / "card.png").read_bytes()[:512])


def bmp_bytes(width, height, bits, rows, palette=b"", info_size=40, compression=0):
    """A BMP of `rows` (stored order, each padded to 4 bytes here) with a BITMAPINFOHEADER or a later one."""
    stride = (width * bits + 31) // 32 * 4
    data = b"".join(row + b"\x00" * (stride - len(row)) for row in rows) if compression == 0 else b"".join(rows)
    offset = 14 + info_size + len(palette)
    info = struct.pack("<IiiHHIIiiII", info_size, width, height, 1, bits, compression, len(data), 2835, 2835,
                       len(palette) // 4, 0) + b"\x00" * (info_size - 40)
    return b"BM" + struct.pack("<IHHI", offset + len(data), 0, 0, offset) + info + palette + data


def bmp_seeds():
    import cv2
    rng = np.random.default_rng(9)
    colour = rng.integers(0, 256, (5, 7, 3), np.uint8)
    for channels, image in ((3, colour), (1, colour[..., 0].copy()), (4, np.dstack([colour, colour[..., :1]]))):
        ok, encoded = cv2.imencode(".bmp", image)
        assert ok
        put("fuzz_bmp", f"opencv_c{channels}.bmp", encoded.tobytes())
    rows24 = [bytes(rng.integers(0, 256, 9, np.uint8)) for _ in range(4)]
    put("fuzz_bmp", "top_down_24.bmp", bmp_bytes(3, -4, 24, rows24))
    put("fuzz_bmp", "v5_header_24.bmp", bmp_bytes(3, 4, 24, rows24, info_size=124))
    grey_inverted = b"".join(bytes([255 - i] * 3 + [0]) for i in range(256))
    rows8 = [bytes(rng.integers(0, 256, 5, np.uint8)) for _ in range(3)]
    put("fuzz_bmp", "grey_inverted_8.bmp", bmp_bytes(5, 3, 8, rows8, grey_inverted))
    colour_palette = b"".join(bytes([i, 255 - i, i // 2, 0]) for i in range(16))
    put("fuzz_bmp", "colour_4.bmp", bmp_bytes(6, 2, 4, [b"\x01\x23\x45", b"\x67\x89\xab"], colour_palette))
    # RLE8: a run of 4 of index 1, 2 literal pixels, end of line; then end of bitmap.
    rle = [b"\x04\x01\x00\x02\x02\x03\x00\x00", b"\x06\x05\x00\x00", b"\x00\x01"]
    put("fuzz_bmp", "rle8.bmp", bmp_bytes(6, 2, 8, rle, grey_inverted, compression=1))
    put("fuzz_bmp", "os2_core.bmp", b"BM" + struct.pack("<IHHI", 26 + 12, 0, 0, 26) +
        struct.pack("<IHHHH", 12, 2, 2, 1, 24) + b"\x01\x02\x03\x04\x05\x06\x00\x00" * 2)


def text_matrix_seeds():
    seeds = {
        "affine_2x3.txt": "1 0 0\n0 1 0\n",
        "homogeneous_4x4.txt": "# a comment\n0.98 -0.17 0 1.5\n0.17 0.98 0 -2\n0 0 1 0\n0 0 0 1\n",
        "commas_tabs.txt": "1,\t0,\t3\r\n0,1,4 # trailing\r\n\r\n",
        "semicolons.txt": "1;0;0;0\n0;1;0;0\n0;0;1;0\n",
        "exponents.txt": "1e-3 -2.5E+2 .5\n-0 5. 1e308\n",
        "ragged.txt": "1 2 3\n4 5\n",
    }
    for name, text in seeds.items():
        put("fuzz_text_matrix", name, text.encode())


def matlab_vector(name, values, single=False, big_endian=False):
    """One Matlab v4 column vector as vnl_matlab_write writes it."""
    order = ">" if big_endian else "<"
    kind = (1000 if big_endian else 0) + (10 if single else 0)
    encoded = name.encode() + b"\x00"
    head = struct.pack(order + "5i", kind, len(values), 1, 0, len(encoded))
    return head + encoded + np.asarray(values, order + ("f4" if single else "f8")).tobytes()


def itk_text(transforms):
    lines = ["#Insight Transform File V1.0"]
    for index, (kind, parameters, fixed) in enumerate(transforms):
        lines.append(f"#Transform {index}")
        lines.append(f"Transform: {kind}")
        if parameters is not None:
            lines.append("Parameters: " + " ".join(repr(float(v)) for v in parameters))
            lines.append("FixedParameters: " + " ".join(repr(float(v)) for v in fixed))
    return ("\n".join(lines) + "\n").encode()


def itk_transform_seeds():
    text, matlab, two_d, three_d = 0, 1, 0, 2
    put("fuzz_itk_transform", "tilt.tfm", bytes([text | three_d]) + (ROOT / "data" / "tilt.tfm").read_bytes())
    affine3 = [1, 0.1, 0, -0.1, 1, 0, 0, 0, 1.2, 5, -3, 2]
    seeds3 = {
        "euler3d.tfm": [("Euler3DTransform_double_3_3", [0.1, -0.2, 0.3, 1, 2, 3], [4, 5, 6, 0])],
        "versor_rigid.tfm": [("VersorRigid3DTransform_double_3_3", [0.1, 0, 0.05, 1, 2, 3], [0, 0, 0])],
        "similarity3d.tfm": [("Similarity3DTransform_double_3_3", [0, 0.2, 0, 1, 2, 3, 1.5], [1, 1, 1])],
        "scale_versor.tfm": [("ScaleVersor3DTransform_double_3_3", [0, 0, 0.1, 1, 2, 3, 1, 1.1, 0.9], [0, 0, 0])],
        "translation3d.tfm": [("TranslationTransform_double_3_3", [1, 2, 3], [])],
        "composite.tfm": [("CompositeTransform_double_3_3", None, None),
                          ("AffineTransform_double_3_3", affine3, [1, 2, 3]),
                          ("TranslationTransform_float_3_3", [0.5, 0, 0], [])],
        "bspline.tfm": [("BSplineTransform_double_3_3", [0] * 24, [2, 2, 2, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1])],
    }
    for name, transforms in seeds3.items():
        put("fuzz_itk_transform", name, bytes([text | three_d]) + itk_text(transforms))
    seeds2 = {
        "affine2d.tfm": [("AffineTransform_double_2_2", [1, 0.2, -0.2, 1, 3, 4], [10, 20])],
        "euler2d.tfm": [("Euler2DTransform_double_2_2", [0.3, 1, 2], [5, 5])],
        "similarity2d.tfm": [("Similarity2DTransform_double_2_2", [1.2, 0.3, 1, 2], [5, 5])],
        "centered_rigid2d.tfm": [("CenteredRigid2DTransform_double_2_2", [0.3, 5, 5, 1, 2], [])],
    }
    for name, transforms in seeds2.items():
        put("fuzz_itk_transform", name, bytes([text | two_d]) + itk_text(transforms))
    put("fuzz_itk_transform", "affine3d.mat", bytes([matlab | three_d]) +
        matlab_vector("AffineTransform_double_3_3", affine3) + matlab_vector("fixed", [1, 2, 3]))
    put("fuzz_itk_transform", "affine3d_float_be.mat", bytes([matlab | three_d]) +
        matlab_vector("AffineTransform_float_3_3", affine3, single=True, big_endian=True) +
        matlab_vector("fixed", [1, 2, 3], single=True, big_endian=True))
    put("fuzz_itk_transform", "euler2d.mat", bytes([matlab | two_d]) +
        matlab_vector("Euler2DTransform_double_2_2", [0.3, 1, 2]) + matlab_vector("fixed", [5, 5]))
    put("fuzz_itk_transform", "two_transforms.mat", bytes([matlab | three_d]) +
        matlab_vector("Euler3DTransform_double_3_3", [0.1, 0.2, 0.3, 1, 2, 3]) + matlab_vector("fixed", [0, 0, 0]) +
        matlab_vector("ScaleTransform_double_3_3", [1, 2, 3]) + matlab_vector("fixed", [0, 0, 0]))


def nifti_images():
    """Small NIfTI images in the variants the codec reads: NIfTI-1/-2, both byte orders, scaling,
    sform and qform, 4-D and 5-D vector data, RGB."""
    rng = np.random.default_rng(2025)
    affine = np.array([[-2, 0.1, 0, 30], [0, 2, 0.2, -40], [0, 0, 2.5, 12], [0, 0, 0, 1]], float)
    images = {}
    image = nib.Nifti1Image(rng.integers(-100, 100, (4, 3, 2)).astype(np.int16), affine)
    image.header.set_qform(affine, 1)
    image.header.set_sform(affine, 2)
    images["n1_i2_sform_qform"] = image
    scaled = nib.Nifti1Image(rng.integers(0, 255, (3, 3, 2)).astype(np.uint8), np.eye(4))
    scaled.header.set_slope_inter(0.5, -3)
    images["n1_u1_scaled"] = scaled
    images["n2_f4"] = nib.Nifti2Image(rng.standard_normal((3, 2, 2)).astype(np.float32), affine)
    images["n1_f8_series"] = nib.Nifti1Image(rng.standard_normal((2, 2, 2, 3)), affine)
    field = nib.Nifti1Image(rng.standard_normal((3, 2, 2, 1, 3)).astype(np.float32), affine)
    field.header.set_intent("vector")
    images["n1_vector_field"] = field
    images["n1_f4_2d"] = nib.Nifti1Image(rng.standard_normal((5, 4)).astype(np.float32), np.eye(4))
    rgb = np.zeros((3, 2, 1), dtype=[("R", "u1"), ("G", "u1"), ("B", "u1")])
    images["n1_rgb24"] = nib.Nifti1Image(rgb, np.eye(4))
    encoded = {name: image.to_bytes() for name, image in images.items()}
    # Big endian: nibabel writes the header in the byte order it is given.
    values = rng.integers(0, 1000, (3, 2, 2)).astype(">i4")
    header = nib.Nifti1Header(endianness=">")
    header.set_data_dtype(">i4")
    big_endian = nib.Nifti1Image(values, affine, header)
    encoded["n1_i4_big_endian"] = big_endian.to_bytes()
    if encoded["n1_i4_big_endian"][:4] != struct.pack(">i", 348):
        raise SystemExit("nibabel wrote the big-endian seed little-endian")
    return encoded


def nifti_seeds():
    for name, data in nifti_images().items():
        header_length = 540 if name.startswith("n2") else 348
        put("fuzz_nifti_header", name + ".hdr", data[:header_length])
        put("fuzz_nifti_file", name + ".nii", b"\x00" + data)
        put("fuzz_nifti_file", name + ".nii.gz", b"\x01" + gzip.compress(data, 6, mtime=0))
        put("fuzz_nifti_file", name + ".gzme", b"\x02" + data)
    for file in sorted((ROOT / "tests" / "data" / "images").glob("*.nii.gz")):
        put("fuzz_nifti_file", file.name, b"\x01" + file.read_bytes())
        put("fuzz_nifti_header", file.stem + ".hdr", gzip.decompress(file.read_bytes())[:348])
    put("fuzz_nifti_header", "brain.hdr", gzip.decompress((ROOT / "data" / "brain.nii.gz").read_bytes())[:352])


def mgh_seeds():
    rng = np.random.default_rng(2026)
    affine = np.array([[-2, 0.1, 0, 30], [0, 0.2, 2, -40], [0, -2.5, 0, 12], [0, 0, 0, 1]], float)
    images = {
        "u1": nib.MGHImage(rng.integers(0, 255, (4, 3, 2)).astype(np.uint8), affine),
        "i2_frames": nib.MGHImage(rng.integers(-100, 100, (3, 3, 2, 3)).astype(np.int16), affine),
        "i4": nib.MGHImage(rng.integers(-1000, 1000, (3, 2, 2)).astype(np.int32), affine),
        "f4": nib.MGHImage(rng.standard_normal((3, 2, 2)).astype(np.float32), affine),
    }
    images["f4"].header["tr"] = 2300.0
    for name, image in images.items():
        data = image.to_bytes()
        put("fuzz_mgh_file", name + ".mgh", b"\x00" + data)
        put("fuzz_mgh_file", name + ".mgz", b"\x01" + gzip.compress(data, 6, mtime=0))
        put("fuzz_mgh_file", name + ".gzme", b"\x02" + data)


def mif_seeds():
    """MRtrix3 images as its reader meets them: the hostile corpus's valid image, a big-endian int16
    one with another layout and scaling, and a 4-D one."""
    hostile = ROOT / "tests" / "data" / "hostile"
    images = {"f4": (hostile / "control_valid.mif").read_bytes()}

    def mif(fields, voxels):
        text = "mrtrix image\n" + "".join("%s: %s\n" % item for item in fields)
        head = text + "file: . %d\nEND\n"
        offset = len(head % 0) + 8
        return (head % offset).ljust(offset).encode() + voxels

    transform = [("transform", "0.9,0.1,0,-10"), ("transform", "-0.1,0.9,0,5"), ("transform", "0,0,1,2")]
    images["i2_be"] = mif([("dim", "3,2,2"), ("vox", "1.5,2,2.5"), ("layout", "-2,+0,+1"), ("datatype", "Int16BE"),
                           ("scaling", "-1,0.5")] + transform, np.arange(12, dtype=">i2").tobytes())
    images["u1_4d"] = mif([("dim", "2,2,2,3"), ("vox", "1,1,1,2"), ("layout", "+1,+2,+3,+0"), ("datatype", "UInt8")] + transform,
                          np.arange(24, dtype="u1").tobytes())
    for name, data in images.items():
        put("fuzz_mif_file", name + ".mif", b"\x00" + data)
        put("fuzz_mif_file", name + ".mif.gz", b"\x01" + gzip.compress(data, 6, mtime=0))
        put("fuzz_mif_file", name + ".gzme", b"\x02" + data)


def dicom_seeds():
    """Two slices of the hostile corpus's valid series, split at their boundary."""
    folder = ROOT / "tests" / "data" / "hostile" / "control_valid_dicom"
    first, second = (folder / "s0.dcm").read_bytes(), (folder / "s1.dcm").read_bytes()
    total = len(first) + len(second)
    put("fuzz_dicom_series", "two_slices", bytes([(len(first) * 255 + total - 1) // total]) + first + second)


def batch_seeds():
    csv, tsv, jsonl = b"\x00", b"\x01", b"\x02"
    seeds = {
        "simple.csv": csv + b"input,output\nin/a.png,out/a.png\nb.nii.gz,/tmp/b.nii.gz\n",
        "quoted.csv": csv + b'input,output,rotate\r\n"a,b.png","c ""d"".png",15\r\n"multi\nline.png",e.png,\n',
        "transforms.csv": csv + b"input,output,transform\na.nii,b.nii,[t1.mat,1];t2.tfm,inverse;field.nii.gz\n",
        "unclosed.csv": csv + b'input,output\n"a.png,b.png\n',
        "simple.tsv": tsv + b"input\toutput\tmode\na.png\tb.png\tcubic\n\nc.png\td.png\t\r\n",
        "simple.jsonl": jsonl + b'{"input": "a.png", "output": "b.png", "rotate": 15, "align-corners": true}\n'
                                b'{"input": "c.png", "output": "d.png", "transform": ["t1.tfm", "t2.mat,inverse"]}\n\n',
        "nested.jsonl": jsonl + b'{"input": {"x": [1, 2]}, "output": null}\n',
        "not_json.jsonl": jsonl + b"{input: a.png}\n[1, 2]\n",
    }
    for name, data in seeds.items():
        put("fuzz_batch_manifest", name, data)


def volume_header_seeds():
    """Headers of the kinds ITK and Slicer write, and the data-file forms gridwarp checks."""
    nrrd, nhdr, mha, mhd = b"\x00", b"\x01", b"\x02", b"\x03"
    seeds = {
        "attached.nrrd": nrrd + b"NRRD0004\ntype: short\ndimension: 3\nspace: left-posterior-superior\n"
                                b"sizes: 4 5 6\nspace directions: (1,0,0) (0,1.5,0) (0,0,2)\nkinds: domain domain domain\n"
                                b"endian: little\nencoding: gzip\nspace origin: (-1,2.5,3)\nkey:=value\n\n",
        "vector.nrrd": nrrd + b"NRRD0005\n# a comment\ntype: float\ndimension: 4\nspace dimension: 3\nsizes: 3 4 4 4\n"
                              b"space directions: none (1,0,0) (0,1,0) (0,0,1)\nencoding: raw\nbyte skip: -1\n\n",
        "detached.nhdr": nhdr + b"NRRD0004\ntype: uchar\ndimension: 2\nsizes: 8 8\nspacings: 0.5 NaN\nencoding: raw\n"
                                b"data file: volume.raw\n",
        "pattern.nhdr": nhdr + b"NRRD0004\ntype: ushort\ndimension: 3\nsizes: 4 4 3\nencoding: raw\n"
                               b"data file: slice%03d.raw 1 3 1 2\n",
        "list.nhdr": nhdr + b"NRRD0004\ntype: int\ndimension: 3\nsizes: 2 2 2\nencoding: ascii\ndata file: LIST\na.txt\nb.txt\n",
        "attached.mha": mha + b"ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
                              b"CompressedData = True\nCompressedDataSize = 120\nTransformMatrix = 1 0 0 0 1 0 0 0 1\n"
                              b"Offset = 0 0 0\nCenterOfRotation = 0 0 0\nElementSpacing = 1 1 2.5\nDimSize = 4 5 6\n"
                              b"ElementNumberOfChannels = 3\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n",
        "detached.mhd": mhd + b"ObjectType = Image\nNDims = 2\nDimSize = 8 8\nElementType = MET_SHORT\nHeaderSize = -1\n"
                              b"ElementDataFile = volume.raw\n",
        "pattern.mhd": mhd + b"NDims = 3\nDimSize = 4 4 3\nElementType = MET_UCHAR\nElementDataFile = s%d.raw 0 2 1\n",
        "list.mhd": mhd + b"NDims = 3\nDimSize = 2 2 2\nElementType = MET_DOUBLE\nElementDataFile = LIST 2D\na.raw\nb.raw\n",
    }
    for name, data in seeds.items():
        put("fuzz_volume_header", name, data)


def package_transform_seeds():
    # Selector % 7: lta, afni, fsl, niftyreg, ras, lps, elastix.
    matrix = b"0.99 -0.1 0.02 3.5\n0.1 0.98 0.0 -2\n-0.02 0.01 1.01 7.25\n0 0 0 1\n"
    volume_info = (b"valid = 1  # volume info valid\nfilename = a.nii.gz\nvolume = 12 14 10\n"
                   b"voxelsize = 1.2 0.9 2.5\nxras   = -1 0 0\nyras   = 0 0 1\nzras   = 0 -1 0\ncras   = 1 2 3\n")
    for kind, name in ((0, "vox2vox"), (1, "ras2ras"), (2, "physvox")):
        lta = (b"# transform file seed\ntype      = %d # LINEAR\nnxforms   = 1\nmean      = 0.0 0.0 0.0\n"
               b"sigma     = 1.0\n1 4 4\n" % kind) + matrix + b"src volume info\n" + volume_info + b"dst volume info\n" + \
            volume_info.replace(b"a.nii.gz", b"b.nii.gz") + b"subject fsaverage\nfscale 0.1\n"
        put("fuzz_package_transform", f"{name}.lta", bytes([0]) + lta)
    put("fuzz_package_transform", "allineate.aff12.1D",
        bytes([1]) + b"# 3dAllineate matrices (DICOM-to-DICOM, row-by-row):\n0.99 -0.1 0.02 3.5 0.1 0.98 0.0 -2 -0.02 0.01 1.01 7.25\n")
    put("fuzz_package_transform", "volreg.1D", bytes([1]) + b"1 0 0 0 0 1 0 0 0 0 1 0\n1 0 0 0.5 0 1 0 0 0 0 1 0\n")
    for selector, name in ((2, "flirt.mat"), (3, "niftyreg.txt"), (4, "world_ras.txt"), (5, "world_lps.txt"), (0x82, "flirt_inverse.mat")):
        put("fuzz_package_transform", name, bytes([selector]) + matrix)
    put("fuzz_package_transform", "elastix_bspline.txt",
        bytes([6]) + b'(Transform "BSplineTransform")\n(NumberOfParameters 24)\n'
        b"(TransformParameters 0 0.5 0 0 0 0 0 1 0 0 0 0 0 0 0.2 0 0 0 0 0 0 0 0 0)\n(GridSize 2 2 2)\n(GridIndex 0 0 0)\n"
        b"(GridSpacing 10 10 10)\n(GridOrigin -5 -5 -5)\n(GridDirection 1 0 0 0 1 0 0 0 1)\n(BSplineTransformSplineOrder 1)\n"
        b'(InitialTransformParametersFileName "NoInitialTransform")\n')


def hdf5_transform_seeds():
    # The hostile corpus's ITK-layout files (made with h5py): the valid one, and each structure the
    # reader refuses, 3-D selector.
    hostile = ROOT / "tests" / "data" / "hostile"
    for name in ["control_valid.h5", "h5_soft_link.h5", "h5_partly_stored.h5", "h5_mutant_segfault.h5"]:
        put("fuzz_hdf5_transform", name, bytes([2]) + (hostile / name).read_bytes())


def raster_seeds():
    # Selector % 3: .png, .jpg, .tif. OpenCV's encodings of small images, and the hostile corpus's
    # hand-made headers (two IHDRs, a frame past 64 KiB of comments is too big a seed: its shape is
    # one of a COM segment before the frame).
    import cv2
    image = (np.arange(6 * 5 * 3).reshape(6, 5, 3) * 7 % 256).astype(np.uint8)
    for selector, extension in ((0, ".png"), (1, ".jpg"), (2, ".tif")):
        for channels in (1, 3):
            ok, encoded = cv2.imencode(extension, image[:, :, 0] if channels == 1 else image)
            assert ok
            put("fuzz_raster", f"opencv_c{channels}{extension}", bytes([selector]) + encoded.tobytes())
    ok, encoded = cv2.imencode(".png", (image.astype(np.uint16) * 257))
    put("fuzz_raster", "opencv_16bit.png", bytes([0]) + encoded.tobytes())
    ok, encoded = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])
    put("fuzz_raster", "progressive.jpg", bytes([1]) + encoded.tobytes())
    ok, encoded = cv2.imencode(".jpg", image)
    jpeg = encoded.tobytes()
    put("fuzz_raster", "comment_first.jpg", bytes([1]) + jpeg[:2] + b"\xff\xfe\x00\x10" + bytes(14) + jpeg[2:])
    import tifffile
    planes = io.BytesIO()
    tifffile.imwrite(planes, np.moveaxis(image, 2, 0).copy(), photometric="rgb", planarconfig="separate", rowsperstrip=2)
    put("fuzz_raster", "rgb_planes.tif", bytes([2]) + planes.getvalue())
    hostile = ROOT / "tests" / "data" / "hostile"
    for name, selector in (("png_second_ihdr.png", 0), ("png_ihdr_not_first.png", 0), ("tiff_product_wraps_2_64.tif", 2)):
        put("fuzz_raster", name, bytes([selector]) + (hostile / name).read_bytes())


def tiff_tile_seeds():
    # Tiled and striped TIFFs as tifffile writes them: 8- and 16-bit, grey and RGB, raw and Deflate,
    # samples together and each in a plane of its own.
    import tifffile
    image = (np.arange(40 * 48 * 3).reshape(40, 48, 3) * 7 % 256).astype(np.uint8)
    forms = {"rgb_tiles_zlib": dict(data=image, tile=(16, 16), compression="zlib", photometric="rgb"),
             "grey16_tiles": dict(data=image[..., 0].astype(np.uint16) * 257, tile=(16, 32)),
             "rgb_strips": dict(data=image, rowsperstrip=5, photometric="rgb"),
             "rgb_planes_tiles_zlib": dict(data=np.moveaxis(image, 2, 0).copy(), tile=(16, 16), compression="zlib",
                                           photometric="rgb", planarconfig="separate"),
             "rgb16_planes_strips": dict(data=np.moveaxis(image, 2, 0).astype(np.uint16) * 257, rowsperstrip=7,
                                         photometric="rgb", planarconfig="separate"),
             "rgb_ome_nm": dict(data=image, tile=(16, 16), photometric="rgb", ome=True,
                                metadata={"axes": "YXS", "PhysicalSizeX": 250, "PhysicalSizeXUnit": "nm", "PhysicalSizeY": 0.5,
                                          "UUID": "urn:uuid:1623acc2-f1bd-11f1-9715-02fc00000001"})}  # tifffile draws one
    for name, form in forms.items():
        out = io.BytesIO()
        tifffile.imwrite(out, **form)
        put("fuzz_tiff_tiles", f"{name}.tif", out.getvalue())


ZARR_SEPARATOR = b"\n--zarr--\n"


def zarr_store(array, chunks, dtype, compressor, separator, axes=None, transforms=None, fill=0, group=True, drop=(), links=()):
    """A small Zarr v2 store packed as fuzz_zarr_store splits it: .zattrs (empty for a plain array),
    .zarray, then one "KEY\\nBYTES" member per chunk (C order, edge chunks padded with `fill` as zarr
    writes them), less the keys in `drop`, and "KEY@TARGET" links."""
    array = np.asarray(array, dtype)
    counts = [-(-extent // chunk) for extent, chunk in zip(array.shape, chunks)]
    members = []
    for index in np.ndindex(*counts):
        block = np.full(chunks, fill, dtype)
        part = array[tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, chunks))]
        block[tuple(slice(0, extent) for extent in part.shape)] = part
        key = separator.join(str(i) for i in index)
        if key in drop:
            continue
        raw = block.tobytes()
        encoded = compressor[1](raw, dtype) if compressor else raw
        members.append(key.encode() + b"\n" + encoded)
    members += [f"{key}@{target}".encode() for key, target in links]
    header = {"zarr_format": 2, "shape": list(array.shape), "chunks": list(chunks), "dtype": np.dtype(dtype).str,
              "compressor": compressor[0] if compressor else None, "fill_value": fill, "order": "C", "filters": None,
              "dimension_separator": separator}
    attributes = b""
    if group:
        dataset = {"path": "0"}
        if transforms:
            dataset["coordinateTransformations"] = transforms
        multiscale = {"version": "0.4", "name": "seed", "datasets": [dataset]}
        if axes:
            multiscale["axes"] = axes
        attributes = json.dumps({"multiscales": [multiscale]}).encode()
    parts = [attributes, json.dumps(header).encode()] + members
    if any(ZARR_SEPARATOR in part for part in parts):
        raise SystemExit("a Zarr seed's member holds the separator")
    return ZARR_SEPARATOR.join(parts)


def zarr_seeds():
    # The compressors as numcodecs (zarr's codecs) writes them: zlib and gzip from Python's own
    # modules, Zstandard and Blosc only where numcodecs is there (python3-numcodecs).
    codecs = {"zlib": ({"id": "zlib", "level": 5}, lambda raw, dtype: zlib.compress(raw, 5)),
              "gzip": ({"id": "gzip", "level": 5}, lambda raw, dtype: gzip.compress(raw, 5, mtime=0))}
    try:
        import numcodecs
        codecs["zstd"] = ({"id": "zstd", "level": 3}, lambda raw, dtype: numcodecs.Zstd(level=3).encode(raw))
        codecs["blosc"] = ({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
                           lambda raw, dtype: numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE, 0).encode(
                               np.frombuffer(raw, dtype)))
    except ImportError:
        print("numcodecs is not there: no Zstandard or Blosc Zarr seeds")
    yx = [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}]
    cyx = [{"name": "c", "type": "channel"}] + yx
    zyx = [{"name": "z", "type": "space", "unit": "micrometer"}] + [dict(axis, unit="micrometer") for axis in yx]
    grey = (np.arange(12 * 10).reshape(12, 10) * 7 % 256).astype(np.uint8)
    rgb = (np.arange(3 * 9 * 7).reshape(3, 9, 7) * 5 % 256).astype(np.uint8)
    volume = np.arange(4 * 6 * 5).reshape(4, 6, 5) * 1031 % 65536
    geometry = [{"type": "scale", "scale": [2.5, 0.8, 0.75]}, {"type": "translation", "translation": [-10.0, 5.5, 3.0]}]
    seeds = {
        "grey_u1_raw_dot.zarr": zarr_store(grey, (8, 8), "|u1", None, ".", yx),
        "grey_u1_plain_array.zarr": zarr_store(grey, (12, 4), "|u1", None, "/", group=False),
        "grey_u1_missing_chunk.zarr": zarr_store(grey, (8, 8), "|u1", None, ".", yx, fill=7, drop=("1.0",)),
        "grey_u1_linked_chunk.zarr": zarr_store(grey, (8, 8), "|u1", None, ".", yx, drop=("0.1",), links=(("0.1", "0.0"),)),
        "rgb_cyx_zlib_slash.zarr": zarr_store(rgb, (1, 5, 4), "|u1", codecs["zlib"], "/", cyx),
        "rgb_cyx_raw_dot.zarr": zarr_store(rgb, (3, 9, 4), "|u1", None, ".", cyx),
        "volume_u2_gzip_scale.zarr": zarr_store(volume, (2, 4, 3), "<u2", codecs["gzip"], "/", zyx, geometry),
        "volume_u2_be_raw.zarr": zarr_store(volume, (4, 3, 5), ">u2", None, ".", zyx, geometry[:1]),
        "volume_c4_no_axes.zarr": zarr_store(np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5), (1, 3, 2, 5), "<i2", codecs["zlib"], "/"),
    }
    if "zstd" in codecs:
        seeds["grey_i2_be_zstd_dot.zarr"] = zarr_store(grey.astype(np.int16) - 100, (5, 10), ">i2", codecs["zstd"], ".", yx)
        seeds["volume_u2_zstd_slash.zarr"] = zarr_store(volume, (4, 6, 5), "<u2", codecs["zstd"], "/", zyx, geometry)
    if "blosc" in codecs:
        seeds["grey_f4_blosc_slash.zarr"] = zarr_store(grey / 3.0, (6, 10), "<f4", codecs["blosc"], "/", yx)
        seeds["rgb_cyx_blosc_dot.zarr"] = zarr_store(rgb, (1, 9, 7), "|u1", codecs["blosc"], ".", cyx)
    for name, data in seeds.items():
        if len(data) > 4096:
            raise SystemExit(f"Zarr seed {name} is {len(data)} bytes, more than 4 KB")
        put("fuzz_zarr_store", name, data)


def per_volume_seeds():
    # Selector % 3: ITK text list, AFNI .1D rows, folder of FSL matrices split at "\n--\n".
    affine = "#Transform {}\nTransform: AffineTransform_double_3_3\nParameters: 1 0 0 0 1 0 0 0 1 {} 0 0\nFixedParameters: 0 0 0\n"
    text = "#Insight Transform File V1.0\n" + "".join(affine.format(i, 0.5 * i) for i in range(3))
    put("fuzz_per_volume", "itk_list.txt", bytes([0]) + text.encode())
    put("fuzz_per_volume", "volreg.1D", bytes([1]) + b"1 0 0 0 0 1 0 0 0 0 1 0\n1 0 0 0.5 0 1 0 0 0 0 1 0\n")
    matrix = b"0.99 -0.1 0.02 3.5\n0.1 0.98 0.0 -2\n-0.02 0.01 1.01 7.25\n0 0 0 1\n"
    put("fuzz_per_volume", "mcflirt_folder", bytes([2]) + matrix + b"\n--\n" + matrix + b"\n--\n@MAT_0000\n--\n/\n")
    put("fuzz_per_volume", "link_out", bytes([2]) + matrix + b"\n--\n@/etc/passwd\n")


def main():
    shutil.rmtree(CORPUS, ignore_errors=True)
    npy_seeds()
    flo_seeds()
    kitti_seeds()
    bmp_seeds()
    text_matrix_seeds()
    itk_transform_seeds()
    nifti_seeds()
    mgh_seeds()
    mif_seeds()
    dicom_seeds()
    batch_seeds()
    volume_header_seeds()
    package_transform_seeds()
    hdf5_transform_seeds()
    raster_seeds()
    tiff_tile_seeds()
    per_volume_seeds()
    zarr_seeds()
    total = sum(f.stat().st_size for f in CORPUS.rglob("*") if f.is_file())
    for folder in sorted(CORPUS.iterdir()):
        files = list(folder.iterdir())
        print(f"{folder.name}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")
    print(f"total: {total} bytes")


if __name__ == "__main__":
    main()
