"""Per-test state of the plugin's process-wide hooks, reset where a test could leave it for the next."""

import sys

import pytest


@pytest.fixture(autouse=True)
def _fresh_adaptive_pool(monkeypatch):
    """The adaptive controller's slots of one process share one pool (hooks/adaptive_control._POOL): each test starts
    with none, as a fresh scheduler process does."""
    hook = sys.modules.get("sglang_kimi_eagle3.integration.hooks.adaptive_control")
    if hook is not None:
        monkeypatch.setattr(hook, "_POOL", [])
    yield
