"""The only subpackage that imports sglang: one hook module per concern, one status table.

Layout (floors: each imports only the ones above it):
  launch_record, dispatch, registry, launch_flags, upstream_has   leaves: what every hook and command shares
  upstream_kernels, adaptive_check                                shims: SGLang's own code, loaded for our use
  preflight/   SGLang's view of a launch made into a preflight `Deployment` (inputs, sglang_facts,
               gpu_memory) and preflight run at launch (launch)
  hooks/       one module per hook (HOOK_MODULES below), each with `install()`
  plugin.py    `register()`: SGLang's plugin entry point

Each module in HOOK_MODULES (integration/hooks/<name>.py) exposes `install() -> None`, which queues its hook(s) with SGLang
(HookRegistry or a resolution-step hook) and records every hook's row in `hookstatus`. Modules are
imported lazily so that `register()` stays cheap and one broken hook cannot stop the others.
"""

from __future__ import annotations

import importlib

from ..status import hookstatus

# Order matters only for readability of the status table.
HOOK_MODULES = (
    "context_policy",  # the flag + draft/target context-length reconciliation (issue 2)
    "delegation",  # KimiK25ForConditionalGeneration EAGLE-3 delegation guarantee (issue 2)
    "launch_step",  # gate, env validation, cap, fail-fast preflight at launch (issues 3, 10)
    "adaptive_control",  # dwell/hysteresis/probe back-off in SGLang's adaptive slots of the tables we write
    "draft_head_kernels",  # Triton lm_head GEMV / draft top-k (issue 4)
    "verify_kernels",  # Triton tree verification (issue 5)
    "offstate_attention",  # the steps-0 off-state's one-token verify through the Triton decode kernels
    "deferred_extend",  # the default (OFFSTATE_EXTEND=defer): the off-state's draft extend every K steps, exactly
    "step_clock",  # per decode step: wall, launch (verify, draft extend), GPU wait: host- or GPU-bound, while serving
    "kernel_warmup",  # compile every reachable kernel variant before serving; queued before runtime_status: runs first
    "traffic_warmup",  # `kimi_eagle3` in SGLang's --warmups: real request batches before the server accepts traffic
    "runtime_status",  # the status table after draft CUDA-graph capture, and the status file (issue 10)
    "metrics",  # the hook counters on SGLang's /metrics (--enable-metrics); runs last after capture
    "serving_compiles",  # Triton compiles after the server is ready, per kernel (SGLang's and ours), in the table
)


def install_all() -> None:
    for name in HOOK_MODULES:
        try:
            mod = importlib.import_module(f"{__name__}.hooks.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.hooks.{name}":
                hookstatus.record(name, "-", "skipped", "not built in this version")
                continue
            hookstatus.record(name, "-", "failed", f"import failed: {type(exc).__name__}: {exc}")
            continue
        except Exception as exc:
            hookstatus.record(name, "-", "failed", f"import failed: {type(exc).__name__}: {exc}")
            continue
        try:
            mod.install()
        except Exception as exc:  # SGLang would swallow it; we record it instead
            hookstatus.record(name, "-", "failed", f"{type(exc).__name__}: {exc}")


def refresh_status():
    """Confirm queued hooks against the live attributes (see registry.refresh)."""
    from .registry import refresh

    return refresh()
