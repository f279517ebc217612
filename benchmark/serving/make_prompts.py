"""Write the bench prompt set (package data) from prompt_texts.py and generated long documents.

    python benchmark/serving/make_prompts.py      # rewrites python/sglang_kimi_eagle3/bench/prompts/*.json

Deterministic (fixed seed), so the committed JSON can be re-made byte for byte. Lengths are recorded
in characters and whitespace-separated words; token counts depend on the tokenizer and are reported
by the server per request (meta_info.prompt_tokens) in every bench run.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from prompt_texts import CHAT, CODE, MATH

OUT = Path(__file__).resolve().parents[2] / "python" / "sglang_kimi_eagle3" / "bench" / "prompts"
SERVICES = ["auth", "billing", "search", "inventory", "gateway", "notifier", "scheduler", "ledger"]
LEVELS = ["INFO"] * 12 + ["WARN"] * 3 + ["ERROR"]
CITIES = ["Oslo", "Lyon", "Porto", "Krakow", "Ghent", "Turin", "Leeds", "Graz", "Malmo", "Brno"]
ITEMS = ["bolts M6", "hinges", "copper wire 2mm", "LED strips", "cable ties", "pipe clamps", "fuses 10A", "sealant"]


def _log(rng: random.Random, lines: int) -> str:
    out, t = [], 0
    for i in range(lines):
        t += rng.randint(1, 40)
        svc, lvl = rng.choice(SERVICES), rng.choice(LEVELS)
        ms = rng.randint(2, 900) if lvl != "ERROR" else rng.randint(1500, 9000)
        msg = {"INFO": f"request {rng.randint(10000, 99999)} served in {ms} ms",
               "WARN": f"slow dependency call to {rng.choice(SERVICES)} ({ms} ms), retrying",
               "ERROR": f"request failed after {ms} ms: upstream {rng.choice(SERVICES)} returned 503"}[lvl]
        out.append(f"2026-03-14T{8 + t // 3600 % 12:02d}:{t // 60 % 60:02d}:{t % 60:02d}Z {lvl:5s} [{svc}] {msg}")
    return "\n".join(out)


def _ledger(rng: random.Random, rows: int) -> str:
    out = ["date,warehouse,item,quantity,unit_price_eur"]
    for i in range(rows):
        out.append(f"2026-{1 + i * 12 // rows:02d}-{1 + i % 28:02d},{rng.choice(CITIES)},{rng.choice(ITEMS)},"
                   f"{rng.randint(1, 400)},{rng.randint(5, 4000) / 100:.2f}")
    return "\n".join(out)


def _minutes(rng: random.Random, paragraphs: int) -> str:
    people = ["Aiko", "Bruno", "Chiara", "Dmitri", "Esme", "Farid"]
    topics = ["the migration of the billing database", "the on-call rotation", "the Q3 hiring plan",
              "latency regressions in search", "the vendor contract for cloud storage", "the security audit findings"]
    out = []
    for i in range(paragraphs):
        a, b = rng.sample(people, 2)
        topic = rng.choice(topics)
        out.append(f"Item {i + 1}. {a} opened the discussion on {topic}. {b} noted that the previous estimate of "
                   f"{rng.randint(2, 12)} weeks had slipped by {rng.randint(1, 5)} weeks because of "
                   f"{rng.choice(['missing test data', 'a dependency upgrade', 'staff holidays', 'unclear ownership'])}. "
                   f"The group agreed that {rng.choice(people)} would own the follow-up and report back by "
                   f"{rng.choice(['Monday', 'Wednesday', 'Friday'])}, with a budget of {rng.randint(5, 90)} thousand euros.")
    return "\n\n".join(out)


def long_context() -> list[dict]:
    rng = random.Random(20261129)
    docs = [
        ("long-1-log", "Here is a service log.\n\n" + _log(rng, 110),
         "Which service produced the most ERROR lines, and what upstream services did those errors name? Then list the three slowest successful requests."),
        ("long-2-minutes", "Here are the minutes of a long planning meeting.\n\n" + _minutes(rng, 38),
         "List every follow-up owner with their topic and deadline day, and add up the budgets agreed per topic."),
        ("long-3-ledger", "Here is a warehouse ledger in CSV.\n\n" + _ledger(rng, 420),
         "Which warehouse received the largest total quantity of 'copper wire 2mm'? Give the total and explain how you computed it."),
        ("long-4-log", "Here is a long service log.\n\n" + _log(rng, 860),
         "Summarize the error pattern over time: when do ERROR lines cluster, which services are involved, and what would you investigate first?"),
    ]
    return [{"id": i, "text": f"{doc}\n\n{q}"} for i, doc, q in docs]


def _records(category: str, texts: list[str]) -> list[dict]:
    return [{"id": f"{category}-{n + 1:02d}", "text": t} for n, t in enumerate(texts)]


def write(category: str, description: str, prompts: list[dict]) -> Path:
    for p in prompts:
        p["chars"], p["words"] = len(p["text"]), len(p["text"].split())
    path = OUT / f"{category}.json"
    doc = {"category": category, "description": description, "generator": "benchmark/serving/make_prompts.py",
           "prompts": prompts}
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return path


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    write("chat", "everyday assistant requests: advice, writing, explanation, translation", _records("chat", CHAT))
    write("code", "programming tasks in several languages: write, fix, refactor, explain", _records("code", CODE))
    write("math", "grade-school to early-university problems asking for worked solutions", _records("math", MATH))
    write("long_context", "generated documents (service logs, meeting minutes, a CSV ledger; fixed seed) followed "
          "by a question that needs the whole document, from about 2k to about 20k tokens (chars / 3 to chars / 4)", long_context())
    for p in sorted(OUT.glob("*.json")):
        d = json.loads(p.read_text())
        print(f"{p.name:18s} {len(d['prompts']):3d} prompts, words {min(x['words'] for x in d['prompts'])}-"
              f"{max(x['words'] for x in d['prompts'])}, chars {min(x['chars'] for x in d['prompts'])}-{max(x['chars'] for x in d['prompts'])}")


if __name__ == "__main__":
    main()
