"""The drafters the planner's presets cite are bundled profiles, and check accepts them beside Kimi-K2.5 (pure)."""

import re

import pytest

from helpers import KIMI_K25
from sglang_kimi_eagle3.configs import read_config
from sglang_kimi_eagle3.planner.sources import PRESETS, from_preset
from sglang_kimi_eagle3.preflight import Deployment, GpuTarget, has_errors, run_checks
from sglang_kimi_eagle3.profiles import PROFILES, profile_path

# preset prefix -> the drafter it measures
CITED = {"lightseek-k25-mla-": "lightseekorg/kimi-k2.5-eagle3-mla", "lightseek-k25-": "lightseekorg/kimi-k2.5-eagle3",
         "aq-medai-k25-": "aq-medai/kimi-k25-eagle3", "aq-medai-k2-": "aq-medai/kimi-k2-eagle3"}


def drafter_of(preset: str) -> str | None:
    return next((d for p, d in CITED.items() if preset.startswith(p)), None)


def test_every_kimi_preset_names_a_bundled_drafter_and_a_public_source():
    kimi = [p for p in PRESETS if drafter_of(p)]
    assert {"aq-medai-k2-gsm8k", "lightseek-k25-mla-gsm8k", "lightseek-k25-gsm8k"} <= set(kimi)
    for p in kimi:
        assert drafter_of(p) in PROFILES and profile_path(drafter_of(p)).joinpath("config.json").is_file(), p
        src = PRESETS[p][2]
        assert not re.search(r"shared/|published\.md|issue \d", src), src
        assert from_preset(p).alphas


@pytest.mark.parametrize("name", ["lightseekorg/kimi-k2.5-eagle3", "lightseekorg/kimi-k2.5-eagle3-mla"])
def test_check_accepts_the_lightseekorg_drafters_beside_kimi_k25_on_an_h200(name):
    draft = read_config(profile_path(name), label=name)
    assert draft.vocab_size == 163840 and draft.draft_vocab_size is None  # full vocabulary: no d2t map
    assert draft.is_mla == name.endswith("-mla")
    d = Deployment(target=read_config(KIMI_K25), draft=draft, algorithm="EAGLE3", steps=3, topk=1, draft_tokens=4, tp=8,
                   gpu=GpuTarget("H200", 90, "test"), target_decode_backend="fa3", target_prefill_backend="fa3",
                   trust_remote_code=True, rope_margin=384, hook_states={"context_policy": ("applied", "")},
                   target_class_methods={"set_eagle3_layers_to_capture": True, "get_embed_and_head": True,
                                         "set_embed_and_head": True},
                   gpu_memory_mib=143771, gpu_memory_source="H200", mem_fraction_static=0.85, mem_fraction_given=True)
    f = run_checks(d)
    assert not has_errors(f), [x.one_line() for x in f if x.severity == "error"]
    ctx = [x for x in f if x.check == "context"]
    assert ctx and ctx[0].severity == "info"  # 262144 positions: nothing to reconcile
