"""`register()`: the SGLang plugin entry point (group `sglang.srt.plugins`, name `kimi_eagle3`).

SGLang calls it through `load_plugins()` in every process it starts (main, each scheduler/TP rank,
detokenizer, DP controller). It queues every hook with SGLang's HookRegistry (or the resolution
pipeline) and records each one's status; it loads no model and no kernel. It is NOT cheap in imports:
queueing a hook resolves its target's module, and HookRegistry.apply_hooks imports every target, so
load_plugins() imports ~2,900 sglang/torch/triton modules and takes ~4.1 s on a 2-core CPU, against
~130 modules and 0.1 s with SGLANG_KIMI_EAGLE3=0 (2026-11-30, sglang 0.5.23; docs/hooks.md has the
command). It is idempotent, and switched off by SGLANG_KIMI_EAGLE3=0.

A garbage value of one of our variables cannot be raised from here (SGLang logs and swallows plugin
exceptions): register() then installs only the launch-time step (which refuses EAGLE/EAGLE3 launches
with the one-line error naming the variable) and the policy flag on the parser (so argparse does not
refuse it first), marks every other hook failed, and logs the error.
"""

from __future__ import annotations

from ..base import ENV_ENABLE, TESTED_SGLANG, __version__, enabled, env_errors, logger
from ..status import hookstatus

_registered = False


def register() -> None:
    """Plugin entry point: queue every hook and record each one's status."""
    global _registered
    from ..versions import say_once
    from . import HOOK_MODULES, install_all

    say_once()  # another SGLang release than the tested one: said once per process, never refused

    bad = env_errors()
    try:
        on = enabled()
    except Exception:
        on = True  # garbage kill switch: bad is non-empty, handled below
    if not on and not bad:
        for name in HOOK_MODULES:
            hookstatus.record(name, "-", "skipped", f"plugin disabled by {ENV_ENABLE}=0")
        logger().info("%s disabled by %s=0: no hooks applied", __version__, ENV_ENABLE)
        return
    if _registered:
        return
    _registered = True
    if bad:
        from .hooks import context_policy, launch_step

        for name in HOOK_MODULES:
            if name != "launch_step":
                hookstatus.record(name, "-", "failed", f"not installed: {bad[0]}")
        context_policy.install_flag()
        launch_step.install(env_only=True)
        logger().error("%s: no hooks applied, and EAGLE/EAGLE3 launches will be refused: %s", __version__, "; ".join(bad))
        return
    install_all()
    rows = hookstatus.rows()
    counts = {s: sum(r.state == s for r in rows) for s in hookstatus.STATES}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    logger().info("%s (tested with sglang %s): %s; `sglang-kimi-eagle3 status` prints the table", __version__,
                  TESTED_SGLANG, summary)
