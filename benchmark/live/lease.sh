#!/usr/bin/env bash
# One lease of the lent H200, as three long calls after the carry (README.md in this folder), each a step here.
# Servers are started in their own sessions (setsid) and outlive the call that started them, so the slow cold
# starts overlap the test suite; a server not being measured is frozen (SIGSTOP) so that it takes no CPU.
#   a   (the last carry call) install; start the loop's tiny servers (benchmark/serving/device_loop.sh start) and
#       the end-to-end Kimi-width servers (E2E_STEP=start benchmark/serving/device_e2e.sh) in the background;
#       the upstream series (benchmark/live/upstream.sh all) beside the test suite (benchmark/live/suite.sh,
#       without the live tiny file, which passed in the run before and is served again here by both benchmarks);
#       then freeze the end-to-end servers and run the loop's phase 1 (bench -> plan -> adaptive servers)
#   b   wait for the adaptive servers, freeze the loop's servers, E2E_STEP=measure device_e2e.sh
#   c   the loop's phase 2 (alternating rounds plain / fixed / adaptive)
# Knobs: A_SUITE_S (240: the suite's limit in step a), B_BUDGET_S (500), C_BUDGET_S (440).
set -uo pipefail
step=${1:?usage: lease.sh a|b|c}
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T0=$(date +%s)
say() { echo "[lease $step $(( $(date +%s) - T0 )) s] $*"; }
case $step in
a)
  bash benchmark/live/device.sh install || exit 3
  eval "$(benchmark/live/device.sh env)"
  (bash benchmark/serving/device_loop.sh start > /dev/null 2>&1) &
  (E2E_STEP=start bash benchmark/serving/device_e2e.sh > /dev/null 2>&1) &
  (bash benchmark/live/upstream.sh all > "$OUT/upstream-all.out" 2>&1; echo "upstream.sh exit $?" >> "$OUT/upstream-all.out") &
  UP=$!
  SUITE_TIMEOUT=${A_SUITE_S:-240} SUITE_ARGS="-n 8 --dist loadfile -p no:cacheprovider --ignore=test/gpu/test_live_tiny.py" \
    bash benchmark/live/suite.sh > /dev/null 2>&1
  say "suite: $(tail -3 "$OUT/suite.log" | tr '\n' ' ')"
  wait $UP; say "$(tail -1 "$OUT/upstream-all.out")"
  wait
  # the e2e servers wait (frozen) for step b; the loop's phase 1 measures without them taking CPU
  for f in /tmp/e2e/pid-*; do [ -f "$f" ] && kill -STOP -- "-$(cat "$f")" 2>/dev/null && say "SIGSTOP ${f##*/pid-}"; done
  PHASE1_S=120 bash benchmark/serving/device_loop.sh phase1 > /dev/null 2>&1
  say "phase1 done: $(ls "$OUT" | tr '\n' ' ')"
  ;;
b)
  FREEZE_WAIT_S=${FREEZE_WAIT_S:-90} bash benchmark/serving/device_loop.sh freeze > /dev/null 2>&1
  say "loop servers frozen"
  E2E_STEP=measure BUDGET_S=${B_BUDGET_S:-500} bash benchmark/serving/device_e2e.sh > /dev/null 2>&1
  say "e2e done: $(ls "$OUT" | tr '\n' ' ')"
  ;;
c)
  BUDGET_S=${C_BUDGET_S:-440} bash benchmark/serving/device_loop.sh phase2 > /dev/null 2>&1
  say "loop phase 2 done: $(ls "$OUT" | tr '\n' ' ')"
  ;;
*) echo "lease.sh: unknown step $step (a|b|c)"; exit 2;;
esac
