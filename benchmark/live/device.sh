#!/usr/bin/env bash
# Runs ON the lent device machine, from the repo root (what a `run` call executes). Steps:
#   recv       copy the carried .whl/parts/* (one part per call) to /tmp/parts: /tmp survives between
#              calls while the machine stays warm (it goes back after 30 s idle: calls must follow closely)
#   install    check every part's md5, reassemble, pip install --no-deps --target /tmp/site, and give the
#              plugin a dist-info there so SGLang finds its entry point (the code itself comes from ./python)
#   env        print the exports that make python3 use the carried stack (eval "$(benchmark/live/device.sh env)")
#   smoke      versions, the H200, NCCL, sgl_kernel's rmsnorm and `import sglang.launch_server`
# README.md in this folder is the whole recipe.
set -euo pipefail
PARTS=/tmp/parts SITE=/tmp/site
step=${1:?usage: device.sh recv|install|env|smoke}
case "$step" in
recv)
  mkdir -p $PARTS
  cp .whl/parts/part-* $PARTS/ 2>/dev/null || true
  for f in MANIFEST FILES; do [ -f .whl/parts/$f ] && cp .whl/parts/$f $PARTS/; done
  echo "parts here: $(ls $PARTS | grep -c '^part-') of $( [ -f $PARTS/MANIFEST ] && wc -l < $PARTS/MANIFEST || echo '?')"
  ;;
install)
  if [ -f $SITE/.installed ]; then echo "already installed: $(cat $SITE/.installed)"; exit 0; fi
  (cd $PARTS && md5sum -c --quiet MANIFEST) || { echo "parts missing or corrupt: carry them again"; exit 3; }
  rm -rf /tmp/wh && mkdir -p /tmp/wh && cat $PARTS/part-* | tar xf - -C /tmp/wh
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE /tmp/wh/big/*.whl /tmp/wh/small/*.whl
  d=$SITE/sglang_kimi_eagle3-0.1.0.dist-info; mkdir -p $d $SITE/bin
  printf 'Metadata-Version: 2.1\nName: sglang-kimi-eagle3\nVersion: 0.1.0\n' > $d/METADATA
  printf '[sglang.srt.plugins]\nkimi_eagle3 = sglang_kimi_eagle3:register\n\n[console_scripts]\nsglang-kimi-eagle3 = sglang_kimi_eagle3.cli:main\n' > $d/entry_points.txt
  printf '#!/bin/sh\nexec python3 -m sglang_kimi_eagle3.cli "$@"\n' > $SITE/bin/sglang-kimi-eagle3 && chmod +x $SITE/bin/sglang-kimi-eagle3
  rm -rf /tmp/wh && date -u +%FT%TZ > $SITE/.installed && echo "installed into $SITE ($(du -sh $SITE | cut -f1))"
  ;;
env)
  cat <<EOT
export PYTHONPATH=$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages:$PWD/python
export LD_PRELOAD=$SITE/nvidia/nccl/lib/libnccl.so.2
export PATH=$SITE/bin:\$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TRITON_CACHE_DIR=/tmp/cache/triton XDG_CACHE_HOME=/tmp/cache
EOT
  ;;
smoke)
  eval "$($0 env)"
  python3 - <<'PY'
import importlib.metadata as md, time
t = time.time()
import torch
print("torch", torch.__version__, torch.version.cuda, "nccl", torch.cuda.nccl.version(), torch.cuda.get_device_name(0))
import triton, sgl_kernel
x = torch.randn(8, 512, device="cuda", dtype=torch.bfloat16); w = torch.ones(512, device="cuda", dtype=torch.bfloat16)
ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)
print("triton", triton.__version__, "sgl_kernel rmsnorm max err", (sgl_kernel.rmsnorm(x, w, 1e-6) - ref).abs().max().item())
import sglang.launch_server  # noqa: F401
print("sglang", md.version("sglang"), "transformers", md.version("transformers"), "flashinfer", md.version("flashinfer-python"),
      "plugin entry points", [e.name for e in md.entry_points(group="sglang.srt.plugins")], f"({time.time() - t:.0f} s)")
PY
  ;;
*) echo "unknown step $step"; exit 2 ;;
esac
