"""`check`'s predicted speedup (preflight/checks_speedup.py): the finding's levels, label, sources and
recommendation, on deployments of the bundled configs (pure: the real planner, no SGLang)."""

import pytest
from helpers import KIMI_K2, KIMI_K25, LLAMA_8B, LLAMA_8B_DRAFT

from sglang_kimi_eagle3.configs import read_config
from sglang_kimi_eagle3.planner import sources
from sglang_kimi_eagle3.preflight import Deployment, GpuTarget
from sglang_kimi_eagle3.preflight.checks_speedup import CHECK, _cost, _drafter, check_expected_speedup
from sglang_kimi_eagle3.profiles import profile_path


def dep(draft="aq-medai/kimi-k25-eagle3", sm=90, steps=3, tp=8, target=KIMI_K25, label=None):
    d = read_config(profile_path(draft) if profile_path(draft) else draft, label=label or draft)
    return Deployment(target=read_config(target), draft=d, algorithm="EAGLE3", steps=steps, topk=None if steps is None else 1,
                      draft_tokens=None if steps is None else steps + 1, tp=tp,
                      gpu=GpuTarget("H200" if sm == 90 else "RTX PRO 6000", sm, "test"))


def one(d) -> object:
    f = check_expected_speedup(d)
    assert len(f) == 1 and f[0].check == CHECK, f
    return f[0]


def test_a_known_drafter_gets_the_range_at_four_levels_labelled_as_a_prediction():
    f = one(dep())
    assert f.found.startswith("PREDICTION (planner model, not a measurement)")
    assert [part.split()[1] for part in f.found.split(": ", 2)[2].split("; ")[0].split(", ")] == ["1", "16", "64", "128"]
    lo, hi = (float(x) for x in f.found.split("c 1 ", 1)[1].split("x", 1)[0].split("-"))
    assert 1.0 < lo < hi  # GSM8K acceptance on an H200: a gain, with a range
    assert "recommended: fixed steps 4 (within 3 % of the best at every level)" in f.found and f.severity == "info"
    assert f.fix == "--speculative-num-steps 4 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5"  # the preset's depth
    assert "planner profile kimi-k2.5_8xh200_tp8" in f.expected and "aq-medai-k25-gsm8k tau 3.07" in f.expected
    assert "mean error on the published end-to-end points" in f.expected and "upper bound" not in f.expected
    assert "shared/" not in f.expected + f.found  # stands alone


def test_the_k2_drafter_on_k25_is_an_upper_bound_and_k2_instruct_has_its_own_profile():
    f = one(dep("aq-medai/kimi-k2-eagle3", sm=120))
    assert "kimi-k2.5_8xrtxpro6000_tp8" in f.expected and "upper bound" in f.expected
    assert "aq-medai-k2-mtbench tau 2.39" in f.expected and "aq-medai-k2-gsm8k tau 3.27" in f.expected
    k2 = one(dep("aq-medai/kimi-k2-eagle3", target=KIMI_K2))
    assert "kimi-k2-instruct_8xh200_tp8" in k2.expected and "upper bound" not in k2.expected
    assert "SGLang's default" in one(dep(steps=None)).found  # no steps given: SGLang's 3 / 1 / 4


@pytest.mark.parametrize("tau,sm,want,sev,fix", [
    (1.05, 90, "no speculation", "warning", "drop --speculative-algorithm"),
    (1.3, 90, "an adaptive file with no drafting at c 16", "warning", "plan --profile kimi-k2.5_8xh200_tp8 --preset"),
    (2.0, 90, "fixed steps 3, this launch's", "info", ""),
    (2.0, 120, "fixed steps 2 (", "info", "--speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3"),
])
def test_the_recommendation_follows_the_planned_acceptance(monkeypatch, tau, sm, want, sev, fix):
    monkeypatch.setitem(sources.PRESETS, "aq-medai-k25-gsm8k", (tau, 3, "test acceptance"))
    f = one(dep(sm=sm))
    assert f"recommended: {want}" in f.found and f.severity == sev and fix in f.fix, f.one_line()


def test_what_cannot_be_predicted_says_why_and_how_to_measure(tmp_path):
    custom = tmp_path / "my-drafter"
    custom.mkdir()
    (custom / "config.json").write_text((profile_path("aq-medai/kimi-k25-eagle3") / "config.json").read_text())
    f = one(dep(str(custom)))
    assert f.found.startswith("not predicted: the drafter") and "plan --bench" in f.fix
    assert one(dep(tp=4)).found.startswith("not predicted: no bundled cost profile for TP 4")
    assert one(dep(sm=100)).found.startswith("not predicted: no bundled cost profile for sm100")
    llama = Deployment(target=read_config(LLAMA_8B), draft=read_config(LLAMA_8B_DRAFT), algorithm="EAGLE3", steps=3,
                       topk=1, draft_tokens=4, gpu=GpuTarget("H200", 90, "test"))
    assert check_expected_speedup(llama) == [] and check_expected_speedup(None) == []


def test_drafter_names_folders_and_cache_paths_are_recognised():
    assert _drafter("AQ-MedAI/Kimi-K25-eagle3") == "aq-medai/kimi-k25-eagle3"
    assert _drafter("/hf/hub/models--AQ-MedAI--Kimi-K2-Instruct-eagle3/snapshots/abc") == "aq-medai/kimi-k2-eagle3"
    assert _drafter("/models/kimi-k2.5-eagle3-mla/") == "lightseekorg/kimi-k2.5-eagle3-mla"
    assert _drafter("/models/kimi-k2.5-eagle3") == "lightseekorg/kimi-k2.5-eagle3"
    assert _drafter("/models/my-drafter") is None


def test_a_full_vocabulary_drafter_costs_more_per_draft_step():
    from sglang_kimi_eagle3.planner import profiles

    p = profiles.load("kimi-k2.5_8xh200_tp8")
    aq = _cost(p, read_config(profile_path("aq-medai/kimi-k25-eagle3")))
    full = _cost(p, read_config(profile_path("lightseekorg/kimi-k2.5-eagle3")))
    assert full.draft_us(1, 1) > aq.draft_us(1, 1) and full.target_us(8, 1) == aq.target_us(8, 1)


def test_a_bad_steps_value_is_left_to_spec_params():
    assert check_expected_speedup(dep(steps=0)) == []


@pytest.mark.parametrize("tau,want,fix", [
    (1.3, "adaptive steps with no drafting at c 16, as this launch is served: adaptive steps [0, 3]", ""),
    (2.0, "fixed steps 3, this launch's (within 3 % of the best at every level); this plugin serves the launch with "
          "adaptive steps [0, 3], dropping to SGLang's off-state where drafting does not pay", ""),
    (1.05, "no speculation (no setting beats plain decoding at any concurrency) (this plugin's adaptive default would "
           "hold SGLang's off-state", "drop --speculative-algorithm"),
])
def test_a_launch_this_plugin_serves_adaptively_is_not_sent_to_an_adaptive_file(monkeypatch, tau, want, fix):
    """Where the plugin's adaptive default serves the launch, `plan -o adaptive.json` would replace its table and
    controller with SGLang's own slot logic: the recommendation says how the launch is served instead (it sent every
    such launch to `plan`). An operator's own adaptive table (no controller marks) keeps the `plan` advice."""
    import dataclasses

    from sglang_kimi_eagle3.planner import costs, profiles
    from sglang_kimi_eagle3.planner.adaptive_table import table

    monkeypatch.setitem(sources.PRESETS, "aq-medai-k25-gsm8k", (tau, 3, "test acceptance"))
    ours = table(costs.from_profile(profiles.load("kimi-k2.5_8xh200_tp8")), [1, 8, 64], operator_steps=3, max_states=2)
    d = dataclasses.replace(dep(), adaptive=True, adaptive_table=ours)
    f = one(d)
    assert f"recommended: {want}" in f.found and fix in f.fix and (fix or f.fix == ""), f.one_line()
    capped = one(dataclasses.replace(d, adaptive_capped={"top": 128, "found": "", "fix": ""}))
    assert "adaptive steps [0, 3] up to batch 128" in capped.found or tau == 1.05, capped.one_line()
    theirs = {k: {"candidate_steps": v["candidate_steps"]} if k.isdigit() else v for k, v in ours.items()}
    plain = one(dataclasses.replace(d, adaptive_table=theirs))
    assert "this plugin" not in plain.found, plain.one_line()
    if tau == 1.3:
        assert "an adaptive file with no drafting at c 16" in plain.found and "plan --profile" in plain.fix


def test_a_tree_or_sglangs_adaptive_slots_are_not_this_launchs_fixed_chain(monkeypatch):
    """A topk-2 tree, or a launch SGLang's own adaptive slots serve, was told "fixed steps 3, this launch's" with no
    fix: neither runs that chain."""
    import dataclasses

    monkeypatch.setitem(sources.PRESETS, "aq-medai-k25-gsm8k", (2.0, 3, "test acceptance"))
    chain = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
    assert "recommended: fixed steps 3, this launch's" in one(dep()).found
    tree = one(dataclasses.replace(dep(), topk=2, draft_tokens=6))
    assert "recommended: fixed steps 3 (within 3 %" in tree.found and tree.fix == chain, tree.one_line()
    theirs = one(dataclasses.replace(dep(), adaptive=True, adaptive_table={"1": {"candidate_steps": [0, 1, 3]}}))
    assert "this launch's" not in theirs.found and theirs.fix.startswith(chain), theirs.one_line()
    assert "without --speculative-adaptive and --speculative-adaptive-config" in theirs.fix
