#!/usr/bin/env bash
# Runs gridwarp's fuzz targets one after another (tests/fuzz/README.md).
#
#   tests/fuzz/run_fuzzers.sh [--build] [--seconds N] [--build-dir DIR] [--work DIR] [TARGET...]
#
#   --build        configure (when needed) and build the targets first, with clang, one job at a time
#                  (JOBS=N to change)
#   --seconds N    how long each target runs (default 1800)
#   --build-dir    the clang build tree (default /tmp/build-fuzz)
#   --work DIR     where new corpus entries, crashes and logs go (default: a fresh /tmp/gridwarp-fuzz.*);
#                  the seed corpus in tests/fuzz/corpus is read, never written
#   TARGET...      some targets only (default: all)
#
# Every target runs with -rss_limit_mb=2048 -timeout=10 and its dictionary. Exit status 0 when every
# target ran clean, 1 when one found a crash, leak, timeout or out-of-memory (its input is in
# WORK/TARGET/crashes/, printed at the end), 2 for a usage or build problem.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source_dir="$(cd "$here/../.." && pwd)"
all_targets=(fuzz_npy fuzz_flo fuzz_text_matrix fuzz_itk_transform fuzz_nifti_header fuzz_nifti_file fuzz_kitti_png
             fuzz_batch_manifest fuzz_volume_header fuzz_bmp fuzz_package_transform
             fuzz_hdf5_transform fuzz_raster fuzz_per_volume fuzz_mgh_file fuzz_mif_file fuzz_dicom_series
             fuzz_tiff_tiles fuzz_zarr_store)

build=0
seconds=1800
build_dir=/tmp/build-fuzz
work=""
targets=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --build) build=1 ;;
        --seconds) seconds="$2"; shift ;;
        --build-dir) build_dir="$2"; shift ;;
        --work) work="$2"; shift ;;
        -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        fuzz_*) targets+=("$1") ;;
        *) echo "run_fuzzers.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || { echo "run_fuzzers.sh: --seconds takes a whole number" >&2; exit 2; }

if [[ $build -eq 1 ]]; then
    if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
        CC=clang CXX=clang++ cmake -S "$source_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DGRIDWARP_BUILD_TESTS=OFF -DGRIDWARP_BUILD_FUZZERS=ON \
            -DGRIDWARP_SANITIZE=fuzzer-no-link,address,undefined || exit 2
    fi
    cmake --build "$build_dir" --target gridwarp_fuzzers -j "${JOBS:-1}" || exit 2
fi

[[ -n "$work" ]] || work="$(mktemp -d /tmp/gridwarp-fuzz.XXXXXX)"
mkdir -p "$work"
# The targets that read through the OpenCV and ITK modules find them here.
export GRIDWARP_MODULE_DIR="${GRIDWARP_MODULE_DIR:-$build_dir/app}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

status=0
summary=()
for target in "${targets[@]}"; do
    binary="$build_dir/tests/fuzz/$target"
    [[ -x "$binary" ]] || { echo "run_fuzzers.sh: $binary is not built (add --build)" >&2; exit 2; }
    mkdir -p "$work/$target/corpus" "$work/$target/crashes"
    options=(-rss_limit_mb=2048 -timeout=10 -max_total_time="$seconds" -print_final_stats=1
             -artifact_prefix="$work/$target/crashes/")
    [[ -f "$here/dicts/$target.dict" ]] && options+=(-dict="$here/dicts/$target.dict")
    echo "== $target: $seconds s, log $work/$target/log.txt"
    started=$(date +%s)
    set +e
    "$binary" "${options[@]}" "$work/$target/corpus" "$here/corpus/$target" >"$work/$target/log.txt" 2>&1
    rc=$?
    set -e
    elapsed=$(( $(date +%s) - started ))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$target/log.txt" | tail -n 1)
    found=$(find "$work/$target/crashes" -type f | wc -l)
    if [[ $rc -ne 0 || $found -gt 0 ]]; then
        status=1
        summary+=("$target: FOUND a problem after ${elapsed} s (exit $rc, ${found} file(s) in $work/$target/crashes)")
        grep -m 3 -E "^(==[0-9]+==ERROR|SUMMARY|.*runtime error)" "$work/$target/log.txt" | sed 's/^/    /' || true
    else
        summary+=("$target: clean, ${elapsed} s, ${runs:-?} runs, corpus +$(find "$work/$target/corpus" -type f | wc -l)")
    fi
done

echo
printf '%s\n' "${summary[@]}"
echo "crashes, leaks, timeouts and out-of-memory inputs: $work/<target>/crashes/"
exit $status
