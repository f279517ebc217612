#!/usr/bin/env bash
# The never-slower loop, live on the lent H200: bench -> plan -> adaptive serve -> bench again, for drafters of
# three acceptances (q 0.9 / 0.6 / 0.3, the tiny pair's `--draft-agreement`). Runs ON the device machine, from
# the repository root, after `benchmark/live/device.sh install`, in steps that may span several `run` calls of
# one lease (the servers are started with setsid, so they outlive the call that started them):
#   start    build the three pairs (same target, seed 0), start plain + fixed EAGLE3 3/1/4 per q (4 servers)
#   phase1   wait for them; `sglang-kimi-eagle3 bench` each fixed server with the plain one as baseline at
#            c 1/4/16/64 (greedy) -> $OUT/loop-bench-q*.json; `sglang-kimi-eagle3 plan --bench` each ->
#            $OUT/loop-adaptive-q*.json (SGLang's adaptive config) + $OUT/loop-plan-q*.json; start one server per q
#            with the adaptive file's flags (a plan that says "no speculation" starts none), and planned-q* with
#            the recommended fixed chain when plan recommends one other than 3/1/4
#   freeze   once the adaptive servers answer /health (or after FREEZE_WAIT_S), SIGSTOP every loop server so
#            they take no CPU while something else is measured; `thaw` resumes them
#   phase2   thaw; benchmark/serving/e2e.py over the running servers by URL: alternating rounds plain / fixed /
#            adaptive per q at c 1/4/16/64, greedy, until the deadline -> $OUT/loop-e2e.json, plots; logs.tgz
#   phase1 with PLAN_FROM=DIR skips the bench: it plans from DIR/bench-q<Q>.json and starts the adaptive servers
# Knobs: LOOP_Q ("0.9 0.6 0.3"), CONC (1,4,16,64), MAXRUN (64), MEMF (0.7), LOOP_WORK (/tmp/loop),
# PHASE1_S (how long phase1 waits for /health, 300), PHASE2_WAIT_S (the same for phase2, 60), BENCH_S (the limit of each phase-1 bench, 75), BUDGET_S (phase2 ends by then, 540), ROUNDS (3),
# SLEEP_ON_IDLE (1: every server gets --sleep-on-idle), PLAN_FROM (above), ADAPTIVE_WHEN_FIXED (1; 0: no adaptive
# server for a q whose plan recommends a fixed chain: the recommendation is what an operator would serve).
set -uo pipefail
T0=$(date +%s)
eval "$(benchmark/live/device.sh env)"
OUT=${OUT:-/tmp/loop-out}
W=${LOOP_WORK:-/tmp/loop}
QS=${LOOP_Q:-0.9 0.6 0.3}
CONC=${CONC:-1,4,16,64}
mkdir -p "$OUT" "$W/logs" "$W/status" "$W/cache"
step=${1:?usage: device_loop.sh start|phase1|freeze|thaw|phase2}
exec > >(tee -a "$OUT/device_loop-$step.log") 2>&1
say() { echo "[device_loop $step $(( $(date +%s) - T0 )) s] $*"; }
port_of() { case $1 in plain) echo 30401;; fixed-q0.9) echo 30402;; fixed-q0.6) echo 30403;; fixed-q0.3) echo 30404;;
  adaptive-q0.9) echo 30405;; adaptive-q0.6) echo 30406;; adaptive-q0.3) echo 30407;;
  planned-q0.9) echo 30408;; planned-q0.6) echo 30409;; planned-q0.3) echo 30410;; *) echo 30499;; esac; }
healthy() { curl -s -m 3 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$(port_of "$1")/health" | grep -q 200; }
names() { ls "$W"/pid-* 2>/dev/null | sed 's#.*/pid-##'; }

# start_server NAME EXTRA_FLAGS... : one launch_server in its own session; pid in $W/pid-NAME
start_server() {
  local name=$1; shift
  python3 - "$W" "$name" "$(port_of "$name")" "$@" <<'PY'
import os, shlex, sys
from sglang_kimi_eagle3.tiny.launch import base_args
w, name, port, *extra = sys.argv[1:]
a = base_args(f"{w}/q{os.environ.get('LOOP_TARGET_Q', '0.9')}/target", mem_fraction=float(os.environ.get("MEMF", "0.7")))
for flag in ("--max-running-requests", "--cuda-graph-max-bs-decode"):
    a[a.index(flag) + 1] = os.environ.get("MAXRUN", "64")
env = {"TRITON_CACHE_DIR": f"{w}/cache/triton", "SGLANG_JIT_CACHE_DIR": f"{w}/cache/jit",
       "TORCHINDUCTOR_CACHE_DIR": f"{w}/cache/inductor", "SGLANG_KIMI_EAGLE3_STATUS_DIR": f"{w}/status/{name}",
       "SGLANG_KIMI_EAGLE3_ADAPTIVE": "off"}  # fixed-q* stay the fixed 3/1/4 they are named after
# --sleep-on-idle: an idle SGLang scheduler otherwise busy-polls one CPU core; with 5-7 servers side by side
# that is CPU taken from the one being measured (zmq wakes it at once when a request comes: no latency added)
idle = ["--sleep-on-idle"] if os.environ.get("SLEEP_ON_IDLE", "1") == "1" else []
argv = ["python3", "-m", "sglang.launch_server", *a, *idle, "--host", "127.0.0.1", "--port", port, *extra]
with open(f"{w}/start-{name}.sh", "w") as f:
    f.write(f"exec env {' '.join(f'{k}={shlex.quote(v)}' for k, v in env.items())} {shlex.join(argv)}\n")
PY
  setsid bash "$W/start-$name.sh" > "$W/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$W/pid-$name"
  say "started $name (pid $!, port $(port_of "$name")): $(tail -c 260 "$W/start-$name.sh")"
}

wait_healthy() {  # wait_healthy LIMIT_S NAME...
  local limit=$1; shift
  local end=$(( $(date +%s) + limit ))
  for n in "$@"; do
    until healthy "$n"; do
      if ! kill -0 "$(cat "$W/pid-$n")" 2>/dev/null; then say "$n exited: $(tail -5 "$W/logs/$n.log" | cut -c1-300)"; break; fi
      [ "$(date +%s)" -ge $end ] && { say "$n not healthy after ${limit} s"; break; }
      sleep 2
    done
    healthy "$n" && say "$n healthy"
  done
}

signal_all() {  # signal_all STOP|CONT
  for n in $(names); do kill -"$1" -- "-$(cat "$W/pid-$n")" 2>/dev/null && say "SIG$1 $n"; done
}

pack_logs() { tar czf "$OUT/loop-logs-$step.tgz" -C "$W" logs status $(cd "$W" && ls start-*.sh 2>/dev/null) 2>/dev/null; }

case $step in
start)
  for q in $QS; do
    python3 -m sglang_kimi_eagle3.tiny "$W/q$q" --seed 0 --draft-agreement "$q" > "$W/build-q$q.log" 2>&1 \
      || { cat "$W/build-q$q.log"; say "the q $q pair did not build"; exit 3; }
  done
  say "built pairs: $(ls -d "$W"/q*/draft | tr '\n' ' ')"
  start_server plain
  for q in $QS; do
    start_server "fixed-q$q" --speculative-algorithm EAGLE3 --speculative-draft-model-path "$W/q$q/draft" \
      --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4
  done
  ;;
phase1)
  SERVERS="plain"; for q in $QS; do SERVERS="$SERVERS fixed-q$q"; done
  # PLAN_FROM=DIR: no bench here; plan from DIR/bench-q<Q>.json (an earlier lease's rounds on this device, made
  # with loop_report.py --bench-out), so the adaptive servers start at once and warm up beside other work
  # shellcheck disable=SC2086
  [ -n "${PLAN_FROM:-}" ] || wait_healthy "${PHASE1_S:-300}" $SERVERS
  { date -u +%FT%TZ; nvidia-smi -L; python3 -c "import torch, triton, importlib.metadata as m; print('torch', torch.__version__, 'triton', triton.__version__, 'sglang', m.version('sglang'), 'python', __import__('sys').version.split()[0])"; git log -1 --format='commit %h %s (the device copy of .git: on 2026-12-03 it named an older commit than the tree carried)' 2>/dev/null; } > "$OUT/loop-versions.txt" 2>&1
  for q in $QS; do
    if [ -n "${PLAN_FROM:-}" ]; then
      cp "$PLAN_FROM/bench-q$q.json" "$OUT/loop-bench-q$q.json" || { say "PLAN_FROM=$PLAN_FROM: no bench-q$q.json"; continue; }
      say "q $q: planning from $PLAN_FROM/bench-q$q.json (no bench in this step)"
    else
    healthy "fixed-q$q" && healthy plain || { say "fixed-q$q or plain not up: no bench for q $q"; continue; }
    say "bench q $q"
    timeout "${BENCH_S:-75}" python3 -m sglang_kimi_eagle3.cli bench --url "http://127.0.0.1:$(port_of "fixed-q$q")" \
      --baseline-url "http://127.0.0.1:$(port_of plain)" --concurrency "$CONC" --max-new-tokens 128 --ignore-eos \
      --temperature 0 --rounds 2 --min-requests 16 --template raw --no-progress --json "$OUT/loop-bench-q$q.json" \
      2>&1 | tail -40
    fi
    say "plan q $q"
    python3 -m sglang_kimi_eagle3.cli plan --bench "$OUT/loop-bench-q$q.json" --batch-sizes "$CONC" \
      -o "$OUT/loop-adaptive-q$q.json" --json "$OUT/loop-plan-q$q.json" --force 2>&1 | tee "$W/plan-q$q.txt" | tail -40
    flags=$(python3 - "$OUT/loop-adaptive-q$q.json" <<'PY'
import json, sys
from sglang_kimi_eagle3.planner.adaptive import launch_flags
try:
    print(launch_flags(json.load(open(sys.argv[1])), sys.argv[1]))
except Exception as exc:  # no file: plan refused
    print(f"(no adaptive config: {exc})")
PY
)
    # the plan's recommendation, when it is a fixed chain other than the fixed server's 3/1/4: its own server
    rec=$(python3 -c "import json, sys; r = json.load(open(sys.argv[1])).get('recommendation') or {}; print(r.get('steps', '') if r.get('kind') == 'fixed' else '')" "$OUT/loop-plan-q$q.json" 2>/dev/null)
    if [ -n "$rec" ] && [ "${ADAPTIVE_WHEN_FIXED:-1}" = 0 ]; then
      say "q $q: the plan recommends fixed steps $rec: no adaptive server (ADAPTIVE_WHEN_FIXED=0)"
    else
    case $flags in
      --*) # shellcheck disable=SC2086
           start_server "adaptive-q$q" $flags --speculative-draft-model-path "$W/q$q/draft";;
      *) say "q $q: plan says $flags: the adaptive server is the plain one";;
    esac
    fi
    if [ -n "$rec" ] && [ "$rec" != 3 ]; then
      start_server "planned-q$q" --speculative-algorithm EAGLE3 --speculative-draft-model-path "$W/q$q/draft" \
        --speculative-num-steps "$rec" --speculative-eagle-topk 1 --speculative-num-draft-tokens $((rec + 1))
    elif [ -n "$rec" ]; then
      say "q $q: the plan recommends fixed 3/1/4: the fixed-q$q server"
    fi
  done
  pack_logs
  ;;
freeze)
  A=$(names | grep adaptive | tr '\n' ' ')
  # shellcheck disable=SC2046,SC2086
  wait_healthy "${FREEZE_WAIT_S:-150}" ${A:-$(names)}
  signal_all STOP
  ;;
thaw)
  signal_all CONT
  ;;
phase2)
  signal_all CONT
  # shellcheck disable=SC2046
  wait_healthy "${PHASE2_WAIT_S:-60}" $(names)
  ARGS=()
  for n in plain $(for q in $QS; do echo "fixed-q$q adaptive-q$q planned-q$q"; done); do
    [ -f "$W/pid-$n" ] && healthy "$n" && ARGS+=(--server "$n=http://127.0.0.1:$(port_of "$n")")
  done
  say "servers: ${ARGS[*]}"
  DEADLINE=$((T0 + ${BUDGET_S:-540}))
  timeout -s INT $((DEADLINE + 20 - $(date +%s))) python3 benchmark/serving/e2e.py "${ARGS[@]}" --baseline plain \
    --json "$OUT/loop-e2e.json" --plots "$OUT" --tag loop --concurrency "$CONC" --temperatures 0 \
    --rounds "${ROUNDS:-3}" --round-s 6 --max-new-tokens 128 --template raw --finish-by "$DEADLINE" --no-cold
  say "e2e.py exit $?"
  for n in $(names); do grep -h "adaptive\|kernel warm-up" "$W/logs/$n.log" | head -5 | cut -c1-300; done
  cp "$W"/plan-q*.txt "$OUT/" 2>/dev/null
  pack_logs
  ;;
*) echo "device_loop.sh: unknown step $step (start|phase1|freeze|thaw|phase2)"; exit 2;;
esac
