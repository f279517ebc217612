"""The extend message's numbers add up: served length + aligned margin = the rotary cache size."""

import re

from sglang_kimi_eagle3.policy.context import decide, spec_rope_margin


def test_extend_explanation_arithmetic():
    margin = spec_rope_margin(3, 4)
    assert margin == 280
    dec = decide(target_len=262144, draft_len=131072, policy="auto", draft_rope_type="default", draft_rope_theta=1e6,
                 rope_margin=margin, draft_name="the draft")
    m = re.search(r"sized to (\d+) positions \(the target's (\d+) \+ (\d+): the (\d+)-position speculative margin "
                  r"rounded up to a multiple of 128\)", dec.explanation)
    assert m, dec.explanation
    total, target, aligned, raw = map(int, m.groups())
    assert (total, target, aligned, raw) == (262528, 262144, 384, 280)
    assert target + aligned == total == dec.draft_max_position_embeddings and total % 128 == 0 and aligned >= raw
