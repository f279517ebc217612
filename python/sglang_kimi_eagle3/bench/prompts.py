"""The bundled prompt set (package data, written by benchmark/serving/make_prompts.py) and templates.

SGLang's native /generate takes raw text, so the chat template is applied here. The two built-in
templates are the models' own generation prompts written out as strings (single user turn, no tools):
the tokenizer adds BOS itself, so it is left out.
"""

from __future__ import annotations

import itertools
import json
import secrets
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
    fresh: bool = False  # a workload's prompt: each send gets a head of its own (sent_text), so none is a cache hit


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


_SENDS = itertools.count()  # next() is atomic in CPython: the client threads share it
_RUN = secrets.token_hex(2)  # this process's sends apart from another client's against the same server


def sent_text(template: str, p: Prompt) -> str:
    """What a request sends: the prompt in the template. A fresh prompt (a workload's) has its first characters
    replaced by a tag of this send's own (the length unchanged), so that no send shares a prefix with another beyond
    the template's: replayed as written, every workload prompt is a prefix of the filler text, and after its first
    send each one was a radix-cache hit that prefilled 1-2 tokens (live on an H100, 2026-12-06: every prefill of a
    c 1-128 run), where a real request's prompt is mostly new."""
    text = p.text
    if p.fresh:
        tag = f"{next(_SENDS):06x}"[::-1] + _RUN + " "  # the fastest-changing digit first: no shared first token
        text = (tag + text[len(tag):]) if len(text) > len(tag) else tag[: len(text)]
    return render(template, text)


def render(template: str, text: str) -> str:
    if template not in TEMPLATES:
        raise UserError(f"unknown --template {template!r}; choose from {', '.join(TEMPLATES)} or auto")
    return TEMPLATES[template].replace("{prompt}", text)
