"""`bench --prompts FILE`: your own prompts instead of the bundled set (pure).

Two formats, told apart by the first non-blank character:
  JSONL     one JSON object per line: {"prompt": "..."} or {"text": "..."}, optionally "category" and "id"
            (strings); blank lines are skipped
  ShareGPT  `[` ...: a JSON list of {"conversations": [{"from": "human", "value": "..."}, ...]} (optionally
            "id"); the first human (or "user") turn is the prompt, as SGLang's bench_serving takes it.
            Entries without a human turn (empty conversations, as published ShareGPT dumps have) are
            skipped and counted; a list of {"prompt"/"text"} objects is read like JSONL
Anything else is one UserError naming the file, the line or entry, and the field (exit 2).
Prompts are user turns: the chat template (--template) is applied to them as to the bundled ones.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import UserError
from .prompts import Prompt

MAX_BYTES = 1 << 30  # a ShareGPT dump is ~0.7 GB
MAX_PROMPTS = 1_000_000
FLAG = "--prompts"
_HINT = ('expected JSONL (one {"prompt": "..."} or {"text": "..."} object per line) or a ShareGPT-style JSON list '
         '(each {"conversations": [{"from": "human", "value": "..."}, ...]})')


def _read(path: str) -> str:
    """The file's text, through the one bounded reader of foreign files (documents.read_text)."""
    from ..documents import read_text

    text = read_text(path, "prompt", hint="give the path of a JSONL or JSON prompt file", flag=FLAG, max_bytes=MAX_BYTES)
    if not text.strip():
        raise UserError(f"{FLAG} {path}: not a prompt file: it is empty; {_HINT}")
    return text


def _string(obj: dict, key: str, where: str, required: bool = True) -> str | None:
    v = obj.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or (required and not v.strip()):
        raise UserError(f"{where}: field {key!r} = {json.dumps(v)[:60]}; expected a non-empty string")
    return v


def _plain(obj, where: str, default_id: str) -> Prompt:
    if not isinstance(obj, dict):
        raise UserError(f"{where}: {json.dumps(obj)[:60]} is not an object; {_HINT}")
    key = "prompt" if "prompt" in obj else "text" if "text" in obj else None
    if key is None:
        raise UserError(f"{where}: no field 'prompt' or 'text' (keys: {', '.join(map(str, list(obj)[:6])) or 'none'}); "
                        f"{_HINT}")
    text = _string(obj, key, where)
    return _prompt(_string(obj, "id", where, False) or default_id, _string(obj, "category", where, False) or "custom",
                   text)


def _prompt(pid: str, category: str, text: str) -> Prompt:
    return Prompt(pid, category, text, len(text), len(text.split()))


def _sharegpt(obj: dict, where: str, default_id: str) -> Prompt | None:
    conv = obj["conversations"]
    if not isinstance(conv, list):
        raise UserError(f"{where}: field 'conversations' = {json.dumps(conv)[:60]}; expected a list of turns")
    for j, turn in enumerate(conv):
        w = f"{where}.conversations[{j}]"
        if not isinstance(turn, dict):
            raise UserError(f"{w}: {json.dumps(turn)[:60]} is not an object; expected {{\"from\": ..., \"value\": ...}}")
        who = turn.get("from", turn.get("role"))
        if who in ("human", "user"):
            value = turn.get("value", turn.get("content"))
            if not isinstance(value, str):
                raise UserError(f"{w}: field 'value' = {json.dumps(value)[:60]}; expected a string")
            if not value.strip():
                return None
            pid = obj.get("id")
            return _prompt(pid if isinstance(pid, str) and pid else default_id, "sharegpt", value)
    return None


def load_file(path: str) -> tuple[list[Prompt], int]:
    """(prompts in file order, entries skipped for having no human turn); UserError naming file/line/field."""
    text = _read(path)
    name = Path(path).name
    out: list[Prompt] = []
    skipped = 0
    if text.lstrip().startswith("["):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{FLAG} {path}: malformed JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
                            f"{_HINT}") from None
        except RecursionError:
            raise UserError(f"{FLAG} {path}: JSON nested too deeply; {_HINT}") from None
        for i, obj in enumerate(doc):
            where = f"{FLAG} {path}: entry [{i}]"
            if isinstance(obj, dict) and "conversations" in obj:
                p = _sharegpt(obj, where, f"{name}:{i}")
                skipped += p is None
                if p is not None:
                    out.append(p)
            else:
                out.append(_plain(obj, where, f"{name}:{i}"))
            if len(out) > MAX_PROMPTS:
                raise UserError(f"{FLAG} {path}: more than {MAX_PROMPTS} prompts; cut the file down")
    else:
        # lines end at \n, \r\n or \r only: str.splitlines also splits at U+2028/U+2029/NEL, which JSON strings hold raw
        for n, line in enumerate(re.split(r"\r\n|\r|\n", text), 1):
            if not line.strip():
                continue
            where = f"{FLAG} {path}: line {n}"
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
                raise UserError(f"{where}: not JSON ({why}); {_HINT}") from None
            out.append(_plain(obj, where, f"{name}:{n}"))
            if len(out) > MAX_PROMPTS:
                raise UserError(f"{FLAG} {path}: more than {MAX_PROMPTS} prompts; cut the file down")
    if not out:
        raise UserError(f"{FLAG} {path}: no prompt in the file ({skipped} entries without a human turn); {_HINT}")
    return out, skipped
