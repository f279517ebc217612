"""Hook: reconcile the draft's context length with the target's by an explicit policy.

Upstream target: sglang.srt.configs.model_config.ModelConfig._derive_context_length
  (sglang 0.5.23 configs/model_config.py:1291-1327).
Why: the EAGLE draft worker builds the draft's ModelConfig with the *target's* context length
  (speculative/eagle_worker_v2.py:222-232 -> managers/tp_worker.py:466-482); a draft that declares
  fewer positions (AQ-MedAI Kimi-K2 drafter: 131072 vs Kimi-K2.5: 262144) raises ValueError. The only
  upstream escape, SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, also disables the target's own check.
How: AROUND hook. Only for draft configs (`is_draft_model`) whose derived length is shorter than the
  requested one, apply policy.context.decide(): extend / yarn rewrite the draft's hf_text_config
  (max_position_embeddings, rope) *before* the original runs, so the original check passes on its own;
  strict / cap-not-applied raise a ValueError that names the policy flag. Target configs, drafts that
  fit, and launches where the operator set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN themselves go
  through untouched. The plugin never sets that variable.
Upstream issue: SGLang #9388 (why the global override defaults off); no draft-only override exists.
Remove when: SGLang grows a draft-scoped context policy.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import hookstatus, logger
from ..policy.context import ContextDecision, decide, resolve_policy, spec_rope_margin
from . import registry

NAME = "context_policy"
TARGET = "sglang.srt.configs.model_config.ModelConfig._derive_context_length"
_LOGGED: set[tuple] = set()


def install() -> None:
    registry.register(NAME, TARGET, _derive_context_length, "around")


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _spec_counts() -> tuple[int | None, int | None]:
    """(steps, draft tokens) of this launch, from SGLang's published config when there is one."""
    try:
        from sglang.srt.runtime_context import get_spec

        spec = get_spec()
        return spec.speculative_num_steps, spec.speculative_num_draft_tokens
    except Exception:  # before publication (e.g. the main process): the margin defaults below
        return None, None


def _launch_policy() -> str | None:
    """The --speculative-draft-context-policy value of this launch, when SGLang published its record."""
    try:
        from sglang.srt.runtime_context import get_server_args

        from .cli_flag import policy_of

        return policy_of(get_server_args())
    except Exception:
        return None


def _margin() -> int:
    from sglang.srt.environ import envs

    steps, tokens = _spec_counts()
    # Unknown counts: assume the largest SGLang tree we support (8 steps x 64 tokens) - cheap rows.
    return spec_rope_margin(steps or 8, tokens or 64, envs.SGLANG_SPEC_EXPANSION_SAFETY_FACTOR.get(),
                            envs.SGLANG_ROPE_CACHE_SAFETY_MARGIN.get())


def _rope_of(hf_text_config) -> tuple[dict | None, str, float | None]:
    rope = getattr(hf_text_config, "rope_parameters", None) or getattr(hf_text_config, "rope_scaling", None)
    rope_type = str((rope or {}).get("rope_type") or (rope or {}).get("type") or "default")
    theta = (rope or {}).get("rope_theta", getattr(hf_text_config, "rope_theta", None))
    return rope, rope_type, theta


def decision_for(model_config, context_length: int) -> ContextDecision:
    """The decision for a draft ModelConfig under construction (no side effects)."""
    from sglang.srt.utils.hf_transformers.common import get_context_length

    from ..configs import KNOWN_ROPE_TYPES, read_config, require_draft_context
    from ..errors import UserError

    hf = model_config.hf_text_config
    folder = Path(str(model_config.model_path))
    if (folder / "config.json").is_file():  # transformers fills a default for a missing field; the file tells
        require_draft_context(read_config(folder))
    _rope, rope_type, theta = _rope_of(hf)
    if rope_type not in KNOWN_ROPE_TYPES:
        raise UserError(f"{model_config.model_path}/config.json: field 'rope_scaling.rope_type' = {rope_type!r} is not a "
                        f"RoPE type SGLang knows; fix the draft's config")
    return decide(target_len=context_length, draft_len=get_context_length(hf), policy=resolve_policy(_launch_policy()),
                  draft_rope_type=rope_type, draft_rope_theta=theta, rope_margin=_margin(),
                  draft_name=f"the draft ({model_config.model_path})")


def apply_decision(model_config, d: ContextDecision) -> None:
    """Rewrite the draft's HF text config so SGLang's own check and RoPE construction follow `d`."""
    hf = model_config.hf_text_config
    if d.action in ("extend", "yarn"):
        hf.max_position_embeddings = d.draft_max_position_embeddings
    if d.action == "yarn":
        rope, _, _ = _rope_of(hf)
        new = dict(d.draft_rope_scaling)
        if getattr(hf, "rope_parameters", None) is not None:  # transformers 5: SGLang reads this dict
            hf.rope_parameters = {**(rope or {}), **new, "type": "yarn"}
        hf.rope_scaling = {**(rope or {}), **new, "type": "yarn"}


def _derive_context_length(original, self, context_length):
    if not getattr(self, "is_draft_model", False) or context_length is None:
        return original(self, context_length)
    if _env_flag("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") or _env_flag("SGLANG_IS_IN_CI"):
        return original(self, context_length)  # the operator chose SGLang's global override
    d = decision_for(self, context_length)
    key = (d.action, d.target_len, d.draft_len, d.policy)
    if key not in _LOGGED and d.action != "none":
        _LOGGED.add(key)
        logger().info("draft context policy: %s", d.explanation)
    if d.action == "none":
        return original(self, context_length)
    if d.action == "refuse":
        raise ValueError(f"sglang-kimi-eagle3: {d.explanation}")
    if d.action == "cap":  # cap must have lowered the served length before the target loaded
        raise ValueError(f"sglang-kimi-eagle3: context policy 'cap' did not take effect before the target was "
                         f"configured (the target serves {context_length}); pass --context-length {d.draft_len}")
    apply_decision(self, d)
    row = hookstatus.get(NAME)
    if row is not None and row.state != "applied":
        registry.refresh()
    return original(self, context_length)
