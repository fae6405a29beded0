#!/usr/bin/env bash
# Installs what gridwarp needs on Debian 12 (bookworm): to build the gridwarp command and run it,
# or, with --tests, to build the Python package and run every test too.
set -euo pipefail
build_packages=(
  cmake ninja-build g++ pkg-config
  libhwy-dev               # Highway: the SIMD kernels (gridwarp::core)
  # Images (gridwarp::io): OpenCV's core and codec modules; libopencv-dev would bring all 19
  # (with VTK, Qt and protobuf among their dependencies).
  libopencv-core-dev libopencv-imgcodecs-dev
  libinsighttoolkit5-dev   # NRRD, MetaImage and transforms (gridwarp::io)
  libgdcm-dev              # DICOM series (the ITK module; ITK's own GDCM IO is built on it)
  libgdcm-tools            # GDCMConfig.cmake names its tools: without them configuring warns for each
  libdeflate-dev zlib1g-dev # gzip for the NIfTI codec and PNG (gridwarp::io)
  libpng-dev libjpeg62-turbo-dev libtiff-dev libwebp-dev  # PNG, JPEG, TIFF and WebP (gridwarp::io)
  libblosc-dev libzstd-dev liblz4-dev libsnappy-dev # OME-Zarr chunks (gridwarp::io; the last two: Blosc linked statically)
  libcli11-dev libspdlog-dev nlohmann-json3-dev
  catch2                   # configuring the tests (on by default) needs it
)
test_packages=(
  make
  python3-dev pybind11-dev libdlpack-dev  # the Python package (build/python)
  python3-pytest python3-torch            # its tests: pytest, and PyTorch as an oracle and a DLPack producer
  python3-venv python3-pip python3-wheel   # `pip install .` into a venv, as docs/python.md says, timed by a test
  python3-nibabel python3-numpy  # NIfTI tests read gridwarp's outputs back with nibabel
  python3-scipy python3-pil python3-opencv  # oracles of the interpolation, image and resize tests
  python3-h5py             # ITK .h5 transforms written in its layout (the untrusted-file tests)
  python3-pydicom dcm2niix # DICOM series written with pydicom; dcm2niix's NIfTI is the oracle
  python3-tifffile python3-zarr libvips-tools  # tiled TIFF written and read by tifffile (by-tiles tests); vips, the tiled peer
  python3-dask python3-distributed  # gridwarp.dask and its LocalCluster test
  mrtrix3                  # ... and with MRtrix3; also a peer in bench_end_to_end
  connectome-workbench     # its warpfield conversions check the fields convert-transform writes
  elastix                  # transformix: the oracle of the elastix TransformParameters reader
  slurm-wlm munge          # the slurm test starts a single-node cluster
  groff-base zsh           # the installed man page and zsh completion are checked (groff, zsh -n)
  time                     # the batch scale test bounds CPU seconds and peak memory (/usr/bin/time)
)
packages=("${build_packages[@]}")
case "${1:-}" in
  "") ;;
  --tests) packages+=("${test_packages[@]}") ;;
  *) echo "usage: $0 [--tests]" >&2; exit 2 ;;
esac
sudo=()
if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}"
