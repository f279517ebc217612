"""What each measured round's server did, from its own log: SGLang's `Prefill batch` and `Decode batch` lines counted
inside e2e.py's rounds, and rounds of two servers that served the same work set side by side. It reads the logs every
live run already keeps (runs before the step clock's ledger included), where round_ledger.py needs the ledgers.

    python3 benchmark/serving/round_logs.py e2e.json plain=plain.log.gz ours=ours.log [--baseline plain] [--json out]

Per round: the client's wall time, when its last request started and the drain after it, the prefill batches (new
sequences, new and cached tokens) and the decode log lines (SGLang prints one every `--decode-log-interval`, 40,
decode iterations by default: a count of decode steps to within one interval). The log's timestamps are whole seconds
in the server's local time (UTC on the lent machines; `--log-utc-offset-h` otherwise), so a round's window is widened
by `--slack-s` (1.5 s before the start, 0.5 s after the end); the `seqs` beside `requests` shows whether it caught
every prefill. Rounds of the same requests and tokens (e2e.py's rounds of a level draw from one prompt stream) are set
side by side: the same prefill batches there and a different wall time put the difference in decode or between
launches. Nothing here imports sglang.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prefill_mix import _read, batches  # noqa: E402 (this folder: the `Prefill batch` line, parsed once)
from round_ledger import emit, levels, load_named, pairs, parser, steady_rows  # noqa: E402 (the e2e rounds and the same-work rule, shared)

DECODE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] Decode batch, #running-req: (\d+)")


def read_log(path: str, utc_offset_h: float = 0.0) -> tuple[list[tuple], list[tuple]]:
    """(prefill lines as (t, new seqs, new tokens, cached tokens), decode lines as (t, running requests)); t in epoch
    seconds, the log's local time read as `utc_offset_h` hours east of UTC."""
    tz = dt.timezone(dt.timedelta(hours=utc_offset_h))
    lines = _read(path)
    pf = [(t.replace(tzinfo=tz).timestamp(), seqs, new, cached) for t, seqs, new, cached, _ in batches(lines)]
    dc = []
    for line in lines:
        m = DECODE.search(line)
        if m:
            t = dt.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S").replace(tzinfo=tz)
            dc.append((t.timestamp(), int(m[2])))
    return pf, dc


def split(rows: list[dict], logs: dict[str, tuple], before_s: float, after_s: float) -> list[dict]:
    out = []
    for r in rows:
        if r["server"] not in logs:
            continue
        pf, dc = logs[r["server"]]
        a, b = r["t_start"] - before_s, r["t_end"] + after_s
        p = [x for x in pf if a <= x[0] <= b]
        d = [x for x in dc if a <= x[0] <= b]
        s = r.get("summary") or {}
        wall = s.get("wall_s")
        last = r.get("last_start_s")
        out.append({"key": r.get("key"), "server": r["server"], "temperature": r.get("temperature"),
                    "concurrency": r.get("concurrency"), "index": r.get("index"), "wall_s": wall,
                    "requests": s.get("requests"), "tokens": s.get("tokens"),
                    "prompt_tokens_mean": s.get("prompt_tokens_mean"), "last_start_s": last,
                    "drain_s": (wall - last) if isinstance(wall, (int, float)) and isinstance(last, (int, float)) else None,
                    "prefill_batches": len(p), "prefill_seqs": sum(x[1] for x in p),
                    "prefill_new_tokens": sum(x[2] for x in p), "prefill_cached_tokens": sum(x[3] for x in p),
                    "decode_lines": len(d)})
    return out


def _f(x, fmt="{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def report(entries: list[dict], baseline: str) -> list[str]:
    lines = []
    for temp, conc, es in levels(entries):
        lines.append(f"T={temp:g} c={conc}: each round from its server's log (prefill batches; decode lines, one per "
                     "decode log interval)")
        for e in es:
            lines.append(f"  {e['server']:<10} round {e['index']}: wall {_f(e['wall_s'])} s (last start "
                         f"{_f(e['last_start_s'])}, drain {_f(e['drain_s'])}), {e['requests']} requests, {e['tokens']} "
                         f"tokens: prefill batches {e['prefill_batches']} ({e['prefill_seqs']} seqs, "
                         f"{e['prefill_new_tokens']} new tokens, {e['prefill_cached_tokens']} cached), decode lines "
                         f"{e['decode_lines']}")
        for e, b in pairs(es, baseline):
            ratio = e["wall_s"] / b["wall_s"] if e["wall_s"] and b["wall_s"] else None
            lines.append(f"  same work: {e['server']} round {e['index']} / {baseline} round {b['index']} "
                         f"({e['requests']} requests, {e['tokens']} tokens): wall {_f(e['wall_s'])} / "
                         f"{_f(b['wall_s'])} s ({_f(ratio, '{:.3f}')}x), last start {_f(e['last_start_s'])} / "
                         f"{_f(b['last_start_s'])}, drain {_f(e['drain_s'])} / {_f(b['drain_s'])}; prefill batches "
                         f"{e['prefill_batches']} / {b['prefill_batches']} ({e['prefill_seqs']} / "
                         f"{b['prefill_seqs']} seqs), decode lines {e['decode_lines']} / {b['decode_lines']}")
    return lines


def main(argv: list[str]) -> int:
    ap = parser("round_logs.py", __doc__, "logs", "NAME=LOG", "its log (.gz read)")
    ap.add_argument("--log-utc-offset-h", type=float, default=0.0,
                    help="the servers' local time zone in hours east of UTC (default 0: the lent machines)")
    ap.add_argument("--slack-s", type=float, nargs=2, default=(1.5, 0.5), metavar=("BEFORE", "AFTER"),
                    help="seconds a round's window is widened by (whole-second log timestamps; default 1.5 0.5)")
    args = ap.parse_args(argv)
    rows = steady_rows(args.e2e, "round_logs.py")
    if rows is None:
        return 2
    logs = load_named(args.logs, "round_logs.py", "log", "plain=plain.log.gz",
                      lambda path: read_log(path, args.log_utc_offset_h))
    if logs is None:
        return 2
    for name, (pf, dc) in logs.items():
        if not pf and not dc:
            print(f"round_logs.py: {name}: no 'Prefill batch' or 'Decode batch' line in its log: give the server's own "
                  "log (its stdout and stderr)", file=sys.stderr)
            return 2
    entries = split(rows, logs, *args.slack_s)
    if not entries:
        print("round_logs.py: no measured round of a server with a log (names as in e2e.py's --server)", file=sys.stderr)
        return 2
    return emit(report(entries, args.baseline), args.json, {"baseline": args.baseline, "rounds": entries})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
