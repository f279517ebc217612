#!/usr/bin/env bash
# One call on the lent H200 (docs/gpu-ci.md, "Kernel tests on the H200"): install SGLang
# 0.5.23's wheel and its few dependencies (downloaded beforehand on a networked box, carried in $1,
# default .whl/sgl) into /tmp/site, then run the kernel tests compiled and the exactness tests against
# SGLang's own kernels; logs under $OUT. Then two deliberate breakages on the device's copy of the
# tree, each of which a test must catch (shown red in mutation.log), the tree is not restored: the
# device's copy is thrown away after the call.
#   run: [MUTATE=0] bash test/gpu_kernels/device_run.sh .whl/sgl        carry: [".whl/sgl"]
set -uo pipefail
W=${1:-.whl/sgl}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$W"/*.whl || exit 9
tar xzf "$W"/flashinfer-headers.tgz -C /tmp/site
export SITE=/tmp/site PYTHONPATH=/tmp/site:$PWD/python PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"; nvcc --version | tail -1; } | tee "$OUT/versions.txt"
t0=$(date +%s)
python3 -m pytest -q -p no:cacheprovider -s -rs test/gpu_kernels 2>&1 | tee "$OUT/gpu_kernels.log" | grep -v '^{' | tail -30
t1=$(date +%s)
python3 -m pytest -q -p no:cacheprovider -n 8 test/ops test/policy test/planner 2>&1 | tee "$OUT/ops.log" | tail -40
t2=$(date +%s)
echo "seconds: gpu_kernels $((t1 - t0)), ops/policy/planner $((t2 - t1))" | tee -a "$OUT/versions.txt"
# the benchmark harness imports as a package and its one timing loop runs (a few ms of timing)
python3 - <<'PY' 2>&1 | tee "$OUT/bench_smoke.log" | tail -3
import torch
import benchmark.kernels.bench_draft_head, benchmark.kernels.bench_l2_method, benchmark.kernels.bench_verify  # noqa: F401
from benchmark.kernels.harness import Results
res = Results("smoke")
x = torch.randn(4096, 4096, device="cuda")
res.time("copy", "torch", {"n": x.numel()}, lambda: x.clone(), warmup_ms=5, rep_ms=20)
print("bench harness smoke ok:", res.save())
PY
# deliberate breakages (expected: failures); MUTATE=0 skips them
[ "${MUTATE:-1}" = 0 ] && exit 0
sed -i 's/            tl.store(sem_ptr + tile, 0)  # for the next launch/            pass  # BROKEN: counter not reset/' python/sglang_kimi_eagle3/ops/lm_head_gemv.py
sed -i 's/        x = tl.where(x == x, bits.to(tl.float32, bitcast=True), x)/        x = bits.to(tl.float32, bitcast=True)  # BROKEN: NaN fix reverted/' python/sglang_kimi_eagle3/ops/lm_head_gemv.py
grep -n BROKEN python/sglang_kimi_eagle3/ops/lm_head_gemv.py | tee "$OUT/mutation.log"
python3 -m pytest -q -p no:cacheprovider test/ops/test_lm_head_gemv.py::test_exact_inputs_bitwise test/ops/test_lm_head_gemv.py::test_round_16bit_keeps_every_nan test/ops/test_lm_head_topk.py::test_nan_and_inf_rows_single_and_sharded 2>&1 | tee -a "$OUT/mutation.log" | tail -15
