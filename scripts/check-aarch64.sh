#!/usr/bin/env bash
# Builds gridwarp::core and its tests for aarch64 with Debian's cross compiler and runs the core
# tests under qemu-aarch64 (docs/design.md). The io library (OpenCV, ITK) is not built.
# Usage: scripts/check-aarch64.sh [build directory, default build-aarch64]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-aarch64}
# Highway and the runtime libraries the tests run on come from Debian's arm64 archive (multiarch).
packages=(cmake make g++-aarch64-linux-gnu qemu-user catch2 nlohmann-json3-dev
          libhwy-dev:arm64 libgomp1:arm64 libstdc++6:arm64)
sudo=()
if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" dpkg --add-architecture arm64
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
      -DGRIDWARP_BUILD_IO=OFF -DGRIDWARP_BUILD_PYTHON=OFF -DGRIDWARP_BUILD_TESTS=ON
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" -L core -j"$(nproc)" --output-on-failure
