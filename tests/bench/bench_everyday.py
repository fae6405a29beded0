#!/usr/bin/python3
"""The everyday workloads of issue 58, side by side with their peers in one run, as Markdown rows.

- resize: a 4096^2 RGB photo-like image (smooth content, edges and sensor noise) as JPEG (quality
  92) and PNG (Pillow's level 1), shrunk to 50 % and to 512 px, file to file:
    gridwarp resize --scale 50% / --fit 512x512 (its default: Lanczos-3 low-pass, linear);
    Pillow: one python3 process per file, Image.open, resize(LANCZOS), save;
    vips resize FILE OUT SCALE --kernel lanczos3 (libvips-tools).
- batch: 400 PNGs of 256^2 RGB, rotate 15 and scale 0.9, cubic: gridwarp batch against a
  one-process python3-opencv loop (imread, warpAffine INTER_CUBIC, imwrite), with --threads
  threads, and on one core (taskset; --jobs 1 --threads 1 and cv2.setNumThreads(1)).
- start-up: gridwarp --version against an empty C++ program and /bin/true, 200 runs each.
- resample default: a 176x240x256 int16 T1-like volume onto a 182x218x182 1 mm grid through an
  affine that shrinks it 4-8 %, the default (no low-pass) against --antialias off.
Each way runs alternately --runs times; medians, bests and peak RSS (the child's ru_maxrss).
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


def timed(command, cwd=None, rss=True):
    """Wall seconds and peak RSS in MB, measured by /usr/bin/time: a child forked from this large
    python3 process would report the parent's pages as its own peak."""
    prefix = ["/usr/bin/time", "-f", "peak-rss-kb %M"] if rss else []
    start = time.perf_counter()
    result = subprocess.run(prefix + command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}: {result.stderr}")
    peak = [line for line in result.stderr.splitlines() if line.startswith("peak-rss-kb ")]
    return seconds, (int(peak[-1].split()[1]) / 1024.0 if peak else 0.0)


def side_by_side(ways, runs, cwd=None, rss=True):
    results = {way: [] for way in ways}
    for _ in range(runs):
        for way, command in ways.items():
            results[way].append(timed(command, cwd, rss))
    return {way: (statistics.median(t for t, _ in r), min(t for t, _ in r), max(m for _, m in r)) for way, r in results.items()}


def resize_rows(args, folder):
    make_photo(folder)
    pillow = ("from PIL import Image; import sys; im = Image.open(sys.argv[1]); "
              "w, h = im.size; s = float(sys.argv[3]); im.resize((round(w * s), round(h * s)), Image.LANCZOS).save(sys.argv[2])")
    os.environ["VIPS_CONCURRENCY"] = str(args.threads)
    print("| workload | gridwarp s (median / best) | Pillow s | vips s | vs Pillow | vs vips | gridwarp MB | Pillow MB | vips MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for extension in ("jpg", "png"):
        source = os.path.join(folder, f"photo.{extension}")
        for name, scale, size in (("50 %", 0.5, ["--scale", "50%"]), ("512 px", 512 / SIZE, ["--fit", "512x512"])):
            out = os.path.join(folder, f"out.{extension}")
            got = side_by_side({
                "gridwarp": [args.gridwarp, "resize", "-i", source, "-o", out, *size, "--threads", str(args.threads), "-q"],
                "Pillow": ["/usr/bin/python3", "-c", pillow, source, out, str(scale)],
                "vips": ["vips", "resize", source, out, str(scale), "--kernel", "lanczos3"],
            }, args.runs)
            g, p, v = got["gridwarp"], got["Pillow"], got["vips"]
            print(f"| 4096^2 RGB {extension.upper()} to {name} | {g[0]:.3f} / {g[1]:.3f} | {p[0]:.3f} | {v[0]:.3f} | "
                  f"{p[0] / g[0]:.2f}x | {v[0] / g[0]:.2f}x | {g[2]:.0f} | {p[2]:.0f} | {v[2]:.0f} |")


def batch_rows(args, folder):
    import cv2
    os.makedirs(os.path.join(folder, "in"))
    y, x = np.mgrid[0:256, 0:256]
    with open(os.path.join(folder, "jobs.csv"), "w") as manifest:
        manifest.write("input,output\n")
        for i in range(400):
            image = np.stack([(x * (i % 7 + 1) + y) % 256, (y * 3 + i) % 256, (x ^ y) % 256], -1).astype(np.uint8)
            cv2.imwrite(os.path.join(folder, "in", f"{i:04d}.png"), cv2.GaussianBlur(image, (3, 3), 0))
            manifest.write(f"in/{i:04d}.png,out_g/{i:04d}.png\n")
    loop = ("import cv2, glob, os, sys\n"
            "cv2.setNumThreads(int(sys.argv[1]))\n"
            "os.makedirs('out_cv', exist_ok=True)\n"
            "M = cv2.getRotationMatrix2D((127.5, 127.5), 15, 0.9)\n"
            "for path in sorted(glob.glob('in/*.png')):\n"
            "    out = cv2.warpAffine(cv2.imread(path), M, (256, 256), flags=cv2.INTER_CUBIC)\n"
            "    cv2.imwrite(path.replace('in/', 'out_cv/'), out)\n")
    batch = [args.gridwarp, "batch", "affine", "jobs.csv", "--rotate", "15", "--scale", "0.9", "--mode", "cubic", "--progress", "none", "-q"]
    print("| workload | gridwarp batch s (median / best) | python3-opencv loop s | speed-up | gridwarp MB | loop MB |")
    print("|---|---|---|---|---|---|")
    for label, prefix, extra, cv_threads in ((f"{args.threads} threads", [], [], str(args.threads)),
                                             ("one core", ["taskset", "-c", "0"], ["--jobs", "1", "--threads", "1"], "1")):
        got = side_by_side({"gridwarp": prefix + batch + extra, "opencv": prefix + ["/usr/bin/python3", "-c", loop, cv_threads]},
                           args.runs, cwd=folder)
        g, c = got["gridwarp"], got["opencv"]
        print(f"| 400 PNGs 256^2 RGB, rotate 15, scale 0.9, cubic, {label} | {g[0]:.3f} / {g[1]:.3f} | {c[0]:.3f} | "
              f"{c[0] / g[0]:.2f}x | {g[2]:.0f} | {c[2]:.0f} |")


def startup_rows(args, folder):
    # The floor: a C++ program that prints a line, linked with the runtimes gridwarp needs.
    source = os.path.join(folder, "hello.cpp")
    with open(source, "w") as f:
        f.write("#include <cstdio>\nint main() { std::puts(\"hello\"); }\n")
    hello = os.path.join(folder, "hello")
    subprocess.run(["g++", "-O2", source, "-o", hello, "-Wl,--no-as-needed", "-lstdc++", "-lgomp"], check=True)
    got = side_by_side({"gridwarp": [args.gridwarp, "--version"], "hello": [hello], "true": ["/bin/true"]}, 200, rss=False)
    print(f"\n`gridwarp --version`: {got['gridwarp'][0] * 1000:.1f} ms median ({got['gridwarp'][1] * 1000:.1f} best); "
          f"an empty C++ program with libgomp: {got['hello'][0] * 1000:.1f} ms; "
          f"`/bin/true`: {got['true'][0] * 1000:.1f} ms median\n")


def resample_rows(args, folder):
    import nibabel as nib
    from scipy import ndimage
    rng = np.random.default_rng(5)
    t1 = ndimage.gaussian_filter(rng.normal(600, 150, (176, 240, 256)), 2).astype(np.int16)
    nib.save(nib.Nifti1Image(t1, np.diag([1.0, 1.0, 1.0, 1.0])), os.path.join(folder, "t1.nii.gz"))
    mni = np.diag([1.0, 1.0, 1.0, 1.0])
    mni[:3, 3] = [-2, -10, 0]
    nib.save(nib.Nifti1Image(np.zeros((182, 218, 182), np.int16), mni), os.path.join(folder, "mni.nii.gz"))
    with open(os.path.join(folder, "t1_to_mni.txt"), "w") as f:  # a 4x4 LPS matrix: shrink 4-8 %, small turn
        f.write("1.06 0.02 0 1\n-0.02 1.04 0 2\n0 0 1.08 -3\n0 0 0 1\n")
    base = [args.gridwarp, "resample", "-i", "t1.nii.gz", "-r", "mni.nii.gz", "-t", "t1_to_mni.txt,lps", "--threads", str(args.threads), "-q"]
    got = side_by_side({"default": base + ["-o", "a.nii.gz"], "off": base + ["-o", "b.nii.gz", "--antialias", "off"]}, args.runs, cwd=folder)
    d, o = got["default"], got["off"]
    print("| workload | default s (median / best) | --antialias off s | ratio | default MB | off MB |")
    print("|---|---|---|---|---|---|")
    print(f"| 176x240x256 int16 T1 onto a 182x218x182 1 mm grid, 4-8 % shrink, linear | {d[0]:.3f} / {d[1]:.3f} | {o[0]:.3f} | "
          f"{d[0] / o[0]:.2f}x | {d[2]:.0f} | {o[2]:.0f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gridwarp", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", choices=["resize", "batch", "startup", "resample"])
    args = parser.parse_args()
    args.gridwarp = os.path.abspath(args.gridwarp)
    if not shutil.which("vips"):
        sys.exit("vips (libvips-tools) is not installed")
    folder = tempfile.mkdtemp(prefix="bench_everyday_")
    try:
        for name, rows in (("resize", lambda: resize_rows(args, folder)), ("batch", lambda: batch_rows(args, folder)),
                           ("startup", lambda: startup_rows(args, folder)), ("resample", lambda: resample_rows(args, folder))):
            if args.only in (None, name):
                rows()
                print()
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
