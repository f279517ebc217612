"""Read a checkpoint's HF `config.json` into one small dataclass (pure: json only, no transformers).

Works for the nested multimodal layout (Kimi-K2.5: the language model lives in `text_config`) and
for flat configs (Kimi-K2, Llama, EAGLE-3 drafters). Every malformed input is a one-line
`UserError` naming the file and field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError
from .validate import (
    MISSING,
    check_float,
    check_int,
    check_str,
    dict_field,
    float_field,
    int_field,
    list_field,
    read_json_object,
    show,
    str_field,
)

# SGLang 0.5.23 sglang/srt/utils/hf_transformers/common.py:677-697 (get_context_length): the first
# of these keys present wins; rope_scaling.factor multiplies it unless the dict has
# original_max_position_embeddings or the type is llama3.
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")

# RoPE types SGLang 0.5.23's get_rope factory knows (layers/rotary_embedding/factory.py).
KNOWN_ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "deepseek_yarn", "llama3", "longrope", "mrope", "su", "llama4")

MLA_DRAFT_ARCHS = ("Eagle3DeepseekV2ForCausalLM",)
EAGLE3_DRAFT_ARCHS = ("LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM", "Qwen3ForCausalLMEagle3", "Qwen2ForCausalLMEagle3")
EAGLE_DRAFT_ARCHS = ("LlamaForCausalLMEagle", "Qwen2ForCausalLMEagle", "MiniCPMForCausalLMEagle")


@dataclass(slots=True)
class ModelInfo:
    path: str  # the folder (or profile) it came from
    file: str  # the config.json read
    arch: str  # architectures[0] of the outer config
    text_arch: str  # architectures[0] of the language model (== arch for flat configs)
    model_type: str
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int | None
    rope_theta: float | None
    rope_scaling: dict | None
    bos_token_id: int | list | None
    eos_token_id: int | list | None
    torch_dtype: str | None
    quantization: str | None  # "compressed-tensors int4 w4a16 (group 32)" or None
    quant_ignores_lm_head: bool
    draft_vocab_size: int | None  # EAGLE-3 drafters with a pruned vocabulary
    aux_layer_ids: list[int] | None  # eagle_config.eagle_aux_hidden_state_layer_ids
    target_hidden_size: int | None  # drafter's declared target width, when it declares one
    tie_word_embeddings: bool
    is_mla: bool  # kv_lora_rank present: MLA attention
    has_auto_map: bool  # ships custom code (needs --trust-remote-code)
    raw: dict = field(repr=False, default_factory=dict)
    text_prefix: str = ""  # "text_config." where `raw` is a nested language config (field names in messages)

    @property
    def derived_context(self) -> int:
        return derived_context_length(self)

    @property
    def rope_type(self) -> str:
        """'default' for plain RoPE; the rope_scaling type otherwise."""
        rs = self.rope_scaling
        if not rs:
            return "default"
        return str(rs.get("rope_type") or rs.get("type") or "default")

    @property
    def is_eagle3_draft(self) -> bool:
        return self.arch in EAGLE3_DRAFT_ARCHS or self.arch.endswith("Eagle3")

    @property
    def is_eagle_draft(self) -> bool:
        return self.arch in EAGLE_DRAFT_ARCHS or (self.arch.endswith("Eagle") and not self.is_eagle3_draft)


def derived_context_length(info: ModelInfo) -> int:
    """What SGLang derives as the model's context length (see CONTEXT_LENGTH_KEYS); always >= 1.

    read_config has checked every key used here (positive integers, a positive finite factor).
    """
    text = info.raw
    rs = info.rope_scaling
    factor = 1.0
    if rs:
        factor = rs.get("factor", 1) or 1
        if "original_max_position_embeddings" in rs or (rs.get("rope_type") or rs.get("type")) == "llama3":
            factor = 1
    for key in CONTEXT_LENGTH_KEYS:
        val = text.get(key)
        if val is not None:
            return max(1, int(factor * val))
    return 2048


def read_json(file: Path, missing_hint: str = "point the flag at a folder that holds the model's config.json") -> dict:
    """A JSON object from `file`, or a one-line UserError naming the file (missing, unreadable, not UTF-8,
    malformed, too deep, not an object): validate.read_json_object."""
    return read_json_object(file, missing_hint)


# Past any model (a typo, a hand-edited file): `check` looped over 1e33 layers until memory ran out, and sizes like
# 1e300 overflowed its float arithmetic. Context-length keys stay unbounded (tokenizers' 1e30 "no limit" sentinel).
MAX_LAYERS = 1 << 14
MAX_SIZE = 1 << 24  # widths, head counts and vocabularies


def _int(d: dict, key: str, file, pre: str = "", *, default=None, required=True, lo=1, hi=None):
    """A positive (by default) integer field `pre + key` ("text_config." for nested configs)."""
    return int_field(d, pre + key, str(file), default=default if default is not None else MISSING,
                     required=required, lo=lo, hi=hi, fix="fix the config")


def _token_ids(d: dict, key: str, where: str):
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, list):
        return [check_int(x, where, f"{key}[{i}]", lo=0) for i, x in enumerate(v)]
    return check_int(v, where, key, lo=0, fix="a token id or a list of token ids")


def _quantization(d: dict, where: str, pre: str = "") -> tuple[str | None, bool]:
    q = pre + "quantization_config"
    qc = dict_field(d, q, where, required=False)
    if qc is None:
        return None, False
    method = str_field(qc, f"{q}.quant_method", where, default="unknown")
    desc = method
    groups = dict_field(qc, f"{q}.config_groups", where, required=False) or {}
    for name, group in groups.items():
        if not isinstance(group, dict):
            raise UserError(f"{where}: field '{q}.config_groups.{name}' = {show(group)}; expected an object")
        w = dict_field(group, f"{q}.config_groups.{name}.weights", where, required=False) or {}
        if w:
            desc = f"{method} {w.get('type', '')}{w.get('num_bits', '')} (group {w.get('group_size')})"
            break
    key = "ignore" if qc.get("ignore") is not None else "modules_to_not_convert"
    ignores = list_field(qc, f"{q}.{key}", where, required=False, what="a list of module names") or []
    return desc, any("lm_head" in str(x) for x in ignores)


def _rope_scaling(text: dict, where: str, pre: str) -> dict | None:
    key = "rope_scaling" if text.get("rope_scaling") is not None else "rope_parameters"
    rs = text.get(key)
    if rs is None:
        return None
    key = pre + key
    if not isinstance(rs, dict):
        raise UserError(f"{where}: field {key!r} = {show(rs)}; expected null or an object")
    for k in ("rope_type", "type"):
        str_field(rs, f"{key}.{k}", where, required=False)
    float_field(rs, f"{key}.factor", where, required=False, lo=0, lo_open=True, fix="fix the config")
    int_field(rs, f"{key}.original_max_position_embeddings", where, required=False, lo=1)
    float_field(rs, f"{key}.rope_theta", where, required=False, lo=0, lo_open=True)
    return rs


SUB_CONFIGS = ("text_config", "vision_config", "audio_config")  # dicts that transformers builds into sub-configs


def apply_overrides(outer: dict, overrides: dict) -> dict:
    """config.json as SGLang 0.5.23 loads it under --json-model-override-args (hf_transformers/config.py get_config):
    an object for a sub-config or rope_scaling / rope_parameters merges one level into it; anything else replaces."""
    out = dict(outer)
    for key, value in overrides.items():
        cur = out.get(key)
        if isinstance(value, dict) and isinstance(cur, dict) and (key in SUB_CONFIGS or key in ("rope_scaling", "rope_parameters")):
            out[key] = {**cur, **value}
        else:
            out[key] = value
    return out


def read_config(path: str | Path, *, label: str | None = None, overrides: dict | None = None) -> ModelInfo:
    """Read `<path>/config.json` (or a config.json path itself), with SGLang's --json-model-override-args applied
    (`overrides`). Every field used is type- and range-checked."""
    p = Path(path)
    file = p if p.suffix == ".json" else p / "config.json"
    outer = read_json(file)
    if not overrides:
        return _model_info(outer, file, path, label)
    try:
        return _model_info(apply_overrides(outer, overrides), file, path, label)
    except UserError as e:
        raise UserError(f"{e} (with --json-model-override-args {json.dumps(overrides)} applied, as SGLang applies it "
                        "to the target's and the draft's config)") from None


def _model_info(outer: dict, file: Path, path, label) -> ModelInfo:
    where = str(file)
    text = outer.get("text_config", outer)
    if not isinstance(text, dict):
        raise UserError(f"{file}: field 'text_config' = {show(text)}; expected an object (the language model's config)")
    pre = "text_config." if text is not outer else ""
    names = dict(what="a list of class names", item=check_str)
    archs = list_field(outer, "architectures", where, nonempty=True, **names)
    text_archs = list_field(text, pre + "architectures", where, required=False, nonempty=True, **names) or archs
    eagle = dict_field(outer, "eagle_config", where, required=False) or {}
    aux = list_field(eagle, "eagle_config.eagle_aux_hidden_state_layer_ids", where, required=False,
                     what="a list of layer indices", item=lambda v, w, k: check_int(v, w, k, lo=0))
    rope_scaling = _rope_scaling(text, where, pre)
    rope_theta = text.get("rope_theta", (rope_scaling or {}).get("rope_theta"))
    if rope_theta is not None:
        rope_theta = check_float(rope_theta, where, pre + "rope_theta", lo=0, lo_open=True, fix="fix the config")
    for key in CONTEXT_LENGTH_KEYS:  # whichever SGLang picks must be a positive integer
        _int(text, key, file, pre, required=False)
    quant, ignores_head = _quantization(text, where, pre)
    if quant is None and text is not outer:
        quant, ignores_head = _quantization(outer, where)
    heads = _int(text, "num_attention_heads", file, pre, hi=MAX_SIZE)
    dtype = text.get("torch_dtype") or outer.get("torch_dtype") or text.get("dtype") or outer.get("dtype")
    if dtype is not None and not isinstance(dtype, str):
        raise UserError(f"{file}: field 'torch_dtype' = {show(dtype)}; expected a dtype name such as \"bfloat16\"")
    tie = text.get("tie_word_embeddings", outer.get("tie_word_embeddings", False))
    if tie is not None and not isinstance(tie, bool):
        raise UserError(f"{file}: field 'tie_word_embeddings' = {show(tie)}; expected true or false")
    model_type = text.get("model_type") or outer.get("model_type") or ""
    if not isinstance(model_type, str):
        raise UserError(f"{file}: field 'model_type' = {show(model_type)}; expected a string")
    vocab = outer.get("vocab_size") if text.get("vocab_size") is None else None
    ids = {k: _token_ids(text, k, where) if k in text else _token_ids(outer, k, where) for k in ("bos_token_id", "eos_token_id")}
    return ModelInfo(
        path=str(label or path),
        file=where,
        arch=archs[0],
        text_arch=text_archs[0],
        model_type=model_type,
        hidden_size=_int(text, "hidden_size", file, pre, hi=MAX_SIZE),
        num_hidden_layers=_int(text, "num_hidden_layers", file, pre, hi=MAX_LAYERS),
        vocab_size=_int(text, "vocab_size", file, pre, default=vocab, hi=MAX_SIZE),
        num_attention_heads=heads,
        num_key_value_heads=_int(text, "num_key_value_heads", file, pre, default=heads, hi=MAX_SIZE),
        max_position_embeddings=_int(text, "max_position_embeddings", file, pre, required=False),
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        bos_token_id=ids["bos_token_id"],
        eos_token_id=ids["eos_token_id"],
        torch_dtype=dtype,
        quantization=quant,
        quant_ignores_lm_head=ignores_head,
        draft_vocab_size=_int(text, "draft_vocab_size", file, pre, required=False, hi=MAX_SIZE),
        aux_layer_ids=aux,
        target_hidden_size=_int(text, "target_hidden_size", file, pre, required=False, hi=MAX_SIZE),
        tie_word_embeddings=bool(tie),
        is_mla=text.get("kv_lora_rank") is not None,
        has_auto_map=bool(outer.get("auto_map")),
        raw=text,
        text_prefix=pre,
    )


def require_draft_context(draft: ModelInfo) -> int:
    """The draft's trained positions; a drafter that does not declare them is unusable input."""
    if draft.max_position_embeddings is None and not any(draft.raw.get(k) for k in CONTEXT_LENGTH_KEYS):
        raise UserError(
            f"{draft.file}: field 'max_position_embeddings' is missing; the draft's trained context length is unknown "
            "(SGLang would silently assume 2048) - add the length the drafter was trained with"
        )
    return draft.derived_context


def require_known_rope(info: ModelInfo) -> str:
    rt = info.rope_type
    if rt not in KNOWN_ROPE_TYPES:
        raise UserError(
            f"{info.file}: field 'rope_scaling.rope_type' = {rt!r} is not a RoPE type SGLang 0.5.23 knows "
            f"({', '.join(KNOWN_ROPE_TYPES)}); fix the config"
        )
    return rt


def safetensors_shapes(folder: str | Path) -> dict[str, list[int]] | None:
    """Tensor name -> shape from the safetensors headers in `folder` (no tensor data read).

    None when the folder holds no weights (a config-only folder): checks that need weights then say
    "not checked". A header that cannot be parsed is a one-line UserError naming the file. The one reader
    is preflight/checkpoint.read_draft_weights (which also sees the index, file sizes and d2t's values).
    """
    from .preflight.checkpoint import read_draft_weights

    w = read_draft_weights(folder)
    return None if w is None else w.shapes
