"""The tiny pair run forward on CPU. The target, each kind the builder writes (the Kimi-K2.5 wrapper in bf16,
the wrapper with INT4 routed experts, the text-only model), is loaded into transformers' own
DeepseekV3ForCausalLM (the wrapper's `language_model.` weights, INT4 experts dequantized by compressed-tensors'
own decompress; every checkpoint tensor loads, none missing or unexpected; MLA, MoE routing and YaRN really
run) and follows its planted rule with a wide margin. The drafter, run through a plain-torch copy of SGLang's
LlamaForCausalLMEagle3 math (llama_eagle3.py: fc over the aux states, cat(input_layernorm(embed),
hidden_norm(hidden)) into q/k/v, RoPE, causal attention, o_proj + residual, MLP, norm, lm_head over the draft
vocab, d2t), proposes the target's next token at draft steps 1 and 2, so on the GPU its drafts get accepted;
built with --draft-agreement q it proposes it after a q-fraction of the tokens, and a wrong token otherwise."""

from __future__ import annotations

import json
import random

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from sglang_kimi_eagle3.tiny import TinySpec, build, proposals, successor
from sglang_kimi_eagle3.tiny.build import WRAPPER_PREFIX

KINDS = {"wrapper": {}, "int4": {"int4": True}, "text": {"text_only": True}}


def reference_model(target, scratch):
    """transformers' DeepseekV3ForCausalLM holding a built target's text weights (dequantized), loaded by
    from_pretrained from a plain text-model copy in `scratch`; every tensor used, none missing."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    cfg = json.loads((target / "config.json").read_text())
    text = dict(cfg.get("text_config", cfg), model_type="deepseek_v3")
    w = load_file(str(target / "model.safetensors"))
    if "text_config" in cfg:
        assert all(k.startswith(WRAPPER_PREFIX) for k in w), "wrapper weights must all sit under language_model."
        w = {k[len(WRAPPER_PREFIX):]: v for k, v in w.items()}
    if text.pop("quantization_config", None):
        from sglang_kimi_eagle3.tiny.quant import dequantize

        w = dequantize(w)
    scratch.mkdir(parents=True)
    (scratch / "config.json").write_text(json.dumps(text))
    save_file({k: v.contiguous() for k, v in w.items()}, str(scratch / "model.safetensors"))
    model, info = AutoModelForCausalLM.from_pretrained(str(scratch), dtype=torch.float32, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    return model


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return {kind: build(root / kind, seed=0, **opts) for kind, opts in KINDS.items()}


@pytest.fixture(scope="module")
def models(built, tmp_path_factory):
    root = tmp_path_factory.mktemp("reference")
    return {kind: reference_model(built[kind][0], root / kind) for kind in ("wrapper", "int4")}


def _rms(x, w):
    return x / x.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt() * w


def _rope(x, theta=10000.0):  # x [T, heads, d], neox halves as Llama
    d = x.shape[-1]
    f = torch.arange(x.shape[0])[:, None].float() / theta ** (torch.arange(0, d, 2).float() / d)[None]
    cos, sin = torch.cat([f.cos()] * 2, -1)[:, None], torch.cat([f.sin()] * 2, -1)[:, None]
    return x * cos + torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1) * sin


def _draft(w, embeds, hidden, fc: bool, nh: int = TinySpec().draft_heads):
    """One LlamaForCausalLMEagle3 forward over T positions: (draft vocab argmax as target ids, pre-norm out)."""
    p, T = "midlayer.", embeds.shape[0]
    hidden = hidden @ w["fc.weight"].T if fc else hidden
    x = torch.cat([_rms(embeds, w[p + "input_layernorm.weight"]), _rms(hidden, w[p + "hidden_norm.weight"])], -1)
    q, k, v = (x @ w[f"{p}self_attn.{n}_proj.weight"].T for n in "qkv")
    q, k, v = (t.view(T, nh, -1) for t in (q, k, v))
    q, k = _rope(q), _rope(k)
    scores = torch.einsum("qhd,khd->hqk", q, k) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    h = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(T, -1) @ w[p + "self_attn.o_proj.weight"].T + hidden
    n = _rms(h, w[p + "post_attention_layernorm.weight"])
    out = (F.silu(n @ w[p + "mlp.gate_proj.weight"].T) * (n @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T + h
    hot = w["d2t"].long() + torch.arange(len(w["d2t"]))
    return hot[(_rms(out, w["norm.weight"]) @ w["lm_head.weight"].T).argmax(-1)], out


def _draft_tensors(draft):
    return {k: v.float() for k, v in load_file(str(draft / "model.safetensors")).items()}


def _sequences(succ, n=6, new=12):
    """(prompt length, prompt + the `new` tokens greedy decoding must give) for seeded random prompts."""
    rng, v = random.Random(0), TinySpec().vocab_size
    for _ in range(n):
        ids = [rng.randrange(3, v) for _ in range(rng.choice((4, 17, 64)))]
        plen = len(ids)
        while len(ids) < plen + new:
            ids.append(succ[ids[-1]])
        yield plen, torch.tensor(ids)


def _aux(model, seq):
    hs = model(seq[None], output_hidden_states=True).hidden_states
    return torch.cat([hs[i][0] for i in TinySpec().aux_layer_ids], -1)  # inputs of layers 0, 1, 2


@pytest.mark.parametrize("kind", ["wrapper", "int4"])
@torch.no_grad()
def test_target_forward_follows_the_planted_rule_with_margin(models, built, kind):
    """At every position from the prompt's end on, the argmax is the next token of the planted chain, so greedy
    decoding produces exactly that chain (one forward pass per sequence stands for the token-by-token loop)."""
    model, succ = models[kind], successor(built[kind][0])
    for plen, seq in _sequences(succ):
        top2 = model(seq[None]).logits[0, plen - 1:-1].topk(2, -1)
        assert top2.indices[:, 0].tolist() == seq[plen:].tolist(), f"{kind}: greedy choice does not follow successor.json"
        assert (top2.values[:, 0] - top2.values[:, 1]).min() > 2.0, f"{kind}: greedy margin below 2 logits through the real layers"


def test_the_text_only_target_holds_the_wrappers_weights(built):
    """--text-only changes only where the weights sit (no `language_model.`) and the config, not a value."""
    a = load_file(str(built["wrapper"][0] / "model.safetensors"))
    b = load_file(str(built["text"][0] / "model.safetensors"))
    assert {WRAPPER_PREFIX + k for k in b} == set(a)
    assert all(torch.equal(a[WRAPPER_PREFIX + k], v) for k, v in b.items())


@torch.no_grad()
def test_int4_experts_are_really_quantized(models):
    """The dequantized INT4 experts are the bf16 ones up to 4-bit rounding: neither equal nor far."""
    a = models["wrapper"].state_dict()["model.layers.1.mlp.experts.down_proj"][3]
    b = models["int4"].state_dict()["model.layers.1.mlp.experts.down_proj"][3]
    err = (a - b).abs().max() / a.abs().max()
    assert 0 < err < 0.1, f"relative INT4 error {err:.4f}"
    assert len(torch.unique(b.reshape(-1, 32)[0])) <= 16  # one group: at most 16 levels


def test_the_drafter_is_the_same_for_every_target_kind(built):
    digests = {kind: (draft / "model.safetensors").read_bytes() for kind, (_t, draft) in built.items()}
    assert len(set(digests.values())) == 1, "one seed must give one drafter whatever the target's storage"


def _drafts_follow(model, succ, w, nh=TinySpec().draft_heads):
    E = model.model.embed_tokens.weight
    for _plen, seq in _sequences(succ):
        aux = _aux(model, seq)
        # step 1 at every position j: input token seq[j+1] with the target's aux at j proposes seq[j+2]
        pred, out = _draft(w, E[seq[1:]], aux[:-1], fc=True, nh=nh)
        assert pred.tolist() == [succ[t] for t in seq[1:].tolist()]
        # step 2 at the end: the proposed token with step 1's pre-norm hidden proposes its successor
        hidden = torch.cat([aux[:-1] @ w["fc.weight"].T, out[-1:]])
        pred2, _ = _draft(w, torch.cat([E[seq[1:]], E[pred[-1:]]]), hidden, fc=False, nh=nh)
        assert pred2[-1].item() == succ[pred[-1].item()]


@torch.no_grad()
def test_drafter_proposes_the_next_token_at_steps_1_and_2(models, built):
    _drafts_follow(models["int4"], successor(built["int4"][0]), _draft_tensors(built["int4"][1]))


# one TP-8 rank's drafter attention is 8 x 128 wide against Kimi's hidden 7168 (the deploy preset): here 4 x 64 = 256
# against 512, the embeddings in those 256 dimensions (weights.attn_basis)
NARROW = TinySpec(draft_heads=4, draft_head_dim=64)


@pytest.fixture(scope="module")
def narrow(tmp_path_factory):
    root = tmp_path_factory.mktemp("narrow")
    target, draft = build(root / "int4", seed=0, spec=NARROW, int4=True)
    return target, draft, reference_model(target, root / "reference")


@torch.no_grad()
def test_a_drafter_attention_narrower_than_the_hidden_state_keeps_both_rules(narrow):
    target, draft, model = narrow
    cfg = json.loads((draft / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["head_dim"], cfg["hidden_size"]) == (4, 64, 512)
    w = _draft_tensors(draft)
    assert w["midlayer.self_attn.q_proj.weight"].shape == (256, 1024)
    assert w["midlayer.self_attn.o_proj.weight"].shape == (512, 256)
    succ = successor(target)
    for plen, seq in _sequences(succ):
        top2 = model(seq[None]).logits[0, plen - 1:-1].topk(2, -1)
        assert top2.indices[:, 0].tolist() == seq[plen:].tolist()
        assert (top2.values[:, 0] - top2.values[:, 1]).min() > 2.0
    _drafts_follow(model, succ, w, nh=NARROW.draft_heads)


@pytest.fixture(scope="module")
def cycle(models, built):
    """Every token of the draft vocab once, in the target's own cycle order (what greedy decoding visits), and
    the target's aux hidden states along it."""
    succ = successor(built["wrapper"][0])
    order = [int(torch.tensor(succ).unique()[0])]
    while succ[order[-1]] != order[0]:
        order.append(succ[order[-1]])
    seq = torch.tensor([5] + order)
    with torch.no_grad():
        return order, seq, _aux(models["wrapper"], seq)


@pytest.mark.parametrize("q", [0.6, 0.3])
@torch.no_grad()
def test_draft_agreement_is_the_fraction_asked(tmp_path, models, cycle, q):
    """Along the whole cycle, the drafter's step-1 proposal (reference forward) is the target's next token for a
    q-fraction of the tokens, and exactly what proposals.json says for every token."""
    target, draft = build(tmp_path, seed=0, draft_agreement=q)
    succ, prop, (order, seq, aux) = successor(target), proposals(draft), cycle
    assert len(order) == TinySpec().draft_vocab_size
    pred, _ = _draft(_draft_tensors(draft), models["wrapper"].model.embed_tokens.weight[seq[1:]], aux[:-1], fc=True)
    assert pred.tolist() == [prop[t] for t in order], "the drafter does not propose what proposals.json says"
    agree = sum(p == succ[t] for p, t in zip(pred.tolist(), order)) / len(order)
    assert abs(agree - q) < 0.01, f"asked for agreement {q}, the drafter agrees on {agree:.3f} of the cycle"
