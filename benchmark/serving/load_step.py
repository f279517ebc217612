"""A load step against plain decoding: each server takes one schedule of closed-loop concurrency (default c 1 for
15 s, c 128 for 20 s, c 1 for 15 s) in one run, and its output tokens are counted per second as they stream in.

    python benchmark/serving/load_step.py --server plain=http://127.0.0.1:30501 --server ours=http://127.0.0.1:30504 \\
        --baseline plain --json $OUT/load_step.json [--schedule 1:15,128:20,1:15] [--rounds 3] [--workload chat]

What a never-slower server has to show that a grid of fixed levels does not: how it follows a load that moves. The
servers share one GPU, so they take the schedule one at a time, in rotated order (A B C, B C A, C A B, ...; round i of
every server compared with round i of the baseline). Within a run, worker k of max(c) keeps one request in flight
while the phase's c is above k; a worker a step down leaves finishes its request first (the step down is not
instant: the in-flight requests drain). No request starts after the schedule's end; those in flight finish and their
tokens count in the seconds they arrive.

Reported per phase, two rates, each with its ratio to the baseline round by round (median over rounds [min-max]):
  arriving  the tokens arriving in the phase's seconds (its first --settle-s seconds left out: the controller's and the
            batch's time to follow the step, shown apart in the per-second rows). After a step down this counts the
            previous phase's requests still draining: a server behind at c 128 shows more at the c 1 that follows
            (on the H200, 2026-12-04, 1.91x of plain "at c 1" for a server 0.77x of it at c 128);
  sent      the tokens of the requests sent in the phase, over its seconds, wherever they arrive: the work each server
            took on at that load (a slower server sends fewer), free of the drain.
Per second, each server's tokens (median over rounds), so a plot shows the step and how fast each server follows it.
Streaming requests (`"stream": true`): a token's time is its chunk's arrival. The JSON
is rewritten atomically after every finished run, so Ctrl-C keeps what finished. Nothing here imports sglang.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time

from sglang_kimi_eagle3.bench import client, prompts as P
from sglang_kimi_eagle3.bench.runner import interleave
from sglang_kimi_eagle3.errors import UserError
from sglang_kimi_eagle3.validate import atomic_write_text, check_output_file, url_flag

SCHEMA = "sglang-kimi-eagle3-load-step/1"


def parse_schedule(text: str) -> list[tuple[int, float]]:
    """'1:15,128:20,1:15' -> [(1, 15.0), (128, 20.0), (1, 15.0)]; a bad part raises UserError naming --schedule."""
    out = []
    for part in str(text).split(","):
        c, sep, s = part.strip().partition(":")
        try:
            c_i, s_f = int(c), float(s)
        except ValueError:
            c_i, s_f = 0, 0.0
        if not sep or c_i < 1 or not s_f > 0:
            raise UserError(f"--schedule {text!r}: each phase is C:SECONDS with C >= 1 and SECONDS > 0, e.g. 1:15,128:20,1:15")
        out.append((c_i, s_f))
    return out


def token_times(r, t_send: float) -> list[float]:
    """Arrival times (seconds from the run's start) of a streamed request's tokens: the first at its TTFT, each
    next one its inter-token gap later (tokens of one chunk share the chunk's time). A request without stream
    timing counts all its tokens at its end."""
    n = r.completion_tokens or 0
    if not r.ok or n <= 0:
        return []
    if r.ttft_s is None or r.itl_s is None:
        return [t_send + r.latency_s] * n
    t = t_send + r.ttft_s
    out = [t]
    for gap in r.itl_s[: n - 1]:
        t += gap
        out.append(t)
    return out + [t] * (n - len(out))


def run_schedule(url: str, prompts, schedule: list[tuple[int, float]], sampling: dict, template: str,
                 timeout_s: float) -> dict:
    """One server through the whole schedule. Returns its per-second tokens, requests and errors."""
    order = interleave(prompts)
    total = sum(s for _, s in schedule)
    ends, acc = [], 0.0
    for c, s in schedule:
        acc += s
        ends.append((acc, c))
    lock, nxt = threading.Lock(), [0]
    times: list[float] = []
    sent: list[list[float]] = []  # [send time, tokens] per answered request
    stats = {"requests": 0, "errors": 0, "error_kinds": {}}
    t0 = time.perf_counter()

    def level(now: float) -> int | None:
        for end, c in ends:
            if now < end:
                return c
        return None

    def worker(k: int):
        while not client.stopped():
            now = time.perf_counter() - t0
            c = level(now)
            if c is None:
                return
            if k >= c:  # not needed in this phase: wait for one that needs it (or the end)
                time.sleep(0.05)
                continue
            with lock:
                i = nxt[0]
                nxt[0] += 1
            p = order[i % len(order)]
            t_send = time.perf_counter() - t0
            r = client.generate(url, p.id, p.category, P.sent_text(template, p), P.sampling(sampling, p), timeout_s,
                         stream=True)
            with lock:
                stats["requests"] += 1
                if r.ok:
                    got = token_times(r, t_send)
                    times.extend(got)
                    sent.append([round(t_send, 4), len(got)])
                else:
                    stats["errors"] += 1
                    stats["error_kinds"][r.error] = stats["error_kinds"].get(r.error, 0) + 1

    threads = [threading.Thread(target=worker, args=(k,), name=f"step-{k}", daemon=True)
               for k in range(max(c for c, _ in schedule))]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.1)
    wall = time.perf_counter() - t0
    per_second = [0] * (int(max([total, *times]) if times else total) + 1)
    for t in times:
        per_second[int(t)] += 1
    return {"per_second": per_second, "sent": sent, "wall_s": wall, "tokens": len(times), **stats}


def phase_rates(per_second: list[int], schedule: list[tuple[int, float]], settle_s: float) -> list[float]:
    """tok/s of each phase over its whole seconds after the first settle_s (at least one second kept)."""
    out, start = [], 0.0
    for _, s in schedule:
        a = int(start + min(settle_s, max(0.0, s - 1)))
        b = int(start + s)
        secs = per_second[a:b] if b > a else per_second[a:a + 1]
        out.append(sum(secs) / max(1, len(secs)))
        start += s
    return out


def sent_rates(sent: list, schedule: list[tuple[int, float]]) -> list[float]:
    """tok/s of each phase counting the requests sent in it ([send time, tokens] pairs), over the phase's seconds."""
    out, start = [], 0.0
    for _, s in schedule:
        out.append(sum(n for t, n in sent if start <= t < start + s) / s)
        start += s
    return out


def _spread(xs: list[float]) -> dict | None:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)} if xs else None


def report(doc: dict) -> dict:
    sched = [tuple(x) for x in doc["config"]["schedule"]]
    settle = doc["config"]["settle_s"]
    base = doc["baseline"]
    runs = {}  # server -> round -> run
    for r in doc["runs"]:
        runs.setdefault(r["server"], {})[r["round"]] = r
    phases = []
    for j, (c, s) in enumerate(sched):
        row = {"phase": j, "concurrency": c, "seconds": s, "servers": {}}
        for name, by_round in runs.items():
            rates = {i: phase_rates(r["per_second"], sched, settle)[j] for i, r in by_round.items()}
            entry = {"tok_s": _spread(list(rates.values()))}
            if name != base and base in runs:
                ratios = [rates[i] / b for i in rates
                          if i in runs[base] and (b := phase_rates(runs[base][i]["per_second"], sched, settle)[j]) > 0]
                entry["vs_baseline"] = _spread(ratios)
            # the requests sent in the phase (runs of an older file have no "sent": arriving rates only)
            sent = {i: sent_rates(r["sent"], sched)[j] for i, r in by_round.items() if "sent" in r}
            if sent:
                entry["sent_tok_s"] = _spread(list(sent.values()))
                if name != base and base in runs:
                    entry["sent_vs_baseline"] = _spread(
                        [sent[i] / b for i in sent if i in runs[base] and "sent" in runs[base][i]
                         and (b := sent_rates(runs[base][i]["sent"], sched)[j]) > 0])
            row["servers"][name] = entry
        phases.append(row)
    per_second = {name: [statistics.median(col) for col in zip(*(r["per_second"] for r in by_round.values()))]
                  for name, by_round in runs.items()}
    return {"phases": phases, "per_second_median": per_second}


def format_report(rep: dict, base: str) -> str:
    lines = []
    for ph in rep["phases"]:
        parts = []
        for name, e in ph["servers"].items():
            t, v = e["tok_s"], e.get("vs_baseline")
            part = f"{name} {t['median']:.0f} tok/s arriving"
            if v:
                part += f" ({v['median']:.2f}x {base} [{v['min']:.2f}-{v['max']:.2f}])"
            if e.get("sent_tok_s"):
                t, v = e["sent_tok_s"], e.get("sent_vs_baseline")
                part += f", {t['median']:.0f} sent" + (f" ({v['median']:.2f}x [{v['min']:.2f}-{v['max']:.2f}])" if v else "")
            parts.append(part)
        lines.append(f"phase {ph['phase']} (c {ph['concurrency']}, {ph['seconds']:g} s): " + "; ".join(parts))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", action="append", default=[], metavar="NAME=URL", help="a running server (repeatable)")
    ap.add_argument("--baseline", help="the server the others are divided by (default: the first)")
    ap.add_argument("--json", required=True)
    ap.add_argument("--schedule", default="1:15,128:20,1:15", help="C:SECONDS phases (default 1:15,128:20,1:15)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settle-s", type=float, default=3.0, help="seconds of each phase left out of its rate (3)")
    ap.add_argument("--workload", default="chat", help="bundled request lengths (bench/workload.py; default chat)")
    ap.add_argument("--workload-cap", type=int, default=256, help="at most this many new tokens per request (256)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--template", default="raw")
    ap.add_argument("--timeout-s", type=float, default=300.0)
    a = ap.parse_args(argv)
    try:
        schedule = parse_schedule(a.schedule)
        servers = []
        for item in a.server:
            name, sep, url = item.partition("=")
            if not sep or not name:
                raise UserError(f"--server {item!r}: expected NAME=http://HOST:PORT")
            servers.append((name, url_flag(url, "--server")))
        if not servers:
            raise UserError("--server: give at least one NAME=URL (and the baseline)")
        if len({n for n, _ in servers}) != len(servers):
            raise UserError("--server: each NAME once")
        base = a.baseline or servers[0][0]
        if base not in {n for n, _ in servers}:
            raise UserError(f"--baseline {base!r}: not one of the --server names ({', '.join(n for n, _ in servers)})")
        if a.rounds < 1:
            raise UserError("--rounds: at least 1")
        out = check_output_file(a.json, "--json")
        from sglang_kimi_eagle3.bench import workload

        prompts, _ = workload.load(a.workload, cap=a.workload_cap or None)
        P.render(a.template, "")
    except UserError as exc:
        print(f"load_step.py: {exc}", file=sys.stderr)
        return 2
    sampling = {"temperature": a.temperature, "ignore_eos": True, "max_new_tokens": a.workload_cap or 256}
    doc = {"schema": SCHEMA, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": " ".join(sys.argv),
           "baseline": base, "servers": dict(servers), "interrupted": None,
           "config": {"schedule": schedule, "rounds": a.rounds, "settle_s": a.settle_s, "workload": a.workload,
                      "workload_cap": a.workload_cap, "temperature": a.temperature},
           "runs": [], "report": None}

    def save():
        doc["report"] = report(doc) if doc["runs"] else None
        atomic_write_text(out, json.dumps(doc, indent=1) + "\n", "--json")

    names = [n for n, _ in servers]
    urls = dict(servers)
    client.reset()
    total = a.rounds * len(names)
    try:
        for i in range(a.rounds):
            for k in range(len(names)):
                name = names[(i + k) % len(names)]
                r = run_schedule(urls[name], prompts, schedule, sampling, a.template, a.timeout_s)
                if client.stopped():
                    raise KeyboardInterrupt
                doc["runs"].append({"server": name, "round": i, "t_end": time.time(), **r})
                save()
                print(f"[{len(doc['runs'])}/{total}] round {i + 1} {name}: {r['tokens']} tokens in {r['wall_s']:.1f} s, "
                      f"{r['requests']} requests, {r['errors']} errors", flush=True)
    except KeyboardInterrupt:
        client.abort_all()
        doc["interrupted"] = {"runs": len(doc["runs"])}
        save()
        print(f"interrupted: kept {len(doc['runs'])} finished runs in {out}", flush=True)
        return 130
    print(format_report(doc["report"], base), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
