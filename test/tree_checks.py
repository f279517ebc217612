"""Checks shared by the tree-sampling tests (test/ops) and the exactness tests against SGLang's CUDA
kernels (test/gpu_kernels): where two implementations' final draws may legitimately differ."""

from __future__ import annotations

import numpy as np
import torch

# fp32 CDF of up to ~2^18 entries, summed in any tree/tile order: relative error a few 1e-7 at most in
# practice; a draw is "at a boundary" when u lies within this share of the total of one.
BOUNDARY_REL = 1e-5


def final_rows(accept_index: torch.Tensor, accept_token_num: torch.Tensor):
    """(flat predicts slot == target_probs row of each request's last accepted node, list)."""
    an = accept_token_num.long().cpu()
    ai = accept_index.long().cpu()
    return ai[torch.arange(len(an)), an].tolist()


def draw_at_boundary(target_row, draft_row, use_draft: bool, u_final: float, tok_a: int, tok_b: int) -> float:
    """Distance (relative to the residual's total) from u = u_final * total to the nearest CDF boundary
    lying between tokens tok_a and tok_b of relu(target - draft). Two inverse-CDF draws that both got
    u right can disagree only when this is within fp32 rounding (BOUNDARY_REL)."""
    q = target_row.double().cpu()
    p = draft_row.double().cpu() if use_draft else torch.zeros_like(q)
    x = torch.where(q - p > 0, q - p, torch.zeros_like(q))
    cdf = torch.cumsum(x, 0)
    total = float(cdf[-1])
    if total <= 0:
        return float("inf")
    u = float(np.float32(u_final) * np.float32(total))
    lo, hi = sorted((tok_a, tok_b))
    bounds = cdf[lo:hi]  # boundaries after tokens lo .. hi-1: the ones between the two draws
    return float((bounds - u).abs().min()) / total if len(bounds) else float("inf")


def draw_mismatches(mine, theirs, target_probs, draft_probs, final_u, s: int):
    """Requests whose final draw differs between two runs with identical accepted paths:
    [(request, mine, theirs, relative distance of u to a CDF boundary between them)]."""
    pred_a, ai, an = mine[0].cpu(), mine[1], mine[2]
    pred_b = theirs[0].cpu()
    rows = final_rows(ai, an)
    V = target_probs.shape[-1]
    flat_t = target_probs.reshape(-1, V)
    flat_d = draft_probs.reshape(-1, V)
    out = []
    for b, r in enumerate(rows):
        a, c = int(pred_a[r]), int(pred_b[r])
        if a != c:
            use_draft = int(an[b]) != s - 1
            out.append((b, a, c, draw_at_boundary(flat_t[r], flat_d[r], use_draft, float(final_u[b]), a, c)))
    return out
