"""The ground floor every other module may import (pure: no sglang, no torch).

Versions, our logger, and the plugin's environment switches with their validation. A garbage value
of any of our variables is a `UserError` naming the variable and the accepted values; where it is
read at launch (the resolution step, integration/hooks/launch_step.py) that error stops the launch in the
main process, before any scheduler starts.
"""

from __future__ import annotations

import logging
import os
import sys
from functools import partial

from .errors import UserError

__version__ = "0.1.0"
TESTED_SGLANG = "0.5.23"

ENV_ENABLE = "SGLANG_KIMI_EAGLE3"
ENV_KERNELS = "SGLANG_KIMI_EAGLE3_KERNELS"
ENV_PREFLIGHT = "SGLANG_KIMI_EAGLE3_PREFLIGHT"
ENV_STATUS_DIR = "SGLANG_KIMI_EAGLE3_STATUS_DIR"
ENV_WARMUP = "SGLANG_KIMI_EAGLE3_WARMUP"
ENV_ADAPTIVE = "SGLANG_KIMI_EAGLE3_ADAPTIVE"
ENV_OFFSTATE = "SGLANG_KIMI_EAGLE3_OFFSTATE"
ENV_ADAPTIVE_MEASURE = "SGLANG_KIMI_EAGLE3_ADAPTIVE_MEASURE"
ENV_ADAPTIVE_POOL = "SGLANG_KIMI_EAGLE3_ADAPTIVE_POOL"
ENV_ADAPTIVE_RESERVE = "SGLANG_KIMI_EAGLE3_ADAPTIVE_RESERVE"
ENV_OFFSTATE_EXTEND = "SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND"
ENV_STEP_CLOCK = "SGLANG_KIMI_EAGLE3_STEP_CLOCK"
ENV_DEFER_FLUSH = "SGLANG_KIMI_EAGLE3_DEFER_FLUSH"
ENV_DIRECT_LAUNCH = "SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH"  # read in ops/_host.py (as != "0")
ENV_INT_POINTERS = "SGLANG_KIMI_EAGLE3_INT_POINTERS"  # read in ops/_host.py (as != "0")
ENV_BUNDLED_DIR = "SGLANG_KIMI_EAGLE3_BUNDLED_DIR"  # read in ops/tables.py

_ON = ("1", "true", "on", "yes")
_OFF = ("0", "false", "off", "no")
# variable -> (accepted values, default); the context policy's values live in policy/context.py
CHOICES = {
    ENV_KERNELS: (("auto", "ours", "upstream"), "auto"),
    ENV_PREFLIGHT: (("on", "warn", "off"), "on"),
    ENV_WARMUP: (("on", "off"), "on"),  # integration/hooks/kernel_warmup.py
    ENV_ADAPTIVE: (("on", "off"), "on"),  # integration/adaptive_default.py, integration/hooks/adaptive_control.py
    ENV_OFFSTATE: (("auto", "on", "off"), "auto"),  # integration/hooks/offstate_attention.py
    ENV_ADAPTIVE_MEASURE: (("on", "off"), "on"),  # integration/hooks/adaptive_control.py (measured costs)
    ENV_ADAPTIVE_POOL: (("on", "off"), "on"),  # integration/hooks/adaptive_control.py (slots learn together)
    # integration/hooks/adaptive_control.py: each decode batch's KV reserve follows the steps that can run (off:
    # SGLang's, from the table's largest candidate, at every state)
    ENV_ADAPTIVE_RESERVE: (("on", "off"), "on"),
    # integration/hooks/adaptive_control.py: keep SGLang's per-step draft extend at steps 0, or skip it while every slot
    # is off (opt-in: live in runs 24-25 it bought nothing measurable at c 8-128; acceptance after a step up not measured)
    ENV_OFFSTATE_EXTEND: (("keep", "skip", "defer"), "defer"),
    ENV_STEP_CLOCK: (("on", "off"), "on"),  # integration/hooks/step_clock.py (host and GPU-wait time per decode step)
    # integration/hooks/deferred_extend.py: a flush through SGLang's draft extend, or writing the rows' K and V alone
    # (a one-layer drafter's own modules, no attention, no cap at the request slots; opt-in: not yet run on a GPU)
    ENV_DEFER_FLUSH: (("extend", "kv"), "extend"),
    # ops/_host.py: our verify ops' kept launches call Triton's C launch directly / take pointers as ints (0: not)
    ENV_DIRECT_LAUNCH: (("1", "0"), "1"),
    ENV_INT_POINTERS: (("1", "0"), "1"),
}


# SGLANG_KIMI_EAGLE3_OFFSTATE=auto: the offstate_attention hook reroutes batches of at least this many requests: every
# batch. On the H200 (2026-12-04, the deployment-shaped pair, 1024-token contexts, rotated rounds) the hooked off-state's
# step was 0.33-0.39x of SGLang's extend path at 1, 2, 4 and 8 requests (an earlier reading of 1.09-1.20x at 1 request
# came from 64-token contexts); the adaptive table prices the off-state with it from there (planner/adaptive_table.py)
OFFSTATE_MIN_BS_AUTO = 1


def offstate_min_bs() -> int | None:
    """The smallest batch the offstate_attention hook reroutes under the current switch: None when off."""
    mode = env_choice(ENV_OFFSTATE)
    return None if mode == "off" else 1 if mode == "on" else OFFSTATE_MIN_BS_AUTO


class _Prefixed(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"sglang-kimi-eagle3: {msg}", kwargs


def logger() -> logging.LoggerAdapter:
    """Our logger (every line prefixed `sglang-kimi-eagle3:`). SGLang configures logging only after
    load_plugins() in launch_server, so until the root logger has a handler we print through our own
    (and do not propagate, to avoid doubles)."""
    log = logging.getLogger("sglang_kimi_eagle3")
    if not log.handlers and not logging.getLogger().handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", "%Y-%m-%d %H:%M:%S"))
        log.addHandler(h)
        if log.level == logging.NOTSET:
            log.setLevel(logging.INFO)
        log.propagate = False
    return _Prefixed(log, {})


def switch_value(raw: str | None) -> bool | None:
    """The one reader of a true/false variable: 1/true/on/yes -> True, 0/false/off/no -> False (any case,
    spaces ignored), unset or empty -> None, anything else -> None as well (callers that must refuse
    garbage compare with the raw value)."""
    value = (raw or "").strip().lower()
    return True if value in _ON else False if value in _OFF else None


def env_flag(name: str) -> bool:
    """A variable that is on only when set to a true value (1/true/on/yes); anything else is off."""
    return switch_value(os.environ.get(name)) is True


def enabled() -> bool:
    """The kill switch: SGLANG_KIMI_EAGLE3 unset/1/true/on/yes -> True, 0/false/off/no -> False.
    Anything else raises UserError (it used to mean 'enabled')."""
    raw = os.environ.get(ENV_ENABLE)
    on = switch_value(raw)
    if on is not None or not (raw or "").strip():
        return on is not False
    raise UserError(f"{ENV_ENABLE}={raw!r} is not a switch value; use 1|0 (also true|false, on|off, yes|no), "
                    f"or unset it")


def _raw_environ() -> dict | None:
    """os.environ's own bytes mapping on POSIX (os.environ and monkeypatch.setenv update it in place), else None."""
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) and all(isinstance(k, bytes) for k in list(data)[:1]) else None


def env_reader(*names: str):
    """A function returning the current values of `names` as a tuple (None where unset) for per-call memo keys, not
    for reading a value: on POSIX straight from os.environ's own bytes mapping (bytes values, a few dict lookups;
    os.environ.get costs about 1 µs a name on a slow host), elsewhere through os.environ.get (str values)."""
    data = _raw_environ()
    if data is not None:
        keys = tuple(os.fsencode(n) for n in names)
        get = data.get
        return lambda: tuple(map(get, keys))
    return lambda: tuple(map(os.environ.get, names))


def env_raw(name: str):
    """env_reader for one name without the tuple: a function returning its raw value (bytes on POSIX, else str; None
    where unset) in one C call (about 0.1 µs on a slow host)."""
    data = _raw_environ()
    if data is not None:
        return partial(data.get, os.fsencode(name))
    return partial(os.environ.get, name)  # pragma: no cover - not POSIX


def env_choice(name: str) -> str:
    """The value of one of our enumerated variables (CHOICES), lower-cased; UserError when not accepted."""
    choices, default = CHOICES[name]
    raw = os.environ.get(name)
    value = (raw or "").strip().lower() or default
    if value not in choices:
        raise UserError(f"{name}={raw!r} is not one of {'|'.join(choices)}; unset it or pick one")
    return value


def _bundled_dir_error() -> None:
    """SGLANG_KIMI_EAGLE3_BUNDLED_DIR, where set, must be a folder (an empty one hides the bundled tables; a typo would
    hide them silently)."""
    from .validate import expand_path

    raw = os.environ.get(ENV_BUNDLED_DIR, "")
    if raw.strip() and not expand_path(raw.strip(), f"${ENV_BUNDLED_DIR}").is_dir():
        raise UserError(f"{ENV_BUNDLED_DIR}={raw!r} is not a folder; unset it, or point it at a folder of launch tables "
                        f"(an empty folder hides the bundled ones)")


def _status_dir_error() -> None:
    """SGLANG_KIMI_EAGLE3_STATUS_DIR, where set, must expand (`~user` of no user on this machine: refused here, at
    launch, not inside a scheduler's status writer)."""
    from .validate import expand_path

    raw = os.environ.get(ENV_STATUS_DIR, "").strip()
    if raw:
        expand_path(raw, f"${ENV_STATUS_DIR}")


ENV_ADAPTIVE_MAX_GB = "SGLANG_KIMI_EAGLE3_ADAPTIVE_MAX_GB"
ADAPTIVE_MAX_GB = 8.0  # modelled memory of the extra runtime states (beside the launch's own) that ours may add


def _env_number(name: str, default, parse, ok, expected: str):
    """One of our numeric variables: its default when unset or blank, else `parse`d and `ok`; UserError otherwise."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        v = parse(raw)
    except ValueError:
        v = None
    if v is None or not ok(v):
        raise UserError(f"{name}={raw!r}: expected {expected} (default {default})")
    return v


def adaptive_max_gb() -> float:
    """SGLANG_KIMI_EAGLE3_ADAPTIVE_MAX_GB: the GB our adaptive default's extra runtime states may take (default 8)."""
    # NaN fails too; inf is no budget at all, where the states are tens of GB each
    return _env_number(ENV_ADAPTIVE_MAX_GB, ADAPTIVE_MAX_GB, float, lambda v: 0 <= v < float("inf"),
                       "a finite number of GB >= 0")


ENV_DEFER_STEPS = "SGLANG_KIMI_EAGLE3_DEFER_STEPS"
DEFER_STEPS = 8  # OFFSTATE_EXTEND=defer: off-state steps whose draft extend rows are stashed before one flush


def defer_steps() -> int:
    """SGLANG_KIMI_EAGLE3_DEFER_STEPS: the off-state steps per deferred draft extend (OFFSTATE_EXTEND=defer), 2-64."""
    return _env_number(ENV_DEFER_STEPS, DEFER_STEPS, int, lambda v: 2 <= v <= 64, "a whole number of steps from 2 to 64")


def env_errors() -> list[str]:
    """One line per of our variables holding a value we do not accept (empty when all are fine)."""
    from .policy.context import resolve_policy

    out = []
    # every enumerated variable (CHOICES), so none is left to fail later inside a serving scheduler
    for check in (enabled, *(partial(env_choice, name) for name in CHOICES), resolve_policy, _bundled_dir_error,
                  _status_dir_error, adaptive_max_gb, defer_steps):
        try:
            check()
        except UserError as exc:
            out.append(str(exc))
    return out


def user_cache_dir(*parts: str):
    """$XDG_CACHE_HOME/sglang-kimi-eagle3/<parts> (else ~/.cache/...): tuned tables, run status files."""
    from pathlib import Path

    from .validate import expand_path

    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    if not base:
        base = expand_path("~", "the user cache folder (~/.cache; set $XDG_CACHE_HOME instead)") / ".cache"
    return Path(base, "sglang-kimi-eagle3", *parts)
