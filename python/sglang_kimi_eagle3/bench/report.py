"""The bench document as a readable table (rich) and as JSON."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..terminal import console as terminal_console, print_table


def _f(v, fmt: str = ".2f", none: str = "-") -> str:
    return none if v is None else format(v, fmt)


def _errors(s: dict | None) -> str:
    if not s or not s["errors"]:
        return "0"
    return ", ".join(f"{k} {v}" for k, v in sorted(s["errors"].items()))


def print_report(doc: dict, console: Console | None = None) -> None:
    con = console or terminal_console()
    cfg = doc.get("config") or {}
    if cfg.get("tag") or cfg.get("spec_off_baseline"):
        con.print(f"[bold]run[/bold] {cfg.get('tag') or ''}" + ("  (spec-off baseline)" if cfg.get("spec_off_baseline") else ""))
    info = doc.get("servers", {})
    for role, i in info.items():
        con.print(f"[bold]{role}[/bold] {doc.get('config', {}).get('urls', {}).get(role, '')}  "
                  + ("  ".join(f"{k}={v}" for k, v in i.items() if v is not None) if i else "(no /server_info)"))
    has_base = any(lv.get("baseline") for lv in doc["levels"])
    depth = max((len(lv["spec"]["alpha"]) for lv in doc["levels"] if lv.get("spec")), default=0)
    t = Table(title="per concurrency (tok/s per request = completion tokens / client latency, prefill included)",
              title_justify="left")
    for col in ["c", "ok/req", "errors", "no spec", "tok/s/req", "agg tok/s", "p50 s", "p99 s", "τ", "acc %"] + \
               [f"α{i + 1}" for i in range(depth)] + (["base tok/s/req", "base agg", "speedup agg", "speedup/req"] if has_base else []):
        t.add_column(col, justify="right")
    for lv in doc["levels"]:
        s, b, sp = lv.get("spec"), lv.get("baseline"), lv.get("speedup")
        alphas = [_f(a, ".2f") for a in (s["alpha"] if s else [])] + [""] * (depth - len(s["alpha"] if s else []))
        row = [str(lv["concurrency"]), f"{s['ok']}/{s['requests']}", _errors(s), str(s["no_spec"]),
               _f(s["tok_s_per_req_mean"], ".1f"), _f(s["agg_tok_s"], ".1f"), _f(s["latency_p50_s"], ".2f"),
               _f(s.get("latency_p99_s"), ".2f"),
               _f(s["tau"]), _f(s["accept_rate"] and 100 * s["accept_rate"], ".1f"), *alphas]
        if has_base:
            row += [_f(b and b.get("tok_s_per_req_mean"), ".1f"), _f(b and b.get("agg_tok_s"), ".1f"),
                    _f(sp and sp["aggregate"]), _f(sp and sp["per_request"])]
        t.add_row(*row)
    print_table(con, t, keep=1)
    verdict = speedup_line(doc)
    if verdict:
        con.print(verdict, style="yellow" if "below 1.00" in verdict else None)
    for lv in doc["levels"]:
        for role in ("spec", "baseline"):
            s = lv.get(role)
            if s and s.get("first_error"):  # (a --baseline-json level may lack the fields of this run's)
                con.print(f"[red]c={lv['concurrency']} {role}: {sum((s.get('errors') or {}).values())} failed[/red] "
                          f"(first: {s['first_error']})")
            if s and role == "spec" and s.get("no_spec"):
                con.print(f"[yellow]c={lv['concurrency']}: {s['no_spec']} ok responses had no spec fields[/yellow] "
                          "(speculation off, or finished before a verify); left out of τ and acceptance")
    print_latency(doc, con)
    o = doc.get("overall")
    if o and o.get("tau") is not None:
        con.print(f"overall: τ {o['tau']:.2f} over {o['ok'] - o['no_spec']} requests, acceptance {100 * (o['accept_rate'] or 0):.1f}%, "
                  f"per position {', '.join(_f(a) for a in o['alpha'])}")


def speedup_line(doc: dict) -> str | None:
    """One line for the operator's question, is speculation ever slower than the baseline here: the range of the
    aggregate speedup over the levels measured against a baseline, and every level below 1.00 (None without one)."""
    sp = [(lv["concurrency"], (lv.get("speedup") or {}).get("aggregate")) for lv in doc["levels"]]
    sp = [(c, x) for c, x in sp if isinstance(x, (int, float))]
    if not sp:
        return None
    lo, hi = min(sp, key=lambda cx: cx[1]), max(sp, key=lambda cx: cx[1])
    line = (f"aggregate tok/s over the baseline: {lo[1]:.2f}x (c {lo[0]}) to {hi[1]:.2f}x (c {hi[0]})" if len(sp) > 1
            else f"aggregate tok/s over the baseline: {lo[1]:.2f}x (c {lo[0]})")
    slower = [f"c {c} ({x:.2f}x)" for c, x in sp if round(x, 2) < 1.0]  # as printed: 0.996 reads 1.00, not below
    if slower:
        return f"{line}; below 1.00 at {', '.join(slower)}: speculation is slower than the baseline there"
    return f"{line}; never below the baseline at the levels measured"


def _ms(block: dict | None, q: str) -> str:
    return _f(block and block.get(q) is not None and 1e3 * block[q], ".1f")


def print_latency(doc: dict, con: Console) -> None:
    """Streamed latency per level and server (--stream): TTFT, ITL, end to end; and spec / baseline ratios."""
    rows = [(lv, role) for lv in doc["levels"] for role in ("spec", "baseline") if (lv.get(role) or {}).get("streaming")]
    if not rows:
        return
    t = Table(title="streamed latency (TTFT and ITL in ms, end to end in s; ratio = spec / baseline, below 1 is faster)",
              title_justify="left")
    for col in ("c", "server", "TTFT p50", "p90", "p99", "ITL p50", "p90", "p99", "e2e p50", "p90", "p99"):
        t.add_column(col, justify="right")
    qs = ("p50", "p90", "p99")
    for lv, role in rows:
        st = lv[role]["streaming"]
        t.add_row(str(lv["concurrency"]), role, *[_ms(st["ttft_s"], q) for q in qs], *[_ms(st["itl_s"], q) for q in qs],
                  *[_f(st["e2e_s"].get(q)) for q in qs])
        ratio = lv.get("latency_ratio")
        if role == "baseline" and ratio:
            t.add_row(str(lv["concurrency"]), "ratio", *[_f(ratio[k][q]) for k in ("ttft_s", "itl_s", "e2e_s") for q in qs])
    con.print(t)
