"""Shapes of the tiny model pair and their HF configs (pure: json-able dicts, no torch).

The target has Kimi-K2.5's text architecture (DeepseekV3ForCausalLM: MLA with the real latent sizes
kv_lora_rank 512 / rope 64 / nope 128 / v 128, MoE with sigmoid routing and a correction bias,
`first_k_dense_replace` dense layers first, one shared expert, YaRN RoPE) at a small hidden size.
The drafter is an EAGLE-3 LlamaForCausalLMEagle3 (one layer, fc over 3 x hidden, pruned draft vocab)
whose `max_position_embeddings` is half the target's: the seed deployment's mismatch (Kimi-K2.5
262144 vs the AQ-MedAI Kimi-K2 drafter 131072), which SGLang refuses without our context policy.

Why DeepseekV3ForCausalLM and not KimiK25ForConditionalGeneration: SGLang treats the Kimi-K2.5 class
as multimodal and builds its image processor from the model folder (Kimi's remote processor code and
tokenizer files), which a download-free random model does not have. The language model inside it is
exactly this DeepseekV3ForCausalLM.
"""

from __future__ import annotations

from dataclasses import dataclass

SPECIAL_IDS = (0, 1, 2)  # pad, bos, eos: never in the draft vocab, never predicted


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
    draft_intermediate_size: int = 1024
    aux_layer_ids: tuple[int, ...] = (0, 1, 2)

    def __post_init__(self):
        if not 0 < self.first_k_dense_replace < self.num_layers:
            raise ValueError(f"first_k_dense_replace {self.first_k_dense_replace} must be in 1..{self.num_layers - 1}")
        if self.hidden_size % self.draft_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by draft_heads {self.draft_heads}")
        if not len(SPECIAL_IDS) < self.draft_vocab_size < self.vocab_size - len(SPECIAL_IDS):
            raise ValueError(f"draft_vocab_size {self.draft_vocab_size} must be below vocab_size {self.vocab_size}")
        if max(self.aux_layer_ids) >= self.num_layers or (self.aux_layer_ids and self.aux_layer_ids[0] == 1):
            # SGLang shifts ids by one when the first is 1 (deepseek_v2.set_eagle3_layers_to_capture)
            raise ValueError(f"aux_layer_ids {self.aux_layer_ids}: must be < {self.num_layers} and not start at 1")

    @property
    def draft_max_position_embeddings(self) -> int:
        return self.max_position_embeddings // 2


def target_config(s: TinySpec) -> dict:
    """HF config.json of the target (Kimi-K2.5's text_config shape, scaled down)."""
    return {
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


def draft_config(s: TinySpec) -> dict:
    """HF config.json of the EAGLE-3 drafter (AQ-MedAI layout, half the target's positions)."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
        "bos_token_id": SPECIAL_IDS[1], "eos_token_id": SPECIAL_IDS[2], "hidden_act": "silu",
        "hidden_size": s.hidden_size, "intermediate_size": s.draft_intermediate_size,
        "num_attention_heads": s.draft_heads, "num_key_value_heads": s.draft_heads,
        "head_dim": s.hidden_size // s.draft_heads, "num_hidden_layers": 1, "vocab_size": s.vocab_size,
        "draft_vocab_size": s.draft_vocab_size, "max_position_embeddings": s.draft_max_position_embeddings,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(s.aux_layer_ids), "use_aux_hidden_state": True},
    }
