#!/usr/bin/env bash
# Runs ON the lent device machine, from the repo root (what a `run` call executes). Steps:
#   recv       copy the carried .whl/parts/* (one part per call) to /tmp/parts: /tmp survives between
#              calls while the machine stays warm (it goes back after 30 s idle: calls must follow closely)
#   install    check every part's md5, reassemble, pip install --no-deps --target /tmp/site, and give the
#              plugin a dist-info there so SGLang finds its entry point (the code itself comes from ./python)
#   env        print the exports that make python3 use the carried stack (eval "$(benchmark/live/device.sh env)"),
#              and unset the image's PYTHONDONTWRITEBYTECODE: the install writes no byte-code (pip --no-compile), so
#              with it set every process compiled SGLang's ~9000 imported modules from source again (the servers' and
#              every test subprocess's); without it the first process to import a module leaves its byte-code in
#              $SITE (an atomic write) for every later one
#   smoke      versions, the H200, NCCL, sgl_kernel's rmsnorm and `import sglang.launch_server`
#   jit-pack DIR    SGLang's Marlin MoE JIT builds in DIR (SGLANG_JIT_CACHE_DIR, content-addressed) as gzip'd tar
#              pieces of JIT_PART_MB (15) MiB in $OUT (jit-marlin.tgz.part-NN + jit-marlin.md5; at most JIT_MAX_PARTS,
#              4: a call returns 8 files of 16 MiB): kept in .jit/ here, they spare the next lease the ~5.5-min nvcc
#              build (run 24: 324-346 s, two variants side by side); only finished builds (a .so), the rest named
#   jit-new DIR     the finished Marlin builds in DIR the carried pieces lack, one a line (the launch packs again then)
#   jit-pack-spec DIR FIDIR  the same for what a speculative server's kernel warm-up builds (prebuild_jit.py --spec):
#              SGLang's other JIT modules in DIR (every module but Marlin's: tree, tree sampling) and FlashInfer's JIT
#              workspace FIDIR (its sampling module), as jit-spec.tgz.part-NN + jit-spec.md5 (run 32: 150 s of the
#              launch, the speculative servers started only after it)
#   jit-recv   copy the carried .jit/* (one or more pieces per call) to /tmp/jitparts
#   jit-unpack DIR  when every piece is there (md5), unpack them into DIR; exit 0 either way (what it did, one line)
#   jit-unpack-spec DIR FIDIR  the same for the jit-spec pieces (FlashInfer's part into FIDIR)
#   jit-unpack-local DIR  the same for the jit-local pieces: Marlin libraries compiled on the CPU box
#              (`prebuild_jit.py --local .jit`), which `prebuild_jit.py --adopt DIR` hands to SGLang's JIT cache
# README.md in this folder is the whole recipe.
set -euo pipefail
PARTS=/tmp/parts SITE=${DEVICE_SITE:-/tmp/site}  # DEVICE_SITE: the CPU rehearsal's (test/bench/test_device_adaptive_rehearsal.py)
step=${1:?usage: device.sh recv|install|env|smoke|jit-pack DIR|jit-new DIR|jit-pack-spec DIR FIDIR|jit-recv|jit-unpack DIR|jit-unpack-spec DIR FIDIR|jit-unpack-local DIR}
JITPARTS=${JITPARTS:-/tmp/jitparts}
# split $tmp/$1.tgz into pieces of JIT_PART_MB in $OUT with an md5 list, or say why not (over JIT_MAX_PARTS); $2: what
split_pieces() {
  local name=$1 what=$2 mb=${JIT_PART_MB:-15} max=${JIT_MAX_PARTS:-4} n
  n=$(( ($(stat -c %s "$tmp/$name.tgz") + mb * 1048576 - 1) / (mb * 1048576) ))
  if [ "$n" -gt "$max" ]; then
    echo "$step: $(du -h "$tmp/$name.tgz" | cut -f1) packed is $n pieces of $mb MiB, over JIT_PART_MB x JIT_MAX_PARTS ($max): not packed"
    rm -rf "$tmp"; return 0
  fi
  (cd "$tmp" && split -b "${mb}M" -d -a 2 "$name.tgz" "$name.tgz.part-" && rm "$name.tgz" && md5sum "$name".tgz.part-* > "$name.md5")
  mv "$tmp"/* "$out"/ && rm -rf "$tmp"
  echo "$step: $what in $n pieces: $(cd "$out" && ls "$name".* | tr '\n' ' ')"
}
# the module folders among $2... (relative to $1) that hold a finished build (a .so somewhere below)
complete() { local d=$1 n; shift; for n in "$@"; do [ -z "$(find "$d/$n" -name '*.so' -print -quit 2>/dev/null)" ] || echo "$n"; done; }
# the pieces of set $1 (jit-marlin, jit-spec) all here with their md5s?
have_set() { [ -f "$JITPARTS/$1.md5" ] && (cd "$JITPARTS" && md5sum -c --quiet "$1.md5" 2>/dev/null); }
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
unset PYTHONDONTWRITEBYTECODE
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
jit-pack)
  dir=${2:?usage: device.sh jit-pack DIR}; out=${OUT:?jit-pack writes into \$OUT}
  # SGLang's layout: DIR/<target>/<module_name>/build-<key>/deps-<key>/<module>.so (kernels/jit/utils/compile/cache.py;
  # a leaf is used only where its dependency list re-hashes to its name on this machine, so a stale one is skipped)
  # (SGLang prefixes its module names: sgl_kernel_jit_moe_wna16_marlin_bf16_...; run 25 looked for them without it)
  # (found at any depth up to 3, so that a layout change packs what is there rather than nothing)
  names=$(cd "$dir" 2>/dev/null && find . -mindepth 1 -maxdepth 3 -type d -name '*moe_wna16_marlin*' -prune -printf '%P\n' | sort)
  [ -n "$names" ] || { echo "jit-pack: no *moe_wna16_marlin* build in $dir: nothing packed; it holds: $(cd "$dir" 2>/dev/null && find . -mindepth 1 -maxdepth 3 | head -8 | tr '\n' ' ')"; exit 0; }
  # only finished builds (a .so): run 44 (2026-12-07) packed a variant its prebuild's timeout had cut, an empty folder
  # with SGLang's .lock, beside the finished one
  done_=$(complete "$dir" $names); cut_=$(for n in $names; do echo "$done_" | grep -qxF "$n" || echo "$n"; done)
  [ -z "$cut_" ] || echo "jit-pack: not finished (no .so), left out: $(echo $cut_)"
  [ -n "$done_" ] || { echo "jit-pack: no finished Marlin build in $dir: nothing packed"; exit 0; }
  tmp=$(mktemp -d); tar czf "$tmp/jit-marlin.tgz" --exclude='.staging-*' -C "$dir" $done_
  split_pieces jit-marlin "$(echo $done_ | wc -w) builds"
  ;;
jit-new)
  # the finished Marlin builds in DIR that the carried jit-marlin pieces lack (one a line; none: nothing printed): the
  # launch packs again where this lease finished a build its carried set did not hold
  dir=${2:?usage: device.sh jit-new DIR}
  names=$(cd "$dir" 2>/dev/null && find . -mindepth 1 -maxdepth 3 -type d -name '*moe_wna16_marlin*' -prune -printf '%P\n' | sort) || true
  carried=$(have_set jit-marlin && cat $JITPARTS/jit-marlin.tgz.part-* | tar tzf - 2>/dev/null | grep '\.so$' || true)
  for n in $(complete "$dir" $names); do echo "$carried" | grep -q "^$n/" || echo "$n"; done
  ;;
jit-pack-spec)
  dir=${2:?usage: device.sh jit-pack-spec DIR FIDIR}; fidir=${3:?usage: device.sh jit-pack-spec DIR FIDIR}
  out=${OUT:?jit-pack-spec writes into \$OUT}
  names=$(cd "$dir" 2>/dev/null && find . -mindepth 2 -maxdepth 2 -type d ! -name '*moe_wna16_marlin*' ! -name '.staging-*' -printf '%P\n' | sort) || true
  [ -d "$fidir" ] && [ -n "$(ls -A "$fidir" 2>/dev/null)" ] || fidir=
  [ -n "$names$fidir" ] || { echo "jit-pack-spec: no module in $dir and no FlashInfer workspace: nothing packed"; exit 0; }
  tmp=$(mktemp -d)
  if [ -n "$names" ]; then tar cf "$tmp/jit-spec.tar" --exclude='.staging-*' -C "$dir" $names
  else tar cf "$tmp/jit-spec.tar" --files-from /dev/null; fi  # FlashInfer's alone (no JIT cache folder)
  [ -z "$fidir" ] || tar rf "$tmp/jit-spec.tar" -C "$fidir" --transform 's,^\.,flashinfer,' .
  gzip -c "$tmp/jit-spec.tar" > "$tmp/jit-spec.tgz" && rm "$tmp/jit-spec.tar"
  split_pieces jit-spec "$(echo $names | wc -w) SGLang modules$([ -n "$fidir" ] && echo " and FlashInfer's workspace")"
  ;;
jit-recv)
  mkdir -p $JITPARTS
  cp .jit/jit-marlin.* .jit/jit-spec.* .jit/jit-local.* $JITPARTS/ 2>/dev/null || true
  for set in jit-marlin jit-spec jit-local; do
    if [ -f $JITPARTS/$set.md5 ]; then
      echo "jit pieces here ($set): $(ls $JITPARTS | grep -c "^$set.tgz.part-" || true) of $(wc -l < $JITPARTS/$set.md5)"
    fi
  done
  echo "jit pieces here: $(ls $JITPARTS | grep -c 'part-' || true) of $(cat $JITPARTS/*.md5 2>/dev/null | wc -l)"
  ;;
jit-unpack)
  dir=${2:?usage: device.sh jit-unpack DIR}
  if ! have_set jit-marlin; then
    echo "jit-unpack: no complete set of pieces in $JITPARTS: SGLang builds its JIT kernels itself"; exit 0
  fi
  mkdir -p "$dir" && cat $JITPARTS/jit-marlin.tgz.part-* | tar xzf - -C "$dir"
  echo "jit-unpack: $(cat $JITPARTS/jit-marlin.tgz.part-* | tar tzf - | cut -d/ -f1-2 | sort -u | tr '\n' ' ')into $dir"
  ;;
jit-unpack-spec)
  dir=${2:?usage: device.sh jit-unpack-spec DIR FIDIR}; fidir=${3:?usage: device.sh jit-unpack-spec DIR FIDIR}
  if ! have_set jit-spec; then
    echo "jit-unpack-spec: no complete set of jit-spec pieces in $JITPARTS: the speculative modules build at the start"; exit 0
  fi
  mkdir -p "$dir" "$fidir"
  cat $JITPARTS/jit-spec.tgz.part-* | tar xzf - -C "$dir" --exclude='flashinfer' --exclude='flashinfer/*'
  cat $JITPARTS/jit-spec.tgz.part-* | tar xzf - -C "$fidir" --wildcards 'flashinfer/*' --strip-components=1 2>/dev/null || true
  echo "jit-unpack-spec: $(cat $JITPARTS/jit-spec.tgz.part-* | tar tzf - | grep -v '^flashinfer' | cut -d/ -f1-2 | sort -u | tr '\n' ' ')into $dir; FlashInfer's workspace into $fidir"
  ;;
jit-unpack-local)
  dir=${2:?usage: device.sh jit-unpack-local DIR}
  if ! have_set jit-local; then
    echo "jit-unpack-local: no complete set of jit-local pieces in $JITPARTS: nothing to adopt"; exit 0
  fi
  mkdir -p "$dir" && cat $JITPARTS/jit-local.tgz.part-* | tar xzf - -C "$dir"
  echo "jit-unpack-local: $(cd "$dir" && find . -name '*.so' | sed 's,^\./,,' | tr '\n' ' ')($(head -1 "$dir/BUILT_WITH" 2>/dev/null)) into $dir"
  ;;
*) echo "unknown step $step"; exit 2 ;;
esac
