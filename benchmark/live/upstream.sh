#!/usr/bin/env bash
# Runs ON the lent device machine (after device.sh install), from the repo root: the upstream series
# applied to the carried SGLang, plugin off. Logs under $OUT (default /tmp/out):
#   upstream-export.log, upstream-kernels.log (PR 02/03/04/05 GPU tests + PR 02 per eager call + PR 02/03 benchmarks), upstream-serving.log (PR 01, PR 06)
# Steps: export | kernels | serving | all (default)
# Knobs (a short lease runs a part): UP_FILES (the kernels step's test files under test/registered/, default all four),
# UP_BENCH (1; 0 skips the kernels step's benchmarks), UP_SERVING ("01 06": the serving step's PRs)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
step=${1:-all}
eval "$(benchmark/live/device.sh env)"
UP=/tmp/up T=/tmp/up/tree
if [ "$step" = export ] || [ "$step" = all ] || [ ! -d $T ]; then
  python3 -m sglang_kimi_eagle3.cli upstream export --out $UP --sglang-src /tmp/site/sglang 2>&1 | tee "$OUT/upstream-export.log"
  cp -r $UP/patches $UP/SERIES.md "$OUT/" 2>/dev/null
fi
export SGLANG_KIMI_EAGLE3=0 PYTHONPATH=$T/python${PYTHONPATH:+:$PYTHONPATH}
unset SGLANG_IS_IN_CI SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN TRITON_INTERPRET
python3 -c "import sglang, sys; print('sglang from', sglang.__file__); sys.exit(not sglang.__file__.startswith('$T'))" || exit 3
rc=0
if [ "$step" = kernels ] || [ "$step" = all ]; then
  { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
    for f in ${UP_FILES:-spec/test_tree_sampling_triton.py spec/test_draft_topk.py attention/test_triton_one_token_verify.py \
             speculative/test_deferred_draft_extend.py}; do
      echo "== $f"; python3 $T/test/registered/$f -v || rc=1  # one interpreter per file, as SGLang's CI
    done
    [ "${UP_BENCH:-1}" = 0 ] && exit $rc
    # per eager call first (where PR 02's dispatch decides): the CUDA kernel, the replayed default, the binder
    python3 $T/benchmark/kernels/speculative/bench_tree_sampling_triton.py --eager --bs 1,4,16,64 --calls 100
    python3 $T/benchmark/kernels/speculative/bench_tree_sampling_triton.py
    python3 $T/benchmark/kernels/speculative/bench_draft_topk.py --vocab 32000 --k 4
    exit $rc
  } 2>&1 | tee "$OUT/upstream-kernels.log" || rc=1
fi
if [ "$step" = serving ] || [ "$step" = all ]; then
  python3 -m sglang_kimi_eagle3.tiny /tmp/tiny-up --seed 0 >/dev/null
  : > "$OUT/upstream-serving.log"
  case " ${UP_SERVING:-01 06} " in *" 01 "*)
  SGLANG_TEST_DRAFT_CONTEXT_TARGET=/tmp/tiny-up/target SGLANG_TEST_DRAFT_CONTEXT_DRAFT=/tmp/tiny-up/draft \
  SGLANG_TEST_DRAFT_CONTEXT_ARGS="--attention-backend triton --sampling-backend pytorch --grammar-backend none --mem-fraction-static 0.85 --max-total-tokens 65536 --max-running-requests 16 --cuda-graph-max-bs-decode 8 --disable-prefill-cuda-graph" \
    python3 $T/test/registered/spec/test_draft_context_policy_serving.py -v 2>&1 | tee -a "$OUT/upstream-serving.log" || rc=1;;
  esac
  case " ${UP_SERVING:-01 06} " in *" 06 "*)
  # PR 06 on the same pair (its draft is shorter than the target: SGLang's escape lets it serve, as `extend` would)
  SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 \
  SGLANG_TEST_ADAPTIVE_RESERVE_TARGET=/tmp/tiny-up/target SGLANG_TEST_ADAPTIVE_RESERVE_DRAFT=/tmp/tiny-up/draft \
  SGLANG_TEST_ADAPTIVE_RESERVE_ARGS="--attention-backend triton --sampling-backend pytorch --grammar-backend none --mem-fraction-static 0.85 --max-total-tokens 65536 --max-running-requests 16 --cuda-graph-max-bs-decode 8 --disable-prefill-cuda-graph" \
    python3 $T/test/registered/spec/eagle/test_adaptive_decode_reserve.py -v 2>&1 | tee -a "$OUT/upstream-serving.log" || rc=1;;
  esac
fi
exit $rc
