"""Bundled real configs (data) and the embedded default deployment (pure).

Each profile is a config-only folder (config.json, no weights) that SGLang can parse, usable
wherever a model path is: `--model-path kimi-k2.5`. Values are the public checkpoints' configs as
recorded in the project's reference set (sources below).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parent

# name -> (folder under profiles/, checkpoint, source of the values)
PROFILES: dict[str, tuple[str, str, str]] = {
    "kimi-k2.5": ("kimi-k2.5", "moonshotai/Kimi-K2.5 (INT4 routed experts)",
                  "HF config re-serialised by transformers; rope_scaling written raw-file style"),
    "kimi-k2-instruct": ("kimi-k2-instruct", "moonshotai/Kimi-K2-Instruct", "secondary sources that agree"),
    "aq-medai/kimi-k2-eagle3": ("aq-medai/kimi-k2-eagle3", "AQ-MedAI/Kimi-K2-Instruct-eagle3",
                                "model card config and SpecForge configs/kimi-k2-eagle3.json"),
    "aq-medai/kimi-k25-eagle3": ("aq-medai/kimi-k25-eagle3", "AQ-MedAI/Kimi-K25-eagle3", "model card config (SGLang PR #19689)"),
    "lightseekorg/kimi-k2.5-eagle3": ("lightseekorg/kimi-k2.5-eagle3", "lightseekorg/kimi-k2.5-eagle3 (full 163840 vocab)",
                                     "TorchSpec configs/draft_models/kimi_k25_eagle3.json (the config it was trained "
                                     "with); no eagle_config: SGLang's default capture layers"),
    "lightseekorg/kimi-k2.5-eagle3-mla": ("lightseekorg/kimi-k2.5-eagle3-mla", "lightseekorg/kimi-k2.5-eagle3-mla (MLA drafter, "
                                         "full vocab)", "the layout SGLang's Eagle3DeepseekV2ForCausalLM reads "
                                         "(models/kimi_k25_eagle3.py) with the target's MLA sizes and RoPE; MLP width "
                                         "as the full-vocab drafter: check the downloaded config.json for exact sizes"),
    "llama-3.1-8b-instruct": ("llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct", "HF config"),
    "llama-3.1-8b-eagle3": ("llama-3.1-8b-eagle3", "EAGLE-3 drafter for Llama-3.1-8B", "SpecForge configs/llama3-8B-eagle3.json"),
}


def profile_path(name: str) -> Path | None:
    """The bundled folder for a profile name, or None."""
    entry = PROFILES.get(name)
    return ROOT / entry[0] if entry else None


# The launch that took five attempts: Kimi-K2.5 INT4 + the AQ-MedAI Kimi-K2
# EAGLE-3 drafter on 8x RTX PRO 6000 Blackwell (SM120), TP 8, steps 3 / topk 1 / 4 draft tokens.
DEFAULT_DEPLOYMENT_NAME = ("Kimi-K2.5 INT4 + AQ-MedAI Kimi-K2 EAGLE-3 drafter, TP 8, steps 3 / topk 1 / 4 draft tokens, "
                           "on 8x RTX PRO 6000 (SM120)")
DEFAULT_GPU = "RTX PRO 6000"
DEFAULT_ARGV = [
    "--model-path", "kimi-k2.5", "--trust-remote-code", "--tp-size", "8",
    "--mem-fraction-static", "0.85", "--host", "0.0.0.0", "--port", "8000",
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "aq-medai/kimi-k2-eagle3",
    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
]
