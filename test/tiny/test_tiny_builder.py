"""The tiny model builder (sglang_kimi_eagle3.tiny): deterministic files; the seed's target shape (the Kimi-K2.5
wrapper, language model only; INT4 routed experts as Kimi-K2.5's compressed-tensors checkpoint; the text-only
model); a planted next-token rule with wide margins in both models, and a drafter of chosen agreement; the
Kimi-width measurement shapes; configs SGLang's real ModelConfig and model registry accept (and refuse without
the plugin, like the seed deployment); a tokenizer transformers loads; and `check` passing on every pair."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from helpers import ROOT, clean_env, python
from sglang_kimi_eagle3.tiny import BuildOptions, TinySpec, build, make_tensors, preset, proposals, successor
from sglang_kimi_eagle3.tiny.build import WRAPPER_PREFIX
from sglang_kimi_eagle3.tiny.launch import base_args, spec_args
from sglang_kimi_eagle3.tiny.quant import ROUTED
from sglang_kimi_eagle3.tiny.spec import KIMI_K25_PROFILE
from worker_path import WORKER_PATH

KINDS = {"wrapper": {}, "int4": {"int4": True}, "text": {"text_only": True}}
P = WRAPPER_PREFIX


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return {kind: build(root / kind, seed=0, **opts) for kind, opts in KINDS.items()}


@pytest.fixture(scope="module")
def pair(pairs):
    return pairs["wrapper"]


def _digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _rms_norm(x):
    return x / x.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt()


def _config(folder):
    return json.loads((folder / "config.json").read_text())


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
    build(tmp_path / "t", seed=0, text_only=True)  # other options: other files
    assert _config(target)["architectures"] == ["DeepseekV3ForCausalLM"]


def test_a_folder_of_the_users_is_never_overwritten(tmp_path, capsys):
    """OUT/target holding the user's own model (no tiny.json): its config.json and weights were replaced."""
    from sglang_kimi_eagle3.tiny.__main__ import main as tiny_main

    mine = tmp_path / "out" / "target"
    mine.mkdir(parents=True)
    (mine / "config.json").write_text('{"mine": true}')
    (mine / "model.safetensors").write_bytes(b"precious")
    assert tiny_main([str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and str(mine) in lines[0] and "config.json" in lines[0] and "another OUT" in lines[0], lines
    assert (mine / "config.json").read_text() == '{"mine": true}' and (mine / "model.safetensors").read_bytes() == b"precious"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["target"]  # refused before writing anything


@pytest.mark.parametrize("out,want", [("", "OUT is empty"), ("{tmp}/afile", "is a file, not a folder"),
                                       ("{tmp}/afile/sub", "Not a directory"), ("/proc/tiny-out", "OUT /proc/tiny-out")])
def test_an_out_that_cannot_be_written_is_one_line_exit_2(tmp_path, capsys, monkeypatch, out, want):
    """OUT '' built into the current folder; OUT a file, under a file, or in /proc ended in a traceback (exit 1)."""
    from sglang_kimi_eagle3.tiny.__main__ import main as tiny_main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    assert tiny_main([out.replace("{tmp}", str(tmp_path))]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and want in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


@pytest.mark.parametrize("argv,want", [(["--bogus"], "unrecognized arguments: --bogus"),
                                       (["{tmp}/o", "--bogus"], "unrecognized arguments: --bogus"),
                                       ([], "OUT is required"), (["{tmp}/o", "--seed", "x"], "argument --seed"),
                                       (["{tmp}/o", "--seed", "99999999999999999999"], "argument --seed"),
                                       (["{tmp}/o", "--seed", "100000000000000", "--draft-agreement", "0.5"],
                                        "argument --seed"),
                                       (["{tmp}/o", "--draft-agreement", "1.5"], "[0, 1]"),
                                       (["{tmp}/o", "--preset", "huge"], "argument --preset")])
def test_a_bad_argument_is_one_line_exit_2(tmp_path, capsys, argv, want):
    """argparse's usage block and error (three lines, SystemExit); `--bogus` alone was reported as the missing OUT."""
    from sglang_kimi_eagle3.tiny.__main__ import main as tiny_main

    assert tiny_main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and want in lines[0] and "--help" in lines[0], lines
    assert not list(tmp_path.iterdir())


def test_the_default_target_is_the_kimi_k25_wrapper_language_model_only(pair):
    target, draft = pair
    t, d = _config(target), _config(draft)
    assert t["architectures"] == ["KimiK25ForConditionalGeneration"] and t["model_type"] == "kimi_k25"
    assert t["language_model_only"] is True and "quantization_config" not in t["text_config"]
    text = t["text_config"]
    assert text["architectures"] == ["DeepseekV3ForCausalLM"] and text["model_type"] == "kimi_k2"  # as Kimi-K2.5's
    v = t["vision_config"]
    assert v["num_hidden_layers"] == v["vt_num_hidden_layers"] == 1 and v["text_hidden_size"] == text["hidden_size"]
    assert text["kv_lora_rank"] == 512 and text["qk_rope_head_dim"] == 64 and text["q_lora_rank"]  # MLA as Kimi-K2.5
    assert 0 < text["first_k_dense_replace"] < text["num_hidden_layers"] <= 4 and text["n_routed_experts"] > 1
    assert d["architectures"] == ["LlamaForCausalLMEagle3"]
    assert d["max_position_embeddings"] * 2 == text["max_position_embeddings"]  # the seed's mismatch
    assert d["draft_vocab_size"] < d["vocab_size"] == text["vocab_size"]
    names = load_file(str(target / "model.safetensors")).keys()
    assert all(k.startswith(P) for k in names) and P + "lm_head.weight" in names


def test_text_only_keeps_the_deepseek_v3_target(pairs):
    t = _config(pairs["text"][0])
    assert t["architectures"] == ["DeepseekV3ForCausalLM"] and "text_config" not in t
    assert t == _config(pairs["wrapper"][0])["text_config"] | {"model_type": "deepseek_v3"}
    assert "model.embed_tokens.weight" in load_file(str(pairs["text"][0] / "model.safetensors"))


def test_int4_quantization_config_is_kimi_k25s(pairs, tmp_path):
    kimi = json.loads(KIMI_K25_PROFILE.read_text())["text_config"]["quantization_config"]
    assert _config(pairs["int4"][0])["text_config"]["quantization_config"] == kimi
    assert "quantization_config" not in _config(pairs["int4"][0])  # in text_config, where Kimi-K2.5 has it
    t, _ = build(tmp_path, seed=0, text_only=True, int4=True)  # Kimi-K2-Thinking's layout: at the top
    assert _config(t)["quantization_config"] == kimi


def test_int4_tensors_have_the_compressed_tensors_names_and_dtypes(pairs):
    """Only the routed experts are packed (weight_packed int32 [out, in/8], weight_scale bf16 [out, in/32],
    weight_shape int32 = [out, in]); the scale is the group's max |w| / 7.5, so every bf16 weight lies within
    half a step of its 4-bit value (plus the bf16 rounding of the dequantized value); everything else is the bf16 build's tensor, unchanged."""
    from sglang_kimi_eagle3.tiny.quant import dequantize

    bf, q = (load_file(str(pairs[k][0] / "model.safetensors")) for k in ("wrapper", "int4"))
    routed = [k for k in bf if ROUTED.match(k)]
    assert len(routed) == 3 * 8 * 3  # 3 MoE layers x 8 experts x gate/up/down
    for name in routed:
        base = name[: -len(".weight")]
        out, inp = bf[name].shape
        packed, scale, shape = (q[f"{base}.weight_{s}"] for s in ("packed", "scale", "shape"))
        assert (packed.dtype, tuple(packed.shape)) == (torch.int32, (out, inp // 8)), name
        assert (scale.dtype, tuple(scale.shape)) == (torch.bfloat16, (out, inp // 32)), name
        assert shape.dtype == torch.int32 and shape.tolist() == [out, inp], name
        assert name not in q
    rest = {k: v for k, v in q.items() if not re.search(r"\.weight_(packed|scale|shape)$", k)}
    assert set(rest) == set(bf) - set(routed) and all(torch.equal(v, bf[k]) for k, v in rest.items())
    assert q[P + "model.layers.1.mlp.gate.e_score_correction_bias"].dtype == torch.float32
    deq = dequantize(q)
    for name in routed[:12]:
        base = name[: -len(".weight")]
        groups = bf[name].float().reshape(bf[name].shape[0], -1, 32)
        scale = q[base + ".weight_scale"].float()
        assert torch.allclose(scale, groups.abs().amax(-1) / 7.5, rtol=2 ** -7, atol=0), name  # min-max, symmetric
        step = scale.repeat_interleave(32, 1)
        assert ((deq[name].float() - bf[name].float()).abs() <= 0.55 * step).all(), name  # + bf16 rounding


def test_target_picks_the_planted_successor_with_a_wide_margin(pair):
    target, _ = pair
    w = load_file(str(target / "model.safetensors"))
    succ = torch.tensor(successor(target))
    logits = _rms_norm(w[P + "model.embed_tokens.weight"].float()) @ w[P + "lm_head.weight"].float().T
    top2 = logits.topk(2, dim=-1)
    assert torch.equal(top2.indices[:, 0], succ)
    margin = (top2.values[:, 0] - top2.values[:, 1]).min().item()
    assert margin > 2.0, f"smallest greedy margin {margin:.2f} logits: bf16 noise could flip it"


def _draft_choice(E, dw):
    """What a draft step proposes after each token: its residual is ~ BETA * normed embedding (weights.py)."""
    hot = dw["d2t"] + torch.arange(len(dw["d2t"]))
    return hot[(_rms_norm(2.0 * _rms_norm(E)) @ dw["lm_head.weight"].float().T).argmax(-1)], hot


def test_draft_proposes_the_successor_and_its_vocab_maps_back(pair):
    target, draft = pair
    tw, dw = load_file(str(target / "model.safetensors")), load_file(str(draft / "model.safetensors"))
    s = TinySpec()
    choice, hot = _draft_choice(tw[P + "model.embed_tokens.weight"].float(), dw)
    assert torch.equal(dw["t2d"].nonzero().flatten(), hot)  # t2d marks exactly the draft vocab
    assert torch.equal(dw["lm_head.weight"], tw[P + "lm_head.weight"][hot])
    succ = torch.tensor(successor(target))
    assert bool(dw["t2d"][succ].all()), "every successor must be in the draft vocab"
    assert torch.equal(choice, succ) and proposals(draft) == successor(target)
    assert dw["fc.weight"].shape == (s.hidden_size, 3 * s.hidden_size)


@pytest.mark.parametrize("q", [0.6, 0.3])
def test_draft_agreement_q_plants_a_q_fraction_of_right_proposals(pair, tmp_path, q):
    target, draft = build(tmp_path, seed=0, draft_agreement=q)
    same = {k: v for k, v in _digest(target).items() if k != "tiny.json"}  # (the stamp records the options)
    assert same == {k: v for k, v in _digest(pair[0]).items() if k != "tiny.json"}, "q must not change the target"
    succ, prop = torch.tensor(successor(target)), torch.tensor(proposals(draft))
    dw = load_file(str(draft / "model.safetensors"))
    choice, hot = _draft_choice(load_file(str(target / "model.safetensors"))[P + "model.embed_tokens.weight"].float(), dw)
    assert torch.equal(choice, prop), "the drafter's weights do not propose what proposals.json says"
    in_d = dw["t2d"]
    assert bool(in_d[prop].all()), "a wrong proposal must still be a draft-vocab token"
    right = prop == succ
    n = int(in_d.sum())
    assert int(right[in_d].sum()) == round(q * n), f"{int(right[in_d].sum())} of {n} draft-vocab tokens agree, asked {q}"
    assert abs(right[~in_d].float().mean().item() - q) < 0.01
    assert json.loads((draft / "tiny.json").read_text())["options"]["draft_agreement"] == q
    # greedy decoding walks succ's cycle over the draft vocab: there, position k is accepted given k-1 at ~q
    order = [int(hot[0])]
    while succ[order[-1]] != order[0]:
        order.append(int(succ[order[-1]]))
    ok = [bool(right[t]) for t in order]
    runs, prev = [True] * len(ok), len(ok)
    for k in range(3):
        runs = [a and ok[(i + k) % len(ok)] for i, a in enumerate(runs)]
        assert abs(sum(runs) / prev - q) < 0.01, f"draft position {k + 1}: {sum(runs)}/{prev} of the cycle's runs"
        prev = sum(runs)
    _t, again = build(tmp_path / "again", seed=0, draft_agreement=q)
    assert _digest(again) == _digest(draft)


def test_tokenizer_round_trips_and_fills_the_vocab(pair):
    from transformers import AutoTokenizer

    target, _ = pair
    tok = AutoTokenizer.from_pretrained(str(target))
    text = "Kimi-K2.5 + EAGLE-3, ünïcode 你好"
    assert tok.decode(tok(text).input_ids) == text
    assert len(tok) == TinySpec().vocab_size and tok.eos_token_id == 2


def test_kimi_width_has_the_launch_table_shapes():
    """--kimi-width on the meta device (no 8 GB on this box): vocab 163840, hidden 7168, drafters of 32000 and
    4000 rows (the R keys of ops/configs/NVIDIA_H200.draft_head.json), INT4 experts packed as for Kimi-K2.5."""
    spec = preset("kimi-width")
    t = make_tensors(spec, 0, BuildOptions(device="meta", int4=True, draft_agreement=0.6))
    assert tuple(t.target[P + "model.embed_tokens.weight"].shape) == (163840, 7168)
    assert tuple(t.target[P + "lm_head.weight"].shape) == (163840, 7168)
    assert {r: tuple(d["lm_head.weight"].shape) for r, d in t.drafts.items()} == {32000: (32000, 7168), 4000: (4000, 7168)}
    e = P + "model.layers.1.mlp.experts.7."
    assert t.target[e + "down_proj.weight_packed"].dtype == torch.int32
    assert tuple(t.target[e + "down_proj.weight_packed"].shape) == (7168, spec.moe_intermediate_size // 8)
    assert tuple(t.target[e + "gate_proj.weight_scale"].shape) == (spec.moe_intermediate_size, 7168 // 32)
    hot4000 = t.drafts[4000]["d2t"] + torch.arange(4000)
    assert bool(torch.isin(t.proposals, hot4000).all()), "the 4000-row drafter must hold every proposal"
    table = (ROOT / "python/sglang_kimi_eagle3/ops/configs/NVIDIA_H200.draft_head.json").read_text()
    assert all(f"R{rows}:H{spec.hidden_size}" in table for rows in t.drafts)


def test_int4_refuses_expert_shapes_the_marlin_moe_kernel_cannot_serve(tmp_path):
    with pytest.raises(ValueError, match="moe_intermediate_size 96 / TP 1"):
        build(tmp_path, spec=TinySpec(moe_intermediate_size=96), int4=True)
    cp = subprocess.run([sys.executable, "-m", "sglang_kimi_eagle3.tiny", str(tmp_path), "--draft-agreement", "1.5"],
                        capture_output=True, text=True, timeout=120, env=clean_env(), cwd=str(ROOT))
    assert cp.returncode == 2 and "--draft-agreement" in cp.stderr and "[0, 1]" in cp.stderr, cp.stderr


# appended to the worker-path code (one SGLang import for both): SGLang's own view of every built target
SGLANG_VIEW = r'''
import types
import torch
from sglang.srt.model_loader.utils import get_model_architecture
from sglang.srt.layers.quantization.compressed_tensors.compressed_tensors import CompressedTensorsConfig
from sglang.srt.layers.quantization.compressed_tensors.schemes import CompressedTensorsWNA16MoE
from sglang.srt.layers.quantization.compressed_tensors.utils import should_ignore_layer
from sglang.srt.layers.quantization.marlin_utils import check_moe_marlin_supports_layer
out = {}
for kind, path in json.loads(sys.argv[2]).items():
    mc = ModelConfig(path, trust_remote_code=True)
    r = out[kind] = {"config": type(mc.hf_config).__name__, "class": get_model_architecture(mc)[1],
                     "multimodal": mc.is_multimodal, "lm_only": mc.is_lm_only, "quantization": mc.quantization,
                     "quant_config": mc.hf_quant_config, "vocab": mc.hf_text_config.vocab_size,
                     "hidden": mc.hf_text_config.hidden_size}
    if not mc.hf_quant_config:
        continue
    # the names SGLang's modules carry inside the wrapper (DeepseekV3ForCausalLM built with prefix "")
    cfg = CompressedTensorsConfig.from_config(mc.hf_quant_config)
    names = ["lm_head", "model.layers.0.self_attn.kv_b_proj", "model.layers.1.mlp.shared_experts.down_proj",
             "model.layers.0.mlp.gate_up_proj", "model.layers.1.mlp.experts.0.gate_proj", "model.layers.1.mlp.experts.5.down_proj"]
    r["ignored"] = {n: should_ignore_layer(n, ignore=cfg.ignore, fused_mapping=cfg.packed_modules_mapping) for n in names}
    t = mc.hf_text_config
    for tp in (1, 2):
        layer = torch.nn.Module()
        layer.moe_tp_size = tp
        CompressedTensorsWNA16MoE(cfg, weight_quant=cfg.target_scheme_map["Linear"]["weights"]).create_weights(
            layer, num_experts=t.n_routed_experts, hidden_size=t.hidden_size,
            intermediate_size_per_partition=t.moe_intermediate_size // tp, params_dtype=torch.bfloat16)
        r[f"params_tp{tp}"] = {n: [list(p.shape), str(p.dtype)] for n, p in layer.named_parameters()}
        run = types.SimpleNamespace(apply_router_weight_on_input=False, is_gated=True, activation="silu")
        fake = types.SimpleNamespace(hidden_size=t.hidden_size, intermediate_size_per_partition=t.moe_intermediate_size // tp,
                                     moe_runner_config=run)
        r[f"marlin_tp{tp}"] = check_moe_marlin_supports_layer(fake, 32)
# the wrapper builds its vision tower and projector even language-model-only: SGLang's own classes, from our config
try:
    from sglang.srt.distributed import init_distributed_environment, initialize_model_parallel
    from sglang.srt.runtime_context import get_parallel
    from sglang.srt.utils.network import get_free_port
    from sglang.srt.models.kimi_k25 import K2VLMultiModalProjector, MoonViT3dPretrainedModel
    init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                 distributed_init_method=f"tcp://127.0.0.1:{get_free_port()}")
    initialize_model_parallel()
    get_parallel().override_permanently(attn_tp_rank=0)
    vc = ModelConfig(json.loads(sys.argv[2])["int4"], trust_remote_code=True).hf_config.vision_config
    modules = (MoonViT3dPretrainedModel(vc, prefix="vision_tower"), K2VLMultiModalProjector(vc))
    out["vision_params"] = sum(p.numel() for m in modules for p in m.parameters())
except Exception as exc:
    out["vision_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def sglang_view(pairs, tmp_path_factory):
    """(the int4 pair's launch with the plugin, SGLang's view of every target): one fresh SGLang process."""
    from sglang_kimi_eagle3.tiny.build import _write_json
    from sglang_kimi_eagle3.tiny.spec import wrapper_config

    kimi = tmp_path_factory.mktemp("kimi-width")
    _write_json(kimi / "config.json", wrapper_config(preset("kimi-width"), int4=True))
    paths = {k: str(t) for k, (t, _d) in pairs.items()} | {"kimi": str(kimi)}
    target, draft = pairs["int4"]
    lines = _worker_path(base_args(target) + spec_args(draft, "tree"), code=CODE + SGLANG_VIEW, extra=[json.dumps(paths)])
    return json.loads(lines[-2]), json.loads(lines[-1])


@pytest.mark.slow
def test_sglang_serves_the_real_classes_and_loads_the_int4_layout(sglang_view, pairs):
    """SGLang's own ModelConfig and model registry: the wrapper is KimiK25ForConditionalGeneration, language model
    only (no processor, not multimodal); INT4 is compressed-tensors with Kimi-K2.5's config; its ignore list keeps
    exactly the routed experts quantized under the names SGLang gives the modules; each expert tensor, transposed
    and split per rank, fills the parameter SGLang's WNA16 MoE method creates, at TP 1 and 2, within the MoE
    Marlin kernel's shape limits; SGLang builds the wrapper's (never run) vision tower from our minimal vision
    config. The Kimi-width configs too (config.json only)."""
    r = sglang_view[1]
    for kind in ("wrapper", "int4", "kimi"):
        assert r[kind]["class"] == "KimiK25ForConditionalGeneration" and r[kind]["config"] == "KimiK25Config", r[kind]
        assert r[kind]["lm_only"] and not r[kind]["multimodal"], r[kind]
    assert r["text"]["class"] == "DeepseekV3ForCausalLM" and r["text"]["quantization"] is None
    assert r["wrapper"]["quantization"] is None and r["wrapper"]["quant_config"] == {}
    kimi_q = json.loads(KIMI_K25_PROFILE.read_text())["text_config"]["quantization_config"]
    assert r["int4"]["quantization"] == "compressed-tensors" and r["int4"]["quant_config"] == kimi_q
    assert (r["kimi"]["vocab"], r["kimi"]["hidden"]) == (163840, 7168)
    assert 0 < r.get("vision_params", 0) < 500_000, r.get("vision_error")  # built, and tiny (Kimi-K2.5's: ~400M)
    assert r["int4"]["ignored"] == {"lm_head": True, "model.layers.0.self_attn.kv_b_proj": True,
                                    "model.layers.1.mlp.shared_experts.down_proj": True,
                                    "model.layers.0.mlp.gate_up_proj": True, "model.layers.1.mlp.experts.0.gate_proj": False,
                                    "model.layers.1.mlp.experts.5.down_proj": False}
    q = load_file(str(pairs["int4"][0] / "model.safetensors"))
    e = P + "model.layers.2.mlp.experts.4."
    for tp in (1, 2):
        params = r["int4"][f"params_tp{tp}"]
        assert r["int4"][f"marlin_tp{tp}"] and r["kimi"][f"marlin_tp{tp}"], f"MoE Marlin kernel refuses the shapes at TP {tp}"
        for proj, (w, s) in {"gate_proj": ("w13_weight_packed", "w13_weight_scale"),
                             "down_proj": ("w2_weight_packed", "w2_weight_scale")}.items():
            for suffix, param in (("packed", w), ("scale", s)):
                ours = q[f"{e}{proj}.weight_{suffix}"].T  # SGLang's params are transposed (is_transposed)
                shape, dtype = params[param]
                n = shape[2] // 2 if proj == "gate_proj" else shape[1]  # w13 holds gate and up side by side
                per_rank = list(ours.shape)
                per_rank[1 if proj == "gate_proj" else 0] //= tp
                assert per_rank == ([shape[1], n] if proj == "gate_proj" else [n, shape[2]]), (tp, proj, suffix)
                assert dtype == str(ours.dtype), (tp, proj, suffix, dtype)


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


def _worker_path(argv, code=CODE, extra=(), **env):
    cp = python(["-c", code, json.dumps(argv), *extra], timeout=600, env=clean_env(**env))
    assert cp.returncode == 0, f"subprocess failed ({cp.returncode}):\n{cp.stdout[-3000:]}\n{cp.stderr[-6000:]}"
    return cp.stdout.strip().splitlines()


@pytest.mark.slow
def test_sglang_model_config_accepts_the_pair_only_with_the_plugin(sglang_view, pairs):
    target, draft = pairs["int4"]
    on = sglang_view[0]
    assert on["ok"], on
    assert on["target_ctx"] == on["draft_ctx"] == 8192 and on["draft_mpe"] > 8192  # extended past the target
    assert on["env_overwrite_after"] is None and on["tokenizer_len"] == TinySpec().vocab_size
    off = json.loads(_worker_path(base_args(target) + spec_args(draft, "tree"), SGLANG_KIMI_EAGLE3="0")[-1])
    assert not off["ok"] and off["stage"] == "draft" and off["type"] == "ValueError", off
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in off["error"]


CHECK = r'''
import contextlib, io, json, sys
from sglang_kimi_eagle3.commands import check as check_cmd
out = {}
for kind, argv in json.loads(sys.argv[1]).items():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = check_cmd.main(argv + ["--json"])
    text = buf.getvalue()
    out[kind] = {"rc": rc, "report": json.loads(text[text.index("{"):])}
print(json.dumps(out))
'''


@pytest.mark.slow
def test_check_passes_on_every_pair_and_reports_int4_as_for_kimi_k25(pairs):
    argvs = {kind: [*base_args(t), *spec_args(d, "chain"), "--for-gpu", "H200"] for kind, (t, d) in pairs.items()}
    cp = python(["-c", CHECK, json.dumps(argvs)], timeout=600, env=clean_env())
    assert cp.returncode == 0, f"check subprocess failed ({cp.returncode}):\n{cp.stdout[-3000:]}\n{cp.stderr[-4000:]}"
    res = json.loads(cp.stdout.strip().splitlines()[-1])
    for kind, r in res.items():
        assert r["rc"] == 0 and r["report"]["errors"] == 0, (kind, r["report"]["findings"])
        quant = [f["found"] for f in r["report"]["findings"] if f["check"] == "quantization"]
        if kind == "int4":
            assert quant and quant[0].startswith("target compressed-tensors int4 (group 32) (lm_head kept in bf16)"), quant
        else:
            assert not any(q.startswith("target ") for q in quant), (kind, quant)
    caps = {k: [f["found"] for f in r["report"]["findings"] if f["check"] == "capture_support"] for k, r in res.items()}
    assert caps["int4"] == ["KimiK25ForConditionalGeneration exposes the EAGLE-3 target interface"], caps


def test_help_reads_as_prose_at_a_narrow_terminal():
    """The description's first line was wrapped as a shell command (it began `python -m ...`): quoted words and a
    backslash in the help. It reads as written, wrapped at the terminal's width."""
    p = python(["-m", "sglang_kimi_eagle3.tiny", "--help"], env=clean_env(COLUMNS="80"), timeout=120)
    assert p.returncode == 0, p.stderr
    head = p.stdout.split("The target is")[0]
    assert "'(OUT/target,'" not in head and "\\" not in head, head
    assert "build the tiny target/draft pair" in " ".join(head.split()).lower(), head
