"""The tiny model builder (sglang_kimi_eagle3.tiny): deterministic files, a planted next-token rule with
wide margins in both models, configs SGLang's real ModelConfig accepts (and refuses without the plugin,
like the seed deployment), a tokenizer transformers loads, and `check` passing on the pair."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from helpers import ROOT, clean_env
from sglang_kimi_eagle3.tiny import TinySpec, build, successor
from sglang_kimi_eagle3.tiny.launch import base_args, spec_args
from worker_path import WORKER_PATH


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return build(tmp_path_factory.mktemp("tiny"), seed=0)


def _digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _rms_norm(x):
    return x / x.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt()


def test_same_seed_same_files_other_seed_other_weights(pair, tmp_path):
    target, draft = pair
    t2, d2 = build(tmp_path / "again", seed=0)
    assert _digest(t2) == _digest(target) and _digest(d2) == _digest(draft)
    t3, _ = build(tmp_path / "other", seed=1)
    assert _digest(t3)["model.safetensors"] != _digest(target)["model.safetensors"]


def test_a_built_folder_is_reused_and_a_changed_one_rebuilt(pair, tmp_path):
    target, _ = build(tmp_path / "t", seed=0)
    before = (target / "model.safetensors").stat().st_mtime_ns
    build(tmp_path / "t", seed=0)
    assert (target / "model.safetensors").stat().st_mtime_ns == before
    (target / "tiny.json").write_text("{}")  # stamp no longer matches: rebuilt
    build(tmp_path / "t", seed=0)
    assert json.loads((target / "tiny.json").read_text())["seed"] == 0


def test_configs_have_the_seed_shape(pair):
    target, draft = pair
    t = json.loads((target / "config.json").read_text())
    d = json.loads((draft / "config.json").read_text())
    assert t["architectures"] == ["DeepseekV3ForCausalLM"] and d["architectures"] == ["LlamaForCausalLMEagle3"]
    assert t["kv_lora_rank"] == 512 and t["qk_rope_head_dim"] == 64 and t["q_lora_rank"]  # MLA as Kimi-K2.5
    assert 0 < t["first_k_dense_replace"] < t["num_hidden_layers"] <= 4 and t["n_routed_experts"] > 1
    assert d["max_position_embeddings"] * 2 == t["max_position_embeddings"]  # the seed's mismatch
    assert d["draft_vocab_size"] < d["vocab_size"] == t["vocab_size"]


def test_target_picks_the_planted_successor_with_a_wide_margin(pair):
    target, _ = pair
    w = load_file(str(target / "model.safetensors"))
    succ = torch.tensor(successor(target))
    logits = _rms_norm(w["model.embed_tokens.weight"].float()) @ w["lm_head.weight"].float().T
    top2 = logits.topk(2, dim=-1)
    assert torch.equal(top2.indices[:, 0], succ)
    margin = (top2.values[:, 0] - top2.values[:, 1]).min().item()
    assert margin > 2.0, f"smallest greedy margin {margin:.2f} logits: bf16 noise could flip it"


def test_draft_proposes_the_successor_and_its_vocab_maps_back(pair):
    target, draft = pair
    tw, dw = load_file(str(target / "model.safetensors")), load_file(str(draft / "model.safetensors"))
    s = TinySpec()
    hot = dw["d2t"] + torch.arange(s.draft_vocab_size)  # SGLang's hot_token_id
    assert torch.equal(dw["t2d"].nonzero().flatten(), hot)  # t2d marks exactly the draft vocab
    assert torch.equal(dw["lm_head.weight"], tw["lm_head.weight"][hot])
    succ = torch.tensor(successor(target))
    assert bool(dw["t2d"][succ].all()), "every successor must be in the draft vocab"
    # a draft step's residual is ~ BETA * normed embedding of its input token (weights.py)
    E = tw["model.embed_tokens.weight"].float()
    logits = _rms_norm(2.0 * _rms_norm(E)) @ dw["lm_head.weight"].float().T
    assert torch.equal(hot[logits.argmax(-1)], succ)
    assert dw["fc.weight"].shape == (s.hidden_size, 3 * s.hidden_size) and E.shape[1] == s.hidden_size


def test_tokenizer_round_trips_and_fills_the_vocab(pair):
    from transformers import AutoTokenizer

    target, _ = pair
    tok = AutoTokenizer.from_pretrained(str(target))
    text = "Kimi-K2.5 + EAGLE-3, ünïcode 你好"
    assert tok.decode(tok(text).input_ids) == text
    assert len(tok) == TinySpec().vocab_size and tok.eos_token_id == 2


CODE = WORKER_PATH + r'''
import sys
argv = json.loads(sys.argv[1])
r = launch(argv, {})
from sglang.srt.utils.hf_transformers import get_tokenizer
if r["ok"]:
    tok = get_tokenizer(argv[1], trust_remote_code=True)
    r["tokenizer_len"] = len(tok)
print(json.dumps(r))
'''


def _worker_path(argv, **env):
    cp = subprocess.run([sys.executable, "-c", CODE, json.dumps(argv)], capture_output=True, text=True, timeout=600,
                        env=clean_env(**env), cwd=str(ROOT))
    assert cp.returncode == 0, f"subprocess failed ({cp.returncode}):\n{cp.stdout[-3000:]}\n{cp.stderr[-6000:]}"
    return json.loads(cp.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_sglang_model_config_accepts_the_pair_only_with_the_plugin(pair):
    target, draft = pair
    argv = base_args(target) + spec_args(draft, "tree")
    on = _worker_path(argv)
    assert on["ok"], on
    assert on["target_ctx"] == on["draft_ctx"] == 8192 and on["draft_mpe"] > 8192  # extended past the target
    assert on["env_overwrite_after"] is None and on["tokenizer_len"] == TinySpec().vocab_size
    off = _worker_path(argv, SGLANG_KIMI_EAGLE3="0")
    assert not off["ok"] and off["stage"] == "draft" and off["type"] == "ValueError", off
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in off["error"]


@pytest.mark.slow
def test_check_passes_on_the_pair(pair):
    target, draft = pair
    cp = subprocess.run([sys.executable, "-m", "sglang_kimi_eagle3.cli", "check", *base_args(target),
                         *spec_args(draft, "chain"), "--for-gpu", "H200"],
                        capture_output=True, text=True, timeout=600, env=clean_env(COLUMNS="200"), cwd=str(ROOT))
    assert cp.returncode == 0, f"check exit {cp.returncode}:\n{cp.stdout[-4000:]}\n{cp.stderr[-3000:]}"
    assert "0 error(s)" in cp.stdout and "would start" in cp.stdout, cp.stdout[-2000:]
