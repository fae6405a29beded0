import os
import pathlib
import subprocess

import numpy as np
import pytest


@pytest.fixture(scope="session")
def data_dir():
    return pathlib.Path(os.environ.get("GRIDWARP_TEST_DATA", pathlib.Path(__file__).resolve().parents[1] / "data"))


@pytest.fixture(scope="session")
def cli_sample():
    """Runs `gridwarp sample` on .npy files: the command's result, to compare the package with."""
    exe = os.environ.get("GRIDWARP_EXE")
    if not exe:
        pytest.skip("GRIDWARP_EXE is not set (the io library and the command were not built)")

    def run(tmp_path, x, grid, mode="linear", padding="zeros", align_corners=False, fill=0.0):
        np.save(tmp_path / "x.npy", x)
        np.save(tmp_path / "g.npy", grid)
        command = [exe, "sample", "-i", str(tmp_path / "x.npy"), "-g", str(tmp_path / "g.npy"), "-o", str(tmp_path / "y.npy"),
                   "--mode", mode, "--padding", padding, "--fill", repr(fill), "--threads", "2", "--quiet"]
        if align_corners:
            command.append("--align-corners")
        subprocess.run(command, check=True)
        return np.load(tmp_path / "y.npy")

    return run
