#!/usr/bin/env bash
# One lease of the lent H200, as three long calls after the carry (README.md in this folder), each a step here.
# Servers are started in their own sessions (setsid) and outlive the call that started them; a server not being
# measured is frozen (SIGSTOP) so that it takes no CPU.
#   a   (the last carry call) install; the loop's tiny servers start (benchmark/serving/device_loop.sh start)
#       while the test suite runs (benchmark/live/suite.sh, without the live tiny file) beside the upstream series
#       (benchmark/live/upstream.sh all, limited to A_UPSTREAM_S); after the suite the Kimi-width end-to-end
#       servers start (E2E_STEP=start benchmark/serving/device_e2e.sh) and the loop's servers are frozen. Not beside
#       the suite: on 2026-12-01 a pytest worker kept 39 GiB of GPU memory and one of those servers ran out
#   b   E2E_STEP=measure device_e2e.sh (the loop's servers stay frozen; the e2e servers are stopped at its end)
#   c   the loop: phase 1 (bench -> plan -> adaptive servers) and phase 2 (alternating rounds plain / fixed /
#       adaptive), with the whole GPU
# Every step writes into /tmp/res-STEP (kept on the warm machine) and packs it into $OUT/res-STEP.tgz at its end:
# a call returns at most 8 files from $OUT (2026-12-01: the upstream logs and the loop's phase-1 files were
# left out of a call that wrote 13). A step cut short leaves /tmp/res-STEP: `tar czf $OUT/x.tgz /tmp/res-*`.
# Knobs: A_SUITE_S (240), A_UPSTREAM_S (300), B_BUDGET_S (560), C_BUDGET_S (560: phase 2 ends by then).
set -uo pipefail
step=${1:?usage: lease.sh a|b|c}
FINAL_OUT=${OUT:-/tmp/out}
export OUT=/tmp/res-$step
mkdir -p "$OUT" "$FINAL_OUT"
T0=$(date +%s)
say() { echo "[lease $step $(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/lease.log"; }
pack() { tar czf "$FINAL_OUT/res-$step.tgz" -C /tmp "res-$step" && say "packed $(ls "$OUT" | wc -l) files into res-$step.tgz"; }
trap pack EXIT
case $step in
a)
  bash benchmark/live/device.sh install || exit 3
  eval "$(benchmark/live/device.sh env)"
  (bash benchmark/serving/device_loop.sh start > /dev/null 2>&1) &
  (timeout "${A_UPSTREAM_S:-300}" bash benchmark/live/upstream.sh all > "$OUT/upstream-all.out" 2>&1
   echo "upstream.sh exit $?" >> "$OUT/upstream-all.out") &
  SUITE_TIMEOUT=${A_SUITE_S:-240} SUITE_ARGS="-n 8 --dist loadfile -p no:cacheprovider --ignore=test/gpu/test_live_tiny.py" \
    bash benchmark/live/suite.sh > /dev/null 2>&1
  say "suite: $(tail -3 "$OUT/suite.log" | tr '\n' ' ')"
  E2E_STEP=start bash benchmark/serving/device_e2e.sh > /dev/null 2>&1
  say "e2e servers started"
  FREEZE_WAIT_S=${FREEZE_WAIT_S:-60} bash benchmark/serving/device_loop.sh freeze > /dev/null 2>&1
  say "loop servers frozen; upstream: $(tail -1 "$OUT/upstream-all.out")"
  ;;
b)
  E2E_STEP=measure BUDGET_S=${B_BUDGET_S:-560} bash benchmark/serving/device_e2e.sh > /dev/null 2>&1
  say "e2e done"
  ;;
c)
  bash benchmark/serving/device_loop.sh thaw > /dev/null 2>&1
  PHASE1_S=120 bash benchmark/serving/device_loop.sh phase1 > /dev/null 2>&1
  say "phase1 done"
  PHASE2_WAIT_S=150 BUDGET_S=$(( ${C_BUDGET_S:-560} - $(date +%s) + T0 )) bash benchmark/serving/device_loop.sh phase2 > /dev/null 2>&1
  say "loop phase 2 done"
  ;;
*) echo "lease.sh: unknown step $step (a|b|c)"; exit 2;;
esac
