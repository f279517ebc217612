"""Preflight at launch: build the Deployment from SGLang's resolved record, run every check, report.

Called by the one launch-time step (launch_step.py) for EAGLE/EAGLE3 launches with a draft model,
after SGLang's own resolution and the context policy's main-process part. SGLANG_KIMI_EAGLE3_PREFLIGHT:
on (default) refuses the launch on errors (PreflightFailed, before any weight loads), warn logs them,
off skips. Preflight only reports: it changes nothing on the record.

`check` runs the same function inside `collecting(gpu, labels)`: findings are collected into the
box it yields (state in a ContextVar, reset on every exit path) instead of logged or raised.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from contextvars import ContextVar

from ...base import ENV_PREFLIGHT, env_choice, logger
from ...errors import UserError
from ...preflight import Finding, GpuTarget, has_errors, run_checks, summary

ENV_MODE = ENV_PREFLIGHT
_COLLECT: ContextVar[dict | None] = ContextVar("sglang_kimi_eagle3_collect", default=None)


class PreflightFailed(ValueError):
    """Raised from SGLang's argument resolution: the launch stops before any weight loads."""


def describe_error(exc: BaseException) -> str:
    """`Type: message`; a bare one (SGLang's resolution asserts with no message: `assert tp % attn_dp == 0`) gets the
    failing source line and where it is, so the finding names the condition to meet."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__) if not str(exc).strip() else None
    if not frames:
        return text
    last = frames[-1]
    i = last.filename.replace("\\", "/").rfind("sglang/")
    where = f"{last.filename[i:] if i >= 0 else os.path.basename(last.filename)}:{last.lineno} ({last.name})"
    return f"{type(exc).__name__} at {where}" + (f": {last.line.strip()}" if (last.line or "").strip() else "")


def preflight_mode() -> str:
    return env_choice(ENV_PREFLIGHT)


@contextlib.contextmanager
def collecting(gpu: GpuTarget, labels: dict[str, str] | None = None):
    """Within: the launch step collects into the yielded dict (findings, deployment, sglang_error)."""
    box = {"gpu": gpu, "labels": dict(labels or {})}
    token = _COLLECT.set(box)
    try:
        yield box
    finally:
        _COLLECT.reset(token)


def collector() -> dict | None:
    """The `check` box of the current context, or None at a real launch."""
    return _COLLECT.get()


def local_gpu(assumed: str = "assumed: no local GPU detected") -> GpuTarget:
    """The one local-GPU detector (`check` without --for-gpu, preflight at launch): this machine's CUDA
    device (ops.tables.current_device), else an SM90 (H100/H200) with `assumed` saying why."""
    from ...ops.tables import current_device

    name, cc = current_device()
    if cc is not None:
        return GpuTarget(name, 10 * cc[0] + cc[1], "local GPU")
    return GpuTarget("sm90 (assumed: H100/H200)", 90, assumed)


def runtime_findings(server_args) -> list[Finding]:
    """Launch shapes where this plugin's runtime hooks do not reach (not preflight errors: warnings)."""
    from sglang.srt.arg_groups.overrides import resolving_view

    cfg, out = resolving_view(server_args), []
    if getattr(cfg, "use_ray", False):
        out.append(Finding("warning", "plugin", "--use-ray: SGLang's Ray scheduler actors never call load_plugins(), "
                           "so none of this plugin's scheduler-side hooks (context policy on the draft, kernels, "
                           "runtime status) exist there; only this launch-time step ran",
                           "scheduler processes that load plugins (the default multiprocessing launch)",
                           "drop --use-ray, or keep it knowing the draft context policy and kernels do not apply"))
    if getattr(cfg, "enable_multi_layer_eagle", False):
        out.append(Finding("warning", "plugin", "--enable-multi-layer-eagle: SGLang runs MultiLayerEagleWorkerV2, "
                           "which never calls draft_topk1_postprocess, renorm_draft_probs or the EAGLE v2 worker's "
                           "fast_topk: the draft_topk1 / draft_probs / draft_worker_topk hooks do not apply "
                           "(context policy, draft_lm_head and verify hooks still do)",
                           "EAGLEWorkerV2 for the draft-head top-k hooks",
                           "drop --enable-multi-layer-eagle to use them; nothing to fix otherwise"))
    out += _deferral_slots(cfg, getattr(server_args, "max_running_requests", None))
    return out


def _deferral_slots(cfg, slots) -> list[Finding]:
    """An operator's --max-running-requests bounds where the off-state defers its draft extend: a flush carries at most
    the request slots' rows, so a step of more than half the slots is extended at once (integration/hooks/
    deferred_extend.py). Live on an H100 (2026-12-06, 128 slots at c 128) that step paid SGLang's extend every step,
    2.3 % of plain decoding's GPU time. An info line, for the operator's own value only (`slots`, as given; SGLang's
    resolved default is not it): nothing is wrong with the launch."""
    from ...base import ENV_ADAPTIVE, ENV_OFFSTATE_EXTEND

    if not isinstance(slots, int) or slots < 1 or getattr(cfg, "speculative_eagle_topk", None) not in (None, 1):
        return []
    if env_choice(ENV_OFFSTATE_EXTEND) != "defer":
        return []
    if env_choice(ENV_ADAPTIVE) != "on" and not getattr(cfg, "speculative_adaptive", False):
        return []  # no off-state to defer in
    return [Finding("info", "request_slots",
                    f"--max-running-requests {slots}: the off-state defers its draft extend (a one-layer EAGLE-3 "
                    f"drafter) up to {slots // 2} running requests; above that every step extends at once, as a "
                    f"deferred flush carries at most the request slots' rows",
                    "request slots at least twice the batch the server runs (SGLang's own default: 2048-4096 where "
                    "memory allows)",
                    "leave --max-running-requests unset, or set it to twice your peak batch or more")]


def report(server_args, sglang_error: Exception | None) -> str:
    """Run preflight for a launch; returns the mode used. Raises PreflightFailed (mode on, errors)."""
    box = collector()
    mode = "on" if box is not None else preflight_mode()
    if mode == "off":
        return mode
    from .inputs import build_deployment

    gpu = box["gpu"] if box is not None else local_gpu()
    labels = box["labels"] if box is not None else {}
    err = describe_error(sglang_error) if sglang_error is not None else None
    try:
        dep = build_deployment(server_args, gpu, sglang_error=err, labels=labels)
        findings = run_checks(dep) + runtime_findings(server_args)
    except UserError as exc:
        if box is None and mode == "warn":
            logger().warning("preflight could not run (%s=warn, the launch goes on): %s", ENV_MODE, exc)
            return mode
        if box is not None or sglang_error is None:
            raise  # unusable input of our launch: one line (check: exit 2; launch: the traceback's last line)
        raise sglang_error from None
    if box is not None:
        box.update(findings=findings, deployment=dep, sglang_error=sglang_error)
        return mode
    lines = [f.one_line() for f in findings]
    logger().info("preflight (%s, %s): %s\n  %s", dep.gpu.name, dep.gpu.how, summary(findings), "\n  ".join(lines))
    if has_errors(findings) and mode == "on":
        errors = [f.one_line() for f in findings if f.severity == "error"]
        raise PreflightFailed(f"sglang-kimi-eagle3 preflight found {len(errors)} error(s); nothing was loaded. "
                              f"Fix them, or set {ENV_MODE}=warn to start anyway:\n  " + "\n  ".join(errors))
    return mode
