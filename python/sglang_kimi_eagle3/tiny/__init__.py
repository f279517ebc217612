"""Tiny random-weight models for live tests: a Kimi-K2.5-architecture target and an EAGLE-3 drafter.

    python -m sglang_kimi_eagle3.tiny OUT [--seed 0]   ->  OUT/target, OUT/draft

Pure (torch + safetensors + json, no sglang), deterministic by seed. spec.py: shapes and configs;
weights.py: the planted next-token rule that keeps greedy choices far from ties; tokenizer.py: a
byte-level tokenizer as JSON; launch.py: the launch_server flags; build.py: the writer.
"""

from .build import build, successor
from .spec import TinySpec, draft_config, target_config

__all__ = ["TinySpec", "build", "draft_config", "successor", "target_config"]
