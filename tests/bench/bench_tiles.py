#!/usr/bin/python3
"""Images larger than memory (issue 63), gridwarp side by side with libvips in one run, as Markdown rows.

A SIZE x SIZE RGB tiled TIFF (512 x 512 tiles, uncompressed, smooth content, made by tifffile) is
turned 10 degrees onto the bounding box of the turned image (bilinear), file to file:
    gridwarp affine -i in.tif -o out.tif --rotate 10 --expand --threads T [--compression-level 0]
    vips similarity in.tif out.tif[compression=...] --angle 10      (VIPS_CONCURRENCY=T)
once writing uncompressed TIFF (vips' default) and once Deflate. After a warm-up run of each, they
alternate --runs times; medians, bests, peak RSS (/usr/bin/time).

    /usr/bin/python3 tests/bench/bench_tiles.py --gridwarp build/app/gridwarp [--size 20000]
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gridwarp", required=True)
    parser.add_argument("--size", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir")
    args = parser.parse_args()
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
