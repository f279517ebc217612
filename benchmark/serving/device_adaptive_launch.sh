#!/usr/bin/env bash
# Runs ON the lent H200, one call of the never-slower lease (after the last carried part): installs the carried stack,
# starts benchmark/serving/device_adaptive.sh DA_STEP=start detached, with its own output folder (DA_START_OUT,
# /tmp/da-start), so that its staged server start goes on past this call (in run 24 the install, the 6-minute Marlin
# build and plain's start alone filled a 600-s call), waits for its JIT prebuild, packs the Marlin builds into $OUT
# (device.sh jit-pack: keep the pieces in .jit/ for the next lease; not when the carried ones hold every finished build,
# device.sh jit-new) and the
# speculative JIT modules (jit-pack-spec, the same way), and
# returns with start.tgz (install, build and suite logs so far) and the start log so far. The measure calls after it
# (DA_STEP=measure, STARTUP_S long enough) wait for the servers; DA_STEP=measure's logs-q$Q.tgz holds every server log.
# Knobs: LAUNCH_WAIT_S (480: the longest wait for the prebuild), LAUNCH_HEALTHY_S (540: then every server's /health is
# waited for until this long after the call's start); the rest pass through to device_adaptive.sh (DA_Q,
# DA_OFF, DA_SUITE, ...; DA_START_END_S defaults to 1 here: the detached start stops after starting the servers, so it
# never reads step ratios beside a measure call's rounds).
set -uo pipefail
T0=$(date +%s)
: "${OUT:?device_adaptive_launch.sh writes into \$OUT}"
S=${DA_START_OUT:-/tmp/da-start}
Q=${DA_Q:-0.9}
mkdir -p "$S"
bash benchmark/live/device.sh install > "$S/install.log" 2>&1 || { tail -5 "$S/install.log"; exit 3; }
OUT=$S DA_STEP=start DA_START_END_S=${DA_START_END_S:-1} setsid bash benchmark/serving/device_adaptive.sh \
  > /dev/null 2>&1 < /dev/null &
log=$S/device_adaptive-q$Q.log
until grep -q "JIT prebuild exit\|started plain\|did not build" "$log" 2>/dev/null \
  || [ $(( $(date +%s) - T0 )) -ge "${LAUNCH_WAIT_S:-480}" ]; do sleep 5; done
# then every server's /health, until LAUNCH_HEALTHY_S (540) after this call's start: on a fresh H100 (2026-12-05) the
# speculative servers listened about 8 minutes after they started, and a measure call that waits for them has that much
# less of its own 600 s for rounds; waiting here costs the same device time
spec="${DA_WORK:-/tmp/da}/spec-q$Q.json"
# the server list is written just after the prebuild's exit line (run 28, 2026-12-05: read at once it was not there
# yet, and the call returned without waiting for any server)
until [ -f "$spec" ] || grep -q "did not build" "$log" 2>/dev/null \
  || [ $(( $(date +%s) - T0 )) -ge "${LAUNCH_HEALTHY_S:-540}" ]; do sleep 2; done
if [ -f "$spec" ]; then
  urls=$(python3 -c "import json, sys; print(' '.join(s['url'] for s in json.load(open(sys.argv[1]))['servers']))" "$spec")
  up() { local u n=0; for u in $urls; do curl -s -m 3 -o /dev/null -w '%{http_code}' "$u/health" | grep -q 200 && n=$((n + 1)); done; echo $n; }
  until [ "$(up)" -ge "$(echo $urls | wc -w)" ] || [ $(( $(date +%s) - T0 )) -ge "${LAUNCH_HEALTHY_S:-540}" ]; do sleep 5; done
  echo "[launch $(( $(date +%s) - T0 )) s] $(up) of $(echo $urls | wc -w) servers answer /health"
fi
# packed again where this lease finished a build the carried pieces lack (run 44 carried away one of two variants)
new_=$(bash benchmark/live/device.sh jit-new "${DA_WORK:-/tmp/da}/cache/jit-shared")
if [ -f "${JITPARTS:-/tmp/jitparts}/jit-marlin.md5" ] && [ -z "$new_" ]; then echo "Marlin builds carried in: not packed again"
else bash benchmark/live/device.sh jit-pack "${DA_WORK:-/tmp/da}/cache/jit-shared"; fi
# the speculative modules (SGLang's tree and tree sampling, FlashInfer's sampling) too, in the pieces this call may still
# return (8 files a call: start.tgz, the log and their md5 besides)
if [ -f "${JITPARTS:-/tmp/jitparts}/jit-spec.md5" ]; then echo "speculative builds carried in: not packed again"
elif [ $(( 8 - 3 - $(ls "$OUT" | wc -l) )) -ge 1 ]; then
  JIT_MAX_PARTS=$(( 8 - 3 - $(ls "$OUT" | wc -l) )) bash benchmark/live/device.sh jit-pack-spec \
    "${DA_WORK:-/tmp/da}/cache/jit-shared" "${DA_WORK:-/tmp/da}/cache/flashinfer-shared"
else echo "speculative builds not packed: this call returns 8 files already"; fi
sleep 2
tar czf "$OUT/start.tgz.tmp" -C "$S" --exclude='logs-*' . 2>/dev/null && mv "$OUT/start.tgz.tmp" "$OUT/start.tgz"
cp "$log" "$OUT/" 2>/dev/null
echo "[launch $(( $(date +%s) - T0 )) s] \$OUT: $(ls "$OUT" | tr '\n' ' ')"
tail -15 "$log"
