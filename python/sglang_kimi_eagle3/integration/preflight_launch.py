"""Hook: run every preflight check while launch_server resolves its arguments; abort on errors.

Upstream target: SGLang's resolution step `handle_speculative_decoding`, through its plugin API
  `sglang.srt.arg_groups.resolution_hooks.register_resolution_hook` (sglang 0.5.23
  arg_groups/resolution_hooks.py; the step runs in arg_groups/pipeline.py after attention-backend
  resolution). Resolution runs in the main process inside `ServerArgs.resolve_once()`, the first thing
  `run_server` / `Engine` do - before any scheduler process starts or any weight is read.
Why: SGLang swallows exceptions raised by plugins at load time, but an exception raised from a
  resolution step propagates out of resolve_once() and stops the launch. One run reports every
  problem instead of one per multi-minute attempt.
How: call the built-in step (so SGLang's own validation runs), catch its error, then build a
  Deployment from the record and run preflight. Also where the `cap` context policy lowers the served
  context (declare_resolution(context_length=...)), since only the main process can do that for
  every later reader. SGLANG_KIMI_EAGLE3_PREFLIGHT=on (default) | warn | off.
Remove when: never; this is the product.
"""

from __future__ import annotations

import os

from .. import hookstatus, logger
from ..errors import UserError
from ..preflight import GpuTarget, has_errors, run_checks, summary

NAME = "preflight_launch"
STEP = "handle_speculative_decoding"
TARGET = f"sglang.srt.arg_groups.resolution_hooks:{STEP}"
ENV_MODE = "SGLANG_KIMI_EAGLE3_PREFLIGHT"
MODES = ("on", "warn", "off")

# Set by the `check` command: collect findings here instead of logging/raising.
COLLECT: dict | None = None


class PreflightFailed(ValueError):
    """Raised from SGLang's argument resolution: the launch stops before any weight loads."""


def preflight_mode() -> str:
    mode = os.environ.get(ENV_MODE, "on").strip().lower() or "on"
    if mode not in MODES:
        raise UserError(f"{ENV_MODE}={mode!r} is not one of {'|'.join(MODES)}")
    return mode


def install() -> None:
    from sglang.srt.arg_groups.resolution_hooks import _HOOKS, register_resolution_hook

    if _preflight_step in _HOOKS.get(STEP, ()):
        return
    register_resolution_hook(STEP)(_preflight_step)
    mode = os.environ.get(ENV_MODE, "on")
    hookstatus.record(NAME, TARGET, "applied", f"resolution-step wrapper, mode {mode}")


def _local_gpu() -> GpuTarget:
    try:
        from sglang.srt.runtime_context import get_platform

        sm = int(get_platform().device_sm or 0)
        if sm:
            return GpuTarget(f"sm{sm}", sm, "local GPU")
    except Exception:
        pass
    return GpuTarget("sm90 (assumed)", 90, "assumed: no local GPU detected")


def _apply_cap(server_args) -> str | None:
    """`cap`: lower the served context to the draft's length for every later reader."""
    from sglang.srt.arg_groups.overrides import declare_resolution, resolving_view

    from ..configs import read_config
    from ..policy.context import decide, resolve_policy
    from .cli_flag import policy_of
    from .preflight_inputs import local_config_dir

    cfg = resolving_view(server_args)
    if not cfg.speculative_draft_model_path or resolve_policy(policy_of(server_args)) != "cap":
        return None
    target = read_config(local_config_dir(cfg.model_path, "--model-path"))
    draft = read_config(local_config_dir(cfg.speculative_draft_model_path, "--speculative-draft-model-path"))
    dec = decide(target_len=cfg.context_length or target.derived_context, draft_len=draft.derived_context, policy="cap")
    if dec.action != "cap":
        return None
    declare_resolution(server_args, "sglang-kimi-eagle3.context_policy.cap", context_length=dec.serve_len)
    server_args._model_config = None  # SGLang memoises the target's ModelConfig; rebuild it at the capped length
    return dec.explanation


def _preflight_step(server_args, previous) -> None:
    collecting = COLLECT is not None
    mode = "on" if collecting else preflight_mode()
    if mode == "off":
        return previous(server_args)
    sglang_error = None
    try:
        previous(server_args)
    except Exception as exc:  # SGLang's own refusal: report it with everything else
        sglang_error = exc
    try:
        cap_note = None if sglang_error else _apply_cap(server_args)
        from .preflight_inputs import build_deployment

        gpu = COLLECT.get("gpu") if collecting else _local_gpu()
        dep = build_deployment(server_args, gpu, sglang_error=str(sglang_error) if sglang_error else None)
        findings = run_checks(dep)
    except UserError as exc:
        if collecting:
            raise  # `check`: unusable input, one line, exit 2
        if sglang_error:
            raise sglang_error
        raise PreflightFailed(f"sglang-kimi-eagle3 preflight: {exc}") from None
    if collecting:
        COLLECT.update(findings=findings, deployment=dep, sglang_error=sglang_error)
        if sglang_error:
            raise sglang_error
        return None
    log = logger()
    from .registry import refresh

    log.info("hooks: %s", "; ".join(f"{r.name}={r.state}" for r in refresh()))
    if cap_note:
        log.info("draft context policy: %s", cap_note)
    lines = [f.one_line() for f in findings]
    log.info("preflight (%s, %s): %s\n  %s", dep.gpu.name, dep.gpu.how, summary(findings), "\n  ".join(lines))
    if has_errors(findings) and mode == "on":
        errors = [f.one_line() for f in findings if f.severity == "error"]
        raise PreflightFailed(f"sglang-kimi-eagle3 preflight found {len(errors)} error(s); nothing was loaded. "
                              f"Fix them, or set {ENV_MODE}=warn to start anyway:\n  " + "\n  ".join(errors))
    if sglang_error:
        raise sglang_error
