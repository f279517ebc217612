"""Draft-step / target-step time ratios: the seed deployment's (planner model) and a tiny pair's on one H200
(the planner's roofline-plus-latency pass model, planner/costs.pass_us, with the H200 hardware numbers of the
bundled H200 profile and pass figures computed here from the pair's shapes at TP 1). Pure: no torch, no sglang.

Why: a measurement pair only says something about the deployment when a draft step costs the same fraction of a
target step as it does there. The seed (Kimi-K2.5 INT4 + the K2 drafter, TP 8, RTX PRO 6000) runs one draft layer
against 61 target layers plus 123 all-reduces; the 3-layer Kimi-width pair runs one against 3 (its drafter costs
a far larger share: the stress case). `ratios()` gives, per batch size, draft(bs, 1) / target(bs, 1) (a decode
step) and, for prefill, draft(1, T) / target(1, T) over a T-token prompt.
"""

from __future__ import annotations

from dataclasses import replace

from ..planner import profiles
from ..planner.costs import pass_us
from ..planner.profiles import PassModel
from .spec import TinySpec

SEED_PROFILE = profiles.DEFAULT_PROFILE  # Kimi-K2.5 INT4 + drafter, TP 8, RTX PRO 6000 (the embedded default)
H200_PROFILE = "kimi-k2.5_8xh200_tp8"  # its hardware section: the lent H200's measured bandwidth, datasheet FLOPs
DECODE_BS = (1, 8, 32, 128)
PREFILL_TOKENS = 1024
INT4_BYTES = 0.5625  # 4 bits + one bf16 scale per 32 weights (group 32)
BF16 = 2


def target_pass(s: TinySpec, *, int4: bool, like: PassModel) -> PassModel:
    """The tiny target's per-pass figures at TP 1 (bf16 weights; routed experts INT4 with `int4`). The latency
    terms (pass overhead, tail) are the seed profile's; there is no all-reduce at TP 1."""
    h, nh = s.hidden_size, s.num_heads
    attn = (h * s.q_lora_rank + s.q_lora_rank * nh * (s.qk_nope_head_dim + s.qk_rope_head_dim)
            + h * (s.kv_lora_rank + s.qk_rope_head_dim) + s.kv_lora_rank * nh * (s.qk_nope_head_dim + s.v_head_dim)
            + nh * s.v_head_dim * h)
    dense = s.first_k_dense_replace
    moe = s.num_layers - dense
    expert = 3 * h * s.moe_intermediate_size
    static = (s.num_layers * attn + dense * 3 * h * s.intermediate_size + moe * (expert + h * s.n_routed_experts)
              + s.vocab_size * h) * BF16
    active = (s.num_layers * attn + dense * 3 * h * s.intermediate_size
              + moe * (expert * (1 + s.num_experts_per_tok) + h * s.n_routed_experts) + s.vocab_size * h)
    return replace(like, layers=s.num_layers, static_bytes_per_gpu=static, moe_layers=moe,
                   experts=s.n_routed_experts, experts_per_token=s.num_experts_per_tok,
                   expert_bytes_per_gpu=expert * (INT4_BYTES if int4 else BF16),
                   kv_bytes_per_ctx_token=(s.kv_lora_rank + s.qk_rope_head_dim) * BF16 * s.num_layers,
                   gemm_flops_per_token=2 * active,
                   attn_flops_per_ctx_token=2 * (s.kv_lora_rank + s.qk_rope_head_dim + s.kv_lora_rank) * nh * s.num_layers,
                   allreduces=0, allreduce_bytes_per_token=0)


def draft_pass(s: TinySpec, rows: int, *, like: PassModel) -> PassModel:
    """The tiny drafter (one Llama layer: q/k/v from 2 x hidden to its attention width, `rows` draft-vocab rows) at
    TP 1, counted as the profile counts the real one (qkv, o, MLP, lm_head; the fc over the aux states runs once per
    draft extend)."""
    h, a = s.hidden_size, s.draft_attn_width
    params = 2 * h * 3 * a + a * h + 3 * h * s.draft_intermediate_size + rows * h
    hd = s.draft_head_size
    return replace(like, static_bytes_per_gpu=params * BF16, kv_bytes_per_ctx_token=2 * s.draft_heads * hd * BF16,
                   gemm_flops_per_token=2 * params, attn_flops_per_ctx_token=2 * s.draft_heads * 2 * hd,
                   allreduces=0, allreduce_bytes_per_token=0)


def target_weight_bytes(s: TinySpec, *, int4: bool) -> float:
    """Bytes of the target's weights on the GPU (embedding included)."""
    m = target_pass(s, int4=int4, like=profiles.load(H200_PROFILE).target)
    return m.static_bytes_per_gpu + m.moe_layers * m.experts * m.expert_bytes_per_gpu + s.vocab_size * s.hidden_size * BF16


def _ratios(target, draft, hw, ctx: int) -> dict:
    dec = {bs: pass_us(draft, hw, bs, 1, ctx) / pass_us(target, hw, bs, 1, ctx) for bs in DECODE_BS}
    pre = pass_us(draft, hw, 1, PREFILL_TOKENS, 0) / pass_us(target, hw, 1, PREFILL_TOKENS, 0)
    us = {bs: (pass_us(draft, hw, bs, 1, ctx), pass_us(target, hw, bs, 1, ctx)) for bs in DECODE_BS}
    return {"decode": dec, "prefill": pre, "decode_us": us}


def seed_ratios() -> dict:
    p = profiles.load(SEED_PROFILE)
    return _ratios(p.target, p.draft, p.hardware, p.context_tokens) | {"how": f"planner model, profile {p.name}"}


def pair_ratios(s: TinySpec, *, int4: bool, rows: int | None = None) -> dict:
    p = profiles.load(H200_PROFILE)
    rows = rows or s.succ_vocab_size
    t, d = target_pass(s, int4=int4, like=p.target), draft_pass(s, rows, like=p.draft)
    how = (f"planner pass model with {p.name}'s H200 hardware numbers, the pair's shapes at TP 1 "
           f"({s.num_layers} target layers, {s.n_routed_experts} experts, drafter with {rows} rows)")
    return _ratios(t, d, p.hardware, p.context_tokens) | {"how": how}


def report(s: TinySpec, *, int4: bool, rows: int | None = None) -> str:
    """Lines: the seed's and the pair's modelled ratios side by side, and the pair within +-30 % or not."""
    seed, pair = seed_ratios(), pair_ratios(s, int4=int4, rows=rows)
    lines = ["draft-step / target-step time ratio (modelled):",
             f"  seed deployment: {seed['how']}", f"  this pair on one H200: {pair['how']}"]
    for bs in DECODE_BS:
        a, b = seed["decode"][bs], pair["decode"][bs]
        lines.append(f"  decode bs {bs:>3}: seed {a:.4f}  pair {b:.4f}  ({b / a:.2f}x)")
    a, b = seed["prefill"], pair["prefill"]
    lines.append(f"  prefill {PREFILL_TOKENS} tokens: seed {a:.4f}  pair {b:.4f}  ({b / a:.2f}x)")
    lines.append(f"  target weights {target_weight_bytes(s, int4=int4) / 1e9:.2f} GB; measure on the GPU with "
                 "benchmark/serving/step_ratio.py")
    return "\n".join(lines)
