"""The file-level functions run the gridwarp commands in-process: the same bytes as the program."""
import os
import pathlib
import subprocess
import sys
import threading

import pytest

import gridwarp

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def exe():
    path = os.environ.get("GRIDWARP_EXE")
    if not path:
        pytest.skip("GRIDWARP_EXE is not set (the io library and the command were not built)")
    return path


def run_program(exe, *args):
    subprocess.run([exe, *map(str, args), "--quiet"], check=True)


def same_bytes(a, b):
    return pathlib.Path(a).read_bytes() == pathlib.Path(b).read_bytes()


def test_affine_and_flow_equal_the_program(exe, tmp_path):
    card = SAMPLES / "card.png"
    assert gridwarp.affine(card, tmp_path / "a.png", rotate=30, scale=0.8, mode="cubic") == str(tmp_path / "a.png")
    run_program(exe, "affine", "-i", card, "-o", tmp_path / "a_cli.png", "--rotate", 30, "--scale", 0.8, "--mode", "cubic")
    assert same_bytes(tmp_path / "a.png", tmp_path / "a_cli.png")
    gridwarp.flow(card, SAMPLES / "swirl.flo", tmp_path / "f.png", padding="border")
    run_program(exe, "flow", "-i", card, "-f", SAMPLES / "swirl.flo", "-o", tmp_path / "f_cli.png", "--padding", "border")
    assert same_bytes(tmp_path / "f.png", tmp_path / "f_cli.png")


def test_resample_equals_the_program(exe, tmp_path):
    brain = SAMPLES / "brain.nii.gz"
    gridwarp.resize(brain, tmp_path / "ref.nii.gz", voxel_size=3)
    run_program(exe, "resize", "-i", brain, "-o", tmp_path / "ref_cli.nii.gz", "--voxel-size", 3)
    assert same_bytes(tmp_path / "ref.nii.gz", tmp_path / "ref_cli.nii.gz")
    gridwarp.resample(brain, tmp_path / "moved.nii.gz", reference=tmp_path / "ref.nii.gz", transforms=[SAMPLES / "tilt.tfm"],
                      mode="BSpline[3]", padding="itk", output_type="float")
    run_program(exe, "resample", "-i", brain, "-r", tmp_path / "ref.nii.gz", "-t", SAMPLES / "tilt.tfm", "-o", tmp_path / "moved_cli.nii.gz",
                "--mode", "BSpline[3]", "--padding", "itk", "--output-type", "float")
    assert same_bytes(tmp_path / "moved.nii.gz", tmp_path / "moved_cli.nii.gz")


def test_two_threads_resample_at_once(exe, tmp_path):
    brain = SAMPLES / "brain.nii.gz"
    outputs = [tmp_path / f"t{k}.nii" for k in range(2)]
    workers = [threading.Thread(target=gridwarp.affine, args=(brain, output), kwargs={"rotate": 15, "mode": "cubic", "threads": 1})
               for output in outputs]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    run_program(exe, "affine", "-i", brain, "-o", tmp_path / "t_cli.nii", "--rotate", 15, "--mode", "cubic")
    for output in outputs:
        assert same_bytes(output, tmp_path / "t_cli.nii")


def test_errors_raise_with_the_program_message(exe, tmp_path):
    with pytest.raises(ValueError, match="nope.png"):
        gridwarp.affine(tmp_path / "nope.png", tmp_path / "out.png", rotate=3)
    with pytest.raises(ValueError, match=r"unknown option '--rotat' \(did you mean '--rotate'"):
        gridwarp.affine(SAMPLES / "card.png", tmp_path / "out.png", rotat=3)
    with pytest.raises(ValueError, match="mode"):
        gridwarp.resample(SAMPLES / "brain.nii.gz", tmp_path / "out.nii.gz", mode="bogus")
    assert not (tmp_path / "out.png").exists() and not (tmp_path / "out.nii.gz").exists()


def test_image_objects_in_and_out(exe, tmp_path):
    brain = SAMPLES / "brain.nii.gz"
    run_program(exe, "affine", "-i", brain, "-o", tmp_path / "cli.nii", "--rotate", 10)
    expected = gridwarp.read(tmp_path / "cli.nii")
    from_path = gridwarp.affine(brain, rotate=10)
    from_image = gridwarp.affine(gridwarp.read(brain), rotate=10)
    for result in (from_path, from_image):
        assert isinstance(result, gridwarp.Image)
        assert result.array.tobytes() == expected.array.tobytes()
        assert result.geometry == expected.geometry
    photo = gridwarp.read(SAMPLES / "card.png")
    assert gridwarp.resize(photo, size=(64, 48)).array.shape == (1, 3, 48, 64)


def test_images_in_memory_write_no_file(exe, tmp_path, monkeypatch):
    card = gridwarp.read(SAMPLES / "card.png")

    def no_file(*args, **kwargs):
        raise AssertionError("an Image went through a file")

    # Neither the package's own read and write nor a temporary folder may carry an Image.
    monkeypatch.setattr(gridwarp, "read", no_file)
    monkeypatch.setattr(gridwarp, "write", no_file)
    import tempfile
    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_file)
    monkeypatch.setattr(tempfile, "mkdtemp", no_file)
    turned = gridwarp.affine(card, rotate=30, mode="cubic")
    moved = gridwarp.flow(turned, SAMPLES / "swirl.flo", padding="border")
    monkeypatch.undo()
    run_program(exe, "affine", "-i", SAMPLES / "card.png", "-o", tmp_path / "a.png", "--rotate", 30, "--mode", "cubic")
    run_program(exe, "flow", "-i", tmp_path / "a.png", "-f", SAMPLES / "swirl.flo", "-o", tmp_path / "f.png", "--padding", "border")
    assert turned.array.tobytes() == gridwarp.read(tmp_path / "a.png").array.tobytes()
    assert moved.array.tobytes() == gridwarp.read(tmp_path / "f.png").array.tobytes()
    assert moved.format == "png" and moved.channel_order == "BGR"


def test_flow_and_reference_images_in_memory(exe, tmp_path):
    brain = SAMPLES / "brain.nii.gz"
    reference = gridwarp.resize(brain, voxel_size=3)
    gridwarp.write(reference, tmp_path / "ref.nii.gz")
    moved = gridwarp.resample(gridwarp.read(brain), reference=reference, transforms=[SAMPLES / "tilt.tfm"], mode="BSpline[3]",
                              padding="itk", output_type="float")
    run_program(exe, "resample", "-i", brain, "-r", tmp_path / "ref.nii.gz", "-t", SAMPLES / "tilt.tfm", "-o", tmp_path / "cli.nii",
                "--mode", "BSpline[3]", "--padding", "itk", "--output-type", "float")
    expected = gridwarp.read(tmp_path / "cli.nii")
    assert moved.array.dtype == expected.array.dtype and moved.array.tobytes() == expected.array.tobytes()
    assert moved.geometry == expected.geometry
    # A displacement field read from a .npy file is the same field in memory.
    import numpy as np
    field = np.zeros((1, 48, 64, 2), dtype=np.float32)
    field[..., 0] = 2.5
    np.save(tmp_path / "field.npy", field)
    photo = gridwarp.resize(SAMPLES / "card.png", size=(64, 48))
    from_file = gridwarp.flow(photo, tmp_path / "field.npy")
    from_memory = gridwarp.flow(photo, gridwarp.read(tmp_path / "field.npy"))
    assert from_file.array.tobytes() == from_memory.array.tobytes()


def test_keywords_are_typed_values_not_a_command_line(exe, tmp_path):
    card = SAMPLES / "card.png"
    # A value beginning with '-' is a value, never an option; False turns a flag off.
    shifted = gridwarp.affine(card, shift=(-3, -2), align_corners=False)
    run_program(exe, "affine", "-i", card, "-o", tmp_path / "s.png", "--shift=-3,-2")
    assert shifted.array.tobytes() == gridwarp.read(tmp_path / "s.png").array.tobytes()
    with pytest.raises(ValueError, match="--rotate"):
        gridwarp.affine(card, rotate="a lot")
    with pytest.raises(ValueError, match="unknown option '--input-image'"):
        gridwarp.affine(card, input_image=card)
    with pytest.raises(TypeError, match="transforms"):
        gridwarp.resample(card, transforms=[gridwarp.read(card)])


def test_map_points_equals_the_points_command(exe, tmp_path):
    import numpy as np
    points = np.array([[1.0, 2.0, 3.0], [-10.5, 20.0, 8.0], [0.25, -4.0, 12.0]])
    np.save(tmp_path / "in.npy", points)
    tilt = str(SAMPLES / "tilt.tfm")
    for space in ("ras", "lps"):
        run_program(exe, "points", "-i", tmp_path / "in.npy", "-o", tmp_path / f"{space}.npy", "-t", tilt, "--space", space)
        mapped = gridwarp.map_points(points, [tilt], space=space)
        assert mapped.dtype == np.float64 and mapped.tobytes() == np.load(tmp_path / f"{space}.npy").tobytes()
    back = gridwarp.map_points(gridwarp.map_points(points, [tilt]), [tilt], from_moving=True)
    np.testing.assert_allclose(back, points, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="nope.tfm"):
        gridwarp.map_points(points, [str(tmp_path / "nope.tfm")])
    with pytest.raises(ValueError, match=r"\(N, 2\) or \(N, 3\)"):
        gridwarp.map_points(points[:, :1], [tilt])


def test_jacobian_and_convert_transform_equal_the_program(exe, tmp_path):
    import numpy as np
    brain = SAMPLES / "brain.nii.gz"
    tilt = str(SAMPLES / "tilt.tfm")
    gridwarp.resize(brain, tmp_path / "ref.nii.gz", voxel_size=4)
    reference = gridwarp.read(tmp_path / "ref.nii.gz")
    # A field of the tilt on the reference grid, as a file, then its Jacobian in memory and on disk.
    assert gridwarp.convert_transform([tilt], tmp_path / "field.nii.gz", reference=reference) == str(tmp_path / "field.nii.gz")
    run_program(exe, "convert-transform", "-t", tilt, "-r", tmp_path / "ref.nii.gz", "-o", tmp_path / "field_cli.nii.gz")
    assert same_bytes(tmp_path / "field.nii.gz", tmp_path / "field_cli.nii.gz")
    gridwarp.convert_transform([tilt], str(tmp_path / "field.nii") + ",mrtrix", reference=tmp_path / "ref.nii.gz")
    run_program(exe, "convert-transform", "-t", tilt, "-r", tmp_path / "ref.nii.gz", "-o", str(tmp_path / "field_cli.nii") + ",mrtrix")
    assert same_bytes(tmp_path / "field.nii", tmp_path / "field_cli.nii")
    in_memory = gridwarp.jacobian(reference, [tmp_path / "field.nii.gz"])
    run_program(exe, "jacobian", "-r", tmp_path / "ref.nii.gz", "-t", tmp_path / "field.nii.gz", "-o", tmp_path / "jac_cli.nii.gz")
    assert np.array_equal(in_memory.array, gridwarp.read(tmp_path / "jac_cli.nii.gz").array)
    # The tilt is a rotation: its determinant is 1 wherever the field's linear interpolation is exact.
    np.testing.assert_allclose(in_memory.array[..., 2:-2, 2:-2, 2:-2], 1.0, rtol=0, atol=1e-4)
    gridwarp.jacobian(tmp_path / "ref.nii.gz", tilt, tmp_path / "log.nii.gz", log=True)
    run_program(exe, "jacobian", "-r", tmp_path / "ref.nii.gz", "-t", tilt, "-o", tmp_path / "log_cli.nii.gz", "--log")
    assert same_bytes(tmp_path / "log.nii.gz", tmp_path / "log_cli.nii.gz")
    with pytest.raises(ValueError, match="-i MOVING"):
        gridwarp.convert_transform([tilt], str(tmp_path / "fsl.nii.gz") + ",fsl", reference=reference)


def test_reorient_equals_the_program(exe, tmp_path):
    import numpy as np
    brain = SAMPLES / "brain.nii.gz"
    image = gridwarp.reorient(brain, to="LIA")
    run_program(exe, "reorient", "-i", brain, "-o", tmp_path / "lia.nii.gz", "--to", "LIA")
    assert np.array_equal(image.array, gridwarp.read(tmp_path / "lia.nii.gz").array)
    back = gridwarp.reorient(image, tmp_path / "back.nii.gz", to="like:" + str(brain))
    assert np.array_equal(gridwarp.read(back).array, gridwarp.read(brain).array)


def test_python_dash_m_runs_the_command_line(tmp_path):
    """`python -m gridwarp` is the program: the same output bytes, exit status and one error line."""
    environment = dict(os.environ)
    ours, theirs = tmp_path / "module.png", tmp_path / "program.png"
    args = ["affine", "-i", str(SAMPLES / "card.png"), "--rotate", "12", "-q"]
    done = subprocess.run([sys.executable, "-m", "gridwarp", *args, "-o", str(ours)], capture_output=True, text=True, env=environment)
    assert done.returncode == 0, done.stderr
    program = os.environ.get("GRIDWARP_EXE")
    if program:
        assert subprocess.run([program, *args, "-o", str(theirs)]).returncode == 0
        assert ours.read_bytes() == theirs.read_bytes()
    refused = subprocess.run([sys.executable, "-m", "gridwarp", "info", str(tmp_path / "missing.nii")], capture_output=True, text=True,
                             env=environment)
    assert refused.returncode != 0
    assert refused.stderr.count("\n") == 1 and "missing.nii" in refused.stderr
    version = subprocess.run([sys.executable, "-m", "gridwarp", "--version"], capture_output=True, text=True, env=environment)
    assert version.stdout.startswith("gridwarp ")
