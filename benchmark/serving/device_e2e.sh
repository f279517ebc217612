#!/usr/bin/env bash
# Runs ON the lent H200, from the repository root, in ONE call after the carried SGLang stack is installed on the
# same warm machine (benchmark/live/device.sh install):
#   1. build the Kimi-width tiny pair on the GPU (python3 -m sglang_kimi_eagle3.tiny ... $TINY_ARGS)
#   2. start side by side, each with its own empty Triton / JIT / inductor caches: plain (no speculation), auto and
#      upstream (SGLANG_KIMI_EAGLE3_KERNELS), and - for the cold-start "before" numbers - auto and upstream with the
#      kernel warm-up off (SGLANG_KIMI_EAGLE3_WARMUP=off; cold passes only)
#   3. benchmark/serving/e2e.py: cold passes 1 and 2 at every level on the fresh servers, then alternating rounds
#      plain / auto / upstream at c 1/4/16/64, greedy and temperature 0.7, rounds sized to end by the deadline
#   4. benchmark/serving/anatomy.py on auto and upstream at c 1 and 64, greedy and 0.7
#   5. $OUT: device_e2e-STEP.log, versions.txt, e2e.json, e2e_kimiwidth_T0.png, e2e_kimiwidth_T0.7.png, anatomy.json,
#      logs.tgz (server logs, status files, build log; traces when small) - 7 files, no folders
# E2E_STEP (all): `start` does steps 1-2 only and leaves the servers running in their own sessions (pids in
# $E2E_WORK/pid-NAME; they outlive the device call), so their cold start overlaps other work of the lease;
# `measure` does steps 3-5 on the servers a `start` left (SIGCONT first, in case they were frozen with
# benchmark/serving/device_loop.sh-style SIGSTOP); `all` does everything in one call.
# Knobs (environment): FIT / ROUND_S / RESUME (below, at the e2e.py call), TINY_ARGS (default "--kimi-width --device cuda"), TARGET and DRAFT (skip the build), SPEC_SHAPE
# (chain | tree, tiny/launch.py), CONC (1,4,16,64), TEMPS (0,0.7), STEADY_TEMPS (the steady rounds' temperatures;
# default TEMPS: cold passes run at every TEMPS either way), ROUNDS (3), MAXRUN (64: --max-running-requests and
# --cuda-graph-max-bs-decode), MEMF (0.7: --mem-fraction-static; SGLang keeps 1 - MEMF of the memory free at its own
# start as slack and needs its weights to fit the rest; the KV cache is capped by --max-total-tokens, so five servers
# started together fit side by side),
# KEEP_SERVERS (0; 1: `measure` leaves the servers running, for a RESUME=1 measure in the next call),
# COLD_BEFORE (1: the two warm-up-off servers), REQ_STATS (1: SGLang's per-request time-stats line and its GC warning
# above 0.05 s, on every server), OURS (0; 1: a fourth server with SGLANG_KIMI_EAGLE3_KERNELS=ours, in the
# steady rounds too, and the anatomy compares it with upstream instead of auto), SLEEP_ON_IDLE (1: --sleep-on-idle on every server), SHARED_CACHES (0: one cache folder for all, faster starts, but then
# the warm-up-off servers find what the others compiled), STARTUP_S (360: how long e2e.py waits for every server's
# /health; concurrent cold starts of the tiny servers took up to 223 s on an H200), BUDGET_S (everything ends by then;
# default: the time spent before the servers started + STARTUP_S + 120 s of traffic + ANATOMY_S, at least 550 and at
# most 590, so that one 10-minute device call holds it; set it to go past), ANATOMY_S (90: kept for step 4), ANATOMY_CONC
# (1,64: the anatomy's concurrencies; its host_verify_path row is the eager path around the verify per step), READY_S
# (720: `measure` waits for /health until that many seconds after the servers' start, at most 400 s, whatever
# STARTUP_S says).
# TP (1): --tp-size of every server (2 on nvidia-h200-x2: the decode-step anatomy at TP 2 against TP 1; with
# --enforce-disable-flashinfer-allreduce-fusion, whose JIT build alone took 206 s there).
set -uo pipefail
T0=$(date +%s)
eval "$(benchmark/live/device.sh env)"
OUT=${OUT:-/tmp/e2e-out}
W=${E2E_WORK:-/tmp/e2e}
BUDGET_S=${BUDGET_S:-}
STARTUP_S=${STARTUP_S:-360}
ANATOMY_S=${ANATOMY_S:-90}
STEP=${E2E_STEP:-all}
case $STEP in all|start|measure) ;; *) echo "device_e2e.sh: E2E_STEP=$STEP: expected all, start or measure"; exit 2;; esac
mkdir -p "$OUT" "$W/logs" "$W/status" "$W/traces"
exec > >(tee -a "$OUT/device_e2e-$STEP.log") 2>&1
say() { echo "[device_e2e $(( $(date +%s) - T0 )) s] $*"; }
PIDS=()
stop_group() { kill -TERM -- "-$1" 2>/dev/null; }
# a measure call that measured nothing (no e2e row) leaves servers still starting running whatever KEEP_SERVERS says
# (benchmark/serving/keep_starting.sh)
source "$(dirname "$0")/keep_starting.sh"
MEASURED=0
cleanup() {
  local stop=0 starting=
  [ "$STEP" != start ] && [ "${KEEP_SERVERS:-0}" != 1 ] && stop=1
  [ $stop = 1 ] && [ "$STEP" = measure ] && [ "$MEASURED" != 1 ] && starting=$(still_starting "$W/spec.json" "$W/pid-")
  if [ -n "${starting:-}" ]; then
    say "kept every server running: this call measured nothing and ${starting}still starting (the next E2E_STEP=measure call finds them)"
    stop=0
  fi
  if [ $stop = 1 ]; then
    for p in "${PIDS[@]}"; do stop_group "$p"; done
    sleep 5
    for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
  fi
  local parts=(logs status)
  [ -f "$W/build.log" ] && parts+=(build.log)
  [ "$(du -sm "$W/traces" | cut -f1)" -lt 40 ] && parts+=(traces)  # traces only while small
  tar czf "$OUT/logs.tgz" -C "$W" "${parts[@]}" 2>/dev/null
  say "done; \$OUT: $(ls "$OUT" | tr '\n' ' ')"
  sleep 1  # let tee flush the log
}
trap cleanup EXIT

{ date -u +%FT%TZ; nvidia-smi -L; python3 -c "import torch, triton, importlib.metadata as m; print('torch', torch.__version__, 'triton', triton.__version__, 'sglang', m.version('sglang'), 'python', __import__('sys').version.split()[0])"; git log -1 --format='commit %h %s (the device copy of .git: on 2026-12-03 it named an older commit than the tree carried)' 2>/dev/null; } > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

if [ "$STEP" = measure ]; then
  [ -f "$W/spec.json" ] || { say "E2E_STEP=measure: no $W/spec.json (run E2E_STEP=start first)"; exit 3; }
  NAMES=$(python3 -c "import json; print(' '.join(s['name'] for s in json.load(open('$W/spec.json'))['servers']))")
  for n in $NAMES; do
    p=$(cat "$W/pid-$n" 2>/dev/null) || continue
    PIDS+=("$p"); kill -CONT -- "-$p" 2>/dev/null && say "SIGCONT $n (pid $p)"
  done
else
# 1. the Kimi-width pair
if [ -z "${TARGET:-}" ]; then
  say "building the Kimi-width pair: python3 -m sglang_kimi_eagle3.tiny $W/kw ${TINY_ARGS:---kimi-width --device cuda}"
  # shellcheck disable=SC2086
  python3 -m sglang_kimi_eagle3.tiny "$W/kw" ${TINY_ARGS:---kimi-width --device cuda} > "$W/build.log" 2>&1
  rc=$?; cat "$W/build.log"
  [ $rc -eq 0 ] || { say "the pair did not build (exit $rc): set TINY_ARGS to the builder's flags"; exit 3; }
  # the builder prints "tiny target: PATH (...)" and "tiny draft:  PATH (...)" (OUT/target, OUT/draft; --kimi-width
  # adds OUT/draft-4000). OUT/draft is the 32000-row drafter: at TP 1 its lm_head is exactly the table's R32000
  # (SGLang pads a 4000-row head to 4032 rows, which no R4000 entry matches; DRAFT=$W/kw/draft-4000 to see it)
  TARGET=$(sed -n 's/^tiny target[^:]*: *\([^ ]*\).*/\1/p' "$W/build.log" | head -1)
  DRAFT=${DRAFT:-$(sed -n 's/^tiny draft[^:]*: *\([^ ]*\).*/\1/p' "$W/build.log" | head -1)}
  TARGET=${TARGET:-$W/kw/target} DRAFT=${DRAFT:-$W/kw/draft}
fi
[ -d "${TARGET:-}" ] && [ -d "${DRAFT:-}" ] || { say "TARGET=${TARGET:-} / DRAFT=${DRAFT:-}: not folders"; exit 3; }
say "target $TARGET, draft $DRAFT"

# 2. the servers (one start script each, written by tiny/launch.py's flags)
python3 - "$W" "$TARGET" "$DRAFT" <<'PY'
import json, os, shlex, sys
from sglang_kimi_eagle3.tiny.launch import base_args, spec_args
w, target, draft = sys.argv[1:4]
maxrun, memf = os.environ.get("MAXRUN", "64"), float(os.environ.get("MEMF", "0.7"))
shape = os.environ.get("SPEC_SHAPE", "chain")
def args(port, spec):
    tp = int(os.environ.get("TP", "1"))
    a = base_args(target, tp=tp, mem_fraction=memf)
    if tp > 1:  # SGLang auto-enables FlashInfer's all-reduce fusion at TP > 1 on SM90: a 206-s JIT build (2026-11-30)
        a.append("--enforce-disable-flashinfer-allreduce-fusion")
    for flag in ("--max-running-requests", "--cuda-graph-max-bs-decode"):
        a[a.index(flag) + 1] = maxrun
    # --sleep-on-idle: an idle scheduler otherwise busy-polls a CPU core while another server is measured
    idle = ["--sleep-on-idle"] if os.environ.get("SLEEP_ON_IDLE", "1") == "1" else []
    # REQ_STATS=1: SGLang's per-request scheduler line (queue and forward seconds, entry wall clock) and its GC
    # warning, on every server alike: where a first-traffic stall sits (before the scheduler, queued, or forward)
    if os.environ.get("REQ_STATS", "1") == "1":
        idle += ["--enable-request-time-stats-logging", "--gc-warning-threshold-secs", "0.05"]
    return ["python3", "-m", "sglang.launch_server", *a, *idle, "--host", "127.0.0.1", "--port", str(port)] + (spec_args(draft, shape) if spec else [])
servers = [("plain", 30301, None, "on"), ("auto", 30302, "auto", "on"), ("upstream", 30303, "upstream", "on")]
if os.environ.get("COLD_BEFORE", "1") == "1":
    servers += [("auto-nowarm", 30304, "auto", "off"), ("upstream-nowarm", 30305, "upstream", "off")]
steady = ["plain", "auto", "upstream"]
if os.environ.get("OURS", "0") == "1":  # our kernels on every call: what they do end to end, now that auto leaves
    servers.append(("ours", 30306, "ours", "on"))  # the H200 to SGLang's
    steady.append("ours")
spec = {"servers": [], "baseline": "plain", "steady_servers": steady}
for name, port, kernels, warm in servers:
    # own empty caches: a warm server's startup compiles must not reach a warm-up-off server through a shared cache
    cache = f"{w}/cache/shared" if os.environ.get("SHARED_CACHES") == "1" else f"{w}/cache/{name}"
    env = {"TRITON_CACHE_DIR": f"{cache}/triton", "SGLANG_JIT_CACHE_DIR": f"{cache}/jit",
           "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor", "XDG_CACHE_HOME": f"{cache}/xdg",
           # FlashInfer's JIT workspace is under $HOME, not XDG_CACHE_HOME: in run 10 (2026-12-02) two servers built
           # its sampling module under one lock, and the one that waited ended its stall with the builder's
           "FLASHINFER_WORKSPACE_BASE": f"{cache}/flashinfer",
           "SGLANG_KIMI_EAGLE3_STATUS_DIR": f"{w}/status", "SGLANG_KIMI_EAGLE3_WARMUP": warm,
           # the chain servers here compare kernels at a fixed 3/1/4 (adaptive steps: device_adaptive.sh)
           "SGLANG_KIMI_EAGLE3_ADAPTIVE": os.environ.get("ADAPTIVE", "off")}
    if kernels:
        env["SGLANG_KIMI_EAGLE3_KERNELS"] = kernels
    line = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    with open(f"{w}/start-{name}.sh", "w") as f:
        f.write(("" if os.environ.get("SHARED_CACHES") == "1" else f"rm -rf {shlex.quote(cache)}\n") + f"exec env {line} {shlex.join(args(port, kernels is not None))}\n")
    spec["servers"].append({"name": name, "url": f"http://127.0.0.1:{port}", "log": f"{w}/logs/{name}.log", "env": env,
                            "argv": None})
json.dump(spec, open(f"{w}/spec.json", "w"), indent=1)
PY
NAMES=$(python3 -c "import json; print(' '.join(s['name'] for s in json.load(open('$W/spec.json'))['servers']))")
for n in $NAMES; do
  setsid bash "$W/start-$n.sh" > "$W/logs/$n.log" 2>&1 &
  PIDS+=($!); echo $! > "$W/pid-$n"
  say "started $n (pid $!): $(tail -c 300 "$W/start-$n.sh" | tr '\n' ' ')"
done
date +%s > "$W/started_at"
[ "$STEP" = start ] && { say "E2E_STEP=start: servers left running (pids in $W/pid-*)"; exit 0; }
fi

# a measure call soon after its start: the speculative servers listen only after their CUDA graphs, the kernel warm-up
# and the traffic warm-up. On a fresh H200 with three servers starting together (run 23, 2026-12-04) the graphs ended
# 170 s after the start and the kernel warm-up (SGLang's JIT builds: FlashInfer sampling, the tree kernels) took
# 182-197 s more; the traffic warm-up took 131-139 s in run 10; beside the test suite (run 22) the kernel warm-up ended
# 405 s after the start. READY_S (720) is that with the traffic warm-up and a margin: the wait for /health is stretched
# to reach it, at most 400 s (run 23's measure waited 300 s from 55 s after the start and measured nothing). A server
# that is up ends the wait at once, so a long READY_S costs nothing when the starts are quick.
if [ "$STEP" = measure ] && [ -f "$W/started_at" ]; then
  AGE=$(( $(date +%s) - $(cat "$W/started_at") ))
  WAIT=$(( ${READY_S:-720} - AGE ))
  [ "$WAIT" -gt 400 ] && WAIT=400
  if [ "$WAIT" -gt "$STARTUP_S" ]; then
    say "servers started $AGE s ago, READY_S ${READY_S:-720}: waiting up to $WAIT s for /health, not STARTUP_S=$STARTUP_S"
    STARTUP_S=$WAIT
  fi
fi

# 3. e2e: waits up to STARTUP_S for /health, cold passes on the fresh servers, then rounds sized to end ANATOMY_S
# before the deadline. The budget's default leaves 2 minutes of traffic at least after the slowest allowed start.
NEED_S=$(( $(date +%s) - T0 + STARTUP_S + 120 + ANATOMY_S ))
if [ -z "$BUDGET_S" ]; then
  BUDGET_S=$(( NEED_S > 550 ? (NEED_S < 590 ? NEED_S : 590) : 550 ))
fi
if [ "$BUDGET_S" -lt "$NEED_S" ]; then
  say "BUDGET_S=$BUDGET_S is below the $NEED_S s a start that takes STARTUP_S=$STARTUP_S needs: slow starts leave little traffic"
fi
DEADLINE=$((T0 + BUDGET_S))
say "budget $BUDGET_S s (deadline in $((DEADLINE - $(date +%s))) s), server startup timeout $STARTUP_S s"
# hard stop (SIGINT: e2e.py keeps every finished row, status "interrupted") 30 s into the anatomy's share
# FIT=1 (default): rounds shortened to end by the deadline (run 6: 1.4 s each for 72 rounds). FIT=0: rounds of
# ROUND_S each until the hard stop; RESUME=1 continues the JSON a previous call of this lease left in $W (the
# servers stay up between calls), so 3 x 20 s rounds at every level can span two or three calls.
FITARGS=(--finish-by $((DEADLINE - ANATOMY_S)))
[ "${FIT:-1}" = 1 ] || FITARGS=()
RESUMEARGS=()
if [ "${RESUME:-0}" = 1 ] && [ -f "$W/e2e.json" ]; then cp "$W/e2e.json" "$OUT/e2e.json"; RESUMEARGS=(--resume); fi
timeout -s INT $((DEADLINE - ANATOMY_S + 30 - $(date +%s))) python3 benchmark/serving/e2e.py --spec "$W/spec.json" --json "$OUT/e2e.json" --plots "$OUT" --tag kimiwidth \
  --concurrency "${CONC:-1,4,16,64}" --temperatures "${TEMPS:-0,0.7}" ${STEADY_TEMPS:+--steady-temperatures "$STEADY_TEMPS"} --rounds "${ROUNDS:-3}" --round-s "${ROUND_S:-20}" \
  --max-new-tokens 128 "${FITARGS[@]}" "${RESUMEARGS[@]}" --startup-timeout-s $STARTUP_S
rc=$?
measured_rows "$OUT/e2e.json" && MEASURED=1  # (with RESUME=1: rows of an earlier call count too)
cp "$OUT/e2e.json" "$W/e2e.json" 2>/dev/null  # for RESUME=1 in the next call
say "e2e.py exit $rc"
grep -h "kernel warm-up\|traffic warm-up" "$W"/logs/*.log | cut -c1-400

# 4. anatomy on the warm auto and upstream servers (the warm-up-off ones are stopped first)
i=0
for n in $NAMES; do case $n in *-nowarm) stop_group "${PIDS[$i]}";; esac; i=$((i + 1)); done
LEFT=$((DEADLINE - $(date +%s)))
if [ $LEFT -gt 40 ]; then
  if [ "${OURS:-0}" = 1 ]; then A_SERVER=ours=http://127.0.0.1:30306; else A_SERVER=auto=http://127.0.0.1:30302; fi
  timeout $LEFT python3 benchmark/serving/anatomy.py capture --server "$A_SERVER" \
    --server upstream=http://127.0.0.1:30303 --concurrency "${ANATOMY_CONC:-1,64}" --temperatures "${TEMPS:-0,0.7}" --steps 20 \
    --kv-tokens 56000 --out "$W/traces" --json "$OUT/anatomy.json"
  say "anatomy.py exit $?"
else
  say "anatomy skipped: ${LEFT} s left before the deadline"
fi
