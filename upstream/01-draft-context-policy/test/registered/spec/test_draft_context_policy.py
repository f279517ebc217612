"""--speculative-draft-context-policy through SGLang's own prepare_server_args, resolution and ModelConfig.

A tiny EAGLE-3 pair, configs only (no weights): a DeepseekV3 target with 8192 positions and a Llama
EAGLE-3 draft with half of them, the shape of Kimi-K2.5 (262144) beside a Kimi-K2 drafter (131072).
"""

import json
import os
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from sglang.test.ci.ci_register import register_cpu_ci

register_cpu_ci(est_time=40, suite="base-a-test-cpu")

TARGET_POSITIONS = 8192
DRAFT_POSITIONS = TARGET_POSITIONS // 2

TARGET = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "first_k_dense_replace": 1,
    "hidden_act": "silu",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "kv_lora_rank": 512,
    "max_position_embeddings": TARGET_POSITIONS,
    "moe_intermediate_size": 256,
    "moe_layer_freq": 1,
    "n_group": 1,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 16,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 4,
    "num_key_value_heads": 16,
    "num_nextn_predict_layers": 0,
    "q_lora_rank": 256,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "factor": 2.0,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": TARGET_POSITIONS // 2,
        "type": "yarn",
    },
    "rope_theta": 50000.0,
    "routed_scaling_factor": 2.827,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "topk_group": 1,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "v_head_dim": 128,
    "vocab_size": 4096,
}

DRAFT = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_hidden_layers": 1,
    "vocab_size": 4096,
    "draft_vocab_size": 1024,
    "max_position_embeddings": DRAFT_POSITIONS,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "eagle_config": {
        "eagle_aux_hidden_state_layer_ids": [0, 1, 2],
        "use_aux_hidden_state": True,
    },
}

# A launch environment without the global override (CI runners set SGLANG_IS_IN_CI, which lifts it).
NO_OVERRIDE = {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "0", "SGLANG_IS_IN_CI": "0"}


class TestDraftContextPolicy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        root = Path(cls._tmp.name)
        cls.target, cls.draft, cls.long_draft = root / "t", root / "d", root / "d2"
        for path, cfg in (
            (cls.target, TARGET),
            (cls.draft, DRAFT),
            (cls.long_draft, {**DRAFT, "max_position_embeddings": TARGET_POSITIONS}),
        ):
            path.mkdir()
            (path / "config.json").write_text(json.dumps(cfg))

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def launch(self, *extra, draft=None, env=NO_OVERRIDE):
        """prepare_server_args + resolution, then the target and draft ModelConfigs as the
        scheduler builds them (the draft gets the target's context length)."""
        from sglang.srt.configs.model_config import ModelConfig
        from sglang.srt.server_args import prepare_server_args

        argv = [
            "--model-path", str(self.target),
            "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", str(draft or self.draft),
            "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "4",
            "--device", "cpu",
            *extra,
        ]  # fmt: skip
        with mock.patch.dict(os.environ, env):
            server_args = prepare_server_args(argv)
            server_args.resolve_once()
            target = ModelConfig.from_server_args(server_args)
            draft_config = ModelConfig.from_server_args(
                server_args,
                model_path=str(draft or self.draft),
                is_draft_model=True,
                context_length=target.context_len,
            )
        return server_args, target, draft_config

    def test_extend_serves_the_target_length(self):
        _, target, draft = self.launch("--speculative-draft-context-policy", "extend")
        self.assertEqual(target.context_len, TARGET_POSITIONS)
        self.assertEqual(draft.context_len, TARGET_POSITIONS)
        # rotary cache: target length + the speculative margin, aligned
        mpe = draft.hf_text_config.max_position_embeddings
        self.assertGreaterEqual(mpe, TARGET_POSITIONS + 3 * 4)
        self.assertEqual(mpe % 128, 0)
        rope = draft.hf_text_config.rope_scaling or {}  # the draft's RoPE itself is unchanged
        self.assertEqual(rope.get("rope_type", "default"), "default")

    def test_strict_refuses_at_resolution_naming_the_flag(self):
        with self.assertRaises(ValueError) as ctx:
            self.launch("--speculative-draft-context-policy", "strict")
        msg = str(ctx.exception)
        self.assertIn("--speculative-draft-context-policy extend", msg)
        self.assertIn(f"{DRAFT_POSITIONS} positions", msg)

    def test_default_keeps_todays_behaviour(self):
        with self.assertRaises(ValueError) as ctx:
            self.launch()
        self.assertIn("--speculative-draft-context-policy", str(ctx.exception))
        # the old global override still lets the draft through (its limit lifted)
        server_args, _, draft = self.launch(
            env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1", "SGLANG_IS_IN_CI": "0"}
        )
        self.assertEqual(draft.context_len, TARGET_POSITIONS)
        from sglang.srt.arg_groups.overrides import resolved_view

        self.assertEqual(
            resolved_view(server_args).speculative_draft_context_policy, "extend"
        )

    def test_yarn_scales_a_plain_rope_draft(self):
        _, _, draft = self.launch("--speculative-draft-context-policy", "yarn")
        rope = draft.hf_text_config.rope_scaling
        self.assertEqual(rope["rope_type"], "yarn")
        self.assertEqual(rope["factor"], TARGET_POSITIONS / DRAFT_POSITIONS)
        self.assertEqual(rope["original_max_position_embeddings"], DRAFT_POSITIONS)
        self.assertEqual(draft.context_len, TARGET_POSITIONS)

    def test_cap_serves_the_draft_length(self):
        _, target, draft = self.launch("--speculative-draft-context-policy", "cap")
        self.assertEqual(target.context_len, DRAFT_POSITIONS)
        self.assertEqual(draft.context_len, DRAFT_POSITIONS)

    def test_a_draft_that_fits_is_untouched(self):
        _, target, draft = self.launch(
            "--speculative-draft-context-policy", "strict", draft=self.long_draft
        )
        self.assertEqual(draft.context_len, target.context_len)
        self.assertEqual(draft.hf_text_config.max_position_embeddings, TARGET_POSITIONS)

    def test_a_draft_model_config_built_directly_names_the_flag(self):
        from sglang.srt.configs.model_config import ModelConfig

        with mock.patch.dict(os.environ, NO_OVERRIDE):
            with self.assertRaises(ValueError) as ctx:
                ModelConfig(
                    str(self.draft),
                    is_draft_model=True,
                    context_length=TARGET_POSITIONS,
                )
        self.assertIn("--speculative-draft-context-policy", str(ctx.exception))

    def test_unknown_policy_is_a_cli_error(self):
        from sglang.srt.server_args import prepare_server_args

        with self.assertRaises(SystemExit):
            prepare_server_args(
                ["--model-path", str(self.target), "--speculative-draft-context-policy", "stretch"]
            )


if __name__ == "__main__":
    unittest.main()
