"""Bundled hardware profiles: every number carries a source or an assumption; computed counts re-derived
from the bundled model configs."""

import json

import pytest

from sglang_kimi_eagle3.errors import UserError
from sglang_kimi_eagle3.planner import costs, profiles
from helpers import AQ_K2_DRAFT, AQ_K25_DRAFT, KIMI_K2, KIMI_K25


@pytest.mark.parametrize("name", profiles.names())
def test_bundled_profile_loads_with_full_provenance(name):
    p = profiles.load(name)
    # hardware + target + draft + verify_us + context_tokens (+ deployment: the K2-Instruct calibration profile has
    # none, its bundled config carries no FP8 quantization, so its pool is not checked; plan says so)
    assert len(p.provenance) == 7 + 2 * 13 + 2 + (p.deployment is not None)
    assert p.deployment is not None or name == "kimi-k2-instruct_8xh200_tp8"
    assert all(v.startswith(("source: ", "ASSUMPTION: ")) and len(v) > 20 for v in p.provenance.values())
    assert p.acceptance_preset


def test_both_hardware_targets_are_bundled():
    assert {"kimi-k2.5_8xh200_tp8", "kimi-k2.5_8xrtxpro6000_tp8"} <= set(profiles.names())
    assert profiles.DEFAULT_PROFILE in profiles.names()


FP8_BLOCK = 1 + 4 / (128 * 128)  # Kimi-K2-Instruct: FP8 weights + one fp32 scale per 128x128 block
CONFIGS = {"kimi-k2-instruct_8xh200_tp8": (KIMI_K2, AQ_K2_DRAFT)}  # every other profile: Kimi-K2.5 + AQ-MedAI K25


def _kimi_counts(folder=KIMI_K25):
    doc = json.loads((folder / "config.json").read_text())
    t = doc.get("text_config", doc)
    h, L, tp = t["hidden_size"], t["num_hidden_layers"], 8
    moe_l = L - t["first_k_dense_replace"]
    qa, kva = h * t["q_lora_rank"], h * (t["kv_lora_rank"] + t["qk_rope_head_dim"])
    heads, qk = t["num_attention_heads"], t["qk_nope_head_dim"] + t["qk_rope_head_dim"]
    qb = t["q_lora_rank"] * heads * qk
    kvb = t["kv_lora_rank"] * heads * (t["qk_nope_head_dim"] + t["v_head_dim"])
    o = heads * t["v_head_dim"] * h
    expert = 3 * h * t["moe_intermediate_size"]
    linear = (qa + kva) * L + (qb + kvb + o) * L / tp + 3 * h * t["intermediate_size"] / tp + expert * t["n_shared_experts"] * moe_l / tp
    bf16 = h * t["n_routed_experts"] * moe_l + t["vocab_size"] * h / tp  # router gates, lm_head
    if "quantization_config" in t:  # K2.5: INT4 routed experts, everything else BF16
        q = t["quantization_config"]["config_groups"]["group_0"]["weights"]
        static, expert_bytes = 2 * (linear + bf16), expert * (q["num_bits"] / 8 + 2 / q["group_size"]) / tp
    else:  # K2-Instruct: block-FP8 linear layers (the bundled config omits its quantization_config)
        static, expert_bytes = FP8_BLOCK * linear + 2 * bf16, expert * FP8_BLOCK / tp
    return static, expert_bytes, L * (t["kv_lora_rank"] + t["qk_rope_head_dim"]) * 2


@pytest.mark.parametrize("name", profiles.names())
def test_computed_numbers_match_the_bundled_configs(name):
    p = profiles.load(name)
    target, drafter = CONFIGS.get(name, (KIMI_K25, AQ_K25_DRAFT))
    static, expert_bytes, kv = _kimi_counts(target)
    assert p.target.static_bytes_per_gpu == pytest.approx(static, rel=1e-9)
    assert p.target.expert_bytes_per_gpu == pytest.approx(expert_bytes, rel=1e-9)
    assert p.target.kv_bytes_per_ctx_token == kv
    d = json.loads((drafter / "config.json").read_text())
    h, heads, hd = d["hidden_size"], d["num_attention_heads"], d["head_dim"]
    params = 2 * h * 3 * heads * hd + heads * hd * h + 3 * h * d["intermediate_size"] + d["draft_vocab_size"] * h
    assert p.draft.static_bytes_per_gpu == pytest.approx(2 * params / 8)
    assert p.draft.gemm_flops_per_token == pytest.approx(2 * params / 8)


def test_h200_profile_stays_near_its_documented_anchor():
    # the profile's layer_overhead_us assumption is tied to SGLang PR #13466's 11.4 ms TPOT at concurrency 1;
    # changing any H200 number must keep the bs-1 plain decode within 25% of it, or update the note
    cm = costs.from_profile(profiles.load("kimi-k2.5_8xh200_tp8"))
    assert cm.target_us(1, 1) == pytest.approx(11_380, rel=0.25)


def test_profile_number_without_source_is_refused(tmp_path):
    doc = json.loads((profiles.DIR / "kimi-k2.5_8xh200_tp8.json").read_text())
    del doc["hardware"]["mem_GBps"]["source"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(UserError, match="hardware.mem_GBps"):
        profiles.load(str(bad))


def test_unknown_profile_names_the_bundled_ones():
    with pytest.raises(UserError, match="kimi-k2.5_8xh200_tp8"):
        profiles.load("no-such-profile")
