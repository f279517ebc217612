"""The one home of the draft/target context policy: its flag, its launch-time step, its draft hook.

`policy.context.decide()` is the pure decision; this module is the only integration code that calls
it, at the three places a launch passes through (each works the same with SGLANG_KIMI_EAGLE3_PREFLIGHT
on, warn or off; preflight only reports what `launch_decision` says):

1. The flag. Upstream targets (sglang 0.5.23 srt/server_args.py): ServerArgs.add_cli_args (staticmethod,
   AFTER: add `--speculative-draft-context-policy` to the parser every SGLang entrypoint builds) and
   ServerArgs.from_cli_args (classmethod, AROUND: carry the parsed value as the bookkeeping attribute
   `_kimi_eagle3_context_policy`, which survives pickling to scheduler processes). The env var
   SGLANG_KIMI_EAGLE3_CONTEXT_POLICY is the fallback when the flag is absent (Engine API users).
2. The main process: `resolve_launch(server_args)`, called by the one launch-time resolution step
   (launch_step.py) for our launches only. `cap` lowers the served context there
   (declare_resolution(context_length=...)), since only the main process can do that for every later
   reader; the other policies change nothing there.
3. The draft's ModelConfig. Upstream target: ModelConfig._derive_context_length (model_config.py:
   1291-1327), AROUND. The EAGLE draft worker builds the draft's ModelConfig with the *target's*
   context length (eagle_worker_v2.py:222-232 -> tp_worker.py:466-482); a draft that declares fewer
   positions (AQ-MedAI Kimi-K2 drafter: 131072 vs Kimi-K2.5: 262144) raises ValueError. For draft
   configs shorter than the requested length: extend / yarn rewrite the draft's hf_text_config
   (max_position_embeddings, rope) *before* the original runs, so the original check passes on its
   own; strict (and cap when step 2 did not run) raise a ValueError naming the policy flag. Target
   configs, drafts that fit, and launches where the operator set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN
   go through untouched. The plugin never sets that variable.
Upstream issue: SGLang #9388 (why the global override defaults off); no draft-scoped policy exists in 0.5.23.
Remove when: SGLang grows a draft-scoped context flag/policy. Where the running SGLang already has it (this
project's upstream series, `upstream/01-draft-context-policy`; detected by upstream_has), the three hooks
above are not installed (`skipped`, `upstream has it: ...`) and SGLang's own flag does the job: its parser
takes the flag, `handle_speculative_decoding` resolves it, the draft's ModelConfig applies it. The plugin
then only hands SGLang its default when the operator gave no flag (`hand_default_to_sglang`: auto, or
SGLANG_KIMI_EAGLE3_CONTEXT_POLICY, instead of SGLang's strict), and preflight reads SGLang's field.
"""

from __future__ import annotations

from pathlib import Path

from ...base import env_flag, logger
from ...policy.context import FLAG, POLICIES, ContextDecision, decide, resolve_policy, spec_rope_margin
from ...status import hookstatus
from .. import registry, upstream_has
from ..launch_record import our_launch, policy_of, raw_input, set_policy
from . import runtime_status

NAME = "context_policy"
TARGET = "sglang.srt.configs.model_config.ModelConfig._derive_context_length"
FLAG_HOOKS = (("context_policy_flag", "sglang.srt.server_args.ServerArgs.add_cli_args", "after"),
              ("context_policy_flag_value", "sglang.srt.server_args.ServerArgs.from_cli_args", "around"))
DEST = "speculative_draft_context_policy"
_LOGGED: set[tuple] = set()


SITES = {NAME: ["sglang.srt.configs.model_config:ModelConfig._derive_context_length"],
         "context_policy_flag": ["sglang.srt.server_args:ServerArgs.add_cli_args"],
         "context_policy_flag_value": ["sglang.srt.server_args:ServerArgs.from_cli_args"]}


def install() -> None:
    install_flag()
    _register_unless_upstream(NAME, TARGET, _derive_context_length, "around")


def install_flag() -> None:
    """The flag alone (also when a garbage variable keeps every other hook off: the parser must still accept
    the flag, so that the launch step, not argparse, says what is wrong)."""
    for hook, sites in SITES.items():
        runtime_status.watch(hook, sites)
    _register_unless_upstream(*FLAG_HOOKS[0][:2], _add_cli_args, "after")
    _register_unless_upstream(*FLAG_HOOKS[1][:2], _from_cli_args, "around")


def _register_unless_upstream(name: str, target: str, fn, hook_type: str) -> None:
    aside = upstream_has.detail(name)
    if aside:
        hookstatus.record(name, target, "skipped", aside)
    else:
        registry.register(name, target, fn, hook_type)


# ---- 1. the flag ---------------------------------------------------------------------------------


def add_flag(parser) -> None:
    """Add the flag to an argparse parser (also used by our own `check` command)."""
    if any(FLAG in a.option_strings for a in parser._actions):
        return
    parser.add_argument(
        FLAG, dest=DEST, choices=POLICIES, default=None,
        help="[sglang-kimi-eagle3] how a draft with fewer positions than the served context is reconciled: "
             "auto (default: extend), strict (refuse), extend (lift only the draft's limit), yarn (YaRN-scale a "
             "plain-RoPE draft), cap (serve the draft's length). Env: SGLANG_KIMI_EAGLE3_CONTEXT_POLICY.")


def _add_cli_args(result, parser, *args, **kwargs):
    add_flag(parser)
    return result


def _from_cli_args(original, cls, args, *rest, **kwargs):
    server_args = original(cls, args, *rest, **kwargs)
    value = getattr(args, DEST, None)
    if value is not None:
        set_policy(server_args, value)
    return server_args


# ---- 2. the main process -------------------------------------------------------------------------


def launch_decision(server_args) -> ContextDecision | None:
    """The decision for a launch as the main process resolves it (None: no draft to reconcile).
    Reads both config.json files (UserError when they cannot be read)."""
    from sglang.srt.arg_groups.overrides import resolving_view

    from ...configs import read_config
    from ..preflight.inputs import local_config_dir

    cfg = resolving_view(server_args)
    draft_path = raw_input(server_args, "speculative_draft_model_path")
    if not draft_path:
        return None
    target = read_config(local_config_dir(raw_input(server_args, "model_path"), "--model-path"))
    draft = read_config(local_config_dir(draft_path, "--speculative-draft-model-path"))
    return decide(target_len=cfg.context_length or target.derived_context, draft_len=draft.derived_context,
                  policy=resolve_policy(policy_of(server_args)),
                  rope_margin=spec_rope_margin(getattr(cfg, "speculative_num_steps", None),
                                               getattr(cfg, "speculative_num_draft_tokens", None)))


def hand_default_to_sglang(server_args) -> str | None:
    """Main process, our launches, before SGLang's `handle_speculative_decoding`, on an SGLang with its own
    flag only: when the operator gave no flag, declare this plugin's policy (auto -> extend, or
    SGLANG_KIMI_EAGLE3_CONTEXT_POLICY) on SGLang's field, so that SGLang's own resolution and draft
    ModelConfig apply it instead of SGLang's default (strict). Returns the value declared (None: nothing).
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN (or CI) keeps SGLang's own default, as the hook stands aside
    for it on 0.5.23."""
    from sglang.srt.arg_groups.overrides import declare_resolution

    if not upstream_has.detail("context_policy_flag") or raw_input(server_args, DEST) is not None:
        return None
    if env_flag("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") or env_flag("SGLANG_IS_IN_CI"):
        return None
    policy = resolve_policy(None)
    value = "extend" if policy == "auto" else policy  # SGLang's flag has no auto: auto extends
    set_policy(server_args, policy)  # preflight decides with ours (auto warns about very short drafts)
    declare_resolution(server_args, "sglang-kimi-eagle3.context_policy.default", **{DEST: value})
    return value


def resolve_launch(server_args) -> ContextDecision | None:
    """Main-process step of our launches: apply `cap` (lower the served context for every later reader).
    Where SGLang has its own flag, its resolution already did (nothing to do here)."""
    from sglang.srt.arg_groups.overrides import declare_resolution

    if upstream_has.detail("context_policy_flag") or resolve_policy(policy_of(server_args)) != "cap":
        return None  # only cap acts here; the rest act on the draft's ModelConfig (section 3)
    dec = launch_decision(server_args)
    if dec is None or dec.action != "cap":
        return dec
    declare_resolution(server_args, "sglang-kimi-eagle3.context_policy.cap", context_length=dec.serve_len)
    server_args._model_config = None  # SGLang memoises the target's ModelConfig; rebuild it at the capped length
    logger().info("draft context policy: %s", dec.explanation)
    return dec


# ---- 3. the draft's ModelConfig ------------------------------------------------------------------


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

    from ...configs import KNOWN_ROPE_TYPES, read_config, require_draft_context
    from ...errors import UserError

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
    if not getattr(self, "is_draft_model", False) or context_length is None or our_launch() is False:
        return original(self, context_length)  # targets, and drafts of other algorithms, untouched
    if env_flag("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") or env_flag("SGLANG_IS_IN_CI"):
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
    if d.action == "cap":  # cap lowers the served length in the main process (resolve_launch)
        raise ValueError(f"sglang-kimi-eagle3: context policy 'cap' did not take effect before the target was "
                         f"configured (the target serves {context_length}): SGLang's argument resolution did not "
                         f"run this plugin's launch step in the main process; pass --context-length {d.draft_len}")
    apply_decision(self, d)
    hookstatus.count(NAME, "ours", d.action)
    return original(self, context_length)
