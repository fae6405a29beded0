#!/usr/bin/python3
"""The volume formats of issue 61, gridwarp side by side with the peers in one run, as Markdown rows.

- mgz: a 256^3 int16 head-like volume resampled by a rigid transform (linear), file to file:
    gridwarp resample -i head.mgz -o OUT.mgz -t rigid.tfm;
    itk_resample_peer on the same voxels as .nii.gz (ITK reads no MGH): the .nii.gz row's peer.
- dicom: a 256-slice 256x256 int16 CT-like series (one file a slice, oblique, rescaled) made
    with pydicom, converted to an uncompressed NIfTI:
    gridwarp resample -i FOLDER -o OUT.nii;  dcm2niix -z n -o DIR FOLDER.
Both with --threads threads where the program takes them (dcm2niix is single-threaded). After a
warm-up run of each, they alternate --runs times; medians, bests, peak RSS (/usr/bin/time). The
outputs are checked: gridwarp's .mgz against the peer's .nii.gz voxel for voxel (linear
interpolation of int16, rounding may differ by 1), gridwarp's NIfTI against dcm2niix's (every
voxel at the same world position with the same value).
"""
import argparse
import os
import shutil
import statistics
import tempfile

import nibabel as nib
import numpy as np

from bench_timing import timed


def side_by_side(runs, ways, before_each=None):
    for name, command in ways.items():
        if before_each:
            before_each(name)
        timed(command)
    results = {name: [] for name in ways}
    for _ in range(runs):
        for name, command in ways.items():
            if before_each:
                before_each(name)
            results[name].append(timed(command))
    return {name: (statistics.median(t for t, _ in r), min(t for t, _ in r), statistics.median(m for _, m in r), [round(t, 3) for t, _ in r])
            for name, r in results.items()}


def head_volume(n=256, seed=7):
    """A smooth int16 head-like volume: an ellipsoid of tissue values with texture."""
    rng = np.random.default_rng(seed)
    z, y, x = np.mgrid[:n, :n, :n].astype(np.float32) / n - 0.5
    inside = (x / 0.42) ** 2 + (y / 0.36) ** 2 + (z / 0.40) ** 2 < 1
    texture = np.sin(x * 40) * np.cos(y * 33) * np.sin(z * 27)
    data = np.where(inside, 600 + 250 * texture, 0) + rng.normal(0, 8, inside.shape)
    return data.astype(np.int16)


def mgz_row(args, folder):
    data = head_volume()
    affine = np.array([[-1, 0, 0, 128], [0, 0, 1, -128], [0, -1, 0, 128], [0, 0, 0, 1.0]])  # FreeSurfer's conformed LIA
    mgz, nii = os.path.join(folder, "head.mgz"), os.path.join(folder, "head.nii.gz")
    if not os.path.exists(mgz):
        nib.save(nib.MGHImage(data, affine), mgz)
        image = nib.Nifti1Image(data, affine)
        image.set_qform(affine, 1)
        nib.save(image, nii)
    rigid = os.path.join(folder, "rigid.tfm")
    with open(rigid, "w") as f:
        c, s = np.cos(np.radians(7)), np.sin(np.radians(7))
        f.write("#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n"
                f"Parameters: {c} {-s} 0 {s} {c} 0 0 0 1 2.5 -1.5 3\nFixedParameters: 0 0 0\n")
    ours, theirs = os.path.join(folder, "gw.mgz"), os.path.join(folder, "itk.nii.gz")
    got = side_by_side(args.runs, {
        "gridwarp": [args.gridwarp, "resample", "-i", mgz, "-o", ours, "-t", rigid, "--threads", str(args.threads), "-q"],
        "peer": [args.peer, nii, theirs, rigid, str(args.threads)]})
    difference = np.abs(np.asarray(nib.load(ours).dataobj, np.int32) - np.asarray(nib.load(theirs).dataobj, np.int32))
    inside = difference[20:-20, 20:-20, 20:-20]
    # ITK truncates the interpolated value where gridwarp rounds it, and at the volume's faces
    # treats the half voxel beyond the last centre as outside, where zeros padding blends.
    check = (f"inside 20 voxels of the faces at most {int(inside.max())} from ITK's (truncation against rounding), "
             f"{int(difference.max())} at the faces")
    return row("256^3 int16 `.mgz` rigid resample, linear (ITK: the same voxels as `.nii.gz`)", got, "ITK program", check)


def write_dicom_series(folder, slices=256, size=256):
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid
    os.makedirs(folder, exist_ok=True)
    data = head_volume(size)[:slices] + 1024
    a = np.radians(9.0)
    row, column = np.array([1.0, 0, 0]), np.array([0, np.cos(a), -np.sin(a)])
    normal = np.cross(row, column)
    series, study, frame = generate_uid(), generate_uid(), generate_uid()
    for k in range(slices):
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.2"
        meta.MediaStorageSOPInstanceUID = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = FileDataset("slice", {}, file_meta=meta, preamble=b"\0" * 128)
        ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
        ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = study, series, frame
        ds.Modality, ds.SeriesDescription, ds.SeriesNumber, ds.InstanceNumber = "CT", "bench", 1, k + 1
        ds.PatientName, ds.PatientID = "Bench^Phantom", "gridwarp"
        ds.ImageOrientationPatient = ["%.8f" % v for v in (*row, *column)]
        ds.ImagePositionPatient = ["%.5f" % v for v in (np.array([-120.0, -110.0, -90.0]) + k * 0.8 * normal)]
        ds.PixelSpacing, ds.SliceThickness = ["0.9", "0.85"], "0.8"
        ds.SamplesPerPixel, ds.PhotometricInterpretation, ds.Rows, ds.Columns = 1, "MONOCHROME2", size, size
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
        ds.RescaleSlope, ds.RescaleIntercept = "1", "-1024"
        ds.PixelData = np.ascontiguousarray(data[k]).astype("<i2").tobytes()
        ds.is_little_endian, ds.is_implicit_VR = True, False
        ds.save_as(os.path.join(folder, "IM%04d.dcm" % ((k * 97) % slices)), write_like_original=False)


def dicom_row(args, folder):
    series = os.path.join(folder, "series")
    if not os.path.isdir(series):
        write_dicom_series(series)
    ours, theirs = os.path.join(folder, "gw_dicom.nii"), os.path.join(folder, "dcm2niix")

    def fresh(name):  # dcm2niix numbers a name it finds taken: give it an empty folder each time
        if name == "peer":
            shutil.rmtree(theirs, ignore_errors=True)
            os.makedirs(theirs)

    got = side_by_side(args.runs, {
        "gridwarp": [args.gridwarp, "resample", "-i", series, "-o", ours, "--threads", str(args.threads), "-q"],
        "peer": ["dcm2niix", "-z", "n", "-b", "n", "-f", "series", "-o", theirs, series]}, fresh)
    mine, reference = nib.load(ours), nib.load(os.path.join(theirs, "series.nii"))
    index_map = np.round(np.linalg.inv(mine.affine) @ reference.affine)
    grid = np.indices(reference.shape).reshape(3, -1)
    mapped = (index_map[:3, :3] @ grid + index_map[:3, 3:4]).astype(int)
    same = np.array_equal(mine.get_fdata()[tuple(mapped)], reference.get_fdata().reshape(-1))
    corner = np.abs(reference.affine @ [0, 0, 0, 1] - mine.affine @ np.append(mapped[:, 0], 1)).max()
    check = f"values {'equal' if same else 'DIFFER'} to dcm2niix's at every voxel, world positions within {corner:.1e} mm"
    return row("256-slice 256x256 int16 DICOM series to `.nii`", got, "dcm2niix", check)


def row(label, got, peer_name, check):
    ours, theirs = got["gridwarp"], got["peer"]
    return (f"| {label} | {ours[0]:.3f} / {ours[1]:.3f} | {theirs[0]:.3f} / {theirs[1]:.3f} | {theirs[0] / ours[0]:.2f}x | "
            f"{theirs[1] / ours[1]:.2f}x | {ours[2]:.0f} | {theirs[2]:.0f} | {check} |\n<!-- gridwarp {ours[3]} {peer_name} {theirs[3]} -->")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gridwarp", required=True)
    parser.add_argument("--peer", help="itk_resample_peer (default: build/tests/bench beside the gridwarp binary's build)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", choices=["mgz", "dicom"])
    parser.add_argument("--workdir", help="keep the generated inputs here between runs (default: a temporary folder, removed)")
    args = parser.parse_args()
    args.gridwarp = os.path.abspath(args.gridwarp)
    if not args.peer:
        args.peer = os.path.join(os.path.dirname(os.path.dirname(args.gridwarp)), "tests", "bench", "itk_resample_peer")
    folder = args.workdir or tempfile.mkdtemp(prefix="gridwarp-bench-formats-")
    os.makedirs(folder, exist_ok=True)
    print(f"threads {args.threads}, {args.runs} alternated runs each after a warm-up; load average {os.getloadavg()[0]:.2f}\n")
    print("| workload | gridwarp s (median / best) | peer s (median / best) | speed-up (medians) | speed-up (bests) | gridwarp MB | peer MB | check |")
    print("|---|---|---|---|---|---|---|---|")
    try:
        if args.only in (None, "mgz"):
            print(mgz_row(args, folder), flush=True)
        if args.only in (None, "dicom"):
            print(dicom_row(args, folder), flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\nload average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
