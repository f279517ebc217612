"""Preflight checks on the draft/target pair itself: algorithm, hidden sizes, vocabulary, dtypes. Pure."""

from __future__ import annotations

from ..configs import MLA_DRAFT_ARCHS
from .model import Deployment, Finding

EAGLE3_FIX = "--speculative-algorithm EAGLE3"


def check_algorithm(d: Deployment) -> list[Finding]:
    algo, draft = d.algorithm, d.draft
    if draft is not None and d.sglang is not None and d.sglang.draft_class_error:
        return []  # check_draft_class: SGLang cannot build this class at all
    if draft is None:
        if algo in ("EAGLE3",):
            return [Finding("error", "algorithm", "EAGLE3 requested without a draft model",
                            "an EAGLE-3 drafter checkpoint", "--speculative-draft-model-path <drafter>")]
        return []
    out = []
    if draft.is_eagle3_draft and algo in ("EAGLE", "NEXTN"):
        out.append(Finding("error", "algorithm", f"EAGLE-3 drafter {draft.arch} with --speculative-algorithm {algo}",
                           "EAGLE3 for an EAGLE-3 drafter (with EAGLE SGLang never feeds it the 3 aux hidden states: "
                           "acceptance length exactly 1.0, SGLang #21272)", EAGLE3_FIX))
    elif draft.is_eagle_draft and algo == "EAGLE3":
        out.append(Finding("error", "algorithm", f"EAGLE-1/2 drafter {draft.arch} with --speculative-algorithm EAGLE3",
                           "EAGLE for an EAGLE-1/2 drafter (it reads one hidden state, not three)",
                           "--speculative-algorithm EAGLE"))
    elif algo == "EAGLE3" and not draft.is_eagle3_draft:
        out.append(Finding("warning", "algorithm", f"draft architecture {draft.arch} is not a known EAGLE-3 drafter class",
                           "LlamaForCausalLMEagle3 or Eagle3DeepseekV2ForCausalLM (MLA)",
                           "check --speculative-draft-model-path points at the drafter, not a full model"))
    elif algo == "EAGLE3":
        kind = "MLA drafter (DeepSeek-style attention)" if draft.arch in MLA_DRAFT_ARCHS else "MHA drafter (Llama-style attention)"
        out.append(Finding("info", "algorithm", f"{draft.arch}: {kind}, EAGLE3"))
    return out


def check_capture_support(d: Deployment) -> list[Finding]:
    """The class SGLang builds for the target must expose the EAGLE-3 target interface."""
    if d.algorithm != "EAGLE3":
        return []
    out = []
    methods = d.target_class_methods
    if methods is None:
        out.append(Finding("warning", "capture_support", f"could not inspect SGLang's class for {d.target.arch}",
                           "set_eagle3_layers_to_capture / get_embed_and_head / set_embed_and_head on the target class",
                           "run `sglang-kimi-eagle3 status` to see why"))
    else:
        missing = [m for m, ok in methods.items() if not ok]
        if missing:
            out.append(Finding("error", "capture_support", f"{d.target.arch} on the installed SGLang lacks {', '.join(missing)}",
                               "the EAGLE-3 target interface (SGLang PR #19689 or this plugin's delegation hook)",
                               "upgrade SGLang to 0.5.23 or enable the plugin (unset SGLANG_KIMI_EAGLE3=0)"))
        else:
            out.append(Finding("info", "capture_support", f"{d.target.arch} exposes the EAGLE-3 target interface"))
    broken = {k: v for k, v in d.hook_states.items() if v[0] == "failed"}
    for name, (_state, detail) in broken.items():
        out.append(Finding("warning", "plugin_hooks", f"hook {name} failed: {detail}", "every plugin hook applied",
                           "see `sglang-kimi-eagle3 status`; pin sglang==0.5.23"))
    if d.hook_states and all(v[0] == "skipped" for v in d.hook_states.values()):
        out.append(Finding("warning", "plugin_hooks", "the plugin is switched off (SGLANG_KIMI_EAGLE3=0)",
                           "the plugin's hooks applied", "unset SGLANG_KIMI_EAGLE3"))
    return out


def check_hidden(d: Deployment) -> list[Finding]:
    t, dr = d.target, d.draft
    if dr is None or d.algorithm != "EAGLE3":
        return []
    out = []
    if d.sglang is not None and d.sglang.draft_class is not None:  # widths from SGLang itself: check_aux_agreement
        return out + _hidden_sharing(d)
    n_aux = len(dr.aux_layer_ids) if dr.aux_layer_ids else 3
    # SGLang 0.5.23 eagle_utils.get_draft_input_from_target_hidden_dim: fc input width =
    # (draft's target_hidden_size, else the *draft's* hidden_size) x number of aux layers.
    sglang_width = (dr.target_hidden_size or dr.hidden_size) * n_aux
    needed = t.hidden_size * n_aux
    if sglang_width != needed:
        out.append(Finding("error", "hidden_size", f"SGLang will build the draft's fc for {sglang_width} inputs "
                           f"({dr.target_hidden_size or dr.hidden_size} x {n_aux})",
                           f"{needed} = {n_aux} aux layers x target hidden {t.hidden_size}",
                           f"set \"target_hidden_size\": {t.hidden_size} in {dr.file}"))
    fc = (d.draft_tensor_shapes or {}).get("fc.weight") or (d.draft_tensor_shapes or {}).get("model.fc.weight")
    if fc is not None and fc[-1] != needed:
        out.append(Finding("error", "hidden_size", f"draft weight fc.weight has shape {fc}",
                           f"[{dr.hidden_size}, {needed}] for {n_aux} x {t.hidden_size}",
                           "use a drafter trained for this target"))
    elif d.draft_tensor_shapes is None:
        out.append(Finding("info", "hidden_size", f"fc input {needed} = {n_aux} x {t.hidden_size} (from configs; "
                           "weights not present, fc.weight not checked)"))
    return out + _hidden_sharing(d)


def _hidden_sharing(d: Deployment) -> list[Finding]:
    t, dr = d.target, d.draft
    if dr.hidden_size == t.hidden_size:
        return []
    return [Finding("warning", "hidden_size", f"draft hidden {dr.hidden_size} != target hidden {t.hidden_size}",
                    "equal widths, so SGLang shares the target's embedding with the draft",
                    "none needed if the drafter ships its own embed_tokens; SGLang skips sharing (llama.py set_embed)")]


def _ids(v) -> set:
    return set(v) if isinstance(v, list) else ({v} if v is not None else set())


def check_vocab(d: Deployment) -> list[Finding]:
    t, dr = d.target, d.draft
    if dr is None:
        return []
    out = []
    if dr.vocab_size != t.vocab_size:
        out.append(Finding("error", "vocab", f"draft vocab_size {dr.vocab_size} != target {t.vocab_size}",
                           "the target's vocabulary (d2t maps into it)", "use a drafter trained on this target's tokenizer"))
    dv = dr.draft_vocab_size
    if dv is not None and dv > dr.vocab_size:
        out.append(Finding("error", "vocab", f"draft_vocab_size {dv} > vocab_size {dr.vocab_size}",
                           "draft_vocab_size <= vocab_size", f"fix draft_vocab_size in {dr.file}"))
    # d2t and the other weights against SGLang's loader: checks_draft.check_draft_weights
    if _ids(dr.bos_token_id) and _ids(t.bos_token_id) and not _ids(dr.bos_token_id) <= _ids(t.bos_token_id):
        out.append(Finding("warning", "vocab", f"draft bos {dr.bos_token_id} != target bos {t.bos_token_id}",
                           "the same tokenizer", "check the drafter was trained for this target"))
    if _ids(dr.eos_token_id) and _ids(t.eos_token_id) and not _ids(dr.eos_token_id) & _ids(t.eos_token_id):
        out.append(Finding("warning", "vocab", f"draft eos {dr.eos_token_id} shares nothing with target eos {t.eos_token_id}",
                           "the same tokenizer", "check the drafter was trained for this target"))
    return out


_DTYPE = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16", "half": "float16",
          "float32": "float32", "float": "float32"}


def check_dtype_quant(d: Deployment) -> list[Finding]:
    t, dr = d.target, d.draft
    if dr is None:
        return []
    out = []
    td, dd = _DTYPE.get(str(t.torch_dtype)), _DTYPE.get(str(dr.torch_dtype))
    if d.dtype in ("auto", None) and td and dd and td != dd:
        out.append(Finding("warning", "dtype", f"draft {dd} vs target {td} under --dtype auto",
                           "one activation dtype for target hidden states and the draft", f"--dtype {td}"))
    if dr.quantization and not d.draft_quantization:
        out.append(Finding("info", "quantization", f"draft checkpoint is quantized ({dr.quantization})"))
    if d.draft_quantization and not dr.quantization:
        out.append(Finding("warning", "quantization", f"--speculative-draft-model-quantization {d.draft_quantization} "
                           "on an unquantized drafter", "no draft quantization flag for a bf16 drafter",
                           "drop --speculative-draft-model-quantization"))
    if t.quantization:
        head = "lm_head kept in bf16" if t.quant_ignores_lm_head else "lm_head quantized too"
        out.append(Finding("info", "quantization", f"target {t.quantization} ({head}); the draft runs unquantized "
                           "unless --speculative-draft-model-quantization is given"))
    return out


# model_type values whose tokenizer or config ship as custom code (auto_map) on the Hub.
_REMOTE_CODE_TYPES = ("kimi_k2", "kimi_k25", "deepseek_v3")


def check_trust_remote_code(d: Deployment) -> list[Finding]:
    t = d.target
    needs = t.has_auto_map or t.model_type in _REMOTE_CODE_TYPES or d.target.arch.startswith("KimiK25")
    if needs and not d.trust_remote_code:
        return [Finding("error", "trust_remote_code", f"{t.arch} ({t.model_type}) ships its tokenizer/config as custom "
                        "code, and --trust-remote-code is not set", "--trust-remote-code for Kimi checkpoints",
                        "--trust-remote-code")]
    if not needs and d.trust_remote_code:
        return [Finding("info", "trust_remote_code", "--trust-remote-code set but this target does not need it")]
    return []
