#!/usr/bin/env bash
# Never slower than no speculation? Runs ON the lent H200, from the repository root, after the carried SGLang stack
# is installed (benchmark/live/device.sh install), one call per drafter agreement (each fits one 570-s call):
#   DA_Q=0.9 benchmark/serving/device_adaptive.sh              # call 1
#   DA_Q=0.3 DA_OFF=1 benchmark/serving/device_adaptive.sh     # call 2 (+ the off-state server and step ratios)
# Five servers of the 84-layer pair starting together took 284-332 s on the H200 (2026-12-02), most of one call. One
# lease: DA_STEP=prep beside another job (the JIT prebuild, left running, and the pair), DA_STEP=start in the next call
# (start, leave them running, the step ratios while time is left), DA_STEP=measure in the one after (STARTUP_S then
# counts from that call's start): the rounds get a whole call. DA_STEP=all (default) does everything in one call.
# Steps:
#   0. SGLang's Marlin MoE JIT kernels prebuilt (benchmark/live/prebuild_jit.py); if that fails or outlasts
#      DA_PREBUILD_S (450; 900 in prep), the servers take --moe-runner-backend triton
#   1. build the deploy-shaped pair (python3 -m sglang_kimi_eagle3.tiny --preset deploy --int4, draft agreement
#      DA_Q; it prints the planner's modelled draft-step / target-step ratios of the seed and of this pair)
#   2. start side by side (setsid, own caches, the plugin's warm-ups as DA_WARMUP says: on by default, as users run
#      it; the e2e warm pass per level is discarded too): plain; fixed (EAGLE3 3/1/4, SGLANG_KIMI_EAGLE3_ADAPTIVE=off); sglang (--speculative-adaptive,
#      SGLang's default table); ours (the plain chain launch 3/1/4: the plugin's adaptive default); with DA_OFF=1
#      also off (SGLang's steps-0 off-state: --speculative-adaptive with candidates [0, 1] and this plugin's
#      controller told to drop to 0 after the first batch and never probe)
#   3. DA_OFF=1: benchmark/serving/step_ratio.py on plain and the DA_RATIOS servers in the same rotated rounds
#      (measured draft/target step ratio, decode c 1/8/32/128 and a 1024-token prefill) -> $OUT/step_ratio-off-q$Q.json
#      (DA_RATIOS="off offext": step_ratio-off-offext-q$Q.json)
#   4. benchmark/serving/e2e.py --workload chat, greedy, c $CONC, $ROUNDS rotated rounds per level, no cold passes
#      (one uncounted warm pass per level and server), rounds sized to end by the deadline -> $OUT/e2e-q$Q.json
#      (rewritten after every round; no plots: a call returns at most 8 files)
#   5. $OUT (at most 8 files come back): device_adaptive-q$Q.log, versions.txt, build-q$Q.log, e2e-q$Q.json, step_ratio-*-q$Q.json, logs-q$Q.tgz
#      (server logs, status files with the adaptive_control switch counters and the step_clock rows; plain's decode
#      steps timed by benchmark/serving/plain_clock into status/plain/clock/; the log prints both after the rounds)
# Knobs: DA_Q (0.9), DA_OFF (0), CONC (1,8,32,128), DA_TEMPS (0: the rounds' temperatures, e.g. 0.7 or 0,0.7), ROUNDS (3), MIN_ROUND_S (10: rounds are not fitted to the deadline below this; the last levels are left out instead, as run 37's rounds of 6 s at c 64 did not resolve a few percent), CAP (256: output tokens per request at most), MEMF (0.7: --mem-fraction-static as device_e2e.sh, five servers
# co-resident), MAXTOK (65536: --max-total-tokens), BUDGET_S (555), STARTUP_S (330; a server still starting is waited
# for past it while DA_MEASURE_MIN_S, 150, of BUDGET_S would remain), DA_FIRST_S (420: the staged
# start's wait for the first server; 0 where both JIT sets were carried), DA_PREBUILD (1: step 0), DA_PREBUILD_S, DA_OFFSKIP (0; 1: a sixth server, the off-state with
# SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1, and its step ratio), DA_OFFEXT (0; 1: the off-state with
# SGLANG_KIMI_EAGLE3_OFFSTATE=off, port 30507: SGLang's extend-kernel verify; `off` has the hook at every bs), DA_ALONE (0; 1: `alone`,
# port 30508: ours with SGLANG_KIMI_EAGLE3_ADAPTIVE_POOL=off), DA_SKIPEXT (0; 1: `skipext`, port 30509: ours with
# SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=skip), DA_PINNED (0; 1: `pinned`, port 30510: ours with the next batch's two CPU
# length tensors pinned, benchmark/serving/plain_clock PINNED_LENS=1), DA_UPKERN (0; 1: `upkern`, port 30511: ours with
# SGLANG_KIMI_EAGLE3_KERNELS=upstream, SGLang's kernels: auto's against them side by side), DA_DEFER (0; 1: `defer`, port 30512:
# ours with SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=defer, the default since 2026-12-06: the same as ours unless DA_OURS_ENV
# changes it), DA_KEEPEXT (0; 1: `keepext`, port 30513: ours with SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=keep, SGLang's draft
# extend at every steps-0 step), DA_Q2 (unset; e.g. 0.9: `ours_q2`, port 30514: ours with a second drafter of that agreement,
# the same target, so one lease measures two drafters in the same rounds), DA_KVFLUSH (0; 1: `kvflush`, port 30515: ours
# with SGLANG_KIMI_EAGLE3_DEFER_FLUSH=kv, the deferred rows' K and V written alone), DA_NORES (0; 1: `nores`, port 30516: ours with
# SGLANG_KIMI_EAGLE3_ADAPTIVE_RESERVE=off, SGLang's decode KV reserve), DA_PRESET (deploy: the pair shaped like the deployment; kimi-width: the
# 3-layer stress pair at vocab 163840, built without --int4 into $DA_WORK/kimi-width-qQ), DA_GRAPHS (128: decode
# CUDA graphs to bs 128; sglang: SGLang's own sizes, to 512, clamped to MAXREQ), MAXREQ (128: --max-running-requests;
# DA_PRESET=kimi-width DA_GRAPHS=sglang MAXREQ=512: the capped adaptive table, live), DA_SKIP (servers not
# started, e.g. "sglang"), DA_ANATOMY_SERVERS ("off plain fixed"), DA_ANATOMY (0; 1: step 3b, c 128 in start, the rest of DA_ANATOMY_LEVELS ("128 1") in measure within DA_ANATOMY_S 150 per level), DA_RATIOS (step ratios of "off offskip"), DA_RATIO_S (100), DA_RATIO_CONC (1,8,32,128), DA_RATIO_REPEATS (3), DA_RATIO_CTX (64: the decode-step prompts' tokens; chat contexts are 400-1500), DA_E2E_SKIP (names left out of the rounds, e.g. "off offskip"), DA_LOADSTEP (0; 1: the load step before the rounds, DA_LOADSTEP_SERVERS / _SCHEDULE / _ROUNDS / _S), DA_FREEZE_GC (server names: POST /freeze_gc to each before the rounds), DA_PIN (0; 1, on the call that starts the servers: every server on the same three quarters of the cores, the load client on the rest, and in each measure call every server's scheduler process on one and the same CPU, benchmark/serving/cpu_sets.py), DA_MOE (auto: SGLang's choice, Marlin on SM90; triton: no JIT build), DA_OWN_TRITON (0: one Triton cache for all servers), DA_START_END_S (560: DA_STEP=start waits for every server until then), DA_WARMUP (on; off: SGLANG_KIMI_EAGLE3_WARMUP=off, kernels compile while serving), DA_KEEP (0; 1: DA_STEP=measure leaves the servers running for another measure call, e.g. other levels), DA_OURS_ENV (more environment for ours / skipext / alone / pinned), LEDGER_WAIT_S (6: seconds after the rounds before round_ledger.py reads the servers' step-clock ledgers), DA_SERVER_GAP_S (7: e2e.py's --server-gap-s, each server idle that long before its rounds, so its ledger holds a copy between two of its rounds run back to back: the writers copy every 2-5 s, an interval over 5 s is idle), DA_SUITE / DA_SUITE_N / DA_SUITE_S (step 0b), DA_WORK (/tmp/da).
set -uo pipefail
T0=$(date +%s)
eval "$(benchmark/live/device.sh env)"
OUT=${OUT:-/tmp/da-out}
W=${DA_WORK:-/tmp/da}
Q=${DA_Q:-0.9}
PRESET=${DA_PRESET:-deploy}
case $PRESET in deploy) P=$W/q$Q; INT4=--int4;; kimi-width) P=$W/kimi-width-q$Q; INT4=;;
  *) echo "device_adaptive.sh: DA_PRESET=$PRESET: expected deploy or kimi-width" >&2; exit 2;; esac
case ${DA_GRAPHS:-128} in 128|sglang) ;; *) echo "device_adaptive.sh: DA_GRAPHS=$DA_GRAPHS: expected 128 or sglang" >&2; exit 2;; esac
BUDGET_S=${BUDGET_S:-555}
STARTUP_S=${STARTUP_S:-330}
mkdir -p "$OUT" "$W/logs" "$W/status"
exec > >(tee -a "$OUT/device_adaptive-q$Q.log") 2>&1
say() { echo "[device_adaptive q$Q $(( $(date +%s) - T0 )) s] $*"; }
PIDS=()
STEP=${DA_STEP:-all}  # all | prep (the JIT prebuild and the pair only) | start (build and start the servers, leave them
# running, then the step ratios if DA_START_END_S leaves time) | measure (the servers of start)
case $STEP in all|prep|start|measure) ;; *) echo "device_adaptive.sh: DA_STEP=$STEP: expected all, prep, start or measure" >&2; exit 2;; esac
# A measure call that measured nothing (no e2e row, no load step) leaves servers still starting running whatever
# DA_KEEP says (benchmark/serving/keep_starting.sh)
source "$(dirname "$0")/keep_starting.sh"
MEASURED=0
cleanup() {
  local stop=0 starting=
  if [ "$STEP" = all ] || { [ "$STEP" = measure ] && [ "${DA_KEEP:-0}" != 1 ]; }; then stop=1; fi
  [ $stop = 1 ] && [ "$STEP" = measure ] && [ "$MEASURED" != 1 ] && starting=$(still_starting "$W/spec-q$Q.json" "$W/pid-q$Q-")
  if [ -n "${starting:-}" ]; then
    say "kept every server running: this call measured nothing and ${starting}still starting (the next DA_STEP=measure call, with a longer STARTUP_S, finds them)"
    stop=0
  fi
  if [ $stop = 1 ]; then
    for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
    sleep 4
    for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
  fi
  tar czf "$OUT/logs-q$Q.tgz" -C "$W" logs status 2>/dev/null
  say "done; \$OUT: $(ls "$OUT" | tr '\n' ' ')"
  sleep 1
}
trap cleanup EXIT
{ date -u +%FT%TZ; nvidia-smi -L; python3 -c "import torch, triton, importlib.metadata as m; print('torch', torch.__version__, 'triton', triton.__version__, 'sglang', m.version('sglang'))"; git log -1 --format='commit %h %s (the device copy of .git: on 2026-12-03 it named an older commit than the tree carried)' 2>/dev/null; } > "$OUT/versions.txt" 2>&1

if [ "$STEP" != measure ]; then
# 0. SGLang's INT4 MoE JIT kernels, two variants side by side (benchmark/live/prebuild_jit.py; seconds when a previous
#    call of this lease built them into the same folder): on 2026-12-03 a lone server spent over 6 minutes compiling them
#    one after the other inside its first CUDA-graph capture. Started in its own session: DA_STEP=prep leaves it running
#    for the next call. Where it fails or outlasts DA_PREBUILD_S, the servers take SGLang's Triton WNA16 MoE instead
#    (DA_MOE=triton: no JIT build), so that a call still measures
# Marlin builds an earlier lease packed (benchmark/live/device.sh jit-pack, carried back by jit-recv) go into the shared
# JIT cache first: the prebuild then finds them in seconds (it took 324-346 s in run 24; in run 44, an H100 with hook
# tests beside it, 374 s, and its other variant was cut at the 400 s this default was then: 450 ends by the launch
# call's LAUNCH_WAIT_S, 480, so the call still packs what it built)
[ -d "${JITPARTS:-/tmp/jitparts}" ] && bash benchmark/live/device.sh jit-unpack "$W/cache/jit-shared"
# and the speculative modules an earlier lease packed (jit-spec): the prebuild below then finds them too
[ -d "${JITPARTS:-/tmp/jitparts}" ] && bash benchmark/live/device.sh jit-unpack-spec "$W/cache/jit-shared" "$W/cache/flashinfer-shared"
# both sets carried: nothing is left to build, so the servers start together (the staged wait's default becomes 0; run
# 33's plain spent 153 s alone, 55 s of it capturing its graphs, while the speculative modules built beside it)
FIRST_DEFAULT=420
if (cd "${JITPARTS:-/tmp/jitparts}" 2>/dev/null && md5sum -c --quiet jit-marlin.md5 jit-spec.md5 > /dev/null 2>&1); then
  FIRST_DEFAULT=0
  say "both JIT sets carried: every server starts at once (DA_FIRST_S=${DA_FIRST_S:-0})"
fi
# Marlin libraries compiled on the CPU box (the jit-local pieces, `prebuild_jit.py --local .jit`): the prebuild adopts
# them into SGLang's cache (its keys computed here, the dependencies listed by `nvcc -M`) instead of the nvcc runs
ADOPT=()
[ -d "${JITPARTS:-/tmp/jitparts}" ] && bash benchmark/live/device.sh jit-unpack-local "$W/cache/jit-local"
[ -f "$W/cache/jit-local/BUILT_WITH" ] && ADOPT=(--adopt "$W/cache/jit-local")
if [ "${DA_PREBUILD:-1}" = 1 ] && [ "${DA_MOE:-auto}" = auto ]; then
  setsid python3 benchmark/live/prebuild_jit.py "${ADOPT[@]}" --cache "$W/cache/jit-shared" --timeout "${DA_PREBUILD_S:-$([ "$STEP" = prep ] && echo 900 || echo 450)}" \
    > "$W/prebuild-$STEP.log" 2>&1 < /dev/null &
  PREBUILD=$!
fi
# 0b. DA_SUITE (test paths; empty: none): those tests compiled on this GPU while the JIT prebuild holds two CPU cores
#     and the GPU idles (DA_SUITE_N xdist workers, 6; stopped at DA_SUITE_S, 280, so before the prebuild's usual end),
#     waited for before any server starts -> $OUT/suite.log
if [ -n "${DA_SUITE:-}" ]; then
  OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 timeout -s INT -k 30 "${DA_SUITE_S:-280}" python3 -m pytest -q -rfE -p no:cacheprovider \
    -n "${DA_SUITE_N:-6}" --dist loadfile $DA_SUITE > "$OUT/suite.log" 2>&1 < /dev/null &
  SUITE=$!
  say "suite started: pytest -n ${DA_SUITE_N:-6} $DA_SUITE (limit ${DA_SUITE_S:-280} s)"
fi
# 1a. DA_Q2 (e.g. 0.9): a second drafter, of agreement DA_Q2, for `ours_q2` (ours with it, beside the same target:
#     the builder writes the same target for the same seed and preset, and the greedy check compares the ids); built
#     beside the first pair (run 39, an H100: 44 s and 41 s one after the other)
P2= BUILD2=
if [ -n "${DA_Q2:-}" ]; then
  P2=$W/q$DA_Q2$([ "$PRESET" = deploy ] || echo "-$PRESET")
  if [ ! -f "$P2/built" ]; then
    say "building the second drafter beside the first: python3 -m sglang_kimi_eagle3.tiny $P2 --preset $PRESET $INT4 --draft-agreement $DA_Q2"
    { python3 -m sglang_kimi_eagle3.tiny "$P2" --preset "$PRESET" $INT4 --draft-agreement "$DA_Q2" --device cuda \
        > "$OUT/build-q$DA_Q2.log" 2>&1 && touch "$P2/built"; } < /dev/null &
    BUILD2=$!
  fi
fi
# 1. the pair (DA_STEP=prep built it in an earlier call of this lease: $P/built)
if [ -f "$P/built" ]; then
  say "the pair of an earlier call: $P"
else
  say "building: python3 -m sglang_kimi_eagle3.tiny $P --preset $PRESET $INT4 --draft-agreement $Q --device cuda"
  python3 -m sglang_kimi_eagle3.tiny "$P" --preset "$PRESET" $INT4 --draft-agreement "$Q" --device cuda > "$OUT/build-q$Q.log" 2>&1
  rc=$?; cat "$OUT/build-q$Q.log"
  [ $rc -eq 0 ] || { say "the pair did not build (exit $rc)"; exit 3; }
  touch "$P/built"
  say "built"
fi
if [ -n "$BUILD2" ]; then
  wait "$BUILD2"; [ -f "$P2/built" ] && say "the second drafter built" || say "the second drafter did not build: no ours_q2"
fi
# 1b. SGLang's speculative JIT modules (tree, tree sampling, FlashInfer sampling: what the plugin's kernel warm-up builds
#     in every speculative server before it listens; 167-172 s of each server's start on a fresh H100, 2026-12-05),
#     built while plain starts, into the caches every server shares (DA_PREBUILD=0: not)
if [ "${DA_PREBUILD:-1}" = 1 ]; then
  V=$(python3 -c "import json, sys; c = json.load(open(sys.argv[1])); print((c.get('text_config') or c)['vocab_size'])" \
      "$P/target/config.json" 2>/dev/null)
  if [ -n "$V" ]; then
    setsid -w python3 benchmark/live/prebuild_jit.py --spec "$V" --cache "$W/cache/jit-shared" \
      --flashinfer "$W/cache/flashinfer-shared" --timeout 600 > "$W/prebuild-spec.log" 2>&1 < /dev/null &
    SPECPB=$!
    say "prebuilding SGLang's speculative JIT modules (vocab $V): $W/prebuild-spec.log"
  else
    say "no vocab_size in $P/target/config.json: SGLang's speculative JIT modules build in each server's warm-up"
  fi
fi
if [ "$STEP" = prep ]; then say "prep done (the JIT prebuilds go on: $W/prebuild-prep.log, $W/prebuild-spec.log)"; PIDS=(); exit 0; fi
if [ -n "${PREBUILD:-}" ]; then
  wait "$PREBUILD"; rc=$?
  [ -f "$W/prebuild-prep.log" ] && say "the prep call's JIT prebuild: $(tr '\n' ' ' < "$W/prebuild-prep.log" | cut -c1-300)"
  say "JIT prebuild exit $rc: $(tr '\n' ' ' < "$W/prebuild-$STEP.log" | cut -c1-300)"
  if [ $rc -ne 0 ]; then
    pkill -f benchmark/live/prebuild_jit.py; export DA_MOE=triton
    say "the servers take --moe-runner-backend triton (no Marlin JIT build)"
  fi
fi

if [ -n "${SUITE:-}" ]; then wait "$SUITE"; say "suite exit $?: $(grep -E 'passed|failed|error' "$OUT/suite.log" | tail -1)"; fi
# 2. the servers, on a GPU no test process still holds (2026-12-01: a pytest worker kept 39 GiB after its suite)
for p in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); do
  # (after DA_SUITE, none of this script's servers runs yet: whatever holds the GPU is left over from the tests)
  if [ -n "${SUITE:-}" ] || tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q "pytest\|xdist\|execnet"; then
    say "killing a leftover test process on the GPU: $p $(tr '\0' ' ' < "/proc/$p/cmdline" | cut -c1-120)"; kill -KILL "$p"
  fi
done
python3 - "$W" "$Q" "$P" "$P2" <<'PY'
import json, os, shlex, sys
from sglang_kimi_eagle3.tiny.launch import base_args, spec_args
w, q, pair, pair2 = sys.argv[1:5]
target, draft = f"{pair}/target", f"{pair}/draft"
off_cfg = f"{w}/off.json"
# the off-state: SGLang refuses nothing about a [0]-only table, but our preflight refuses --speculative-num-steps 0,
# so the server starts at 1 and this plugin's controller (the `kimi_eagle3` entry: steps 1 priced out, no probe
# for 1e9 batches) drops it to 0 after its first decode batch, for good; its costs are placeholders, so not measured
# (measured, its status row read a step at "x19350" of the 1 µs placeholder on 2026-12-04)
json.dump({"1": {"candidate_steps": [0, 1], "kimi_eagle3": {
    "base_us": 1.0, "round_us": {"1": 1e9}, "dwell_batches": 1, "probe_batches": 1, "measure": False,
    "probe_wait_batches": 10**9, "probe_wait_max_batches": 10**9}}}, open(off_cfg, "w"))
a = base_args(target, mem_fraction=float(os.environ.get("MEMF", "0.7")))
a[a.index("--max-running-requests") + 1] = os.environ.get("MAXREQ", "128")
a[a.index("--cuda-graph-max-bs-decode") + 1] = "128"
a[a.index("--max-total-tokens") + 1] = os.environ.get("MAXTOK", "65536")
if os.environ.get("DA_GRAPHS", "128") == "sglang":  # SGLang's own decode graph sizes, to 512 clamped to MAXREQ (this
    # plugin's adaptive table models the same)
    i = a.index("--cuda-graph-max-bs-decode")
    del a[i:i + 2]
else:
    a += ["--cuda-graph-bs-decode", "1", "2", "4", "8", "16", "32", "64", "128"]
a += ["--sleep-on-idle"]
if os.environ.get("DA_MOE", "auto") != "auto":  # e.g. triton: SGLang's Triton WNA16 MoE, no Marlin JIT build
    a += ["--moe-runner-backend", os.environ["DA_MOE"]]
eagle = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", draft]
servers = [("plain", 30501, [], {}),
           ("fixed", 30502, spec_args(draft, "chain"), {"SGLANG_KIMI_EAGLE3_ADAPTIVE": "off"}),
           ("sglang", 30503, eagle + ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                                      "--speculative-adaptive"], {}),
           ("ours", 30504, spec_args(draft, "chain"), {})]
if os.environ.get("DA_OFF", "0") == "1":  # the hook at every batch size (`on`, as the default `auto` since run 25), so
    # that its step ratio against offext covers bs 1-4 too
    servers.append(("off", 30505, eagle + ["--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
                                           "--speculative-adaptive",
                                           "--speculative-adaptive-config", off_cfg], {"SGLANG_KIMI_EAGLE3_OFFSTATE": "on"}))
if os.environ.get("DA_OFFSKIP", "0") == "1":  # the off-state without its per-step draft extend (SGLang's own
    # experimental flag: the draft state goes stale, so acceptance after a step up is not what it was): how much of
    # the off-state's cost is the extend, and how much the 1-token verify path
    servers.append(("offskip", 30506, eagle + ["--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
                                               "--speculative-adaptive", "--speculative-adaptive-config", off_cfg],
                    {"SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND": "1"}))
if os.environ.get("DA_OFFEXT", "0") == "1":  # the off-state as SGLang runs it without this plugin's offstate_attention
    # hook (its Triton EXTEND kernel verifies the one token per request); `off` has the hook (the default)
    servers.append(("offext", 30507, eagle + ["--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
                                              "--speculative-adaptive", "--speculative-adaptive-config", off_cfg],
                    {"SGLANG_KIMI_EAGLE3_OFFSTATE": "off"}))
if os.environ.get("DA_ALONE", "0") == "1":  # ours with each batch-size slot learning alone (the controller before
    # pooling, SGLANG_KIMI_EAGLE3_ADAPTIVE_POOL=off): the pool's effect side by side
    servers.append(("alone", 30508, spec_args(draft, "chain"), {"SGLANG_KIMI_EAGLE3_ADAPTIVE_POOL": "off"}))
if os.environ.get("DA_SKIPEXT", "0") == "1":  # ours with SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=skip: while every slot is
    # off, SGLang's draft extend is skipped (its own flag, driven per process; a step up primed by two extended batches)
    servers.append(("skipext", 30509, spec_args(draft, "chain"), {"SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND": "skip"}))
if os.environ.get("DA_DEFER", "0") == "1":  # ours with SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=defer: while every slot is
    # off, the draft extend's rows are stashed and extended every 8 steps as one-token rows (exact for a one-layer drafter)
    servers.append(("defer", 30512, spec_args(draft, "chain"), {"SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND": "defer"}))
if os.environ.get("DA_KEEPEXT", "0") == "1":  # ours with SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=keep: SGLang's draft extend
    # at every steps-0 step (the default before 2026-12-06, when `defer` became it): the default's gain side by side
    servers.append(("keepext", 30513, spec_args(draft, "chain"), {"SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND": "keep"}))
if os.environ.get("DA_KVFLUSH", "0") == "1":  # ours with SGLANG_KIMI_EAGLE3_DEFER_FLUSH=kv: the deferred rows' K and V
    # written alone (no attention, no cap at the request slots) against ours' flushes through SGLang's extend
    servers.append(("kvflush", 30515, spec_args(draft, "chain"), {"SGLANG_KIMI_EAGLE3_DEFER_FLUSH": "kv"}))
if os.environ.get("DA_NORES", "0") == "1":  # ours with SGLANG_KIMI_EAGLE3_ADAPTIVE_RESERVE=off: SGLang's decode KV
    # reserve (its largest candidate's, at every state) against ours' (the running states'), where the KV pool is the limit
    servers.append(("nores", 30516, spec_args(draft, "chain"), {"SGLANG_KIMI_EAGLE3_ADAPTIVE_RESERVE": "off"}))
if pair2 and os.path.isfile(f"{pair2}/built"):  # DA_Q2: ours with the second drafter (port 30514)
    servers.append(("ours_q2", 30514, spec_args(f"{pair2}/draft", "chain"), {}))
if os.environ.get("DA_PINNED", "0") == "1":  # ours with eagle_prepare_for_decode's two CPU length tensors pinned
    # (benchmark/serving/plain_clock/sitecustomize.py, PINNED_LENS=1): is a pageable copy's stream sync the host's wait?
    servers.append(("pinned", 30510, spec_args(draft, "chain"), {"PINNED_LENS": "1"}))
if os.environ.get("DA_UPKERN", "0") == "1":  # ours with SGLang's own verify and draft-head kernels
    # (SGLANG_KIMI_EAGLE3_KERNELS=upstream): `auto`'s kernels against SGLang's in the same rounds, the same controller
    servers.append(("upkern", 30511, spec_args(draft, "chain"), {"SGLANG_KIMI_EAGLE3_KERNELS": "upstream"}))
# DA_OURS_ENV ("K=V ..."): more environment for ours, skipext and alone, e.g. SGLANG_KIMI_EAGLE3_OFFSTATE=on (the
# offstate_attention hook at every batch size) to measure a candidate default side by side with the step ratios
ours_env = dict(kv.split("=", 1) for kv in os.environ.get("DA_OURS_ENV", "").split())
servers = [(n, p, x, {**e, **ours_env} if n in ("ours", "skipext", "alone", "pinned", "upkern", "defer", "keepext", "ours_q2", "kvflush", "nores") else e)
           for n, p, x, e in servers]
skip = os.environ.get("DA_SKIP", "").split()  # servers not started, e.g. "sglang"
servers = [s for s in servers if s[0] not in skip]
spec = {"servers": [], "baseline": "plain"}
# DA_PIN=1: every server on the same CPUs (three quarters of the cores; its processes inherit the mask), the load
# client on the rest (benchmark/serving/cpu_sets.py), and before the rounds every server's scheduler process on one
# and the same CPU (the rounds drive one server at a time: the busy scheduler always runs there), its other processes
# on the servers' other CPUs. On an H100 lease (2026-12-07, benchmark/host/cpu_neighbours.py) the host's CPUs launched
# CUDA kernels at two speeds, about 7.0 and 9.0-9.6 µs a launch, some CPUs at one speed for minutes: a scheduler left
# where the OS put it could keep a slow CPU for a whole run while another server's kept a fast one
pin = os.path.abspath("benchmark/serving/cpu_sets.py")
pins = {}
if os.environ.get("DA_PIN", "0") == "1":
    sys.path.insert(0, os.path.dirname(pin))
    import cpu_sets
    sets = cpu_sets.plan(4)
    shared = [c for s in sets[:-1] for c in s]
    pins = {s[0]: cpu_sets.format_list(shared) for s in servers}
    spec["client_cpus"] = cpu_sets.format_list(sets[-1])
    spec["scheduler_cpus"] = cpu_sets.format_list(shared[:1])
    spec["rest_cpus"] = cpu_sets.format_list(shared[1:] or shared)
for name, port, extra, env_extra in servers:
    cache = f"{w}/cache/{name}"
    # one JIT cache and one Triton cache for all (the servers are not timed cold): see the staged start below. In run 18
    # (own Triton caches) plain alone took 165 s to start, 61 s of it its decode-graph capture, and the other four
    # another 165 s side by side; DA_OWN_TRITON=1: a Triton cache per server, as before
    triton = f"{cache}/triton" if os.environ.get("DA_OWN_TRITON") == "1" else f"{w}/cache/triton-shared"
    env = {"TRITON_CACHE_DIR": triton, "SGLANG_JIT_CACHE_DIR": f"{w}/cache/jit-shared",
           "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor", "XDG_CACHE_HOME": f"{cache}/xdg",
           # FlashInfer's JIT modules shared too: the speculative prebuild (step 1b) fills it before they start
           "FLASHINFER_WORKSPACE_BASE": f"{w}/cache/flashinfer-shared", "SGLANG_KIMI_EAGLE3_STATUS_DIR": f"{w}/status/{name}",
           # the plugin's kernel and traffic warm-ups as users get them (DA_WARMUP=on, the default since run 24: with
           # them off, ours compiled its verify kernels while serving, 0.1-1.4 s a stall for minutes, which cut its
           # first c-8 round to 0.49x of plain and fed the controller's step-time readings); off: kernels compile at
           # first use (runs 15-24), a shorter start
           # (the off-state servers of the step ratios go without: step_ratio.py warms each level itself)
           "SGLANG_KIMI_EAGLE3_WARMUP": "off" if name in ("off", "offskip", "offext") else os.environ.get("DA_WARMUP", "on"),
           **env_extra}
    if name in ("plain", "pinned"):  # benchmark only (plain_clock/sitecustomize): plain's decode steps timed like
        # ours' step_clock row; pinned's CPU length tensors pinned (PINNED_LENS, set above)
        env.update(PYTHONPATH=os.pathsep.join(p for p in (os.path.abspath("benchmark/serving/plain_clock"),
                                                          os.environ.get("PYTHONPATH", "")) if p))
    if name == "plain":
        env.update(STEP_CLOCK_DIR=f"{w}/status/plain/clock")
    argv = ["python3", "-m", "sglang.launch_server", *a, "--host", "127.0.0.1", "--port", str(port), *extra]
    with open(f"{w}/start-{name}.sh", "w") as f:
        pinned = f"python3 {shlex.quote(pin)} --run {pins[name]} -- " if name in pins else ""
        f.write(f"exec {pinned}env {' '.join(f'{k}={shlex.quote(v)}' for k, v in env.items())} {shlex.join(argv)}\n")
    spec["servers"].append({"name": name, "url": f"http://127.0.0.1:{port}", "log": f"{w}/logs/{name}.log",
                            **({"cpus": pins[name]} if name in pins else {})})
json.dump(spec, open(f"{w}/spec-q{q}.json", "w"), indent=1)
PY
NAMES=$(python3 -c "import json; print(' '.join(s['name'] for s in json.load(open('$W/spec-q$Q.json'))['servers']))")
# Staged: the first server alone, until healthy (DA_FIRST_S, 420), then the rest. On 2026-12-02 (evening) five
# servers started together, each with its own JIT cache, sat in their first CUDA-graph capture for over 7 minutes:
# a lone deploy-pair server's bs-128 decode capture ran a single-threaded nvcc (cicc) compile for over 100 s, and
# each of the five paid its own. With one shared SGLANG_JIT_CACHE_DIR the later servers find the first's kernels.
# Nothing left to build (the speculative prebuild ended well; the Marlin prebuild, or its Triton fallback, is behind
# us): every server starts at once. Run 44 (2026-12-07, an H100, no JIT pieces carried): the speculative prebuild began
# at 68 s, the Marlin prebuild ended at 410 s, and ours, started only after plain's staged wait (plain healthy about
# 140 s later), was still starting when the measure call's 200-s wait ran out
if [ -z "${DA_FIRST_S:-}" ] && [ "$FIRST_DEFAULT" != 0 ] && [ -n "${SPECPB:-}" ] && ! kill -0 "$SPECPB" 2>/dev/null; then
  wait "$SPECPB"; rc=$?
  if [ $rc -eq 0 ]; then FIRST_DEFAULT=0; say "the speculative JIT prebuild ended (exit 0): every server starts at once"
  else say "the speculative JIT prebuild exit $rc: the first server starts alone"; fi
fi
first=1
for n in $NAMES; do
  setsid bash "$W/start-$n.sh" > "$W/logs/$n-q$Q.log" 2>&1 < /dev/null &
  PIDS+=($!)
  echo $! > "$W/pid-q$Q-$n"
  say "started $n (pid $!)"
  if [ $first = 1 ]; then
    first=0
    u=$(python3 -c "import json; print(json.load(open('$W/spec-q$Q.json'))['servers'][0]['url'])")
    end=$(( $(date +%s) + ${DA_FIRST_S:-${FIRST_DEFAULT:-420}} ))
    until curl -s -m 3 -o /dev/null -w '%{http_code}' "$u/health" | grep -q 200 || [ "$(date +%s)" -ge $end ]; do sleep 3; done
    say "$n: $(curl -s -m 3 -o /dev/null -w '%{http_code}' "$u/health") after the staged wait; starting the rest"
    [ -f "$W/prebuild-spec.log" ] && say "speculative JIT prebuild so far: $(tr '\n' ' ' < "$W/prebuild-spec.log" | cut -c1-400)"
  fi
done
fi
healthy() { curl -s -m 3 -o /dev/null -w '%{http_code}' "$1/health" | grep -q 200; }
# 3. the measured step ratios, plain vs the off-state (DA_OFF), without its hook (DA_OFFEXT) and without its draft
#    extend (DA_OFFSKIP), all in one run of rotated rounds, once per lease ($W/step_ratio-*.done); in DA_STEP=start
#    only while DA_START_END_S leaves DA_RATIO_S + 10 s
step_ratios() {
  local name port first="" also=() tag=""
  for name in ${DA_RATIOS:-off offskip}; do
    case $name in off) [ "${DA_OFF:-0}" = 1 ] || continue; port=30505;; offskip) [ "${DA_OFFSKIP:-0}" = 1 ] || continue; port=30506;;
      offext) [ "${DA_OFFEXT:-0}" = 1 ] || continue; port=30507;; *) continue;; esac
    healthy http://127.0.0.1:$port || { say "step ratio ($name): not healthy, left out"; continue; }
    if [ -z "$first" ]; then first=$name; fport=$port; else also+=(--also "$name=http://127.0.0.1:$port"); fi
    tag="$tag-$name"
  done
  [ -n "$first" ] || return 0
  # every healthy server of DA_RATIOS read in the same rotated rounds against plain (run 16 read off and offext in two
  # runs one after the other, and plain's own c-8 step moved 72-99 ms between them): one document per lease,
  # step_ratio-off-offext-q$Q.json for DA_RATIOS="off offext"; DA_RATIO_S (100) its limit
  local json="$OUT/step_ratio$tag-q$Q.json"
  [ -f "$W/step_ratio$tag-q$Q.done" ] && return 0
  local lim=${DA_RATIO_S:-100}
  if [ -n "${1:-}" ] && [ $(( $1 - $(date +%s) )) -lt $((lim + 10)) ]; then say "step ratio ($tag): no time left in this call"; return 0; fi
  healthy http://127.0.0.1:30501 || { say "step ratio: plain is not healthy"; return 0; }
  timeout "$lim" python3 benchmark/serving/step_ratio.py --plain http://127.0.0.1:30501 --off "http://127.0.0.1:$fport" \
    "${also[@]}" --json "$json" --concurrency "${DA_RATIO_CONC:-1,8,32,128}" --repeats "${DA_RATIO_REPEATS:-3}" \
    --decode-context "${DA_RATIO_CTX:-64}"
  rc=$?; say "step_ratio.py ($tag) exit $rc"
  [ $rc -eq 0 ] && touch "$W/step_ratio$tag-q$Q.done"
}
# 3b. DA_ANATOMY=1: the decode-step anatomy (benchmark/serving/anatomy.py: GPU time per kernel family, GPU idle, and
#     the host time of SGLang's eager verify path per step, the dearest kernels) of DA_ANATOMY_SERVERS at each of
#     DA_ANATOMY_LEVELS ("128 1"), greedy, once per level and lease: the first level in DA_STEP=start while 100 s are
#     left before DA_START_END_S, the rest in measure -> $OUT/anatomy-cC-q$Q.json
anatomy() {  # $1: the call's end (epoch s); $2: concurrency levels
  local c=$2
  [ "${DA_ANATOMY:-0}" = 1 ] && [ ! -f "$W/anatomy-c$c-q$Q.done" ] || return 0
  local left=$(( $1 - $(date +%s) ))
  if [ $left -lt 100 ]; then say "anatomy (c $c): ${left} s left, not run"; return 0; fi
  mkdir -p "$W/traces"
  local a=() n
  for n in ${DA_ANATOMY_SERVERS:-off plain fixed}; do a+=(--server "$n=$(url_of "$n")"); done
  timeout $((left - 10)) python3 benchmark/serving/anatomy.py capture "${a[@]}" --concurrency "$c" --temperatures 0 \
    --steps 20 --kv-tokens 56000 --out "$W/traces" --json "$OUT/anatomy-c$c-q$Q.json"
  rc=$?; say "anatomy.py (c $c) exit $rc"
  [ $rc -eq 0 ] && touch "$W/anatomy-c$c-q$Q.done"
}
url_of() { python3 -c "import json; print({s['name']: s['url'] for s in json.load(open('$W/spec-q$Q.json'))['servers']}['$1'])"; }
# DA_PIN=1 (the spec's client_cpus): the load client on its own CPUs too
CLIENT_CPUS=$(python3 -c "import json; print(json.load(open('$W/spec-q$Q.json')).get('client_cpus', ''))")
CLIENT=(); [ -n "$CLIENT_CPUS" ] && CLIENT=(python3 benchmark/serving/cpu_sets.py --run "$CLIENT_CPUS" --)
[ -n "$CLIENT_CPUS" ] && say "pinned (DA_PIN=1): $(python3 -c "import json, sys; d = json.load(open(sys.argv[1]))
print(', '.join(s['name'] + ' ' + s.get('cpus', '-') for s in d['servers']) + ', client ' + d['client_cpus'])" "$W/spec-q$Q.json"); $(python3 benchmark/serving/cpu_sets.py 1 2>&1 >/dev/null)"
NAMES=$(python3 -c "import json; print(' '.join(s['name'] for s in json.load(open('$W/spec-q$Q.json'))['servers']))")
# DA_STEP=start: the servers outlive this call (started with setsid); it waits for all of them until DA_START_END_S
# (560) after its own start, so that the measure call's rounds get the whole next call
if [ "$STEP" = start ]; then
  for n in $NAMES; do
    u=$(url_of "$n")
    until healthy "$u" || [ "$(date +%s)" -ge $((T0 + ${DA_START_END_S:-560})) ]; do sleep 3; done
    healthy "$u" && say "$n healthy" || say "$n not healthy yet: $(tail -2 "$W/logs/$n-q$Q.log" | cut -c1-200)"
  done
  # first: the first of DA_ANATOMY_LEVELS (128 by default: the off-state's extra kernels at c 128)
  LEVELS=${DA_ANATOMY_LEVELS:-128 1}
  anatomy $((T0 + ${DA_START_END_S:-560})) "${LEVELS%% *}"
  step_ratios $((T0 + ${DA_START_END_S:-560}))
  say "run DA_STEP=measure next"
  exit 0
fi
if [ "$STEP" = measure ]; then for f in "$W"/pid-q"$Q"-*; do [ -f "$f" ] && PIDS+=("$(cat "$f")"); done; fi
END=$((T0 + STARTUP_S))
for n in $NAMES; do
  u=$(url_of "$n")
  until healthy "$u" || [ "$(date +%s)" -ge $END ]; do sleep 2; done
  healthy "$u" && say "$n healthy" || say "$n NOT healthy after ${STARTUP_S} s: $(tail -3 "$W/logs/$n-q$Q.log" | cut -c1-300)"
done
# past STARTUP_S, a server still starting (its process group alive) is waited for while DA_MEASURE_MIN_S (150) of the
# budget would remain for the rounds: run 44 (2026-12-07) measured nothing, ours answering just after a 200-s wait
LATE=$((T0 + BUDGET_S - ${DA_MEASURE_MIN_S:-150}))
for n in $NAMES; do
  u=$(url_of "$n"); healthy "$u" && continue
  pid=$(cat "$W/pid-q$Q-$n" 2>/dev/null) && [ -n "$pid" ] && kill -0 -- "-$pid" 2>/dev/null || continue
  [ "$(date +%s)" -lt $LATE ] || break
  say "$n still starting: waited for until $((LATE - T0)) s of this call (DA_MEASURE_MIN_S ${DA_MEASURE_MIN_S:-150} left after)"
  until healthy "$u" || [ "$(date +%s)" -ge $LATE ]; do sleep 2; done
  healthy "$u" && say "$n healthy at $(( $(date +%s) - T0 )) s" || say "$n NOT healthy at $((LATE - T0)) s"
done
grep -h "adaptive steps\|Built adaptive runtime state\|launch_step" "$W"/logs/*-q$Q.log | cut -c1-300 | head -20
step_ratios
for c in ${DA_ANATOMY_LEVELS:-128 1}; do anatomy $(( $(date +%s) + ${DA_ANATOMY_S:-150} )) $c; done  # what start left undone

# 3c. DA_LOADSTEP=1: the load step (benchmark/serving/load_step.py: each of DA_LOADSTEP_SERVERS, "plain ours", through
#     DA_LOADSTEP_SCHEDULE, 1:15,128:20,1:15, in DA_LOADSTEP_ROUNDS (3) rotated rounds; tokens per second as they
#     stream) -> $OUT/load-step-q$Q.json, within DA_LOADSTEP_S (330) before the rounds below
if [ "${DA_LOADSTEP:-0}" = 1 ]; then
  LS=()
  for n in ${DA_LOADSTEP_SERVERS:-plain ours}; do u=$(url_of "$n"); healthy "$u" && LS+=(--server "$n=$u"); done
  timeout -s INT "${DA_LOADSTEP_S:-330}" "${CLIENT[@]}" python3 benchmark/serving/load_step.py "${LS[@]}" --baseline plain \
    --json "$OUT/load-step-q$Q.json" --schedule "${DA_LOADSTEP_SCHEDULE:-1:15,128:20,1:15}" --rounds "${DA_LOADSTEP_ROUNDS:-3}"
  say "load_step.py exit $?"
  [ -s "$OUT/load-step-q$Q.json" ] && MEASURED=1
fi
# 3a. DA_PIN=1 (the spec's scheduler_cpus): every server's scheduler process on the same CPU, its other processes on
#     the servers' other CPUs (again each measure call: cheap, and a server restarted meanwhile is pinned too)
SCHED_CPUS=$(python3 -c "import json; print(json.load(open('$W/spec-q$Q.json')).get('scheduler_cpus', ''))")
if [ -n "$SCHED_CPUS" ]; then
  REST_CPUS=$(python3 -c "import json; print(json.load(open('$W/spec-q$Q.json'))['rest_cpus'])")
  for n in $NAMES; do
    [ -f "$W/pid-q$Q-$n" ] && say "$n pinned: $(python3 benchmark/serving/cpu_sets.py --pin-tree "$(cat "$W/pid-q$Q-$n")" "$SCHED_CPUS" "$REST_CPUS" 2>&1 | grep -v LD_PRELOAD)"
  done
fi
# 3b. DA_FREEZE_GC: the servers (names) whose processes freeze their garbage collector before the rounds (SGLang's own
#     /freeze_gc: what they hold now leaves every later collection), e.g. "plain ours" against "ours_q2" unfrozen
for n in ${DA_FREEZE_GC:-}; do
  u=$(url_of "$n") && say "$n /freeze_gc: $(curl -s -m 60 -o /dev/null -w '%{http_code}' -X POST "$u/freeze_gc")"
done
# 3. the measured step ratio (plain vs the off-state): step_ratios below, run by DA_STEP=start when time is left
# 4. rotated rounds on the chat workload (servers given by URL: the spec's started ones are ours to stop)
SERVERS=()
for n in $NAMES; do
  case " ${DA_E2E_SKIP:-} " in *" $n "*) say "$n: not in the rounds (DA_E2E_SKIP)"; continue;; esac
  u=$(url_of "$n"); healthy "$u" && SERVERS+=(--server "$n=$u")
done
DEADLINE=$((T0 + BUDGET_S))
say "e2e over ${SERVERS[*]}; deadline in $((DEADLINE - $(date +%s))) s"
timeout -s INT $((DEADLINE + 20 - $(date +%s))) "${CLIENT[@]}" python3 benchmark/serving/e2e.py "${SERVERS[@]}" --baseline plain \
  --json "$OUT/e2e-q$Q.json" --workload chat --no-cold --concurrency "${CONC:-1,8,32,128}" \
  --temperatures "${DA_TEMPS:-0}" --rounds "${ROUNDS:-3}" --round-s 20 --max-new-tokens 128 --workload-cap "${CAP:-256}" \
  --cold-requests 1 --min-requests 4 --finish-by "$DEADLINE" --min-round-s "${MIN_ROUND_S:-10}" \
  --server-gap-s "${DA_SERVER_GAP_S:-7}"
say "e2e.py exit $?"
measured_rows "$OUT/e2e-q$Q.json" && MEASURED=1
for n in $NAMES; do
  f=$(ls "$W/status/$n"/port*.json 2>/dev/null | head -1)  # not the moe-/warmup- markers beside it
  # per server: the controller's switches and pool, the off-state extend policy (skipped batches, primed step ups)
  [ -n "$f" ] && say "$n status: $(python3 benchmark/serving/status_rows.py status "$f" | cut -c1-700)"
  # plain: the same medians from benchmark/serving/plain_clock (its scheduler's file)
  [ "$n" = plain ] && for c in "$W"/status/plain/clock/plain-pid*.txt; do
    [ -f "$c" ] && say "plain step_clock ($(basename "$c")): $(cut -c1-1200 "$c")"
  done
  # per server: the step_clock row (per runtime state: medians of wall, launch, GPU wait, the rest; host- or GPU-bound)
  [ -n "$f" ] && say "$n step_clock: $(python3 benchmark/serving/status_rows.py step_clock "$f")"
  # its steps over plain decoding's at the same batch sizes (the like-for-like reading; both rows keep 16+ per bucket)
  [ -n "$f" ] && [ "$n" != plain ] && for c in "$W"/status/plain/clock/plain-pid*.txt; do
    [ -f "$c" ] && say "$n step_clock over plain's: $(python3 benchmark/serving/status_rows.py compare "$f" "$c")"
    break
  done
done
# where each round's seconds went, per server (the step clock's ledger around each round: decode, prefill, the rest),
# and rounds of the same requests side by side (benchmark/serving/round_ledger.py)
LEDGERS=()
for n in $NAMES; do
  if [ "$n" = plain ]; then l=$(ls "$W"/status/plain/clock/ledger-plain-pid*.json 2>/dev/null | head -1)
  else l=$(ls "$W/status/$n"/ledger-port*.json 2>/dev/null | head -1); fi
  [ -n "$l" ] && LEDGERS+=("$n=$l")
done
# (the writers copy every 2 s, plain's every 5: the last round's closing copy is there after a few seconds)
[ ${#LEDGERS[@]} -gt 0 ] && [ -f "$OUT/e2e-q$Q.json" ] && sleep "${LEDGER_WAIT_S:-6}" && python3 benchmark/serving/round_ledger.py "$OUT/e2e-q$Q.json" \
  "${LEDGERS[@]}" --json "$OUT/ledger-q$Q.json" 2>&1 | grep -v LD_PRELOAD | while IFS= read -r line; do say "round ledger: $line"; done
# the same-work rounds from the servers' own logs: their prefill batches and decode log lines (a cross-check of the
# ledger's split that needs no hook: benchmark/serving/round_logs.py)
SLOGS=()
for n in $NAMES; do [ -f "$W/logs/$n-q$Q.log" ] && SLOGS+=("$n=$W/logs/$n-q$Q.log"); done
[ ${#SLOGS[@]} -gt 0 ] && [ -f "$OUT/e2e-q$Q.json" ] && python3 benchmark/serving/round_logs.py "$OUT/e2e-q$Q.json" \
  "${SLOGS[@]}" 2>&1 | grep "same work\|round_logs" | while IFS= read -r line; do say "round logs: $line"; done
exit 0  # (the loop's last test must not become the script's exit status: a server without a status file is no error)
