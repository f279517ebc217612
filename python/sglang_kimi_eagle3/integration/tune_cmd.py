"""`sglang-kimi-eagle3 tune [launch_server flags]`: measure our kernels against SGLang's on this GPU
and write the launch table `auto` then uses here (tuning/cache.py: the user cache).

For the shapes the deployment runs (tuning/shapes.py; flags as for `check`, none = the embedded
default), per op and shape: our launch parameters searched within the architecture's limits
(tuning/search.py), our best checked against SGLang's own kernel on the same inputs (ids and accept
paths bit for bit; GEMV values as accurate as SGLang's matmul), both timed side by side (CUDA-graph
replays, inputs rotated past the L2, fixed counts: tuning/timing.replay_time_us). A win, as in the
bundled tables: exact and ours < 0.97 x SGLang's time. The table is written atomically after every
op, so Ctrl-C keeps what finished. Imports SGLang's kernels through upstream_kernels (works on a
machine without SGLang's server stack).
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import sys
import tempfile
import time
import warnings

from ..errors import UserError
from ..tuning import cache
from ..tuning.shapes import OPS, TuneShapes, from_configs, measurements

WIN_MARGIN = 0.97  # the bundled tables' rule: ours < 0.97 x upstream in the same run
HELP = """usage: sglang-kimi-eagle3 tune [--dry-run] [--quick] [--cache-dir DIR] [--ignore-bundled] [--ops OP,...]
                              [launch_server flags ...]

Measures this plugin's kernels against SGLang's own on the local GPU for the shapes the deployment
runs (TP shard rows, draft vocab, hidden, N / topk, batch sizes), searches our launch parameters,
and writes a per-GPU table that `SGLANG_KIMI_EAGLE3_KERNELS=auto` (the default) uses on this GPU
before the bundled one. No launch_server flags = the embedded default (as `check`).

  --dry-run         print the shapes and ops it would measure, and where the table would go (no GPU)
  --quick           batch sizes 1, 32, 128 and a smaller search grid (a few minutes at most)
  --cache-dir DIR   where to write (default: $SGLANG_KIMI_EAGLE3_TUNE_DIR, else $XDG_CACHE_HOME/
                    sglang-kimi-eagle3/tuned); serving reads $SGLANG_KIMI_EAGLE3_TUNE_DIR or the default
  --ignore-bundled  measure as if no bundled table existed (search seeds and report ignore it)
  --ops OP,...      only these ops: """ + ",".join(OPS) + """
Exit: 0 done, 2 unusable input or no GPU, 130 interrupted (finished ops are kept)."""


# ------------------------------------------------------------------------------------ arguments


def _split(argv: list[str]) -> tuple[dict, list[str]]:
    ours = {"dry_run": False, "quick": False, "cache_dir": None, "ignore_bundled": False, "ops": list(OPS)}
    rest, i = [], 0
    while i < len(argv):
        a = argv[i]
        name, val = (a.split("=", 1) + [None])[:2] if a.startswith("--") and "=" in a else (a, None)
        if name in ("--dry-run", "--quick", "--ignore-bundled"):
            ours[name[2:].replace("-", "_")] = True
        elif name in ("--cache-dir", "--ops"):
            if val is None:
                if i + 1 >= len(argv):
                    raise UserError(f"{name} needs a value")
                val = argv[i + 1]
                i += 1
            if name == "--ops":
                ops = [o.strip() for o in val.split(",") if o.strip()]
                bad = [o for o in ops if o not in OPS]
                if bad or not ops:
                    raise UserError(f"--ops {val}: unknown op(s) {', '.join(bad) or '(none)'}; choose from {','.join(OPS)}")
                ours["ops"] = ops
            else:
                ours["cache_dir"] = val
        else:
            rest.append(a)
        i += 1
    return ours, rest


def _flag(argv: list[str], *names: str):
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def _int_flag(argv, *names):
    v = _flag(argv, *names)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        raise UserError(f"{names[0]} {v!r}: expected an integer") from None


def _parsed_by_sglang(argv: list[str]) -> dict | None:
    """SGLang's own parser over the flags (as `check`): its error for a bad flag; None where SGLang's
    server stack does not import (a bare GPU box with only its kernels): the flags are read directly."""
    try:
        from sglang.srt.plugins import load_plugins
        from sglang.srt.server_args import prepare_server_args  # noqa: F401
    except Exception:
        return None
    from .check_cmd import _parse_with_sglang

    load_plugins()
    sa = _parse_with_sglang(argv)
    return {k: getattr(sa, k, None) for k in ("model_path", "speculative_draft_model_path", "tp_size",
                                               "speculative_eagle_topk", "speculative_num_steps",
                                               "speculative_num_draft_tokens", "cuda_graph_max_bs_decode",
                                               "max_running_requests")}


def deployment_shapes(rest: list[str], quick: bool) -> tuple[TuneShapes, str, str]:
    """(shapes, title, how the flags were read) for launch_server flags (none: the embedded default)."""
    from ..configs import read_config
    from ..profiles import DEFAULT_ARGV, DEFAULT_DEPLOYMENT_NAME
    from .check_cmd import resolve_model_paths

    embedded = not rest
    title = f"the embedded default: {DEFAULT_DEPLOYMENT_NAME}" if embedded else "launch_server " + " ".join(rest)
    argv, _labels = resolve_model_paths(list(DEFAULT_ARGV) if embedded else list(rest))
    parsed = _parsed_by_sglang(argv)
    how = "flags parsed by SGLang's launch_server parser"
    if parsed is None:
        how = "flags read directly (SGLang's server stack does not import here)"
        parsed = {"model_path": _flag(argv, "--model-path", "--model"),
                  "speculative_draft_model_path": _flag(argv, "--speculative-draft-model-path", "--speculative-draft-model"),
                  "tp_size": _int_flag(argv, "--tp-size", "--tp"),
                  "speculative_eagle_topk": _int_flag(argv, "--speculative-eagle-topk"),
                  "speculative_num_steps": _int_flag(argv, "--speculative-num-steps"),
                  "speculative_num_draft_tokens": _int_flag(argv, "--speculative-num-draft-tokens"),
                  "cuda_graph_max_bs_decode": _int_flag(argv, "--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"),
                  "max_running_requests": _int_flag(argv, "--max-running-requests")}
    if not parsed["model_path"]:
        raise UserError("tune: --model-path is not set; give the target model (or no flags for the embedded default)")
    target = read_config(parsed["model_path"])
    dpath = parsed["speculative_draft_model_path"]
    draft = read_config(dpath) if dpath else None
    shapes = from_configs(target, draft, tp=int(parsed["tp_size"] or 1), topk=parsed["speculative_eagle_topk"],
                          steps=parsed["speculative_num_steps"], draft_tokens=parsed["speculative_num_draft_tokens"],
                          max_bs=parsed["cuda_graph_max_bs_decode"] or parsed["max_running_requests"], quick=quick)
    return shapes, title, how


# ------------------------------------------------------------------------------------ progress


def _progress(i: int, n: int, label: str) -> None:
    width = 24
    done = int(width * i / max(n, 1))
    line = f"[{'#' * done}{'.' * (width - done)}] {i}/{n} {label}"
    if sys.stderr.isatty():
        sys.stderr.write("\r" + line[:120].ljust(120) + ("\n" if i == n else ""))
    else:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


# ------------------------------------------------------------------------------------ main


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
        return 0
    ours, rest = _split(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("sglang_kimi_eagle3").setLevel(logging.WARNING)
    if not ours["dry_run"]:
        _require_gpu()
    shapes, title, how = deployment_shapes(rest, ours["quick"])
    todo = [m for m in measurements(shapes) if m["op"] in ours["ops"]]
    print(f"Tuning for {title}")
    print(f"Shapes ({how}): {shapes.describe()}")
    if ours["dry_run"]:
        print(f"Would measure {len(todo)} (op, shape) points, ours vs SGLang's kernel:")
        for m in todo:
            print(f"  {m['op']:14s} {_shape_text(m['shape']):32s} key {m['key']}")
        print(f"Table would be written to {cache.cache_dir(ours['cache_dir'])}/<GPU name>.json")
        return 0
    return run(shapes, todo, title, ours, " ".join(["sglang-kimi-eagle3", "tune"] + argv))


def _require_gpu() -> None:
    try:
        import torch

        ok = torch.cuda.is_available()
    except Exception:
        ok = False
    if not ok:
        raise UserError("tune: no CUDA GPU visible here (torch.cuda.is_available() is False); run it on the machine "
                        "that will serve, or add --dry-run to list the shapes and ops it would measure")


def _shape_text(shape: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())


# ------------------------------------------------------------------------------------ GPU run


def _rule(m: dict, cfg: dict) -> dict:
    """A table rule matching exactly this measured shape's bucket (bs above the previous bucket)."""
    from ..ops.arch import N_BUCKETS, n_bucket
    from ..tuning.shapes import DRAFT_BS, VERIFY_BS

    sh, op = m["shape"], m["op"]
    grid = VERIFY_BS if op in ("argmax_verify", "verify_greedy", "tree_sampling") else DRAFT_BS
    lo = max([b for b in grid if b < sh["bs"]], default=0) + 1
    rule = {"min_bs": lo, "max_bs": sh["bs"]}
    if "R" in sh:
        rule.update(min_rows=sh["R"], max_rows=sh["R"], min_hidden=sh["H"], max_hidden=sh["H"])
    if "V" in sh:
        rule.update(min_vocab=sh["V"], max_vocab=sh["V"])
    if "k" in sh:
        rule["k"] = sh["k"]
    if "n" in sh:
        nb = n_bucket(sh["n"])
        rule.update(min_n=max([b for b in N_BUCKETS if b < nb], default=0) + 1, max_n=nb,
                    min_vocab=sh["vocab"], max_vocab=sh["vocab"])
    return {**rule, "config": {k: v for k, v in cfg.items() if v is not None}}


def _time(fn, items, quick):
    from ..tuning.timing import replay_time_us

    return replay_time_us(fn, items, samples=9 if quick else 15, replays=3 if quick else 5)["us"]


def run(shapes: TuneShapes, todo: list[dict], title: str, ours: dict, command: str) -> int:
    import torch
    import triton

    from ..ops import arch
    from ..tuning import measure
    from ..tuning.shapes import tree_of
    from .upstream_kernels import spec_ops

    if ours["cache_dir"]:  # this process's load_table reads the table it writes
        os.environ[cache.ENV_DIR] = str(ours["cache_dir"])
    if ours["ignore_bundled"]:
        os.environ[cache.ENV_BUNDLED] = tempfile.mkdtemp(prefix="no-bundled-tables-")
    arch.load_table.cache_clear()
    name, cc = arch.current_device()
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    sg = spec_ops()
    missing = [mod for mod in ("tree", "sampling", "topk1") if not hasattr(sg, mod)]
    if missing:
        raise UserError(f"tune: SGLang's kernel modules {', '.join(missing)} do not import here (sglang 0.5.23 with "
                        f"its JIT toolchain is needed to compare against); install sglang or set $SITE")
    env = cache.environment(name, cc)
    path = cache.table_path(name, ours["cache_dir"])
    old, _, _ = cache.user_table(name, cc, ours["cache_dir"])
    table = {**env, "arch": f"sm{cc[0]}{cc[1]}", "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
             "torch": torch.__version__, "source": f"{command}; wins: exact and ours < {WIN_MARGIN} x SGLang in the same run",
             "deployment": title, "shapes": shapes.describe(),
             "ops": dict(old["ops"]) if old else {}}
    previous = dict(table["ops"])  # a fresh table of this GPU: re-measured shapes replace theirs
    print(f"GPU: {name} (sm{cc[0]}{cc[1]}, {sms} SMs), driver {env['driver']}, torch {torch.__version__}, "
          f"triton {triton.__version__}; table -> {path}")
    rows, gemv_best, t0 = [], {}, time.perf_counter()
    ops_done: dict = {}
    try:
        for i, m in enumerate(todo):
            _progress(i, len(todo), f"{m['op']} {_shape_text(m['shape'])}")
            row = _measure(m, sg, cc, sms, shapes, ours["quick"], gemv_best, measure, tree_of(shapes))
            rows.append(row)
            spec = ops_done.setdefault(m["op"], {"default": {}, "rules": [], "wins": [], "measured": {}})
            spec["measured"][m["key"]] = row["measured"]
            if row["config"]:
                spec["rules"].append(_rule(m, row["config"]))
            if row["chosen"] == "ours":
                spec["wins"].append(m["key"])
            last = i + 1 == len(todo) or todo[i + 1]["op"] != m["op"]
            if last:  # write after each op: Ctrl-C keeps what finished
                table["ops"][m["op"]] = cache.merge_op(previous.get(m["op"]), spec)
                cache.write_atomic(path, table)
        _progress(len(todo), len(todo), f"done in {time.perf_counter() - t0:.0f} s")
    except (KeyboardInterrupt, UserError) as exc:
        for op, spec in ops_done.items():  # the op in progress too: its finished shapes
            table["ops"][op] = cache.merge_op(previous.get(op), spec)
        cache.write_atomic(path, table)
        what = "interrupted" if isinstance(exc, KeyboardInterrupt) else "stopped"
        print(f"{what}: kept the {len(rows)} shapes measured so far in {path}", file=sys.stderr)
        raise
    finally:
        measure.clear()
    _print_table(rows)
    arch.load_table.cache_clear()
    eff = arch.load_table(name, cc)
    print(f"wrote {path}")
    print(f"table in effect now: {eff.get('origin')}")
    on = [f"{r['op']} {r['key']}" for r in rows if arch.use_ours(r["op"], r["key"], eff)]
    print(f"auto picks ours for {len(on)} of {len(rows)} measured shapes" + (": " + ", ".join(on) if on else ""))
    return 0


def _measure(m, sg, cc, sms, shapes, quick, gemv_best, measure, tree_shape) -> dict:
    import torch

    op = m["op"]
    extra = {"tree_shape": tree_shape} if op in ("argmax_verify", "verify_greedy", "tree_sampling") else {}
    if op == "lm_head_topk":
        extra["gemv_best"] = gemv_best.get((m["shape"]["R"], m["shape"]["bs"]))
    case = measure.BUILDERS[op](m, sg, cc, sms, quick, shapes.tp, **extra)
    timed = []
    for cfg in case.candidates:
        try:
            timed.append((_time(case.ours(cfg), case.items, quick), cfg))
        except Exception as exc:  # a candidate that does not compile or fit here: skipped, said so
            print(f"  skip {op} {cfg}: {type(exc).__name__}: {str(exc)[:160]}", file=sys.stderr)
    timed.sort(key=lambda t: t[0])
    if op == "lm_head_gemv":
        gemv_best[(m["shape"]["R"], m["shape"]["bs"])] = [c for _, c in timed[:2]]
    try:
        up_us = _time(case.sglang, case.items, quick)
    except Exception as exc:  # the baseline itself does not run here: say so, keep the finished ops
        raise UserError(f"tune: SGLang's kernel for {op} ({case.upstream}) does not run here: {type(exc).__name__}: "
                        f"{' '.join(str(exc).split())[:200]}; it is the baseline tune compares against (its JIT "
                        f"kernels need nvcc and the CUDA headers); `--ops` without {op} skips it") from None
    if not timed:
        exact, detail, ours_us, cfg = False, "no candidate config ran", None, None
    else:
        ours_us, cfg = timed[0]
        try:
            exact, detail = case.check(cfg)
            torch.cuda.synchronize()
        except Exception as exc:  # a failing check is a loss for ours, reported in the table
            exact, detail = False, f"check failed: {type(exc).__name__}: {str(exc)[:160]}"
    win = bool(exact and ours_us is not None and ours_us < WIN_MARGIN * up_us)
    return {"op": op, "key": m["key"], "shape": m["shape"], "sglang_us": up_us, "ours_us": ours_us, "config": cfg,
            "chosen": "ours" if win else "sglang", "exact": exact, "detail": detail,
            "measured": {"ours_us": round(ours_us, 2) if ours_us else None, "upstream_us": round(up_us, 2),
                         "upstream": case.upstream, "exact": exact, "check": detail, "config": cfg,
                         "candidates": [[round(t, 2), c] for t, c in timed]}}


def _print_table(rows: list[dict]) -> None:
    print()
    print(f"| {'op':14s} | {'shape':28s} | {'SGLang µs':>9s} | {'ours µs':>8s} | {'ratio':>6s} | chosen |")
    print(f"| {'-' * 14} | {'-' * 28} | {'-' * 9}: | {'-' * 7}: | {'-' * 5}: | ------ |")
    for r in rows:
        ours = f"{r['ours_us']:8.2f}" if r["ours_us"] else "     n/a"
        ratio = f"{r['sglang_us'] / r['ours_us']:5.2f}x" if r["ours_us"] else "   n/a"
        chosen = r["chosen"] + ("" if r["exact"] else " (inexact)")
        print(f"| {r['op']:14s} | {_shape_text(r['shape']):28s} | {r['sglang_us']:9.2f} | {ours} | {ratio} | {chosen} |")
