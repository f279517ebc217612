"""The tiny pair run forward on CPU: the target through transformers' own DeepseekV3ForCausalLM (every
checkpoint tensor loads, none missing or unexpected; MLA, MoE routing and YaRN really run) follows its
planted rule, and the drafter, run through a plain-torch copy of SGLang's LlamaForCausalLMEagle3 math
(llama_eagle3.py: fc over the aux states, cat(input_layernorm(embed), hidden_norm(hidden)) into q/k/v,
RoPE, causal attention, o_proj + residual, MLP, norm, lm_head over the draft vocab, d2t), proposes the
target's next token at draft steps 1 and 2, so on the GPU its drafts get accepted."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from sglang_kimi_eagle3.tiny import TinySpec, build, successor


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    target, draft = build(tmp_path_factory.mktemp("tiny"), seed=0)
    model, info = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32, output_loading_info=True)
    return model, info, {k: v.float() for k, v in load_file(str(draft / "model.safetensors")).items()}, successor(target)


def _rms(x, w):
    return x / x.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt() * w


def _rope(x, theta=10000.0):  # x [T, heads, d], neox halves as Llama
    d = x.shape[-1]
    f = torch.arange(x.shape[0])[:, None].float() / theta ** (torch.arange(0, d, 2).float() / d)[None]
    cos, sin = torch.cat([f.cos()] * 2, -1)[:, None], torch.cat([f.sin()] * 2, -1)[:, None]
    return x * cos + torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1) * sin


def _draft(w, embeds, hidden, fc: bool):
    """One LlamaForCausalLMEagle3 forward over T positions: (draft vocab argmax as target ids, pre-norm out)."""
    s, p = TinySpec(), "midlayer."
    nh, T = s.draft_heads, embeds.shape[0]
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


def _sequences(model, n=6, new=12):
    rng, v = random.Random(0), TinySpec().vocab_size
    for _ in range(n):
        ids = torch.tensor([[rng.randrange(3, v) for _ in range(rng.choice((4, 17, 64)))]])
        yield ids.shape[1], model.generate(ids, max_new_tokens=new, do_sample=False)[0]


def test_transformers_loads_every_target_tensor(pair):
    _model, info, _w, _succ = pair
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info


@torch.no_grad()
def test_target_forward_follows_the_planted_rule_with_margin(pair):
    model, _info, _w, succ = pair
    for plen, seq in _sequences(model):
        out = seq[plen:].tolist()
        assert out == [succ[t] for t in seq[plen - 1:-1].tolist()], "greedy output does not follow successor.json"
        top2 = model(seq[None]).logits[0, plen - 1:].topk(2, -1).values
        assert (top2[:, 0] - top2[:, 1]).min() > 2.0, "greedy margin below 2 logits through the real layers"


@torch.no_grad()
def test_drafter_proposes_the_next_token_at_steps_1_and_2(pair):
    model, _info, w, succ = pair
    E = model.model.embed_tokens.weight
    for _plen, seq in _sequences(model):
        hs = model(seq[None], output_hidden_states=True).hidden_states
        aux = torch.cat([hs[i][0] for i in TinySpec().aux_layer_ids], -1)  # inputs of layers 0, 1, 2
        # step 1 at every position j: input token seq[j+1] with the target's aux at j proposes seq[j+2]
        pred, out = _draft(w, E[seq[1:]], aux[:-1], fc=True)
        assert pred.tolist() == [succ[t] for t in seq[1:].tolist()]
        # step 2 at the end: the proposed token with step 1's pre-norm hidden proposes its successor
        hidden = torch.cat([aux[:-1] @ w["fc.weight"].T, out[-1:]])
        pred2, _ = _draft(w, torch.cat([E[seq[1:]], E[pred[-1:]]]), hidden, fc=False)
        assert pred2[-1].item() == succ[pred[-1].item()]
