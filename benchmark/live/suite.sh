#!/usr/bin/env bash
# Runs ON the device machine after device.sh install: the project's whole test suite with the carried
# SGLang stack (the README command), log to $OUT/suite.log, versions to $OUT/suite-versions.txt.
set -uo pipefail
eval "$(benchmark/live/device.sh env)"
{ date -u +%FT%TZ; nvidia-smi -L; python3 -c "import torch, triton, importlib.metadata as m; print('torch', torch.__version__, 'triton', triton.__version__, 'sglang', m.version('sglang'), 'sglang-kernel', m.version('sglang-kernel'), 'transformers', m.version('transformers'), 'python', __import__('sys').version.split()[0])"; git log -1 --format='commit %h %s' 2>/dev/null; } > ${OUT:-/tmp}/suite-versions.txt 2>&1
cat ${OUT:-/tmp}/suite-versions.txt
timeout ${SUITE_TIMEOUT:-560} python3 -m pytest -q test -p no:cacheprovider 2>&1 | tee ${OUT:-/tmp}/suite.log
echo "suite.sh: pytest exit ${PIPESTATUS[0]}"
