"""Per-test state of the plugin's process-wide hooks, reset where a test could leave it for the next."""

import os
import sys

import pytest


@pytest.fixture(autouse=True)
def _fresh_adaptive_pool():
    """The adaptive controller's slots of one process share one pool (hooks/adaptive_control._POOL): each test starts
    with none, as a fresh scheduler process does. Without `monkeypatch`: an autouse fixture holding it would set it up
    before a test's own fixtures and so undo the test's patches before their teardowns run."""
    _reset()
    yield
    _reset()


def _reset():
    """The pool, the slots, the off-state extend policy, SGLang's variable that policy sets in this process, the
    warm-up's end as the controllers saw it, the sync function, and the deferred extend's switch and stash."""
    hook = sys.modules.get("sglang_kimi_eagle3.integration.hooks.adaptive_control")
    if hook is not None:
        hook._POOL.clear()
        hook._SLOTS.clear()
        if hook._OFF and hook._OFF[0] is not None:
            os.environ.pop(hook.SKIP_VAR, None)
        hook._OFF.clear()
        hook._DEFER[0] = False
        hook._WARM_ENDED[0] = False
        hook._WARM_DROPS[0] = 0
        hook._SWITCHES.clear()
        hook._SYNC.clear()
        hook._FOREIGN[0] = 0
        hook._RES.clear()
        hook._RES_FAILED[0] = False
        hook._RESERVED[0] = None
        hook._BS[0] = None
        hook._PARAMS[0] = None
    deferred = sys.modules.get("sglang_kimi_eagle3.integration.hooks.deferred_extend")
    if deferred is not None:
        deferred.reset()
