#!/usr/bin/python3
"""gridwarp batch over mixed formats (PNG, JPEG, multi-page TIFF, BMP, WebP, .npy) with 4 jobs at
once, among them cut-off PNGs and JPEGs and a TIFF with damaged data: each damaged file fails its
own job, named in that job's error, with no output; every other job writes what the single command
writes, byte for byte.

    /usr/bin/python3 tests/cli/test_batch_decoders.py --gridwarp build/app/gridwarp
"""
import json
import os
import sys

import cv2
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

RNG = np.random.default_rng(5)


def photo(height, width):
    y, x = np.mgrid[0:height, 0:width]
    planes = [(x * (c + 2) + y * (4 - c)) % 256 for c in range(3)]
    return np.clip(np.stack(planes, axis=-1) + RNG.integers(0, 9, (height, width, 3)), 0, 255).astype(np.uint8)


def cut(path, keep):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:int(len(data) * keep)])


class BatchDecoders(FolderTestCase):
    def test_damaged_files_fail_their_own_jobs_while_the_others_run(self):
        whole, damaged = [], []
        for i in range(6):
            image = photo(60 + i, 80)
            Image.fromarray(image).save(self.path(f"p{i}.png"))
            cv2.imwrite(self.path(f"j{i}.jpg"), image)
            whole += [f"p{i}.png", f"j{i}.jpg"]
        pages = [Image.fromarray(photo(40, 50)) for _ in range(3)]
        pages[0].save(self.path("stack.tif"), save_all=True, append_images=pages[1:], compression="tiff_lzw")
        cv2.imwrite(self.path("plain.bmp"), photo(33, 47))
        cv2.imwrite(self.path("lossless.webp"), photo(30, 40), [cv2.IMWRITE_WEBP_QUALITY, 101])
        np.save(self.path("tensor.npy"), RNG.random((1, 2, 20, 30)).astype(np.float32))
        whole += ["stack.tif", "plain.bmp", "lossless.webp", "tensor.npy"]
        for i in range(3):
            for kind, ext in (("cut_png", "png"), ("cut_jpg", "jpg")):
                name = f"{kind}{i}.{ext}"
                if ext == "png":
                    Image.fromarray(photo(64, 64)).save(self.path(name))
                else:
                    cv2.imwrite(self.path(name), photo(64, 64))
                cut(self.path(name), 0.6)
                damaged.append(name)
        Image.fromarray(photo(40, 40)).save(self.path("bad.tif"), compression="tiff_adobe_deflate")
        with open(self.path("bad.tif"), "r+b") as f:
            f.seek(20)
            f.write(bytes(range(200, 240)))
        damaged.append("bad.tif")
        names = whole + damaged
        order = RNG.permutation(len(names))
        names = [names[i] for i in order]

        def output_of(name):
            stem, ext = os.path.splitext(name)
            return f"out/{stem}_out{'.tif' if name == 'stack.tif' else ext}"

        with open(self.path("jobs.csv"), "w") as f:
            f.write("input,output\n")
            for name in names:
                f.write(f"{name},{output_of(name)}\n")
        report = self.path("report.jsonl")
        result = run("batch", "affine", self.path("jobs.csv"), "--rotate", "12", "--mode", "cubic", "--jobs", "4",
                     "--report", report, "--progress", "none")
        self.assertEqual(result.returncode, 3, result.stderr)
        with open(report) as f:
            rows = [json.loads(line) for line in f]
        self.assertEqual(len(rows), len(names))
        for row in rows:
            name = names[row["row"]]
            with self.subTest(file=name):
                if name in damaged:
                    self.assertEqual(row["status"], "failed")
                    self.assertIn(name, row["error"])
                    self.assertFalse(os.path.exists(self.path(output_of(name))))
                else:
                    self.assertEqual(row["status"], "done", row.get("error"))
                    alone = self.path("alone_" + os.path.basename(output_of(name)))
                    single = run("affine", "-i", self.path(name), "-o", alone, "--rotate", "12", "--mode", "cubic", "-q")
                    self.assertEqual(single.returncode, 0, single.stderr)
                    with open(alone, "rb") as a, open(self.path(output_of(name)), "rb") as b:
                        self.assertEqual(a.read(), b.read())


if __name__ == "__main__":
    main()
