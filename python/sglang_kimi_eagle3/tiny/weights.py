"""Random weights for the tiny pair, with a planted next-token rule both models follow (torch only).

Random weights alone give a target whose greedy choices sit on near-ties, so bf16 noise between
SGLang's decode and verify kernels would flip tokens, and a random drafter would never be accepted.
Instead, with a seeded successor map `succ` (a cycle over the draft vocab D; every other token maps
into D):
  target: the residual stream is dominated by the current token's embedding (block outputs are scaled
    down by `out_scale`), and lm_head row u = gamma * sum of E[t] over t with succ(t) = u, so
    argmax = succ(last token) by a margin of hundreds of logit standard deviations; the layers still
    run (MLA, MoE routing, KV cache) and add a small context-dependent term.
  draft: attention whose q/k read only the (normed) input embedding, with a self-match score far
    above any other position, and v = embed - hidden_norm(hidden), o_proj = beta * I, fc = beta * I on
    the first aux state (the target's layer-0 input = E[t]); the residual stream of draft step k is then
    beta * E[x_k], so each step proposes succ(x_k) and most drafts are accepted.
Outputs stay exact whatever the drafter proposes: the target verifies every token.
"""

from __future__ import annotations

import torch

from .spec import SPECIAL_IDS, TinySpec

GAMMA = 0.04  # lm_head scale: the planted logit ~ GAMMA * hidden_size (~20 at 512)
ALPHA = 3.0  # draft q/k gain: self-match score ~ ALPHA^2 * sqrt(head_dim) (~100) vs ~ALPHA^2 for others
BETA = 2.0  # draft o_proj / fc gain
INIT_STD = 0.02
OUT_SCALE = 0.1  # block output projections (o_proj, down_proj): std INIT_STD * OUT_SCALE


def successor_map(s: TinySpec, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(draft vocab D as target ids [Vd], succ [V]): a random cycle on D; tokens outside D map into D."""
    candidates = torch.tensor([t for t in range(s.vocab_size) if t not in SPECIAL_IDS])
    D = candidates[torch.randperm(len(candidates), generator=g)[: s.draft_vocab_size]].sort().values
    succ = D[torch.randint(0, len(D), (s.vocab_size,), generator=g)]
    order = D[torch.randperm(len(D), generator=g)]
    succ[order] = torch.roll(order, -1)  # cycle: order[k] -> order[k+1]
    return D, succ


def _randn(g, *shape, std=1.0):
    return torch.randn(*shape, generator=g) * std


def target_weights(s: TinySpec, g: torch.Generator, E: torch.Tensor, succ: torch.Tensor) -> dict[str, torch.Tensor]:
    """DeepseekV3ForCausalLM checkpoint tensors (HF names, fp32; the caller casts)."""
    H, nh = s.hidden_size, s.num_heads
    w: dict[str, torch.Tensor] = {"model.embed_tokens.weight": E}
    lo = INIT_STD * OUT_SCALE

    def mlp(prefix, inter):
        w[f"{prefix}.gate_proj.weight"] = _randn(g, inter, H, std=INIT_STD)
        w[f"{prefix}.up_proj.weight"] = _randn(g, inter, H, std=INIT_STD)
        w[f"{prefix}.down_proj.weight"] = _randn(g, H, inter, std=lo)

    for i in range(s.num_layers):
        p = f"model.layers.{i}"
        w[f"{p}.input_layernorm.weight"] = torch.ones(H)
        w[f"{p}.post_attention_layernorm.weight"] = torch.ones(H)
        a = f"{p}.self_attn"
        w[f"{a}.q_a_proj.weight"] = _randn(g, s.q_lora_rank, H, std=INIT_STD)
        w[f"{a}.q_a_layernorm.weight"] = torch.ones(s.q_lora_rank)
        w[f"{a}.q_b_proj.weight"] = _randn(g, nh * (s.qk_nope_head_dim + s.qk_rope_head_dim), s.q_lora_rank, std=INIT_STD)
        w[f"{a}.kv_a_proj_with_mqa.weight"] = _randn(g, s.kv_lora_rank + s.qk_rope_head_dim, H, std=INIT_STD)
        w[f"{a}.kv_a_layernorm.weight"] = torch.ones(s.kv_lora_rank)
        w[f"{a}.kv_b_proj.weight"] = _randn(g, nh * (s.qk_nope_head_dim + s.v_head_dim), s.kv_lora_rank, std=INIT_STD)
        w[f"{a}.o_proj.weight"] = _randn(g, H, nh * s.v_head_dim, std=lo)
        if i < s.first_k_dense_replace:
            mlp(f"{p}.mlp", s.intermediate_size)
            continue
        w[f"{p}.mlp.gate.weight"] = _randn(g, s.n_routed_experts, H, std=INIT_STD)
        w[f"{p}.mlp.gate.e_score_correction_bias"] = torch.zeros(s.n_routed_experts)
        for e in range(s.n_routed_experts):
            mlp(f"{p}.mlp.experts.{e}", s.moe_intermediate_size)
        mlp(f"{p}.mlp.shared_experts", s.moe_intermediate_size)
    w["model.norm.weight"] = torch.ones(H)
    head = _randn(g, s.vocab_size, H, std=INIT_STD)  # rows never planted: logits ~ 0
    planted = torch.zeros(s.vocab_size, H).index_add_(0, succ, E)  # row u = sum of E[t], succ(t) = u
    hit = torch.zeros(s.vocab_size, dtype=torch.bool)
    hit[succ] = True
    head[hit] = GAMMA * planted[hit]
    w["lm_head.weight"] = head
    return w


def draft_weights(s: TinySpec, g: torch.Generator, target_head: torch.Tensor, D: torch.Tensor) -> dict[str, torch.Tensor]:
    """LlamaForCausalLMEagle3 checkpoint tensors (SpecForge names: midlayer.*, fc, norm, lm_head, d2t, t2d).

    No embed_tokens: SGLang gives an EAGLE-3 drafter the target's embedding (set_embed)."""
    H = s.hidden_size
    eye, zero = torch.eye(H), torch.zeros(H, H)
    w = {
        "midlayer.input_layernorm.weight": torch.ones(H),
        "midlayer.hidden_norm.weight": torch.ones(H),
        "midlayer.post_attention_layernorm.weight": torch.ones(H),
        # input to q/k/v is cat(input_layernorm(embed), hidden_norm(hidden)) [2H]
        "midlayer.self_attn.q_proj.weight": torch.cat([ALPHA * eye, zero], 1),
        "midlayer.self_attn.k_proj.weight": torch.cat([ALPHA * eye, zero], 1),
        "midlayer.self_attn.v_proj.weight": torch.cat([eye, -eye], 1),
        "midlayer.self_attn.o_proj.weight": BETA * eye,
        "midlayer.mlp.gate_proj.weight": _randn(g, s.draft_intermediate_size, H, std=INIT_STD),
        "midlayer.mlp.up_proj.weight": _randn(g, s.draft_intermediate_size, H, std=INIT_STD),
        "midlayer.mlp.down_proj.weight": _randn(g, H, s.draft_intermediate_size, std=INIT_STD * OUT_SCALE),
        # fc over the 3 aux states: beta * the first (the target's layer-0 input, i.e. E[t])
        "fc.weight": torch.cat([BETA * eye] + [zero] * (len(s.aux_layer_ids) - 1), 1),
        "norm.weight": torch.ones(H),
        "lm_head.weight": target_head[D].clone(),  # draft id d <-> target id D[d]
        "d2t": D - torch.arange(len(D)),  # SGLang: hot_token_id = d2t + arange
    }
    t2d = torch.zeros(s.vocab_size, dtype=torch.bool)
    t2d[D] = True
    w["t2d"] = t2d
    return w
