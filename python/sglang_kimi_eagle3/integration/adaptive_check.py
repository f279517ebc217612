"""SGLang's own reader of `--speculative-adaptive-config`, applied to a file `plan` is about to write.

Upstream target: sglang/srt/speculative/adaptive_spec_params.py `_load_adaptive_config` (0.5.23), the
function launch_server uses to read the file. Why: the planner must never write a config SGLang would
refuse at launch; planner/adaptive.check mirrors the rules, this confirms them with the real code.
Importing it loads SGLang's server stack (seconds), so `plan --no-sglang-check` skips it.
"""

from __future__ import annotations


def sglang_loader():
    """A function path -> None (accepted) or the reason SGLang refuses it; None when SGLang is not importable."""
    try:
        from sglang.srt.speculative.adaptive_spec_params import _load_adaptive_config
    except Exception:  # not installed, or an SGLang without adaptive speculation
        return None

    def check(path: str) -> str | None:
        try:
            _load_adaptive_config(str(path))
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    return check
