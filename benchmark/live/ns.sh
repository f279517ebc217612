#!/usr/bin/env bash
# The never-slower lease's long calls in a few words each, so that the batch sent after call 0 is short to write: the
# machine goes back 30 s after a call ends, and a batch of 36 calls with full commands took longer than that to send
# (2026-12-07). Steps (docs/gpu-ci.md, "The never-slower lease"):
#   launch        part 033 received, the install, then device_adaptive_launch.sh (plain / ours / ours_q2)
#   measure B0    one measure call: budget B0 - (seconds since call 0) - 330 (at most 560); CONC 8,32 where it holds
#                 more than 330 s, else 8
#   hooks B0      the servers stopped, the compiled hook tests with 8 workers until 25 s before B0 runs out
# B0: the device budget call 0's reply showed; call 0 wrote /tmp/lease_t0 (date +%s). Knobs pass through:
# DA_Q (0.6), DA_Q2 (0.9), DA_SKIP ("sglang fixed"), MEMF (0.85), MAXREQ (512), CONC (overrides the choice above),
# ROUNDS (3), DA_KEEP (1).
set -uo pipefail
export OUT=${OUT:?ns.sh writes into \$OUT}
export DA_Q=${DA_Q:-0.6} DA_Q2=${DA_Q2:-0.9} DA_SKIP=${DA_SKIP:-sglang fixed} MEMF=${MEMF:-0.85} MAXREQ=${MAXREQ:-512}
left() { echo $(( $1 - ($(date +%s) - $(cat /tmp/lease_t0)) )); }
case ${1:?usage: ns.sh launch | measure B0 | hooks B0} in
launch)
  bash benchmark/live/device.sh recv && bash benchmark/live/device.sh install | tail -1
  eval "$(bash benchmark/live/device.sh env)"
  LAUNCH_HEALTHY_S=${LAUNCH_HEALTHY_S:-480} bash benchmark/serving/device_adaptive_launch.sh 2>&1 | grep -v LD_PRELOAD | tail -40
  ;;
measure)
  eval "$(bash benchmark/live/device.sh env)"
  b=$(( $(left "${2:?measure B0}") - 330 )); [ $b -gt 560 ] && b=560
  c=8; [ $b -gt 330 ] && c=8,32
  echo "budget $b s, conc ${CONC:-$c}"
  DA_STEP=measure DA_KEEP=${DA_KEEP:-1} STARTUP_S=200 ROUNDS=${ROUNDS:-3} BUDGET_S=$b CONC=${CONC:-$c} \
    bash benchmark/serving/device_adaptive.sh 2>&1 | grep -v LD_PRELOAD | tail -60
  ;;
hooks)
  pkill -f "[l]aunch_server"; sleep 5
  eval "$(bash benchmark/live/device.sh env)"
  h=$(( $(left "${2:?hooks B0}") - 25 )); [ $h -gt 580 ] && h=580
  echo "hook tests for at most $h s"
  timeout -s INT $h python3 -m pytest -q -rf -p no:cacheprovider -n 8 --dist loadfile test/integration/hooks > $OUT/hooks.txt 2>&1
  tail -8 $OUT/hooks.txt
  ;;
*) echo "ns.sh: unknown step $1 (launch | measure B0 | hooks B0)" >&2; exit 2 ;;
esac
