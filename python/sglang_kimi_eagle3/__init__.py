"""sglang-kimi-eagle3: native EAGLE-3 speculative decoding for Kimi-K2.5 on SGLang.

`register` is the SGLang plugin entry point (group `sglang.srt.plugins`, name `kimi_eagle3`); it
lives with the rest of the SGLang-facing code in `integration/plugin.py`. The ground floor (versions,
logger, environment switches) is `base.py`; its names are re-exported here.
"""

from __future__ import annotations

from .base import ENV_ENABLE, TESTED_SGLANG, __version__, enabled, logger

__all__ = ["ENV_ENABLE", "TESTED_SGLANG", "__version__", "enabled", "logger", "register"]


def register() -> None:
    """Plugin entry point; see integration.plugin.register."""
    from .integration.plugin import register as _register

    _register()
