"""Draft/target context-length reconciliation: one pure decision with its explanation.

An EAGLE draft worker builds the draft's ModelConfig with the *target's* context length. When the
draft declares fewer positions (AQ-MedAI Kimi-K2 drafter: 131072 vs Kimi-K2.5: 262144) SGLang
0.5.23 raises ValueError unless the global SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 is set, which
also silences the *target's* own check. This module decides, per launch, what to do instead:

  strict  refuse; the message says what every other policy would do here
  extend  serve the target's length; lift only the draft's limit, and size the draft's rotary cache
          for target length + the speculative margin (memory-safe). Exact outputs (the target
          verifies every token); positions past the draft's window may accept fewer tokens.
  yarn    plain-RoPE drafts only: YaRN on the draft, factor = target / draft length,
          original_max_position_embeddings = draft length, the draft's rope_theta kept
  cap     serve min(target, draft) and say so
  auto    (default) extend. Why not yarn: YaRN rescales the draft's low RoPE frequencies at *every*
          position, so the draft stops seeing the positions it was trained on even for short prompts
          (where most decode time is spent), to gain acceptance only past its window. Why not cap: it
          takes context away from every user to protect a speed optimisation. Extend keeps the draft
          exactly as trained inside its window and cannot change outputs. Where the draft's window is
          far shorter than the target's (ratio > 8, e.g. 2048 vs 131072) auto still extends but the
          explanation warns that long prompts will likely see little speedup (SGLang #6783).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import UserError

POLICIES = ("auto", "strict", "extend", "yarn", "cap")
ENV_POLICY = "SGLANG_KIMI_EAGLE3_CONTEXT_POLICY"
FLAG = "--speculative-draft-context-policy"
SHORT_DRAFT_RATIO = 8  # auto warns above this target/draft ratio


@dataclass(slots=True)
class ContextDecision:
    policy: str  # what was asked for
    action: str  # "none" | "extend" | "yarn" | "cap" | "refuse"
    target_len: int  # what the target would serve (requested, or its own derived length)
    draft_len: int  # the draft's derived (trained) length
    serve_len: int  # what the server will serve after the decision
    draft_max_position_embeddings: int | None = None  # written into the draft config (extend, yarn)
    draft_rope_scaling: dict | None = None  # yarn only
    explanation: str = ""
    # What preflight reports for a decision that serves: "warning" when the draft's window is far shorter than
    # the target's (ratio > SHORT_DRAFT_RATIO, extend/auto: little speedup expected on long prompts), else "info".
    severity: str = "info"

    @property
    def ok(self) -> bool:
        return self.action != "refuse"


def resolve_policy(flag_value: str | None = None, environ=os.environ) -> str:
    """The policy in force: the flag wins over the environment; default auto."""
    source, value = (FLAG, flag_value) if flag_value else (ENV_POLICY, environ.get(ENV_POLICY))
    if not value:
        return "auto"
    value = value.strip().lower()
    if value not in POLICIES:
        raise UserError(f"{source} {value!r} is not a context policy; use one of {', '.join(POLICIES)}")
    return value


def spec_rope_margin(steps: int | None, draft_tokens: int | None, safety: int = 2, margin: int = 256) -> int:
    """Extra positions the speculative loop may touch past the context length.

    Same terms as SGLang 0.5.23 `reserve_rope_cache_for_long_sequences` (utils/common.py:4999):
    steps * draft_tokens * SGLANG_SPEC_EXPANSION_SAFETY_FACTOR + SGLANG_ROPE_CACHE_SAFETY_MARGIN.
    """
    # Nonsense values (negative, non-integer) count as 0 here; preflight's spec_params check reports them.
    s, n = (v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0 for v in (steps, draft_tokens))
    return s * n * safety + margin


def _check_length(n, what: str, fix: str) -> None:
    """Context lengths are positive integers: 0 or -5 would divide by zero or serve nothing."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise UserError(f"{what} is {n!r}; expected a positive integer; {fix}")


def _align(n: int, a: int = 128) -> int:
    return (n + a - 1) // a * a


def _yarn_block_reason(draft_rope_type: str) -> str | None:
    if draft_rope_type in ("default", None, ""):
        return None
    return f"the draft's RoPE is already scaled ({draft_rope_type}); stacking YaRN on it is undefined"


def _yarn_scaling(target_len: int, draft_len: int, rope_theta: float | None) -> dict:
    out = {"rope_type": "yarn", "factor": target_len / draft_len, "original_max_position_embeddings": draft_len,
           "beta_fast": 32.0, "beta_slow": 1.0}
    if rope_theta is not None:
        out["rope_theta"] = rope_theta
    return out


def decide(
    *,
    target_len: int,
    draft_len: int,
    policy: str = "auto",
    draft_rope_type: str = "default",
    draft_rope_theta: float | None = None,
    rope_margin: int = 0,
    draft_name: str = "the draft",
) -> ContextDecision:
    """Decide how a draft of `draft_len` positions serves beside a target serving `target_len`.

    target_len: the target's context (the operator's --context-length, else the target's own).
    rope_margin: spec_rope_margin(...) for this launch; extend sizes the draft's RoPE to
    target_len + rope_margin (aligned to 128) so the speculative tail never indexes past the cache.
    """
    if policy not in POLICIES:
        raise UserError(f"{FLAG} {policy!r} is not a context policy; use one of {', '.join(POLICIES)}")
    _check_length(target_len, "the served context length (--context-length, else the target's config)",
                  "--context-length <positive tokens>, or fix the target's max_position_embeddings")
    _check_length(draft_len, f"{draft_name}'s context length (its config's max_position_embeddings)",
                  "fix max_position_embeddings in the draft's config.json")
    if not isinstance(rope_margin, int) or isinstance(rope_margin, bool) or rope_margin < 0:
        raise UserError(f"speculative rope margin {rope_margin!r}: expected an integer >= 0 (check "
                        "--speculative-num-steps and --speculative-num-draft-tokens)")
    base = dict(policy=policy, target_len=target_len, draft_len=draft_len)
    if draft_len >= target_len:
        return ContextDecision(**base, action="none", serve_len=target_len,
                               explanation=f"{draft_name} covers {draft_len} positions >= the {target_len} served; nothing to reconcile.")

    ratio = target_len / draft_len
    extend_mpe = _align(target_len + rope_margin)
    yarn_block = _yarn_block_reason(draft_rope_type)
    window_note = (f" Positions past {draft_len} lie outside the draft's training window, so acceptance (and speedup) "
                   f"may drop on prompts longer than that.")
    short_note = ""
    if ratio > SHORT_DRAFT_RATIO:
        short_note = (f" The draft's window is {ratio:g}x shorter than the target's: expect little speedup on long "
                      f"prompts (SGLang #6783 measured a 2048-position draft slower than no speculation past 2k tokens); "
                      f"'cap' or a longer-context drafter avoids that.")

    if policy in ("extend", "auto"):
        head = ("auto -> extend (exact outputs, draft unchanged inside its window, full context kept)"
                if policy == "auto" else "extend")
        return ContextDecision(
            **base, action="extend", serve_len=target_len, draft_max_position_embeddings=extend_mpe,
            severity="warning" if short_note else "info",
            explanation=(f"{head}: serving the target's {target_len} tokens; only {draft_name}'s limit "
                         f"({draft_len}) is lifted, its rotary cache sized to {extend_mpe} positions (the target's "
                         f"{target_len} + {extend_mpe - target_len}: the {rope_margin}-position speculative margin "
                         f"rounded up to a multiple of 128). Outputs stay exact because the target verifies every "
                         f"drafted token.{window_note}{short_note} SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is not "
                         f"used, so the target's own context check still applies."))
    if policy == "yarn":
        if yarn_block:
            return ContextDecision(**base, action="refuse", serve_len=target_len,
                                   explanation=f"yarn refused: {yarn_block}. Use {FLAG} extend (or cap).")
        scaling = _yarn_scaling(target_len, draft_len, draft_rope_theta)
        return ContextDecision(
            **base, action="yarn", serve_len=target_len, draft_max_position_embeddings=target_len, draft_rope_scaling=scaling,
            explanation=(f"yarn: {draft_name}'s plain RoPE gets YaRN scaling factor {ratio:g} "
                         f"(original_max_position_embeddings {draft_len}, rope_theta {draft_rope_theta} kept) so its "
                         f"positions span the target's {target_len}. Outputs stay exact (the target verifies); the "
                         f"draft now sees rescaled positions everywhere, which may lower acceptance on short prompts."))
    if policy == "cap":
        return ContextDecision(**base, action="cap", serve_len=draft_len,
                               explanation=(f"cap: serving {draft_len} tokens instead of the target's {target_len} so the "
                                            f"draft never runs past its window; longer requests are rejected by SGLang's "
                                            f"context check."))
    # strict
    yarn_line = (f"yarn is unavailable ({yarn_block})" if yarn_block else
                 f"yarn would rescale the draft's RoPE by {ratio:g} (original {draft_len}) and serve {target_len}")
    return ContextDecision(
        **base, action="refuse", serve_len=target_len,
        explanation=(f"strict: {draft_name} declares {draft_len} positions but the target serves {target_len}; refusing. "
                     f"Alternatives: extend would serve {target_len} and lift only the draft's limit (exact outputs, "
                     f"less acceptance past {draft_len}); {yarn_line}; cap would serve {draft_len} tokens. "
                     f"Choose with {FLAG} <policy> or {ENV_POLICY}=<policy>."))
