"""The concurrency sweep: for each level c, keep c requests in flight (closed loop, c worker threads).

Levels run one after another; within a level every server (spec, then baseline) is measured, so a
finished level always carries both sides. `on_level(doc)` is called after each finished level (the CLI
writes the JSON there), so an interruption loses at most the level in progress.

Workers are daemon threads pulling from a shared counter; the main thread waits in short joins, so
Ctrl-C reaches it at once, and `client.abort_all()` then ends every open request within moments.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from dataclasses import dataclass, field

from . import client
from .document import SCHEMA  # noqa: E402  (one name for the format)
from .prompts import Prompt, sampling, sent_text
from .setting import reconcile
from .stats import latency_ratio, reject_impossible_histograms, speedup, summarize
from .step_costs import level_costs


@dataclass(slots=True)
class SweepConfig:
    concurrencies: list[int]
    max_new_tokens: int = 256
    temperature: float = 0.0
    ignore_eos: bool = False
    timeout_s: float = 600.0
    rounds: int = 2  # requests per level = max(min_requests, rounds * c)
    min_requests: int = 16
    warmup: int = 1
    keep_output: bool = False
    stream: bool = False  # /generate with "stream": true: TTFT and inter-token latency per request
    template: dict = field(default_factory=dict)  # server role -> template name
    max_drafts: int | None = None  # drafts per verify of the spec server (None: unknown, or adaptive)

    def __post_init__(self):
        if not self.concurrencies or any(c < 1 for c in self.concurrencies):
            raise ValueError(f"concurrency levels must be positive, got {self.concurrencies}")
        if self.max_new_tokens < 1 or not 0 < self.timeout_s < float("inf") or self.rounds < 1 or self.min_requests < 1:
            raise ValueError("max_new_tokens, timeout, rounds and min_requests must be positive (timeout finite)")

    def sampling(self) -> dict:
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "ignore_eos": self.ignore_eos}

    def n_requests(self, c: int) -> int:
        return max(self.min_requests, self.rounds * c)


def interleave(prompts: list[Prompt]) -> list[Prompt]:
    """Round-robin over categories, so that every level (even a short one) mixes them."""
    by_cat: dict[str, list[Prompt]] = {}
    for p in prompts:
        by_cat.setdefault(p.category, []).append(p)
    out, i = [], 0
    while len(out) < len(prompts):
        for ps in by_cat.values():
            if i < len(ps):
                out.append(ps[i])
        i += 1
    return out


def run_level(url: str, prompts: list[Prompt], n: int, c: int, cfg: SweepConfig, template: str, on_done=None):
    """n requests, at most c in flight; returns (results in completion order, wall seconds)."""
    order = interleave(prompts)
    jobs = [order[i % len(order)] for i in range(n)]
    results: list = []
    lock = threading.Lock()
    nxt = [0]

    def worker():
        while True:
            with lock:
                i = nxt[0]
                if i >= n or client.stopped():
                    return
                nxt[0] += 1
            p = jobs[i]
            r = client.generate(url, p.id, p.category, sent_text(template, p), sampling(cfg.sampling(), p), cfg.timeout_s,
                                cfg.keep_output, cfg.stream)
            with lock:
                results.append(r)
            if on_done:
                on_done(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, name=f"bench-c{c}-{k}", daemon=True) for k in range(min(c, n))]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.1)  # short joins: KeyboardInterrupt reaches this (main) thread at once
    with lock:
        return list(results), time.perf_counter() - t0


def new_document(servers: dict[str, str]) -> dict:
    return {"schema": SCHEMA, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "status": "running", "interrupted": None, "levels": [], "overall": None, "overall_baseline": None,
            "requests": {role: {} for role in servers}}


def sweep(servers: dict[str, str], prompts: list[Prompt], cfg: SweepConfig, progress=None, depth: int | None = None,
          doc: dict | None = None, on_level=None) -> dict:
    """servers: role ("spec" / "baseline") -> base URL. Fills `doc` (see docs/bench.md) level by level."""
    doc = doc if doc is not None else new_document(servers)
    doc["in_progress"] = "warmup"
    for role, url in servers.items():
        if cfg.warmup:
            run_level(url, prompts[:1], cfg.warmup, 1, cfg, cfg.template.get(role, "raw"))  # not counted
    every: dict[str, list] = {role: [] for role in servers}
    walls = {role: 0.0 for role in servers}
    for c in cfg.concurrencies:
        n = cfg.n_requests(c)
        lv: dict = {"concurrency": c, "requests": n}
        for role, url in servers.items():
            doc["in_progress"] = f"{role} c={c}"
            task = progress.add_task(f"{role:8s} c={c:<3d}", total=n) if progress else None
            tick = (lambda r, t=task: progress.advance(t)) if progress else None
            results, wall = run_level(url, prompts, n, c, cfg, cfg.template.get(role, "raw"), tick)
            if role == "spec" and doc.get("setting") is None and any(r.ok for r in results):
                # the first level with answers fixes the setting this run trusts (server_info vs answers)
                doc["setting"] = s = reconcile((doc.get("servers") or {}).get("spec") or {}, results)
                if s["source"] == "answers" and not s["adaptive"]:
                    depth, cfg.max_drafts = s["steps"], s["steps"]
            if role == "spec":
                reject_impossible_histograms(results, cfg.max_drafts)
            if client.stopped():
                raise KeyboardInterrupt  # stopped mid-level: the level is not finished, keep what is
            lv[role] = summarize(results, wall, depth if role == "spec" else None)
            doc["requests"][role][str(c)] = [r.as_dict(cfg.keep_output) for r in results]
            every[role] += results
            walls[role] += wall
        lv.setdefault("baseline", None)
        lv["speedup"] = speedup(lv.get("spec"), lv.get("baseline"))
        info = (doc.get("servers") or {}).get("spec") or {}
        trusted = doc.get("setting") or {}
        lv["step_costs"] = level_costs(doc["requests"].get("spec", {}).get(str(c)),
                                       doc["requests"].get("baseline", {}).get(str(c)), depth,
                                       trusted.get("draft_tokens") or info.get("speculative_num_draft_tokens"),
                                       bool(info.get("speculative_adaptive")))
        lv["latency_ratio"] = latency_ratio(lv.get("spec"), lv.get("baseline"))
        doc["levels"].append(lv)
        doc["overall"] = summarize(every["spec"], walls["spec"], depth) if "spec" in servers else None
        doc["overall_baseline"] = summarize(every["baseline"], walls["baseline"]) if "baseline" in servers else None
        if on_level:
            on_level(doc)
    doc["in_progress"] = None
    doc["status"] = "complete"
    return doc
