#!/usr/bin/python3
"""Hostile inputs are refused before harm (issue 25, part 3).

Runs every case of tests/data/hostile/cases.json (written by
tests/fixtures/make_hostile_fixtures.py) through the commands that read it, each
in a fresh output folder, and checks for every run:

  * exit status 1 (2 for `gridwarp batch`, whose malformed manifests and bad
    defaults mean "the batch could not start");
  * stderr is exactly one line, starting with "gridwarp: error:" and naming the
    hostile file (its basename) or, for command-line cases, the option;
  * nothing is left in the output folder: no output, no `.gridwarp-*` staging;
  * it ends within TIMEOUT_S (else: "hang") and its peak resident memory
    (ru_maxrss, from wait4) stays under MAX_RSS_MB (the run is killed as soon as
    its RSS passes the bound, so a memory bomb cannot take the machine down; a
    case's "max_rss_mb" tightens the bound for its runs).

Cases marked "survives" (finite but absurd values, where refusing and working
are both reasonable) must exit 0 or be refused as above, and never crash, hang or
blow up. "accepted" cases are controls that must work (exit 0), so that a
binary refusing everything cannot pass.

    /usr/bin/python3 tests/hostile/test_hostile.py --gridwarp build/app/gridwarp [--only SUBSTRING]

Exit status 0 when every run passes, 1 otherwise (with one line per failing run
and a summary), 2 on a usage error.
"""
import argparse
import concurrent.futures
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

TIMEOUT_S = 30          # a hostile file is refused in well under a second; past this it is a hang
MAX_RSS_MB = 400        # peak resident memory of one run: the corpus is < 200 KB a file
WORKERS = 2             # runs at once (the CI machine has 2 cores)
STDERR_SHOWN = 200      # characters of stderr quoted per failure

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CORPUS = os.path.join(REPO, "tests", "data", "hostile")
CARD = os.path.join(REPO, "data", "card.png")
BRAIN = os.path.join(REPO, "data", "brain.nii.gz")
HELPERS = os.path.join(CORPUS, "helpers")


class Run:
    """One command line to run for one case, and what it must do."""

    def __init__(self, case, label, argv, names, stage=None, batch=False):
        self.case = case
        self.label = label
        self.argv = argv          # without the binary; {run} is replaced by the run's folder
        self.names = names        # the error line must contain one of these
        self.stage = stage        # a corpus file to copy into the run folder first (manifests)
        self.batch = batch
        self.result = None
        self.failures = []

    @property
    def expect(self):
        if self.label in self.case.get("survives_as", []):
            return "survives"
        return self.case["expect"]

    @property
    def title(self):
        return f"{self.case['name']} [{self.label}]"


def runs_for(case):
    """The command lines that read a case's file, by its use (see USES in the generator)."""
    use = case["use"]
    if use == "args":
        subst = {"{repo}": REPO, "{helpers}": HELPERS}

        def expand(arg):
            for key, value in subst.items():
                arg = arg.replace(key, value)
            return arg.replace("{out}", "{run}")

        argv = [expand(a) for a in case["args"]]
        return [Run(case, case["args"][0], argv, case["names"], batch=case.get("batch", False))]

    path = os.path.join(CORPUS, case["file"])
    name = os.path.basename(case["file"])
    out_image, out_volume = "{run}/out.tif", "{run}/out.nii"
    table = {
        "raster": [
            ("affine", ["affine", "-i", path, "-o", out_image, "--rotate", "10"]),
            ("info", ["info", path]),
            ("resample -i", ["resample", "-i", path, "-o", out_image]),
            ("resample -r", ["resample", "-i", CARD, "-r", path, "-o", out_image]),
        ],
        "volume": [
            ("affine", ["affine", "-i", path, "-o", out_volume, "--rotate", "10"]),
            ("info", ["info", path]),
            ("resample -i", ["resample", "-i", path, "-o", out_volume]),
            ("resample -r", ["resample", "-i", BRAIN, "-r", path, "-o", out_volume]),
        ],
        "flow2d": [
            ("flow", ["flow", "-i", CARD, "-f", path, "-o", out_image]),
            ("info", ["info", path]),
        ],
        "flow3d": [("flow", ["flow", "-i", BRAIN, "-f", path, "-o", out_volume])],
        "transform": [
            ("resample -t", ["resample", "-i", BRAIN, "-t", path, "-o", out_volume]),
            ("info", ["info", path]),
        ],
        "transform_inverse": [("resample -t ,inverse",
                               ["resample", "-i", BRAIN, "-t", path + ",inverse", "-o", out_volume])],
        "transform_lps": [("resample -t ,lps", ["resample", "-i", BRAIN, "-t", path + ",lps", "-o", out_volume])],
        "transform_lps_inverse": [("resample -t ,lps,inverse",
                                   ["resample", "-i", BRAIN, "-t", path + ",lps,inverse", "-o", out_volume])],
        "matrix": [
            ("affine --matrix", ["affine", "-i", CARD, "-o", out_image, "--matrix", path]),
            ("affine --theta", ["affine", "-i", CARD, "-o", out_image, "--theta", path]),
            ("grid --theta", ["grid", "--theta", path, "--size", "1,1,4,4", "-o", "{run}/grid.npy"]),
        ],
        "matrix_inverse": [("affine --matrix --inverse",
                            ["affine", "-i", CARD, "-o", out_image, "--matrix", path, "--inverse"])],
        "npy": [
            ("sample -i", ["sample", "-i", path, "-g", os.path.join(HELPERS, "grid_2d.npy"), "-o", "{run}/out.npy"]),
            ("sample -g", ["sample", "-i", os.path.join(HELPERS, "x_2d.npy"), "-g", path, "-o", "{run}/out.npy"]),
            ("affine --rotate", ["affine", "-i", path, "-o", "{run}/out.npy", "--rotate", "10"]),
            ("info", ["info", path]),
        ],
        # The manifest is copied into the run folder: a lenient parser that starts jobs then
        # writes there (paths in a manifest are relative to its folder), never into the corpus.
        "manifest": [("batch", ["batch", "affine", "{run}/" + name, "--rotate", "10"])],
    }
    if use not in table:
        raise SystemExit(f"cases.json: unknown use '{use}' in case {case['name']}")
    only = case.get("only")
    names = [name] + case.get("also_names", [])
    return [Run(case, label, argv, names, stage=case["file"] if use == "manifest" else None, batch=use == "manifest")
            for label, argv in table[use] if only is None or label in only]


def rss_kb(pid):
    """Current resident memory of a process, or 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class StreamTail:
    """Drains a pipe in a thread, keeping the first KEPT bytes and counting the rest: a child that
    prints forever must not grow this process (a child's ru_maxrss starts at its parent's peak)."""

    KEPT = 64 * 1024

    def __init__(self, pipe):
        self.pipe = pipe
        self.head = bytearray()
        self.size = 0
        self.lines = 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        while True:
            chunk = self.pipe.read1(1 << 16)
            if not chunk:
                break
            self.size += len(chunk)
            self.lines += chunk.count(b"\n")
            if len(self.head) < self.KEPT:
                self.head += chunk[:self.KEPT - len(self.head)]
        self.pipe.close()

    def text(self):
        self.thread.join()
        return self.head.decode("utf-8", "replace")


STARTUP_RSS_MB = 0.0  # peak RSS of `gridwarp --version`, measured in main()


def startup_rss_mb(binary):
    proc = subprocess.Popen([binary, "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss / 1024


def execute(run, binary, root, timeout_s, max_rss_mb):
    """Run one command in a fresh folder; fill run.result."""
    folder = tempfile.mkdtemp(prefix="run-", dir=root)
    residents = set()
    if run.stage:
        shutil.copyfile(os.path.join(CORPUS, run.stage), os.path.join(folder, os.path.basename(run.stage)))
        residents.add(os.path.basename(run.stage))
    if run.batch and run.case["use"] == "args":
        # A one-job manifest for the batch argument cases (absolute paths: the folder is temporary).
        with open(os.path.join(folder, "jobs.csv"), "w") as f:
            f.write(f"input,output\n{CARD},out.png\n")
        residents.add("jobs.csv")
    argv = [binary] + [a.replace("{run}", folder) for a in run.argv]
    # A case may bound memory tighter (a refusal that must come before a large allocation), counted
    # above what the program takes to start (a sanitizer build's shadow memory is about 100 MB).
    if "max_rss_mb" in run.case:
        max_rss_mb = min(max_rss_mb, run.case["max_rss_mb"] + STARTUP_RSS_MB)
    limit_kb = max_rss_mb * 1024
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    out, err = StreamTail(proc.stdout), StreamTail(proc.stderr)
    killed, seen_kb, pause = None, 0, 0.002
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        seen_kb = max(seen_kb, rss_kb(proc.pid))
        if killed is None and time.monotonic() - start > timeout_s:
            killed = "hang"
        elif killed is None and seen_kb > limit_kb:
            killed = "memory"
        if killed:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    seconds = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4, not by Popen
    stdout, stderr = out.text(), err.text()
    left = sorted(set(os.listdir(folder)) - residents)
    run.result = {"rc": proc.returncode, "killed": killed, "seconds": round(seconds, 3),
                  "max_rss_mb": round(max(usage.ru_maxrss, seen_kb) / 1024, 1), "stdout": stdout, "stderr": stderr,
                  "stderr_bytes": err.size, "stderr_lines": err.lines, "left": left, "argv": argv}
    shutil.rmtree(folder, ignore_errors=True)
    judge(run, max_rss_mb)
    return run


def judge(run, max_rss_mb):
    """Fill run.failures with (kind, detail) for each broken promise; the first is the headline."""
    r = run.result
    fail = run.failures
    rc = r["rc"]
    # A batch whose every job is refused (a bad value among the defaults, judged by the command
    # itself) ran and failed: exit 3, the summary line, then the row's one error line.
    job_failure = run.case.get("batch_job_failure", False)
    refused_rc = 3 if job_failure else 2 if run.batch else 1
    if r["killed"] == "hang":
        fail.append(("hang", f"still running after {r['seconds']:.0f} s (killed; it had printed "
                             f"{r['stderr_lines']} lines on stderr)"))
    elif r["killed"] == "memory":
        fail.append(("memory", f"RSS passed {max_rss_mb} MB (killed at {r['max_rss_mb']} MB)"))
    elif rc < 0:
        fail.append(("crash", f"killed by {signal.Signals(-rc).name}"))
    elif r["max_rss_mb"] > max_rss_mb:
        fail.append(("memory", f"peak RSS {r['max_rss_mb']} MB > {max_rss_mb} MB"))
    if fail and fail[0][0] in ("hang", "crash") or r["killed"]:
        return
    if run.expect == "accepted":
        if rc != 0:
            fail.append(("control failed", f"exit status {rc}, expected 0"))
        elif any(name.startswith(".gridwarp") for name in r["left"]):
            fail.append(("leftover", "staging left: " + ", ".join(r["left"])))
        return
    if run.expect == "survives" and rc == 0:
        if any(name.startswith(".gridwarp") for name in r["left"]):
            fail.append(("leftover", "staging left: " + ", ".join(r["left"])))
        return
    if rc == 0:
        fail.append(("exit 0", "accepted" + (", wrote " + ", ".join(r["left"]) if r["left"] else "")))
        return
    if rc != refused_rc:
        fail.append(("exit status", f"exit status {rc}, expected {refused_rc}"))
    text = r["stderr"][:-1] if r["stderr"].endswith("\n") else r["stderr"]
    if job_failure:
        lines = text.split("\n")
        if len(lines) != 2 or not lines[0].startswith("batch: ") or not lines[1].strip().startswith("row 0: "):
            fail.append(("message format", "expected the batch summary and one row line"))
        elif run.names and not any(name in lines[1] for name in run.names):
            fail.append(("message format", "the row's error does not name " + " or ".join(repr(n) for n in run.names)))
        return
    if not text or "\n" in text or r["stderr_bytes"] > len(r["stderr"].encode()):
        lines = r["stderr_lines"] + (0 if r["stderr"].endswith("\n") or not text else 1)
        fail.append(("message format", f"stderr has {lines} lines ({r['stderr_bytes']} bytes), expected 1"))
    elif not text.startswith("gridwarp: error:"):
        fail.append(("message format", "the line does not start with 'gridwarp: error:'"))
    if run.names and text and not any(name in text for name in run.names):
        fail.append(("message format", "the error does not name " + " or ".join(repr(n) for n in run.names)))
    if r["left"]:
        fail.append(("leftover", "left in the output folder: " + ", ".join(r["left"])))


def snapshot(folder):
    """Every name under a folder (dot files included), to see that nothing was written there."""
    names = set()
    for base, dirs, files in os.walk(folder):
        for entry in dirs + files:
            names.add(os.path.relpath(os.path.join(base, entry), folder))
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gridwarp", required=True, help="the gridwarp binary")
    parser.add_argument("--only", action="append", default=[],
                        help="run only cases whose name or command label contains this (repeatable)")
    parser.add_argument("--jobs", type=int, default=WORKERS, help=f"runs at once (default {WORKERS})")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help=f"seconds per run (default {TIMEOUT_S})")
    parser.add_argument("--max-rss-mb", type=float, default=MAX_RSS_MB, help=f"memory bound (default {MAX_RSS_MB})")
    parser.add_argument("--report", help="write every run's result as JSON lines to this file")
    parser.add_argument("--verbose", action="store_true", help="print every run, not only the failing ones")
    args = parser.parse_args()

    binary = os.path.abspath(args.gridwarp)
    if not os.access(binary, os.X_OK):
        print(f"test_hostile: {binary} is not an executable", file=sys.stderr)
        return 2
    cases_file = os.path.join(CORPUS, "cases.json")
    if not os.path.exists(cases_file):
        print(f"test_hostile: {cases_file} is missing: run tests/fixtures/make_hostile_fixtures.py", file=sys.stderr)
        return 2
    with open(cases_file) as f:
        cases = json.load(f)["cases"]
    missing = [c["file"] for c in cases if "file" in c and not os.path.lexists(os.path.join(CORPUS, c["file"]))]
    if missing:
        print("test_hostile: corpus files missing: " + ", ".join(missing), file=sys.stderr)
        return 1

    runs = [run for case in cases for run in runs_for(case)]
    if args.only:
        runs = [r for r in runs if any(s in r.case["name"] or s in r.label for s in args.only)]
    if not runs:
        print("test_hostile: no case matches --only", file=sys.stderr)
        return 2

    global STARTUP_RSS_MB
    STARTUP_RSS_MB = startup_rss_mb(binary)
    watched = {folder: snapshot(folder) for folder in (CORPUS, os.path.dirname(CARD))}
    root = tempfile.mkdtemp(prefix="gridwarp-hostile-")
    start = time.monotonic()
    report = open(args.report, "w") if args.report else None
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(execute, run, binary, root, args.timeout, args.max_rss_mb) for run in runs]
            for future in concurrent.futures.as_completed(futures):
                run = future.result()
                if report:
                    report.write(json.dumps({"case": run.case["name"], "label": run.label, "expect": run.expect,
                                             "failures": run.failures, **run.result}) + "\n")
                if run.failures or args.verbose:
                    r = run.result
                    status = "FAIL" if run.failures else "ok"
                    why = "; ".join(f"{kind}: {detail}" for kind, detail in run.failures)
                    command = "gridwarp " + " ".join(r["argv"][1:])
                    print(f"{status} {run.title}: {why or 'passed'} | rc={r['rc']} {r['seconds']}s {r['max_rss_mb']}MB"
                          f" | stderr: {r['stderr'][:STDERR_SHOWN]!r} | {command}", flush=True)
    finally:
        if report:
            report.close()
        shutil.rmtree(root, ignore_errors=True)

    # Nothing may appear beside the inputs either (a staging folder next to an input, say).
    stray = []
    for folder, before in watched.items():
        stray += [os.path.join(folder, name) for name in sorted(snapshot(folder) - before)]
    elapsed = time.monotonic() - start
    failing = [r for r in runs if r.failures]
    kinds = {}
    for run in failing:
        kinds[run.failures[0][0]] = kinds.get(run.failures[0][0], 0) + 1
    print(f"\n{len(runs) - len(failing)} of {len(runs)} runs passed ({len(set(r.case['name'] for r in runs))} cases) "
          f"in {elapsed:.0f} s" + (": " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) if kinds else ""))
    if stray:
        print("FAIL files appeared beside the inputs: " + ", ".join(stray))
    own_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if own_mb > args.max_rss_mb / 4:
        # A child's ru_maxrss starts at this process's peak (vfork + exec), so the bound is blurred.
        print(f"warning: this harness peaked at {own_mb:.0f} MB; children's memory figures include it")
    return 1 if failing or stray else 0


if __name__ == "__main__":
    sys.exit(main())
