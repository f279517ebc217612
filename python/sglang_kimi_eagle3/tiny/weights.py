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
    beta * E[x_k], so each step proposes prop(x_k), where the draft lm_head row u = gamma * sum of E[t]
    over t with prop(t) = u. A drafter attention narrower than the hidden state (draft_head_dim: A = heads x head
    size < H) uses a basis P [A, H] (orthonormal rows) in place of I, and the embeddings lie in P's rows (attn_basis).
With draft agreement q = 1 (the default) prop = succ and the draft lm_head is the target's own rows, so
every draft is accepted. With q < 1, prop(t) = succ(t) for a seeded q-fraction of the tokens (exactly
round(q * n) of the draft vocab's n tokens, and of the rest) and another draft-vocab token otherwise,
chosen so that along the cycle greedy decoding walks, the acceptance of draft position k given k - 1 is
q (within a few hundredths) for k = 1..3.
Outputs stay exact whatever the drafter proposes: the target verifies every token.

Every tensor is made on one torch device (`device`; "meta" gives shapes only); the vocabulary maps
always come from a CPU generator, so they are the same for a seed on any device.
"""

from __future__ import annotations

import torch

from .spec import SPECIAL_IDS, TinySpec

GAMMA = 0.04  # lm_head scale: the planted logit ~ GAMMA * hidden_size (~20 at 512)
ALPHA = 3.0  # draft q/k gain: self-match score ~ ALPHA^2 * sqrt(head_dim) (~100) vs ~ALPHA^2 for others
BETA = 2.0  # draft o_proj / fc gain
INIT_STD = 0.02
OUT_SCALE = 0.1  # block output projections (o_proj, down_proj): std INIT_STD * OUT_SCALE


def vocab_maps(s: TinySpec, g: torch.Generator) -> tuple[dict[int, torch.Tensor], torch.Tensor]:
    """({rows: that drafter's vocab as sorted target ids}, succ [V]).

    Nested random subsets of the ordinary tokens, one per drafter size; succ is a random cycle on the
    smallest, and every other token maps into it."""
    candidates = torch.tensor([t for t in range(s.vocab_size) if t not in SPECIAL_IDS])
    pick = candidates[torch.randperm(len(candidates), generator=g)[: s.draft_vocab_size]]
    vocabs = {rows: pick[:rows].sort().values for rows in (s.draft_vocab_size, *s.draft_variants)}
    D = vocabs[s.succ_vocab_size]
    succ = D[torch.randint(0, len(D), (s.vocab_size,), generator=g)]
    order = D[torch.randperm(len(D), generator=g)]
    succ[order] = torch.roll(order, -1)  # cycle: order[k] -> order[k+1]
    return vocabs, succ


DEPTH = 3  # draft positions whose conditional acceptance the agreement is tuned for (EAGLE3 steps 3)
TRIES = 64  # seeded candidate choices of the agreeing tokens; the one closest to q at every depth wins


def _cycle(succ: torch.Tensor, D: torch.Tensor) -> list[int]:
    """D in the order greedy decoding visits it (succ is a single cycle on D)."""
    order = [int(D[0])]
    while len(order) < len(D):
        order.append(int(succ[order[-1]]))
    return order


def _conditional_rates(right: list[bool], depth: int = DEPTH) -> list[float]:
    """Along a cyclic sequence of agree/disagree: for k = 1..depth, the share of the runs of k-1 agreeing tokens
    that the next token continues (the acceptance of draft position k given position k-1)."""
    n = len(right)
    runs, prev, out = [True] * n, n, []  # runs[i]: the k tokens from position i all agree
    for k in range(depth):
        runs = [r and right[(i + k) % n] for i, r in enumerate(runs)]
        cur = sum(runs)
        out.append(cur / prev if prev else 0.0)
        prev = cur
    return out


def draft_proposals(succ: torch.Tensor, D: torch.Tensor, q: float, seed: int) -> torch.Tensor:
    """prop [V]: what the drafter proposes after each token. succ itself for q = 1; otherwise succ(t) for
    exactly round(q * n) of the n tokens of D (and of the tokens outside it) and a different token of D for
    the others. Greedy decoding walks the cycle of D, so the acceptance of draft position k given k-1 is the
    share of agreeing runs that go on along the cycle: of TRIES seeded choices of the agreeing tokens, the one
    whose shares for k = 1..DEPTH are closest to q (largest gap smallest) is kept. Seeded by its own generator."""
    if q >= 1.0:
        return succ.clone()
    g = torch.Generator().manual_seed(1_000_003 * seed + 7)
    V, in_d = len(succ), torch.zeros(len(succ), dtype=torch.bool)
    in_d[D] = True
    order = torch.tensor(_cycle(succ, D))
    m, best = round(q * len(order)), None
    for _ in range(TRIES):
        pick = torch.zeros(len(order), dtype=torch.bool)
        pick[torch.randperm(len(order), generator=g)[:m]] = True
        gap = max(abs(r - q) for r in _conditional_rates(pick.tolist()))
        if best is None or gap < best[0]:
            best = (gap, pick)
    right = torch.zeros(V, dtype=torch.bool)
    right[order[best[1]]] = True
    rest = (~in_d).nonzero().flatten()
    right[rest[torch.randperm(len(rest), generator=g)[: round(q * len(rest))]]] = True
    pos = torch.searchsorted(D, succ)  # succ(t) = D[pos[t]]
    shift = 1 + torch.randint(0, len(D) - 1, (V,), generator=g)  # 1 .. n-1: never succ itself
    return torch.where(right, succ, D[(pos + shift) % len(D)])


def _randn(g, shape, std, device):
    if str(device) == "meta":
        return torch.empty(*shape, device="meta")
    return torch.randn(*shape, generator=g, device=device) * std


def attn_basis(s: TinySpec, device="cpu") -> torch.Tensor | None:
    """P [A, H] with orthonormal rows: the subspace the token embeddings lie in when the drafter's attention is
    narrower than the hidden state (A = draft_attn_width < hidden_size); None when it is as wide. Seeded by the
    shapes alone (its own generator), so a spec always gets the same one."""
    A, H = s.draft_attn_width, s.hidden_size
    if A >= H:
        return None
    if str(device) == "meta":
        return torch.empty(A, H, device="meta")
    g = torch.Generator().manual_seed(7_919 * A + H)
    q, _ = torch.linalg.qr(torch.randn(H, A, generator=g))
    return q.T.contiguous().to(device)


def embedding(s: TinySpec, g: torch.Generator, device="cpu") -> torch.Tensor:
    """E [V, H], standard normal entries; with a narrower drafter attention, Z [V, A] @ P scaled by sqrt(H / A):
    in P's A dimensions, with the same expected squared norm H."""
    P = attn_basis(s, device)
    if P is None:
        return _randn(g, (s.vocab_size, s.hidden_size), 1.0, device)
    if str(device) == "meta":
        return torch.empty(s.vocab_size, s.hidden_size, device="meta")
    return _randn(g, (s.vocab_size, s.draft_attn_width), (s.hidden_size / s.draft_attn_width) ** 0.5, device) @ P


def planted_head(E: torch.Tensor, succ: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
    """head with each row u that succ reaches replaced by GAMMA * sum of E[t] over t with succ(t) = u."""
    succ = succ.to(E.device)
    planted = torch.zeros_like(E).index_add_(0, succ, E)
    hit = torch.zeros(len(E), dtype=torch.bool, device=E.device).index_fill_(0, succ, True)
    return torch.where(hit[:, None], GAMMA * planted, head)


def target_weights(s: TinySpec, g: torch.Generator, E: torch.Tensor, succ: torch.Tensor) -> dict[str, torch.Tensor]:
    """DeepseekV3ForCausalLM checkpoint tensors (HF names, fp32 on E's device; the caller casts)."""
    H, nh, dev = s.hidden_size, s.num_heads, E.device
    w: dict[str, torch.Tensor] = {"model.embed_tokens.weight": E}
    lo = INIT_STD * OUT_SCALE

    def rnd(*shape, std=INIT_STD):
        return _randn(g, shape, std, dev)

    def ones(n):
        return torch.ones(n, device=dev)

    def mlp(prefix, inter):
        w[f"{prefix}.gate_proj.weight"] = rnd(inter, H)
        w[f"{prefix}.up_proj.weight"] = rnd(inter, H)
        w[f"{prefix}.down_proj.weight"] = rnd(H, inter, std=lo)

    for i in range(s.num_layers):
        p = f"model.layers.{i}"
        w[f"{p}.input_layernorm.weight"] = ones(H)
        w[f"{p}.post_attention_layernorm.weight"] = ones(H)
        a = f"{p}.self_attn"
        w[f"{a}.q_a_proj.weight"] = rnd(s.q_lora_rank, H)
        w[f"{a}.q_a_layernorm.weight"] = ones(s.q_lora_rank)
        w[f"{a}.q_b_proj.weight"] = rnd(nh * (s.qk_nope_head_dim + s.qk_rope_head_dim), s.q_lora_rank)
        w[f"{a}.kv_a_proj_with_mqa.weight"] = rnd(s.kv_lora_rank + s.qk_rope_head_dim, H)
        w[f"{a}.kv_a_layernorm.weight"] = ones(s.kv_lora_rank)
        w[f"{a}.kv_b_proj.weight"] = rnd(nh * (s.qk_nope_head_dim + s.v_head_dim), s.kv_lora_rank)
        w[f"{a}.o_proj.weight"] = rnd(H, nh * s.v_head_dim, std=lo)
        if i < s.first_k_dense_replace:
            mlp(f"{p}.mlp", s.intermediate_size)
            continue
        w[f"{p}.mlp.gate.weight"] = rnd(s.n_routed_experts, H)
        w[f"{p}.mlp.gate.e_score_correction_bias"] = torch.zeros(s.n_routed_experts, device=dev)
        for e in range(s.n_routed_experts):
            mlp(f"{p}.mlp.experts.{e}", s.moe_intermediate_size)
        mlp(f"{p}.mlp.shared_experts", s.moe_intermediate_size)
    w["model.norm.weight"] = ones(H)
    w["lm_head.weight"] = planted_head(E, succ, rnd(s.vocab_size, H))  # rows never planted: logits ~ 0
    return w


def draft_weights(s: TinySpec, g: torch.Generator, head: torch.Tensor, D: torch.Tensor) -> dict[str, torch.Tensor]:
    """LlamaForCausalLMEagle3 checkpoint tensors (SpecForge names: midlayer.*, fc, norm, lm_head, d2t, t2d) for
    the draft vocab D, from `head` [V, H] (the target's lm_head, or draft_head() for q < 1).

    No embed_tokens: SGLang gives an EAGLE-3 drafter the target's embedding (set_embed)."""
    H, dev = s.hidden_size, head.device
    eye, zero = torch.eye(H, device=dev), torch.zeros(H, H, device=dev)
    # the attention's basis: I, or P [A, H] when it is narrower (the embeddings lie in P's rows: embedding())
    P = attn_basis(s, dev)
    basis = eye if P is None else P
    w = {
        "midlayer.input_layernorm.weight": torch.ones(H, device=dev),
        "midlayer.hidden_norm.weight": torch.ones(H, device=dev),
        "midlayer.post_attention_layernorm.weight": torch.ones(H, device=dev),
        # input to q/k/v is cat(input_layernorm(embed), hidden_norm(hidden)) [2H]
        "midlayer.self_attn.q_proj.weight": torch.cat([ALPHA * basis, torch.zeros_like(basis)], 1),
        "midlayer.self_attn.k_proj.weight": torch.cat([ALPHA * basis, torch.zeros_like(basis)], 1),
        "midlayer.self_attn.v_proj.weight": torch.cat([basis, -basis], 1),
        "midlayer.self_attn.o_proj.weight": BETA * basis.T.contiguous(),
        "midlayer.mlp.gate_proj.weight": _randn(g, (s.draft_intermediate_size, H), INIT_STD, dev),
        "midlayer.mlp.up_proj.weight": _randn(g, (s.draft_intermediate_size, H), INIT_STD, dev),
        "midlayer.mlp.down_proj.weight": _randn(g, (H, s.draft_intermediate_size), INIT_STD * OUT_SCALE, dev),
        # fc over the 3 aux states: beta * the first (the target's layer-0 input, i.e. E[t])
        "fc.weight": torch.cat([BETA * eye] + [zero] * (len(s.aux_layer_ids) - 1), 1),
        "norm.weight": torch.ones(H, device=dev),
        "lm_head.weight": head[D.to(dev)].clone(),  # draft id d <-> target id D[d]
        "d2t": D - torch.arange(len(D)),  # SGLang: hot_token_id = d2t + arange
    }
    t2d = torch.zeros(s.vocab_size, dtype=torch.bool)
    t2d[D] = True
    w["t2d"] = t2d
    return w


def draft_head(g: torch.Generator, E: torch.Tensor, succ: torch.Tensor, prop: torch.Tensor,
               target_head: torch.Tensor) -> torch.Tensor:
    """The drafter's lm_head [V, H] for proposals `prop`: the target's rows where prop == succ everywhere;
    otherwise the rows planted for succ are redrawn as unplanted noise and those for prop planted instead
    (a row left with any E[t] of succ's would pull the drafter back to the target's choice)."""
    if torch.equal(prop, succ):
        return target_head
    hit = torch.zeros(len(E), dtype=torch.bool, device=E.device).index_fill_(0, succ.to(E.device), True)
    noise = torch.where(hit[:, None], _randn(g, tuple(E.shape), INIT_STD, E.device), target_head)
    return planted_head(E, prop, noise)
