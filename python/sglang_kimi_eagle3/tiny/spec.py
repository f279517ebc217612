"""Shapes of the tiny model pair and their HF configs (pure: json-able dicts, no torch).

The target is what the seed deployment serves, scaled down: by default `KimiK25ForConditionalGeneration`
(model_type `kimi_k25`, the multimodal wrapper) around Kimi-K2.5's text architecture, with
`"language_model_only": true`, so SGLang 0.5.23 builds the real wrapper class but no image processor
(`ModelConfig.is_lm_only`, `get_processor`), a minimal vision tower it never runs, and the text weights
under `language_model.`. `text_only` gives the inner `DeepseekV3ForCausalLM` on its own (as Kimi-K2).
The text model: MLA with the real latent sizes (kv_lora_rank 512 / rope 64 / nope 128 / v 128), MoE with
sigmoid routing and a correction bias, `first_k_dense_replace` dense layers first, one shared expert,
YaRN RoPE, at a small hidden size. `int4` adds Kimi-K2.5's `quantization_config` (compressed-tensors
pack-quantized int4, symmetric, group 32, routed experts only), taken from the bundled Kimi-K2.5 config.

The drafter is an EAGLE-3 LlamaForCausalLMEagle3 (one layer, fc over 3 x hidden, pruned draft vocab)
whose `max_position_embeddings` is half the target's: the seed deployment's mismatch (Kimi-K2.5
262144 vs the AQ-MedAI Kimi-K2 drafter 131072), which SGLang refuses without our context policy.

PRESETS: `tiny` (the CI pair), `kimi-width` (a measurement pair: Kimi-K2.5's vocab 163840, hidden
7168 and attention sizes, 3 layers, 8 experts; drafters with the 32000-row draft vocab and with the
4000 rows of one TP-8 shard, so a live server runs exactly the shapes of the kernel launch tables; its
drafter costs a far larger share of a target step than in the deployment: the stress case) and `deploy`
(one TP-8 rank's shapes, 84 layers deep: the deployment's draft-step / target-step ratio, tiny/ratio.py).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

SPECIAL_IDS = (0, 1, 2)  # pad, bos, eos: never in the draft vocab, never predicted
KIMI_K25_PROFILE = Path(__file__).resolve().parents[1] / "profiles" / "kimi-k2.5" / "config.json"
# SGLang 0.5.23's MoE Marlin kernel (the compressed-tensors WNA16 MoE method): hidden % 128 == 0 and the
# per-rank expert intermediate % max(64, group) == 0 (marlin_utils.check_moe_marlin_supports_layer).
MARLIN_HIDDEN, MARLIN_INTER = 128, 64
INT4_TP = (1, 2)  # tensor-parallel sizes an --int4 pair must serve at (the live test's TP 1, the workflow's TP 2)
GROUP = 32


@dataclass(slots=True)
class TinySpec:
    vocab_size: int = 4096
    draft_vocab_size: int = 1024
    hidden_size: int = 512
    num_layers: int = 4
    first_k_dense_replace: int = 1
    num_heads: int = 16  # divisible by 1, 2, 4, 8 (TP)
    q_lora_rank: int = 256
    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    intermediate_size: int = 1024
    moe_intermediate_size: int = 256
    n_routed_experts: int = 8  # power of two: SGLang's fused gate kernel
    num_experts_per_tok: int = 2
    max_position_embeddings: int = 8192
    draft_heads: int = 4
    # the drafter's attention head size; 0: hidden_size // draft_heads (attention as wide as the hidden state).
    # Narrower (draft_heads * draft_head_dim < hidden_size, e.g. one TP-8 rank's 8 x 128): the token embeddings
    # then lie in that many dimensions (weights.py), so the planted attention still carries them
    draft_head_dim: int = 0
    draft_intermediate_size: int = 1024
    aux_layer_ids: tuple[int, ...] = (0, 1, 2)
    # smaller drafters written next to the main one (draft-<rows>/); every planted successor lies in the
    # smallest draft vocab, which is a subset of every larger one, so each drafter proposes the same tokens
    draft_variants: tuple[int, ...] = field(default_factory=tuple)

    def __post_init__(self):
        if not 0 < self.first_k_dense_replace < self.num_layers:
            raise ValueError(f"first_k_dense_replace {self.first_k_dense_replace} must be in 1..{self.num_layers - 1}")
        if not self.draft_head_dim and self.hidden_size % self.draft_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by draft_heads {self.draft_heads}")
        if self.draft_head_dim and (self.draft_attn_width > self.hidden_size or self.draft_head_dim % 2):
            raise ValueError(f"draft_heads x draft_head_dim = {self.draft_attn_width} must be at most hidden_size "
                             f"{self.hidden_size}, with an even head size (RoPE)")
        for rows in (self.draft_vocab_size, *self.draft_variants):
            if not len(SPECIAL_IDS) < rows < self.vocab_size - len(SPECIAL_IDS):
                raise ValueError(f"draft vocab of {rows} rows must be below vocab_size {self.vocab_size}")
        if any(v >= self.draft_vocab_size for v in self.draft_variants):
            raise ValueError(f"draft_variants {self.draft_variants} must be smaller than draft_vocab_size {self.draft_vocab_size}")
        if max(self.aux_layer_ids) >= self.num_layers or (self.aux_layer_ids and self.aux_layer_ids[0] == 1):
            # SGLang shifts ids by one when the first is 1 (deepseek_v2.set_eagle3_layers_to_capture)
            raise ValueError(f"aux_layer_ids {self.aux_layer_ids}: must be < {self.num_layers} and not start at 1")

    @property
    def draft_head_size(self) -> int:
        return self.draft_head_dim or self.hidden_size // self.draft_heads

    @property
    def draft_attn_width(self) -> int:
        """The drafter's q / k / v width: draft_heads x its head size (hidden_size unless draft_head_dim narrows it)."""
        return self.draft_heads * self.draft_head_size

    @property
    def draft_max_position_embeddings(self) -> int:
        return self.max_position_embeddings // 2

    @property
    def succ_vocab_size(self) -> int:
        """Rows of the smallest drafter: the planted successors all lie in its vocab."""
        return min((self.draft_vocab_size, *self.draft_variants))

    def check_int4(self) -> None:
        """The routed experts' shapes must suit group-32 packing and SGLang's MoE Marlin kernel at TP 1 and 2."""
        inter = self.moe_intermediate_size
        bad = [f"hidden_size {self.hidden_size} % {MARLIN_HIDDEN}"] if self.hidden_size % MARLIN_HIDDEN else []
        bad += [f"moe_intermediate_size {inter} / TP {tp} = {inter / tp:g} % {max(MARLIN_INTER, GROUP)}"
                for tp in INT4_TP if inter % tp or (inter // tp) % max(MARLIN_INTER, GROUP)]
        if bad:
            raise ValueError(f"--int4: SGLang's MoE Marlin kernel needs {'; '.join(bad)} == 0")


PRESETS = {
    "tiny": TinySpec(),
    # Kimi-K2.5's vocab, hidden and attention sizes (64 heads, q_lora 1536), its dense and expert widths
    # (18432; moe 2048 -> 256 per rank at TP 8 is not needed here: one GPU serves it), 3 layers, 8 experts;
    # the drafter as AQ-MedAI's (hidden 7168, intermediate 18432, head_dim 128) with 32000 draft rows plus
    # a 4000-row variant (32000 / TP 8).
    "kimi-width": TinySpec(vocab_size=163840, draft_vocab_size=32000, draft_variants=(4000,), hidden_size=7168,
                           num_layers=3, num_heads=64, q_lora_rank=1536, intermediate_size=18432,
                           moe_intermediate_size=2048, draft_heads=56, draft_intermediate_size=18432),
    # Shaped like the deployment's step-time ratio (tiny/ratio.py prints it): one TP-8 rank of Kimi-K2.5 (vocab
    # shard 163840 / 8 = 20480 rows, 64 / 8 = 8 MLA heads, dense 18432 / 8 = 2304 and expert 2048 / 8 = 256 wide:
    # the rank's own expert shape, INT4 as there) at Kimi's hidden 7168, 84 layers deep so that the target step
    # stands to one draft step as the 61 layers plus 123 all-reduces do in the seed; 8 experts (all of them
    # active: 8 per token as in Kimi) keep the weights near 8 GB. The drafter: one rank's attention (8 heads x 128;
    # the embeddings lie in those 1024 dimensions, weights.attn_basis), the rank's 2304-wide MLP and 4000 draft rows.
    "deploy": TinySpec(vocab_size=20480, draft_vocab_size=4000, hidden_size=7168, num_layers=84, num_heads=8,
                       q_lora_rank=1536, intermediate_size=2304, moe_intermediate_size=256, n_routed_experts=8,
                       num_experts_per_tok=8, max_position_embeddings=16384, draft_heads=8, draft_head_dim=128,
                       draft_intermediate_size=2304),
}


def preset(name: str, **changes) -> TinySpec:
    return replace(PRESETS[name], **changes)


def quantization_config() -> dict:
    """Kimi-K2.5's own `quantization_config` (the bundled profile's text_config), unchanged: compressed-tensors,
    pack-quantized int 4-bit symmetric group 32 on `Linear`, ignoring lm_head, attention, shared experts and
    the dense MLPs, so only the routed experts are quantized."""
    return copy.deepcopy(json.loads(KIMI_K25_PROFILE.read_text())["text_config"]["quantization_config"])


def target_config(s: TinySpec, *, int4: bool = False) -> dict:
    """HF config.json of the text model (Kimi-K2.5's text_config shape, scaled down): the `--text-only` target."""
    cfg = {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "pad_token_id": SPECIAL_IDS[0], "bos_token_id": SPECIAL_IDS[1], "eos_token_id": SPECIAL_IDS[2],
        "attention_bias": False, "attention_dropout": 0.0, "aux_loss_alpha": 0.001, "ep_size": 1,
        "first_k_dense_replace": s.first_k_dense_replace, "hidden_act": "silu", "hidden_size": s.hidden_size,
        "initializer_range": 0.02, "intermediate_size": s.intermediate_size, "kv_lora_rank": s.kv_lora_rank,
        "max_position_embeddings": s.max_position_embeddings, "moe_intermediate_size": s.moe_intermediate_size,
        "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": s.n_routed_experts, "n_shared_experts": 1,
        "norm_topk_prob": True, "num_attention_heads": s.num_heads, "num_experts_per_tok": s.num_experts_per_tok,
        "num_hidden_layers": s.num_layers, "num_key_value_heads": s.num_heads, "num_nextn_predict_layers": 0,
        "pretraining_tp": 1, "q_lora_rank": s.q_lora_rank, "qk_nope_head_dim": s.qk_nope_head_dim,
        "qk_rope_head_dim": s.qk_rope_head_dim, "rms_norm_eps": 1e-05,
        "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 2.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                         "original_max_position_embeddings": s.max_position_embeddings // 2, "type": "yarn"},
        "rope_theta": 50000.0, "routed_scaling_factor": 2.827, "scoring_func": "sigmoid", "seq_aux": True,
        "tie_word_embeddings": False, "topk_group": 1, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
        "use_cache": True, "v_head_dim": s.v_head_dim, "vocab_size": s.vocab_size,
    }
    if int4:
        cfg["quantization_config"] = quantization_config()
    return cfg


# The vision tower SGLang builds inside the wrapper (kimi_k25.MoonViT3dPretrainedModel, K2VLMultiModalProjector)
# and never runs with language_model_only: one small layer. Both key sets, as in Kimi-K2.5's own config
# (`vt_*`) and as SGLang's KimiK25VisionConfig reads them (hidden_size, num_hidden_layers, ...).
_VISION = {"patch_size": 14, "init_pos_emb_height": 4, "init_pos_emb_width": 4, "init_pos_emb_time": 4,
           "pos_emb_type": "divided_fixed", "merge_kernel_size": [2, 2], "merge_type": "sd2_tpool",
           "video_attn_type": "spatial_temporal", "mm_projector_type": "patchmerger", "projector_hidden_act": "gelu",
           "projector_ln_eps": 1e-05, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
           "intermediate_size": 128, "mm_hidden_size": 64, "vt_hidden_size": 64, "vt_num_hidden_layers": 1,
           "vt_num_attention_heads": 2, "vt_intermediate_size": 128}


def wrapper_config(s: TinySpec, *, int4: bool = False) -> dict:
    """HF config.json of the default target: KimiK25ForConditionalGeneration, language model only.

    As Kimi-K2.5's: the text model's config (model_type kimi_k2) under `text_config`, with its
    quantization_config there (SGLang's KimiK25Config lifts it to the top)."""
    text = target_config(s, int4=int4) | {"model_type": "kimi_k2"}
    return {
        "architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25", "language_model_only": True,
        "bos_token_id": SPECIAL_IDS[1], "eos_token_id": SPECIAL_IDS[2], "pad_token_id": SPECIAL_IDS[0],
        "ignore_index": -100, "media_placeholder_token_id": s.vocab_size - 1, "tie_word_embeddings": False,
        "use_unified_vision_chunk": True, "torch_dtype": "bfloat16",
        "vision_config": dict(_VISION, text_hidden_size=s.hidden_size), "text_config": text,
    }


def draft_config(s: TinySpec, draft_vocab_size: int | None = None) -> dict:
    """HF config.json of the EAGLE-3 drafter (AQ-MedAI layout, half the target's positions)."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
        "bos_token_id": SPECIAL_IDS[1], "eos_token_id": SPECIAL_IDS[2], "hidden_act": "silu",
        "hidden_size": s.hidden_size, "intermediate_size": s.draft_intermediate_size,
        "num_attention_heads": s.draft_heads, "num_key_value_heads": s.draft_heads,
        "head_dim": s.draft_head_size, "num_hidden_layers": 1, "vocab_size": s.vocab_size,
        "draft_vocab_size": draft_vocab_size or s.draft_vocab_size,
        "max_position_embeddings": s.draft_max_position_embeddings,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(s.aux_layer_ids), "use_aux_hidden_state": True},
    }
