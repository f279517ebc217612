"""The `deploy` preset: one TP-8 rank's shapes, deep enough that the modelled draft-step / target-step ratio at
decode batch size 1 is the seed deployment's within +-30 %, with target weights near 8 GB (co-residence)."""

from __future__ import annotations

import subprocess
import sys

import torch

from helpers import ROOT, clean_env
from sglang_kimi_eagle3.tiny import BuildOptions, make_tensors, preset
from sglang_kimi_eagle3.tiny import ratio
from sglang_kimi_eagle3.tiny.build import WRAPPER_PREFIX as P


def test_deploy_shapes_are_one_tp8_rank_of_kimi():
    spec = preset("deploy")
    spec.check_int4()  # the Marlin MoE kernel serves it at TP 1 and 2
    t = make_tensors(spec, 0, BuildOptions(device="meta", int4=True, draft_agreement=0.3))
    assert tuple(t.target[P + "lm_head.weight"].shape) == (163840 // 8, 7168)
    assert tuple(t.target[P + "model.layers.83.self_attn.o_proj.weight"].shape) == (7168, 8 * 128)
    assert t.target[P + "model.layers.83.mlp.experts.7.down_proj.weight_packed"].dtype == torch.int32
    assert {r: tuple(d["lm_head.weight"].shape) for r, d in t.drafts.items()} == {4000: (4000, 7168)}
    # one rank's drafter attention: 8 heads x 128 from cat(embed, hidden) [2 x 7168]
    assert tuple(t.drafts[4000]["midlayer.self_attn.q_proj.weight"].shape) == (8 * 128, 2 * 7168)
    assert tuple(t.drafts[4000]["midlayer.self_attn.o_proj.weight"].shape) == (7168, 8 * 128)


def test_deploy_ratio_matches_the_seed_at_decode_bs1_and_the_stress_pair_does_not():
    seed = ratio.seed_ratios()
    deploy = ratio.pair_ratios(preset("deploy"), int4=True)
    stress = ratio.pair_ratios(preset("kimi-width"), int4=True, rows=32000)
    assert 0.7 <= deploy["decode"][1] / seed["decode"][1] <= 1.3, (deploy["decode"], seed["decode"])
    # the rank-shaped drafter attention keeps it within 2.2x up to bs 128 (a 7168-wide one: 6.9x there)
    assert all(deploy["decode"][bs] / seed["decode"][bs] < 2.2 for bs in (8, 32, 128)), deploy["decode"]
    assert stress["decode"][1] / seed["decode"][1] > 5  # the 3-layer pair stays the stress case
    assert 0.03 < seed["decode"][1] < 0.08 and seed["prefill"] < seed["decode"][1]
    assert ratio.target_weight_bytes(preset("deploy"), int4=True) < 8.5e9


def test_ratios_only_prints_both_and_builds_nothing(tmp_path):
    cp = subprocess.run([sys.executable, "-m", "sglang_kimi_eagle3.tiny", str(tmp_path / "p"), "--preset", "deploy",
                         "--int4", "--ratios-only"], capture_output=True, text=True, timeout=120, env=clean_env(),
                        cwd=str(ROOT))
    assert cp.returncode == 0, cp.stderr
    assert "seed deployment: planner model" in cp.stderr and "decode bs   1: seed 0.05" in cp.stderr
    assert not (tmp_path / "p").exists()
    cp = subprocess.run([sys.executable, "-m", "sglang_kimi_eagle3.tiny", str(tmp_path / "p"), "--preset", "deploy",
                         "--kimi-width"], capture_output=True, text=True, timeout=120, env=clean_env(), cwd=str(ROOT))
    assert cp.returncode == 2 and "--preset deploy" in cp.stderr


def test_ratios_only_needs_no_out_folder(tmp_path):
    """`--ratios-only` builds nothing, yet without OUT it was refused as 'OUT is required: the folder to write
    target/ and draft/ into'."""
    cp = subprocess.run([sys.executable, "-m", "sglang_kimi_eagle3.tiny", "--preset", "deploy", "--int4",
                         "--ratios-only"], capture_output=True, text=True, timeout=120, env=clean_env(), cwd=str(tmp_path))
    assert cp.returncode == 0, cp.stderr
    assert "seed deployment: planner model" in cp.stderr and not list(tmp_path.iterdir())


def test_a_refused_device_is_one_line_not_the_ratio_report_first(tmp_path):
    """`--preset deploy --device meta` printed the whole modelled-ratio report, then its refusal: not one line."""
    cp = subprocess.run([sys.executable, "-m", "sglang_kimi_eagle3.tiny", str(tmp_path / "out"), "--preset", "deploy",
                         "--device", "meta"], capture_output=True, text=True, timeout=120, env=clean_env(), cwd=str(ROOT))
    assert cp.returncode == 2, cp.stderr[-2000:]
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--device meta" in lines[0], lines
    assert not (tmp_path / "out").exists()
