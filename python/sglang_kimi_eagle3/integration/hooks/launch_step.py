"""Hook: the one launch-time step - gate, our variables, the context policy, preflight.

Upstream target: SGLang's resolution step `handle_speculative_decoding`, through its plugin API
  `sglang.srt.arg_groups.resolution_hooks.register_resolution_hook` (sglang 0.5.23
  arg_groups/resolution_hooks.py; the step runs in arg_groups/pipeline.py:306). Resolution runs in
  the main process inside `ServerArgs.resolve_once()`, the first thing `run_server` / `Engine` do -
  before any scheduler process starts or any weight is read.
Why: SGLang swallows exceptions raised by plugins at load time, but an exception raised from a
  resolution step propagates out of resolve_once() and stops the launch.
How: where SGLang has its own --speculative-draft-context-policy and the operator gave none, hand it this
plugin's default first (context_policy.hand_default_to_sglang; SGLang's step resolves the policy). Then
run SGLang's own step (keeping its error, if any), then:
  1. gate: unless the launch is EAGLE or EAGLE3 with a draft model (`is_our_launch`), return exactly
     what SGLang's step did - nothing read, nothing changed, nothing refused;
  2. our variables: a garbage SGLANG_KIMI_EAGLE3 / _KERNELS / _PREFLIGHT / _CONTEXT_POLICY value
     raises the UserError that names it (this is how a bad value aborts a launch cleanly);
  3. the context policy's main-process part (context_policy.resolve_launch: `cap`; SGLang's own step
     did it where SGLang has the flag), whatever the preflight mode;
  0. before SGLang's step, adaptive steps by default (adaptive_default.apply): for chain launches (topk 1)
     without the operator's own adaptive flags, --speculative-adaptive with a table from the planner's costs
     (SGLANG_KIMI_EAGLE3_ADAPTIVE=off keeps SGLang's choice);
  3b. the traffic warm-up (traffic_warmup.apply_to_launch): `kimi_eagle3` joins --warmups unless
     SGLANG_KIMI_EAGLE3_WARMUP=off;
  4. preflight (preflight_launch.report): SGLANG_KIMI_EAGLE3_PREFLIGHT=on refuses on errors, warn
     logs them, off skips. Preflight only reports.
  A refusal of ours (UserError, PreflightFailed) propagates out of resolve_once(); when nothing catches
  it, launch_server prints it as one `sglang-kimi-eagle3: error: ...` message instead of a traceback.
Remove when: never; this is the product.
"""

from __future__ import annotations

import os
import sys

from ...base import env_errors
from ...errors import UserError
from ...status import hookstatus
from ..launch_record import is_our_launch, mark, mark_of
from . import runtime_status, traffic_warmup

NAME = "launch_step"
STEP = "handle_speculative_decoding"
TARGET = f"sglang.srt.arg_groups.resolution_hooks:{STEP}"


def install(env_only: bool = False) -> None:
    """Add the step (idempotent). env_only: the plugin is off because a variable is garbage; the
    step then only refuses our launches with that error (register() could not raise it)."""
    from sglang.srt.arg_groups.resolution_hooks import _HOOKS, register_resolution_hook

    if _step not in _HOOKS.get(STEP, ()):
        register_resolution_hook(STEP)(_step)
    runtime_status.on_publish(confirm_in_scheduler)
    hookstatus.record(NAME, TARGET, "registered", "runs at the next argument resolution (resolve_once) in this process"
                      + ("; refuses EAGLE/EAGLE3 launches: bad environment" if env_only else ""))


def confirm_in_scheduler() -> None:
    """The step runs in the main process only; its mark on the record tells a scheduler whether it ran."""
    from sglang.srt.runtime_context import get_server_args

    row = hookstatus.get(NAME)
    if row is None or row.state in ("skipped", "failed"):
        return
    done = mark_of(get_server_args())
    if done:
        hookstatus.record(NAME, TARGET, "applied", done)
    else:
        hookstatus.record(NAME, TARGET, "failed", "SGLang resolved this launch without this plugin's launch step "
                          "(plugins loaded after resolve_once?): no preflight ran and `cap` was not applied")


def _step(server_args, previous) -> None:
    sglang_error = None
    adaptive = None
    if is_our_launch(server_args) and not env_errors():  # a bad variable is refused below, after SGLang's step
        from .context_policy import hand_default_to_sglang

        hand_default_to_sglang(server_args)  # only where SGLang has its own flag (its step resolves it)
        adaptive = _adaptive_default(server_args)  # SGLang's step resolves the adaptive config we declare
    try:
        previous(server_args)
    except Exception as exc:  # SGLang's own refusal: ours to report only for our launches
        sglang_error = exc
    if not is_our_launch(server_args):
        hookstatus.record(NAME, TARGET, "applied", "ran; not an EAGLE/EAGLE3 launch with a draft model: passed through")
        traffic_warmup.not_our_launch()  # records its row; --warmups untouched
        if sglang_error is not None:
            raise sglang_error
        return None
    bad = env_errors()
    if bad:
        raise _without_traceback(UserError(bad[0] if len(bad) == 1 else "; ".join(bad)))
    from ..preflight import launch as preflight_launch
    from . import context_policy, deferred_extend

    upstream_defer = None
    try:
        if sglang_error is None:
            context_policy.resolve_launch(server_args)
            traffic_warmup.apply_to_launch(server_args)  # --warmups gains `kimi_eagle3` (SGLANG_KIMI_EAGLE3_WARMUP)
            upstream_defer = deferred_extend.apply_upstream_default()  # SGLang with upstream PR 05: its variable
        mode = preflight_launch.report(server_args, sglang_error)
    except (UserError, preflight_launch.PreflightFailed) as exc:
        raise _without_traceback(exc)
    done = f"ran in the main process for this EAGLE/EAGLE3 launch: context policy resolved, preflight {mode}"
    if adaptive:
        done += f"; {adaptive}"
    if upstream_defer:
        done += f"; {upstream_defer}"
    mark(server_args, done)  # bookkeeping attribute: pickled to the schedulers, read by confirm_in_scheduler
    hookstatus.record(NAME, TARGET, "applied", done)
    if sglang_error is not None:
        raise sglang_error
    return None


def _adaptive_default(server_args) -> str:
    """adaptive_default.apply: a bad SGLANG_KIMI_EAGLE3_ADAPTIVE_PROFILE refuses the launch (UserError); anything
    else going wrong leaves SGLang's own choice and says so (our default never blocks a launch)."""
    from .. import adaptive_default

    try:
        return adaptive_default.apply(server_args)
    except UserError as exc:
        raise _without_traceback(exc)
    except Exception as exc:
        return f"adaptive steps: SGLang's choice kept (our table failed: {type(exc).__name__}: {exc})"


def _without_traceback(exc: Exception) -> Exception:
    """Our refusal of a launch reads as its message, not a traceback: if this very exception reaches the
    top of the main process uncaught (launch_server), print `sglang-kimi-eagle3: error: <message>`
    instead. Callers that catch it (Engine embedders, `check`) see the exception unchanged.
    SGLANG_KIMI_EAGLE3_DEBUG=1 keeps the traceback."""
    if os.environ.get("SGLANG_KIMI_EAGLE3_DEBUG"):
        return exc
    previous = sys.excepthook

    def hook(tp, value, tb):
        if value is exc:
            print(f"sglang-kimi-eagle3: error: {value}", file=sys.stderr)
        else:
            previous(tp, value, tb)

    sys.excepthook = hook
    return exc
