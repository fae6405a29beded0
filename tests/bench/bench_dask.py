#!/usr/bin/python3
"""gridwarp.dask's scaling (issue 63): throughput per core with one and with two Dask workers.

A SIZE x SIZE RGB tiled TIFF (512 x 512 tiles, uncompressed, smooth content with noise) is turned
10 degrees into an OME-Zarr store (bilinear, Blosc LZ4 chunks) by gridwarp.dask.affine on a
LocalCluster of W worker processes of one thread each, W = 1 and 2 (gridwarp.dask's default shares). The
clusters are started before the clock; each run writes a fresh store. Runs alternate between the
two clusters --runs times after a warm-up; the table gives medians and output pixels per second per
worker, and the ratio of the two (1.00: two workers each as fast as one alone).

With --pin-workers, worker k runs on core k (every thread of its process, gridwarp's file writer
among them): "per core" then means one core per worker, where otherwise a lone worker of one
thread also takes the idle cores for its writing and Dask's own threads. The scheduler and the
client are not pinned.

    PYTHONPATH=build/python /usr/bin/python3 tests/bench/bench_dask.py [--size 12000] [--runs 5]
"""
import argparse
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
import tifffile
from dask.distributed import Client, LocalCluster

import gridwarp.dask


def pin_to_core(core):
    """Every thread of this process on `core`; threads started later inherit it."""
    for thread in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(thread), {core})
    return core


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=12000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--shares-per-worker", type=int, default=0, help="0: gridwarp.dask's default")
    parser.add_argument("--pin-workers", action="store_true", help="worker k's process on core k alone")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="gridwarp-bench-dask-")
    try:
        size = args.size
        rng = np.random.default_rng(1)
        image = np.empty((size, size, 3), np.uint8)
        x = np.arange(size, dtype=np.float32)
        for row in range(0, size, 1000):
            y = np.arange(row, min(row + 1000, size), dtype=np.float32)[:, None]
            for c in range(3):
                image[row:row + len(y), :, c] = np.sin(x / 97 + c) * np.cos(y / 71) * 100 + 128
            image[row:row + len(y)] += rng.integers(0, 8, image[row:row + len(y)].shape, dtype=np.uint8)
        source = os.path.join(folder, "slide.tif")
        tifffile.imwrite(source, image, tile=(512, 512), photometric="rgb")
        del image
        clusters = {}
        for workers in 1, 2:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
            if args.pin_workers:
                for core, address in enumerate(sorted(client.scheduler_info()["workers"])):
                    client.run(pin_to_core, core % os.cpu_count(), workers=[address])
            clusters[workers] = (cluster, client)
        times = {1: [], 2: []}
        for run in range(args.runs + 1):
            for workers, (_, client) in clusters.items():
                out = os.path.join(folder, f"out_{workers}.zarr")
                shutil.rmtree(out, ignore_errors=True)
                start = time.perf_counter()
                shares = args.shares_per_worker * workers if args.shares_per_worker else None
                gridwarp.dask.affine(source, out, rotate=10, client=client, shares=shares)
                if run > 0:
                    times[workers].append(time.perf_counter() - start)
        for _, (cluster, client) in clusters.items():
            client.close()
            cluster.close()
        pixels = size * size
        per_worker = {w: pixels / statistics.median(t) / w for w, t in times.items()}
        print("| workers | median s | best s | Mpixel/s per worker |")
        print("|---|---|---|---|")
        for w, t in times.items():
            print(f"| {w} | {statistics.median(t):.2f} | {min(t):.2f} | {per_worker[w] / 1e6:.1f} |")
        pinned = ", each worker on a core of its own" if args.pin_workers else ""
        print(f"\nthroughput per worker, 2 workers / 1 worker: {per_worker[2] / per_worker[1]:.2f} ({size}^2 RGB, {os.cpu_count()} cores{pinned})")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
