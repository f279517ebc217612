"""Measure the draft-step / target-step time ratio of a served pair, end to end, from two servers of one target:
`plain` (no speculation) and `off` (SGLang's adaptive mode with every slot at steps 0: each decode step is a
1-token target verify plus one draft extend over that token).

    python benchmark/serving/step_ratio.py --plain http://127.0.0.1:30501 --off http://127.0.0.1:30505 \\
        --json $OUT/step_ratio.json [--concurrency 1,8,32,128] [--prompt-tokens 1024] [--also offext=URL ...]

  target decode step  t(c) = (latency(max_new 1 + N) - latency(max_new 1)) / N on `plain`, c requests at once
  draft decode step   d(c) = the same on `off` minus t(c)   (the draft extend of 1 token per request, plus the
                      off-state's bookkeeping: an upper bound of one draft step)
  prefill             TTFT-like: latency(max_new 1) of a --prompt-tokens prompt, alone: plain = target prefill,
                      off - plain = the draft's extend over the prompt
Every request's prompt differs (no prefix-cache hit); the servers (plain, off, and any --also) are read side by side,
the order rotating every round, after one uncounted pass per server and level (`warm_step_s`: its first batch of c
requests; on the H200, 2026-12-04, the first rounds at c 32 / 128 read 1.36x / 1.39x where the next two read
0.96-1.19x); medians over --repeats (every reading in the *_all lists) and the median of the
per-round ratios against plain (`*_rounds`). One JSON document, rewritten
atomically after every level. The modelled seed and pair ratios: `python -m sglang_kimi_eagle3.tiny OUT --preset
deploy --int4 --ratios-only`. Nothing here imports sglang.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading

from sglang_kimi_eagle3.bench import client
from sglang_kimi_eagle3.bench.workload import filler
from sglang_kimi_eagle3.validate import atomic_write_text

_n = [0]


def _prompt(tokens: int) -> str:
    _n[0] += 1
    tag = f"{_n[0]:06d} "  # a new first line each time: no prefix-cache hit
    return (tag + filler(tokens))[:tokens]


def batch_latency(url: str, c: int, prompt_tokens: int, new: int, timeout: float) -> float:
    """c requests at once; the median client latency."""
    out: list = [None] * c
    prompts = [_prompt(prompt_tokens) for _ in range(c)]

    def one(i):
        r = client.generate(url, f"r{i}", "ratio", prompts[i], {"max_new_tokens": new, "temperature": 0.0,
                                                               "ignore_eos": True}, timeout)
        out[i] = r.latency_s if r.ok else None

    ts = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(c)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ok = [x for x in out if x is not None]
    if not ok:
        raise RuntimeError(f"{url}: every request failed")
    return statistics.median(ok)


def decode_step(url: str, c: int, n: int, timeout: float, context: int = 64) -> float:
    """One decode step at c requests whose prompts hold `context` tokens (the context the step attends over)."""
    short = batch_latency(url, c, context, 1, timeout)
    long = batch_latency(url, c, context, 1 + n, timeout)
    return (long - short) / n


def paired(measure, urls: tuple[str, ...], repeats: int) -> tuple[list[float], ...]:
    """`repeats` readings of measure(url) on each server, side by side: the order rotates every round (two servers:
    plain first, then off first, ...; three: P O X, O X P, X P O, ...), so a drift of the shared GPU or host over
    the run falls on all alike. Reading i of every server comes from round i."""
    out: tuple[list[float], ...] = tuple([] for _ in urls)
    for i in range(repeats):
        for k in range(len(urls)):
            j = (i + k) % len(urls)
            out[j].append(measure(urls[j]))
    return out


def _vs_plain(xs: list[float], ts: list[float]) -> tuple[float, list[float]]:
    """The median of the per-round ratios x / plain (each round's readings side by side), and those ratios."""
    r = [x / t for x, t in zip(xs, ts)]
    return statistics.median(r), r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plain", required=True)
    ap.add_argument("--off", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--concurrency", default="1,8,32,128")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=1024)
    ap.add_argument("--decode-context", type=int, default=64,
                    help="prompt tokens of the decode-step requests (64: the runs of 2026-12-03/04; chat traffic's "
                         "contexts are 400-1500: the verify attention of the off-state grows with them)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--also", action="append", default=[], metavar="NAME=URL",
                    help="another server read in the same rotated rounds (e.g. the off-state without a hook); its "
                         "steps go under `also` in every row, against the same plain readings")
    a = ap.parse_args(argv)
    also = []
    for item in a.also:
        name, _, url = item.partition("=")
        if not name or not url.startswith("http"):
            ap.error(f"--also {item!r}: expected NAME=http://HOST:PORT")
        also.append((name, url))
    urls = (a.plain, a.off, *(u for _, u in also))
    doc: dict = {"schema": "sglang-kimi-eagle3-step-ratio/1", "plain": a.plain, "off": a.off, "also": dict(also),
                 "decode": [], "prefill": None, "method": __doc__.split("\n\n")[1]}

    def save():
        atomic_write_text(a.json, json.dumps(doc, indent=1) + "\n")

    for u in urls:  # one uncounted pass each: first-traffic compiles out of the numbers
        batch_latency(u, 1, a.prompt_tokens, 8, a.timeout)
    p, o, *xs = paired(lambda u: batch_latency(u, 1, a.prompt_tokens, 1, a.timeout), urls, a.repeats)
    pre = {"plain": statistics.median(p), "off": statistics.median(o)}
    doc["prefill"] = {"prompt_tokens": a.prompt_tokens, "target_s": pre["plain"], "off_s": pre["off"],
                      "ratio": (pre["off"] - pre["plain"]) / pre["plain"], "target_s_all": p, "off_s_all": o,
                      "also": {n: {"s": statistics.median(x), "s_all": x} for (n, _), x in zip(also, xs)}}
    save()
    print(f"prefill {a.prompt_tokens} tokens: target {pre['plain'] * 1e3:.2f} ms, off-state {pre['off'] * 1e3:.2f} ms, "
          f"draft/target {doc['prefill']['ratio']:.4f}", flush=True)
    for c in [int(x) for x in a.concurrency.split(",")]:
        # one uncounted pass per server at this level (a first batch of c requests: new graph sizes, a new slot)
        warm = {u: decode_step(u, c, min(8, a.new_tokens), a.timeout, a.decode_context) for u in urls}
        ts, os_, *xs = paired(lambda u: decode_step(u, c, a.new_tokens, a.timeout, a.decode_context), urls, a.repeats)
        t, o = statistics.median(ts), statistics.median(os_)
        row = {"concurrency": c, "decode_context": a.decode_context, "target_step_s": t, "off_step_s": o, "draft_step_s": o - t, "ratio": (o - t) / t,
               "off_vs_plain": o / t, "target_step_s_all": ts, "off_step_s_all": os_,
               "warm_step_s": {"plain": warm[a.plain], "off": warm[a.off], **{n: warm[u] for n, u in also}}}
        # the per-round ratios (each round's readings were taken side by side): steadier than a ratio of medians
        # where plain's own step moves between rounds
        row["off_vs_plain_rounds_median"], row["off_vs_plain_rounds"] = _vs_plain(os_, ts)
        row["also"] = {}
        for (n, _), x in zip(also, xs):
            med, rounds = _vs_plain(x, ts)
            row["also"][n] = {"step_s": statistics.median(x), "step_s_all": x, "vs_plain_rounds_median": med,
                              "vs_plain_rounds": rounds}
        doc["decode"].append(row)
        save()
        extra = "".join(f"; {n} {v['step_s'] * 1e3:.3f} ms ({v['vs_plain_rounds_median']:.2f}x)" for n, v in row["also"].items())
        print(f"decode c {c}: target step {t * 1e3:.3f} ms, off-state step {o * 1e3:.3f} ms, draft/target "
              f"{row['ratio']:.4f} (off-state costs {row['off_vs_plain']:.2f}x plain, per-round median "
              f"{row['off_vs_plain_rounds_median']:.2f}x){extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
