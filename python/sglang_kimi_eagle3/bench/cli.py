"""`sglang-kimi-eagle3 bench`: benchmark running SGLang servers: acceptance per position, speedup per concurrency."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import UserError
from . import prompts as P
from .client import server_info
from .report import print_report, write_json
from .runner import SweepConfig, sweep
from .stats import speedup

EPILOG = """examples:
  sglang-kimi-eagle3 bench --url http://127.0.0.1:30000 --json spec.json
  sglang-kimi-eagle3 bench --url http://spec:30000 --baseline-url http://plain:30001 --json run.json --plots out/
  sglang-kimi-eagle3 bench --url http://127.0.0.1:30000 --concurrency 1,4,16 --categories chat,code
Then: sglang-kimi-eagle3 plan --bench run.json. Field meanings: docs/bench.md."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sglang-kimi-eagle3 bench", description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="base URL of the server with speculation (native /generate)")
    p.add_argument("--baseline-url", help="base URL of the same model without speculation: adds speedup columns")
    p.add_argument("--baseline-json", help="instead of --baseline-url: an earlier bench JSON taken against the plain server")
    p.add_argument("--concurrency", default="1,2,4,8,16,32,64,128", help="levels (default 1,2,4,...,128)")
    p.add_argument("--categories", default=",".join(P.CATEGORIES), help=f"prompt categories (default {','.join(P.CATEGORIES)})")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0, help="default 0 (greedy)")
    p.add_argument("--ignore-eos", action="store_true", help="always generate --max-new-tokens tokens")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
    p.add_argument("--rounds", type=int, default=2, help="requests per level = max(--min-requests, rounds x c)")
    p.add_argument("--min-requests", type=int, default=16)
    p.add_argument("--warmup", type=int, default=1, help="uncounted requests per server before the sweep")
    p.add_argument("--template", default="auto", help="chat template: auto (from /server_info model_path), raw, kimi, llama3")
    p.add_argument("--json", default="bench.json", help="output JSON (default bench.json)")
    p.add_argument("--plots", help="folder for tau_speedup.png and acceptance.png (needs the 'plot' extra)")
    p.add_argument("--caption", default="", help="title line for the plots")
    p.add_argument("--save-outputs", action="store_true", help="keep generated text and token ids in the JSON")
    p.add_argument("--no-progress", action="store_true")
    return p


def _levels(text: str) -> list[int]:
    try:
        vals = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise UserError(f"--concurrency wants comma-separated integers like 1,2,4, got {text!r}") from None
    if not vals or vals[0] < 1:
        raise UserError(f"--concurrency levels must be >= 1, got {text!r}")
    return vals


def _merge_baseline(doc: dict, path: str) -> None:
    try:
        with open(path) as f:
            old = json.load(f)
        base = {lv["concurrency"]: lv.get("spec") for lv in old["levels"]}
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise UserError(f"--baseline-json {path}: not a readable bench JSON ({exc})") from None
    for lv in doc["levels"]:
        lv["baseline"] = base.get(lv["concurrency"])
        lv["speedup"] = speedup(lv.get("spec"), lv["baseline"])
    doc["config"]["baseline_json"] = path


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    if a.baseline_url and a.baseline_json:
        raise UserError("give --baseline-url or --baseline-json, not both")
    try:
        cfg = SweepConfig(_levels(a.concurrency), a.max_new_tokens, a.temperature, a.ignore_eos, a.timeout, a.rounds,
                          a.min_requests, a.warmup, a.save_outputs)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    prompt_set = P.load([c.strip() for c in a.categories.split(",") if c.strip()])
    servers = {"spec": a.url, **({"baseline": a.baseline_url} if a.baseline_url else {})}
    infos = {role: server_info(url) for role, url in servers.items()}
    for role, info in infos.items():
        if "error" in info:
            print(f"warning: {servers[role]}/server_info: {info['error']} (continuing; failed requests will be counted)",
                  file=sys.stderr)
        cfg.template[role] = P.guess_template(info.get("model_path")) if a.template == "auto" else a.template
        P.render(cfg.template[role], "")  # validates the name
    depth = infos["spec"].get("speculative_num_steps")
    if a.no_progress:
        doc = sweep(servers, prompt_set, cfg, None, depth)
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as prog:
            doc = sweep(servers, prompt_set, cfg, prog, depth)
    doc["servers"] = infos
    doc["config"] = {"urls": servers, "concurrencies": cfg.concurrencies, "sampling_params": cfg.sampling(),
                     "timeout_s": cfg.timeout_s, "templates": cfg.template, "categories": a.categories.split(","),
                     "prompts": len(prompt_set), "command": "sglang-kimi-eagle3 bench " + " ".join(argv)}
    if a.baseline_json:
        _merge_baseline(doc, a.baseline_json)
    print_report(doc)
    print(f"wrote {write_json(doc, a.json)}")
    if a.plots:
        from .plots import plot_bench

        for line in plot_bench(doc, a.plots, a.caption):
            print(line if line.startswith("skipped") else f"wrote {line}", file=sys.stderr if line.startswith("skipped") else sys.stdout)
    return 0
