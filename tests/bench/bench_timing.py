"""Timing shared by the Python benchmarks: a command's wall time and peak memory."""
import subprocess
import sys
import time


def timed(command):
    """Wall seconds and peak RSS in MB (/usr/bin/time: the child's own pages)."""
    start = time.perf_counter()
    result = subprocess.run(["/usr/bin/time", "-f", "peak-rss-kb %M"] + command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{result.stderr}")
    peak = [line for line in result.stderr.splitlines() if line.startswith("peak-rss-kb ")]
    return seconds, int(peak[-1].split()[1]) / 1024.0
