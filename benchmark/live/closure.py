"""Which distributions must travel to the device machine: import SGLang's serving modules here with every
top-level module blocked whose distribution the device image lacks (KINDS.md's package list) and that
we do not carry, and list the blocked ones.

    .venv/bin/python benchmark/live/closure.py [--carry NAME ...]   -> prints dist==version lines

Run in the project venv (it has SGLang's full pinned stack). The probe runs `python -S` over a folder
of symlinks to the allowed packages only, so a missing module is really missing (find_spec -> None,
the way SGLang's and transformers' availability checks see it). It adds what an import of a serving
module failed on and repeats; modules looked up but absent (guarded imports) are listed as 'optional'.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import sys
from pathlib import Path

# KINDS.md, "Python packages already there" (the device image 'cuda', read 2026-11-17)
IMAGE = """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft
pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl
zipp""".split()
# always carried (the serving stack itself, at SGLang's pins)
CARRIED = ["torch", "triton", "nvidia-nccl-cu13", "sglang", "sglang-kernel", "flashinfer-python", "transformers",
           "sglang-kimi-eagle3", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core",
           "nvidia-cutlass-dsl-libs-cu13", "sgl-flash-mla"]
MODULES = ["sglang.launch_server", "sglang.srt.entrypoints.http_server", "sglang.srt.entrypoints.engine",
           "sglang.srt.managers.scheduler", "sglang.srt.managers.tokenizer_manager",
           "sglang.srt.managers.detokenizer_manager", "sglang.srt.models.deepseek_v2", "sglang.srt.models.llama_eagle3",
           "sglang.srt.speculative.eagle_worker_v2", "sglang.srt.layers.attention.triton_backend",
           "sglang.srt.model_executor.model_runner", "sglang_kimi_eagle3.integration.hooks.runtime_status",
           "sglang.srt.layers.sampler",
           "sglang.srt.speculative.eagle_utils", "sglang.srt.model_loader.loader",
           "sglang.srt.managers.data_parallel_controller", "sglang.kernels.ops.speculative.spec_tree",
           "sglang_kimi_eagle3.commands.bench", "sglang_kimi_eagle3.cli", "flashinfer",
           # imported only when a model is built (LlamaMLP -> DualGemm), so a plain import misses it
           "sglang.kernels.ops.gemm.cutedsl_dual_gemm",
           # imported by eagle_worker_v2._capture_cuda_graphs after the draft graphs (H200 run 2, 2026-11-30)
           "sglang.srt.layers.attention.flashmla_backend"]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def allowed_site(extra: list[str], out: Path) -> dict[str, str]:
    """Symlink into `out` every top-level module (and dist-info) of this venv whose distribution the
    device has or we carry; returns {top-level module: distribution} of everything left out."""
    import shutil

    allowed = {norm(n) for n in IMAGE + CARRIED + extra}
    site = Path(md.distribution("sglang").locate_file(""))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    left_out = {}
    for top, dists in md.packages_distributions().items():
        ok = any(norm(d) in allowed for d in dists)
        if not ok:
            left_out[top] = dists[0]
            continue
        for cand in (site / top, site / f"{top}.py", *site.glob(f"{top}.*.so"), *site.glob(f"{top}.abi3.so")):
            if cand.exists() and not (out / cand.name).exists():
                (out / cand.name).symlink_to(cand)
    for info in site.glob("*.dist-info"):
        name = info.name.split("-")[0]
        if norm(name) in allowed:
            (out / info.name).symlink_to(info)
    for lib in site.glob("*.libs"):  # vendored shared libraries of wheels
        (out / lib.name).symlink_to(lib)
    return left_out


PROBE = r"""
import importlib, importlib.abc, json, sys
missing = []
class Last(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        missing.append(name)
        return None
sys.meta_path.append(Last())
failed = {}
for m in sys.argv[1].split(","):
    try:
        importlib.import_module(m)
    except BaseException as exc:
        failed[m] = [type(exc).__name__, str(exc)[:300], getattr(exc, "name", None)]
print("@@" + json.dumps({"failed": failed, "missing": sorted(set(missing))}))
"""


def probe(site: Path) -> dict:
    import json
    import os
    import subprocess

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    # as on the device: no .pth processing in a --target folder, so the CuTe DSL's path is explicit
    env["PYTHONPATH"] = f"{site}:{site / 'nvidia_cutlass_dsl' / 'dsl_packages'}:{root / 'python'}"
    cp = subprocess.run([sys.executable, "-S", "-c", PROBE, ",".join(MODULES)], capture_output=True, text=True,
                        env=env, timeout=900)
    line = [l for l in cp.stdout.splitlines() if l.startswith("@@")]
    if not line:
        raise SystemExit(f"probe printed nothing (exit {cp.returncode}):\n{cp.stderr[-3000:]}")
    return json.loads(line[-1][2:])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--carry", nargs="*", default=[], help="more distributions that travel")
    ap.add_argument("--max-rounds", type=int, default=40)
    a = ap.parse_args()
    carry = list(a.carry)
    site = Path("/tmp/closure-site")
    for _ in range(a.max_rounds):
        left_out = allowed_site(carry, site)
        r = probe(site)
        fatal = {v[2].split(".")[0] for v in r["failed"].values() if v[0] == "ModuleNotFoundError" and v[2]}
        new = sorted({left_out[t] for t in fatal if t in left_out} - set(carry))
        if not new:
            break
        print(f"needed: {' '.join(new)}", file=sys.stderr)
        carry += new
    for m, (t, msg, _n) in r["failed"].items():
        print(f"# FAILED {m}: {t}: {msg}")
    optional = sorted({left_out[n.split('.')[0]] for n in r["missing"] if n.split(".")[0] in left_out})
    for d in carry:
        print(f"needed   {d}=={md.version(d)}")
    for d in optional:
        print(f"optional {d}=={md.version(d)}")
    return 1 if r["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
