"""Memory arithmetic for preflight: weight bytes per GPU, KV bytes per token, GPU capacities. Pure.

How SGLang 0.5.23 sizes a GPU (mem_cache/kv_cache_configurator.py `_profile_available_bytes`,
arg_groups/memory_hook.py `handle_gpu_memory_settings`):

  KV budget = free memory after the weights load - free-before-load x (1 - mem_fraction_static)
              - the multimodal reservation (SGLANG_VLM_CACHE_SIZE_MB, 100 MiB, for a multimodal target)
  tokens    = KV budget / cell, cell = target KV bytes per token + the draft's layers counted at the
              target's per-layer size (pool_configurator.DefaultPoolConfigurator, EAGLE branch)

so `mem_fraction_static` x (free memory before load) must hold the weights of target and draft plus the
KV pool, and the rest, (1 - fraction), is the allowance for activations, CUDA graphs and communicator
buffers. "Free before load" is the card's capacity less the CUDA context and NCCL set-up, which this
module takes as PRELOAD_OVERHEAD_GIB (about what a TP rank holds before its first weight: CUDA context
~0.5 GiB plus NCCL/custom all-reduce buffers).

Weight bytes follow SGLang's tensor-parallel layout for DeepSeek-V3-family (MLA + MoE) and Llama-style
models: column/row-parallel linears, vocabulary-parallel embedding and lm_head, and the fused MoE are split
over `--tp-size`; the MLA down-projections (q_a_proj, kv_a_proj_with_mqa: ReplicatedLinear), norms, the
MoE router, the EAGLE-3 `fc` and the vision tower are held whole on every rank. The MLA latent KV cache is
held whole on every rank too (it has no head dimension to split).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..configs import MAX_SIZE, ModelInfo
from ..validate import MISSING, int_field

GIB = 1 << 30
MIB = 1 << 20
PRELOAD_OVERHEAD_GIB = 1.0
# SGLang's own floor for the (1 - fraction) allowance on GPUs over 60 GB (memory_hook.py: reserved_mem =
# max(512 MB + 1.5 MB x chunked-prefill tokens + TP/8 GiB + CUDA-graph reserve, 10 GiB)).
SGLANG_ALLOWANCE_FLOOR_GIB = 10.0
MM_RESERVATION_GIB = 100 / 1024  # SGLANG_VLM_CACHE_SIZE_MB default

# nvidia-smi memory.total (MiB) of the GPUs an operator names with --for-gpu.
KNOWN_GPUS: list[tuple[str, str, int]] = [
    (r"rtx\s*pro\s*6000", "RTX PRO 6000 Blackwell (96 GB)", 97887),
    (r"h200", "H200 (141 GB)", 143771),
    (r"h100|h800", "H100 (80 GB)", 81559),
    (r"gb200", "GB200 (186 GB)", 189471),
    (r"b200", "B200 (180 GB)", 183359),
    (r"a100", "A100 80GB", 81920),
]

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "float8_e4m3fn": 1}


def known_gpu_memory_mib(name: str) -> tuple[int, str] | None:
    """(MiB, the card it was read as) for a GPU named by --for-gpu or a device name; None if unknown."""
    v = name.strip().lower()
    for pat, label, mib in KNOWN_GPUS:
        if re.search(pat, v):
            return mib, label
    return None


def dtype_bytes(torch_dtype: str | None) -> int:
    return _DTYPE_BYTES.get(str(torch_dtype or "bfloat16").replace("torch.", ""), 2)


def kv_dtype_bytes(kv_cache_dtype: str | None, model_dtype: str | None) -> float:
    """Bytes per KV element for SGLang's --kv-cache-dtype (auto: the model's dtype)."""
    k = str(kv_cache_dtype or "auto").lower()
    if k in ("auto", "", "none"):
        return dtype_bytes(model_dtype)
    if k.startswith("fp8"):
        return 1
    if k.startswith("fp4"):
        return 0.5
    return dtype_bytes(k)


# --- which tensors SGLang holds whole on every TP rank --------------------------------------------
_REPLICATED = re.compile(r"(q_a_proj|kv_a_proj_with_mqa|layernorm|(^|\.)norm\.|_norm\.|mlp\.gate\.|"
                         r"e_score_correction_bias|vision_tower|mm_projector|multi_modal_projector|(^|\.)fc\.|"
                         r"weight_shape)")


def replicated(name: str) -> bool:
    return bool(_REPLICATED.search(name))


@dataclass(slots=True)
class Part:
    name: str  # a tensor name, or a representative one ("model.layers.*.mlp.experts.*.gate_proj.weight")
    nbytes: float  # bytes in the checkpoint (all ranks together)
    note: str = ""


@dataclass(slots=True)
class Weights:
    parts: list[Part]
    source: str  # "config-derived parameter counts" / "safetensors index total_size ..." / ...
    total_override: float | None = None  # the checkpoint's exact total (index), when known

    @property
    def total(self) -> float:
        return self.total_override if self.total_override is not None else sum(p.nbytes for p in self.parts)

    def replicated_bytes(self) -> float:
        return sum(p.nbytes for p in self.parts if replicated(p.name))

    def per_gpu(self, tp: int) -> float:
        rep = self.replicated_bytes()
        return rep + (self.total - rep) / max(1, tp)


# --- INT4 compressed-tensors ------------------------------------------------------------------------
def _quant_scheme(raw: dict) -> tuple[float, list[str]] | None:
    """(bytes per quantized weight, ignore patterns) for a compressed-tensors pack-quantized int checkpoint."""
    qc = raw.get("quantization_config") or {}
    if qc.get("quant_method") != "compressed-tensors":
        return None
    for group in (qc.get("config_groups") or {}).values():
        w = (group or {}).get("weights") or {}
        bits, gs = w.get("num_bits"), w.get("group_size")
        if w.get("type") == "int" and isinstance(bits, int) and bits > 0:
            # weight_packed (bits/8 per weight) + a bf16 weight_scale per group (+ a zero point when asymmetric)
            per = bits / 8 + ((2 if w.get("symmetric", True) else 2 + bits / 8) / gs if isinstance(gs, int) and gs > 0 else 0)
            return per, [str(x) for x in (qc.get("ignore") or [])]
    return None


def _ignored(name: str, patterns: list[str]) -> bool:
    for p in patterns:
        if p.startswith("re:"):
            if re.search(p[3:], name):
                return True
        elif name == p or name.endswith("." + p) or name.startswith(p + ".") or f".{p}." in f".{name}.":
            return True
    return False


# --- config-derived tensors -------------------------------------------------------------------------
def _field(t: dict, key: str, where: str, default=MISSING, lo: int = 1) -> int | None:
    """A size field only this estimate reads, checked as read_config checks its own (one line naming file and field;
    `key` may carry the nested config's prefix, "text_config.moe_intermediate_size")."""
    return int_field(t, key, where, lo=lo, hi=MAX_SIZE, default=default, fix="fix the config")


def _layer_parts(t: dict, i: int, h_in: int, b: int, quant, where: str = "config.json", field_prefix: str = "") -> list[tuple[str, float]]:
    """(representative tensor name, parameters) for decoder layer i; bytes applied by the caller. `field_prefix`: the
    nested config's prefix for messages ("text_config.")."""
    def _size(t, key, where, default=MISSING, lo=1):
        return _field(t, field_prefix + key, where, default, lo)

    h = t["hidden_size"]
    heads = t["num_attention_heads"]
    pre = f"model.layers.{i}."
    out: list[tuple[str, float]] = []
    if t.get("kv_lora_rank") is not None:  # MLA
        nope, rope = _size(t, "qk_nope_head_dim", where, 128, lo=0), _size(t, "qk_rope_head_dim", where, 64, lo=0)
        v, kl = _size(t, "v_head_dim", where, 128), _size(t, "kv_lora_rank", where)
        ql = _size(t, "q_lora_rank", where, 0, lo=0)
        if ql:
            out += [("self_attn.q_a_proj.weight", h_in * ql), ("self_attn.q_a_layernorm.weight", ql),
                    ("self_attn.q_b_proj.weight", ql * heads * (nope + rope))]
        else:
            out += [("self_attn.q_proj.weight", h_in * heads * (nope + rope))]
        out += [("self_attn.kv_a_proj_with_mqa.weight", h_in * (kl + rope)), ("self_attn.kv_a_layernorm.weight", kl),
                ("self_attn.kv_b_proj.weight", kl * heads * (nope + v)), ("self_attn.o_proj.weight", heads * v * h)]
    else:
        hd = _size(t, "head_dim", where, 0, lo=0) or h // heads
        kv = t.get("num_key_value_heads") or heads
        out += [("self_attn.q_proj.weight", h_in * heads * hd), ("self_attn.k_proj.weight", h_in * kv * hd),
                ("self_attn.v_proj.weight", h_in * kv * hd), ("self_attn.o_proj.weight", heads * hd * h)]
    experts = _size(t, "n_routed_experts", where, 0, lo=0)
    moe = experts and i >= _size(t, "first_k_dense_replace", where, 0, lo=0) and i % _size(t, "moe_layer_freq", where, 1) == 0
    if moe:
        mi = _size(t, "moe_intermediate_size", where)
        out += [(f"mlp.experts.*.{p}.weight", experts * h * mi) for p in ("gate_proj", "up_proj", "down_proj")]
        ns = _size(t, "n_shared_experts", where, 0, lo=0)
        out += [(f"mlp.shared_experts.{p}.weight", ns * h * mi) for p in ("gate_proj", "up_proj", "down_proj")]
        out += [("mlp.gate.weight", experts * h), ("mlp.gate.e_score_correction_bias", experts)]
    else:
        inter = _size(t, "intermediate_size", where)
        out += [(f"mlp.{p}.weight", h * inter) for p in ("gate_proj", "up_proj", "down_proj")]
    out += [("input_layernorm.weight", h), ("post_attention_layernorm.weight", h)]
    return [(pre + n, c) for n, c in out]


def _vision_params(vc: dict) -> float:
    """A MoonViT-style tower from its config (layers x (4 h^2 + 2 h x intermediate)) plus a patch-merger projector."""
    h = vc.get("vt_hidden_size") or vc.get("hidden_size") or 0
    inter = vc.get("vt_intermediate_size") or vc.get("intermediate_size") or 4 * h
    layers = vc.get("vt_num_hidden_layers") or vc.get("num_hidden_layers") or 0
    merge = vc.get("merge_kernel_size") or [1, 1]
    mm = (vc.get("mm_hidden_size") or h) * (merge[0] * merge[1] if isinstance(merge, list) and len(merge) == 2 else 1)
    text = vc.get("text_hidden_size") or 0
    return layers * (4 * h * h + 2 * h * inter) + mm * mm + mm * text


def config_weights(info: ModelInfo, *, eagle3_draft: bool = False, vision_config: dict | None = None) -> Weights:
    """Parameter counts from config.json, in the checkpoint's bytes (INT4 packed where compressed-tensors
    quantizes: weight_packed + bf16 group scales; everything else in torch_dtype)."""
    t = info.raw
    b = dtype_bytes(info.torch_dtype)
    quant = _quant_scheme(t)
    h, vocab = info.hidden_size, info.vocab_size
    items: list[tuple[str, float]] = []
    if not eagle3_draft:  # an EAGLE-3 draft uses the target's embedding (SGLang's EAGLE worker shares it)
        items.append(("model.embed_tokens.weight", vocab * h))
    h_in = 2 * h if eagle3_draft else h
    for i in range(info.num_hidden_layers):
        items += _layer_parts(t, i, h_in, b, quant, info.file, info.text_prefix)
    items.append(("model.norm.weight", h))
    if not info.tie_word_embeddings:
        items.append(("lm_head.weight", (info.draft_vocab_size or vocab) * h))
    if eagle3_draft:
        th = info.target_hidden_size or h
        items += [("fc.weight", 3 * th * h), ("model.layers.0.hidden_norm.weight", h)]
    parts = []
    for name, n in items:
        q = quant is not None and name.endswith(".weight") and "norm" not in name and "embed" not in name \
            and "mlp.gate." not in name and not _ignored(name.replace(".*", ".0"), quant[1])
        parts.append(Part(name, n * (quant[0] if q else b), "int4 packed" if q else ""))
    if vision_config:
        parts.append(Part("vision_tower.*", _vision_params(vision_config) * 2, "vision tower, estimated from vision_config"))
    what = "config-derived parameter counts" + (" (compressed-tensors INT4 packed sizes)" if quant else "")
    return Weights(parts, what)


def tensor_weights(shapes: dict[str, list[int]], torch_dtype: str | None, *, eagle3_draft: bool = False) -> Weights:
    """From the safetensors headers' shapes (the draft), in the config's dtype."""
    b = dtype_bytes(torch_dtype)
    parts = []
    for name, shape in shapes.items():
        if eagle3_draft and "embed_tokens" in name:
            continue
        n = 1
        for s in shape:
            n *= s
        parts.append(Part(name, n * b))
    return Weights(parts, "safetensors headers")


def with_index_total(w: Weights, total_size: int) -> Weights:
    """The checkpoint's exact byte count (model.safetensors.index.json metadata.total_size); the split between
    what every rank holds whole and what is divided stays config-derived."""
    return Weights(w.parts, f"safetensors index total_size ({total_size / GIB:.1f} GiB) with the replicated part "
                   "from config-derived counts", total_override=float(total_size))


# --- KV cache -----------------------------------------------------------------------------------------
def target_kv_bytes_per_token(info: ModelInfo, elem: float, tp: int) -> float:
    """Per GPU: MLA keeps the latent (kv_lora_rank + qk_rope_head_dim) per layer on every rank; MHA/GQA splits
    the KV heads over TP (at least one per rank)."""
    t = info.raw
    if info.is_mla:
        return (t["kv_lora_rank"] + t.get("qk_rope_head_dim", 64)) * elem * info.num_hidden_layers
    hd = t.get("head_dim") or info.hidden_size // info.num_attention_heads
    kv = max(1, info.num_key_value_heads // max(1, tp))
    return 2 * kv * hd * elem * info.num_hidden_layers


def draft_kv_bytes_per_token(draft: ModelInfo, elem: float, tp: int) -> float:
    return target_kv_bytes_per_token(draft, elem, tp)


def gib(x: float) -> str:
    return f"{x / GIB:.1f} GiB"


# ---- adaptive speculation: one runtime state per candidate step (SGLang builds each with its own CUDA graphs) ----
# Measured on the H200 at --cuda-graph-max-bs-decode 128, hidden 7168: at vocab 163840 (2026-12-02) 4.2 / 8.3 / 25.1 /
# ~33 GB for steps 0 / 1 / 5 / 7, about 4.15 GB per verified token (steps + 1); at vocab 20480 (2026-12-03, this
# plugin's adaptive_states row, three servers) 0.59 / 1.18 / 3.79 / 4.96-4.97 GB, about 0.60 per verified token. So per
# verified token a part that does not grow with the vocabulary (GB_PER_TOKEN_FIXED: the two points' line at vocab 0)
# and one linear in it; both linear in the largest CUDA-graph batch size whose slot lists the step.
GB_PER_TOKEN_AT = (4.15, 163840, 128)  # GB per verified token, at (vocab, CUDA-graph batch size)
GB_PER_TOKEN_LOW = (0.60, 20480)  # the second measured point: GB per verified token at this vocab, same batch size
GB_PER_TOKEN_FIXED = GB_PER_TOKEN_LOW[0] - (GB_PER_TOKEN_AT[0] - GB_PER_TOKEN_LOW[0]) * GB_PER_TOKEN_LOW[1] / (
    GB_PER_TOKEN_AT[1] - GB_PER_TOKEN_LOW[1])  # ~0.093 GB


def adaptive_state_gb(steps: int, vocab: int, max_bs: int, slot_share: float = 1.0) -> float:
    """Modelled GPU memory of SGLang's runtime state for one candidate step: linear in the verified tokens per
    request, in the vocabulary (above a part that is not) and in the largest CUDA-graph batch size that lists the step
    (slot_share: the fraction of that size reached, 1.0 when the largest graph size's slot lists the step)."""
    per, v0, bs0 = GB_PER_TOKEN_AT
    per_token = GB_PER_TOKEN_FIXED + (per - GB_PER_TOKEN_FIXED) * vocab / v0
    return per_token * (steps + 1) * (max_bs * slot_share / bs0)


def adaptive_states(cfg: dict) -> list[int]:
    return sorted({s for k, v in cfg.items() if k.isdigit() for s in v["candidate_steps"]})


def adaptive_state_reach(cfg: dict, cuda_graph_bs: list[int]) -> dict[int, int]:
    """steps -> the largest CUDA-graph batch size whose slot lists it (0: none; SGLang captures no graph for it)."""
    slots = sorted(int(k) for k in cfg if k.isdigit())

    def slot_of(bs: int) -> int:
        return max([s for s in slots if s <= bs] or [slots[0]])

    return {s: max([b for b in cuda_graph_bs if s in cfg[str(slot_of(b))]["candidate_steps"]] or [0])
            for s in adaptive_states(cfg)}


def captured_graph_bs(graph_bs: list[int], max_running_requests: int | None) -> list[int]:
    """The decode CUDA-graph batch sizes SGLang 0.5.23 captures of `graph_bs` (get_batch_sizes_to_capture): none above
    its request pool (--max-running-requests), that size instead where a larger one was asked for."""
    if not max_running_requests or max(graph_bs) <= max_running_requests:
        return sorted(graph_bs)
    return sorted({b for b in graph_bs if b <= max_running_requests} | {max_running_requests})


def adaptive_extra_gb(cfg: dict, vocab: int, cuda_graph_bs: list[int], launch_steps: int | None) -> float:
    """Modelled memory of the states SGLang builds beside the launch's own (the launch's steps state exists without
    adaptive mode too)."""
    return sum(adaptive_state_gb(s, vocab, top) for s, top in adaptive_state_reach(cfg, cuda_graph_bs).items()
               if s != launch_steps)


def adaptive_memory_lines(cfg: dict, vocab: int, cuda_graph_bs: list[int], launch_steps: int | None = None) -> list[str]:
    """One line per runtime state SGLang will build for `cfg`: its modelled memory (see state_memory_gb); the launch's
    own steps (`launch_steps`) marked as the state a fixed-chain launch builds too."""
    out = []
    for s, top in adaptive_state_reach(cfg, cuda_graph_bs).items():
        own = " (the launch's own, built without adaptive steps too)" if s == launch_steps else ""
        out.append(f"steps {s}{own}: ~{adaptive_state_gb(s, vocab, top):.1f} GB (modelled: {GB_PER_TOKEN_AT[0]} GB per "
                   f"verified token at vocab {GB_PER_TOKEN_AT[1]} and {GB_PER_TOKEN_LOW[0]} at {GB_PER_TOKEN_LOW[1]}, "
                   f"CUDA-graph bs {GB_PER_TOKEN_AT[2]}, taken to vocab {vocab} and bs {top})")
    return out
