"""Where each measured round's seconds went in each server: the step clock's ledger (the scheduler loop's busy time,
launch to next launch, by the kind of the launch that began each interval) subtracted around e2e.py's rounds.

    python3 benchmark/serving/round_ledger.py e2e.json plain=ledger-plain-pid123.json ours=ledger-port30504.json \\
        [--baseline plain] [--json out.json]

The ledgers: ours' `ledger-port<PORT>.json` beside its status file (the plugin's step_clock), plain decoding's
`ledger-plain-pid<PID>.json` (benchmark/serving/plain_clock); each holds timestamped copies of cumulative seconds,
intervals and requests per kind (`steps N`, `decode`, `prefill`, `other`). device_adaptive.sh's rounds drive one
server at a time and every server idles between its rounds (at least e2e.py's --server-gap-s, 7 s there: the rotated
order runs a server's rounds back to back at each rotation's turn, and without the gap run 45's half of the rounds had
no copy between them), so the copy last taken before a round's start and the
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
    """A decode launch's kind: `steps N` (ours), `decode` (plain), each with its tags in brackets where it had any
    (`steps 0 (flush)`, `decode (after a prefill)`)."""
    return kind == "decode" or kind.startswith(("steps ", "decode ("))


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


def steady_rows(path: str, prog: str) -> list[dict] | None:
    """e2e.py's measured rounds (steady phase, with their start and end) from its --json file; None where the file
    is not one, said in one line on stderr."""
    try:
        with open(path) as f:
            rows = json.load(f).get("rows")
    except (OSError, ValueError, AttributeError) as exc:
        print(f"{prog}: {path}: not a readable e2e.py --json file ({exc}); give the file e2e.py wrote", file=sys.stderr)
        return None
    if not isinstance(rows, list):
        print(f"{prog}: {path}: no 'rows' list: give the file e2e.py --json wrote", file=sys.stderr)
        return None
    return [r for r in rows if isinstance(r, dict) and r.get("phase", "steady") == "steady"
            and isinstance(r.get("t_start"), (int, float)) and isinstance(r.get("t_end"), (int, float))]


def parser(prog: str, doc: str, dest: str, metavar: str, what: str) -> argparse.ArgumentParser:
    """The arguments every round tool takes: e2e.py's file, NAME=PATH per server, --baseline, --json."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n")[0])
    ap.add_argument("e2e", help="e2e.py's --json file (its rows: each round's server, start and end)")
    ap.add_argument(dest, nargs="+", metavar=metavar, help=f"a server's name (as in e2e.py) and {what}")
    ap.add_argument("--baseline", default="plain", help="the server the others are set against (default plain)")
    ap.add_argument("--json", help="write the rounds here as well (atomically)")
    return ap


def load_named(specs: list[str], prog: str, what: str, example: str, load) -> dict | None:
    """{NAME: load(PATH)} for NAME=PATH arguments; None where one is not such an argument or its file does not load
    (load raises OSError, EOFError, ValueError, TypeError or AttributeError), said in one line on stderr."""
    out = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            print(f"{prog}: '{spec}': give each {what} as NAME=PATH (e.g. {example})", file=sys.stderr)
            return None
        try:
            out[name] = load(path)
        except (OSError, EOFError, ValueError, TypeError, AttributeError) as exc:
            print(f"{prog}: {name}: {path}: {exc}", file=sys.stderr)
            return None
    return out


def emit(lines: list[str], json_path: str | None, payload: dict) -> int:
    """Print the report; write the payload atomically where --json asked for it."""
    print("\n".join(lines))
    if json_path:
        from sglang_kimi_eagle3.atomic import write_atomic

        write_atomic(json_path, json.dumps(payload, indent=1), mkdir=True)
    return 0


def same_work(a: dict, b: dict) -> bool:
    """Two rounds that served the same requests (e2e.py's rounds draw from one prompt stream)."""
    keys = ("temperature", "concurrency", "requests", "tokens")
    return (all(a.get(k) == b.get(k) for k in keys) and a.get("tokens")
            and abs((a.get("prompt_tokens_mean") or 0) - (b.get("prompt_tokens_mean") or 0)) < 1e-6)


def _states(e: dict) -> str:
    ks = [(k, v) for k, v in e["kinds"].items() if is_decode(k)]
    if len(ks) <= 1:
        return ""
    return " (" + "; ".join(f"{k} {v[0]:.2f} in {v[1]}, {_mean(v[0], v[1])} ms each" for k, v in ks) + ")"


def _mean(seconds: float, n: int) -> str:
    """Mean ms per interval (the ledger's means, where the step clock's row shows medians: a tail shows here)."""
    return f"{seconds * 1e3 / n:.2f}" if n else "-"


def levels(entries: list[dict]) -> list[tuple]:
    """(temperature, concurrency, its rounds ordered by server and index) per level, in order."""
    by: dict[tuple, list[dict]] = {}
    for e in entries:
        by.setdefault((e["temperature"], e["concurrency"]), []).append(e)
    return [(t, c, sorted(es, key=lambda e: (e["server"], e["index"] or 0)))
            for (t, c), es in sorted(by.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] or 0))]


def pairs(es: list[dict], baseline: str) -> list[tuple[dict, dict]]:
    """(round, baseline's round) for every two rounds of one level that served the same work (rounds without their
    data, `missing`, left out)."""
    base = [b for b in es if b["server"] == baseline and "missing" not in b]
    return [(e, b) for e in es if e["server"] != baseline and "missing" not in e for b in base if same_work(e, b)]


def report(entries: list[dict], baseline: str) -> list[str]:
    lines = []
    for temp, conc, es in levels(entries):
        lines.append(f"T={temp:g} c={conc}: a round's seconds by what the scheduler launched (decode, prefill, other; "
                     "outside: no launch interval), ms per output token in brackets")
        for e in es:
            head = f"  {e['server']:<10} round {e['index']}: "
            if "missing" in e:
                lines.append(head + e["missing"])
                continue
            per = 1e3 / e["tokens"] if e.get("tokens") else 0.0
            lines.append(head + f"wall {e['wall_s']:.2f} s, {e['requests']} requests, {e['tokens']} tokens: decode "
                         f"{e['decode_s']:.2f} ({e['decode_s'] * per:.3f}){_states(e)}, prefill {e['prefill_s']:.2f} "
                         f"({e['prefill_s'] * per:.3f}) in {e['kinds'].get('prefill', [0, 0])[1]}, other "
                         f"{e['other_s']:.2f}, outside {e['outside_s']:.2f}")
        for e, b in pairs(es, baseline):
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
    args = parser("round_ledger.py", __doc__, "ledgers", "NAME=LEDGER", "its ledger").parse_args(argv)
    rows = steady_rows(args.e2e, "round_ledger.py")
    if rows is None:
        return 2
    ledgers = load_named(args.ledgers, "round_ledger.py", "ledger", "plain=ledger-plain-pid123.json", load_ledger)
    if ledgers is None:
        return 2
    entries = split(rows, ledgers)
    if not entries:
        print("round_ledger.py: no measured round of a server with a ledger (names as in e2e.py's --server)",
              file=sys.stderr)
        return 2
    return emit(report(entries, args.baseline), args.json, {"baseline": args.baseline, "rounds": entries})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
