"""What the prefill batches of each server held, per round, from the servers' own logs: SGLang's `Prefill batch`
lines (0.5.23: `[time] Prefill batch, #new-seq: N, #new-token: T, #cached-token: C, ... #running-req: R, ...`).

    python3 benchmark/serving/prefill_mix.py plain=plain.log.gz ours=ours.log.gz [--gap 6] [--min-batches 5] \\
        [--json out.json]

A round is a burst of prefill lines: a pause over --gap seconds (default 6) ends it (device_adaptive.sh's rounds run
one server at a time, so each server's log holds its own rounds with the others' in its pauses). Per round: its start,
span, batches, requests, and per batch the mean requests, new tokens, cached tokens and running requests; bursts of
fewer than --min-batches batches (the warm-ups' lone probes) are left out. Where two servers served the same prompts,
the same mix says a difference in their prefill time per batch is time per batch of the same work. Logs may be gzip'd.
Nothing here imports sglang.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import re
import sys

LINE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] Prefill batch, #new-seq: (\d+), #new-token: (\d+), "
                  r"#cached-token: (\d+).*?#running-req: (\d+)")


def batches(lines) -> list[tuple]:
    """(time, requests, new tokens, cached tokens, running requests) per `Prefill batch` line, in order."""
    out = []
    for line in lines:
        m = LINE.search(line)
        if m:
            out.append((dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"), *(int(g) for g in m.groups()[1:])))
    return out


def rounds(rows: list[tuple], gap_s: float = 6.0, min_batches: int = 5) -> list[dict]:
    """The bursts of `rows` (a pause over gap_s ends one) with at least min_batches batches, summarised."""
    groups: list[list] = []
    for r in rows:
        if not groups or (r[0] - groups[-1][-1][0]).total_seconds() > gap_s:
            groups.append([])
        groups[-1].append(r)
    out = []
    for g in groups:
        n = len(g)
        if n < min_batches:
            continue
        reqs = sum(r[1] for r in g)
        out.append({
            "start": g[0][0].strftime("%H:%M:%S"),
            "span_s": int((g[-1][0] - g[0][0]).total_seconds()),
            "batches": n,
            "requests": reqs,
            "requests_per_batch": round(reqs / n, 3),
            "new_tokens_per_batch": round(sum(r[2] for r in g) / n, 1),
            "cached_tokens_per_batch": round(sum(r[3] for r in g) / n, 1),
            "running_mean": round(sum(r[4] for r in g) / n, 1),
        })
    return out


def _read(path: str) -> list[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        return f.readlines()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="prefill_mix.py", description=__doc__.split("\n")[0])
    ap.add_argument("logs", nargs="+", metavar="NAME=LOG", help="a server's name and its log (.gz or plain text)")
    ap.add_argument("--gap", type=float, default=6.0, help="seconds without a prefill that end a round (default 6)")
    ap.add_argument("--min-batches", type=int, default=5, help="rounds of fewer batches are left out (default 5)")
    ap.add_argument("--json", help="write the rounds per server here as well (atomically)")
    args = ap.parse_args(argv)
    servers = {}
    for spec in args.logs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            print(f"prefill_mix.py: '{spec}': give each log as NAME=PATH (e.g. plain=plain.log.gz)", file=sys.stderr)
            return 2
        try:
            rows = batches(_read(path))
        except OSError as exc:
            print(f"prefill_mix.py: {name}: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        if not rows:
            print(f"prefill_mix.py: {name}: no SGLang 'Prefill batch' line in {path}: not a server log?", file=sys.stderr)
            return 2
        servers[name] = rounds(rows, args.gap, args.min_batches)
    for name, rs in servers.items():
        print(f"== {name}: {len(rs)} rounds")
        print("  start     span  batches  requests  req/batch  new tok/batch  cached/batch  running")
        for r in rs:
            print(f"  {r['start']}  {r['span_s']:3d} s  {r['batches']:7d}  {r['requests']:8d}  {r['requests_per_batch']:9.2f}"
                  f"  {r['new_tokens_per_batch']:13.1f}  {r['cached_tokens_per_batch']:12.1f}  {r['running_mean']:7.1f}")
    if args.json:
        from sglang_kimi_eagle3.atomic import write_atomic

        write_atomic(args.json, json.dumps({"gap_s": args.gap, "min_batches": args.min_batches, "servers": servers},
                                           indent=1), mkdir=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
