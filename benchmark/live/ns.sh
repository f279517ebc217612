#!/usr/bin/env bash
# The never-slower lease's long calls in a few words each, so that the batch sent after call 0 is short to write: the
# machine goes back 30 s after a call ends, and a batch of 36 calls with full commands took longer than that to send
# (2026-12-07). Steps (docs/gpu-ci.md, "The never-slower lease"):
#   launch        part 033 received, the install, then device_adaptive_launch.sh (plain / ours / ours_q2);
#                 LAUNCH_HOOK_FILES: hook test files run beside the JIT prebuild (at most LAUNCH_HOOK_S, 240)
#   measure B0    one measure call: budget B0 - (seconds since call 0) - HOOKS_RESERVE_S (at most 560); CONC 8,32
#                 where it holds more than 330 s, else 8. HOOKS_RESERVE_S (370): the hook tests after it ran 318 s to
#                 their end in run 39 and were cut at 309 s in run 40 with 330 reserved
#   hooks B0      the servers stopped, the compiled hook tests with 8 workers until 25 s before B0 runs out
#                 (HOOK_FILES: some of them, e.g. the files of the hooks changed since the last full run, where the
#                 lease is short)
# B0: the device budget call 0's reply showed; call 0 wrote /tmp/lease_t0 (date +%s). Knobs pass through:
# DA_Q (0.6), DA_Q2 (0.9; set empty for no second drafter, e.g. `DA_Q2= DA_KEEPEXT=1`: plain / ours / `keepext`, ours with
# SGLang's draft extend at every steps-0 step, on every call of the lease), DA_SKIP ("sglang fixed"), MEMF (0.85),
# MAXREQ (512), DA_PIN (1: the servers' schedulers on one and the same CPU, the rest and the client on others; 0: where the OS puts them), CONC (overrides the choice above),
# ROUNDS (3), DA_KEEP (1), STARTUP_S (200: the measure call's wait for every server); LEASE_T0 (/tmp/lease_t0);
# NS_DRY=1: every step prints its budget and commands instead of running them (a CPU test).
set -uo pipefail
export OUT=${OUT:?ns.sh writes into \$OUT}
export DA_Q=${DA_Q:-0.6} DA_Q2=${DA_Q2-0.9} DA_SKIP=${DA_SKIP:-sglang fixed} MEMF=${MEMF:-0.85} MAXREQ=${MAXREQ:-512} DA_PIN=${DA_PIN:-1}
step=${1:-}
case $step in
launch) ;;
measure|hooks) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "ns.sh $step: B0 (the budget call 0's reply showed, in seconds) missing or not a number: '${2:-}'" >&2; exit 2; } ;;
*) echo "ns.sh: unknown step '$step' (launch | measure B0 | hooks B0)" >&2; exit 2 ;;
esac
T0_FILE=${LEASE_T0:-/tmp/lease_t0}
[ -f "$T0_FILE" ] || { echo "ns.sh: no $T0_FILE: call 0 writes it (date +%s > /tmp/lease_t0)" >&2; exit 2; }
left() { echo $(( $1 - ($(date +%s) - $(cat "$T0_FILE")) )); }
run() { if [ "${NS_DRY:-0}" = 1 ]; then echo "would run: $*"; else "$@"; fi; }
case $step in
launch)
  run bash benchmark/live/device.sh recv && run bash benchmark/live/device.sh install | tail -1
  [ "${NS_DRY:-0}" = 1 ] || eval "$(bash benchmark/live/device.sh env)"
  # LAUNCH_HOOK_FILES: hook test files run beside the JIT prebuild (a short lease: no separate hooks call), at most
  # LAUNCH_HOOK_S (240) s, so they end before the servers size their memory; their tail is printed at the end
  # (two threads a worker, as DA_SUITE's: in run 44 the uncached Marlin build beside them took 374 s and more, 324-346
  # in run 24 without them)
  hk=(env OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 timeout -s INT "${LAUNCH_HOOK_S:-240}" python3 -m pytest -q -rf -p no:cacheprovider -n 4 --dist loadfile)
  if [ -n "${LAUNCH_HOOK_FILES:-}" ]; then
    if [ "${NS_DRY:-0}" = 1 ]; then echo "would run beside the launch: ${hk[*]} $LAUNCH_HOOK_FILES"
    else ("${hk[@]}" $LAUNCH_HOOK_FILES > /tmp/launch-hooks.txt 2>&1 &); fi
  fi
  LAUNCH_HEALTHY_S=${LAUNCH_HEALTHY_S:-480} run bash benchmark/serving/device_adaptive_launch.sh 2>&1 | grep -v LD_PRELOAD | tail -40
  if [ -n "${LAUNCH_HOOK_FILES:-}" ] && [ "${NS_DRY:-0}" != 1 ]; then
    echo "hook tests beside the launch:"; tail -8 /tmp/launch-hooks.txt
  fi
  ;;
measure)
  b=$(( $(left "$2") - ${HOOKS_RESERVE_S:-370} )); [ $b -gt 560 ] && b=560
  c=8; [ $b -gt 330 ] && c=8,32
  echo "budget $b s, conc ${CONC:-$c}, second drafter ${DA_Q2:-none}$([ "${DA_KEEPEXT:-0}" = 1 ] && echo ', keepext')"
  [ "${NS_DRY:-0}" = 1 ] || eval "$(bash benchmark/live/device.sh env)"
  export DA_STEP=measure DA_KEEP=${DA_KEEP:-1} STARTUP_S=${STARTUP_S:-200} ROUNDS=${ROUNDS:-3} BUDGET_S=$b CONC=${CONC:-$c}
  run bash benchmark/serving/device_adaptive.sh 2>&1 | grep -v LD_PRELOAD | tail -60
  ;;
hooks)
  h=$(( $(left "$2") - 25 )); [ $h -gt 580 ] && h=580
  echo "hook tests for at most $h s"
  [ "${NS_DRY:-0}" = 1 ] || { pkill -f "[l]aunch_server"; sleep 5; eval "$(bash benchmark/live/device.sh env)"; }
  run timeout -s INT $h python3 -m pytest -q -rf -p no:cacheprovider -n 8 --dist loadfile ${HOOK_FILES:-test/integration/hooks} > $OUT/hooks.txt 2>&1
  tail -8 $OUT/hooks.txt
  ;;
esac
