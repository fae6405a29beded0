#!/usr/bin/python3
"""gridwarp.dask against the single command: a Dask LocalCluster of two worker processes (one thread
each) warps a tiled TIFF into an OME-Zarr pyramid and resamples an OME-Zarr volume through a
transform file, each byte for byte equal to what `gridwarp affine` / `gridwarp resample` write alone;
Dask's default scheduler does the same without a cluster; outputs that are not stores are refused.

    PYTHONPATH=build/python /usr/bin/python3 tests/dask/test_dask.py --gridwarp build/app/gridwarp
"""
import os
import sys

import numpy as np
import tifffile
import zarr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, assert_same_files, main, run  # noqa: E402

import gridwarp.dask  # noqa: E402


class Dask(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        rng = np.random.default_rng(7)
        y, x = np.mgrid[0:2100, 0:2700]
        photo = np.stack([np.sin(x / 31 + c) * np.cos(y / 19) * 100 + 128 for c in range(3)], -1) + rng.normal(0, 9, (2100, 2700, 3))
        tifffile.imwrite(cls.path("photo.tif"), np.clip(photo, 0, 255).astype(np.uint8), tile=(256, 256), photometric="rgb")
        z, y, x = np.mgrid[0:150, 0:170, 0:190]
        volume = ((np.sin(x / 9) + np.cos(y / 13) + np.sin(z / 7)) * 9000 + 30000).astype(np.uint16)
        group = zarr.open_group(cls.path("volume.zarr"), "w")
        group.create_dataset("0", data=volume, chunks=(64, 64, 64))
        group.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": n, "type": "space", "unit": "millimeter"} for n in "zyx"],
                                       "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1.2, 1.0, 0.8]}]}]}]
        with open(cls.path("turn.txt"), "w") as f:
            f.write("0.99 0.12 0.02 -3\n-0.12 0.99 0.04 5\n-0.02 -0.04 1.0 2\n")
        for name in "single", "cluster", "default":
            os.makedirs(cls.path(name), exist_ok=True)
        cls.single_photo = os.path.join(cls.path("single"), "photo.zarr")
        cls.single_volume = os.path.join(cls.path("single"), "volume.zarr")
        for args in (["affine", "-i", cls.path("photo.tif"), "-o", cls.single_photo, "--rotate", "10", "--pyramid"],
                     ["resample", "-i", cls.path("volume.zarr"), "-r", cls.path("volume.zarr"), "-t", cls.path("turn.txt") + ",ras",
                      "-o", cls.single_volume, "--mode", "cubic"]):
            result = run(*args, "--by-tiles", "always", "-q")
            assert result.returncode == 0, result.stderr

    def test_a_local_cluster_of_two_workers_writes_the_single_run_bytes(self):
        from dask.distributed import Client, LocalCluster
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
            out = os.path.join(self.path("cluster"), "photo.zarr")
            self.assertEqual(gridwarp.dask.affine(self.path("photo.tif"), out, rotate=10, pyramid=True, client=client), out)
            assert_same_files(self, self.single_photo, out)
            out = os.path.join(self.path("cluster"), "volume.zarr")
            gridwarp.dask.resample(self.path("volume.zarr"), out, reference=self.path("volume.zarr"), transforms=[self.path("turn.txt") + ",ras"],
                                   mode="cubic", client=client, shares=5)
            assert_same_files(self, self.single_volume, out)

    def test_the_default_scheduler_writes_the_single_run_bytes(self):
        out = os.path.join(self.path("default"), "photo.zarr")
        gridwarp.dask.affine(self.path("photo.tif"), out, rotate=10, pyramid=True, shares=3)
        assert_same_files(self, self.single_photo, out)

    def test_outputs_that_are_not_stores_are_refused(self):
        with self.assertRaisesRegex(ValueError, r"\.zarr"):
            gridwarp.dask.affine(self.path("photo.tif"), self.path("photo_out.tif"), rotate=10)
        with self.assertRaisesRegex(TypeError, "shares="):
            gridwarp.dask.affine(self.path("photo.tif"), self.path("t.zarr"), rotate=10, tiles="0/2")
        self.assertFalse(os.path.exists(self.path("photo_out.tif")))


if __name__ == "__main__":
    main()
