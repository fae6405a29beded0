#!/usr/bin/python3
"""Displacement-field workloads of issue 60, gridwarp side by side with ITK in one run, as Markdown rows.

- compose: an affine plus a 128^3 field (2 mm) written as one field on a 256^3 1 mm grid:
    gridwarp convert-transform -t field128 -t affine.tfm -r ref256 -o OUT;
    itk_field_peer compose: TransformToDisplacementFieldFilter of a CompositeTransform.
- invert: the inverse of the 128^3 field on its own grid:
    gridwarp convert-transform -t field128,inverse -r field128 -o OUT;
    itk_field_peer invert: InvertDisplacementFieldImageFilter, iterated to the residual gridwarp reaches.
- jacobian: the determinant of the Jacobian of a 256^3 1 mm field:
    gridwarp jacobian -t field256 -r field256 -o OUT;
    itk_field_peer jacobian: DisplacementFieldJacobianDeterminantFilter.
Fields are ITK's layout (NIfTI (X,Y,Z,1,3), intent vector, float32 LPS millimetres) on axis-aligned
grids (ITK 5.2's Jacobian filter ignores direction cosines), smooth sums of low-frequency sines of a
few millimetres, tapered to zero at the grid's edge so that both inverses are defined everywhere.
Both programs read the fields as --input (.nii.gz by default) and write the output named by
--output (a row for .nii.gz and one for .nii by default), with --threads threads. After a warm-up
run of each, the two alternate --runs times; medians, bests, peak RSS (/usr/bin/time). Each
output is checked against NumPy/SciPy: the composed field against the chain evaluated at sampled
voxels, the inverses by the residual |y + v(y) + d(y + v(y)) - y| at every voxel (d interpolated
trilinearly, as both programs do), the determinants against central differences of the field.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import nibabel as nib
import numpy as np
from scipy import ndimage

from bench_timing import timed

INTENT_VECTOR = 1007


def lps_grid_affine(n, spacing):
    """The RAS affine of an n^3 grid centred on 0 whose LPS direction is the identity."""
    half = (n - 1) * spacing / 2
    return np.array([[-spacing, 0, 0, half], [0, -spacing, 0, half], [0, 0, spacing, -half], [0, 0, 0, 1.0]])


def lps_origin(n, spacing):
    return -(n - 1) * spacing / 2


def save_nifti(data, affine, path, intent=None):
    image = nib.Nifti1Image(data, affine)
    image.set_sform(affine, 1)
    image.set_qform(affine, 1)
    if intent is not None:
        image.header.set_intent(intent)
    nib.save(image, path)


def smooth_field(n, spacing, amplitude_mm, seed):
    """(n, n, n, 3) float32 LPS vectors: per component, three separable sines of 1 to 2.5 cycles
    across the grid, times sin^2 tapers that bring the field and its slope to zero at the edge."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, n)
    taper = np.sin(np.pi * t) ** 2
    field = np.zeros((n, n, n, 3), np.float32)
    for k in range(3):
        component = np.zeros((n, n, n), np.float32)
        for _ in range(3):
            f = [np.sin(2 * np.pi * rng.uniform(1.0, 2.5) * t + rng.uniform(0, 2 * np.pi)) * taper for _ in range(3)]
            component += (f[0][:, None, None] * f[1][None, :, None] * f[2][None, None, :]).astype(np.float32)
        field[..., k] = component * np.float32(amplitude_mm / np.abs(component).max())
    return field


def save_field(field, spacing, path):
    n = field.shape[0]
    save_nifti(field[:, :, :, None, :], lps_grid_affine(n, spacing), path, intent="vector")


def load_field(path):
    return np.asanyarray(nib.load(path).dataobj)[:, :, :, 0, :].astype(np.float64)


def write_affine_tfm(path, matrix, translation):
    parameters = " ".join(f"{v:.17g}" for v in list(matrix.ravel()) + list(translation))
    with open(path, "w") as f:
        f.write("#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n"
                f"Parameters: {parameters}\nFixedParameters: 0 0 0\n")


def rotation(degrees_x, degrees_z):
    ax, az = np.radians(degrees_x), np.radians(degrees_z)
    rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
    rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
    return rz @ rx


def interpolate(field, n, spacing, points):
    """The field (n^3 x 3, LPS mm) at LPS points (..., 3), trilinearly, the edge repeated."""
    index = (points - lps_origin(n, spacing)) / spacing
    coordinates = np.moveaxis(index, -1, 0)
    return np.stack([ndimage.map_coordinates(field[..., k], coordinates, order=1, mode="nearest") for k in range(3)], -1)


def grid_points(n, spacing):
    axis = lps_origin(n, spacing) + spacing * np.arange(n)
    return np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1)


def side_by_side(args, gridwarp, peer):
    """gridwarp(BINARY, WAY) and the peer's command, and with --before gridwarp(args.before, "before"): each once to warm
    the page cache, then alternately --runs times: median, best, peak RSS, every time."""
    ways = {"gridwarp": gridwarp(args.gridwarp, "gridwarp"), "itk": peer}
    if args.before:
        ways["before"] = gridwarp(args.before, "before")
    for command in ways.values():
        timed(command)
    results = {way: [] for way in ways}
    for _ in range(args.runs):
        for way, command in ways.items():
            results[way].append(timed(command))
    return {way: (statistics.median(t for t, _ in r), min(t for t, _ in r), statistics.median(m for _, m in r), [t for t, _ in r])
            for way, r in results.items()}


def row(args, label, got, note):
    g, i = got["gridwarp"], got["itk"]
    if "before" in got:
        b = got["before"]
        note += f"; gridwarp --before {b[0]:.3f} / {b[1]:.3f} s, this build {b[0] / g[0]:.2f}x faster (medians)"
    print(f"| {label} | {g[0]:.3f} / {g[1]:.3f} | {i[0]:.3f} / {i[1]:.3f} | {i[0] / g[0]:.2f}x | {i[1] / g[1]:.2f}x | "
          f"{g[2]:.0f} | {i[2]:.0f} | {note} |", flush=True)
    if args.every_time:
        print(f"<!-- gridwarp {['%.3f' % t for t in g[3]]} itk {['%.3f' % t for t in i[3]]} -->", flush=True)


def compose_rows(args, folder):
    field_n, field_spacing, ref_n = 128, 2.0, 256
    field_file = os.path.join(folder, "field128" + args.input)
    if not os.path.exists(field_file):
        save_field(smooth_field(field_n, field_spacing, 3.0, seed=1), field_spacing, field_file)
    ref_file = os.path.join(folder, "ref256.nii.gz")
    save_nifti(np.zeros((ref_n,) * 3, np.uint8), lps_grid_affine(ref_n, 1.0), ref_file)
    matrix, translation = 1.02 * rotation(3, 5), np.array([2.0, -3.0, 1.0])
    affine_file = os.path.join(folder, "affine.tfm")
    write_affine_tfm(affine_file, matrix, translation)

    field = load_field(field_file)
    rng = np.random.default_rng(2)
    sample = rng.integers(0, ref_n, (200_000, 3))
    points = lps_origin(ref_n, 1.0) + sample.astype(np.float64)
    moved = points + interpolate(field, field_n, field_spacing, points)  # the field acts first on points
    expected = moved @ matrix.T + translation - points
    for extension in args.output:
        out = {way: os.path.join(folder, f"compose_{way}{extension}") for way in ("gridwarp", "itk", "before")}
        got = side_by_side(args, lambda binary, way: [binary, "convert-transform", "-t", field_file, "-t", affine_file, "-r", ref_file,
                                                      "-o", out[way], "--threads", str(args.threads), "-q"],
                           [args.peer, "compose", field_file, affine_file, ref_file, out["itk"], str(args.threads)])
        errors = {}
        for way in ("gridwarp", "itk"):
            vectors = np.asanyarray(nib.load(out[way]).dataobj)[:, :, :, 0, :]
            errors[way] = np.abs(vectors[sample[:, 0], sample[:, 1], sample[:, 2]] - expected).max()
        row(args, f"affine + 128^3 field onto 256^3, `{extension}` out", got,
            f"max error at 200,000 voxels: gridwarp {errors['gridwarp']:.1e} mm, ITK {errors['itk']:.1e} mm")


def inverse_residual(field, n, spacing, inverse):
    """|y + v(y) + d(y + v(y)) - y| at every voxel y, mm: largest and 99.9th percentile."""
    y = grid_points(n, spacing)
    x = y + inverse
    residual = np.linalg.norm(x + interpolate(field, n, spacing, x) - y, axis=-1)
    return residual.max(), np.percentile(residual, 99.9)


def itk_tolerance_reaching(args, field_file, field, n, spacing, residual_mm, out):
    """ITK's stopping tolerance (mm) whose inverse misses by no more than `residual_mm`: from twice
    that, halved until it does (untimed runs). ITK measures its error before its last update."""
    tolerance = 2 * residual_mm
    for _ in range(6):
        subprocess.run([args.peer, "invert", field_file, out, str(args.threads), str(args.itk_iterations), f"{tolerance / spacing:.6g}"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if inverse_residual(field, n, spacing, load_field(out))[0] <= residual_mm:
            return tolerance
        tolerance /= 2
    sys.exit(f"ITK's inverse does not reach {residual_mm:.2e} mm")


def invert_rows(args, folder):
    n, spacing = 128, 2.0
    field_file = os.path.join(folder, "field128" + args.input)
    if not os.path.exists(field_file):
        save_field(smooth_field(n, spacing, 3.0, seed=1), spacing, field_file)
    field = load_field(field_file)
    for extension in args.output:
        out = {way: os.path.join(folder, f"inverse_{way}{extension}") for way in ("gridwarp", "itk", "before")}

        def gridwarp(binary, way):
            return [binary, "convert-transform", "-t", field_file + ",inverse", "-r", field_file, "-o", out[way], "--threads",
                    str(args.threads), "-q"]
        tolerance_mm = args.itk_tolerance_mm
        if tolerance_mm is None:
            subprocess.run(gridwarp(args.gridwarp, "gridwarp"), check=True)
            tolerance_mm = itk_tolerance_reaching(args, field_file, field, n, spacing,
                                                  inverse_residual(field, n, spacing, load_field(out["gridwarp"]))[0], out["itk"])
        tolerance_voxels = tolerance_mm / spacing
        got = side_by_side(args, gridwarp,
                           [args.peer, "invert", field_file, out["itk"], str(args.threads), str(args.itk_iterations),
                            f"{tolerance_voxels:.6g}"])
        residuals = {way: inverse_residual(field, n, spacing, load_field(out[way])) for way in ("gridwarp", "itk")}
        row(args, f"inverse of a 128^3 field, `{extension}` out", got,
            f"residual max (99.9th pct): gridwarp {residuals['gridwarp'][0]:.2e} ({residuals['gridwarp'][1]:.1e}) mm, "
            f"ITK {residuals['itk'][0]:.2e} ({residuals['itk'][1]:.1e}) mm; ITK stops at {tolerance_voxels:.3g} voxels "
            f"({tolerance_mm:.3g} mm), at most {args.itk_iterations} iterations")


def jacobian_rows(args, folder):
    n, spacing = 256, 1.0
    field_file = os.path.join(folder, "field256" + args.input)
    if not os.path.exists(field_file):
        save_field(smooth_field(n, spacing, 4.0, seed=3), spacing, field_file)
    # Central differences of the field on a slab: the determinant both programs take inside the grid.
    slab = slice(112, 144)
    field = np.asanyarray(nib.load(field_file).dataobj)[:, :, slab.start - 1:slab.stop + 1, 0, :].astype(np.float64)
    gradient = np.stack([np.stack(np.gradient(field[..., k], spacing), -1) for k in range(3)], -2)[1:-1, 1:-1, 1:-1]
    expected = np.linalg.det(np.eye(3) + gradient)
    del field, gradient
    for extension in args.output:
        out = {way: os.path.join(folder, f"jacobian_{way}{extension}") for way in ("gridwarp", "itk", "before")}
        got = side_by_side(args, lambda binary, way: [binary, "jacobian", "-t", field_file, "-r", field_file, "-o", out[way], "--threads",
                                                      str(args.threads), "-q"],
                           [args.peer, "jacobian", field_file, out["itk"], str(args.threads)])
        errors = {way: np.abs(np.asanyarray(nib.load(out[way]).dataobj)[1:-1, 1:-1, slab] - expected).max() for way in ("gridwarp", "itk")}
        row(args, f"Jacobian determinant of a 256^3 field, `{extension}` out", got,
            f"max difference from NumPy's central differences inside: gridwarp {errors['gridwarp']:.1e}, ITK {errors['itk']:.1e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gridwarp", required=True)
    parser.add_argument("--peer", help="itk_field_peer (default: beside bench_fields.py's build folder, build/tests/bench)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--every-time", action="store_true", help="also print every run's time, in an HTML comment under its row")
    parser.add_argument("--before", help="another gridwarp binary (say, a build of the previous commit), timed alongside")
    parser.add_argument("--only", choices=["compose", "invert", "jacobian"])
    parser.add_argument("--input", default=".nii.gz", choices=[".nii.gz", ".nii"], help="the fields' files")
    parser.add_argument("--output", nargs="+", default=[".nii.gz", ".nii"], choices=[".nii.gz", ".nii"],
                        help="output kinds, each a row of its own")
    parser.add_argument("--itk-iterations", type=int, default=200)
    parser.add_argument("--itk-tolerance-mm", type=float,
                        help="ITK's largest error (mm; passed in voxels) at which its iteration stops; by default the loosest "
                             "that leaves no larger a residual than gridwarp's")
    parser.add_argument("--workdir", help="keep the generated inputs here between runs (default: a temporary folder, removed)")
    args = parser.parse_args()
    args.gridwarp = os.path.abspath(args.gridwarp)
    args.before = args.before and os.path.abspath(args.before)
    build = os.path.dirname(os.path.dirname(args.gridwarp))  # build/app/gridwarp: the peer is build/tests/bench/itk_field_peer
    args.peer = os.path.abspath(args.peer or os.path.join(build, "tests", "bench", "itk_field_peer"))
    if not os.path.exists(args.peer):
        sys.exit(f"{args.peer}: not found; build the target itk_field_peer or pass --peer")
    folder = args.workdir or tempfile.mkdtemp(prefix="bench_fields_")
    os.makedirs(folder, exist_ok=True)
    print(f"threads {args.threads}, fields read from {args.input}, {args.runs} alternated runs each after a warm-up; "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print("| workload | gridwarp s (median / best) | ITK s (median / best) | speed-up (medians) | speed-up (bests) | gridwarp MB | ITK MB | check |")
    print("|---|---|---|---|---|---|---|---|")
    try:
        for name, rows in (("compose", compose_rows), ("invert", invert_rows), ("jacobian", jacobian_rows)):
            if args.only in (None, name):
                rows(args, folder)
    finally:
        if not args.workdir:
            shutil.rmtree(folder)
    print(f"\nload average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
