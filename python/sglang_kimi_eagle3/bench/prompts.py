"""The bundled prompt set (package data, written by benchmark/serving/make_prompts.py) and templates.

SGLang's native /generate takes raw text, so the chat template is applied here. The two built-in
templates are the models' own generation prompts written out as strings (single user turn, no tools):
the tokenizer adds BOS itself, so it is left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

DIR = Path(__file__).parent / "prompts"
CATEGORIES = ("chat", "code", "math", "long_context")

TEMPLATES = {
    "raw": "{prompt}",
    # Kimi-K2 / K2.5 chat template, add_generation_prompt=True, default system prompt
    "kimi": ("<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>"
             "<|im_user|>user<|im_middle|>{prompt}<|im_end|><|im_assistant|>assistant<|im_middle|>"),
    # Llama-3.1 Instruct, one user turn, add_generation_prompt=True
    "llama3": ("<|start_header_id|>user<|end_header_id|>\n\n{prompt}<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n"),
}


@dataclass(slots=True)
class Prompt:
    id: str
    category: str
    text: str
    chars: int
    words: int
    max_new_tokens: int | None = None  # a workload's own output length (bench/workload.py); None: the run's flag


def load(categories: list[str] | None = None) -> list[Prompt]:
    """Prompts of the given categories (default all), in file order."""
    cats = list(categories or CATEGORIES)
    bad = [c for c in cats if c not in CATEGORIES]
    if bad:
        raise UserError(f"unknown prompt categories {bad}; choose from {', '.join(CATEGORIES)}")
    out = []
    for c in cats:
        doc = json.loads((DIR / f"{c}.json").read_text())
        out += [Prompt(p["id"], c, p["text"], p["chars"], p["words"]) for p in doc["prompts"]]
    return out


def guess_template(model_path: str | None) -> str:
    """Template name for a served model path (from /server_info); 'raw' when unknown."""
    m = (model_path or "").lower()
    if "kimi" in m:
        return "kimi"
    if "llama-3" in m or "llama3" in m:
        return "llama3"
    return "raw"


def sampling(base: dict, p: Prompt) -> dict:
    """The run's sampling parameters, with the prompt's own max_new_tokens where a workload gives one."""
    return base if p.max_new_tokens is None else base | {"max_new_tokens": p.max_new_tokens}


def render(template: str, text: str) -> str:
    if template not in TEMPLATES:
        raise UserError(f"unknown --template {template!r}; choose from {', '.join(TEMPLATES)} or auto")
    return TEMPLATES[template].replace("{prompt}", text)
