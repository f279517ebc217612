#!/usr/bin/env bash
# Runs ON the device machine after device.sh install (same warm machine): the live tiny test, logs to $OUT.
#   benchmark/live/live.sh [pytest -k expression]
# Writes $OUT/live.log (pytest output), $OUT/gpu-mem.csv (GPU memory every 5 s) and $OUT/live-logs.tgz (server
# logs, status files, per-role JSON with start/finish times, bench JSON).
# The servers start concurrently on the one GPU (test/gpu/tiny_runs.py): GPU_CI_PARALLEL (default 6) at a time,
# each on its own ports with its KV pool capped by --max-total-tokens (~2 GB of GPU memory each). The 13 roles
# (3 targets x plain/chain/tree, refused, upstream, agree-0.6, agree-0.3) are meant to fit one 10-minute call;
# whatever a call does not finish, the next call (live.sh again, or suite.sh) takes up: GPU_CI_REUSE_RUNS=1.
#   GPU_CI_TARGETS=int4 benchmark/live/live.sh      only the INT4 wrapper pair (7 roles)
set -uo pipefail
eval "$(benchmark/live/device.sh env)"
# after a never-slower lease on this machine: its JIT caches (SGLang's tree and tree-sampling modules, FlashInfer's
# sampling module, prebuilt before its servers started) are the ones these servers need too (run 28, 2026-12-05:
# without them each server's kernel warm-up built them again, 120-124 s, and a 330-s step ended after 1 test)
DA_W=${DA_WORK:-/tmp/da}
[ -d "$DA_W/cache/jit-shared" ] && export SGLANG_JIT_CACHE_DIR=${SGLANG_JIT_CACHE_DIR:-$DA_W/cache/jit-shared}
[ -d "$DA_W/cache/flashinfer-shared" ] && export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-$DA_W/cache/flashinfer-shared}
# 540 s per server: at TP 2 SGLang auto-enables FlashInfer AllReduce fusion, whose CUDA module is JIT-built on the
# first start (206 s on the lent 2x H200, 2026-11-30). TP 1 servers started one at a time in 73-135 s.
export GPU_CI_LOG_DIR=/tmp/live-logs GPU_CI_TINY_DIR=/tmp/tiny GPU_CI_STARTUP_TIMEOUT=${GPU_CI_STARTUP_TIMEOUT:-540}
export GPU_CI_REUSE_RUNS=${GPU_CI_REUSE_RUNS:-1} GPU_CI_PARALLEL=${GPU_CI_PARALLEL:-6}
mkdir -p $GPU_CI_LOG_DIR
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -l 5 > ${OUT:-/tmp}/gpu-mem.csv 2>&1 &
smi=$!
k=${1:-}
# SIGINT at the limit: pytest stops like on Ctrl-C, stops the servers still up, prints its summary; the roles it
# finished are saved for the next call. The models are built by the test itself (in its role threads).
timeout -s INT ${LIVE_TIMEOUT:-540} python3 -m pytest -q -rA -p no:cacheprovider test/gpu/test_live_tiny.py ${k:+-k "$k"} 2>&1 | tee ${OUT:-/tmp}/live.log
rc=${PIPESTATUS[0]}
kill $smi 2>/dev/null
tar czf ${OUT:-/tmp}/live-logs.tgz -C /tmp live-logs --exclude='live-logs/models' 2>/dev/null
echo "live.sh: pytest exit $rc"
exit $rc
