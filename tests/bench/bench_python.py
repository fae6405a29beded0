"""The Python package beside torch.nn.functional.grid_sample, in one run (docs/performance.md).

PYTHONPATH=build/python GRIDWARP_EXE=build/app/gridwarp /usr/bin/python3 tests/bench/bench_python.py [--threads 2] [--reps 7]
"""
import argparse
import statistics
import time

import numpy as np
import torch

import gridwarp


def median_seconds(function, reps):
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--size", type=int, default=160)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    size = args.size

    rng = np.random.default_rng(0)
    volume = rng.random((1, 1, size, size, size), dtype=np.float32)
    angle = np.deg2rad(12.0)
    theta = np.array([[[np.cos(angle), -np.sin(angle), 0, 0.03], [np.sin(angle), np.cos(angle), 0, -0.02], [0, 0, 1.05, 0]]],
                     np.float32)
    grid = gridwarp.affine_grid(theta, (1, 1, size, size, size))
    volume_t, grid_t = torch.from_numpy(volume), torch.from_numpy(grid)

    print(f"{size}^3 float32, explicit grid, {args.threads} threads, median of {args.reps}")
    rows = []
    for mode, torch_mode in (("bilinear", "bilinear"), ("nearest", "nearest")):
        ours = median_seconds(lambda: gridwarp.grid_sample(volume, grid, mode, threads=args.threads), args.reps)
        theirs = median_seconds(lambda: torch.nn.functional.grid_sample(volume_t, grid_t, torch_mode, align_corners=False), args.reps)
        rows.append((mode, ours, theirs))
    print("| mode | gridwarp | torch | torch / gridwarp |")
    print("|---|---:|---:|---:|")
    for mode, ours, theirs in rows:
        print(f"| {mode} | {ours * 1e3:.1f} ms | {theirs * 1e3:.1f} ms | {theirs / ours:.2f}x |")
    cubic = median_seconds(lambda: gridwarp.grid_sample(volume, grid, "bicubic", threads=args.threads), args.reps)
    print(f"| bicubic (3-D; torch has none) | {cubic * 1e3:.1f} ms | - | - |")

    image = rng.random((1, 3, 64, 64), dtype=np.float32)
    image_grid = gridwarp.affine_grid(theta[:, :2, [0, 1, 3]], (1, 3, 64, 64))
    point = image_grid[:, :1, :1]
    calls = 2000
    whole = median_seconds(lambda: [gridwarp.grid_sample(image, image_grid, threads=1) for _ in range(calls)], 5) / calls
    fixed = median_seconds(lambda: [gridwarp.grid_sample(image, point, threads=1) for _ in range(calls)], 5) / calls
    torch_image, torch_grid = torch.from_numpy(image), torch.from_numpy(image_grid)
    torch.set_num_threads(1)
    torch_whole = median_seconds(lambda: [torch.nn.functional.grid_sample(torch_image, torch_grid, align_corners=False)
                                          for _ in range(calls)], 5) / calls
    print(f"64x64x3 float32, one thread: the whole call {whole * 1e6:.1f} us (torch {torch_whole * 1e6:.1f} us); "
          f"a call sampling one point {fixed * 1e6:.1f} us (the fixed cost of a call)")

    in_memory_against_the_command(args, rng)


def in_memory_against_the_command(args, rng):
    """gridwarp.affine on a 256^3 Image in memory against `gridwarp affine` on the same .nii file.
    The command maps its input and samples straight into its output file's mapped pages, so its
    reading and writing cannot be timed apart; gridwarp.write of the same result is shown alone."""
    import os
    import subprocess
    import tempfile
    size = 256
    with tempfile.TemporaryDirectory(prefix="gridwarp-bench-python-") as folder:
        source, written = os.path.join(folder, "volume.nii"), os.path.join(folder, "out.nii")
        gridwarp.write(gridwarp.Image(rng.random((1, 1, size, size, size), dtype=np.float32), spacing=[1.0, 1.0, 1.0]), source)
        program = os.environ.get("GRIDWARP_EXE", "gridwarp")
        command = [program, "affine", "-i", source, "-o", written, "--rotate", "10", "--threads", str(args.threads), "-q"]
        image = gridwarp.read(source)
        result = gridwarp.affine(image, rotate=10, threads=args.threads)
        on_file = median_seconds(lambda: subprocess.run(command, check=True), args.reps)
        in_memory = median_seconds(lambda: gridwarp.affine(image, rotate=10, threads=args.threads), args.reps)
        write = median_seconds(lambda: gridwarp.write(result, written), args.reps)
    print(f"{size}^3 float32 affine --rotate 10, {args.threads} threads: gridwarp.affine on the Image in memory {in_memory * 1e3:.0f} ms; "
          f"the command on the .nii, reading and writing included, {on_file * 1e3:.0f} ms "
          f"(in memory / command {in_memory / on_file:.2f}); gridwarp.write of the result alone {write * 1e3:.0f} ms")

if __name__ == "__main__":
    main()
