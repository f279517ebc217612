"""The adaptive_control hook on SGLang's real AdaptiveStepSlot: a controller that raises never reaches the scheduler
(the slot goes back to SGLang's own update, the status row says failed)."""

import pytest

from sglang_kimi_eagle3.integration.hooks import adaptive_control as hook
from sglang_kimi_eagle3.planner import profiles
from sglang_kimi_eagle3.planner.adaptive_control import Controller
from sglang_kimi_eagle3.planner.adaptive_table import KEY, table
from sglang_kimi_eagle3.planner.costs import from_profile
from sglang_kimi_eagle3.status import hookstatus

AdaptiveStepSlot = pytest.importorskip("sglang.srt.speculative.adaptive_spec_params").AdaptiveStepSlot


def _entry():
    return table(from_profile(profiles.load(profiles.DEFAULT_PROFILE)), [1, 8], operator_steps=3)["1"][KEY]


def _slot():
    cfg = table(from_profile(profiles.load(profiles.DEFAULT_PROFILE)), [1, 8], operator_steps=3)["1"]
    slot = AdaptiveStepSlot(initial_steps=3, cfg=cfg)  # SGLang's class, unhooked here
    hook.attach(slot, cfg[KEY])
    return slot


@pytest.mark.parametrize("attaches", [1, 2])
def test_a_controller_that_raises_hands_the_slot_back_to_sglang(monkeypatch, attaches):
    """Also when the slot was attached twice (the __init__ hook, installed by a plugin load earlier in the process,
    then attach): the hand-back still reaches SGLang's update, not ours again (a recursion before the fix)."""
    slot = _slot()
    if attaches == 2:
        hook.attach(slot, _entry())
    assert slot.update([3]) is False and hasattr(slot, "_kimi_eagle3_ctl")  # ours: dwell, no switch yet

    def boom(self, counts):
        raise RuntimeError("broken")

    monkeypatch.setattr(Controller, "update", boom)
    assert slot.update([3]) is False  # SGLang's update answered (its warm-up batches), nothing raised
    assert slot.update.__func__ is AdaptiveStepSlot.update  # the slot is SGLang's from now on
    row = hookstatus.get(hook.NAME)
    assert row.state == "failed" and "RuntimeError: broken" in row.detail
