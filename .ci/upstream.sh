#!/usr/bin/env bash
# CI step: export the upstream series against the installed SGLang, import the patched tree with the
# plugin off, run every PR's CPU tests against it (registered with register_cpu_ci) and parse every new
# test file with SGLang's own ut_parse_one_file. Usage: .ci/upstream.sh [PYTHON] (default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$PY" -m sglang_kimi_eagle3.cli upstream export --out "$out"
export SGLANG_KIMI_EAGLE3=0 PYTHONPATH="$out/tree/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONWARNINGS=ignore
unset SGLANG_IS_IN_CI SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN
"$PY" - "$out" <<'PY'
import os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import sglang
from sglang.test.ci.ci_register import HWBackend, ut_parse_one_file
out = Path(sys.argv[1])
assert sglang.__file__.startswith(str(out / "tree" / "python")), sglang.__file__
cpu, total = [], 0
for f in sorted((out / "tree" / "test" / "registered").rglob("test_*.py")):
    regs, has_main = ut_parse_one_file(str(f))
    assert regs and has_main, f"{f}: no CI registration or no __main__ entry"
    total += 1
    if any(r.backend == HWBackend.CPU for r in regs):
        cpu.append(str(f))
print(f"upstream series: {total} test files register and parse; CPU tests: {len(cpu)}")
# one interpreter per file, as SGLang's CI runs them (python3 file.py); one file per core at a time, each
# file's output printed whole, in order
def run(f):
    return f, subprocess.run([sys.executable, f], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
with ThreadPoolExecutor(max(1, len(os.sched_getaffinity(0)))) as pool:
    failed = []
    for f, cp in pool.map(run, cpu):
        print("::", f, flush=True)
        print(cp.stdout, end="", flush=True)
        if cp.returncode:
            failed.append(f"{f} (exit {cp.returncode})")
if failed:
    sys.exit("upstream series: CPU tests failed: " + ", ".join(failed))
PY
