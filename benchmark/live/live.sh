#!/usr/bin/env bash
# Runs ON the device machine after device.sh install (same warm machine): the live tiny test, logs to $OUT.
#   benchmark/live/live.sh [pytest -k expression]
# Writes $OUT/live.log (pytest output) and $OUT/live-logs.tgz (server logs, status files, bench JSON).
set -uo pipefail
eval "$(benchmark/live/device.sh env)"
# 540 s per server: at TP 2 SGLang auto-enables FlashInfer AllReduce fusion, whose CUDA module is JIT-built on the
# first start (206 s on the lent 2x H200, 2026-11-30): 300 s was too short there. TP 1 servers start in 73-135 s.
export GPU_CI_LOG_DIR=/tmp/live-logs GPU_CI_TINY_DIR=/tmp/tiny GPU_CI_STARTUP_TIMEOUT=${GPU_CI_STARTUP_TIMEOUT:-540}
# a second call (the 10-minute limit) picks up the roles the first one finished: tiny_runs.py GPU_CI_REUSE_RUNS
export GPU_CI_REUSE_RUNS=${GPU_CI_REUSE_RUNS:-1}
mkdir -p $GPU_CI_LOG_DIR
python3 -m sglang_kimi_eagle3.tiny $GPU_CI_TINY_DIR
k=${1:-}
timeout -s INT ${LIVE_TIMEOUT:-560} python3 -m pytest -q -rA -p no:cacheprovider test/gpu/test_live_tiny.py ${k:+-k "$k"} 2>&1 | tee ${OUT:-/tmp}/live.log
rc=${PIPESTATUS[0]}
tar czf ${OUT:-/tmp}/live-logs.tgz -C /tmp live-logs --exclude='live-logs/models' 2>/dev/null
echo "live.sh: pytest exit $rc"
exit $rc
