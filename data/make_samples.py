#!/usr/bin/python3
"""Makes gridwarp's bundled samples that are drawn rather than copied (CC0, see data/README.md):
card.png (a 320x240 RGB test card) and swirl.flo (a 320x240 swirl flow field for it).
Deterministic; run from the repository root: /usr/bin/python3 data/make_samples.py"""
import struct
import zlib

import numpy as np

W, H = 320, 240


def write_png(path, rgb):
    """8-bit RGB PNG with the standard library only (zlib + struct)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        f.write(chunk(b"IEND", b""))


def test_card():
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    img = np.zeros((H, W, 3))
    # Background: a smooth two-way colour gradient.
    img[..., 0] = 0.25 + 0.6 * x / (W - 1)
    img[..., 1] = 0.25 + 0.5 * y / (H - 1)
    img[..., 2] = 0.85 - 0.5 * x / (W - 1)
    # Grid lines every 20 pixels: straight lines show what a warp does.
    grid = (x % 20 < 1.5) | (y % 20 < 1.5)
    img[grid] = 0.95
    # A ring and a filled disc with an anti-aliased edge.
    r = np.hypot(x - 110, y - 120)
    ring = np.clip(1.0 - np.abs(r - 60) / 4.0, 0, 1)
    img = img * (1 - ring[..., None]) + ring[..., None] * np.array([0.1, 0.1, 0.1])
    disc = np.clip((28 - np.hypot(x - 240, y - 80)), 0, 1)
    img = img * (1 - disc[..., None]) + disc[..., None] * np.array([0.95, 0.75, 0.1])
    # An arrow pointing right and up, so that rotations and flips are easy to read.
    shaft = (np.abs(y - 180) < 6) & (x > 180) & (x < 260)
    head = (x >= 260) & (x < 290) & (np.abs(y - 180) < (290 - x) * 0.8)
    img[shaft | head] = np.array([0.8, 0.1, 0.1])
    up = (np.abs(x - 185) < 6) & (y > 120) & (y < 180)
    img[up] = np.array([0.1, 0.5, 0.1])
    # A fine checkerboard patch: shows what each interpolation does to detail.
    patch = (x >= 20) & (x < 60) & (y >= 190) & (y < 230)
    checker = ((x.astype(int) // 2 + y.astype(int) // 2) % 2).astype(float)
    img[patch] = checker[patch][:, None] * 0.9 + 0.05
    return np.clip(np.round(img * 255), 0, 255).astype(np.uint8)


def swirl_flow():
    """Backward flow: output pixel p samples p + flow(p), a rotation about the centre that fades out."""
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    cx, cy = (W - 1) / 2, (H - 1) / 2
    dx, dy = x - cx, y - cy
    r = np.hypot(dx, dy)
    angle = 1.2 * np.exp(-(r / 90.0) ** 2)
    c, s = np.cos(angle), np.sin(angle)
    u = c * dx - s * dy - dx
    v = s * dx + c * dy - dy
    return np.stack([u, v], axis=-1).astype(np.float32)


def write_flo(path, flow):
    h, w, _ = flow.shape
    with open(path, "wb") as f:
        f.write(b"PIEH")
        f.write(struct.pack("<ii", w, h))
        f.write(flow.astype("<f4").tobytes())


if __name__ == "__main__":
    write_png("data/card.png", test_card())
    write_flo("data/swirl.flo", swirl_flow())
    print("wrote data/card.png and data/swirl.flo")
