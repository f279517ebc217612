"""Where each measured round's seconds went in each server: the step clock's ledger (the scheduler loop's busy time,
launch to next launch, by the kind of the launch that began each interval) subtracted around e2e.py's rounds.

    python3 benchmark/serving/round_ledger.py e2e.json plain=ledger-plain-pid123.json ours=ledger-port30504.json \\
        [--baseline plain] [--json out.json]

The ledgers: ours' `ledger-port<PORT>.json` beside its status file (the plugin's step_clock), plain decoding's
`ledger-plain-pid<PID>.json` (benchmark/serving/plain_clock); each holds timestamped copies of cumulative seconds,
intervals and requests per kind (`steps N`, `decode`, `prefill`, `other`). device_adaptive.sh's rounds drive one
server at a time and every server idles between its rounds, so the copy last taken before a round's start and the
copy last taken before the same server's next round (at most 60 s after this one's end) hold the round between them:
an interval holding idle time (over the ledger's `idle_over_s`) is never counted, so neither the idle time before the
round nor the round's last interval (closed by the next round's first launch) is in it. Per round: the client's wall
time, the seconds by kind (decode states added up as `decode`, each state beside), and `outside`: the wall time no
launch interval holds (the server waiting for requests, the round's first and last moments). Rounds of two servers
that served the same requests (e2e.py's rounds draw from one prompt stream: same requests, tokens and prompt
lengths) are set side by side: which kind holds the difference in wall time. Nothing here imports sglang.
"""

from __future__ import annotations

import argparse
import json
import sys
from bisect import bisect_right
from statistics import median

AFTER_S = 60.0  # the copy that closes a round is taken at most this long after its end (the writer copies every 2-5 s)


def load_ledger(path: str) -> list[tuple[float, dict]]:
    """The copies of a ledger file, in time order: (time, {kind: (seconds, intervals, requests)})."""
    with open(path) as f:
        data = json.load(f)
    copies = data.get("copies") if isinstance(data, dict) else None
    if not isinstance(copies, list):
        raise ValueError("no 'copies' list: not a step clock ledger")
    out = []
    for c in copies:
        t, kinds = c
        out.append((float(t), {k: tuple(v) for k, v in kinds.items()}))
    out.sort(key=lambda c: c[0])
    return out


def at(copies: list[tuple[float, dict]], t: float) -> tuple[float, dict] | None:
    """The last copy taken at or before t (None: none was)."""
    i = bisect_right([c[0] for c in copies], t)
    return copies[i - 1] if i else None


def delta(before: dict, after: dict) -> dict:
    """after - before per kind: (seconds, intervals, requests)."""
    out = {}
    for k, v in after.items():
        b = before.get(k, (0.0, 0, 0))
        d = (v[0] - b[0], v[1] - b[1], v[2] - b[2])
        if d[1] > 0:
            out[k] = d
    return out


def is_decode(kind: str) -> bool:
    return kind == "decode" or kind.startswith("steps ")


def split(rows: list[dict], ledgers: dict[str, list]) -> list[dict]:
    """Per e2e row of a server with a ledger: its seconds by kind (or why not)."""
    out = []
    by_server: dict[str, list[dict]] = {}
    for r in rows:
        by_server.setdefault(r["server"], []).append(r)
    for server, rs in by_server.items():
        copies = ledgers.get(server)
        if copies is None:
            continue
        rs = sorted(rs, key=lambda r: r["t_start"])
        for i, r in enumerate(rs):
            s = r.get("summary") or {}
            entry = {"key": r.get("key"), "server": server, "temperature": r.get("temperature"),
                     "concurrency": r.get("concurrency"), "index": r.get("index"), "wall_s": s.get("wall_s"),
                     "requests": s.get("requests"), "tokens": s.get("tokens"),
                     "prompt_tokens_mean": s.get("prompt_tokens_mean")}
            limit = min(rs[i + 1]["t_start"] if i + 1 < len(rs) else float("inf"), r["t_end"] + AFTER_S)
            before, after = at(copies, r["t_start"]), at(copies, limit)
            if before is None or after is None or after[0] < r["t_end"] - 1e-3:
                entry["missing"] = ("no ledger copy before the round" if before is None
                                    else "no ledger copy after the round")
                out.append(entry)
                continue
            kinds = delta(before[1], after[1])
            busy = sum(v[0] for v in kinds.values())
            dec = sum(v[0] for k, v in kinds.items() if is_decode(k))
            entry.update(kinds={k: [round(v[0], 4), v[1], v[2]] for k, v in sorted(kinds.items())},
                         busy_s=round(busy, 4), decode_s=round(dec, 4),
                         prefill_s=round(kinds.get("prefill", (0.0,))[0], 4),
                         other_s=round(kinds.get("other", (0.0,))[0], 4),
                         outside_s=round((entry["wall_s"] or 0.0) - busy, 4))
            out.append(entry)
    return out


def same_work(a: dict, b: dict) -> bool:
    """Two rounds that served the same requests (e2e.py's rounds draw from one prompt stream)."""
    keys = ("temperature", "concurrency", "requests", "tokens")
    return (all(a.get(k) == b.get(k) for k in keys) and a.get("tokens")
            and abs((a.get("prompt_tokens_mean") or 0) - (b.get("prompt_tokens_mean") or 0)) < 1e-6)


def _states(e: dict) -> str:
    ks = [(k, v) for k, v in e["kinds"].items() if is_decode(k)]
    if len(ks) <= 1:
        return ""
    return " (" + ", ".join(f"{k} {v[0]:.2f} in {v[1]}" for k, v in ks) + ")"


def _mean(seconds: float, n: int) -> str:
    """Mean ms per interval (the ledger's means, where the step clock's row shows medians: a tail shows here)."""
    return f"{seconds * 1e3 / n:.2f}" if n else "-"


def report(entries: list[dict], baseline: str) -> list[str]:
    lines = []
    levels: dict[tuple, list[dict]] = {}
    for e in entries:
        levels.setdefault((e["temperature"], e["concurrency"]), []).append(e)
    for (temp, conc), es in sorted(levels.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] or 0)):
        lines.append(f"T={temp:g} c={conc}: a round's seconds by what the scheduler launched (decode, prefill, other; "
                     "outside: no launch interval), ms per output token in brackets")
        for e in sorted(es, key=lambda e: (e["server"], e["index"] or 0)):
            head = f"  {e['server']:<10} round {e['index']}: "
            if "missing" in e:
                lines.append(head + e["missing"])
                continue
            per = 1e3 / e["tokens"] if e.get("tokens") else 0.0
            lines.append(head + f"wall {e['wall_s']:.2f} s, {e['requests']} requests, {e['tokens']} tokens: decode "
                         f"{e['decode_s']:.2f} ({e['decode_s'] * per:.3f}){_states(e)}, prefill {e['prefill_s']:.2f} "
                         f"({e['prefill_s'] * per:.3f}) in {e['kinds'].get('prefill', [0, 0])[1]}, other "
                         f"{e['other_s']:.2f}, outside {e['outside_s']:.2f}")
        base = [e for e in es if e["server"] == baseline and "missing" not in e]
        for e in sorted(es, key=lambda e: (e["server"], e["index"] or 0)):
            if e["server"] == baseline or "missing" in e:
                continue
            for b in base:
                if same_work(e, b):
                    d = {k: e[k] - b[k] for k in ("wall_s", "decode_s", "prefill_s", "other_s", "outside_s")}
                    steps_e = sum(v[1] for k, v in e["kinds"].items() if is_decode(k))
                    steps_b = sum(v[1] for k, v in b["kinds"].items() if is_decode(k))
                    pf_e, pf_b = (x["kinds"].get("prefill", [0.0, 0])[1] for x in (e, b))
                    lines.append(f"  same work: {e['server']} round {e['index']} - {baseline} round {b['index']} "
                                 f"({e['requests']} requests, {e['tokens']} tokens): wall {d['wall_s']:+.2f} s = decode "
                                 f"{d['decode_s']:+.2f} ({steps_e} against {steps_b} steps, {_mean(e['decode_s'], steps_e)}"
                                 f" against {_mean(b['decode_s'], steps_b)} ms each), prefill {d['prefill_s']:+.2f} "
                                 f"({pf_e} against {pf_b} launches, {_mean(e['prefill_s'], pf_e)} against "
                                 f"{_mean(b['prefill_s'], pf_b)} ms each with the work after them), other "
                                 f"{d['other_s']:+.2f}, outside {d['outside_s']:+.2f}")
        # every round, whatever its requests: per output token, each server's median over its rounds against baseline's
        def med(server, field):
            vals = [e[field] * 1e3 / e["tokens"] for e in es if e["server"] == server and "missing" not in e
                    and e.get("tokens")]
            return median(vals) if vals else None

        b_dec, b_pre = med(baseline, "decode_s"), med(baseline, "prefill_s")
        for server in sorted({e["server"] for e in es} - {baseline}):
            s_dec, s_pre = med(server, "decode_s"), med(server, "prefill_s")
            if None in (s_dec, s_pre, b_dec, b_pre) or not b_dec or not b_pre:
                continue
            lines.append(f"  every round, median ms per output token, {server} / {baseline}: decode {s_dec:.3f} / "
                         f"{b_dec:.3f} ({s_dec / b_dec:.3f}x), prefill {s_pre:.3f} / {b_pre:.3f} ({s_pre / b_pre:.3f}x)")
    return lines


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="round_ledger.py", description=__doc__.split("\n")[0])
    ap.add_argument("e2e", help="e2e.py's --json file (its rows: each round's server, start and end)")
    ap.add_argument("ledgers", nargs="+", metavar="NAME=LEDGER", help="a server's name (as in e2e.py) and its ledger")
    ap.add_argument("--baseline", default="plain", help="the server the others are set against (default plain)")
    ap.add_argument("--json", help="write the rounds' splits here as well (atomically)")
    args = ap.parse_args(argv)
    try:
        with open(args.e2e) as f:
            rows = json.load(f).get("rows")
    except (OSError, ValueError, AttributeError) as exc:
        print(f"round_ledger.py: {args.e2e}: not a readable e2e.py --json file ({exc}); give the file e2e.py wrote",
              file=sys.stderr)
        return 2
    if not isinstance(rows, list):
        print(f"round_ledger.py: {args.e2e}: no 'rows' list: give the file e2e.py --json wrote", file=sys.stderr)
        return 2
    ledgers = {}
    for spec in args.ledgers:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            print(f"round_ledger.py: '{spec}': give each ledger as NAME=PATH (e.g. plain=ledger-plain-pid123.json)",
                  file=sys.stderr)
            return 2
        try:
            ledgers[name] = load_ledger(path)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            print(f"round_ledger.py: {name}: {path}: {exc}", file=sys.stderr)
            return 2
    rows = [r for r in rows if isinstance(r, dict) and r.get("phase", "steady") == "steady"
            and isinstance(r.get("t_start"), (int, float)) and isinstance(r.get("t_end"), (int, float))]
    entries = split(rows, ledgers)
    if not entries:
        print("round_ledger.py: no measured round of a server with a ledger (names as in e2e.py's --server)",
              file=sys.stderr)
        return 2
    print("\n".join(report(entries, args.baseline)))
    if args.json:
        from sglang_kimi_eagle3.atomic import write_atomic

        write_atomic(args.json, json.dumps({"baseline": args.baseline, "rounds": entries}, indent=1), mkdir=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
