"""Write the bundled request-length workloads (python/sglang_kimi_eagle3/bench/workloads/*.json), seeded.

    python benchmark/serving/make_workload.py          # rewrites chat.json (same seed -> same file)

`chat`: single-turn chat traffic. Prompt and output lengths are independent lognormals, rounded and clipped:
  prompt tokens  median 384, sigma 1.0, clipped to [16, 3072]   (a long right tail: pasted documents, code)
  output tokens  median 160, sigma 0.8, clipped to [16, 768]
These are stated assumptions of a plausible chat mix (right-skewed, prompts longer than answers, a tail of
long contexts), not a measured trace; the medians are kept modest so that closed-loop rounds of ~10-20 s
finish many requests at concurrency 1. 512 requests, seed 20261202.
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "python/sglang_kimi_eagle3/bench/workloads"
sys.path.insert(0, str(ROOT / "python"))

CHAT = {"seed": 20261202, "requests": 512,
        "prompt": {"median": 384, "sigma": 1.0, "min": 16, "max": 3072},
        "output": {"median": 160, "sigma": 0.8, "min": 16, "max": 768}}


def draw(rng: random.Random, d: dict) -> int:
    return int(min(d["max"], max(d["min"], round(rng.lognormvariate(math.log(d["median"]), d["sigma"])))))


def chat() -> dict:
    rng = random.Random(CHAT["seed"])
    reqs = [[draw(rng, CHAT["prompt"]), draw(rng, CHAT["output"])] for _ in range(CHAT["requests"])]
    return {"name": "chat", "generator": "benchmark/serving/make_workload.py",
            "distribution": {k: v for k, v in CHAT.items() if k != "requests"},
            "units": "tokens of the tiny pairs' byte-level tokenizer (one per prompt character)",
            "requests": reqs}


def main() -> int:
    from sglang_kimi_eagle3.atomic import write_atomic

    doc = chat()
    body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items() if k != "requests")
    rows = ",\n".join("    " + json.dumps(r) for r in doc["requests"])
    write_atomic(OUT / "chat.json", "{\n" + body + ',\n  "requests": [\n' + rows + "\n  ]\n}\n", mkdir=True)
    ps = sorted(r[0] for r in doc["requests"])
    os_ = sorted(r[1] for r in doc["requests"])
    print(f"chat.json: {len(ps)} requests; prompt median {ps[len(ps) // 2]}, p90 {ps[int(len(ps) * .9)]}; "
          f"output median {os_[len(os_) // 2]}, p90 {os_[int(len(os_) * .9)]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
