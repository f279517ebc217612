"""Runtime truth: which hooks really run here, at which call sites, and how often ours ran.

Upstream target: sglang.srt.speculative.base_spec_worker.BaseSpecWorker.init_cuda_graphs
  (base_spec_worker.py:375), AFTER. Scheduler.init_all_cuda_graphs (scheduler.py:1122) captures the
  target's graphs, then calls the speculative worker's init_cuda_graphs; EAGLEWorkerV2 (:1387) and
  MultiLayerEagleWorkerV2 reach this method through super(), so it returns once the draft graphs are
  captured, in every scheduler process, before serving starts. (Hooking Scheduler itself would make
  every process that loads plugins import the scheduler module: ~490 modules, ~0.5 s here.)
Why: the main process's table says what was queued; only a scheduler knows whether the names its
  callers use (eagle_worker_v2.draft_topk1_postprocess, eagle_utils.verify_tree_greedy_func, ...)
  route through our functions and whether our kernel was chosen for this GPU's table and the
  launch's shapes. SGLang swallows hook errors, so this is the only place an operator can see it.
How: the TP-0 scheduler of an EAGLE/EAGLE3 launch logs one table (hook, status word, call sites
  verified, table in effect, counters so far) and writes it as JSON, atomically, to
  `status_path()`: $SGLANG_KIMI_EAGLE3_STATUS_DIR, default ~/.cache/sglang-kimi-eagle3/run/, file
  `port<PORT>[-dp<K>].json`; while serving, a daemon thread rewrites it within FLUSH_S seconds of any
  counted call (a scheduler is ended by a signal, so there is no last write at exit; on the H200 on
  2026-11-30 the old flush-on-the-next-call left a tree server's file with no verify calls at all).
  `sglang-kimi-eagle3 status --running [PORT|FILE]` reads it.
Remove when: never (it is how the plugin reports).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
from pathlib import Path

from ...atomic import write_atomic
from ...base import ENV_STATUS_DIR, __version__, logger
from ...status import hookstatus
from .. import registry
from ..dispatch import KERNEL_HOOKS, KERNEL_OPS
from ..launch_record import our_launch

NAME = "runtime_status"
TARGET = "sglang.srt.speculative.base_spec_worker.BaseSpecWorker.init_cuda_graphs"
FLUSH_S = 2.0
# Filled by the hook modules at install (watch / on_publish); this module reaches into none of them.
# hook -> call sites ("module:attr" or "module:Class.attr") whose binding must route through our function;
# the first is the defining attribute. Sites whose module holds None (no kernel on this platform) are n/a.
CALL_SITES: dict[str, list[str]] = {}
_OURS_FN: dict = {}  # hook -> our function at its sites, where it is not the one queued with the registry
_ON_PUBLISH: list = []  # callables run in each scheduler after capture, before the table is read
_ON_TICK: list = []  # callables the lead scheduler's status writer runs every FLUSH_S seconds
_STATE = {"path": None, "written": -1, "writer": None}


def install() -> None:
    registry.register(NAME, TARGET, _after_cuda_graphs, "after")


def watch(hook: str, sites: list[str], ours=None) -> None:
    """A hook module names the call sites of `hook` (and our function there, when it is not the one it
    queued with the registry): the table then says whether each site really routes through ours."""
    CALL_SITES[hook] = list(sites)
    if ours is not None:
        _OURS_FN[hook] = ours


def on_publish(fn) -> None:
    """Run `fn()` in each scheduler of our launches after the draft CUDA graphs are captured, before the
    status table is read (a lazy binding, a row only the scheduler can confirm). Idempotent."""
    if fn not in _ON_PUBLISH:
        _ON_PUBLISH.append(fn)


def on_tick(fn) -> None:
    """Run `fn()` in the lead scheduler's status writer every FLUSH_S seconds, before it looks for new counts
    (a poll for something outside the process: serving_compiles' warm-up marker). Idempotent; fn never raises
    into the writer (its errors are logged once and it is dropped)."""
    if fn not in _ON_TICK:
        _ON_TICK.append(fn)


def _run_ticks() -> None:
    for fn in list(_ON_TICK):
        try:
            fn()
        except Exception as exc:
            _ON_TICK.remove(fn)
            logger().warning("status writer: %s dropped after %s: %s", getattr(fn, "__qualname__", fn),
                             type(exc).__name__, exc)


def _keep_fresh() -> None:
    """The lead scheduler's status writer: rewrite the file when calls were counted since the last write.
    Ends when it is no longer the registered writer (tests replace _STATE) or the file cannot be written."""
    me = threading.current_thread()
    while True:
        time.sleep(FLUSH_S)
        if _STATE.get("writer") is not me:
            return
        _run_ticks()
        n = hookstatus.calls()
        if n == _STATE["written"]:
            continue
        try:
            if write_status() is None:  # unwritable: write_status warned once; no warning every 2 s
                return
            _STATE["written"] = n
        except RuntimeError:  # a counter grew while the snapshot read it: the next tick writes
            pass


def start_writer() -> None:
    if _STATE["writer"] is None:
        _STATE["writer"] = threading.Thread(target=_keep_fresh, name="sglang-kimi-eagle3-status", daemon=True)
        _STATE["writer"].start()


# ---- call sites ----------------------------------------------------------------------------------


def _lookup(site: str):
    mod_name, attr_path = site.split(":")
    mod = sys.modules.get(mod_name)
    if mod is None:
        return None, False
    obj = mod
    *owners, attr = attr_path.split(".")
    for o in owners:
        obj = getattr(obj, o)
    raw = obj.__dict__.get(attr) if isinstance(obj, type) else None
    return (raw if raw is not None else getattr(obj, attr, None)), True


def _ours_fn(hook: str):
    if hook in _OURS_FN:
        return _OURS_FN[hook]
    pending = registry._PENDING.get(hook)
    return pending[1] if pending else None


def verify_sites(hook: str, import_modules: bool = False) -> dict:
    """{"bound": [...], "unbound": [...], "n/a": [...], "not imported": [...]} for one hook."""
    out = {"bound": [], "unbound": [], "n/a": [], "not imported": []}
    fn = _ours_fn(hook)
    for site in CALL_SITES.get(hook, []):
        if import_modules:
            try:
                importlib.import_module(site.split(":")[0])
            except Exception:
                pass
        try:
            attr, imported = _lookup(site)
        except Exception:
            out["unbound"].append(site)
            continue
        short = site.split(":")[0].rsplit(".", 1)[-1] + "." + site.split(":")[1].rsplit(".", 1)[-1]
        if not imported:
            out["not imported"].append(short)
        elif attr is None:
            out["n/a"].append(short)
        elif fn is not None and (attr is fn or registry._chain_contains(attr, fn)):
            out["bound"].append(short)
        else:
            out["unbound"].append(short)
    return out


# ---- the table -----------------------------------------------------------------------------------


def table_in_effect(device: tuple | None = None) -> str:
    """The kernel switch and the launch table `auto` reads on `device` ((name, (major, minor)); default:
    this machine's GPU) - which files, bundled or user-tuned, measured where and when."""
    from ...ops import arch, tables

    try:
        mode = arch.kernels_mode()
        table = tables.load_table(*(device or tables.current_device()))
    except Exception as exc:
        return f"unreadable: {type(exc).__name__}: {exc}"
    origin = table.get("origin") or table.get("source")
    if isinstance(origin, dict):
        origin = ", ".join(f"{k} {v}" for k, v in origin.items())
    if mode != "auto" and isinstance(origin, str):
        origin = origin.replace(tables.TUNE_HINT, "")  # the switch, not a table, decides: nothing to tune for
    return f"{arch.ENV_KERNELS}={mode}; " + (str(origin) if origin else "no launch table for this device")


def table_wins(op: str) -> list[str]:
    """Shape keys our kernel takes for `op` on this device: ["*"] under `ours`, the table's wins under `auto`."""
    from ...ops import arch, tables

    try:
        mode = arch.kernels_mode()
        if mode != "auto":
            return ["*"] if mode == "ours" else []
        return list(tables.load_table(*tables.current_device()).get("ops", {}).get(op, {}).get("wins", []))
    except Exception:
        return []


def status_rows(import_modules: bool = False) -> list[dict]:
    """One dict per hook: name, target, state, word, sites, call_sites (every site the hook registered, so a
    reader in another process, which never imports the hooks, knows how many there are), counters."""
    registry.refresh()
    counts = hookstatus.counters()
    out = []
    for row in hookstatus.rows():
        sites = verify_sites(row.name, import_modules) if row.state in ("applied", "registered") else {}
        if row.name == "draft_worker_topk" and sites.get("unbound") and row.state == "registered":
            sites = {**sites, "unbound": []}  # bound lazily at the first draft renorm_draft_probs call
        wins = table_wins(KERNEL_OPS[row.name]) if row.name in KERNEL_OPS else []
        out.append({"name": row.name, "target": row.target, "state": row.state, "detail": row.detail,
                    "status": hookstatus.status_word(row, sites.get("unbound"), kernel=row.name in KERNEL_HOOKS,
                                                     planned_wins=-1 if "*" in wins else len(wins)),
                    "sites": sites, "call_sites": list(CALL_SITES.get(row.name, [])) if sites else [],
                    "table_wins": wins, "counters": counts.get(row.name, {"ours": {}, "sglang": {}})})
    return out


def launch_path() -> dict | None:
    """How this process's planned verify ops launch (ops/_host.py), once one has built a launch plan; None before
    (and in a process that never imported the ops: nothing is imported here). Read from the process that runs them."""
    mod = sys.modules.get("sglang_kimi_eagle3.ops._host")
    if mod is None or not mod.STEPS_BUILT[0]:
        return None
    return {"fast_path": mod.fast_path_reason() or "on", "direct_launch": mod.direct_reason() or "on",
            "int_pointers": mod.int_pointers(), "fallbacks": mod.direct_fallbacks()}


def format_launch_path(lp: dict) -> str:
    if lp["fast_path"] != "on":
        return f"verify ops launch through Triton's binder: {lp['fast_path']}"
    how = "Triton's C launch directly" if lp["direct_launch"] == "on" else f"compiled.run ({lp['direct_launch']})"
    extra = "".join(f"; {k} through compiled.run: {v}" for k, v in lp["fallbacks"].items() if lp["direct_launch"] == "on")
    return f"verify ops launch through {how}, pointers as {'ints' if lp['int_pointers'] else 'tensors'}{extra}"


def snapshot(import_modules: bool = False) -> dict:
    from ...base import TESTED_SGLANG
    from ...versions import installed_sglang

    return {"plugin": __version__, "sglang": installed_sglang(), "tested_sglang": TESTED_SGLANG, "pid": os.getpid(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "table_in_effect": table_in_effect(), "launch_path": launch_path(), "hooks": status_rows(import_modules)}


def format_snapshot(snap: dict) -> str:
    lines = [f"runtime status (pid {snap['pid']}, {snap['time']}; {snap['table_in_effect']}):"]
    if snap.get("sglang") and snap.get("tested_sglang") and snap["sglang"] != snap["tested_sglang"]:
        from ...versions import version_note

        lines.append(f"  note: {version_note(snap['sglang'])}")
    if snap.get("launch_path"):
        lines.append(f"  {format_launch_path(snap['launch_path'])}")
    w = max((len(h["name"]) for h in snap["hooks"]), default=4)
    for h in snap["hooks"]:
        c = h["counters"]
        ours = sum(c["ours"].values())
        theirs = {r: sum(b.values()) for r, b in c["sglang"].items()}
        calls = f"ours {ours}" + "".join(f", SGLang {n} ({r})" for r, n in theirs.items())
        sites = h["sites"]
        # the sites the serving process registered (recorded in its file); an older file: every site it checked
        # is in exactly one of the lists
        total = len(h["call_sites"]) if h.get("call_sites") else sum(len(v) for v in sites.values())
        bound = f"bound {len(sites.get('bound', []))}/{total}" if total else ""  # a hook with no call site: nothing
        lines.append(f"  {h['name']:<{w}}  {h['status']}" + (f"  [{bound}]" if bound else "")
                     + (f"  calls: {calls}" if (ours or theirs) else ""))
    return "\n".join(lines)


# ---- the status file -----------------------------------------------------------------------------


def status_dir() -> Path:
    """$SGLANG_KIMI_EAGLE3_STATUS_DIR read as a path (spaces trimmed, `~` expanded: an unknown user is refused at
    launch by env_errors, before this runs in a server), else the user cache's run folder."""
    from ...base import user_cache_dir
    from ...validate import expand_path

    env = os.environ.get(ENV_STATUS_DIR, "").strip()
    return expand_path(env, f"${ENV_STATUS_DIR}") if env else user_cache_dir("run")


def status_path(port, dp_rank=None, tp_rank=0, pp_rank=0) -> Path:
    """port<P>[-dp<D>].json for the lead (TP 0, PP 0) of a DP replica; the other ranks of that replica add
    -pp<R> / -tp<R>, so `status --running` can compare every rank's hooks with the lead's."""
    return status_dir() / (f"port{port}" + (f"-dp{dp_rank}" if dp_rank else "") + (f"-pp{pp_rank}" if pp_rank else "")
                           + (f"-tp{tp_rank}" if tp_rank else "") + ".json")


def side_path(prefix: str) -> Path | None:
    """A file a hook keeps beside this process's status file: <prefix>-<its name> (None before it is published)."""
    path = _STATE["path"]
    return None if path is None else path.with_name(f"{prefix}-{path.name}")


def write_status(path: Path | None = None) -> Path | None:
    """Write the snapshot atomically (atomic.write_atomic) to `path` or this process's status path."""
    path = path or _STATE["path"]
    if path is None:
        return None
    try:
        write_atomic(path, json.dumps(snapshot(), indent=1), mkdir=True)
    except OSError as exc:
        logger().warning("cannot write the status file %s: %s", path, exc)
        return None
    return path


def publish_status(port, lead: bool, dp_rank=None, tp_rank=0, pp_rank=0) -> Path | None:
    """After capture: run what the hooks asked for (on_publish), then every rank starts its own status file
    (status_path); the lead rank (TP 0, PP 0) logs the table, the others one line."""
    if our_launch() is False:
        return None
    for fn in _ON_PUBLISH:
        fn()
    _STATE["path"] = status_path(port, dp_rank, 0 if lead else tp_rank, 0 if lead else pp_rank)
    _STATE["written"] = hookstatus.calls()
    path = write_status()
    start_writer()
    if lead:
        logger().info("%s\n  status file: %s (`sglang-kimi-eagle3 status --running %s`)",
                      format_snapshot(snapshot()), path, port)
    else:
        applied = sum(1 for r in hookstatus.rows() if r.state == "applied")
        logger().info("TP rank %s, PP rank %s: %d hooks applied; status file %s", tp_rank, pp_rank, applied, path)
    return path


def _after_cuda_graphs(result, worker=None, *args, **kwargs):
    try:
        from sglang.srt.runtime_context import get_parallel, get_server_args

        par = get_parallel()
        tp, pp = int(par.tp_rank), int(getattr(par, "pp_rank", 0) or 0)
        publish_status(get_server_args().port, tp == 0 and pp == 0, getattr(par, "dp_rank", None) or None, tp, pp)
    except Exception as exc:  # never break serving from a status report
        hookstatus.record(NAME, TARGET, "failed", f"{type(exc).__name__}: {exc}")
    return result
