#!/usr/bin/env bash
# One lease of the lent H200, as three long calls after the carry (README.md in this folder), each a step here.
# Servers are started in their own sessions (setsid) and outlive the call that started them; a server not being
# measured is frozen (SIGSTOP) so that it takes no CPU.
#   a   (the last carry call) install; the loop's tiny servers start (benchmark/serving/device_loop.sh start), and
#       its adaptive servers from `plan` on the previous lease's rounds (device_loop.sh phase1 with PLAN_FROM)
#       while the test suite runs (benchmark/live/suite.sh, without the live tiny file: step live) beside the upstream series
#       (benchmark/live/upstream.sh all, limited to A_UPSTREAM_S); after the suite the Kimi-width end-to-end
#       servers start (E2E_STEP=start benchmark/serving/device_e2e.sh) and the loop's servers are frozen. Not beside
#       the suite: on 2026-12-01 a pytest worker kept 39 GiB of GPU memory and one of those servers ran out
#   b   E2E_STEP=measure device_e2e.sh (the loop's servers stay frozen; the e2e servers are stopped at its end)
#   live  the live tiny file alone (INT4 target), on an idle GPU: before a's servers start, or in a lease of its own
#   c   the loop's phase 2 (alternating rounds plain / fixed / adaptive), with the whole GPU; then the late upstream
#       logs of step a
#   rest  the end-to-end rounds left by e2e (R_E2E_S, 90), then the upstream series' serving test (R_SERVING_S, 480: in run 9
#       its extend case took 280 s and its strict case had not ended 80 s later; 0: not run)
#       and kernel tests (R_KERNELS_S, 120; 0: not run), on the GPU the e2e servers left
#   e2e / loop / suite  the same lease in another order (each one call after the carry): the end-to-end servers
#       alone first (e2e: install, start, cold passes and steady rounds; loop: their last rounds, then the loop's
#       servers and its alternating rounds), then the host-cost benchmark and the suite on an idle GPU (suite).
#       Knobs: E_END_S (570), L_E2E_S (60), L_END_S (560), PHASE2_WAIT_S (240), A_HOST_S (90), S_SUITE_S (420),
#       S_STOP (1: suite stops this lease's servers first; 0 leaves them running);
#       device_e2e.sh's and device_loop.sh's own (CONC, TEMPS, STEADY_TEMPS, ROUNDS, ROUND_S, LOOP_Q, ...) pass through
# Every step writes into /tmp/res-STEP (kept on the warm machine) and packs it into $OUT/res-STEP.tgz every PACK_S s and at its end:
# a call returns at most 8 files from $OUT (2026-12-01: the upstream logs and the loop's phase-1 files were
# left out of a call that wrote 13). A step cut short leaves /tmp/res-STEP: `tar czf $OUT/x.tgz /tmp/res-*`.
# Knobs: A_HOST (0; 1: benchmark/kernels/bench_host.py first, limit A_HOST_S 120; in suite A_HOST_ARGS its flags, A_HOST_DIRECT=1 a second run with the direct C launch), A_SUITE_S (330), A_SUITE_N
# (10 xdist workers), GPU_CI_TARGETS (int4), A_UPSTREAM_S (300; 0: not run), PLAN_FROM,
# B_BUDGET_S (560), C_BUDGET_S (540: phase 2 ends by then), PHASE2_WAIT_S (90).
set -uo pipefail
step=${1:?usage: lease.sh a|b|c|live|e2e|loop|rest|suite}
FINAL_OUT=${OUT:-/tmp/out}
export OUT=/tmp/res-$step
mkdir -p "$OUT" "$FINAL_OUT"
T0=$(date +%s)
say() { echo "[lease $step $(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/lease.log"; }
pack() {
  kill "$PACKER" 2>/dev/null  # its own temporary name: a tar of it still running writes no file of this one
  tar czf "$FINAL_OUT/res-$step.tgz.tmp" -C /tmp "res-$step" && mv "$FINAL_OUT/res-$step.tgz.tmp" "$FINAL_OUT/res-$step.tgz" \
    && say "packed $(ls "$OUT" | wc -l) files into res-$step.tgz"
  rm -f "$FINAL_OUT/res-$step.tgz.part"  # a periodic pack cut short: not one of the call's few returned files
}
# a call cut short by the device's limit (the lease's budget) runs no EXIT trap: every PACK_S (60) seconds the folder so
# far is packed too (atomically), so what finished comes back whatever stops the call
( while sleep "${PACK_S:-60}"; do
    tar czf "$FINAL_OUT/res-$step.tgz.part" -C /tmp "res-$step" 2>/dev/null && mv "$FINAL_OUT/res-$step.tgz.part" "$FINAL_OUT/res-$step.tgz"
  done ) &
PACKER=$!
trap pack EXIT
case $step in
a)
  bash benchmark/live/device.sh install || exit 3
  eval "$(benchmark/live/device.sh env)"
  # A_HOST=1: the eager verify ops' host cost (benchmark/kernels/bench_host.py) first, while the CPU is quiet
  if [ "${A_HOST:-0}" = 1 ]; then
    timeout "${A_HOST_S:-120}" python3 -m benchmark.kernels.bench_host > "$OUT/bench-host.log" 2>&1
    say "host cost: exit $? ($(tail -1 "$OUT/bench-host.log" | cut -c1-120))"
  fi
  # the loop's servers: plain + fixed per q, then (PLAN_FROM) `plan` on the carried bench documents of the previous
  # lease's rounds and the adaptive servers with the flags it printed, so they too are warm by step c
  (bash benchmark/serving/device_loop.sh start > /dev/null 2>&1
   PLAN_FROM=${PLAN_FROM:-benchmark/results/loop-h200-2026-12-01-derived} bash benchmark/serving/device_loop.sh phase1 > /dev/null 2>&1) &
  # the Kimi-width pair builds beside the suite (48 s on 2026-12-01); its servers start only after the suite
  (mkdir -p /tmp/e2e && python3 -m sglang_kimi_eagle3.tiny /tmp/e2e/kw --kimi-width --device cuda > /tmp/e2e/build.log 2>&1
   echo "build exit $?" >> /tmp/e2e/build.log) &
  BUILD=$!
  if [ "${A_UPSTREAM_S:-300}" -gt 0 ]; then
  (timeout "${A_UPSTREAM_S:-300}" bash benchmark/live/upstream.sh all > "$OUT/upstream-all.out" 2>&1
   echo "upstream.sh exit $?" >> "$OUT/upstream-all.out") &
  fi
  # the suite without the live tiny file: beside the loop's servers its INT4 roles missed their start limit
  # (run 6: 48 s per CUDA-graph batch under CPU contention); it runs alone in step `live` (A_LIVE=1: here anyway)
  if [ "${A_LIVE:-0}" = 1 ]; then LIVE_ARG=""; else LIVE_ARG="--ignore=test/gpu/test_live_tiny.py"; fi
  GPU_CI_TARGETS=${GPU_CI_TARGETS:-int4} GPU_CI_PARALLEL=7 SUITE_TIMEOUT=${A_SUITE_S:-330} \
    SUITE_ARGS="-n ${A_SUITE_N:-10} --dist loadfile -p no:cacheprovider $LIVE_ARG" bash benchmark/live/suite.sh > /dev/null 2>&1
  say "suite: $(tail -3 "$OUT/suite.log" | tr '\n' ' ')"
  wait $BUILD
  if grep -q "build exit 0" /tmp/e2e/build.log; then
    E2E_STEP=start TARGET=/tmp/e2e/kw/target DRAFT=/tmp/e2e/kw/draft bash benchmark/serving/device_e2e.sh > /dev/null 2>&1
  else
    say "the Kimi-width pair did not build beside the suite: $(tail -2 /tmp/e2e/build.log | tr '\n' ' '); building it again"
    E2E_STEP=start bash benchmark/serving/device_e2e.sh > /dev/null 2>&1
  fi
  say "e2e servers started"
  FREEZE_WAIT_S=${FREEZE_WAIT_S:-60} bash benchmark/serving/device_loop.sh freeze > /dev/null 2>&1
  say "loop servers frozen; upstream: $(tail -1 "$OUT/upstream-all.out")"
  ;;
b)
  E2E_STEP=measure BUDGET_S=${B_BUDGET_S:-560} bash benchmark/serving/device_e2e.sh > /dev/null 2>&1
  say "e2e done"
  ;;
c)
  # phase 1 ran in step a (PLAN_FROM): its plans and the adaptive servers' flags are in /tmp/res-a
  PHASE2_WAIT_S=${PHASE2_WAIT_S:-90} BUDGET_S=$(( ${C_BUDGET_S:-540} - $(date +%s) + T0 )) bash benchmark/serving/device_loop.sh phase2 > /dev/null 2>&1
  say "loop phase 2 done"
  # what step a's background jobs wrote after a was packed (the upstream series outlives the suite)
  mkdir -p "$OUT/late-a" && cp -r /tmp/res-a/upstream-* /tmp/res-a/patches /tmp/res-a/SERIES.md "$OUT/late-a/" 2>/dev/null
  ;;
live)
  # the live tiny file alone, on the INT4 wrapper target (7 roles; run 4: 19 passed in 267 s on an idle GPU)
  GPU_CI_TARGETS=${GPU_CI_TARGETS:-int4} GPU_CI_PARALLEL=7 LIVE_TIMEOUT=${LIVE_S:-420} bash benchmark/live/live.sh > /dev/null 2>&1
  say "live: $(grep -E 'passed|failed' "$OUT/live.log" 2>/dev/null | tail -1)"
  ;;
e2e)
  # one lease as e2e / loop / suite (2026-12-01, seventh run): the end-to-end servers alone on the GPU first, their
  # cold passes and steady rounds over this call and the start of the next (KEEP_SERVERS=1, RESUME=1)
  bash benchmark/live/device.sh install || exit 3
  eval "$(benchmark/live/device.sh env)"
  COLD_BEFORE=${COLD_BEFORE:-0} E2E_STEP=start bash benchmark/serving/device_e2e.sh > /dev/null 2>&1
  say "e2e servers started"
  # the round length of this lease: the steps that resume these rounds (rest, loop) keep it unless given one (run 8's
  # rest step, given none, went on in device_e2e.sh's default 20 s rounds and measured one level instead of seven)
  mkdir -p /tmp/e2e && echo "${ROUND_S:-20}" > /tmp/e2e/round_s
  # device_e2e.sh stops e2e.py at its deadline + 30 s (ANATOMY_S=0): end by E_END_S of this call
  KEEP_SERVERS=1 FIT=0 RESUME=0 ANATOMY_S=0 BUDGET_S=$(( ${E_END_S:-570} - 30 - $(date +%s) + T0 )) \
    E2E_STEP=measure bash benchmark/serving/device_e2e.sh > /dev/null 2>&1
  say "e2e measured (servers left running)"
  ;;
loop)
  # the rest of the end-to-end rounds (RESUME=1; then its servers stop), then the never-slower loop: plain, fixed
  # 3/1/4 and plan's recommendation, planned from the carried rounds (PLAN_FROM), alternating rounds
  eval "$(benchmark/live/device.sh env)"
  ROUND_S=${ROUND_S:-$(cat /tmp/e2e/round_s 2>/dev/null || echo 20)} RESUME=1 FIT=0 ANATOMY_S=0 BUDGET_S=${L_E2E_S:-60} E2E_STEP=measure bash benchmark/serving/device_e2e.sh > /dev/null 2>&1
  say "e2e rest done: $(tail -2 "$OUT/device_e2e-measure.log" 2>/dev/null | head -1 | cut -c1-200)"
  bash benchmark/serving/device_loop.sh start > /dev/null 2>&1
  PLAN_FROM=${PLAN_FROM:-benchmark/results/loop-h200-2026-12-01-derived} bash benchmark/serving/device_loop.sh phase1 > /dev/null 2>&1
  say "loop servers started"
  PHASE2_WAIT_S=${PHASE2_WAIT_S:-240} BUDGET_S=$(( ${L_END_S:-560} - $(date +%s) + T0 )) bash benchmark/serving/device_loop.sh phase2 > /dev/null 2>&1
  say "loop phase 2 done"
  ;;
rest)
  # the rest of the end-to-end rounds (RESUME=1; then its servers stop), then the upstream series' serving test
  # (PR 01, two tiny servers) and its kernel tests + benchmarks (PR 02/03) on the idle GPU, each under a limit
  eval "$(benchmark/live/device.sh env)"
  ROUND_S=${ROUND_S:-$(cat /tmp/e2e/round_s 2>/dev/null || echo 20)} RESUME=1 FIT=0 ANATOMY_S=0 BUDGET_S=${R_E2E_S:-90} E2E_STEP=measure bash benchmark/serving/device_e2e.sh > /dev/null 2>&1
  say "e2e rest done: $(tail -2 "$OUT/device_e2e-measure.log" 2>/dev/null | head -1 | cut -c1-200)"
  for f in /tmp/e2e/pid-*; do [ -f "$f" ] && kill -KILL -- "-$(cat "$f")" 2>/dev/null; done
  sleep 3
  if [ "${R_SERVING_S:-480}" -gt 0 ]; then  # timeout 0 would mean no limit
    timeout "${R_SERVING_S:-480}" bash benchmark/live/upstream.sh serving > "$OUT/upstream-serving.out" 2>&1
    say "upstream serving: exit $? ($(grep -E '^(OK|FAILED|Ran )' "$OUT/upstream-serving.log" 2>/dev/null | tr '\n' ' '))"
  fi
  if [ "${R_KERNELS_S:-120}" -gt 0 ]; then
    timeout "${R_KERNELS_S:-120}" bash benchmark/live/upstream.sh kernels > "$OUT/upstream-kernels.out" 2>&1
    say "upstream kernels: exit $?"
  fi
  ;;
suite)
  # every server of this lease stopped (S_STOP=0: left running, e.g. e2e servers still warming up while the suite
  # fills their wait); the host-cost benchmark on a quiet machine, then the suite alone
  if [ "${S_STOP:-1}" = 1 ]; then
    for f in /tmp/e2e/pid-* /tmp/loop/pid-* /tmp/da/pid-*; do [ -f "$f" ] && kill -KILL -- "-$(cat "$f")" 2>/dev/null; done
    sleep 3
  fi
  eval "$(benchmark/live/device.sh env)"
  if [ "${A_HOST_S:-90}" -gt 0 ]; then  # timeout 0 would mean no limit
    timeout "${A_HOST_S:-90}" python3 -m benchmark.kernels.bench_host ${A_HOST_ARGS:-} > "$OUT/bench-host.log" 2>&1
    say "host cost: exit $?"
    # A_HOST_DIRECT=1: once more with the direct C launch (SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH=1), into $OUT/direct
    if [ "${A_HOST_DIRECT:-0}" = 1 ]; then
      mkdir -p "$OUT/direct"
      OUT=$OUT/direct SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH=1 timeout "${A_HOST_S:-90}" python3 -m benchmark.kernels.bench_host \
        ${A_HOST_ARGS:-} > "$OUT/bench-host-direct.log" 2>&1
      say "host cost, direct launch: exit $?"
    fi
  fi
  # after the host-cost benchmark (it times the host: nothing else runs then), beside the suite:
  # PREP_DA=Q: the never-slower servers' preparation for the next call (DA_STEP=prep benchmark/serving/device_adaptive.sh:
  # SGLang's INT4 MoE JIT kernels, about 5 minutes each and side by side, left running; the deploy pair of agreement Q);
  # PREBUILD_JIT=DIR: only those JIT kernels, into DIR (benchmark/live/prebuild_jit.py)
  if [ -n "${PREP_DA:-}" ]; then
    (DA_Q=$PREP_DA DA_STEP=prep OUT=$OUT/da-prep bash benchmark/serving/device_adaptive.sh > /dev/null 2>&1
     say "da prep: $(tail -2 "$OUT/da-prep/device_adaptive-q$PREP_DA.log" | head -1)") &
  elif [ -n "${PREBUILD_JIT:-}" ]; then
    setsid python3 benchmark/live/prebuild_jit.py --cache "$PREBUILD_JIT" > "$OUT/prebuild.log" 2>&1 < /dev/null &
  fi
  GPU_CI_TARGETS=${GPU_CI_TARGETS:-int4} GPU_CI_PARALLEL=7 SUITE_TIMEOUT=${S_SUITE_S:-420} \
    SUITE_ARGS="-n ${A_SUITE_N:-10} --dist loadfile -p no:cacheprovider --ignore=test/gpu/test_live_tiny.py" \
    bash benchmark/live/suite.sh > /dev/null 2>&1
  say "suite: $(tail -3 "$OUT/suite.log" | tr '\n' ' ')"
  ;;
*) echo "lease.sh: unknown step $step (a|b|c|live|e2e|loop|rest|suite)"; exit 2;;
esac
