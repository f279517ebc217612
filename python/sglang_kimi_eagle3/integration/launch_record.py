"""What this process knows about its launch (a leaf: imports no other integration module).

- `raw_input(server_args, name)`: what the operator typed for a field (SGLang keeps it in `_raw_input`).
- `is_our_launch(server_args)`: EAGLE or EAGLE3 with a draft model, on a ServerArgs record (main process).
- `our_launch()`: the same question in a scheduler, from the spec config SGLang published (cached).
- `policy_of(server_args)`: the `--speculative-draft-context-policy` value carried on the record (ours, or
  SGLang's own field where SGLang has one).
- the launch step's mark: set on the record in the main process, pickled to every scheduler, read there.

Reading any of these changes nothing: no class is patched, no hook is recorded.
"""

from __future__ import annotations

OUR_ALGORITHMS = ("EAGLE", "EAGLE3")
POLICY_ATTR = "_kimi_eagle3_context_policy"  # bookkeeping attribute: survives pickling to the schedulers
UPSTREAM_POLICY_FIELD = "speculative_draft_context_policy"  # SGLang's own field, where SGLang has the flag
MARK = "_kimi_eagle3_launch_step"  # likewise: what the main-process launch step did for this launch
KEPT_ATTR = "_kimi_eagle3_adaptive_kept"  # likewise: the adaptive default refused for memory, {"found", "fix"}
CAPPED_ATTR = "_kimi_eagle3_adaptive_capped"  # likewise: the adaptive default only up to a batch, {"found", "fix", "top"}
DEFAULT_OFF_ATTR = "_kimi_eagle3_adaptive_default_off"  # likewise: {"why": why the adaptive default would not serve the
#   launch even without the operator's adaptive flags, None where it would}
_OURS: list = [None]  # our_launch() once SGLang published the spec config of this process


def raw_input(server_args, name: str):
    """What the operator typed for a field (SGLang keeps it in `_raw_input`), else the record's value."""
    raw = getattr(server_args, "_raw_input", None)
    if isinstance(raw, dict) and name in raw:
        return raw[name]
    return getattr(server_args, name, None)


def is_our_launch(server_args) -> bool:
    """EAGLE or EAGLE3 with a draft model, as resolved (or as typed when SGLang refused to resolve)."""
    from sglang.srt.arg_groups.overrides import resolving_view

    cfg = resolving_view(server_args)
    algo = getattr(cfg, "speculative_algorithm", None) or raw_input(server_args, "speculative_algorithm")
    draft = getattr(cfg, "speculative_draft_model_path", None) or raw_input(server_args, "speculative_draft_model_path")
    return bool(draft) and str(algo or "").upper() in OUR_ALGORITHMS


def our_launch() -> bool | None:
    """True/False once SGLang published this process's spec config (cached); None before that."""
    if _OURS[0] is not None:
        return _OURS[0]
    try:
        from sglang.srt.runtime_context import get_spec

        spec = get_spec()
        algo = str(spec.speculative_algorithm or "").upper()
        ours = algo in OUR_ALGORITHMS and bool(spec.speculative_draft_model_path)
    except Exception:
        return None
    _OURS[0] = ours
    return ours


def policy_of(server_args) -> str | None:
    """The --speculative-draft-context-policy value carried on a ServerArgs record, or None: this plugin's
    bookkeeping attribute (its flag on SGLang 0.5.23, or the default it handed to SGLang), else SGLang's own
    field where SGLang has the flag (as resolved so far: SGLang's resolution fills in its default)."""
    if server_args is None:
        return None
    ours = getattr(server_args, POLICY_ATTR, None)
    if ours is not None:
        return ours
    from sglang.srt.arg_groups.arg_utils import field_names

    if UPSTREAM_POLICY_FIELD not in field_names(type(server_args)):
        return None
    from sglang.srt.arg_groups.overrides import resolving_view

    return getattr(resolving_view(server_args), UPSTREAM_POLICY_FIELD, None)


def set_policy(server_args, value: str) -> None:
    setattr(server_args, POLICY_ATTR, value)


def mark(server_args, done: str) -> None:
    """The launch step ran for this launch (in the main process): `done` says what it did."""
    setattr(server_args, MARK, done)


def mark_of(server_args) -> str | None:
    """What the main-process launch step recorded on this launch's record (None: it did not run)."""
    return getattr(server_args, MARK, None)
