#!/usr/bin/env bash
# Start one deploy-shaped plain server alone on the lent H200 and log, every 10 s, its health, the last line of its
# log and the busiest processes (what the start spends its time on). Run from the repository root after
# `benchmark/live/device.sh install`; writes $OUT/diag.log, diag-build.log, diag-plain.log. It runs until the
# server is healthy: bound it with `timeout`. 2026-12-02: the bs-128 decode capture ran nvcc (cicc) for over 100 s.
set -uo pipefail
# one deploy-shaped plain server alone: how long its start takes, and what the machine does meanwhile
eval "$(benchmark/live/device.sh env)"
W=/tmp/dg; mkdir -p $W $OUT
T0=$(date +%s)
python3 -m sglang_kimi_eagle3.tiny $W/pair --preset deploy --int4 --draft-agreement 0.9 --device cuda > $OUT/diag-build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s" >> $OUT/diag.log
python3 - > $W/start.sh <<'PY'
import shlex
from sglang_kimi_eagle3.tiny.launch import base_args
a = base_args("/tmp/dg/pair/target", mem_fraction=0.5)
a[a.index("--max-running-requests") + 1] = "128"
a[a.index("--cuda-graph-max-bs-decode") + 1] = "128"
a += ["--cuda-graph-bs-decode", "1", "2", "4", "8", "16", "32", "64", "128"]
print("exec env TRITON_CACHE_DIR=/tmp/dg/c/triton SGLANG_JIT_CACHE_DIR=/tmp/dg/c/jit XDG_CACHE_HOME=/tmp/dg/c/xdg " + shlex.join(["python3", "-m", "sglang.launch_server", *a, "--host", "127.0.0.1", "--port", "30601"]))
PY
setsid bash $W/start.sh > $OUT/diag-plain.log 2>&1 < /dev/null &
while true; do
  s=$(( $(date +%s) - T0 ))
  code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' http://127.0.0.1:30601/health)
  echo "[$s s] health $code | $(tr '\r' '\n' < $OUT/diag-plain.log | grep -v '^\s*$' | tail -1 | cut -c1-150)" >> $OUT/diag.log
  ps -eo pcpu,etimes,comm --sort=-pcpu | head -6 | tr '\n' ';' >> $OUT/diag.log; echo >> $OUT/diag.log
  [ "$code" = 200 ] && { echo "HEALTHY at $s s" >> $OUT/diag.log; break; }
  sleep 10
done
