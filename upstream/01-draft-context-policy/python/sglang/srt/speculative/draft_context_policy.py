"""Draft-model context-length policy: ``--speculative-draft-context-policy``.

A speculative draft worker builds the draft's ModelConfig with the *target's* context length. A
draft that declares fewer positions (an EAGLE-3 drafter trained at 131072 beside a 262144 target)
is refused by ``ModelConfig._derive_context_length`` unless the global
``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` is set, which also silences the target's own check.
This module gives the draft its own policy:

  strict  refuse (the default, unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN or CI is set, which
          resolve to extend: today's behaviour, the draft's limit lifted)
  extend  serve the target's length; lift only the draft's limit and size its rotary cache for the
          target length plus the speculative margin. Outputs stay exact (the target verifies every
          draft token); positions past the draft's window may accept fewer tokens.
  yarn    plain-RoPE drafts only: YaRN on the draft, factor = target / draft length,
          original_max_position_embeddings = draft length
  cap     serve min(target, draft): the main process lowers ``context_length``

The policy is resolved once in the main process (``resolve_draft_context_policy``, called at the
end of ``handle_speculative_decoding``); draft ModelConfigs apply it in
``apply_draft_context_policy`` (called by ``ModelConfig._derive_context_length``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Optional

logger = logging.getLogger(__name__)

POLICIES = ("strict", "extend", "yarn", "cap")
FLAG = "--speculative-draft-context-policy"
_ROPE_ALIGN = 128


@dataclass(frozen=True)
class DraftContextDecision:
    policy: str
    action: str  # "none" | "extend" | "yarn" | "cap" | "refuse"
    target_len: int
    draft_len: int
    serve_len: int
    draft_max_position_embeddings: Optional[int] = None  # extend, yarn
    draft_rope_scaling: Optional[dict] = None  # yarn
    message: str = ""


def default_policy() -> str:
    """The policy when the flag is not given: today's behaviour."""
    from sglang.srt.environ import envs
    from sglang.utils import is_in_ci

    if envs.SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN.get() or is_in_ci():
        return "extend"
    return "strict"


def spec_rope_margin(num_steps: Optional[int], num_draft_tokens: Optional[int]) -> int:
    """Positions the speculative loop may touch past the context length (the terms of
    ``reserve_rope_cache_for_long_sequences``)."""
    from sglang.srt.environ import envs

    steps, tokens = int(num_steps or 0), int(num_draft_tokens or 0)
    return (
        steps * tokens * envs.SGLANG_SPEC_EXPANSION_SAFETY_FACTOR.get()
        + envs.SGLANG_ROPE_CACHE_SAFETY_MARGIN.get()
    )


def _rope_type(hf_text_config) -> str:
    rope = getattr(hf_text_config, "rope_scaling", None) or {}
    return str(rope.get("rope_type") or rope.get("type") or "default")


def refusal(target_len: int, draft_len: int, draft: str = "the draft model") -> str:
    return (
        f"{draft} declares {draft_len} positions but the target serves {target_len}. "
        f"Pass {FLAG} extend (serve {target_len}; only the draft's limit is lifted, outputs stay "
        f"exact, acceptance may drop past {draft_len}), {FLAG} yarn (plain-RoPE drafts), or "
        f"{FLAG} cap (serve {draft_len})."
    )


def decide(
    *,
    target_len: int,
    draft_len: int,
    policy: str,
    draft_rope_type: str = "default",
    draft_rope_theta: Optional[float] = None,
    rope_margin: int = 0,
    draft: str = "the draft model",
) -> DraftContextDecision:
    """How a draft of ``draft_len`` positions serves beside a target serving ``target_len``."""
    if policy not in POLICIES:
        raise ValueError(f"{FLAG} {policy!r}: expected one of {', '.join(POLICIES)}")
    base = dict(policy=policy, target_len=target_len, draft_len=draft_len)
    if draft_len >= target_len:
        return DraftContextDecision(**base, action="none", serve_len=target_len)
    if policy == "strict":
        return DraftContextDecision(
            **base,
            action="refuse",
            serve_len=target_len,
            message=f"{FLAG} strict (the default): {refusal(target_len, draft_len, draft)}",
        )
    if policy == "cap":
        return DraftContextDecision(
            **base,
            action="cap",
            serve_len=draft_len,
            message=f"{FLAG} cap: serving {draft_len} tokens instead of {target_len}.",
        )
    if policy == "yarn":
        if draft_rope_type != "default":
            return DraftContextDecision(
                **base,
                action="refuse",
                serve_len=target_len,
                message=(
                    f"{FLAG} yarn: {draft}'s RoPE is already scaled ({draft_rope_type}); "
                    f"use {FLAG} extend or cap."
                ),
            )
        scaling = {
            "rope_type": "yarn",
            "factor": target_len / draft_len,
            "original_max_position_embeddings": draft_len,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
        }
        if draft_rope_theta is not None:
            scaling["rope_theta"] = draft_rope_theta
        return DraftContextDecision(
            **base,
            action="yarn",
            serve_len=target_len,
            draft_max_position_embeddings=target_len,
            draft_rope_scaling=scaling,
            message=(
                f"{FLAG} yarn: {draft} gets YaRN factor {target_len / draft_len:g} "
                f"(original {draft_len}) to span {target_len} positions."
            ),
        )
    # extend: the rotary cache covers the served length plus the speculative margin
    mpe = (target_len + rope_margin + _ROPE_ALIGN - 1) // _ROPE_ALIGN * _ROPE_ALIGN
    return DraftContextDecision(
        **base,
        action="extend",
        serve_len=target_len,
        draft_max_position_embeddings=mpe,
        message=(
            f"{FLAG} extend: serving {target_len} tokens; {draft}'s limit ({draft_len}) is "
            f"lifted and its rotary cache sized to {mpe} positions. Positions past {draft_len} "
            f"lie outside its training window and may accept fewer tokens."
        ),
    )


def apply_draft_context_policy(model_config, context_length: int, derived: int) -> int:
    """Called by a draft ModelConfig whose ``context_length`` exceeds its own ``derived`` length.

    Rewrites the draft's text config as the policy says and returns the derived length the
    caller's check then uses (``context_length`` when the draft may serve it)."""
    hf = model_config.hf_text_config
    d = decide(
        target_len=context_length,
        draft_len=derived,
        policy=model_config.draft_context_policy or default_policy(),
        draft_rope_type=_rope_type(hf),
        draft_rope_theta=getattr(hf, "rope_theta", None),
        rope_margin=model_config.draft_rope_margin,
        draft=f"the draft model ({model_config.model_path})",
    )
    if d.action == "refuse":
        raise ValueError(d.message)
    if d.action == "cap":  # resolution lowers context_length in the main process
        raise ValueError(
            f"{FLAG} cap did not take effect before the draft was configured (the target "
            f"serves {context_length}); pass --context-length {derived}"
        )
    hf.max_position_embeddings = d.draft_max_position_embeddings
    if d.action == "yarn":
        rope = dict(getattr(hf, "rope_scaling", None) or {})
        hf.rope_scaling = {**rope, **d.draft_rope_scaling, "type": "yarn"}
        if getattr(hf, "rope_parameters", None) is not None:  # transformers 5 reads this dict
            hf.rope_parameters = {**hf.rope_parameters, **d.draft_rope_scaling}
    logger.info(d.message)
    return context_length


def resolve_draft_context_policy(server_args) -> None:
    """Main process, once: fix the policy for every process and refuse or cap early.

    Refusals raise here, naming the flag, before any worker starts. ``cap`` lowers the served
    ``context_length``. Other policies act in the draft's ModelConfig."""
    from sglang.srt.arg_groups.overrides import (
        declare_resolution,
        model_config_of,
        resolving_view,
    )

    cfg = resolving_view(server_args)
    if cfg.speculative_algorithm is None:
        return
    policy = cfg.speculative_draft_context_policy
    if policy is None:
        policy = default_policy()
        declare_resolution(
            server_args,
            "resolve_draft_context_policy",
            speculative_draft_context_policy=policy,
        )
    draft_path = cfg.speculative_draft_model_path
    if draft_path is None:
        return
    from sglang.srt.utils.hf_transformers_utils import (
        get_config,
        get_context_length,
        get_hf_text_config,
    )

    try:
        draft_hf = get_hf_text_config(
            get_config(
                draft_path,
                trust_remote_code=cfg.trust_remote_code,
                revision=cfg.speculative_draft_model_revision,
                model_override_args=json.loads(cfg.json_model_override_args),
            )
        )
    except Exception as e:  # the draft worker reads it again and reports its own error
        logger.debug("draft context policy: draft config unreadable here (%s)", e)
        return
    target_len = model_config_of(server_args).context_len
    d = decide(
        target_len=target_len,
        draft_len=get_context_length(draft_hf),
        policy=policy,
        draft_rope_type=_rope_type(draft_hf),
        draft_rope_theta=getattr(draft_hf, "rope_theta", None),
        rope_margin=spec_rope_margin(
            cfg.speculative_num_steps, cfg.speculative_num_draft_tokens
        ),
        draft=f"the draft model ({draft_path})",
    )
    if d.action == "refuse":
        raise ValueError(d.message)
    if d.action == "cap":
        declare_resolution(
            server_args,
            "resolve_draft_context_policy",
            context_length=d.serve_len,
        )
        server_args._model_config = None  # rebuilt at the capped length
    if d.message:
        logger.info(d.message)
