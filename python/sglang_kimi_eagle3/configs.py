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
    """What SGLang derives as the model's context length (see CONTEXT_LENGTH_KEYS)."""
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
            return int(factor * val)
    return 2048


def read_json(file: Path, missing_hint: str = "point the flag at a folder that holds the model's config.json") -> dict:
    """A JSON object from `file`, or a one-line UserError naming the file (missing, malformed, not an object)."""
    file = Path(file)
    if not file.is_file():
        raise UserError(f"{file}: not found; {missing_hint}")
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{file}: malformed JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); fix the file") from None
    except OSError as exc:
        raise UserError(f"{file}: unreadable ({exc.strerror}); check the path and its permissions") from None
    if not isinstance(data, dict):
        raise UserError(f"{file}: expected a JSON object at the top level, found {type(data).__name__}")
    return data


def _int(d: dict, key: str, file: Path, *, default=None, required=True):
    val = d.get(key, default)
    if val is None:
        if required:
            raise UserError(f"{file}: field {key!r} is missing; a model config needs it")
        return None
    if isinstance(val, bool) or not isinstance(val, (int, float)) or int(val) != val:
        raise UserError(f"{file}: field {key!r} = {val!r} is not an integer")
    return int(val)


def _quantization(text: dict) -> tuple[str | None, bool]:
    qc = text.get("quantization_config")
    if not isinstance(qc, dict):
        return None, False
    method = str(qc.get("quant_method", "unknown"))
    desc = method
    for group in (qc.get("config_groups") or {}).values():
        w = (group or {}).get("weights") or {}
        if w:
            desc = f"{method} {w.get('type', '')}{w.get('num_bits', '')} (group {w.get('group_size')})"
            break
    ignores = qc.get("ignore") or qc.get("modules_to_not_convert") or []
    return desc, any("lm_head" in str(x) for x in ignores)


def read_config(path: str | Path, *, label: str | None = None) -> ModelInfo:
    """Read `<path>/config.json` (or a config.json path itself)."""
    p = Path(path)
    file = p if p.suffix == ".json" else p / "config.json"
    outer = read_json(file)
    text = outer.get("text_config") if isinstance(outer.get("text_config"), dict) else outer
    archs = outer.get("architectures") or []
    if not archs or not isinstance(archs, list):
        raise UserError(f"{file}: field 'architectures' is missing or empty; SGLang picks the model class from it")
    text_archs = text.get("architectures") or archs
    eagle = outer.get("eagle_config") if isinstance(outer.get("eagle_config"), dict) else {}
    aux = eagle.get("eagle_aux_hidden_state_layer_ids")
    if aux is not None and (not isinstance(aux, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in aux)):
        raise UserError(f"{file}: field 'eagle_config.eagle_aux_hidden_state_layer_ids' = {aux!r} is not a list of layer indices")
    rope_scaling = text.get("rope_scaling", text.get("rope_parameters"))
    if rope_scaling is not None and not isinstance(rope_scaling, dict):
        raise UserError(f"{file}: field 'rope_scaling' = {rope_scaling!r} is neither null nor an object")
    rope_theta = text.get("rope_theta", (rope_scaling or {}).get("rope_theta"))
    quant, ignores_head = _quantization(text)
    if quant is None:
        quant, ignores_head = _quantization(outer)
    heads = _int(text, "num_attention_heads", file)
    info = ModelInfo(
        path=str(label or path),
        file=str(file),
        arch=str(archs[0]),
        text_arch=str(text_archs[0]),
        model_type=str(text.get("model_type") or outer.get("model_type") or ""),
        hidden_size=_int(text, "hidden_size", file),
        num_hidden_layers=_int(text, "num_hidden_layers", file),
        vocab_size=_int(text, "vocab_size", file, default=outer.get("vocab_size")),
        num_attention_heads=heads,
        num_key_value_heads=_int(text, "num_key_value_heads", file, default=heads),
        max_position_embeddings=_int(text, "max_position_embeddings", file, required=False),
        rope_theta=float(rope_theta) if rope_theta is not None else None,
        rope_scaling=rope_scaling,
        bos_token_id=text.get("bos_token_id", outer.get("bos_token_id")),
        eos_token_id=text.get("eos_token_id", outer.get("eos_token_id")),
        torch_dtype=text.get("torch_dtype") or outer.get("torch_dtype") or text.get("dtype") or outer.get("dtype"),
        quantization=quant,
        quant_ignores_lm_head=ignores_head,
        draft_vocab_size=_int(text, "draft_vocab_size", file, required=False),
        aux_layer_ids=list(aux) if aux is not None else None,
        target_hidden_size=_int(text, "target_hidden_size", file, required=False),
        tie_word_embeddings=bool(text.get("tie_word_embeddings", outer.get("tie_word_embeddings", False))),
        is_mla=text.get("kv_lora_rank") is not None,
        has_auto_map=bool(outer.get("auto_map")),
        raw=text,
    )
    return info


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
    "not checked". A header that cannot be parsed is a one-line UserError naming the file.
    """
    folder = Path(folder)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    shapes: dict[str, list[int]] = {}
    for f in files:
        try:
            with open(f, "rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
                if not 0 < n < 100_000_000:
                    raise ValueError(f"header length {n}")
                header = json.loads(fh.read(n))
        except (OSError, ValueError) as exc:
            raise UserError(f"{f}: not a readable safetensors file ({exc}); re-download the drafter") from None
        for name, meta in header.items():
            if name != "__metadata__" and isinstance(meta, dict):
                shapes[name] = list(meta.get("shape", []))
    return shapes
