"""The concurrency sweep: for each level c, keep c requests in flight (closed loop, c worker threads)."""

from __future__ import annotations

import datetime as _dt
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from .client import generate
from .prompts import Prompt, render
from .stats import summarize, speedup


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
    template: dict = field(default_factory=dict)  # server role -> template name

    def __post_init__(self):
        if not self.concurrencies or any(c < 1 for c in self.concurrencies):
            raise ValueError(f"concurrency levels must be positive, got {self.concurrencies}")
        if self.max_new_tokens < 1 or self.timeout_s <= 0 or self.rounds < 1 or self.min_requests < 1:
            raise ValueError("max_new_tokens, timeout, rounds and min_requests must be positive")

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
    results = []
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=c) as pool:
        futs = [pool.submit(generate, url, p.id, p.category, render(template, p.text), cfg.sampling(), cfg.timeout_s,
                            cfg.keep_output) for p in jobs]
        for f in as_completed(futs):
            results.append(f.result())
            if on_done:
                on_done(results[-1])
    return results, time.perf_counter() - t0


def sweep(servers: dict[str, str], prompts: list[Prompt], cfg: SweepConfig, progress=None, depth: int | None = None) -> dict:
    """servers: role ("spec" / "baseline") -> base URL. Returns the bench document (see docs/bench.md)."""
    levels = {c: {"concurrency": c, "requests": cfg.n_requests(c)} for c in cfg.concurrencies}
    requests: dict[str, dict[str, list]] = {}
    overall: dict[str, dict] = {}
    for role, url in servers.items():
        tpl = cfg.template.get(role, "raw")
        if cfg.warmup:
            run_level(url, prompts[:1], cfg.warmup, 1, cfg, tpl)  # not counted: CUDA graphs, caches, JIT
        requests[role], every, walls = {}, [], 0.0
        for c in cfg.concurrencies:
            n = cfg.n_requests(c)
            task = progress.add_task(f"{role:8s} c={c:<3d}", total=n) if progress else None
            tick = (lambda r, t=task: progress.advance(t)) if progress else None
            results, wall = run_level(url, prompts, n, c, cfg, tpl, tick)
            levels[c][role] = summarize(results, wall, depth if role == "spec" else None)
            requests[role][str(c)] = [r.as_dict() for r in results]
            every += results
            walls += wall
        overall[role] = summarize(every, walls, depth if role == "spec" else None)
    for lv in levels.values():
        lv.setdefault("baseline", None)
        lv["speedup"] = speedup(lv.get("spec"), lv.get("baseline"))
    return {"schema": "sglang-kimi-eagle3-bench/1", "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "levels": [levels[c] for c in cfg.concurrencies], "overall": overall.get("spec"), "overall_baseline": overall.get("baseline"),
            "requests": requests}
