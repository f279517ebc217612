"""`sglang-kimi-eagle3 bench`: benchmark running SGLang servers: acceptance per position, latency percentiles
(TTFT / ITL with --stream), speedup per concurrency.

Every input is checked before the first request (URLs, numbers, the output paths, --baseline-json). The
JSON is rewritten atomically after every finished level; Ctrl-C or SIGTERM stops within moments and
leaves every finished level in it with "status": "interrupted" (exit 130 / 143).
"""

from __future__ import annotations

import signal
import sys
import threading

from ..bench import client, document, outputs, prompts as P
from ..bench.prompt_file import load_file
from ..bench.report import print_report
from ..bench.runner import SweepConfig, new_document, sweep
from ..bench.stats import latency_ratio, speedup
from ..bench.step_costs import merge_plain
from ..errors import UserError
from ..terminal import HelpFormatter
from ..validate import (
    ArgParser,
    check_output_dir,
    check_output_file,
    float_flag,
    int_list_flag,
    refuse_empty,
    url_flag,
)

EPILOG = """examples:
  sglang-kimi-eagle3 bench --url http://127.0.0.1:30000 --json spec.json
  sglang-kimi-eagle3 bench --url http://spec:30000 --baseline-url http://plain:30001 --json run.json --plots out/
  sglang-kimi-eagle3 bench --url http://127.0.0.1:30000 --concurrency 1,4,16 --categories chat,code
  sglang-kimi-eagle3 bench --url http://127.0.0.1:30000 --stream --prompts traffic.jsonl --json spec.json
one box, one model (the server restarted in between, same flags otherwise):
  sglang-kimi-eagle3 bench --url http://127.0.0.1:30000 --spec-off-baseline --stream --json plain.json
  sglang-kimi-eagle3 bench --url http://127.0.0.1:30000 --baseline-json plain.json --stream --json spec.json
Then: sglang-kimi-eagle3 plan --bench run.json. Field meanings: docs/bench.md."""
MAX_LEVEL = document.MAX_CONCURRENCY  # concurrency (threads) per level
MAX_REQUESTS = 100_000  # requests per level (each keeps a result in memory and in the JSON)
MAX_NEW_TOKENS = 1 << 20
MAX_WARMUP = 1000
MAX_TIMEOUT_S = 86400.0
MAX_TEMPERATURE = 100.0


def parser() -> ArgParser:
    p = ArgParser(prog="sglang-kimi-eagle3 bench", description=__doc__, epilog=EPILOG, formatter_class=HelpFormatter)
    p.add_argument("--url", required=True, help="base URL of the server with speculation (native /generate); the plain one with "
                   "--spec-off-baseline")
    p.add_argument("--baseline-url", help="base URL of the same model without speculation: adds speedup columns")
    p.add_argument("--baseline-json", help="instead of --baseline-url: an earlier bench JSON taken against the plain server")
    p.add_argument("--concurrency", default="1,2,4,8,16,32,64,128", help="levels (default 1,2,4,...,128)")
    p.add_argument("--spec-off-baseline", action="store_true",
                   help="this run is the baseline: the --url server must run without speculation (checked); pass its "
                   "JSON to the speculative run as --baseline-json")
    p.add_argument("--tag", default="", help="a label for this run, kept in the JSON and shown in the report")
    p.add_argument("--stream", action="store_true",
                   help="stream the answers: TTFT, inter-token latency and end-to-end p50/p90/p99 per level")
    p.add_argument("--categories", help=f"bundled prompt categories (default {','.join(P.CATEGORIES)})")
    p.add_argument("--prompts", metavar="FILE", help="your prompts instead of the bundled set: JSONL ({\"prompt\": ...} "
                   "or {\"text\": ...} per line) or ShareGPT-style JSON")
    p.add_argument("--workload", metavar="NAME", help="request lengths from a bundled workload (chat: seeded "
                   "lognormal prompt/output lengths; each request's own max_new_tokens; every send's prompt its own, so "
                   "each prefills in full, no prefix-cache hits) instead of prompts")
    p.add_argument("--max-new-tokens", default="256", help=f"default 256, at most {MAX_NEW_TOKENS}")
    p.add_argument("--temperature", default="0", help="default 0 (greedy)")
    p.add_argument("--ignore-eos", action="store_true", help="always generate --max-new-tokens tokens")
    p.add_argument("--timeout", default="600", help=f"seconds per request, in total (default 600, at most {MAX_TIMEOUT_S})")
    p.add_argument("--rounds", default="2", help=f"requests per level = max(--min-requests, rounds x c) (at most "
                   f"{MAX_REQUESTS} a level)")
    p.add_argument("--min-requests", default="16", help=f"default 16, at most {MAX_REQUESTS}")
    p.add_argument("--warmup", default="1", help=f"uncounted requests per server before the sweep (at most {MAX_WARMUP})")
    p.add_argument("--template", default="auto", help="chat template: auto (from /server_info model_path), raw, kimi, llama3")
    p.add_argument("--json", default="bench.json", help="output JSON (default bench.json), rewritten after every level")
    p.add_argument("--plots", help="folder for tau_speedup.png and acceptance.png (needs the 'plot' extra)")
    p.add_argument("--caption", default="", help="title line for the plots")
    p.add_argument("--save-outputs", action="store_true", help="keep generated text and token ids in the JSON")
    p.add_argument("--no-progress", action="store_true")
    return p


def _merge_baseline(doc: dict, base_doc: dict, path: str) -> None:
    base = {lv["concurrency"]: lv.get("spec") for lv in base_doc["levels"]}
    base_rows = (base_doc.get("requests") or {}).get("spec") if isinstance(base_doc.get("requests"), dict) else None
    for lv in doc["levels"]:
        lv["baseline"] = base.get(lv["concurrency"])
        lv["speedup"] = speedup(lv.get("spec"), lv["baseline"])
        merge_plain(lv, (base_rows or {}).get(str(lv["concurrency"])) if isinstance(base_rows, dict) else None)
        lv["latency_ratio"] = latency_ratio(lv.get("spec"), lv["baseline"])
    doc["config"]["baseline_json"] = path
    doc["config"]["baseline_levels"] = sorted(base)


def _options(a) -> tuple[SweepConfig, dict, dict | None]:
    """Every flag checked, every output path and the baseline read, before any request."""
    refuse_empty(a, baseline_url="--baseline-url", baseline_json="--baseline-json", categories="--categories",
                 prompts="--prompts", workload="--workload", plots="--plots")  # --json '' is check_output_file's
    if a.baseline_url and a.baseline_json:
        raise UserError("give --baseline-url or --baseline-json, not both")
    if a.spec_off_baseline and (a.baseline_url or a.baseline_json):
        raise UserError("--spec-off-baseline measures the baseline itself: drop --baseline-url/--baseline-json from this "
                        "run, and pass its --json to the speculative run as --baseline-json")
    if a.prompts and a.categories:
        raise UserError("give --prompts or --categories, not both (--categories picks from the bundled set)")
    if a.workload and (a.prompts or a.categories):
        raise UserError("give --workload or --prompts/--categories, not both (a workload brings its own prompts)")
    servers = {"spec": url_flag(a.url, "--url")}
    if a.baseline_url:
        servers["baseline"] = url_flag(a.baseline_url, "--baseline-url")
    counts = {flag: _count(v, flag, lo, hi) for flag, v, lo, hi in (
        ("--max-new-tokens", a.max_new_tokens, 1, MAX_NEW_TOKENS), ("--rounds", a.rounds, 1, MAX_REQUESTS),
        ("--min-requests", a.min_requests, 1, MAX_REQUESTS), ("--warmup", a.warmup, 0, MAX_WARMUP))}
    levels = int_list_flag(a.concurrency, "--concurrency", 1, MAX_LEVEL, max_items=64)
    if counts["--rounds"] * max(levels) > MAX_REQUESTS:
        raise UserError(f"--rounds {counts['--rounds']} x --concurrency {max(levels)} is {counts['--rounds'] * max(levels)} "
                        f"requests in one level, more than bench sends (at most {MAX_REQUESTS}); lower --rounds")
    cfg = SweepConfig(levels, counts["--max-new-tokens"], float_flag(a.temperature, "--temperature", 0, MAX_TEMPERATURE),
                      a.ignore_eos, float_flag(a.timeout, "--timeout", 0, MAX_TIMEOUT_S, lo_open=True), counts["--rounds"],
                      counts["--min-requests"], counts["--warmup"], a.save_outputs, a.stream)
    if a.template != "auto":
        P.render(a.template, "")  # validates the name
    check_output_file(a.json, "--json")
    if a.plots:
        check_output_dir(a.plots, "--plots")
        outputs.check_plots(a.plots)
    outputs.check_distinct(a.json, a.plots, a.baseline_json)
    outputs.check_json(a.json)  # after: --json equal to --baseline-json is named as such
    if "baseline" in servers:
        outputs.check_baseline_url(servers["spec"], servers["baseline"])
    base_doc = document.load(a.baseline_json, "--baseline-json") if a.baseline_json else None
    if base_doc is not None:
        outputs.check_baseline_doc(base_doc, a.baseline_json, levels)
        outputs.check_baseline_mode(base_doc, a.baseline_json, a.stream)
    return cfg, servers, base_doc


def _count(text, flag: str, lo: int, hi: int) -> int:
    try:
        v = int(str(text).strip())
    except ValueError:
        v = None
    if v is None or not lo <= v <= hi:
        raise UserError(f"{flag} {text}: expected an integer in [{lo}, {hi}]")
    return v


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    cfg, servers, base_doc = _options(a)
    if a.workload:
        from ..bench.workload import load as load_workload

        prompt_set, skipped = load_workload(a.workload)[0], 0
        categories = [a.workload]
    elif a.prompts:
        prompt_set, skipped = load_file(a.prompts)
        categories = sorted({p.category for p in prompt_set})
    else:
        categories = [c.strip() for c in (a.categories or ",".join(P.CATEGORIES)).split(",") if c.strip()]
        prompt_set, skipped = P.load(categories), 0
    client.reset()
    doc = new_document(servers)
    doc["config"] = {"urls": servers, "concurrencies": cfg.concurrencies, "sampling_params": cfg.sampling(),
                     "timeout_s": cfg.timeout_s, "templates": cfg.template, "categories": categories,
                     "prompts": len(prompt_set), "command": "sglang-kimi-eagle3 bench " + " ".join(argv),
                     "stream": cfg.stream, "prompts_file": a.prompts, "prompts_skipped": skipped, "tag": a.tag,
                     "spec_off_baseline": a.spec_off_baseline}
    if base_doc is not None:
        for line in outputs.baseline_config_notes(base_doc, doc["config"], a.baseline_json):
            print(line, file=sys.stderr)
    if skipped:
        print(f"note: --prompts {a.prompts}: {skipped} entries without a human turn skipped; {len(prompt_set)} prompts",
              file=sys.stderr)

    earlier = outputs.earlier_result(a.json)  # a measured result already there: kept until this run measures
    written = [False]

    def save(d: dict) -> None:
        if base_doc is not None:
            _merge_baseline(d, base_doc, a.baseline_json)
        if earlier is not None and not outputs.measured_levels(d):
            return
        document.write(d, a.json)
        written[0] = True

    def kept() -> str:
        n, date = earlier
        return (f"kept the earlier result in {a.json} ({n} measured level{'s' if n != 1 else ''}, {date}): this run "
                "measured nothing, so it was not written")

    main_thread = threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        infos = {role: client.server_info(url) for role, url in servers.items()}
        doc["servers"] = infos
        for role, info in infos.items():
            if "error" in info:
                print(f"warning: {servers[role]}/server_info: {info['error']} (continuing; failed requests will be "
                      "counted)", file=sys.stderr)
            cfg.template[role] = P.guess_template(info.get("model_path")) if a.template == "auto" else a.template
        if "baseline" in infos:
            outputs.check_baseline_info(infos["baseline"], servers["baseline"])
        if a.spec_off_baseline:
            outputs.check_baseline_info(infos["spec"], servers["spec"], "--spec-off-baseline --url")
        depth = infos["spec"].get("speculative_num_steps")
        cfg.max_drafts = None if infos["spec"].get("speculative_adaptive") else depth  # adaptive: steps vary
        save(doc)  # the file exists (status "running") from the first moment
        if a.no_progress:
            sweep(servers, prompt_set, cfg, None, depth, doc, save)
        else:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as prog:
                sweep(servers, prompt_set, cfg, prog, depth, doc, save)
    except KeyboardInterrupt as exc:
        client.abort_all()  # every open request returns at once; no new one starts
        sig = "SIGTERM" if isinstance(exc, _Terminated) else "SIGINT"
        doc["status"], doc["interrupted"] = "interrupted", {"signal": sig, "during": doc.get("in_progress"),
                                                             "finished_levels": len(doc["levels"])}
        doc["in_progress"] = None
        save(doc)
        print(f"interrupted ({sig}) during {doc['interrupted']['during']}: " + (
            f"kept {len(doc['levels'])} finished level(s) in {a.json}" if written[0] or earlier is None else kept()),
            file=sys.stderr)
        return 143 if sig == "SIGTERM" else 130
    except Exception as exc:  # a bug of ours: keep the finished levels, then let cli.py report it (exit 3)
        doc["status"], doc["interrupted"] = "failed", {"error": f"{type(exc).__name__}: {exc}"[:300],
                                                       "finished_levels": len(doc["levels"])}
        try:
            save(doc)
        except UserError:
            pass
        raise
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, old_term)
    notes = outputs.after_run(doc, a.json)  # no request answered / a speculating baseline / no level to compare
    save(doc)
    print_report(doc)
    if written[0]:
        print(f"wrote {a.json}")
    else:
        notes.append(kept())
    for line in notes:
        print(line, file=sys.stderr)
    if doc["status"] == "failed":
        return 1
    if a.plots:
        from ..bench.plots import plot_bench

        for line in plot_bench(doc, a.plots, a.caption):
            print(line if line.startswith("skipped") else f"wrote {line}", file=sys.stderr if line.startswith("skipped") else sys.stdout)
    return 0
