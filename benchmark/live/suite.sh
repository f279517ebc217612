#!/usr/bin/env bash
# Runs ON the device machine after device.sh install: the project's whole test suite with the carried
# SGLang stack (the README command), log to $OUT/suite.log, versions to $OUT/suite-versions.txt.
set -uo pipefail
eval "$(benchmark/live/device.sh env)"
{ date -u +%FT%TZ; nvidia-smi -L; python3 -c "import torch, triton, importlib.metadata as m; print('torch', torch.__version__, 'triton', triton.__version__, 'sglang', m.version('sglang'), 'sglang-kernel', m.version('sglang-kernel'), 'transformers', m.version('transformers'), 'python', __import__('sys').version.split()[0])"; git log -1 --format='commit %h %s (the device copy of .git: on 2026-12-03 it named an older commit than the tree carried)' 2>/dev/null; } > ${OUT:-/tmp}/suite-versions.txt 2>&1
cat ${OUT:-/tmp}/suite-versions.txt
# SIGINT at the limit: pytest stops like on Ctrl-C and still prints its summary and writes the junit XML.
# test/gpu/test_live_tiny.py runs inside this suite (a GPU is visible): its logs go to live-logs.tgz. Serially,
# with cold JIT caches, the suite did not fit one 10-minute call (run 1, 2026-11-30: 194 of 943 tests in 470 s).
# Run live.sh in the call before: the live roles it finished are taken up here (GPU_CI_REUSE_RUNS), and with
# pytest-xdist (in the device image) the rest took 296 s (run 2: -n 8 --dist loadfile, the default below).
export GPU_CI_LOG_DIR=/tmp/live-logs GPU_CI_TINY_DIR=/tmp/tiny GPU_CI_STARTUP_TIMEOUT=${GPU_CI_STARTUP_TIMEOUT:-300}
export GPU_CI_REUSE_RUNS=${GPU_CI_REUSE_RUNS:-1}
if [ -z "${SUITE_ARGS+x}" ] && python3 -c "import xdist" 2>/dev/null; then SUITE_ARGS="-n 8 --dist loadfile -p no:cacheprovider"; fi
# The files marked `slow` (they start SGLang processes) go first: test/conftest.py sorts them to the front, and
# --no-loadscope-reorder keeps xdist from handing files out by their number of tests instead (its default: the slow
# files, which have few tests, went last, and on 2026-12-03 six were not reached in 400 s). Only where this
# pytest-xdist knows the flag (3.7 and later); an unknown flag would stop the whole run.
if [[ " ${SUITE_ARGS:-} " == *" --dist loadfile "* ]] && python3 -m pytest --help 2>/dev/null | grep -q -- --no-loadscope-reorder; then
  SUITE_ARGS="$SUITE_ARGS --no-loadscope-reorder"
fi
# One or two CPU threads per test process: 12 xdist workers (and the processes they start) with torch's default of
# one thread per core (16 here) oversubscribe the CPU in the tests that run kernels under the Triton interpreter or
# SGLang's functions on CPU tensors; on 2026-12-03 two such files did not finish in 380 s beside other work (on the
# 2-core CPU box 131 s and 183 s). Not yet measured with this setting.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} MKL_NUM_THREADS=${MKL_NUM_THREADS:-2}
timeout -s INT ${SUITE_TIMEOUT:-540} python3 -m pytest -q test -rfE --junitxml=${OUT:-/tmp}/suite.xml ${SUITE_ARGS:-} 2>&1 | tee ${OUT:-/tmp}/suite.log
rc=${PIPESTATUS[0]}
tar czf ${OUT:-/tmp}/live-logs.tgz -C /tmp live-logs --exclude='live-logs/models' 2>/dev/null
echo "suite.sh: pytest exit $rc"
