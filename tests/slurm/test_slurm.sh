#!/usr/bin/env bash
# ctest label "slurm": a single-node Slurm cluster on this machine (Debian's slurm-wlm and munge,
# installed by scripts/install-deps.sh), started here and stopped at the end, runs
# `gridwarp batch --shard slurm --resume` as a 4-task array. Checks:
#  1. the union of the tasks' outputs equals a single-process batch, byte for byte, and every row
#     was done by exactly one task (the reports);
#  2. a task killed halfway (SIGKILL after two outputs) and the array submitted again with --resume
#     completes the set, the second run skipping what the first finished;
#  3. docs/bigdata.md's sbatch script (affine --tiles slurm) fills one OME-Zarr store equal to one process's.
# Exits 77 (ctest: skipped) with a message when Slurm or munge cannot run here.
#   tests/slurm/test_slurm.sh GRIDWARP_BINARY SOURCE_DIR
set -euo pipefail
gridwarp=$(readlink -f "$1")
source_dir=$(readlink -f "$2")
skip() { echo "SKIPPED: $*"; exit 77; }
for tool in slurmctld slurmd sbatch squeue munged mungekey; do
    command -v "$tool" > /dev/null || skip "$tool is not installed (scripts/install-deps.sh installs slurm-wlm and munge)"
done

work=$(mktemp -d /tmp/gridwarp-slurm-XXXXXX)
export SLURM_CONF="$work/slurm.conf"
cleanup() {
    scontrol shutdown > /dev/null 2>&1 || true
    [ -f "$work/slurmctld.pid" ] && kill "$(cat "$work/slurmctld.pid")" 2> /dev/null || true
    [ -f "$work/slurmd.pid" ] && kill "$(cat "$work/slurmd.pid")" 2> /dev/null || true
    [ -f "$work/munge/munged.pid" ] && kill "$(cat "$work/munge/munged.pid")" 2> /dev/null || true
    sleep 1
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work"/{state,spool,log,munge,data}
mungekey --create --keyfile="$work/munge/munge.key" --force > /dev/null 2>&1 || skip "mungekey failed"
chmod 600 "$work/munge/munge.key"
munged --key-file="$work/munge/munge.key" --socket="$work/munge/munge.socket" --pid-file="$work/munge/munged.pid" \
    --log-file="$work/munge/munged.log" --seed-file="$work/munge/seed" --force || skip "munged did not start"
host=$(hostname -s)
# Ports chosen away from Slurm's defaults so that a cluster already running here is left alone.
cat > "$SLURM_CONF" << EOF
ClusterName=gridwarp-test
SlurmctldHost=$host
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldPort=26817
SlurmdPort=26818
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -f "$SLURM_CONF" || skip "slurmctld did not start"
slurmd -f "$SLURM_CONF" || skip "slurmd did not start"
for _ in $(seq 1 50); do
    sinfo -h -o %t 2> /dev/null | grep -q idle && break
    sleep 0.2
done
sinfo -h -o %t 2> /dev/null | grep -q idle || skip "the node did not come up: $(tail -2 "$work/log/slurmd.log" 2> /dev/null)"

# 12 jobs over copies of the bundled card.
cp "$source_dir/data/card.png" "$work/data/card.png"
echo "input,output,rotate" > "$work/data/jobs.csv"
for i in $(seq 0 11); do echo "card.png,out/r$i.png,$((i * 7))" >> "$work/data/jobs.csv"; done

fail() { echo "FAILED: $*"; exit 1; }
# The 12 outputs, byte for byte (a staging folder left by a killed writer is not an output).
same_as_reference() {
    [ "$(ls "$work/data/out" | grep -c '\.png$')" -eq 12 ] || return 1
    for f in "$work"/reference/*.png; do cmp -s "$f" "$work/data/out/$(basename "$f")" || return 1; done
}

# The single-process run everything is compared with.
mkdir -p "$work/data/out"
"$gridwarp" batch affine "$work/data/jobs.csv" --scale 4 --size 1600,1200 --mode cubic --progress none 2> /dev/null
mv "$work/data/out" "$work/reference"
mkdir -p "$work/data/out"

# 1. A 4-task array.
sbatch --wait --quiet --array=0-3 --output="$work/log/task_%a.txt" --chdir="$work/data" \
    --wrap "'$gridwarp' batch affine jobs.csv --scale 4 --size 1600,1200 --mode cubic --shard slurm --resume --progress none --report report_\$SLURM_ARRAY_TASK_ID.jsonl" \
    || fail "the array job failed: $(cat "$work"/log/task_*.txt 2> /dev/null)"
same_as_reference || fail "the array's outputs differ from the single-process run"
done_rows=$(cat "$work"/data/report_*.jsonl | grep -c '"status":"done"')
distinct=$(cat "$work"/data/report_*.jsonl | grep '"status":"done"' | sed 's/.*"row":\([0-9]*\).*/\1/' | sort -u | wc -l)
[ "$done_rows" -eq 12 ] && [ "$distinct" -eq 12 ] || fail "expected 12 rows done once each, got $done_rows done, $distinct distinct"
echo "array of 4: 12 rows, each done once, outputs equal to the single-process run"

# 2. Task 0 killed halfway (SIGKILL once two of its outputs exist), then the array again with --resume.
rm -rf "$work/data/out" "$work"/data/report_*.jsonl
mkdir -p "$work/data/out"
sbatch --wait --quiet --array=0-3 --output="$work/log/kill_%a.txt" --chdir="$work/data" --wrap "
    '$gridwarp' batch affine jobs.csv --scale 4 --size 1600,1200 --mode cubic --shard slurm --resume --jobs 1 --progress none &
    pid=\$!
    if [ \"\$SLURM_ARRAY_TASK_ID\" = 0 ]; then
        while [ \$(ls out/r0.png out/r4.png out/r8.png 2> /dev/null | wc -l) -lt 2 ] && kill -0 \$pid 2> /dev/null; do sleep 0.01; done
        kill -9 \$pid
    fi
    wait \$pid || true" || true
first=$(ls "$work/data/out" | grep -c '\.png$' || true)
[ "$first" -lt 12 ] || fail "the killed task finished all its rows before the kill; the test proves nothing"
sbatch --wait --quiet --array=0-3 --output="$work/log/resume_%a.txt" --chdir="$work/data" \
    --wrap "'$gridwarp' batch affine jobs.csv --scale 4 --size 1600,1200 --mode cubic --shard slurm --resume --progress none --report report_\$SLURM_ARRAY_TASK_ID.jsonl" \
    || fail "the resumed array failed: $(cat "$work"/log/resume_*.txt 2> /dev/null)"
same_as_reference || fail "after --resume the outputs differ from the single-process run"
skipped=$(cat "$work"/data/report_*.jsonl | grep -c '"status":"skipped"' || true)
[ "$skipped" -eq "$first" ] || fail "the resumed run skipped $skipped rows, expected the $first done before the kill"
ls -a "$work/data/out" | grep -q '^\.gridwarp-' && echo "note: the killed run left a staging folder (cleaned up by a later issue)"
echo "killed after $first outputs; --resume skipped those and completed the set"

# 3. docs/bigdata.md's Slurm script, as written: a 4-task array of `affine --tiles slurm` fills one
#    OME-Zarr store (with its pyramid) equal, byte for byte, to the single command's.
mkdir -p "$work/slide" "$work/slide_single"
/usr/bin/python3 - "$source_dir/docs/bigdata.md" "$work/slide/warp-slide.sbatch" "$source_dir/data/card.png" "$work/slide/slide.tif" << 'PYTHON'
import re, sys
import numpy as np, tifffile
from PIL import Image
text = open(sys.argv[1]).read()
script = next(b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "#SBATCH --array" in b)
open(sys.argv[2], "w").write(script)
card = Image.open(sys.argv[3]).convert("RGB")
tifffile.imwrite(sys.argv[4], np.asarray(card.resize((card.width * 4, card.height * 4))), tile=(256, 256), photometric="rgb")
PYTHON
cp "$work/slide/slide.tif" "$work/slide_single/slide.tif"
single_line=$(grep '^gridwarp affine' "$work/slide/warp-slide.sbatch" | sed 's/ --tiles slurm --resume//; s/ --threads "[^"]*"//')
(cd "$work/slide_single" && PATH="$(dirname "$gridwarp"):$PATH" bash -c "$single_line --by-tiles always -q") || fail "the single run of the example failed"
PATH="$(dirname "$gridwarp"):$PATH" sbatch --wait --quiet --output="$work/log/slide_%a.txt" --chdir="$work/slide" "$work/slide/warp-slide.sbatch" \
    || fail "the documented array failed: $(cat "$work"/log/slide_*.txt 2> /dev/null)"
diff -r "$work/slide_single/turned.zarr" "$work/slide/turned.zarr" > /dev/null || fail "the array's store differs from the single run's"
echo "docs/bigdata.md's array of 4 shares: one store equal to the single run, byte for byte"
