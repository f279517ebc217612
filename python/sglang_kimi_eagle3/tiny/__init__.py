"""Tiny random-weight models for live tests: the seed's Kimi-K2.5 target and an EAGLE-3 drafter.

    python -m sglang_kimi_eagle3.tiny OUT [--seed 0] [--int4] [--text-only] [--draft-agreement Q]
                                          [--kimi-width] [--device cuda]   ->  OUT/target, OUT/draft

OUT/target is served by SGLang as the real `KimiK25ForConditionalGeneration` (language model only),
with `--int4` its routed experts as Kimi-K2.5's compressed-tensors INT4, with `--text-only` the inner
`DeepseekV3ForCausalLM`. Pure (torch + safetensors + json; compressed-tensors for --int4; no sglang),
deterministic by seed. spec.py: shapes, presets and configs; weights.py: the planted next-token rule that
keeps greedy choices far from ties (and the drafter's agreement with it); quant.py: the INT4 experts;
tokenizer.py: a byte-level tokenizer as JSON; launch.py: the launch_server flags; build.py: the writer.
"""

from .build import BuildOptions, build, draft_dirs, make_tensors, proposals, successor
from .spec import PRESETS, TinySpec, draft_config, preset, target_config, wrapper_config

__all__ = ["PRESETS", "BuildOptions", "TinySpec", "build", "draft_config", "draft_dirs", "make_tensors", "preset",
           "proposals", "successor", "target_config", "wrapper_config"]
