"""The pure context-length decision, on the real bundled pairs' numbers."""

import pytest

from helpers import AQ_K2_DRAFT, AQ_K25_DRAFT, KIMI_K25, LLAMA_8B, LLAMA_8B_DRAFT
from sglang_kimi_eagle3.configs import read_config
from sglang_kimi_eagle3.errors import UserError
from sglang_kimi_eagle3.policy.context import POLICIES, decide, resolve_policy, spec_rope_margin

KIMI = dict(target_len=262144, draft_len=131072, draft_rope_theta=1e6)
LLAMA = dict(target_len=131072, draft_len=2048, draft_rope_theta=None)


def test_bundled_numbers_are_what_the_policy_sees():
    assert read_config(KIMI_K25).derived_context == 262144  # YaRN dict has original_max_position_embeddings
    assert read_config(AQ_K2_DRAFT).derived_context == 131072
    assert read_config(AQ_K25_DRAFT).derived_context == 262144
    assert read_config(LLAMA_8B).derived_context == 131072  # llama3 rope: factor not applied
    assert read_config(LLAMA_8B_DRAFT).derived_context == 2048


def test_margin_matches_sglang_reserve_formula():
    # steps * draft_tokens * SGLANG_SPEC_EXPANSION_SAFETY_FACTOR(2) + SGLANG_ROPE_CACHE_SAFETY_MARGIN(256)
    assert spec_rope_margin(3, 4) == 3 * 4 * 2 + 256
    assert spec_rope_margin(None, None) == 256


@pytest.mark.parametrize("pair", [KIMI, LLAMA])
def test_extend_lifts_only_the_draft_and_covers_the_margin(pair):
    d = decide(**pair, policy="extend", rope_margin=280)
    assert d.action == "extend" and d.ok
    assert d.serve_len == pair["target_len"]
    assert d.draft_max_position_embeddings >= pair["target_len"] + 280
    assert d.draft_max_position_embeddings % 128 == 0
    assert d.draft_rope_scaling is None
    assert "exact" in d.explanation and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is not used" in d.explanation


def test_auto_is_extend_and_warns_for_very_short_drafts():
    kimi = decide(**KIMI, policy="auto")
    llama = decide(**LLAMA, policy="auto")
    assert kimi.action == llama.action == "extend"
    assert "expect little speedup" not in kimi.explanation  # ratio 2
    assert "expect little speedup" in llama.explanation and "#6783" in llama.explanation  # ratio 64
    assert (kimi.severity, llama.severity) == ("info", "warning")  # what preflight reports, as data


@pytest.mark.parametrize("pair,factor", [(KIMI, 2.0), (LLAMA, 64.0)])
def test_yarn_scales_a_plain_rope_draft(pair, factor):
    d = decide(**pair, policy="yarn")
    assert d.action == "yarn"
    rs = d.draft_rope_scaling
    assert rs["rope_type"] == "yarn" and rs["factor"] == factor
    assert rs["original_max_position_embeddings"] == pair["draft_len"]
    assert rs.get("rope_theta") == pair["draft_rope_theta"]
    assert d.draft_max_position_embeddings == pair["target_len"]


@pytest.mark.parametrize("rope_type", ["yarn", "llama3", "linear", "dynamic"])
def test_yarn_refuses_an_already_scaled_draft(rope_type):
    d = decide(**KIMI, policy="yarn", draft_rope_type=rope_type)
    assert d.action == "refuse" and not d.ok
    assert rope_type in d.explanation and "extend" in d.explanation


def test_cap_serves_the_draft_length():
    d = decide(**KIMI, policy="cap")
    assert d.action == "cap" and d.serve_len == 131072 and d.draft_max_position_embeddings is None


def test_strict_refuses_and_names_every_alternative():
    d = decide(**KIMI, policy="strict")
    assert d.action == "refuse"
    for word in ("extend would serve 262144", "yarn would rescale the draft's RoPE by 2", "cap would serve 131072",
                 "--speculative-draft-context-policy", "SGLANG_KIMI_EAGLE3_CONTEXT_POLICY"):
        assert word in d.explanation
    scaled = decide(**KIMI, policy="strict", draft_rope_type="yarn")
    assert "yarn is unavailable" in scaled.explanation


@pytest.mark.parametrize("policy", POLICIES)
def test_a_draft_that_covers_the_target_needs_nothing(policy):
    d = decide(target_len=262144, draft_len=262144, policy=policy)
    assert d.action == "none" and d.serve_len == 262144


def test_policy_selection_flag_beats_env_and_bad_names_are_one_line_errors():
    assert resolve_policy(None, {}) == "auto"
    assert resolve_policy(None, {"SGLANG_KIMI_EAGLE3_CONTEXT_POLICY": "CAP"}) == "cap"
    assert resolve_policy("yarn", {"SGLANG_KIMI_EAGLE3_CONTEXT_POLICY": "cap"}) == "yarn"
    with pytest.raises(UserError) as e:
        resolve_policy(None, {"SGLANG_KIMI_EAGLE3_CONTEXT_POLICY": "stretch"})
    assert "SGLANG_KIMI_EAGLE3_CONTEXT_POLICY" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UserError) as e:
        decide(**KIMI, policy="stretch")
    assert "--speculative-draft-context-policy" in str(e.value)
