"""Shared test helpers: fresh SGLang processes, bundled config paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import warm_python

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "python" / "sglang_kimi_eagle3" / "profiles"
KIMI_K25 = PROFILES / "kimi-k2.5"
KIMI_K2 = PROFILES / "kimi-k2-instruct"
AQ_K2_DRAFT = PROFILES / "aq-medai" / "kimi-k2-eagle3"
AQ_K25_DRAFT = PROFILES / "aq-medai" / "kimi-k25-eagle3"
LLAMA_8B = PROFILES / "llama-3.1-8b-instruct"
LLAMA_8B_DRAFT = PROFILES / "llama-3.1-8b-eagle3"


def llama_eagle3_argv(port: int) -> list[str]:
    """launch_server flags of the bundled Llama-3.1-8B + EAGLE-3 pair (steps 3 / topk 2 / 4 tokens, CUDA): the
    launch the scheduler-path tests resolve with SGLang's own prepare_server_args."""
    return ["--model-path", str(LLAMA_8B), "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
            str(LLAMA_8B_DRAFT), "--speculative-num-steps", "3", "--speculative-eagle-topk", "2",
            "--speculative-num-draft-tokens", "4", "--device", "cuda", "--port", str(port)]

# Environment every subprocess starts from: no inherited plugin or policy settings.
_STRIP = ("SGLANG_KIMI_EAGLE3_CONTEXT_POLICY", "SGLANG_KIMI_EAGLE3_PREFLIGHT",
          "SGLANG_KIMI_EAGLE3_KERNELS", "SGLANG_KIMI_EAGLE3_WARMUP", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "SGLANG_PLUGINS",
          "SGLANG_IS_IN_CI")


def clean_env(**overrides: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _STRIP}
    env.update(overrides)
    return env


def pythonpath(*first) -> str:
    """`first` ahead of the inherited PYTHONPATH (kept: on a device box it carries SGLang's dependencies)."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([*map(str, first), *inherited])


warm_python.prestart(clean_env(), str(ROOT))  # the first SGLang subprocess of the session finds it warm


def python(args: list[str], timeout: float = 300, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    """`python ARGS` in a new process, as subprocess.run(..., capture_output=True, text=True): `-c CODE` and
    `-m MODULE` start from the state launch_server reaches its load_plugins() in, SGLang imported, no plugin
    loaded (test/warm_python.py forks them from one warm interpreter on a CPU box), anything else plainly."""
    return warm_python.run([sys.executable, *args], env=clean_env() if env is None else env,
                           cwd=str(cwd or ROOT), timeout=timeout)


def run_python(code: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh process (so SGLang's load_plugins() really runs once, from scratch)."""
    return python(["-c", textwrap.dedent(code)], timeout=timeout, env=clean_env(**env))


# Prepended to child code that emulates a launch on SM90 (`check --for-gpu sm90`, SGLang's resolution under
# override_platform): preflight's GPU is that same emulated SM90 on every machine. On an 80-GB H100 Kimi-K2.5's
# 72 GiB per GPU at TP 8 is a memory error (H100, 2026-12-06: the context-policy and check-agreement cases failed
# there), which is not what those cases test; the memory check has tests of its own.
EMULATED_SM90_PREFLIGHT = """
import sglang_kimi_eagle3.integration.preflight.launch as _preflight_launch
from sglang_kimi_eagle3.preflight import GpuTarget as _GpuTarget
_preflight_launch.local_gpu = lambda assumed="assumed: the tests' emulated SM90": _GpuTarget(
    "sm90 (assumed: H100/H200)", 90, assumed)
"""


def run_json(code: str, timeout: float = 240, **env: str):
    """Run `code`, which must print one JSON document as its last stdout line; return it parsed."""
    cp = run_python(code, timeout=timeout, **env)
    assert cp.returncode == 0, f"subprocess failed ({cp.returncode}):\n{cp.stdout[-3000:]}\n{cp.stderr[-6000:]}"
    return json.loads(cp.stdout.strip().splitlines()[-1])


def edited_copy(src: Path, dst_dir: Path, **changes) -> Path:
    """Copy a bundled config folder and change top-level (or 'text_config.'-prefixed) fields.

    A value of `...` (Ellipsis) deletes the field.
    """
    data = json.loads((src / "config.json").read_text())
    for key, val in changes.items():
        node, k = data, key
        if "__" in key:  # text_config__max_position_embeddings -> data["text_config"]["max_position_embeddings"]
            *parents, k = key.split("__")
            for p in parents:
                node = node[p]
        if val is ...:
            node.pop(k, None)
        else:
            node[k] = val
    dst_dir.mkdir(parents=True, exist_ok=True)
    (dst_dir / "config.json").write_text(json.dumps(data, indent=1))
    return dst_dir


def triton_source(kernel, *args):
    """The ASTSource `triton.compile` gets for a launch of `kernel` with these arguments: Triton's own binder and
    argument packing for the H200's target (sm_90), on CPU tensors (only their data pointers, dtypes and ints
    matter to the specialization). Under TRITON_INTERPRET=1 (the CPU run) the same function as a JITFunction."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    if not hasattr(kernel, "signature"):
        kernel = triton.runtime.jit.JITFunction(kernel.fn, **kernel.kwargs)
    backend = make_backend(GPUTarget("cuda", 90, 32))
    bound, spec, opts = create_function_from_signature(kernel.signature, kernel.params, backend)(*args)
    _, signature, constexprs, attrs = kernel._pack_args(backend, {}, bound, spec, opts)
    return ASTSource(kernel, signature, constexprs, attrs)


def run_check(*args, **env):
    """`sglang-kimi-eagle3 check ARGS` in a subprocess (a clean environment plus `env`, 200 columns)."""
    return python(["-m", "sglang_kimi_eagle3.cli", "check", *args], timeout=300, env=clean_env(COLUMNS="200", **env))


def check_findings(cp) -> list[dict]:
    """The findings of a `check --json` run."""
    return json.loads(cp.stdout)["findings"]

