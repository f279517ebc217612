"""Side-by-side serving benchmark: several SGLang servers on one GPU, measured in alternating rounds.

    python benchmark/serving/e2e.py --spec e2e.json --json benchmark/results/e2e-h200.json --plots docs/img --tag h200
    python benchmark/serving/e2e.py --server plain=http://127.0.0.1:30001 --server auto=http://127.0.0.1:30002 \\
        --baseline plain --round-s 20

Servers come from a spec (JSON: {"servers": [{"name", "argv": [...], "env": {...}, "url"}], "baseline", and any
option below by its flag name with underscores}) - started here, side by side, and stopped at the end - or as
NAME=URL of servers already running. Per temperature (default greedy and 0.7):

  cold     for each concurrency c, in order: pass 1 on every server, then pass 2 on every server; a pass is a
           fixed request count (--cold-requests x c, at least --min-requests). On servers started here, pass 1
           is the first traffic at that batch size: first/second = the cold-start cost. This doubles as the
           warm-up at every level (servers given by URL, or a resumed run, get one uncounted pass instead).
  steady   for each c: rounds A B C, B C A, C A B ... (--rounds per server; each round starts one server later),
           each round --round-s seconds of closed-loop
           traffic (c requests in flight; none starts after the deadline, the ones in flight finish), so a stall
           of a second moves one round by a few percent, not the level. With --finish-by (a Unix time) every
           server's warm pass runs before the first round, each rotation's round length is planned again so that
           the rounds left end by then (their drains counted: at first the warm passes' p90 latency, then the
           longest measured past a round's window), and a rotation that cannot end by then is not started: the
           rounds run are whole rotations ("rounds_cut" in the JSON says how many were left). With --min-round-s
           the rounds are not planned shorter than that: the last levels are left out instead ("levels_dropped").

Before any pass, a greedy check (--greedy-check N, default 8; 0: none): each server answers the first N prompts at
temperature 0, one at a time, and its output ids are compared with the baseline's ("greedy_check" in the JSON).

Reported per level: each server's aggregate and per-request tok/s (median over rounds, min-max), the ratio to
the baseline per round (same round index) as median [min, max], the same between every other pair, and the
cold first/second ratios. A round's aggregate is its tokens over the wall to the last answer, the drain after the
deadline included; its `window` rate counts only the tokens made before the deadline, at full load (window_tok_s),
and its ratio (`window`) is the one the drain's length does not move. Every finished pass or round is written at once (atomically) to --json, so Ctrl-C or
SIGTERM keeps what finished; `--resume` continues an interrupted file where it stopped. Nothing here imports
sglang: the client and the per-round statistics are the `bench` package's.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sglang_kimi_eagle3.bench import client
from sglang_kimi_eagle3.bench import prompts as P
from sglang_kimi_eagle3.bench.runner import SweepConfig, interleave, run_level
from sglang_kimi_eagle3.bench.stats import summarize
from sglang_kimi_eagle3.errors import UserError, run_script
from sglang_kimi_eagle3.validate import (atomic_write_bytes, atomic_write_text, check_output_dir, check_output_file,
                                         float_list_flag, int_list_flag, read_json_object, url_flag)

SCHEMA = "sglang-kimi-eagle3-e2e/1"
SHORT_ROUND_S = 5.0  # a fitted round below this (and below half the asked one) is flagged in the JSON and printed
OPTIONS = {  # option -> (default, kind); a spec may set any of them, a flag overrides the spec
    "concurrency": ([1, 4, 16, 64], "ints"), "temperatures": ([0.0, 0.7], "floats"), "rounds": (3, "int"),
    "round_s": (20.0, "float"), "steady_budget_s": (0.0, "float"), "cold_requests": (3, "int"),
    # with --finish-by: rounds are not fitted below this; the last levels are left out instead (0: fit every level)
    "min_round_s": (0.0, "float"),
    "min_requests": (8, "int"), "max_new_tokens": (128, "int"), "ignore_eos": (True, "bool"),
    "categories": ("chat,code", "str"), "timeout_s": (300.0, "float"), "startup_timeout_s": (540.0, "float"),
    "template": ("raw", "str"), "finish_by": (0.0, "float"), "steady_servers": ("", "names"),
    "steady_temperatures": ("", "floats"), "workload": ("", "str"),
    "workload_cap": (0, "int"),  # at most this many new tokens per workload request (0: the workload's own lengths)
    # a workload's prompts with a head of each send's own (bench/prompts.sent_text): every request prefills its whole
    # prompt; false: replayed as written, each one a prefix-cache hit after its first send (decode alone)
    "fresh_prompts": (True, "bool"),
    "greedy_check": (8, "count"),  # prompts each server answers greedily, one at a time, compared with the baseline's
    # seconds each server idles before a round or warm pass, counted from the end of its last one: the rotated order runs
    # one server's rounds back to back at every rotation's turn (plain, ours | ours, plain), and a server's step-clock
    # ledger (copied every 2-5 s, an interval over 5 s idle) then holds no copy between them (run 45, 2026-12-08: half
    # the rounds had no closing copy, and the other half's opening copy held the tail of the round before)
    "server_gap_s": (0.0, "float"),
}


@dataclass(slots=True)
class Server:
    name: str
    url: str
    argv: list | None = None  # started here when set
    env: dict = field(default_factory=dict)
    log: str | None = None
    proc: subprocess.Popen | None = None
    started_s: float | None = None  # spawn -> healthy


@dataclass(slots=True, frozen=True)
class Unit:
    phase: str  # "cold" | "steady"
    temperature: float
    concurrency: int
    index: int  # pass 1/2 (cold) or round 1..R (steady)
    server: str

    @property
    def key(self) -> str:
        return f"{self.phase}/T{self.temperature:g}/c{self.concurrency}/{self.index}/{self.server}"


# ---- the schedule and the numbers (pure) ----------------------------------------------------------------


def schedule(names: list[str], opts: dict, cold: bool = True) -> list[Unit]:
    """Every pass and round in run order: cold passes (1 then 2, each over all servers) then alternating rounds
    (over opts["steady_servers"] when given: e.g. servers started only for their cold numbers; at
    opts["steady_temperatures"] when given, else at every cold temperature). Each round starts one server later
    than the one before (A B C, B C A, C A B, ...), so no server always follows the same one: on the H200
    (2026-12-02) two servers running the same code measured 0.81 [0.79-0.93] of each other at c 4 in three rounds
    of the fixed order A B C."""
    steady = [n for n in names if n in (opts.get("steady_servers") or names)]
    out = []
    for t in opts["temperatures"]:
        if cold:
            out += [Unit("cold", t, c, p, s) for c in opts["concurrency"] for p in (1, 2) for s in names]
    for t in opts.get("steady_temperatures") or opts["temperatures"]:
        out += [Unit("steady", t, c, r, s) for c in opts["concurrency"] for r in range(1, opts["rounds"] + 1)
                for s in steady[(r - 1) % len(steady):] + steady[:(r - 1) % len(steady)]]
    return out


def round_length(round_s: float, finish_by: float, now: float, rounds_left: int, floor_s: float = 1.0,
                 drain_s: float | None = None) -> float:
    """Seconds per steady round: round_s, or less so that rounds_left rounds end by finish_by, never below floor_s.
    drain_s: the measured seconds all the rounds left spend after their windows, waiting for the requests in flight
    (and queued) to finish; 10 % of the time is kept besides. Where the rounds cannot all fit, the later ones are
    not started (rotation_fits), whole rotations at a time. Without it 20 % is kept for the drains (at c 128 on an
    H100, 2026-12-06, rounds of 20 s took 31-33 s: a queue's drain is not 20 %)."""
    if not finish_by:
        return round_s
    floor_s = min(floor_s, round_s)
    if drain_s is None:
        return max(floor_s, min(round_s, 0.8 * (finish_by - now) / max(1, rounds_left)))
    return max(floor_s, min(round_s, (0.9 * (finish_by - now) - drain_s) / max(1, rounds_left)))


def drains(rows: list[dict], warm_rows: list[dict] = ()) -> dict[tuple[float, int], float]:
    """Per (temperature, concurrency): the seconds a round spends past its window, waiting for the requests in flight
    (and queued) to finish. The longest measured over the steady rounds; before any, the 90th-percentile latency of
    the level's warm passes (a window's last requests start at its end and take about that long)."""
    out: dict[tuple[float, int], float] = {}
    for r in warm_rows:
        p90 = r["summary"].get("latency_p90_s")
        if p90 is not None:
            key = (r["temperature"], r["concurrency"])
            out[key] = max(out.get(key, 0.0), p90)
    measured: dict[tuple[float, int], float] = {}
    for r in rows:
        if r.get("phase") != "steady" or r.get("round_s") is None:
            continue
        key = (r["temperature"], r["concurrency"])
        measured[key] = max(measured.get(key, 0.0), max(0.0, r["summary"]["wall_s"] - r["round_s"]))
    return {**out, **measured}


def fit_levels(left: list, round_s: float, min_round_s: float, finish_by: float, now: float, drain: dict,
               gap_s: float = 0.0) -> list:
    """The (temperature, concurrency) levels of the steady rounds `left` (in run order) whose rounds all fit by
    finish_by at min_round_s or more each: the longest such run of leading levels, at least the first one. On an H100
    (2026-12-06) rounds fitted to 6.2 s at c 64 read plain at 956-1148 tok/s and ours at 0.84-1.09 of it: fewer
    levels, each in rounds long enough, say more than every level in short ones."""
    levels = list(dict.fromkeys((v.temperature, v.concurrency) for v in left))
    for n in range(len(levels), 0, -1):
        units = [v for v in left if (v.temperature, v.concurrency) in levels[:n]]
        fitted = round_length(round_s, finish_by, now, len(units),
                              drain_s=sum(drain.get((v.temperature, v.concurrency), 0.0) for v in units)
                              + gap_waits(units, gap_s))
        if fitted >= min(min_round_s, round_s):
            return levels[:n]
    return levels[:1]


def rotation_fits(units: list, round_s: float, drain: dict, now: float, finish_by: float, gap_s: float = 0.0) -> bool:
    """Whether one whole rotation (the units of one round at one level, one per server) ends by finish_by: a round
    that only some servers ran pairs with nothing, so the rounds stop at a rotation's start, not within it. gap_s:
    --server-gap-s, waited at most once a rotation (at its turn)."""
    if not finish_by:
        return True
    need = sum(round_s + drain.get((u.temperature, u.concurrency), max(drain.values(), default=0.0)) for u in units)
    return now + need + gap_s <= finish_by


def gap_waits(units: list, gap_s: float) -> float:
    """The most --server-gap-s adds to running `units` in order: one gap wherever a server runs twice in a row."""
    return gap_s * sum(1 for a, b in zip(units, units[1:]) if a.server == b.server)


def _spread(xs: list[float]) -> dict | None:
    xs = [x for x in xs if x is not None]
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)} if xs else None


def _ratio(a, b):
    return a / b if a is not None and b else None


def report(doc: dict) -> dict:
    """Per (temperature, concurrency): server spreads, ratios per round vs the baseline and between the others,
    cold first/second. Pure: reads doc["rows"] only."""
    names, base = doc["config"]["servers"], doc["config"]["baseline"]
    rows = [r for r in doc["rows"] if r["summary"]]
    levels = sorted({(r["temperature"], r["concurrency"]) for r in rows})
    out = []
    for t, c in levels:
        here = [r for r in rows if r["temperature"] == t and r["concurrency"] == c]
        steady = {(r["server"], r["index"]): r["summary"] for r in here if r["phase"] == "steady"}
        cold = {(r["server"], r["index"]): r["summary"] for r in here if r["phase"] == "cold"}
        lv = {"temperature": t, "concurrency": c, "servers": {}, "ratios": {}, "cold": {}}
        rounds = sorted({i for _s, i in steady})
        for s in names:
            got = [steady[(s, i)] for i in rounds if (s, i) in steady]
            if got:
                lv["servers"][s] = {"agg_tok_s": _spread([g["agg_tok_s"] for g in got]),
                                    "window_tok_s": _spread([g.get("window_tok_s") for g in got]),
                                    "tok_s_per_req": _spread([g["tok_s_per_req_median"] for g in got]),
                                    "tau": _spread([g["tau"] for g in got]), "rounds": len(got),
                                    "errors": sum(sum(g["errors"].values()) for g in got)}
            first, second = cold.get((s, 1)), cold.get((s, 2))
            if first and second:
                lv["cold"][s] = {"first_over_second": _ratio(first["agg_tok_s"], second["agg_tok_s"]),
                                 "first_wall_s": first["wall_s"], "second_wall_s": second["wall_s"]}
        pairs = [(s, base) for s in names if s != base] + [(a, b) for a in names for b in names
                                                          if base not in (a, b) and names.index(a) < names.index(b)]
        for a, b in pairs:
            per = [(_ratio(steady[(a, i)]["agg_tok_s"], steady[(b, i)]["agg_tok_s"]),
                    _ratio(steady[(a, i)]["tok_s_per_req_median"], steady[(b, i)]["tok_s_per_req_median"]),
                    _ratio(steady[(a, i)].get("window_tok_s"), steady[(b, i)].get("window_tok_s")))
                   for i in rounds if (a, i) in steady and (b, i) in steady]
            if per:
                lv["ratios"][f"{a}/{b}"] = {"aggregate": _spread([p[0] for p in per]),
                                            "per_request": _spread([p[1] for p in per]),
                                            "window": _spread([p[2] for p in per])}
        out.append(lv)
    return {"levels": out}


def format_report(rep: dict) -> str:
    lines = []
    f = lambda sp, fmt=".0f": "-" if not sp else f"{sp['median']:{fmt}} [{sp['min']:{fmt}}-{sp['max']:{fmt}}]"  # noqa: E731
    for lv in rep["levels"]:
        lines.append(f"T={lv['temperature']:g} c={lv['concurrency']}:")
        for s, v in lv["servers"].items():
            lines.append(f"  {s:<10} agg tok/s {f(v['agg_tok_s'])}  per-req tok/s {f(v['tok_s_per_req'], '.1f')}  "
                         f"({v['rounds']} rounds{', ' + str(v['errors']) + ' errors' if v['errors'] else ''})")
        for pair, v in lv["ratios"].items():
            lines.append(f"  {pair:<18} aggregate {f(v['aggregate'], '.3f')}  per-request {f(v['per_request'], '.3f')}  "
                         f"window {f(v.get('window'), '.3f')}")
        for s, v in lv["cold"].items():
            lines.append(f"  cold {s:<10} first/second {v['first_over_second']:.3f} "
                         f"({v['first_wall_s']:.2f} s vs {v['second_wall_s']:.2f} s)")
    return "\n".join(lines)


# ---- traffic --------------------------------------------------------------------------------------------


def window_tok_s(sent: list[tuple[float, object]], window_s: float) -> float | None:
    """Tokens per second within the round's window [0, window_s] (the deadline): each finished request's tokens
    spread evenly over its own [send, send + latency], the part inside the window counted. The drain after the
    deadline, where fewer than c requests are left in flight and its length depends on which requests happened to be
    last, stays out: the full-load rate, comparable across servers and rounds. None without a finished request."""
    if window_s <= 0:
        return None
    tokens, any_ok = 0.0, False
    for start, r in sent:
        if not r.ok or not r.completion_tokens:
            continue
        any_ok = True
        end = start + max(r.latency_s, 1e-9)
        inside = max(0.0, min(end, window_s) - start)
        tokens += r.completion_tokens * inside / (end - start)
    return tokens / window_s if any_ok else None


def timed_level(url: str, prompts, c: int, seconds: float, cfg: SweepConfig, template: str, sent: list | None = None):
    """c requests in flight for `seconds`; no request starts after the deadline, those in flight finish.
    Returns (results, wall seconds from the first send to the last answer, the last start in seconds); `sent`
    (optional) receives (send offset in seconds, result) per request (window_tok_s)."""
    order = interleave(prompts)
    results, lock, nxt = [], threading.Lock(), [0]
    t0 = time.perf_counter()
    deadline = t0 + seconds
    last_start = [0.0]

    def worker():
        while not client.stopped():
            with lock:
                now = time.perf_counter()
                if now >= deadline:
                    return
                i = nxt[0]
                nxt[0] += 1
                last_start[0] = max(last_start[0], now - t0)
            p = order[i % len(order)]
            at = time.perf_counter() - t0
            r = client.generate(url, p.id, p.category, P.sent_text(template, p), P.sampling(cfg.sampling(), p),
                                cfg.timeout_s)
            with lock:
                results.append(r)
                if sent is not None:
                    sent.append((at, r))

    threads = [threading.Thread(target=worker, name=f"e2e-c{c}-{k}", daemon=True) for k in range(c)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.1)
    return results, time.perf_counter() - t0, last_start[0]


def run_unit(u: Unit, server: Server, prompts, opts: dict, round_s: float) -> dict:
    cfg = SweepConfig([u.concurrency], opts["max_new_tokens"], u.temperature, opts["ignore_eos"], opts["timeout_s"])
    t_start = time.time()
    last_start = None
    timeline = []  # cold passes: each request as it finished (where a first-traffic stall sits, and whose clock)
    if u.phase != "steady":
        n = max(opts["min_requests"], opts["cold_requests"] * u.concurrency)
        t0 = time.perf_counter()

        def done(r):
            timeline.append(_timeline_entry(r, time.perf_counter() - t0))

        results, wall = run_level(server.url, prompts, n, u.concurrency, cfg, opts["template"], on_done=done)
    else:
        sent: list = []
        results, wall, last_start = timed_level(server.url, prompts, u.concurrency, round_s, cfg, opts["template"], sent)
    if client.stopped():
        raise KeyboardInterrupt
    row = {"key": u.key, "phase": u.phase, "temperature": u.temperature, "concurrency": u.concurrency,
           "index": u.index, "server": u.server, "t_start": t_start, "t_end": time.time(),
           "round_s": round_s if u.phase == "steady" else None, "last_start_s": last_start,
           "summary": summarize(results, wall)}
    if u.phase == "steady":
        row["summary"]["window_tok_s"] = window_tok_s(sent, round_s)
    if timeline:
        row["requests"] = timeline
    return row


GREEDY_CHECK_TOKENS = 64  # new tokens per greedy-check request (at most --max-new-tokens)


def _first_difference(a, b) -> int | None:
    """Index of the first differing token (or character), the shorter length when one is a prefix of the other,
    None when equal."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def greedy_check(servers: list[Server], base: str, prompts, opts: dict, progress=print) -> dict:
    """Speculation must not change a greedy token: each server answers the first --greedy-check prompts at
    temperature 0, one request at a time (no batch effects), and its output ids (its text where a server sends
    none) are compared with the baseline's. Uncounted traffic, before any pass or round."""
    order = interleave(prompts)[: opts["greedy_check"]]
    params = {"temperature": 0.0, "max_new_tokens": min(GREEDY_CHECK_TOKENS, opts["max_new_tokens"]),
              "ignore_eos": opts["ignore_eos"]}
    outs: dict = {}
    for s in servers:
        rows = []
        for p in order:
            r = client.generate(s.url, p.id, p.category, P.render(opts["template"], p.text), params, opts["timeout_s"],
                                keep_output=True)
            rows.append(None if not r.ok else r.output_ids if r.output_ids is not None else r.text)
        outs[s.name] = rows
    res = {"prompts": len(order), "max_new_tokens": params["max_new_tokens"], "baseline": base, "servers": {}}
    for name, rows in outs.items():
        if name == base:
            continue
        diff = None
        for p, a, b in zip(order, rows, outs[base]):
            if a is None or b is None or a != b:
                diff = {"prompt": p.id, "at": None if a is None or b is None else _first_difference(a, b),
                        "failed": a is None or b is None}
                break
        same = sum(1 for a, b in zip(rows, outs[base]) if a is not None and a == b)
        res["servers"][name] = {"same": same, "of": len(order), "first_difference": diff}
        progress(f"greedy check {name} vs {base}: {same}/{len(order)} prompts identical"
                 + (f" (first difference: {diff['prompt']}, token {diff['at']})" if diff else ""))
    return res


def _timeline_entry(r, done_s: float) -> dict:
    """One cold-pass request: when it was sent and finished (seconds from the pass's start), its client latency and
    the server's own (meta_info.e2e_latency: from the tokenizer manager's receipt). A stall the server did not time
    is client_s - server_s; one it did shows in server_s."""
    return {"prompt": r.prompt_id, "sent_s": round(done_s - r.latency_s, 4), "done_s": round(done_s, 4),
            "client_s": round(r.latency_s, 4),
            "server_s": None if r.server_latency_s is None else round(r.server_latency_s, 4),
            "prompt_tokens": r.prompt_tokens, "ok": r.ok}


# ---- servers --------------------------------------------------------------------------------------------


def _get(url: str, path: str, timeout: float = 5.0) -> int | None:
    try:
        return client.request("GET", url, path, None, timeout)[0]
    except client.Failed:
        return None


def start(servers: list[Server], log_dir: Path) -> None:
    for s in servers:
        if s.argv is None:
            continue
        s.log = s.log or str(log_dir / f"{s.name}.log")
        fh = open(s.log, "ab")
        s.started_s = time.monotonic()
        s.proc = subprocess.Popen(s.argv, env={**os.environ, **{k: str(v) for k, v in s.env.items()}}, stdout=fh,
                                  stderr=subprocess.STDOUT, start_new_session=True)  # own group: stop() ends its children
        fh.close()


def wait_healthy(servers: list[Server], timeout_s: float, progress=print, base: str | None = None) -> dict[str, str]:
    """Every server answers GET /health with 200 within timeout_s (a started one must stay alive). One that exits
    or is not healthy by then is dropped (returned: name -> why) and the others are measured, as long as the
    baseline and one more are healthy; otherwise UserError. (H200, 2026-12-01: one of five servers ran out of GPU
    memory at start, and the all-or-nothing wait threw away the four that were up.)"""
    t0 = time.monotonic()
    waiting, dropped = list(servers), {}
    while waiting:
        for s in list(waiting):
            if s.proc is not None and s.proc.poll() is not None:
                dropped[s.name] = f"exited with {s.proc.returncode} before it was healthy; log {s.log}: {_tail(s.log)}"
                waiting.remove(s)
                progress(f"server {s.name} dropped: {dropped[s.name]}")
                continue
            if _get(s.url, "/health") == 200:
                waiting.remove(s)
                if s.started_s is not None:
                    s.started_s = time.monotonic() - s.started_s
                progress(f"server {s.name} healthy at {s.url}" + (f" after {s.started_s:.0f} s" if s.started_s else ""))
        if waiting and time.monotonic() - t0 > timeout_s:
            for s in waiting:
                dropped[s.name] = f"not healthy within {timeout_s:g} s (startup_timeout_s); log {s.log}: {_tail(s.log)}"
                progress(f"server {s.name} dropped: {dropped[s.name]}")
            waiting = []
        if waiting:
            time.sleep(1.0)
    up = [s.name for s in servers if s.name not in dropped]
    if (base is not None and base in dropped) or len(up) < 2:
        raise UserError(f"servers {', '.join(dropped)} not healthy ({'; '.join(f'{k}: {v[:200]}' for k, v in dropped.items())}); "
                        f"{'the baseline ' + repr(base) + ' is among them' if base in dropped else 'fewer than two are up'}")
    return dropped


def stop(servers: list[Server]) -> None:
    for s in servers:
        if s.proc is not None and s.proc.poll() is None:
            try:
                os.killpg(s.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for s in servers:
        if s.proc is None:
            continue
        try:
            s.proc.wait(30)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(s.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            s.proc.wait(10)


def _tail(path, n: int = 400) -> str:
    try:
        return " ".join(Path(path).read_text(errors="replace")[-n:].split())
    except OSError:
        return "(no log)"


WARMUP_LINE = re.compile(r"kernel warm-up \((\w+)\): (warmed in ([\d.]+) s[^\n]*)")


def warmup_lines(log: str | None) -> list[dict]:
    """The plugin's kernel warm-up lines in a server log (one per scheduler that logged it)."""
    if not log:
        return []
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return []
    return [{"state": m.group(1), "seconds": float(m.group(3)), "detail": m.group(2)[:600]} for m in WARMUP_LINE.finditer(text)]


# ---- inputs ---------------------------------------------------------------------------------------------


def _opt(kind: str, value, where: str):
    if kind == "ints":
        return int_list_flag(",".join(map(str, value)) if isinstance(value, list) else value, where, 1, 4096)
    if kind == "floats":
        return float_list_flag(",".join(map(str, value)) if isinstance(value, list) else value, where, 0, 2)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return str(value).lower() in ("1", "true", "yes", "on")
        raise UserError(f"{where} {value!r}: expected true or false")
    if kind == "names":
        names = value if isinstance(value, list) else [x.strip() for x in str(value).split(",") if x.strip()]
        if not all(isinstance(x, str) and x for x in names):
            raise UserError(f"{where} {value!r}: expected server names (a list, or comma-separated)")
        return names
    if kind == "str":
        if not isinstance(value, str) or not value:
            raise UserError(f"{where} {value!r}: expected a non-empty string")
        return value
    whole = kind in ("int", "count")  # count: an integer >= 0 (0 turns the thing off)
    try:
        v = int(value) if whole else float(value)
    except (TypeError, ValueError):
        raise UserError(f"{where} {value!r}: expected {'an integer' if whole else 'a number'}") from None
    if v < (1 if kind == "int" else 0) or v != v or v == float("inf"):
        raise UserError(f"{where} {value!r}: expected a finite "
                        f"{'integer >= 1' if kind == 'int' else 'integer >= 0' if whole else 'number >= 0'}")
    return v


def parse_args(argv: list[str]):
    ap = argparse.ArgumentParser(prog="benchmark/serving/e2e.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", help="JSON spec: servers to start (argv/env) or reach (url), baseline, options")
    ap.add_argument("--server", action="append", default=[], help="NAME=URL of a running server (repeatable)")
    ap.add_argument("--baseline", help="server the others are divided by (default: the first)")
    ap.add_argument("--json", default="benchmark/results/e2e.json", help="output (rewritten after every pass/round)")
    ap.add_argument("--resume", action="store_true", help="continue the --json file of an interrupted run")
    ap.add_argument("--plots", help="folder for e2e_<tag>_*.png (matplotlib)")
    ap.add_argument("--tag", default="run", help="name part of the plot files")
    ap.add_argument("--log-dir", default=None, help="server logs (default: next to --json)")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold passes (one uncounted warm pass per level)")
    for k, (_d, kind) in OPTIONS.items():
        ap.add_argument("--" + k.replace("_", "-"), default=None,
                        help=f"default {OPTIONS[k][0]}" + (" (comma-separated)" if kind in ("ints", "floats") else ""))
    return ap.parse_args(argv)


def resolve(a) -> tuple[list[Server], str, dict]:
    spec = read_json_object(a.spec, "give the e2e spec file (--spec)", "e2e spec") if a.spec else {}
    where = str(a.spec)
    opts = {}
    for k, (default, kind) in OPTIONS.items():
        flag = getattr(a, k)
        if flag is not None:
            opts[k] = _opt(kind, flag, "--" + k.replace("_", "-"))
        elif k in spec:
            opts[k] = _opt(kind, spec[k], f"{where}: field {k!r} =")
        else:
            opts[k] = default
    servers = []
    for i, s in enumerate(spec.get("servers", []) if isinstance(spec.get("servers", []), list) else [None]):
        key = f"{where}: servers[{i}]"
        if not isinstance(s, dict) or not isinstance(s.get("name"), str) or not s["name"]:
            raise UserError(f"{key}: expected an object with a non-empty 'name'")
        argv = s.get("argv")
        if argv is not None and (not isinstance(argv, list) or not argv or not all(isinstance(x, str) for x in argv)):
            raise UserError(f"{key}.argv: expected a non-empty list of strings (the command that starts the server)")
        url = s.get("url")
        if url is None and argv is not None and "--port" in argv[:-1]:
            host = argv[argv.index("--host") + 1] if "--host" in argv[:-1] else "127.0.0.1"
            url = f"http://{host}:{argv[argv.index('--port') + 1]}"
        if url is None:
            raise UserError(f"{key}: give 'url', or 'argv' with --port")
        env = s.get("env") or {}
        if not isinstance(env, dict):
            raise UserError(f"{key}.env: expected an object of variable -> value")
        servers.append(Server(s["name"], url_flag(url, f"{key}.url"), argv, env, s.get("log")))
    for text in a.server:
        name, sep, url = text.partition("=")
        if not sep or not name:
            raise UserError(f"--server {text!r}: expected NAME=URL, e.g. auto=http://127.0.0.1:30002")
        servers.append(Server(name, url_flag(url, "--server")))
    names = [s.name for s in servers]
    if len(servers) < 2 or len(set(names)) != len(names):
        raise UserError(f"need at least two servers with distinct names (got {names}); give --spec or --server NAME=URL")
    base = a.baseline or spec.get("baseline") or names[0]
    if base not in names:
        raise UserError(f"--baseline {base!r}: not one of the servers {names}")
    bad = [n for n in opts["steady_servers"] if n not in names]
    if bad or (opts["steady_servers"] and base not in opts["steady_servers"]):
        raise UserError(f"steady_servers {opts['steady_servers']}: every name must be a server ({names}) and the "
                        f"baseline {base!r} among them")
    return servers, base, opts


def new_doc(servers: list[Server], base: str, opts: dict, argv: list[str]) -> dict:
    return {"schema": SCHEMA, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "status": "running", "interrupted": None, "command": "benchmark/serving/e2e.py " + " ".join(argv),
            "config": {"servers": [s.name for s in servers], "baseline": base, **opts},
            "servers": {s.name: {"url": s.url, "argv": s.argv, "env": s.env} for s in servers}, "rows": [], "report": None}


def load_resume(path: str, fresh: dict) -> dict:
    doc = read_json_object(path, "--resume continues an existing --json file", "e2e JSON")
    if doc.get("schema") != SCHEMA or not isinstance(doc.get("rows"), list):
        raise UserError(f"--resume {path}: not an e2e JSON (schema {doc.get('schema')!r}, expected {SCHEMA})")
    keep = ("servers", "baseline", "concurrency", "temperatures", "rounds", "max_new_tokens", "ignore_eos", "steady_servers")
    for k in keep:
        if doc["config"].get(k) != fresh["config"].get(k):
            raise UserError(f"--resume {path}: its {k} {doc['config'].get(k)!r} differs from this run's "
                            f"{fresh['config'].get(k)!r}; give the same options or a new --json")
    doc["status"], doc["interrupted"] = "running", None
    return doc


# ---- plots ----------------------------------------------------------------------------------------------


def plot(rep: dict, outdir: str, tag: str, caption: str = "") -> list[str]:
    """e2e_<tag>_T<t>.png per temperature: per-request and aggregate tok/s vs concurrency, median with min-max."""
    try:
        import io

        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["skipped the plots: matplotlib is not installed"]
    os.makedirs(outdir, exist_ok=True)
    paths = []
    for t in sorted({lv["temperature"] for lv in rep["levels"]}):
        lvs = [lv for lv in rep["levels"] if lv["temperature"] == t and lv["servers"]]
        if not lvs:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        names = list(dict.fromkeys(s for lv in lvs for s in lv["servers"]))
        for ax, key, label in ((axes[0], "tok_s_per_req", "tok/s per request (median request)"),
                               (axes[1], "agg_tok_s", "aggregate tok/s")):
            for s in names:
                pts = [(lv["concurrency"], lv["servers"][s][key]) for lv in lvs if s in lv["servers"] and lv["servers"][s][key]]
                if not pts:
                    continue
                xs, sp = [p[0] for p in pts], [p[1] for p in pts]
                med = [v["median"] for v in sp]
                ax.errorbar(xs, med, yerr=[[m - v["min"] for m, v in zip(med, sp)], [v["max"] - m for m, v in zip(med, sp)]],
                            marker="o", capsize=3, label=s)
            ax.set_xscale("log", base=2)
            ax.set_xticks([lv["concurrency"] for lv in lvs], [str(lv["concurrency"]) for lv in lvs])
            ax.set_xlabel("concurrency (requests in flight)")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle((caption + "\n" if caption else "") + f"temperature {t:g}: median over rounds, bars min-max",
                     fontsize=9)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, dpi=110, format="png")
        plt.close(fig)
        paths.append(atomic_write_bytes(os.path.join(outdir, f"e2e_{tag}_T{t:g}.png"), buf.getvalue(), "--plots"))
    return paths


# ---- the run --------------------------------------------------------------------------------------------


class _Terminated(KeyboardInterrupt):
    pass


def _on_sigterm(signum, frame):
    raise _Terminated()


def run(argv: list[str], progress=print, on_row=None) -> int:
    """The whole command; `on_row(doc)` after each written row (tests stop a run there)."""
    a = parse_args(argv)
    servers, base, opts = resolve(a)
    out = check_output_file(a.json, "--json")
    if a.plots:
        check_output_dir(a.plots, "--plots")
    if opts["workload"]:  # request lengths from a bundled workload (bench/workload.py); categories unused
        from sglang_kimi_eagle3.bench import workload

        prompts, _ = workload.load(opts["workload"], cap=opts["workload_cap"] or None, fresh=opts["fresh_prompts"])
    else:
        prompts = P.load([c.strip() for c in opts["categories"].split(",") if c.strip()])
    P.render(opts["template"], "")
    doc = new_doc(servers, base, opts, argv)
    if a.resume and out.exists():
        doc = load_resume(str(out), doc)
    done = {r["key"] for r in doc["rows"]}
    units = schedule([s.name for s in servers], opts, cold=not a.no_cold)
    steady_n = sum(u.phase == "steady" for u in units)
    round_s = opts["round_s"]
    if opts["steady_budget_s"]:
        round_s = max(1.0, min(round_s, opts["steady_budget_s"] / max(1, steady_n)))
    doc["config"]["round_s_used"] = round_s
    by_name = {s.name: s for s in servers}
    client.reset()
    main_thread = threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None

    def save():
        doc["report"] = report(doc)
        atomic_write_text(out, json.dumps(doc, indent=1, allow_nan=False) + "\n", "--json")

    try:
        log_dir = Path(a.log_dir) if a.log_dir else out.parent / f"{out.stem}-logs"
        if any(s.argv for s in servers):
            log_dir.mkdir(parents=True, exist_ok=True)
        start(servers, log_dir)
        dropped = wait_healthy(servers, opts["startup_timeout_s"], progress, base)
        if dropped:  # measure the others; the document says which were dropped and why
            doc["dropped"] = {**doc.get("dropped", {}), **dropped}
            units = [u for u in units if u.server not in dropped]
        for s in servers:
            if s.name in doc.get("dropped", {}):
                continue
            doc["servers"][s.name].update({"startup_s": s.started_s, "log": s.log,
                                           "server_info": client.server_info(s.url), "kernel_warmup": warmup_lines(s.log)})
        live = [s for s in servers if s.name not in doc.get("dropped", {})]
        if opts["greedy_check"] > 0 and "greedy_check" not in doc and any(s.name == base for s in live):
            doc["greedy_check"] = greedy_check(live, base, prompts, opts, progress)
        save()
        sent = set()  # (server, temperature, c) this process has sent traffic at
        todo = [u for u in units if u.key not in done]
        warm_rows: list[dict] = []  # the uncounted passes: their drains plan the rounds

        idle_since: dict[str, float] = {}  # each server's last pass or round's end (--server-gap-s)

        def rest(server: str) -> None:
            wait = opts["server_gap_s"] - (time.time() - idle_since.get(server, float("-inf")))
            if wait > 0:
                time.sleep(wait)

        def warm(server: str, t: float, levels: list[int], length: float) -> None:
            for c in levels:
                rest(server)
                warm_rows.append(run_unit(Unit("warm", t, c, 0, server), by_name[server], prompts, opts, length))
                idle_since[server] = time.time()
                sent.add((server, t, c))
            progress(f"warmed {server} at T={t:g}, c {','.join(map(str, levels))} (uncounted)")

        asked_s = round_s
        dropped: set = set()  # (temperature, concurrency) levels left out by --min-round-s
        for k, u in enumerate(todo, 1):
            if u.phase == "steady" and (u.temperature, u.concurrency) in dropped:
                continue
            if u.phase == "steady" and opts["finish_by"] and "round_s_planned_at" not in doc["config"]:
                # every server's warm pass before the first round (uncounted: traffic this run has not sent it yet), so
                # the plan below has their time behind it and their latencies for the drains
                for v in todo[k - 1:]:
                    levels = [c for c in opts["concurrency"] if (v.server, v.temperature, c) not in sent]
                    if v.phase == "steady" and levels:
                        warm(v.server, v.temperature, levels, round_s)
            cold_levels = [c for c in opts["concurrency"] if (u.server, u.temperature, c) not in sent]
            if u.phase == "steady" and cold_levels:  # uncounted: traffic this run has not sent this server yet
                warm(u.server, u.temperature, cold_levels, round_s)
            sent.add((u.server, u.temperature, u.concurrency))
            rotation = (u.temperature, u.concurrency, u.index)
            if u.phase == "steady" and opts["finish_by"] and not any(
                    r["phase"] == "steady" and (r["temperature"], r["concurrency"], r["index"]) == rotation
                    for r in doc["rows"]):
                # a rotation's first round: its length planned again from the drains measured so far, so that the
                # rounds left end by the deadline; a rotation that cannot is not started (nor any after it)
                left = [v for v in todo[k - 1:] if v.phase == "steady" and (v.temperature, v.concurrency) not in dropped]
                group = [v for v in left if (v.temperature, v.concurrency, v.index) == rotation]
                drain = drains(doc["rows"], warm_rows)
                round_s = round_length(asked_s, opts["finish_by"], time.time(), len(left),
                                       drain_s=sum(drain.get((v.temperature, v.concurrency), 0.0) for v in left)
                                       + gap_waits(left, opts["server_gap_s"]))
                if "round_s_planned_at" not in doc["config"] and round_s < min(opts["min_round_s"], asked_s):
                    keep = fit_levels(left, asked_s, opts["min_round_s"], opts["finish_by"], time.time(), drain,
                                      opts["server_gap_s"])
                    cut = [lv for lv in dict.fromkeys((v.temperature, v.concurrency) for v in left) if lv not in keep]
                    if cut:
                        dropped.update(cut)
                        left = [v for v in left if (v.temperature, v.concurrency) in keep]
                        round_s = round_length(asked_s, opts["finish_by"], time.time(), len(left),
                                               drain_s=sum(drain.get((v.temperature, v.concurrency), 0.0) for v in left)
                                               + gap_waits(left, opts["server_gap_s"]))
                        doc["config"]["levels_dropped"] = (
                            f"{', '.join(f'T={t:g} c {c}' for t, c in cut)} not measured: with them the rounds would be "
                            f"shorter than --min-round-s {opts['min_round_s']:g} s by the deadline; the levels before "
                            f"run rounds of {round_s:.1f} s (--resume without --finish-by, or another call, runs the rest)")
                        progress("WARNING: " + doc["config"]["levels_dropped"])
                if "round_s_planned_at" not in doc["config"]:
                    doc["config"].update(round_s_used=round_s, round_s_planned_at=time.time())
                    progress(f"steady phase: {len(left)} rounds of {round_s:.1f} s to end by the deadline"
                             + (f" (a round's drain {max(drain.values()):.1f} s at most, from the warm passes)"
                                if drain else ""))
                    if round_s < min(SHORT_ROUND_S, opts["round_s"] / 2):
                        doc["config"]["short_rounds"] = (
                            f"rounds of {round_s:.1f} s, not the {opts['round_s']:g} s asked, to end by the deadline: "
                            "too short to decide a difference of less than about 10 % (1.4 s rounds moved +-30 % on an "
                            "H200); measure fewer levels, temperatures or servers, or give each round its time across "
                            "calls (no --finish-by, then --resume)")
                        progress("WARNING: " + doc["config"]["short_rounds"])
                doc["config"]["drain_s"] = {f"T{t:g}/c{c}": round(d, 1) for (t, c), d in drain.items()}
                if not rotation_fits(group, round_s, drain, time.time(), opts["finish_by"], opts["server_gap_s"]):
                    doc["config"]["rounds_cut"] = (
                        f"{len(left)} rounds not started (from round {u.index} at T={u.temperature:g}, "
                        f"c {u.concurrency} on): a whole rotation of {len(group)} would not end by the deadline; the "
                        "rounds run are whole rotations (--resume without --finish-by runs the rest)")
                    progress("WARNING: " + doc["config"]["rounds_cut"])
                    save()
                    break
            rest(u.server)
            row = run_unit(u, by_name[u.server], prompts, opts, round_s)
            idle_since[u.server] = time.time()
            doc["rows"].append(row)
            save()
            s = row["summary"]
            progress(f"[{k}/{len(todo)}] {u.phase} T={u.temperature:g} c={u.concurrency} "
                     f"{'pass' if u.phase == 'cold' else 'round'} {u.index} {u.server}: "
                     f"{(s['agg_tok_s'] or 0):,.0f} tok/s aggregate, {(s['tok_s_per_req_median'] or 0):.1f} per request, "
                     + (f"{s['window_tok_s']:,.0f} in the window, " if s.get("window_tok_s") else "")
                     + f"{s['ok']}/{s['requests']} ok in {s['wall_s']:.1f} s")
            if on_row:
                on_row(doc)
    except KeyboardInterrupt as exc:
        client.abort_all()
        sig = "SIGTERM" if isinstance(exc, _Terminated) else "SIGINT"
        doc["status"], doc["interrupted"] = "interrupted", {"signal": sig, "rows": len(doc["rows"])}
        save()
        progress(f"interrupted ({sig}): kept {len(doc['rows'])} finished passes/rounds in {out}; --resume continues")
        if a.plots and doc["rows"]:
            _plots(doc, a, progress)
        return 143 if sig == "SIGTERM" else 130
    finally:
        stop(servers)
        if main_thread:
            signal.signal(signal.SIGTERM, old_term)
    doc["status"] = "complete"
    save()
    progress(format_report(doc["report"]))
    progress(f"wrote {out}")
    if a.plots:
        _plots(doc, a, progress)
    return 0


def _plots(doc: dict, a, progress) -> None:
    caption = f"{' vs '.join(doc['config']['steady_servers'] or doc['config']['servers'])} ({a.tag}, {doc['status']})"
    for p in plot(doc["report"], a.plots, a.tag, caption):
        progress(p if p.startswith("skipped") else f"wrote {p}")


def main(argv: list[str] | None = None) -> int:
    return run_script(run, argv, "e2e.py")


if __name__ == "__main__":
    sys.exit(main())
