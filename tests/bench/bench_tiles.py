#!/usr/bin/python3
"""Images larger than memory (issue 63), gridwarp side by side with libvips in one run, as Markdown rows.

A SIZE x SIZE RGB tiled TIFF (512 x 512 tiles, uncompressed, smooth content, made by tifffile) is
turned 10 degrees onto the bounding box of the turned image (bilinear), file to file:
    gridwarp affine -i in.tif -o out.tif --rotate 10 --expand --threads T [--compression-level 0]
    vips similarity in.tif out.tif[compression=...] --angle 10      (VIPS_CONCURRENCY=T)
once writing uncompressed TIFF (vips' default) and once Deflate. After a warm-up run of each, they
alternate --runs times; medians, bests, peak RSS (/usr/bin/time).

With --volume N: an N^3 int16 volume (smooth, 128^3 chunks, Blosc LZ4) as an OME-Zarr store and
as an uncompressed NIfTI, resampled through a rigid ITK transform (linear) onto its own grid, each run after a sync:
    gridwarp resample -i vol.zarr -o out.zarr -t rigid.tfm -n Linear --threads T   (by tiles)
    gridwarp ... --chunk-codec none   (chunks stored uncompressed, as ITK's NIfTI output is)
    itk_resample_peer vol.nii out.nii rigid.tfm T linear    (ITK's ResampleImageFilter, in memory)

    /usr/bin/python3 tests/bench/bench_tiles.py --gridwarp build/app/gridwarp [--size 20000]
    /usr/bin/python3 tests/bench/bench_tiles.py --gridwarp build/app/gridwarp --volume 1024 \
        --itk-peer build/tests/bench/itk_resample_peer
"""
import argparse
import os
import shutil
import statistics
import tempfile

import numpy as np
import tifffile

from bench_timing import timed


def triangle(t):
    return np.abs(t % 510 - 255)


def make_input(path, size, tile=512):
    def tiles():
        for y0 in range(0, size, tile):
            for x0 in range(0, size, tile):
                y, x = np.mgrid[y0:y0 + tile, x0:x0 + tile]
                yield np.stack([triangle(x + 2 * y), triangle(3 * x - y), triangle(x // 3 + y)], axis=-1).astype(np.uint8)
    tifffile.imwrite(path, tiles(), shape=(size, size, 3), dtype=np.uint8, tile=(tile, tile), photometric="rgb", bigtiff=True)


def bench_volume(args):
    import nibabel as nib
    import numcodecs
    import zarr
    n = args.volume
    work = args.workdir or tempfile.mkdtemp(prefix="bench-zarr-")
    os.makedirs(work, exist_ok=True)
    store, nifti, transform = os.path.join(work, f"vol{n}.zarr"), os.path.join(work, f"vol{n}.nii"), os.path.join(work, "rigid.tfm")
    if not os.path.exists(nifti):
        z, y, x = np.ogrid[0:n, 0:n, 0:n]
        volume = (np.sin(x / 17.0) * 900 + np.cos(y / 23.0) * 700 + np.sin(z / 11.0) * 500).astype(np.int16)
        group = zarr.open_group(store, "w")
        group.create_dataset("0", data=volume, chunks=(128, 128, 128), compressor=numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE))
        axes = [{"name": a, "type": "space", "unit": "millimeter"} for a in "zyx"]
        group.attrs["multiscales"] = [{"version": "0.4", "axes": axes,
                                       "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1.0, 1.0, 1.0]}]}]}]
        # The same voxels in ITK's LPS frame: gridwarp reads the store's axes as LPS, NIfTI's as RAS.
        nib.save(nib.Nifti1Image(np.ascontiguousarray(volume.transpose(2, 1, 0)), np.diag([-1.0, -1.0, 1.0, 1.0])), nifti)
        del volume
    centre = (n - 1) / 2
    with open(transform, "w") as f:
        f.write("#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_3_3\n"
                f"Parameters: 0.9848 0.1736 0 -0.1736 0.9848 0 0 0 1 1.5 -2.0 3.0\nFixedParameters: {centre} {centre} {centre}\n")
    gridwarp = [os.path.abspath(args.gridwarp), "resample", "-i", store, "-o", os.path.join(work, "out.zarr"), "-t", transform,
                "-n", "Linear", "--threads", str(args.threads), "-q"]
    ways = {"gridwarp": gridwarp, "gridwarp-uncompressed": gridwarp + ["--chunk-codec", "none"],
            "itk": [os.path.abspath(args.itk_peer), nifti, os.path.join(work, "out.nii"), transform, str(args.threads), "linear"]}
    results = {name: [] for name in ways}
    for _ in range(args.runs):
        for name, command in ways.items():
            # Each run starts with no dirty pages: the other program's output is not written back
            # to the disk on this one's time (ITK's 2 GB, or gridwarp's).
            os.sync()
            results[name].append(timed(command))
    summary = {name: (statistics.median(t for t, _ in runs), max(m for _, m in runs)) for name, runs in results.items()}
    i = summary["itk"]
    print(f"| {n}^3 int16, rigid, linear, {args.threads} threads | gridwarp (Zarr by tiles) s (RSS MB) | ITK (NIfTI in memory) s (RSS MB) | ratio |")
    print("|---|---|---|---|")
    for name, label in (("gridwarp", "resample, Blosc LZ4 chunks (default)"), ("gridwarp-uncompressed", "resample, uncompressed chunks")):
        g = summary[name]
        print(f"| {label} | {g[0]:.2f} ({g[1]:.0f}) | {i[0]:.2f} ({i[1]:.0f}) | {i[0] / g[0]:.2f}x |")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gridwarp", required=True)
    parser.add_argument("--size", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir")
    parser.add_argument("--volume", type=int, default=0)
    parser.add_argument("--itk-peer")
    args = parser.parse_args()
    if args.volume:
        bench_volume(args)
        return
    work = args.workdir or tempfile.mkdtemp(prefix="bench-tiles-")
    os.makedirs(work, exist_ok=True)
    source = os.path.join(work, f"in{args.size}.tif")
    if not os.path.exists(source):
        make_input(source, args.size)
    os.environ["VIPS_CONCURRENCY"] = str(args.threads)
    gridwarp = [os.path.abspath(args.gridwarp), "affine", "-i", source, "--rotate", "10", "--expand", "--threads", str(args.threads), "-q"]
    out = os.path.join(work, "out.tif")
    cases = {
        "uncompressed": {"gridwarp": gridwarp + ["-o", out, "--compression-level", "0"],
                         "vips": ["vips", "similarity", source, out, "--angle", "10"]},
        "deflate": {"gridwarp": gridwarp + ["-o", out],
                    "vips": ["vips", "similarity", source, out + "[compression=deflate]", "--angle", "10"]},
    }
    print(f"| {args.size}^2 RGB tiled TIFF, rotate 10 (expand), {args.threads} threads | gridwarp s (RSS MB) | vips s (RSS MB) | ratio |")
    print("|---|---|---|---|")
    for case, ways in cases.items():
        for command in ways.values():
            timed(command)
        results = {name: [] for name in ways}
        for _ in range(args.runs):
            for name, command in ways.items():
                results[name].append(timed(command))
        summary = {name: (statistics.median(t for t, _ in r), min(t for t, _ in r), max(m for _, m in r)) for name, r in results.items()}
        g, v = summary["gridwarp"], summary["vips"]
        print(f"| {case} | {g[0]:.2f} (best {g[1]:.2f}; {g[2]:.0f}) | {v[0]:.2f} (best {v[1]:.2f}; {v[2]:.0f}) | {v[0] / g[0]:.2f}x |")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
