#!/usr/bin/env bash
# Record the job what-if pairs: DDP CPU jobs (gloo), each pinned to two cores of its own
# (taskset), so every job runs as on a 2-core host while seven record at once on a larger
# idle machine (SEQUENTIAL=1: one job at a time, on cores 0-1; STEPS=N profiled steps, 5 by
# default). Needs torch. usage: record_jobs.sh OUT_DIR [ROUNDS_FILE]
# ROUNDS_FILE: one round per line, 5 fields per job (name world straggler kind extra_ms), as
# rounds_e.txt; without it, the d_ set below.
set -u
out=${1:?usage: record_jobs.sh OUT_DIR [ROUNDS_FILE]}
rounds=${2:-}
export CUDA_VISIBLE_DEVICES=  # CPU jobs: keep the GPU out of the traces
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nproc; python3 -c 'import torch, os; print(torch.__version__, len(os.sched_getaffinity(0)))'
# Is pinning enforced? Two busy processes on one core should each get about half of it.
python3 - <<'PY'
import os, subprocess, sys, time
code = "import time\nt=time.process_time();w=time.time()\nwhile time.time()-w<1.0: pass\nprint(round((time.process_time()-t)/(time.time()-w),2))"
ps = [subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
print("cpu share of two busy processes pinned to one core:", [p.communicate()[0].strip() for p in ps])
PY
run_round() {  # name world straggler kind extra ... (5 fields per job), one job per core pair
  local slot=0 pids=()
  while [ $# -ge 5 ]; do
    local c=$((2 * slot)) port=$((29600 + 10 * slot))
    taskset -c "$c,$((c + 1))" python3 "$here/record.py" --out "$out" --job "$1" --world "$2" \
      --straggler "$3" --kind "$4" --extra-ms "$5" --steps "${STEPS:-5}" --port "$port" > "$out/$1.log" 2>&1 &
    pids+=($!); shift 5
    if [ "${SEQUENTIAL:-0}" = 1 ]; then wait "$!"; else slot=$((slot + 1)); fi
  done
  for p in "${pids[@]}"; do wait "$p"; done
}
t0=$(date +%s)
if [ -n "$rounds" ]; then
  k=0
  while read -r line; do
    case "$line" in ''|'#'*) continue ;; esac
    # shellcheck disable=SC2086  # the line is the round's fields
    run_round $line < /dev/null  # the jobs must not read the rounds file
    k=$((k + 1)); echo "round $k: $(( $(date +%s) - t0 )) s"
  done < "$rounds"
else
  run_round \
    d_ws2_balanced 2 -1 sleep 0   d_ws2_sleep25_r0 2 0 sleep 25   d_ws2_compute20_r1 2 1 compute 20 \
    d_ws3_balanced 3 -1 sleep 0   d_ws3_sleep30_r2 3 2 sleep 30   d_ws3_compute15_r0 3 0 compute 15 \
    d_ws4_balanced 4 -1 sleep 0
  echo "round 1: $(( $(date +%s) - t0 )) s"
  run_round \
    d_ws4_sleep20_r1 4 1 sleep 20   d_ws4_compute25_r3 4 3 compute 25   d_ws2_compute45_r0 2 0 compute 45 \
    d_ws3_sleep60_r1 3 1 sleep 60   d_ws2_balanced_b 2 -1 sleep 0   d_ws3_balanced_b 3 -1 sleep 0 \
    d_ws4_balanced_b 4 -1 sleep 0
fi
echo "rounds: $(( $(date +%s) - t0 )) s"
tail -n 1 "$out"/*.log
