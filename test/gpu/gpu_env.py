"""What the GPU suite runs against, from the environment (docs/gpu-ci.md has the operator's view).

  GPU_CI_TARGET_MODEL     target model path (required), e.g. /models/Kimi-K2.5 or /models/Llama-3.1-8B-Instruct
  GPU_CI_DRAFT_MODEL      EAGLE-3 drafter path (required)
  GPU_CI_TP               tensor-parallel size (default 1; 8 for Kimi-K2.5)
  GPU_CI_MIN_TAU          mean acceptance length the drafter must reach (the tau test is skipped without it)
  GPU_CI_SPEC_ARGS        speculative flags (default: EAGLE3, steps 3, topk 1, 4 draft tokens)
  GPU_CI_EXTRA_ARGS       more launch_server flags for both servers (e.g. --trust-remote-code --mem-fraction-static 0.85)
  GPU_CI_PORT             port of the server under test (default 30100)
  GPU_CI_STARTUP_TIMEOUT  seconds to wait for a server (default 1800: Kimi-K2.5 loads ~600 GB)
  GPU_CI_MAX_NEW_TOKENS   tokens per prompt (default 64)
  GPU_CI_CATEGORIES       bundled prompt categories (default chat,code,math)
  GPU_CI_MATCH_MIN        fraction of prompts whose greedy outputs must match exactly (default 1.0)
  GPU_CI_ALLOW_SKIPPED    hooks allowed to be skipped for other reasons than "upstream already ..." (default none)
  GPU_CI_LOG_DIR          where server logs go (default a temporary folder)
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field

DEFAULT_SPEC_ARGS = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
                     "--speculative-num-draft-tokens 4")


@dataclass(slots=True)
class GpuEnv:
    target: str
    draft: str
    tp: int = 1
    min_tau: float | None = None
    spec_args: list[str] = field(default_factory=lambda: shlex.split(DEFAULT_SPEC_ARGS))
    extra_args: list[str] = field(default_factory=list)
    port: int = 30100
    startup_timeout: float = 1800.0
    max_new_tokens: int = 64
    categories: list[str] = field(default_factory=lambda: ["chat", "code", "math"])
    match_min: float = 1.0
    allow_skipped: set[str] = field(default_factory=set)
    log_dir: str | None = None


def gpu_count() -> int:
    """GPUs visible to this process (nvidia-smi; honours CUDA_VISIBLE_DEVICES), 0 when none."""
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    n = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    return min(n, len([v for v in vis.split(",") if v.strip()])) if vis is not None else n


@functools.cache
def from_env() -> tuple[GpuEnv | None, str]:
    """(settings, '') or (None, the reason to skip)."""
    e = os.environ
    target, draft = e.get("GPU_CI_TARGET_MODEL"), e.get("GPU_CI_DRAFT_MODEL")
    if not target or not draft:
        return None, "GPU suite: set GPU_CI_TARGET_MODEL and GPU_CI_DRAFT_MODEL (docs/gpu-ci.md)"
    env = GpuEnv(target, draft, tp=int(e.get("GPU_CI_TP", "1")),
                 min_tau=float(e["GPU_CI_MIN_TAU"]) if e.get("GPU_CI_MIN_TAU") else None,
                 spec_args=shlex.split(e.get("GPU_CI_SPEC_ARGS", DEFAULT_SPEC_ARGS)),
                 extra_args=shlex.split(e.get("GPU_CI_EXTRA_ARGS", "")), port=int(e.get("GPU_CI_PORT", "30100")),
                 startup_timeout=float(e.get("GPU_CI_STARTUP_TIMEOUT", "1800")),
                 max_new_tokens=int(e.get("GPU_CI_MAX_NEW_TOKENS", "64")),
                 categories=[c for c in e.get("GPU_CI_CATEGORIES", "chat,code,math").split(",") if c],
                 match_min=float(e.get("GPU_CI_MATCH_MIN", "1.0")),
                 allow_skipped={s for s in e.get("GPU_CI_ALLOW_SKIPPED", "").split(",") if s},
                 log_dir=e.get("GPU_CI_LOG_DIR"))
    n = gpu_count()
    if n == 0:
        return None, "GPU suite: no CUDA device visible (nvidia-smi -L found none)"
    if n < env.tp:
        return None, f"GPU suite: GPU_CI_TP={env.tp} needs {env.tp} GPUs, {n} visible"
    return env, ""
