"""sglang-kimi-eagle3: native EAGLE-3 speculative decoding for Kimi-K2.5 on SGLang.

`register()` is the SGLang plugin entry point (group `sglang.srt.plugins`, name `kimi_eagle3`).
SGLang calls it through `load_plugins()` in every process it starts (main, each scheduler/TP rank,
detokenizer, DP controller). It is cheap (no model or kernel import: hooks are only queued for
SGLang's HookRegistry), idempotent, and switched off by SGLANG_KIMI_EAGLE3=0.
"""

from __future__ import annotations

import logging
import os
import sys

__version__ = "0.1.0"
TESTED_SGLANG = "0.5.23"
ENV_ENABLE = "SGLANG_KIMI_EAGLE3"

_registered = False


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


def enabled() -> bool:
    return os.environ.get(ENV_ENABLE, "1").strip().lower() not in ("0", "false", "off", "no")


def register() -> None:
    """Plugin entry point: queue every hook and record each one's status."""
    global _registered
    from . import hookstatus
    from .integration import HOOK_MODULES, install_all

    if not enabled():
        for name in HOOK_MODULES:
            hookstatus.record(name, "-", "skipped", f"plugin disabled by {ENV_ENABLE}=0")
        logger().info("%s disabled by %s=0: no hooks applied", __version__, ENV_ENABLE)
        return
    if _registered:
        return
    _registered = True
    install_all()
    rows = hookstatus.rows()
    counts = {s: sum(r.state == s for r in rows) for s in hookstatus.STATES}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    logger().info("%s (tested with sglang %s): %s; `sglang-kimi-eagle3 status` prints the table", __version__, TESTED_SGLANG, summary)
