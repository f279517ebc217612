"""SGLang's own verdicts on a launch, gathered from SGLang's code and handed to preflight as plain data.

Preflight (pure) must not carry copies of SGLang's rules that drift from the installed release. So the
facts below are obtained by calling SGLang 0.5.23's own classes and functions, on CPU, with tiny
stand-in tensors or objects where a running server would hold real ones:

  draft class      ModelRegistry.is_arch_supported (models/registry.py): the draft worker builds the
                   draft through get_model_architecture; an unregistered class cannot be built.
  tree capacity    select_top_k_tokens (spec_utils.py) for the draft steps, then organize_draft_results
                   (eagle_utils.py), which takes the top num_draft_tokens - 1 of
                   topk + (steps - 1) * topk^2 scores: the largest draft-token count it accepts.
  context escape   envs.SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN.get() or is_in_ci(), exactly what
                   ModelConfig._derive_context_length reads before refusing a longer --context-length.
  aux capture      the draft's HF config as SGLang reads it (get_config), the ids and use_aux that
                   _resolve_eagle_aux_hidden_state (spec_aux_hidden_state.py) hands the target, and the
                   layers the target class's own set_eagle3_layers_to_capture makes of them.
  buffer width     get_draft_input_from_target_hidden_dim (eagle_utils.py).
  fc width         the fc SGLang builds for the draft class: llama_eagle3.LlamaModel constructed on the
                   meta device (no layers, TP 1), or kimi_k25_eagle3's _get_eagle_aux_layer_count.
Each fact that cannot be derived is left None with a note; the checks then say "not checked".
"""

from __future__ import annotations

import types

from ...preflight.model import SglangFacts

MAX_TREE_PROBE = 1 << 22  # scores the tree probe may allocate (steps x topk^2)


def context_override() -> bool:
    """SGLang's own reading of its escape hatch for a --context-length above the model's."""
    from sglang.srt.environ import envs
    from sglang.utils import is_in_ci

    return bool(envs.SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN.get() or is_in_ci())


def tree_capacity(steps: int, topk: int) -> int | None:
    """The most --speculative-num-draft-tokens SGLang's organize_draft_results takes for (steps, topk)."""
    if not (isinstance(steps, int) and isinstance(topk, int)) or steps < 1 or topk < 1 or steps * topk * topk > MAX_TREE_PROBE:
        return None
    import torch
    from sglang.srt.speculative import spec_utils
    from sglang.srt.speculative.eagle_utils import organize_draft_results

    later = getattr(spec_utils._select_top_k_tokens_later, "_torchdynamo_orig_callable", None) or getattr(
        spec_utils._select_top_k_tokens_later, "__wrapped__", None)
    if later is None:
        return None
    b = 1
    p, idx = torch.rand(b, topk), torch.zeros(b, topk, dtype=torch.long)
    _, _, scores, info = spec_utils.select_top_k_tokens(0, p, idx, None, None, topk)  # the first draft step
    lists = [[info[0]], [info[1]], [info[2]]]
    for i in range(1, steps):  # each later step: topk x topk candidate scores
        p, idx = torch.rand(b * topk, topk), torch.zeros(b * topk, topk, dtype=torch.long)
        _, _, scores, info = later(i, p, idx, None, scores, topk)
        for acc, x in zip(lists, info):
            acc.append(x)
    n = sum(s[0].numel() for s in lists[0]) + 1  # every scored candidate, plus the verified root token
    try:
        organize_draft_results(*lists, n)
    except RuntimeError:
        return None
    try:
        organize_draft_results(*lists, n + 1)
    except RuntimeError:
        return n
    return None  # SGLang took more than it has scores for: not a rule we can state


def draft_hf_config(path: str, trust_remote_code: bool):
    """The draft's config as SGLang reads it (the same call its algorithm-alias step makes)."""
    from sglang.srt.utils.hf_transformers_utils import get_config

    return get_config(path, trust_remote_code=trust_remote_code)


def _class_of(arch: str):
    from sglang.srt.models.registry import ModelRegistry

    if not ModelRegistry.is_arch_supported(arch):
        return None
    return ModelRegistry.resolve_model_cls([arch])[0]


def captured_layers(target_arch: str, text_arch: str, n_layers: int, ids) -> list[int] | None:
    """Run the target class's own set_eagle3_layers_to_capture on a stand-in that has only what it reads
    (pp_group, config.num_hidden_layers, model; a language_model for wrappers such as Kimi-K2.5)."""

    def stand_in(cls):
        fn = getattr(cls, "set_eagle3_layers_to_capture", None)
        if fn is None:
            return None
        s = type("TargetStandIn", (), {"set_eagle3_layers_to_capture": fn})()
        s.pp_group = types.SimpleNamespace(is_last_rank=True)
        s.config = types.SimpleNamespace(num_hidden_layers=n_layers)
        s.model = types.SimpleNamespace(layers_to_capture=None)
        return s

    outer_cls = _class_of(target_arch)
    if outer_cls is None:
        return None
    outer = stand_in(outer_cls)
    if outer is None:
        return None
    inner = None
    if text_arch != target_arch:
        inner_cls = _class_of(text_arch)
        inner = stand_in(inner_cls) if inner_cls is not None else None
        outer.language_model = inner
    try:
        outer.set_eagle3_layers_to_capture(None if ids is None else list(ids))
    except Exception:
        return None
    got = (inner or outer).model.layers_to_capture
    return list(got) if isinstance(got, list) else None


def draft_input_width(hf, hidden_size: int) -> int | None:
    from sglang.srt.speculative.eagle_utils import get_draft_input_from_target_hidden_dim
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    runner = types.SimpleNamespace(
        model_config=types.SimpleNamespace(hf_config=hf, hidden_size=hidden_size, spec_hidden_size=hidden_size),
        spec_algorithm=SpeculativeAlgorithm.EAGLE3)
    try:
        return int(get_draft_input_from_target_hidden_dim(runner))
    except Exception:
        return None


def fc_in_features(draft_class: str, hf) -> int | None:
    """The in-width of the fc SGLang's draft class builds from this config."""
    import copy

    try:
        if draft_class == "Eagle3DeepseekV2ForCausalLM":
            from sglang.srt.models.kimi_k25_eagle3 import _get_eagle_aux_layer_count

            width = getattr(hf, "target_hidden_size", None) or hf.hidden_size  # Eagle3MLAModel.__init__
            return int(width * _get_eagle_aux_layer_count(hf))
        if draft_class == "LlamaForCausalLMEagle3":
            import torch
            from sglang.srt.models import llama_eagle3
            from sglang.srt.runtime_context import get_parallel

            cfg = copy.deepcopy(hf)
            cfg.num_hidden_layers = 0  # the fc does not depend on the layers; building none needs no kernels
            one_gpu = dict(tp_size=1, tp_rank=0, tp_group=None, attn_tp_size=1, attn_tp_rank=0, attn_tp_group=None,
                           attn_dp_size=1, attn_dp_rank=0, attn_cp_size=1, attn_cp_rank=0, moe_ep_size=1, moe_dp_size=1,
                           moe_tp_size=1)  # the fc is a plain nn.Linear: its width does not depend on TP
            with torch.device("meta"), get_parallel().override(**one_gpu):
                return int(llama_eagle3.LlamaModel(cfg).fc.in_features)
    except Exception:
        return None
    return None


def _eagle_ids(hf):
    """(use_aux, ids handed to the target) as _resolve_eagle_aux_hidden_state reads them (0.5.23
    spec_aux_hidden_state.py:186-196: eagle_config only; any failure -> the target's default)."""
    use_aux, ids = True, None
    try:
        eagle_config = getattr(hf, "eagle_config", None)
        use_aux = eagle_config.get("use_aux_hidden_state", True)
        ids = eagle_config["eagle_aux_hidden_state_layer_ids"]
    except Exception:
        ids = None
    return bool(use_aux), ids


def gather(*, target, draft, draft_path: str | None, algorithm: str | None, steps, topk, trust_remote_code: bool) -> SglangFacts:
    """Every fact for this launch; `target`/`draft` are configs.ModelInfo, `draft_path` the folder SGLang reads."""
    facts = SglangFacts(context_override=context_override())
    if isinstance(topk, int) and topk > 1 and isinstance(steps, int):
        facts.tree_capacity = tree_capacity(steps, topk)
        if facts.tree_capacity is None:
            facts.notes.append(f"tree size for steps {steps} / topk {topk} not derived from SGLang")
    if draft is None or not draft_path:
        return facts
    cls = _class_of(draft.arch)
    if cls is None:
        from importlib.metadata import version

        facts.draft_class_error = (f"{draft.arch} is not a model class the installed SGLang {version('sglang')} "
                                   "registers: its draft worker cannot build the draft")
        return facts
    facts.draft_class = draft.arch
    if algorithm != "EAGLE3":
        return facts
    try:
        hf = draft_hf_config(draft_path, trust_remote_code)
    except Exception as exc:
        facts.notes.append(f"SGLang could not read the draft config ({type(exc).__name__}: {exc})")
        return facts
    facts.use_aux, facts.capture_ids = _eagle_ids(hf)
    top = getattr(hf, "eagle_aux_hidden_state_layer_ids", None)
    facts.top_level_ids = list(top) if isinstance(top, (list, tuple)) else None
    facts.captured_layers = captured_layers(target.arch, target.text_arch, target.num_hidden_layers, facts.capture_ids)
    facts.draft_input_width = draft_input_width(hf, draft.hidden_size)
    facts.fc_in_features = fc_in_features(draft.arch, hf)
    for name in ("captured_layers", "draft_input_width", "fc_in_features"):
        if getattr(facts, name) is None:
            facts.notes.append(f"{name.replace('_', ' ')} not derived from SGLang for {draft.arch}")
    return facts
