#!/usr/bin/python3
"""--antialias: a zone plate shrunk 4x against Pillow's LANCZOS resize, a 1 mm volume put onto a
4 mm grid against an independent numpy/scipy implementation of the documented rule (Lanczos-3
stretched by the shrink factor, edge taps renormalised, then linear interpolation), and the cases
that must not filter (off, no shrink, nearest and label modes).

    /usr/bin/python3 tests/cli/test_antialias.py --gridwarp build/app/gridwarp
"""
import os
import sys

import nibabel as nib
import numpy as np
from PIL import Image
from scipy import ndimage

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, main, run  # noqa: E402

ZONE = 512
SHRINK = 4


def zone_plate(size):
    """Local frequency r / size cycles per pixel: the input's Nyquist at r = size / 2."""
    y, x = np.mgrid[0:size, 0:size] + 0.5 - size / 2
    return np.round(127.5 + 127.5 * np.cos(np.pi * (x * x + y * y) / size)).astype(np.uint8)


def ring_aliasing(image, shrink, size):
    """Standard deviation of the output where the plate's frequency lies between the output's
    Nyquist and the input's: all of it there is aliasing, the ideal result being flat grey."""
    out = image.shape[0]
    oy, ox = np.mgrid[0:out, 0:out]
    iy, ix = (oy + 0.5) * shrink - 0.5, (ox + 0.5) * shrink - 0.5
    radius = np.hypot(iy + 0.5 - size / 2, ix + 0.5 - size / 2)
    rings = (radius > size / (2 * shrink)) & (radius < size / 2)
    return float(image.astype(float)[rings].std())


def lanczos_lowpass(volume, axis, factor):
    """The documented kernel, written from its formula: w(d) = sinc(d/k) sinc(d/3k), |d| < 3k,
    taps outside the volume dropped and the rest normalised to 1."""
    half = int(np.ceil(3 * factor)) - 1
    length = volume.shape[axis]
    moved = np.moveaxis(volume.astype(np.float64), axis, 0)
    out = np.empty_like(moved)
    for i in range(length):
        j = np.arange(max(0, i - half), min(length - 1, i + half) + 1)
        d = (j - i) / factor
        w = np.sinc(d) * np.sinc(d / 3)
        out[i] = np.tensordot(w / w.sum(), moved[j], axes=1)
    return np.moveaxis(out, 0, axis)


def keys_cubic(t):
    """Keys' cubic convolution kernel, A = -0.75 (ONNX and PyTorch), at offsets t."""
    a, t = -0.75, np.abs(t)
    return np.where(t <= 1, ((a + 2) * t - (a + 3)) * t * t + 1,
                    np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0))


def interpolate_axis(volume, axis, positions, mode):
    """Linear or Keys cubic along one axis at pixel positions, tap indices clamped to the axis
    (border padding)."""
    moved = np.moveaxis(volume.astype(np.float64), axis, 0)
    length = moved.shape[0]
    out = np.empty((len(positions),) + moved.shape[1:])
    for o, u in enumerate(positions):
        base = int(np.floor(u))
        taps = np.arange(base, base + 2) if mode == "linear" else np.arange(base - 1, base + 3)
        weights = np.maximum(0.0, 1 - np.abs(u - taps)) if mode == "linear" else keys_cubic(u - taps)
        out[o] = np.tensordot(weights, moved[np.clip(taps, 0, length - 1)], axes=1)
    return np.moveaxis(out, 0, axis)


def resize_by_the_rule(volume, sizes, mode):
    """resize's documented result (align_corners off): low-pass each shrunk axis by its factor
    (extent / size), then interpolate at (j + 0.5) * factor - 0.5."""
    out = volume.astype(np.float64)
    for axis, size in enumerate(sizes):
        factor = volume.shape[axis] / size
        if factor > 1.01:
            out = lanczos_lowpass(out, axis, factor)
    for axis, size in enumerate(sizes):
        factor = volume.shape[axis] / size
        out = interpolate_axis(out, axis, (np.arange(size) + 0.5) * factor - 0.5, mode)
    return out


class ZonePlate(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        Image.fromarray(zone_plate(ZONE)).save(cls.path("zone.png"))
        size = f"{ZONE // SHRINK},{ZONE // SHRINK}"
        for name, extra in (("auto", []), ("off", ["--antialias", "off"]), ("on", ["--antialias", "on"])):
            result = run("resize", "-i", cls.path("zone.png"), "-o", cls.path(f"zone_{name}.png"), "--size", size, *extra)
            assert result.returncode == 0, result.stderr

    def read(self, name):
        return np.asarray(Image.open(self.path(name)))

    def test_default_is_within_pillow_lanczos_bound(self):
        pillow = np.asarray(Image.fromarray(zone_plate(ZONE)).resize((ZONE // SHRINK,) * 2, Image.LANCZOS))
        reference = ring_aliasing(pillow, SHRINK, ZONE)
        default = ring_aliasing(self.read("zone_auto.png"), SHRINK, ZONE)
        unfiltered = ring_aliasing(self.read("zone_off.png"), SHRINK, ZONE)
        self.assertGreater(unfiltered, 30, "the measurement must see the moiré of an unfiltered shrink")
        self.assertLessEqual(default, 1.5 * reference + 2, (default, reference))

    def test_on_equals_auto_when_shrinking(self):
        np.testing.assert_array_equal(self.read("zone_on.png"), self.read("zone_auto.png"))

    def test_explain_names_the_filter(self):
        result = run("resize", "-i", self.path("zone.png"), "-o", self.path("x.png"), "--size", "128,128", "--explain")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("anti-aliasing: Lanczos-3 low-pass along y (factor 4), x (factor 4)", result.stdout)
        self.assertFalse(os.path.exists(self.path("x.png")))


class FourMillimetreGrid(FolderTestCase):
    """A 1 mm volume of smooth content plus detail that a 4 mm grid cannot hold: plane waves whose
    frequency along some axis lies between 0.16 cycles/mm (past the kernel's transition band, which
    straddles the 4 mm grid's Nyquist, 0.125) and 0.45. Aliasing: what the detail adds to the output
    of the same command, since the ideal output of such detail is nothing."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        n = 64
        z, y, x = np.mgrid[0:n, 0:n, 0:n].astype(np.float64)
        smooth = 500 + 200 * np.sin(2 * np.pi * x / 48) * np.cos(2 * np.pi * y / 56) + 100 * np.cos(2 * np.pi * z / 40)
        rng = np.random.default_rng(7)
        detail = np.zeros_like(smooth)
        waves = 0
        while waves < 6:
            frequency = rng.uniform(-0.45, 0.45, size=3)  # cycles per mm along z, y, x
            if np.abs(frequency).max() < 0.16:
                continue
            detail += 40 * np.cos(2 * np.pi * (frequency[0] * z + frequency[1] * y + frequency[2] * x) + rng.uniform(0, 6))
            waves += 1
        cls.volume = (smooth + detail).astype(np.float32)
        nib.save(nib.Nifti1Image(cls.volume, np.eye(4)), cls.path("fine.nii"))
        nib.save(nib.Nifti1Image(smooth.astype(np.float32), np.eye(4)), cls.path("smooth.nii"))
        coarse = np.diag([4.0, 4.0, 4.0, 1.0])
        coarse[:3, 3] = 1.5  # voxel centres at 1.5, 5.5, ...: the same extent
        nib.save(nib.Nifti1Image(np.zeros((n // 4,) * 3, np.float32), coarse), cls.path("grid4.nii"))
        for source in ("fine", "smooth"):
            for name, extra in (("auto", ["--antialias", "auto"]), ("off", [])):
                result = run("resample", "-i", cls.path(f"{source}.nii"), "-r", cls.path("grid4.nii"), "-o",
                             cls.path(f"{source}_{name}.nii"), *extra)
                assert result.returncode == 0, result.stderr
        centres = np.arange(n // 4) * 4 + 1.5
        cls.positions = np.meshgrid(centres, centres, centres, indexing="ij")

    def read(self, name):
        return np.asanyarray(nib.load(self.path(name)).dataobj).astype(np.float64)

    def test_aliasing_falls_below_a_sixth_of_unfiltered(self):
        aliasing = {name: float(np.sqrt(np.mean((self.read(f"fine_{name}.nii") - self.read(f"smooth_{name}.nii")) ** 2)))
                    for name in ("auto", "off")}
        self.assertGreater(aliasing["off"], 10, aliasing)
        self.assertLessEqual(aliasing["auto"], 0.15 * aliasing["off"], aliasing)

    def test_the_smooth_part_passes(self):
        ideal = ndimage.map_coordinates(np.asanyarray(nib.load(self.path("smooth.nii")).dataobj), self.positions, order=1)
        inner = (slice(3, -3),) * 3  # the kernel's edge taps are cut within 3 output voxels of the edge
        self.assertLess(float(np.sqrt(np.mean((self.read("smooth_auto.nii") - ideal)[inner] ** 2))), 1.0)

    def test_equals_the_documented_rule(self):
        filtered = self.volume
        for axis in range(3):
            filtered = lanczos_lowpass(filtered, axis, SHRINK)
        expected = ndimage.map_coordinates(filtered, self.positions, order=1)
        got = self.read("fine_auto.nii")
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-3)


class ResizeReducesOntoTheGrid(FolderTestCase):
    """resize filters as it reduces onto the output grid; the result is still the documented one:
    the low-passed input, interpolated."""

    def test_a_volume_equals_the_documented_rule(self):
        rng = np.random.default_rng(3)
        volume = rng.normal(100, 30, (40, 37, 29)).astype(np.float32)  # z, y, x
        nib.save(nib.Nifti1Image(np.transpose(volume, (2, 1, 0)), np.eye(4)), self.path("v.nii"))
        for mode in ("linear", "cubic"):
            result = run("resize", "-i", self.path("v.nii"), "-o", self.path(f"v_{mode}.nii"), "--size", "11,15,13", "--mode", mode)
            self.assertEqual(result.returncode, 0, result.stderr)
            got = np.transpose(np.asanyarray(nib.load(self.path(f"v_{mode}.nii")).dataobj), (2, 1, 0))
            expected = resize_by_the_rule(volume, (13, 15, 11), mode)
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-3, err_msg=mode)

    def test_an_rgb_photo_equals_the_documented_rule_to_a_level(self):
        rng = np.random.default_rng(4)
        photo = rng.integers(0, 256, (90, 120, 3)).astype(np.uint8)
        Image.fromarray(photo).save(self.path("photo.png"))
        result = run("resize", "-i", self.path("photo.png"), "-o", self.path("small.png"), "--size", "47x31", "--mode", "cubic")
        self.assertEqual(result.returncode, 0, result.stderr)
        got = np.asarray(Image.open(self.path("small.png"))).astype(np.float64)
        expected = np.clip(np.rint(resize_by_the_rule(photo, (31, 47, 3), "cubic")), 0, 255)
        self.assertLessEqual(np.abs(got - expected).max(), 1)
        self.assertGreater(np.mean(got == expected), 0.99)


def results_of(case, command, *args):
    result = run(command, "-i", case.path("zone.png"), "-o", case.path("note.png"), *args)
    case.assertEqual(result.returncode, 0, result.stderr)
    return result.stderr


class NotFiltered(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        Image.fromarray(zone_plate(128)).save(cls.path("zone.png"))

    def same(self, *args, command="affine"):
        results = []
        for name, extra in (("a", []), ("b", ["--antialias", "off"])):
            result = run(command, "-i", self.path("zone.png"), "-o", self.path(f"{name}.png"), *args, *extra)
            self.assertEqual(result.returncode, 0, result.stderr)
            results.append(np.asarray(Image.open(self.path(f"{name}.png"))))
        np.testing.assert_array_equal(results[0], results[1])

    def test_affine_flow_and_resample_do_not_filter_by_default(self):
        # As ONNX GridSample, OpenCV's warps and antsApplyTransforms: a 4x shrink is sampled as it is,
        # with one info line naming the flag; under 2x, not a word.
        # resize filters by default, as Pillow, libvips and ImageMagick do.
        for command, args, default_is in (("affine", ["--scale", "0.25"], "off"), ("resize", ["--size", "32,32"], "on")):
            results = {}
            for name, extra in (("default", []), ("off", ["--antialias", "off"]), ("on", ["--antialias", "on"])):
                out = self.path(f"{command}_{name}.png")
                result = run(command, "-i", self.path("zone.png"), "-o", out, *args, *extra)
                self.assertEqual(result.returncode, 0, result.stderr)
                results[name] = np.asarray(Image.open(out))
            np.testing.assert_array_equal(results["default"], results[default_is])
            self.assertFalse(np.array_equal(results["off"], results["on"]))
        self.assertIn("shrinks the input 4x without a low-pass", results_of(self, "affine", "--scale", "0.25"))
        self.assertIn("--antialias on", results_of(self, "affine", "--scale", "0.25"))
        self.assertNotIn("low-pass", results_of(self, "affine", "--scale", "0.6"))
        self.assertNotIn("low-pass", results_of(self, "affine", "--scale", "0.25", "--antialias", "off"))
        h = w = 64
        flow = np.stack(np.mgrid[0:h, 0:w].astype(np.float32)[::-1], axis=-1) * 3  # output i reads input 4i
        np.save(self.path("quarter.npy"), flow)
        result = run("flow", "-i", self.path("zone.png"), "-f", self.path("quarter.npy"), "-o", self.path("q.png"))
        self.assertIn("shrinks the input 4x without a low-pass", result.stderr)
        result = run("resample", "-i", self.path("zone.png"), "-o", self.path("r.png"), "--explain")
        self.assertIn("anti-aliasing: off (the default here", result.stdout)

    def test_rotation_and_enlargement_are_untouched(self):
        self.same("--rotate", "33")
        self.same("--size", "300,300", command="resize")

    def test_nearest_and_labels_never_filter(self):
        self.same("--size", "32,32", "--mode", "nearest", command="resize")
        self.same("--size", "32,32", "--mode", "GenericLabel[Linear]", command="resize")

    def test_on_with_a_label_mode_is_one_error_line(self):
        result = run("resize", "-i", self.path("zone.png"), "-o", self.path("bad.png"), "--size", "32,32", "--mode", "nearest",
                     "--antialias", "on")
        self.assertNotEqual(result.returncode, 0)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn("--antialias on", result.stderr)
        self.assertFalse(os.path.exists(self.path("bad.png")))

    def test_the_filtered_copy_counts_against_max_memory(self):
        """A uint8 .nii (checked against its file size) whose float32 copy is 1 MiB. resize reduces
        onto the output grid and makes no copy."""
        volume = np.random.default_rng(0).integers(0, 255, (64, 64, 64)).astype(np.uint8)
        nib.save(nib.Nifti1Image(volume, np.eye(4)), self.path("u8.nii"))
        resize = ["resize", "-i", self.path("u8.nii"), "-o", self.path("u8_resized.nii"), "--size", "16,16,16", "--max-memory", "512K"]
        self.assertEqual(run(*resize).returncode, 0)
        shrink = ["affine", "-i", self.path("u8.nii"), "-o", self.path("u8_small.nii"), "--scale", "0.25", "--max-memory", "512K"]
        result = run(*shrink, "--antialias", "on")
        self.assertEqual(result.returncode, 1)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn("u8.nii: the anti-aliasing copy", lines[0])
        self.assertIn("--max-memory", lines[0])
        self.assertFalse(os.path.exists(self.path("u8_small.nii")))
        self.assertEqual(run(*shrink, "--antialias", "off").returncode, 0)

    def test_flow_that_halves_filters_along_both_axes(self):
        h = w = 64
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        flow = np.stack([x, y], axis=-1)  # displacement x: output i reads input 2i
        np.save(self.path("halve.npy"), flow)
        result = run("flow", "-i", self.path("zone.png"), "-f", self.path("halve.npy"), "-o", self.path("f.png"), "--explain",
                     "--antialias", "on")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("anti-aliasing: Lanczos-3 low-pass along y (factor 2), x (factor 2)", result.stdout)


if __name__ == "__main__":
    main()
