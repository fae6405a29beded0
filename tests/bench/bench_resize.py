#!/usr/bin/python3
"""gridwarp resize against Pillow and libvips, file to file, side by side in one run.

A 4096^2 RGB photo-like image (smooth content, edges and sensor noise) as JPEG (quality 92) and
PNG (Pillow's level 1), shrunk to 50 % and to 512 px, each way run alternately --runs times:
  gridwarp resize --scale 50% / --fit 512x512 (Lanczos-3 low-pass, cubic: the default filter);
  Pillow: one python3 process per file, Image.open, resize(LANCZOS), save;
  vips resize FILE OUT SCALE --kernel lanczos3 (libvips-tools).
Prints medians, bests and peak RSS (the child's ru_maxrss), and the ratios against each peer.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

SIZE = 4096


def make_photo(folder):
    y, x = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32)
    radius = np.hypot(x - SIZE / 2, y - SIZE / 2)
    image = np.stack([128 + 100 * np.sin(radius ** 2 / 4000), 128 + 60 * np.sin(x / 37) * np.cos(y / 53), (x + y) / 32 % 256], -1)
    image += np.random.default_rng(0).normal(0, 8, image.shape)
    photo = Image.fromarray(np.clip(image, 0, 255).astype(np.uint8))
    photo.save(os.path.join(folder, "photo.jpg"), quality=92)
    photo.save(os.path.join(folder, "photo.png"), compress_level=1)


def timed(command):
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        sys.exit(f"failed: {' '.join(command)}: {process.stderr.read().decode()}")
    return seconds, usage.ru_maxrss / 1024.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gridwarp", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if not shutil.which("vips"):
        sys.exit("vips (libvips-tools) is not installed")
    folder = tempfile.mkdtemp(prefix="bench_resize_")
    make_photo(folder)
    pillow = ("from PIL import Image; import sys; im = Image.open(sys.argv[1]); "
              "w, h = im.size; s = float(sys.argv[3]); im.resize((round(w * s), round(h * s)), Image.LANCZOS).save(sys.argv[2])")
    rows = []
    for extension in ("jpg", "png"):
        source = os.path.join(folder, f"photo.{extension}")
        for name, scale, gridwarp_size in (("50 %", 0.5, ["--scale", "50%"]), ("512 px", 512 / SIZE, ["--fit", "512x512"])):
            out = os.path.join(folder, f"out.{extension}")
            ways = {
                "gridwarp": [args.gridwarp, "resize", "-i", source, "-o", out, *gridwarp_size, "--threads", str(args.threads), "-q"],
                "Pillow": ["/usr/bin/python3", "-c", pillow, source, out, str(scale)],
                "vips": ["vips", "resize", source, out, str(scale), "--kernel", "lanczos3"],
            }
            env_threads = str(args.threads)
            os.environ["VIPS_CONCURRENCY"] = env_threads
            results = {way: [] for way in ways}
            for _ in range(args.runs):
                for way, command in ways.items():
                    results[way].append(timed(command))
            rows.append((f"4096^2 RGB {extension.upper()} to {name}", results))
    print("| workload | gridwarp s (median / best) | Pillow s | vips s | vs Pillow | vs vips | gridwarp MB | Pillow MB | vips MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, results in rows:
        median = {way: statistics.median(t for t, _ in runs) for way, runs in results.items()}
        best = {way: min(t for t, _ in runs) for way, runs in results.items()}
        rss = {way: max(m for _, m in runs) for way, runs in results.items()}
        print(f"| {label} | {median['gridwarp']:.3f} / {best['gridwarp']:.3f} | {median['Pillow']:.3f} | {median['vips']:.3f} | "
              f"{median['Pillow'] / median['gridwarp']:.2f}x | {median['vips'] / median['gridwarp']:.2f}x | "
              f"{rss['gridwarp']:.0f} | {rss['Pillow']:.0f} | {rss['vips']:.0f} |")
    shutil.rmtree(folder)


if __name__ == "__main__":
    main()
