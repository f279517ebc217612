"""One `tune` run (pure w.r.t. sglang: SGLang's kernels come in as `sg`, the launch table's folders as
arguments): per (op, shape), our searched candidates and SGLang's kernel timed side by side on this GPU,
the winners written to the user table after every op, and what `auto` then picks printed.

A win, as in the bundled tables: exact and ours < WIN_MARGIN x SGLang's time in the same run; for the ops SGLang
runs outside its CUDA graphs (EAGER_OPS: the verify ops) on the eager per-call time too.
"""

from __future__ import annotations

import datetime as _dt
import sys
import time

from ..errors import UserError
from ..terminal import echo, width as terminal_width
from . import cache
from .shapes import DRAFT_BS, VERIFY_BS, VERIFY_OPS, TuneShapes

WIN_MARGIN = 0.97  # the bundled tables' rule: ours < 0.97 x upstream in the same run
# ops SGLang runs outside its CUDA graphs (after the captured target forward): a call costs its host time too, so a
# win needs ours < WIN_MARGIN x SGLang's on the eager per-call time as well as on GPU time (H200, 2026-12-01, bs 1:
# tree sampling 7.3 vs 62.6 µs of GPU time, but 223 vs 63 µs per eager call; our three Triton launches cost the host)
EAGER_OPS = frozenset(VERIFY_OPS)


def is_win(op: str, exact: bool, ours_us, up_us, ours_eager_us=None, up_eager_us=None) -> bool:
    """The table's rule: exact and ours < WIN_MARGIN x SGLang's GPU time; for EAGER_OPS also on the eager per-call
    time (measured, or no win)."""
    if not (exact and ours_us is not None and ours_us < WIN_MARGIN * up_us):
        return False
    if op not in EAGER_OPS:
        return True
    return ours_eager_us is not None and up_eager_us is not None and ours_eager_us < WIN_MARGIN * up_eager_us


def progress(i: int, n: int, label: str) -> None:
    bar = 24
    done = int(bar * i / max(n, 1))
    line = f"[{'#' * done}{'.' * (bar - done)}] {i}/{n} {label}"
    if sys.stderr.isatty():
        w = terminal_width() - 1  # one column spare: a full-width line wraps in some terminals
        sys.stderr.write("\r" + line[:w].ljust(w) + ("\n" if i == n else ""))
    else:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def shape_text(shape: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())


def _rule(m: dict, cfg: dict) -> dict:
    """A table rule matching exactly this measured shape's bucket (bs above the previous bucket)."""
    from ..ops.arch import N_BUCKETS, n_bucket

    sh, op = m["shape"], m["op"]
    grid = VERIFY_BS if op in VERIFY_OPS else DRAFT_BS
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
    from .timing import replay_time_us

    return replay_time_us(fn, items, samples=9 if quick else 15, replays=3 if quick else 5)["us"]


def previous_table(name: str, cc, cache_dir) -> dict | None:
    """The user table of this GPU that this run adds to: None where there is none or it is another environment's (a
    stale table is replaced, as `check` and `status` advise); UserError, before anything is measured, where the file
    there is not a table `tune` can read or merge (damaged, foreign, an op entry hand-edited out of shape: never
    replaced unread)."""
    from ..ops import tables

    path = tables.table_path(name, cache_dir)
    if path.is_file():
        try:
            tables.read_user_table(path)
        except (OSError, ValueError) as exc:
            raise UserError(f"tune: {path} is not a launch table tune can read ({exc}); move it away or delete it, "
                            f"then rerun") from exc
    return tables.user_table(name, cc, cache_dir)[0]


def write(path, table: dict) -> None:
    """cache.write_table, a failed write (disk full, a read-only folder) one line naming the file (UserError)."""
    try:
        cache.write_table(path, table)
    except OSError as exc:
        raise UserError(f"tune: could not write the launch table {path}: {exc.strerror or exc}; free space or pass "
                        f"--cache-dir DIR (a folder that accepts files), then rerun") from exc


def run(shapes: TuneShapes, todo: list[dict], title: str, ours: dict, command: str, sg) -> int:
    """Measure `todo` on this GPU against SGLang's kernels `sg` (integration/upstream_kernels.spec_ops);
    ours: cache_dir (None: tables.cache_dir()), ignore_bundled, quick. The table in effect afterwards is
    read with the same folders, passed explicitly (nothing is set in the environment)."""
    import torch
    import triton

    from ..ops import arch, tables
    from . import measure
    from .shapes import tree_of

    name, cc = tables.current_device()
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    missing = [mod for mod in ("tree", "sampling", "topk1") if not hasattr(sg, mod)]
    if missing:
        why = getattr(sg, "import_errors", {}).get(missing[0], "")
        raise UserError(f"tune: SGLang's kernel modules {', '.join(missing)} do not import here"
                        f"{f' ({missing[0]}: {why[:200]})' if why else ''}; sglang 0.5.23 with its JIT toolchain is "
                        f"needed to compare against: install sglang or set $SITE")
    env = tables.environment(name, cc)
    path = tables.table_path(name, ours["cache_dir"])
    old = previous_table(name, cc, ours["cache_dir"])
    table = {**env, "arch": f"sm{cc[0]}{cc[1]}", "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
             "torch": torch.__version__, "source": (f"{command}; wins: exact and ours < {WIN_MARGIN} x SGLang in the same run "
                        "(verify ops: on GPU time and on the eager per-call time)"),
             "deployment": title, "shapes": shapes.describe(),
             "ops": dict(old["ops"]) if old else {}}
    previous = dict(table["ops"])  # a fresh table of this GPU: re-measured shapes replace theirs
    echo(f"GPU: {name} (sm{cc[0]}{cc[1]}, {sms} SMs), driver {env['driver']}, torch {torch.__version__}, "
         f"triton {triton.__version__}; table -> {path}")
    rows, gemv_best, t0 = [], {}, time.perf_counter()
    ops_done: dict = {}
    try:
        for i, m in enumerate(todo):
            progress(i, len(todo), f"{m['op']} {shape_text(m['shape'])}")
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
                write(path, table)
        progress(len(todo), len(todo), f"done in {time.perf_counter() - t0:.0f} s")
    except (KeyboardInterrupt, UserError) as exc:
        for op, spec in ops_done.items():  # the op in progress too: its finished shapes
            table["ops"][op] = cache.merge_op(previous.get(op), spec)
        write(path, table)
        what = "interrupted" if isinstance(exc, KeyboardInterrupt) else "stopped"
        print(f"{what}: kept the {len(rows)} shapes measured so far in {path}", file=sys.stderr)
        raise
    finally:
        measure.clear()
    _print_table(rows)
    tables.clear_cache()
    eff = tables.load_table(name, cc, ours["cache_dir"], bundled=not ours["ignore_bundled"])
    echo(f"wrote {path}")
    echo(f"table in effect now: {eff.get('origin')}")
    on = [f"{r['op']} {r['key']}" for r in rows if arch.use_ours(r["op"], r["key"], eff)]
    echo(f"auto picks ours for {len(on)} of {len(rows)} measured shapes" + (": " + ", ".join(on) if on else ""))
    return 0


def _measure(m, sg, cc, sms, shapes, quick, gemv_best, measure, tree_shape) -> dict:
    import torch

    op = m["op"]
    extra = {"tree_shape": tree_shape} if op in VERIFY_OPS else {}
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
    ours_eager = up_eager = None
    if op in EAGER_OPS and exact and ours_us is not None and ours_us < WIN_MARGIN * up_us:
        from .timing import eager_time_us

        ours_eager = eager_time_us(case.ours(cfg), case.items)
        up_eager = eager_time_us(case.sglang, case.items)
        if not ours_eager < WIN_MARGIN * up_eager:
            detail = (detail + "; " if detail else "") + (f"eager call {ours_eager:.1f} vs SGLang's {up_eager:.1f} µs: "
                                                          "SGLang's (this op runs outside CUDA graphs)")
    win = is_win(op, exact, ours_us, up_us, ours_eager, up_eager)
    return {"op": op, "key": m["key"], "shape": m["shape"], "sglang_us": up_us, "ours_us": ours_us, "config": cfg,
            "chosen": "ours" if win else "sglang", "exact": exact, "detail": detail,
            "measured": {"ours_us": round(ours_us, 2) if ours_us else None, "upstream_us": round(up_us, 2),
                         "ours_eager_us": round(ours_eager, 2) if ours_eager else None,
                         "upstream_eager_us": round(up_eager, 2) if up_eager else None,
                         "upstream": case.upstream, "exact": exact, "check": detail, "config": cfg,
                         "candidates": [[round(t, 2), c] for t, c in timed]}}


def _print_table(rows: list[dict]) -> None:
    """The measurements as a Markdown table (pastes into docs); on a terminal too narrow for it, as rich tables
    that fit (terminal.print_table), the op column heading each."""
    lines = [f"| {'op':14s} | {'shape':28s} | {'SGLang µs':>9s} | {'ours µs':>8s} | {'ratio':>6s} | chosen |",
             f"| {'-' * 14} | {'-' * 28} | {'-' * 9}: | {'-' * 7}: | {'-' * 5}: | ------ |"]
    cells = []
    for r in rows:
        ours = f"{r['ours_us']:8.2f}" if r["ours_us"] else "     n/a"
        ratio = f"{r['sglang_us'] / r['ours_us']:5.2f}x" if r["ours_us"] else "   n/a"
        chosen = r["chosen"] + ("" if r["exact"] else " (inexact)")
        cells.append((r["op"], shape_text(r["shape"]), f"{r['sglang_us']:.2f}", ours.strip(), ratio.strip(), chosen))
        lines.append(f"| {r['op']:14s} | {shape_text(r['shape']):28s} | {r['sglang_us']:9.2f} | {ours} | {ratio} | {chosen} |")
    print()
    if max(map(len, lines)) <= terminal_width():
        print("\n".join(lines))
        return
    from rich import box
    from rich.table import Table

    from ..terminal import console, print_table

    t = Table(box=box.MARKDOWN, show_edge=True)
    for col, just in (("op", "left"), ("shape", "left"), ("SGLang µs", "right"), ("ours µs", "right"),
                      ("ratio", "right"), ("chosen", "left")):
        t.add_column(col, justify=just, overflow="fold")
    for row in cells:
        t.add_row(*row)
    print_table(console(), t, keep=1)
