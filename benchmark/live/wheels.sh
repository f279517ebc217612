#!/usr/bin/env bash
# Download (here, with network) everything the lent H200 machine needs to serve SGLang 0.5.23, trim it,
# and split it into parts of at most 36 MiB for carry.sh. Run from the project root; writes .whl/ (ignored).
#   benchmark/live/wheels.sh            -> .whl/big, .whl/small, .whl/parts/part-NNN + .whl/parts/MANIFEST
# The device image has torch 2.11 / triton 3.6 / Python 3.12 and no network; SGLang 0.5.23 pins torch 2.14.1
# (which needs NCCL 2.30.7's ncclCommResume), triton 3.8, sglang-kernel 0.4.10, flashinfer 0.7.2,
# transformers 5.19.0. The pure-Python rest is what benchmark/live/closure.py found missing there.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
W=.whl; mkdir -p $W/big $W/small $W/parts
plat=(--platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux_2_18_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" -d "$@"; }
dl $W/big torch==2.14.1 triton==3.8.0 sglang-kernel==0.4.10 flashinfer-python==0.7.2 sglang==0.5.23 \
  transformers==5.19.0 torchvision==0.29.1 nvidia-cutlass-dsl==4.8.0 nvidia-cutlass-dsl-libs-base==4.8.0 \
  nvidia-cutlass-dsl-libs-core==4.8.0 nvidia-cutlass-dsl-libs-cu13==4.8.0 sgl-flash-mla==1.0.0
# (CuTe DSL: sglang/srt/layers/dual_gemm.py imports `cutlass` when it builds any Llama MLP on CUDA, the EAGLE-3
#  drafter's included; first seen missing on the H200 2026-11-30. Its .pth is not read from a --target folder:
#  device.sh env puts nvidia_cutlass_dsl/dsl_packages on PYTHONPATH.)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d $W/big nvidia-nccl-cu13==2.30.7
# closure.py's 'needed' list (versions as in the project venv) + python-multipart
dl $W/small orjson==3.13.0 pybase64==1.5.1 starlette==1.10.0 msgspec==0.23.0 pydantic_core==2.50.5 pyzmq==27.3.0 \
  ipython==9.18.1 traitlets==5.16.1 pydantic==2.14.4 typing-inspection==0.4.5 dill==0.4.1 fastapi==0.165.0 \
  setproctitle==1.3.8 uvicorn==0.54.0 annotated-types==0.8.0 apache-tvm-ffi==0.1.11 compressed-tensors==0.18.0 \
  opentelemetry-api==1.45.2 loguru==0.7.3 gguf==0.19.0 openai==2.8.0 sniffio==1.3.1 distro==1.9.0 \
  partial-json-parser==0.2.1.1.post7 jsonschema==4.26.0 referencing==0.37.0 rpds-py==2026.9.1 \
  jsonschema-specifications==2025.9.1 xgrammar==0.2.7 soundfile==0.13.1 cffi==2.1.1 python-multipart==0.0.34 \
  ipython-pygments-lexers decorator jedi parso matplotlib-inline pexpect ptyprocess prompt_toolkit wcwidth \
  stack_data executing asttokens pure_eval pycparser jiter importlib_metadata
# sglang-kernel without FA3 (flash_ops, 1.1 GB), FlashMLA, InfLLM and the sm100 build: all imported under
# try/except; the triton attention backend needs none of them
k=$(ls $W/big/sglang_kernel-0.4.10-*.whl)
if unzip -l "$k" | grep -q flash_ops; then
  t=$(mktemp -d); (cd "$t" && unzip -q "$OLDPWD/$k" && rm -rf sgl_kernel/flash_ops.abi3.so sgl_kernel/flashmla_ops.abi3.so \
    sgl_kernel/infllm_ops*.so sgl_kernel/sm100 && sed -i '/flash_ops\|flashmla_ops\|infllm_ops\|sgl_kernel\/sm100/d' \
    sglang_kernel-0.4.10.dist-info/RECORD && rm -f "$OLDPWD/$k" && zip -q -r "$OLDPWD/$k" .); rm -rf "$t"
fi
# one stream of every wheel, split into parts; the manifest lists names, sizes and md5s
rm -f $W/parts/part-* $W/parts/MANIFEST
(cd $W && ls big/*.whl small/*.whl > parts/FILES && tar cf - $(cat parts/FILES)) | split -b 36M -d -a 3 - $W/parts/part-
(cd $W/parts && md5sum part-* > MANIFEST)
du -sh $W/big $W/small; ls $W/parts | wc -l
