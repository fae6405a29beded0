#!/usr/bin/env bash
# The sanitizer job (docs/reliability.md), run by .ci/run before the release tests: a second
# tree built with AddressSanitizer and UndefinedBehaviorSanitizer, where any report fails.
# Usage: scripts/sanitizer-job.sh [BUILD_DIR]   (default build-sanitize)
set -euo pipefail
cd "$(dirname "$0")/.."
tree="${1:-build-sanitize}"
cmake -G Ninja -S . -B "$tree" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRIDWARP_SANITIZE=address,undefined -DGRIDWARP_BUILD_BENCH=OFF \
  -DGRIDWARP_SIMD_TARGETS=all
# Only what the core, io and cli labels run (test_resample and its ITK oracle are left out).
cmake --build "$tree" -j2 --target gridwarp gridwarp_opencv gridwarp_itk gridwarp_shell_docs gridwarp_storage_faults test_core test_io test_cli \
  itk_resample_peer
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan-suppressions.txt:print_suppressions=0"
# The core tests compare every instruction-set path themselves; the command-line tests that sample
# run again on the AVX2 and baseline paths (manifest parsing, transform conversion and image
# metadata take no sampling path). Two tests at a time: most are single-threaded, and the tests
# that time themselves bound CPU seconds, not wall time.
ctest --test-dir "$tree" -j2 -L 'core|io|cli' --output-on-failure
# Without AVX-512 (Highway's AVX3: F, BW, DQ, VL) the default run above already took the AVX2 path.
isas=(baseline)
if grep -qw avx512bw /proc/cpuinfo; then isas=(avx2 baseline); fi
for isa in "${isas[@]}"; do
  echo "== command-line tests with GRIDWARP_ISA=$isa =="
  GRIDWARP_ISA=$isa ctest --test-dir "$tree" -j2 -L cli -E 'reliability|million-row|convert-transform|EXIF orientations' --output-on-failure
done
