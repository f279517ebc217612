"""Version policy (pure: package metadata only, no sglang import).

This plugin is tested with exactly one SGLang release (TESTED_SGLANG) and pyproject pins it. On any other
release (an override install, a source checkout) nothing is refused: every hook checks its own target when it
installs and records applied / skipped / failed, so `sglang-kimi-eagle3 status` says what took. Each process
that loads the plugin says so once, in its log; `status` and `check` print the same note in their header, and
the runtime status file carries both versions.
"""

from __future__ import annotations

from .base import TESTED_SGLANG, logger

_SAID: list[bool] = [False]


def installed_sglang() -> str | None:
    """The installed sglang distribution's version (None: not installed)."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("sglang")
    except PackageNotFoundError:
        return None
    except Exception:
        return None


def version_note(running: str | None = None) -> str:
    """"" on the tested release, else one sentence for logs and headers."""
    running = installed_sglang() if running is None else running
    if running == TESTED_SGLANG:
        return ""
    return (f"sglang {running or 'is not installed'}{'' if running is None else ' is not the release this plugin is tested with'}"
            f" ({TESTED_SGLANG}): each hook checks its target and records applied/skipped/failed, nothing is refused; "
            f"`sglang-kimi-eagle3 status` shows which hooks took")


def say_once(running: str | None = None) -> bool:
    """Log the version note once per process (the first load_plugins()); True when it was logged now."""
    note = version_note(running)
    if not note or _SAID[0]:
        return False
    _SAID[0] = True
    logger().warning("%s", note)
    return True
