"""Turn a launch, as SGLang parsed and resolved it, into a preflight `Deployment`.

Reads: the record's raw input (`server_args._raw_input`, what the operator typed, kept by SGLang's
resolution pipeline), its resolving view (backends SGLang chose), the two config.json files, the
draft's safetensors headers if weights sit beside its config, the class SGLang will build for the
target, and this plugin's hook table.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...configs import read_config, require_draft_context, require_known_rope
from ...errors import UserError
from ...policy.context import resolve_policy, spec_rope_margin
from ...preflight import Deployment, GpuTarget, SglangFacts
from ...preflight.checkpoint import read_draft_weights
from ...status import hookstatus
from ...validate import expand_path
from .. import upstream_has
from ..launch_record import CAPPED_ATTR, DEFAULT_OFF_ATTR, KEPT_ATTR, UPSTREAM_POLICY_FIELD, policy_of, raw_input


def local_config_dir(path: str | None, flag: str) -> Path:
    """A local folder holding `config.json` for a model path (folder, or HF repo id in the local cache)."""
    if not path:
        raise UserError(f"{flag} is not set; give a model folder, a Hugging Face repo id or a bundled profile name")
    p = Path(path)  # as SGLang takes it: no `~` expansion (only an unquoted shell word gets one)
    if p.is_dir():
        return p
    if str(path).startswith("~"):
        try:
            example = f", e.g. {flag} {expand_path(path, flag)}"
        except UserError:  # ~user unknown here: no example to give
            example = ""
        raise UserError(f"{flag} {path}: SGLang does not expand '~' (it would look for a folder literally named "
                        f"{str(path).split('/', 1)[0]!r}); write the full path{example}")
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(repo_id=path, filename="config.json")
        if isinstance(hit, str):
            return Path(hit).parent
    except Exception:
        pass
    raise UserError(f"{flag} {path}: not a folder and not in the local Hugging Face cache (offline lookup of "
                    f"config.json); download it first or pass a folder or a bundled profile name "
                    f"(`sglang-kimi-eagle3 profiles`)")


def _label(labels: dict[str, str] | None, path) -> str:
    return (labels or {}).get(str(path), str(path))


def target_class_methods(arch_list: list[str]) -> dict[str, bool] | None:
    """Which EAGLE-3 target methods the class SGLang builds for these architectures will have: its own,
    plus the delegates the plugin's delegation hook adds to a Kimi-K2.5 class (the class is not touched)."""
    from ...base import enabled
    from ..hooks.delegation import METHODS, is_kimi_k25

    try:
        from sglang.srt.models.registry import ModelRegistry

        cls, _ = ModelRegistry.resolve_model_cls(arch_list)
    except Exception:
        return None
    delegated = enabled() and is_kimi_k25(cls)
    return {m: delegated or callable(getattr(cls, m, None)) for m in METHODS}


def _context_policy_in_effect() -> bool:
    """A draft shorter than the served context gets a policy in the scheduler: this plugin's context_policy
    hook is installed, or SGLang's own draft ModelConfig applies its flag (whether the plugin is on or off)."""
    row = hookstatus.get("context_policy")
    return (row is not None and row.state in ("applied", "registered")) or bool(upstream_has.draft_context_config())


def index_total_size(folder: Path) -> int | None:
    """metadata.total_size of `model.safetensors.index.json` beside the config (weights present), else None."""
    from ...configs import read_json

    f = Path(folder) / "model.safetensors.index.json"
    if not f.is_file():
        return None
    meta = read_json(f).get("metadata") or {}
    size = meta.get("total_size") if isinstance(meta, dict) else None
    return int(size) if isinstance(size, (int, float)) and size > 0 else None


def _adaptive_ours(server_args, cfg) -> bool:
    """The adaptive table in effect is the one this plugin's launch step declared (the operator typed neither
    --speculative-adaptive nor --speculative-adaptive-config), not a file of the operator's, marked or not."""
    return bool(getattr(cfg, "speculative_adaptive", False)) and not (
        raw_input(server_args, "speculative_adaptive") or raw_input(server_args, "speculative_adaptive_config"))


def _adaptive_default_off(server_args) -> str | None:
    """Why this plugin's adaptive default would not serve the launch even with the operator's adaptive flags left out
    (None: it would), as the launch step recorded it (adaptive_default.apply)."""
    rec = getattr(server_args, DEFAULT_OFF_ATTR, None)
    return rec.get("why") if isinstance(rec, dict) else "this plugin's launch step did not decide it for this launch"


def adaptive_table(cfg) -> dict | None:
    """The adaptive config an adaptive launch's workers will load (SGLang's own loader); None otherwise or unreadable."""
    if not getattr(cfg, "speculative_adaptive", False):
        return None
    try:
        from sglang.srt.speculative.adaptive_spec_params import _load_adaptive_config

        return _load_adaptive_config(getattr(cfg, "speculative_adaptive_config", None))[0]
    except Exception:  # SGLang's own step reports a bad file
        return None


def memory_fields(server_args, cfg, gpu: GpuTarget, target_dir: Path, target) -> dict:
    """The Deployment fields of the memory-fit check (checks_memory.py)."""
    from ...preflight.checks_memory import vision_config_of
    from .gpu_memory import gpu_memory

    mib, source = gpu_memory(gpu)
    vision = vision_config_of(target)
    graphs = getattr(cfg, "cuda_graph_config", None)
    decode = getattr(graphs, "decode", None)
    max_bs = getattr(decode, "max_bs", None) if str(getattr(decode, "backend", "")) != "disabled" else None
    frac = getattr(cfg, "mem_fraction_static", None)
    return dict(gpu_memory_mib=mib, gpu_memory_source=source,
                mem_fraction_static=float(frac) if isinstance(frac, (int, float)) else None,
                mem_fraction_given=raw_input(server_args, "mem_fraction_static") is not None,
                kv_cache_dtype=str(getattr(cfg, "kv_cache_dtype", None) or "auto"),
                target_vision_config=vision, target_index_bytes=index_total_size(target_dir),
                cuda_graph_max_bs=max_bs if isinstance(max_bs, int) and max_bs > 0 else None,
                cuda_graph_bs=_graph_bs(decode),
                max_running_requests=raw_input(server_args, "max_running_requests"))


def _graph_bs(decode) -> list[int] | None:
    bs = getattr(decode, "bs", None) if decode is not None and str(getattr(decode, "backend", "")) != "disabled" else None
    return sorted(int(b) for b in bs) if isinstance(bs, (list, tuple)) and bs else None


def model_overrides(server_args) -> dict | None:
    """--json-model-override-args: SGLang applies it to the target's and the draft's config alike
    (ModelConfig.from_server_args); one that is not a JSON object is SGLang's own error to report."""
    raw = raw_input(server_args, "json_model_override_args")
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    return value if isinstance(value, dict) and value else None


def build_deployment(server_args, gpu: GpuTarget, *, sglang_error: str | None = None,
                     check_target_class: bool = True, labels: dict[str, str] | None = None) -> Deployment:
    """labels: folder -> the name the operator typed (a bundled profile name), for readable findings."""
    from sglang.srt.arg_groups.overrides import resolving_view

    from ..registry import refresh

    cfg = resolving_view(server_args)
    target_dir = local_config_dir(raw_input(server_args, "model_path"), "--model-path")
    overrides = model_overrides(server_args)
    target = read_config(target_dir, label=_label(labels, raw_input(server_args, "model_path")), overrides=overrides)
    draft_path = raw_input(server_args, "speculative_draft_model_path")
    draft = None
    shapes = weights = None
    if draft_path:
        draft_dir = local_config_dir(draft_path, "--speculative-draft-model-path")
        draft = read_config(draft_dir, label=_label(labels, draft_path), overrides=overrides)
        require_draft_context(draft)
        require_known_rope(draft)
        weights = read_draft_weights(draft_dir)
        shapes = weights.shapes if weights is not None else None
    algo = raw_input(server_args, "speculative_algorithm")
    spec = _spec_params(server_args, cfg, sglang_error)
    facts = _facts(target, draft, str(draft_dir) if draft_path else None, algo, spec, server_args)
    refresh()
    cg_decode = str(getattr(cfg, "cuda_graph_backend_decode", "") or "")
    return Deployment(
        target=target, draft=draft,
        algorithm=str(algo).upper() if algo else None,
        steps=spec[0], topk=spec[1], draft_tokens=spec[2],
        draft_tokens_typed=raw_input(server_args, "speculative_num_draft_tokens"),
        adaptive=bool(getattr(cfg, "speculative_adaptive", False)),
        adaptive_table=adaptive_table(cfg),
        adaptive_kept=getattr(server_args, KEPT_ATTR, None),
        adaptive_capped=getattr(server_args, CAPPED_ATTR, None),
        adaptive_ours=_adaptive_ours(server_args, cfg),
        adaptive_default_off=_adaptive_default_off(server_args),
        sglang=facts, draft_weights=weights,
        same_model_folder=bool(draft_path) and os.path.realpath(target_dir) == os.path.realpath(draft_dir),
        tp=int(raw_input(server_args, "tp_size") or 1),
        ep_size=_width(getattr(cfg, "ep_size", None)), dcp_size=_width(getattr(cfg, "dcp_size", None)),
        context_length=raw_input(server_args, "context_length"),
        context_policy=resolve_policy(policy_of(server_args)),
        gpu=gpu,
        target_decode_backend=getattr(cfg, "decode_attention_backend", None) or getattr(cfg, "attention_backend", None),
        target_prefill_backend=getattr(cfg, "prefill_attention_backend", None) or getattr(cfg, "attention_backend", None),
        draft_backend_flag=getattr(cfg, "speculative_draft_attention_backend", None),
        page_size=getattr(cfg, "page_size", None),
        device=raw_input(server_args, "device"),
        dtype=str(raw_input(server_args, "dtype") or "auto"),
        quantization=raw_input(server_args, "quantization"),
        draft_quantization=raw_input(server_args, "speculative_draft_model_quantization"),
        trust_remote_code=bool(raw_input(server_args, "trust_remote_code")),
        use_rejection_sampling=bool(getattr(cfg, "speculative_use_rejection_sampling", False)),
        cuda_graph_disabled=bool(getattr(cfg, "disable_cuda_graph", False)) or cg_decode == "disabled",
        custom_all_reduce_disabled=bool(getattr(cfg, "disable_custom_all_reduce", False)),
        target_class_methods=target_class_methods([target.arch]) if check_target_class else None,
        hook_states={r.name: (r.state, r.detail) for r in hookstatus.rows()},
        draft_tensor_shapes=shapes,
        sglang_error=sglang_error,
        context_hook_active=_context_policy_in_effect(),
        # where SGLang has its own flag, a flag the operator gave wins over the global override
        global_override_set=facts.context_override
        and not (upstream_has.draft_context_flag() and raw_input(server_args, UPSTREAM_POLICY_FIELD)),
        rope_margin=spec_rope_margin(getattr(cfg, "speculative_num_steps", None),
                                     getattr(cfg, "speculative_num_draft_tokens", None)),
        **memory_fields(server_args, cfg, gpu, target_dir, target),
    )


def _width(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _spec_params(server_args, cfg, sglang_error) -> tuple:
    """(steps, topk, draft tokens) as SGLang resolved them when the operator gave any and SGLang accepted the
    launch (adaptive mode and topk 1 fill the draft tokens in), else as typed."""
    names = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    typed = tuple(raw_input(server_args, n) for n in names)
    if sglang_error is not None or all(v is None for v in typed):
        return typed
    return tuple(getattr(cfg, n, None) for n in names)


def _facts(target, draft, draft_dir, algo, spec, server_args) -> SglangFacts:
    from .sglang_facts import gather

    try:
        return gather(target=target, draft=draft, draft_path=draft_dir, algorithm=str(algo).upper() if algo else None,
                      steps=spec[0], topk=spec[1], trust_remote_code=bool(raw_input(server_args, "trust_remote_code")))
    except Exception as exc:  # a fact SGLang could not give is "not checked", never a crash of the check
        return SglangFacts(notes=[f"SGLang's verdicts unavailable ({type(exc).__name__}: {exc})"])
