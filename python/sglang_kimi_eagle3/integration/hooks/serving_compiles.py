"""Triton compiles after the server is ready, counted per kernel in the status table: SGLang's stalls and ours.

Why: a kernel variant first compiled while serving stalls the whole batch for a second or more. SGLang 0.5.23
warns in its log when an uncached compilation of 1 s or more happens after `mark_serving_started()`
(sglang/srt/utils/triton_load_watch.py). On the H200 on 2026-12-01 every server, plain decoding included,
compiled SGLang's extend-attention `_fwd_kernel` 3 to 4 times (1.0-2.1 s each) on its first traffic, and the
first pass at each concurrency ran at 0.1-0.4x of the second. This row puts every such compile, short ones too,
in `status --running`, next to the kernel warm-up that is meant to prevent ours.
How: in each scheduler of an EAGLE/EAGLE3 launch, after the draft CUDA graphs are captured
(runtime_status.on_publish), a listener is chained on `triton.knobs.compilation.listener`, the hook Triton calls
at the end of every `triton.compile` (the listener that was there, SGLang's own included, is called first and
kept: SGLang chains the same way, whichever of the two installs first). Counted from when SGLang marks serving
started (its `_serving_started`; where that is absent, from the capture on): per kernel name, the uncached
compiles and their seconds, and the loads from Triton's disk cache; each uncached compile is also one log line
(`serving-time Triton compile: NAME took S s`), so its time can be set against the traffic. The status writer
rewrites the file after each (rare) event.
The warm-up's own compiles: `kimi_eagle3` (traffic_warmup.py) runs after serving started, so what it compiles counts
here too (on the H200, 2026-12-02: 80 compiles, 45 s, all before the server listened). When it ends it leaves
`warmup-port<PORT>.json` in the status folder (mark_warmup_done); from then on a compile is also counted as after
the warm-up, and the row says how many of the compiles came after it (a marker older than this scheduler's start
is a previous launch's: ignored). The status writer looks for the marker every FLUSH_S seconds until it appears.
Status row `serving_compiles`:
  registered  queued; runs in each scheduler of an EAGLE/EAGLE3 launch after capture
  applied     listening; the detail says what compiled since serving started ("none so far" until then)
  skipped     this Triton has no compilation listener (triton.knobs.compilation.listener)
  failed      the listener could not be chained (serving goes on either way)
Remove when: SGLang reports serving-time compiles itself in a form `status` can read.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter

from ...base import logger
from ...status import hookstatus

NAME = "serving_compiles"
TARGET = "triton.knobs.compilation.listener"
WATCH_MODULE = "sglang.srt.utils.triton_load_watch"
_STATE: dict = {"prev": None, "knobs": None, "fn": None, "port": None, "t0": None, "warm_done": False}
COMPILES: Counter = Counter()  # kernel name -> uncached compiles since serving started
SECONDS: Counter = Counter()  # kernel name -> their seconds
LOADS: Counter = Counter()  # kernel name -> loads from Triton's disk cache since serving started
AFTER: Counter = Counter()  # kernel name -> uncached compiles after the kimi_eagle3 warm-up ended
AFTER_SECONDS: Counter = Counter()
MARK = "warmup-port{port}.json"


def mark_path(port):
    from .runtime_status import status_dir

    return status_dir() / MARK.format(port=port)


def mark_warmup_done(port, detail: str = "") -> None:
    """The HTTP server, at the end of `kimi_eagle3`: leave the marker its schedulers look for. Never raises."""
    try:
        from ...atomic import write_atomic

        write_atomic(mark_path(port), json.dumps({"pid": os.getpid(), "ended": time.time(), "detail": detail[:300]})
                     + "\n", mkdir=True)
    except Exception as exc:
        logger().warning("warm-up end marker not written (%s: %s): serving-time compiles are not split at its end",
                         type(exc).__name__, exc)


def warmup_ended() -> bool:
    """True once this launch's warm-up marker is there (one stat per call until then)."""
    if _STATE["warm_done"]:
        return True
    if _STATE["port"] is None or _STATE["t0"] is None:
        return False
    try:
        if mark_path(_STATE["port"]).stat().st_mtime >= _STATE["t0"]:
            _STATE["warm_done"] = True
            from . import adaptive_control, step_clock

            step_clock.traffic_warmup_ended()  # its readings from here on are serving traffic's
            adaptive_control.traffic_warmup_ended()  # the controllers drop theirs at their next sync
    except OSError:
        pass
    return _STATE["warm_done"]


def tick() -> None:
    """The status writer's poll (every FLUSH_S s): when the marker appears, the row says so and the file is rewritten."""
    if _STATE["warm_done"] or _STATE["knobs"] is None:
        return
    if warmup_ended():
        hookstatus.record(NAME, TARGET, "applied", summary())
        hookstatus.bump()


def install() -> None:
    from . import runtime_status

    hookstatus.record(NAME, TARGET, "registered", "counts the Triton compiles that happen after the server is ready, "
                      "per kernel, in each scheduler after CUDA-graph capture")
    runtime_status.on_publish(on_publish)
    runtime_status.on_tick(tick)


def serving_started() -> bool:
    """SGLang's own flag (set when the scheduler starts serving); True where the module has none (counted from
    the capture on)."""
    mod = sys.modules.get(WATCH_MODULE)
    return True if mod is None or not hasattr(mod, "_serving_started") else bool(mod._serving_started)


def summary() -> str:
    if not COMPILES and not LOADS:
        return "listening: no Triton compile since serving started" + (
            "; the kimi_eagle3 warm-up has ended" if _STATE["warm_done"] else "")
    top = sorted(COMPILES, key=lambda k: (-SECONDS[k], k))
    parts = [f"{k} x{COMPILES[k]} ({SECONDS[k]:.1f} s)" for k in top[:6]]
    more = f", {len(top) - 6} more kernels" if len(top) > 6 else ""
    loads = f"; {sum(LOADS.values())} loaded from Triton's disk cache ({', '.join(sorted(LOADS)[:4])})" if LOADS else ""
    n, s = sum(COMPILES.values()), sum(SECONDS.values())
    head = f"{n} uncached Triton compile{'s' if n != 1 else ''} after serving started ({s:.1f} s)"
    return head + (": " + ", ".join(parts) + more if parts else "") + loads + _after()


def _after() -> str:
    if not _STATE["warm_done"]:
        return "; the kimi_eagle3 warm-up has not ended (or does not run in this launch)"
    m, s = sum(AFTER.values()), sum(AFTER_SECONDS.values())
    top = sorted(AFTER, key=lambda k: (-AFTER_SECONDS[k], k))
    which = ": " + ", ".join(f"{k} x{AFTER[k]} ({AFTER_SECONDS[k]:.1f} s)" for k in top[:6]) if top else ""
    return f"; after the kimi_eagle3 warm-up ended: {m} ({s:.1f} s){which}"


def variant(src) -> str:
    """What made this compile a new variant, from Triton's specialization (never raises): the pointer / int arguments
    Triton did NOT find divisible by 16 (`not16`: an unaligned pointer, a count that is not a multiple of 16), those it
    did (`div16`), and the constexprs with the ints it folded (== 1). Two compiles of one kernel differ here. Tuple
    arguments are named per element (`sources[1]`)."""
    try:
        sig = dict(getattr(src, "signature", None) or {})
        names = list(sig)

        def label(path):
            return names[path[0]] + "".join(f"[{i}]" for i in path[1:])

        leaves = []  # the path of every non-constexpr scalar / pointer argument, tuple elements one by one

        def walk(path, t):
            if isinstance(t, (tuple, list)):
                for i, e in enumerate(t):
                    walk((*path, i), e)
            elif str(t) != "constexpr" and re.match(r"^(\*|[iu]\d)", str(t)):
                leaves.append(path)

        for i, n in enumerate(names):
            walk((i,), sig[n])
        div = {tuple(k) for k, v in (getattr(src, "attrs", None) or {}).items() if "tt.divisibility" in str(v)}
        const = {tuple(k): v for k, v in (getattr(src, "constants", None) or {}).items()}
        not16 = [label(p) for p in leaves if p not in div and p not in const]
        short = ",".join(f"{label(k)}={v if isinstance(v, (bool, int, float)) else str(v)[:24]}"
                         for k, v in const.items())
        return (f"not16 {','.join(not16) or '-'}; div16 {','.join(label(p) for p in sorted(div)) or '-'}; "
                f"const {short or '-'}")[:400]
    except Exception as exc:  # a log detail: never in the way of a compile
        return f"variant unknown ({type(exc).__name__})"


def listener(*, src, metadata, metadata_group, times, cache_hit, **kw) -> None:
    """triton.knobs.compilation.listener: the previous listener first (its errors are its own), then ours."""
    prev = _STATE["prev"]
    try:
        if prev is not None:
            prev(src=src, metadata=metadata, metadata_group=metadata_group, times=times, cache_hit=cache_hit, **kw)
    finally:
        try:
            if serving_started():
                name = str(getattr(src, "name", None) or "?")
                if cache_hit:
                    LOADS[name] += 1
                else:
                    secs = max(0.0, float(getattr(times, "total", 0) or 0) / 1e6)
                    from . import adaptive_control, step_clock  # the stall is no decode step: neither clock reads it

                    adaptive_control.interval_broken()
                    step_clock.broken()
                    COMPILES[name] += 1
                    SECONDS[name] += secs
                    if warmup_ended():
                        AFTER[name] += 1
                        AFTER_SECONDS[name] += secs
                    # one line per compile, short ones too (SGLang logs only >= 1 s): its time in the server log
                    # places it against the traffic (on the H200, 2026-12-01, 70 of them came after serving started,
                    # 30 fused_moe_kernel variants of ~0.5 s each among them, none in SGLang's log)
                    logger().info("serving-time Triton compile: %s took %.2f s (uncached) [%s]", name, secs,
                                  variant(src))
                hookstatus.record(NAME, TARGET, "applied", summary())
                hookstatus.bump()  # the status writer rewrites the file
        except Exception as exc:  # never break a compile for a count
            hookstatus.record(NAME, TARGET, "failed", f"{type(exc).__name__}: {exc}"[:300])


def start(port=None) -> str | None:
    """Chain the listener (idempotent); None when done, else why not (no such Triton hook). port: this launch's
    (its warm-up marker's name); None: compiles are not split at the warm-up's end."""
    if _STATE["t0"] is None:
        _STATE.update(port=port, t0=time.time())
    try:
        import triton.knobs as knobs
    except ImportError:
        return "triton has no knobs module"
    comp = getattr(knobs, "compilation", None)
    if comp is None or not hasattr(comp, "listener"):
        return "this Triton has no compilation listener (triton.knobs.compilation.listener)"
    if _STATE["knobs"] is comp:  # chained already (maybe wrapped since by SGLang's: chaining again would count twice)
        return None
    _STATE.update(prev=comp.listener, knobs=comp, fn=listener)
    comp.listener = listener
    return None


def stop() -> None:
    """Tests: put the previous listener back where ours is still the one installed; forget the counts."""
    comp = _STATE["knobs"]
    if comp is not None and comp.listener is listener:
        comp.listener = _STATE["prev"]
    _STATE.update(prev=None, knobs=None, fn=None, port=None, t0=None, warm_done=False)
    for c in (COMPILES, SECONDS, LOADS, AFTER, AFTER_SECONDS):
        c.clear()


def on_publish() -> None:
    """runtime_status binder (each scheduler of our launches, after capture)."""
    try:
        port = None
        try:
            from sglang.srt.runtime_context import get_server_args

            port = get_server_args().port
        except Exception:  # no marker to look for: the row then does not split at the warm-up's end
            pass
        why = start(port)
        if why:
            hookstatus.record(NAME, TARGET, "skipped", why)
            return
        hookstatus.record(NAME, TARGET, "applied", summary())
    except Exception as exc:  # never break serving for a count
        hookstatus.record(NAME, TARGET, "failed", f"{type(exc).__name__}: {exc}"[:300])
        logger().warning("serving-time Triton compiles not counted: %s: %s", type(exc).__name__, exc)
