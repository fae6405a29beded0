"""One image larger than a machine, warped across a Dask cluster (docs/bigdata.md).

Each task is `gridwarp affine` or `gridwarp resample` with --tiles K/N: it samples the K-th of N
shares of the output's tiles, reading only the input tiles they need, into one OME-Zarr store that
the first task to start creates. The store is byte for byte what the single command writes.

    from dask.distributed import Client, LocalCluster
    import gridwarp.dask
    with Client(LocalCluster(n_workers=2, threads_per_worker=1)) as client:
        gridwarp.dask.affine("slide.tif", "turned.zarr", rotate=10, client=client)
"""
import os as _os

import dask as _dask

import gridwarp as _gridwarp

__all__ = ["affine", "resample"]


def _share(command, files, options, output, tiles):
    """One task: the command on one share of the output's tiles. Returns the tiles it was given."""
    if command == "affine":
        _gridwarp.affine(files["input"], output, tiles=tiles, **options)
    else:
        _gridwarp.resample(files["moving"], output, reference=files.get("reference"), transforms=files["transforms"], tiles=tiles, **options)
    return tiles


def _worker_threads(client):
    threads = client.nthreads() if client is not None else {}
    return sum(threads.values()) if threads else (_os.cpu_count() or 1)


def _run_shares(command, files, output, options, client, shares):
    if output is None or not _os.fspath(output).lower().rstrip("/").endswith(".zarr"):
        raise ValueError("output: an OME-Zarr store (a name ending in .zarr), which the tasks fill together")
    if "tiles" in options:
        raise TypeError("tiles: the tasks are given their shares; use shares= for their number")
    if client is None:
        try:
            from dask.distributed import default_client
            client = default_client()
        except (ImportError, ValueError):
            client = None
    # Two shares per worker thread: a worker that finishes early takes another, and each share's
    # fixed costs (opening the input, its boundary tiles) stay small.
    count = int(shares) if shares is not None else 2 * _worker_threads(client)
    if count < 1:
        raise ValueError(f"shares: at least 1, got {count}")
    # Each task runs on one core unless threads= says otherwise: the cluster gives the parallelism.
    options.setdefault("threads", 1)
    output = _os.fspath(output)
    tiles = [f"{k}/{count}" for k in range(count)]
    if client is not None:
        futures = client.map(_share, [command] * count, [files] * count, [options] * count, [output] * count, tiles, pure=False)
        client.gather(futures)
    else:
        tasks = [_dask.delayed(_share, pure=False)(command, files, options, output, t) for t in tiles]
        _dask.compute(*tasks)
    return output


def affine(input, output, client=None, shares=None, **options):
    """gridwarp.affine on a Dask cluster: `input` a tiled TIFF or an OME-Zarr store (a path every
    worker can read), `output` an OME-Zarr store (.zarr) on storage every worker writes.

    Options are gridwarp.affine's (matrix=, rotate=, scale=, shift=, size=, mode=, padding=, fill=,
    pyramid=True, chunk_codec=, working_memory=, ...). client: a dask.distributed Client; None uses
    the current one, or Dask's default scheduler where there is none. shares: how many tasks (by
    default two per worker thread). Returns the output's path once every share is written.
    """
    return _run_shares("affine", {"input": _os.fspath(input)}, output, options, client, shares)


def resample(moving, output, reference=None, transforms=(), client=None, shares=None, **options):
    """gridwarp.resample on a Dask cluster: `moving` a tiled TIFF or an OME-Zarr store, `reference`
    the grid (any volume or image gridwarp reads), `transforms` as gridwarp.resample takes them, and
    `output` an OME-Zarr store (.zarr). client, shares and the other options as in affine().
    """
    if isinstance(transforms, (str, _os.PathLike)):
        transforms = [transforms]
    files = {"moving": _os.fspath(moving), "transforms": [_os.fspath(t) if isinstance(t, _os.PathLike) else t for t in transforms]}
    if reference is not None:
        files["reference"] = _os.fspath(reference)
    return _run_shares("resample", files, output, options, client, shares)
