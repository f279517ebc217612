"""Bundled request-length workloads (package data, written by benchmark/serving/make_workload.py): `--workload chat`.

A workload is a seeded list of (prompt tokens, output tokens) pairs, replayed in file order: each request's prompt
is filler text of exactly that many characters (one token per character under the tiny pairs' byte-level
tokenizer; about a quarter as many under a real model's tokenizer) and its max_new_tokens is the output length
(with ignore_eos, every request generates exactly that many). Each send's first characters are a tag of its own
(prompts.sent_text): no request is a prefix-cache hit, each prefills its whole prompt as a new conversation's first
turn does. Pure: json only.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError
from .prompts import Prompt

DIR = Path(__file__).parent / "workloads"
FILLER = ("the quick brown fox jumps over the lazy dog while a careful reader checks every line of the report and "
          "asks how the numbers were measured ")


def names() -> list[str]:
    return sorted(p.stem for p in DIR.glob("*.json"))


def filler(n: int) -> str:
    """Exactly n printable ASCII characters."""
    return (FILLER * (n // len(FILLER) + 1))[:n]


def load(name: str, cap: int | None = None, fresh: bool = True) -> tuple[list[Prompt], dict]:
    """(prompts with max_new_tokens set, the file's description) of a bundled workload; `cap` bounds every
    output length (a short lease: closed-loop rounds end when the longest request in flight does); `fresh`: each
    send gets a head of its own (prompts.sent_text), so every request prefills its whole prompt (false: replayed as
    written, every prompt is a prefix of the same filler text and a prefix-cache hit after its first send)."""
    path = DIR / f"{name}.json"
    if not path.is_file():
        raise UserError(f"--workload {name!r}: no such workload; bundled: {', '.join(names())}")
    doc = json.loads(path.read_text())
    out = []
    for i, (pin, pout) in enumerate(doc["requests"]):
        text = filler(pin)
        out.append(Prompt(f"{name}-{i:04d}", name, text, pin, len(text.split()), max_new_tokens=min(pout, cap) if cap else pout,
                          fresh=fresh))
    return out, {k: v for k, v in doc.items() if k != "requests"}
