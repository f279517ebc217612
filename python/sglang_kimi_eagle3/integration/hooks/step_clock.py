"""Hook: where a decode step's time goes on the host, read while serving with no profiler: is a step host-bound?

Upstream targets (sglang 0.5.23, through HookRegistry):
  sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.forward_batch_generation   AROUND: one step's launch
  sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.verify                     AROUND: its verify part
  sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_decode AROUND: its draft-extend part
  sglang.srt.managers.scheduler_components.batch_result_processor.SchedulerBatchResultProcessor
    .process_batch_result_decode                                AROUND: the wait on the GPU, then the result's processing
  sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.on_verify_complete_cpu   AROUND: the adaptive controller in it
  sglang.srt.managers.schedule_batch.ScheduleBatch.prepare_for_decode             AROUND: the next batch's preparation
  sglang.srt.model_executor.runner_backend.full_cuda_graph_backend.FullCudaGraphBackend.replay
                                                                                  AROUND: the CUDA-graph launches
  sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_prefill AROUND: a prefill's draft part
Why: on the H200 (2026-12-04, the deployment-shaped pair, 1024-token contexts) SGLang's steps-0 off-state, its verify
  attention already a decode's, took 10.0 / 10.0 / 10.3 ms a step at 2 / 4 / 8 requests where plain decoding took
  8.7 / 9.1 / 10.0: flat where the GPU's work grows with the batch, as a step that waits on the host would be. A
  profiler cannot tell (it slows the host it measures: under it that off-state's GPU idled 80 ms a step at c 128).
How: the scheduler thread launches a step (forward_batch_generation: CUDA runs it asynchronously), then, under the
  overlap scheduler, processes the previous step's result, which first waits for the GPU (`result.copy_done`). Per
  interval between two decode launches (one step in steady state) this reads: its wall time; the launch's host time,
  with its verify and draft-extend parts and the host time of its CUDA-graph launches (`cudaGraphLaunch` of a graph
  of thousands of kernels can take milliseconds of host time: the target verify's, the draft extend's, or plain
  decoding's one decode graph); the time blocked on the GPU, by waiting on `result.copy_done` itself just
  before SGLang does (SGLang's own wait then returns at once: the same order, nothing else changed); and the rest of
  the scheduler's loop (wall less launch less wait: scheduling, the result's bookkeeping, output streaming), with
  the previous step's result processing apart (process_batch_result_decode after its wait; for speculative decoding
  it feeds the adaptive controller, `on_verify_complete_cpu`, also apart) and
  the next batch's preparation apart (`prepare_for_decode`: for speculative decoding `eagle_prepare_for_decode`, which
  copies two pageable CPU tensors to the GPU with non_blocking=True on a stream chained to the step in flight; if
  CUDA stages those through a stream sync, the host blocks there, not in `copy_done`, and this part shows it). A step
  that never waits on the GPU is host-bound: its wall time is host time, and a cheaper GPU step would not shorten it.
  An interval holding a prefill launch or an idle gap (over 5 s) is not read. Per runtime state (the steps the step
  ran at), the last 2048 steps are kept; the status writer (every 2 s, off the scheduler thread) puts their medians in
  the row, e.g. `steps 0: 5120 steps read; medians per step: wall 10.31 ms, launch 1.92 (verify 1.10, draft extend
  0.41; graph launches 0.30), waiting on the GPU 0.05, rest of the loop 8.30 (preparing the next batch 7.90); waited
  over 0.2 ms in 3 % of steps: host-bound, blocked preparing the next batch`, then per batch-size bucket (1, 2, 3-4,
  5-8, ...) with 16 readings the median wall and GPU wait: a state's steps at 2 and at 8 requests are different work,
  and only the same bucket of plain decoding's row (benchmark/serving/plain_clock) is their comparison. When the
  traffic warm-up's end marker appears (serving_compiles), the readings before it are dropped and the row says "since
  the traffic warm-up ended": warm-up batches (prompts of up to 3600 tokens, sizes 1-64) are no serving traffic.
  Each read costs the scheduler a few clock reads and wrapper calls (about 6 µs of a 5-50 ms step on a 2-core CPU box).
  The GPU's side. In a GPU-bound step (it waits on the GPU) the wall time is the GPU's time per step, and more host
  time anywhere in the loop only shortens the wait: on an H100 on 2026-12-05 the off-state's host parts were 2.3 ms
  longer than plain decoding's (launch 2.67 against 0.90 ms, rest of the loop 1.72 against 1.17), its GPU wait 1.9 ms
  shorter, and its step 0.47 ms longer (1.044x), both GPU-bound in 97 % of steps: GPU work, which no host split
  places. So one decode step in
  GPU_EVERY also records CUDA timing events on the launch's stream (at the launch's start and end, around the verify,
  and at the next decode launch's start: five event records and four reads on the timed step; on an H100, 2026-12-06,
  benchmark/host/event_cost.py: a record on a busy stream 7.4 µs of host, the GPU timing 11.7 µs per decode step on
  average, the whole clock 33 µs per step against 21 without it) and, once the GPU has passed them (read on the
  scheduler thread after the next result's wait), keeps per state the GPU time of the step (launch to next launch),
  of the launch's work (with, for speculative decoding, its part before the verify, the verify, and after it: the
  draft extend), and between launches (the scheduler's own GPU work: result copies, the next batch's inputs, plain
  decoding's delayed sampling). These are spans on the GPU's clock: in a GPU-bound step they are GPU work; in a
  host-bound one they also hold the GPU's idle waits for the host.
  Prefill batches. On an H100 (2026-12-06, the deployment-shaped pair, chat traffic) the deferred off-state's decode
  step was within 1-2.5 % of plain decoding's GPU time while the server ran 5-6 % below plain end to end: the rest is
  outside the decode steps. So every prefill launch is timed too (CUDA events at its start and end on the launch's
  stream, and around the draft's prefill inside it, `_draft_extend_for_prefill`), read after a later decode result's
  wait, and shown per size bucket of new tokens (1-512, 513-2048, 2049-8192, 8193+; MIN_PREFILL batches each) as the
  median GPU ms per batch, the launch's and the draft's part of it, the median new tokens and the launch's host time
  (about its GPU span where the launch is host-bound, the GPU waiting for the host), of that host time the scheduler
  thread's own CPU time (`time.thread_time`: the rest it was off the CPU, waiting on the GIL or a sleeping wait, or
  preempted; a CUDA synchronization spin-waits by default and counts as CPU time) and the draft's prefill's host
  time; then the CUDA caching allocator's calls inside those launches (cudaMalloc, cudaFree, retries, syncs to free:
  alloc_counts), and Python's garbage collections inside them (gc.callbacks: a collection runs inside whatever
  allocates past the collector's thresholds, holding the GIL, so inside a host-bound launch it is launch time; the
  process's collections, full ones and longest pause beside). On an H100 (2026-12-07, run 41) both speculative
  servers' prefill launches took 20-34 ms more host time than plain decoding's (203 against 175 ms), the draft's
  prefill 3.4 ms of GPU of it, where runs 37 and 39 read them equal; these say where the rest goes: `prefill: 412
  batches timed on the GPU; median GPU ms per batch, ... by new tokens: 513-2048: 43.10 / 2.05 (388, 1024; host
  12.40, on the CPU 11.90, the draft's host 2.10); the CUDA allocator inside 412 of these launches: cudaMalloc 3 (in 2
  launches), cudaFree 0, retries 0, syncs to free 0`. Set against plain decoding's
  (benchmark/serving/plain_clock times plain's prefills the same way) it says what speculation's prefill costs. Its
  first reading (an H100, 2026-12-06): the chat workload, then replayed as written, made every prefill a prefix-cache
  hit of 1-2 new tokens, and such a batch took 159 ms for plain decoding and 173 for ours (the draft's prefill 2.9 of
  it): a prefill launch of the 84-layer pair costs its launches, whatever its tokens.
  The ledger. Medians per step say what a step costs, not where a round's seconds went: on an H200 (2026-12-07, run
  43, the deployment-shaped pair, chat traffic at c 8) ours took 20.7 s for a round that plain decoding served in
  19.6 s, the same requests and tokens, while ours' median decode step was 2.8 % above plain's and its median prefill
  below it. So every launch (decode, prefill, anything else) also opens an interval that the next launch closes, and
  its wall time goes to a cumulative ledger under the kind of the launch that opened it (`steps N`, plain decoding's
  `decode`, `prefill`, `other`; per kind seconds, intervals, and their requests: the decode batches' sizes summed, the
  prefills' new tokens): the scheduler loop's whole busy time, the host work after a launch included (an interval over
  MAX_WALL_S is idle, not counted). The status writer keeps a timestamped copy whenever it changed (`time.time()`, at
  most every FLUSH_S s) in `ledger-<status file name>` beside the status file (plain decoding's:
  benchmark/serving/plain_clock); benchmark/serving/round_ledger.py subtracts the copies around each measured round
  (every server idles between its rounds) and sets a round's seconds by kind against plain decoding's on the same work.
Scope: our launches only (EAGLE/EAGLE3 with a draft); SGLANG_KIMI_EAGLE3_STEP_CLOCK=off registers nothing.
Status row `step_clock`: registered / applied (the medians once 16 steps of a state, or 8 prefills of a size, were read) / skipped (off) /
  failed (a target missing).
Remove when: SGLang reports the host and GPU-wait time of its decode steps itself.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections import deque
from statistics import median
from time import (
    perf_counter as _gc_now,  # the collector's clock (the real one, whatever replaces `time` in tests)
    time as _wall_now,  # the ledger copies' clock: the one e2e.py stamps its rounds with
)

from ...base import ENV_STEP_CLOCK, env_choice, logger
from ...status import hookstatus
from .. import registry
from ..launch_record import our_launch

NAME = "step_clock"
WORKER = "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2"
TARGETS = {  # status row -> target
    NAME: f"{WORKER}.forward_batch_generation",
    f"{NAME}_verify": f"{WORKER}.verify",
    f"{NAME}_draft_extend": "sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_decode",
    f"{NAME}_wait": ("sglang.srt.managers.scheduler_components.batch_result_processor.SchedulerBatchResultProcessor"
                     ".process_batch_result_decode"),
    f"{NAME}_control": f"{WORKER}.on_verify_complete_cpu",
    f"{NAME}_prepare": "sglang.srt.managers.schedule_batch.ScheduleBatch.prepare_for_decode",
    f"{NAME}_replay": "sglang.srt.model_executor.runner_backend.full_cuda_graph_backend.FullCudaGraphBackend.replay",
    f"{NAME}_draft_prefill": "sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_prefill",
}
KEEP = 2048  # steps kept per runtime state
PLAIN = -1  # the key of a plain (non-speculative) worker's steps: benchmark/serving/plain_clock times plain servers
MIN_READ = 16  # steps of a state before its medians are shown
MAX_WALL_S = 5.0  # a longer interval is idle time, not a step
WAITED_S = 2e-4  # a step "waited on the GPU" when blocked longer than this
GPU_EVERY = 4  # one decode step in GPU_EVERY is timed on the GPU too (CUDA events)
GPU_PENDING_MAX = 64  # timed steps waiting for the GPU to pass their events (more: the oldest are dropped)

# the step being launched / the open interval: start of the last decode launch (None: nothing open, or broken),
# its launch, verify and draft-extend host seconds, its steps, the GPU wait and the next batch's preparation since
_OPEN: dict = {"t0": None, "launch": 0.0, "verify": 0.0, "extend": 0.0, "steps": None, "wait": 0.0, "prepare": 0.0,
               "replay": 0.0, "results": 0.0, "control": 0.0, "bs": 0}
# one reading, seconds each (+ its bs): results = the previous step's processing after its wait, control = the
# adaptive controller inside it
FIELDS = ("wall", "launch", "verify", "extend", "wait", "prepare", "replay", "results", "control")
STEPS: dict[int, deque] = {}  # steps -> deque of readings (FIELDS, then the batch size; 0: not known)
_READ: dict[int, int] = {}  # steps -> steps read in this process (all, not only the kept ones)
_SHOWN: list = [None]  # the detail last put in the row
_ALL = [False]  # time every launch's decode steps, not only ours: enable_everywhere() (benchmarks, never the plugin)
# the traffic warm-up's end: serving_compiles sees its marker (traffic_warmup_ended) and asks the scheduler thread,
# which appends the readings, to drop what it read before (warm-up traffic is no serving traffic); "since" labels the row
_WARM = {"ended": False, "reset": False}
# GPU timing (CUDA events): per state, readings in ms (step, launch's work, before the verify, the verify, between
# launches, bs; None where a part did not run, e.g. plain decoding has no verify); the sample being launched ("cur":
# its events by name, waiting for the next launch's start), those waiting for the GPU ("pending"), spare events
GPU_FIELDS = ("step", "launch", "before", "verify", "between")
GPU: dict[int, deque] = {}
_GPU = {"n": 0, "open": None, "cur": None, "pending": deque(), "free": [], "on": None, "off": None}
# prefill batches (every one, on the GPU's clock): per batch (ms of the launch's GPU work, ms of the draft's prefill in
# it or None, the batch's new tokens, the launch's host ms, of it the scheduler thread's CPU ms, the draft's prefill's
# host ms or None, the CUDA allocator's calls in the launch: alloc_counts' deltas or None); the batch being launched
# and those waiting for the GPU
PREFILL: deque = deque(maxlen=KEEP)
_PF = {"open": None, "pending": deque()}
MIN_PREFILL = 8  # prefill batches of a size bucket before its median is shown
# Python's garbage collector in this process (gc.callbacks, turned on at the first launch this clock reads): seconds in
# collections, collections, full ones (generation 2), the longest, the open collection's start
_GCK = {"s": 0.0, "n": 0, "full": 0, "max": 0.0, "t": None, "on": False}
# the ledger: kind -> [seconds, intervals, requests] since the process started (the kind of the launch that opened the
# interval: "steps N", "decode" for plain decoding, "prefill", "other"; requests: a decode batch's size, a prefill's
# new tokens); a decode launch's kind carries its tags in brackets where it had any, read apart from the others: "after
# a prefill" (the launch right after a prefill launch), and what a hook inside it named (tag_launch: "flush", the
# deferred draft extend's rows extended in it); the open interval (its start, its kind once known, its requests, its
# tags); timestamped copies for the writer
LEDGER: dict[str, list] = {}
_LED = {"t": None, "kind": None, "size": 0, "tags": []}
LEDGER_KEEP = 1024  # copies kept (one per FLUSH_S while serving: 34 minutes of traffic)
LEDGER_COPIES: deque = deque(maxlen=LEDGER_KEEP)
_LEDGER_TEXT: deque = deque(maxlen=LEDGER_KEEP)  # each copy as JSON, made once: the file is their join (no re-dump)
_LEDGER_LAST = [None]
_LEDGER_WARNED = [False]  # an unwritable ledger file is said once in the log


def install() -> None:
    if env_choice(ENV_STEP_CLOCK) == "off":
        for name, target in TARGETS.items():
            hookstatus.record(name, target, "skipped", f"{ENV_STEP_CLOCK}=off: decode steps not timed")
        return
    from . import runtime_status

    registry.register(NAME, TARGETS[NAME], _forward, "around")
    registry.register(f"{NAME}_verify", TARGETS[f"{NAME}_verify"], _part("verify"), "around")
    # shared with deferred_extend (one AROUND on the target); outermost: the extend's host time includes the deferral's
    registry.register(f"{NAME}_draft_extend", TARGETS[f"{NAME}_draft_extend"], _part("extend"), "around", shared=0)
    registry.register(f"{NAME}_wait", TARGETS[f"{NAME}_wait"], _results, "around")
    registry.register(f"{NAME}_control", TARGETS[f"{NAME}_control"], _part("control"), "around")
    registry.register(f"{NAME}_prepare", TARGETS[f"{NAME}_prepare"], _prepare, "around")
    registry.register(f"{NAME}_replay", TARGETS[f"{NAME}_replay"], _replay, "around")
    registry.register(f"{NAME}_draft_prefill", TARGETS[f"{NAME}_draft_prefill"], _draft_prefill, "around")
    runtime_status.on_tick(tick)


def _is_decode(batch) -> bool:
    mode = getattr(batch, "forward_mode", None)
    if mode is None or getattr(batch, "is_extend_in_batch", False):
        return False
    return bool(mode.is_decode()) if hasattr(mode, "is_decode") else False


def _is_prefill(batch) -> bool:
    mode = getattr(batch, "forward_mode", None)
    return bool(mode.is_extend()) if hasattr(mode, "is_extend") else False


def _forward(original, worker, batch, *args, **kwargs):
    """AROUND EAGLEWorkerV2.forward_batch_generation: a decode launch closes the open interval (one step) and opens
    the next; anything else (a prefill, an idle batch) breaks it. A prefill launch is timed on the GPU (_prefill)."""
    if not _is_decode(batch) or (not _ALL[0] and our_launch() is False):
        _OPEN["t0"] = None
        if _ALL[0] or our_launch() is not False:
            prefill = _is_prefill(batch)
            _ledger_open(time.perf_counter(), "prefill" if prefill else "other", _new_tokens(batch) if prefill else 0)
            if prefill:
                return _prefill(original, worker, batch, *args, **kwargs)
        return original(worker, batch, *args, **kwargs)
    if not _GCK["on"]:
        gc_clock_on()
    t0 = time.perf_counter()
    bs = _batch_size(batch)
    after_prefill = _LED["kind"] == "prefill"
    _ledger_open(t0, None, bs)  # its kind once the launch chose its steps
    closed = _close(t0)  # the interval just closed was read: a timed step in it gets its end
    _OPEN.update(t0=t0, verify=0.0, extend=0.0, wait=0.0, launch=0.0, steps=None, prepare=0.0, replay=0.0,
                 results=0.0, control=0.0, bs=bs)
    sample = _gpu_open(batch, closed)
    out = original(worker, batch, *args, **kwargs)
    _OPEN["launch"] = time.perf_counter() - t0
    # after activate_step_by_batch: the state it ran (a plain worker has none: PLAIN)
    _OPEN["steps"] = getattr(worker, "speculative_num_steps", PLAIN)
    if _LED["t"] == t0:
        tags = (["after a prefill"] if after_prefill else []) + _LED["tags"]
        _LED["kind"] = ("decode" if _OPEN["steps"] == PLAIN else f"steps {_OPEN['steps']}") + (
            f" ({', '.join(tags)})" if tags else "")
    if sample is not None and _GPU["on"]:  # (a failed record turned the timing off meanwhile)
        _gpu_record(sample, "L1")
        sample["steps"], sample["bs"] = _OPEN["steps"], _OPEN["bs"]
        _GPU["open"], _GPU["cur"] = None, sample
    return out


def _new_tokens(batch) -> int:
    """A prefill batch's new (uncached) tokens: SGLang's `extend_num_tokens`; 0 where the batch does not say."""
    try:
        return int(getattr(batch, "extend_num_tokens", None) or 0)
    except (TypeError, ValueError):
        return 0


def _prefill(original, worker, batch, *args, **kwargs):
    """A prefill launch between two CUDA events on the launch's stream (the draft's prefill inside it between two more,
    _draft_prefill): its GPU work, read after a later result's wait (_gpu_read)."""
    tokens = _new_tokens(batch)
    if tokens <= 0 or not _gpu_on(batch):
        return original(worker, batch, *args, **kwargs)
    if not _GCK["on"]:
        gc_clock_on()
    _gpu_drop(_PF["open"])  # a launch that raised left its sample open
    sample = {"ev": {}, "tokens": tokens}
    _gpu_record(sample, "P0")
    _PF["open"] = sample
    a0 = alloc_counts()
    g0 = (_GCK["s"], _GCK["n"], _GCK["full"])
    c0 = time.thread_time()
    t0 = time.perf_counter()
    try:
        out = original(worker, batch, *args, **kwargs)
    except BaseException:
        _PF["open"] = None
        _gpu_drop(sample)
        raise
    sample["host"] = (time.perf_counter() - t0) * 1e3  # the launch's host ms: beside its GPU span, host- or GPU-bound
    sample["cpu"] = (time.thread_time() - c0) * 1e3  # of it, this thread on a CPU (the rest: the GIL, a sleep, preempted)
    sample["gc"] = ((_GCK["s"] - g0[0]) * 1e3, _GCK["n"] - g0[1], _GCK["full"] - g0[2])  # collections inside it
    a1 = alloc_counts()
    sample["alloc"] = None if a0 is None or a1 is None else tuple(b - a for a, b in zip(a0, a1))
    _PF["open"] = None
    if _GPU["on"]:
        _gpu_record(sample, "P1")
    if _GPU["on"] and "P0" in sample["ev"] and "P1" in sample["ev"]:
        _PF["pending"].append(sample)
        while len(_PF["pending"]) > GPU_PENDING_MAX:
            _gpu_drop(_PF["pending"].popleft())
    else:
        _gpu_drop(sample)
    return out


ALLOC_KEYS = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams")


def alloc_counts() -> tuple | None:
    """This process's CUDA caching allocator on the current device: its cudaMalloc calls, cudaFree calls, retries
    (a cudaMalloc that failed, then every cached block freed and tried again) and syncs of every stream to free blocks,
    so far; None where the launches are not on a CUDA device. A cudaMalloc or cudaFree inside a host-bound launch is
    host time (cudaFree synchronizes the device); one read is a C++ dict of the allocator's counters (tens of µs)."""
    if not _GPU["on"]:
        return None
    try:
        import torch

        stats = torch.cuda.memory_stats_as_nested_dict()
        return tuple(int(stats.get(k, 0)) for k in ALLOC_KEYS)
    except Exception:  # noqa: BLE001 - a measurement only
        return None


def _draft_prefill(original, *args, **kwargs):
    """AROUND EagleDraftWorker._draft_extend_for_prefill: inside a timed prefill launch, its GPU span."""
    sample = _PF["open"]
    if sample is None:
        return original(*args, **kwargs)
    _gpu_record(sample, "D0")
    t0 = time.perf_counter()
    try:
        return original(*args, **kwargs)
    finally:
        sample["dhost"] = (time.perf_counter() - t0) * 1e3
        if _PF["open"] is sample and _GPU["on"]:
            _gpu_record(sample, "D1")


# ---- the ledger: the scheduler loop's busy time by the kind of launch that began each interval ------------------------


def _ledger_open(now: float, kind: str | None, size: int) -> None:
    """A launch at `now`: the open interval (since the last launch) goes to the ledger under its kind, unless it was
    idle (over MAX_WALL_S) or its launch raised (kind never set); then this launch's interval opens."""
    t, k = _LED["t"], _LED["kind"]
    if t is not None and k is not None and 0 < now - t <= MAX_WALL_S:
        e = LEDGER.get(k)
        if e is None:
            e = LEDGER[k] = [0.0, 0, 0]
        e[0] += now - t
        e[1] += 1
        e[2] += _LED["size"]
    _LED["t"], _LED["kind"], _LED["size"], _LED["tags"] = now, kind, size, []


def tag_launch(tag: str) -> None:
    """Called by a hook inside the decode launch now running (e.g. deferred_extend's flush): that launch's interval
    goes to the ledger under its kind with this tag, so its seconds are read apart. Outside a decode launch (a prefill,
    the clock off): nothing."""
    if _LED["t"] is not None and _LED["kind"] is None and tag not in _LED["tags"]:
        _LED["tags"].append(tag)


def ledger_copy(now: float | None = None) -> bool:
    """The writer's poll: keep a timestamped copy of the ledger when it changed since the last one (True then)."""
    copy = {k: [round(v[0], 6), v[1], v[2]] for k, v in list(LEDGER.items())}
    if not copy or copy == _LEDGER_LAST[0]:
        return False
    _LEDGER_LAST[0] = copy
    entry = [round(_wall_now() if now is None else now, 3), copy]
    LEDGER_COPIES.append(entry)
    _LEDGER_TEXT.append(json.dumps(entry))
    return True


def ledger_json() -> str:
    """The copies kept, as round_ledger.py reads them (each copy's JSON made when it was taken: a tick joins them)."""
    if len(_LEDGER_TEXT) != len(LEDGER_COPIES):  # copies put there by hand (tests): dump them all
        _LEDGER_TEXT.clear()
        _LEDGER_TEXT.extend(json.dumps(c) for c in LEDGER_COPIES)
    head = json.dumps({"pid": os.getpid(), "clock": "time.time()", "idle_over_s": MAX_WALL_S,
                       "kinds": "seconds, intervals, requests (decode: batch sizes summed; prefill: new tokens)"})
    return head[:-1] + ', "copies": [' + ", ".join(_LEDGER_TEXT) + "]}"


def _ledger_write() -> None:
    """Beside the status file (the lead scheduler's writer): ledger-<its name>, atomically; nothing without one."""
    from ...atomic import write_atomic
    from . import runtime_status

    path = runtime_status.side_path("ledger")
    if path is None:
        return
    try:
        write_atomic(path, ledger_json() + "\n", mkdir=True)
    except OSError as exc:  # said once; the status row and its file go on
        if not _LEDGER_WARNED[0]:
            _LEDGER_WARNED[0] = True
            logger().warning("step clock: cannot write the ledger %s: %s", path, exc)


# ---- the GPU's side: CUDA timing events on one decode step in GPU_EVERY ---------------------------------------------


def _new_event():
    """A CUDA timing event (tests on a CPU-only box put a stand-in here)."""
    import torch

    return torch.cuda.Event(enable_timing=True)


def _gpu_on(batch) -> bool:
    """GPU timing runs where the batch's lengths live on a CUDA device (decided once per process)."""
    if _GPU["on"] is None:
        dev = getattr(getattr(batch, "seq_lens", None), "device", None)
        _GPU["on"] = getattr(dev, "type", None) == "cuda"
    return _GPU["on"]


def _gpu_record(sample: dict, name: str) -> None:
    try:
        ev = _GPU["free"].pop() if _GPU["free"] else _new_event()
        ev.record()  # on the current stream: the launch's (SGLang's forward stream)
    except Exception as e:  # noqa: BLE001 - a measurement never breaks the step it measures
        _gpu_off(e)
        return
    sample["ev"][name] = ev


def _gpu_off(error: Exception) -> None:
    """The GPU timing failed (an event could not be recorded or read): off for this process, said in the row."""
    _GPU["on"] = False
    _GPU["off"] = _GPU["off"] or f"{type(error).__name__}: {error}"[:200]  # the first failure says why
    _gpu_forget()


def _gpu_drop(sample) -> None:
    if sample is not None:
        _GPU["free"].extend(sample["ev"].values())


def _gpu_open(batch, closed: bool):
    """At a decode launch's start (its interval just opened): the previous timed step, if the interval it opened was
    read (`closed`), gets its end here and waits for the GPU; every GPU_EVERY-th launch opens a timed step."""
    _gpu_drop(_GPU["open"])  # a launch that raised left its sample open
    cur, _GPU["cur"], _GPU["open"] = _GPU["cur"], None, None
    if cur is not None:
        if closed and _GPU["on"]:
            _gpu_record(cur, "N0")
        if "N0" in cur["ev"] and _GPU["on"]:
            _GPU["pending"].append(cur)
            while len(_GPU["pending"]) > GPU_PENDING_MAX:
                _gpu_drop(_GPU["pending"].popleft())
        else:
            _gpu_drop(cur)
    _GPU["n"] += 1
    if _GPU["n"] % GPU_EVERY or not _gpu_on(batch):
        return None
    sample = {"ev": {}, "steps": None, "bs": 0}
    _gpu_record(sample, "L0")
    _GPU["open"] = sample
    return sample


def _gpu_read() -> None:
    """The timed steps the GPU has passed (in launch order), into GPU[steps]; on the scheduler thread, after a
    result's wait."""
    pending = _GPU["pending"]
    try:
        while pending and pending[0]["ev"]["N0"].query():
            sample = pending.popleft()
            ev = sample["ev"]

            def ms(a, b):
                return ev[a].elapsed_time(ev[b]) if a in ev and b in ev else None

            step, launch = ms("L0", "N0"), ms("L0", "L1")
            GPU.setdefault(sample["steps"], deque(maxlen=KEEP)).append(
                (step, launch, ms("L0", "V0"), ms("V0", "V1"), step - launch, sample["bs"]))
            _gpu_drop(sample)
        pf = _PF["pending"]
        while pf and pf[0]["ev"]["P1"].query():
            sample = pf.popleft()
            ev = sample["ev"]
            draft = ev["D0"].elapsed_time(ev["D1"]) if "D0" in ev and "D1" in ev else None
            PREFILL.append((ev["P0"].elapsed_time(ev["P1"]), draft, sample["tokens"], sample.get("host"),
                            sample.get("cpu"), sample.get("dhost"), sample.get("alloc"), sample.get("gc")))
            _gpu_drop(sample)
    except Exception as e:  # noqa: BLE001 - a measurement never breaks the result processing it sits in
        _gpu_off(e)


def _batch_size(batch) -> int:
    """The decode batch's requests (SGLang's own measure, `seq_lens.shape[0]`); 0 where the batch does not say."""
    lens = getattr(batch, "seq_lens", None)
    try:
        return int(lens.shape[0]) if lens is not None else int(batch.batch_size())
    except (AttributeError, TypeError, ValueError, IndexError):
        return 0


def bucket(bs: int) -> str | None:
    """The batch-size bucket a reading is shown under: 1, 2, 3-4, 5-8, ... (None: not known)."""
    if bs <= 0:
        return None
    if bs <= 2:
        return str(bs)
    hi = 1 << (bs - 1).bit_length()
    return f"{hi // 2 + 1}-{hi}"


def _results(original, *args, **kwargs):
    """AROUND process_batch_result_decode(self, batch, result): wait for the result's copy ourselves, timed (SGLang's
    own wait then returns at once), then time SGLang's processing of the result."""
    if _OPEN["t0"] is None:
        return original(*args, **kwargs)
    result = kwargs.get("result", args[2] if len(args) > 2 else None)
    done = getattr(result, "copy_done", None)
    t = time.perf_counter()
    if done is not None:
        done.synchronize()
    t1 = time.perf_counter()
    _OPEN["wait"] += t1 - t
    if _GPU["pending"] or _PF["pending"]:
        _gpu_read()
        t1 = time.perf_counter()
    try:
        return original(*args, **kwargs)
    finally:
        if _OPEN["t0"] is not None:
            _OPEN["results"] += time.perf_counter() - t1


def _part(key: str):
    """An AROUND wrapper that adds its call's time to the open interval's `key` (our launch's decode steps, or every
    launch's for benchmarks: a verify and a draft extend run inside the launch that opened it); outside an open
    interval (a prefill, a warm-up) it only calls through."""
    def wrapper(original, *args, **kwargs):
        if _OPEN["t0"] is None:
            return original(*args, **kwargs)
        sample = _GPU["open"] if key == "verify" else None  # a timed step's verify: its GPU time too
        if sample is not None:
            _gpu_record(sample, "V0")
        t = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _OPEN[key] += time.perf_counter() - t
            if sample is not None:
                _gpu_record(sample, "V1")
    wrapper.__name__ = f"_{key}"
    return wrapper


_prepare = _part("prepare")  # ScheduleBatch.prepare_for_decode: the next batch's preparation
_replay = _part("replay")  # FullCudaGraphBackend.replay: every CUDA-graph launch of a decode step


def _close(now: float) -> bool:
    """Read the open interval (one step) into STEPS; False where it is not read."""
    t0, steps = _OPEN["t0"], _OPEN["steps"]
    if t0 is None or steps is None:
        return False
    if _WARM["reset"]:  # the warm-up ended: its readings go (here, on the thread that appends them), and this one,
        _WARM["reset"] = False  # which began before the marker
        STEPS.clear()
        _READ.clear()
        _gpu_forget()
        _GCK.update(s=0.0, n=0, full=0, max=0.0)  # the warm-up's collections too (its open one, if any, still ends)
        return False
    wall = now - t0
    if not 0 < wall <= MAX_WALL_S:
        return False
    STEPS.setdefault(steps, deque(maxlen=KEEP)).append((wall, *(_OPEN[f] for f in FIELDS[1:]), _OPEN["bs"]))
    _READ[steps] = _READ.get(steps, 0) + 1
    return True


def enable_everywhere() -> None:
    """Benchmarks only (benchmark/serving/plain_clock): time the decode steps of any launch, plain decoding included,
    where `_forward` is hooked on that launch's worker. The plugin never calls this: foreign launches stay untouched."""
    _ALL[0] = True


def broken() -> None:
    """Something that is no decode step stalled this process (a serving-time compile): the open interval is not read."""
    _OPEN["t0"] = None


def _gpu_forget() -> None:
    """Drop the GPU readings and the timed steps in flight (their events are kept for reuse)."""
    GPU.clear()
    _gpu_drop(_GPU["cur"])
    for sample in _GPU["pending"]:
        _gpu_drop(sample)
    _GPU.update(cur=None, open=None)
    _GPU["pending"].clear()
    PREFILL.clear()
    _gpu_drop(_PF["open"])
    for sample in _PF["pending"]:
        _gpu_drop(sample)
    _PF["open"] = None
    _PF["pending"].clear()


def summary() -> str | None:
    """The row's detail: per runtime state with MIN_READ steps read, the medians per step; None before any."""
    parts = []
    for steps, kept in sorted(list(STEPS.items())):  # copies in C: the scheduler thread appends meanwhile
        rows = list(kept)
        if len(rows) < MIN_READ:
            continue
        wall, launch, verify, extend, wait, prepare, replay, results, control = (median(r[i] for r in rows) * 1e3
                                                                                 for i in range(len(FIELDS)))
        rest = median((r[0] - r[1] - r[4]) for r in rows) * 1e3
        waited = sum(1 for r in rows if r[4] > WAITED_S) / len(rows)
        verdict = ("host-bound" if waited < 0.25 else "GPU-bound" if waited > 0.75 else "between host- and GPU-bound")
        if waited < 0.75 and prepare > 0.5 * wall:  # the host blocked in the next batch's preparation
            verdict += ", blocked preparing the next batch"
        elif waited < 0.75 and replay > 0.5 * wall:  # the host's time goes to cudaGraphLaunch
            verdict += ", mostly launching CUDA graphs"
        label = "plain decoding" if steps == PLAIN else f"steps {steps}"
        since = " since the traffic warm-up ended" if _WARM["ended"] else ""
        parts.append(f"{label}: {_READ[steps]} steps read{since}; medians per step of the last {len(rows)}: wall "
                     f"{wall:.2f} ms, launch {launch:.2f} (verify {verify:.2f}, draft extend {extend:.2f}; graph launches "
                     f"{replay:.2f}), waiting on "
                     f"the GPU {wait:.2f}, rest of the loop {rest:.2f} (preparing the next batch {prepare:.2f}; the "
                     f"previous step's results {results:.2f}, the adaptive controller {control:.2f} of it); "
                     f"waited over {WAITED_S * 1e3:.1f} ms in "
                     f"{waited:.0%} of steps: {verdict}{_gpu_text(steps)}{_by_batch(rows)}{_gpu_by_batch(steps)}")
    prefill = _prefill_text()
    if prefill:
        parts.append(prefill)
    return " | ".join(parts) if parts else None


def tokens_bucket(tokens: int) -> str:
    """The new-token bucket a prefill batch is shown under: 1-512, 513-2048, 2049-8192, 8193+."""
    for hi in (512, 2048, 8192):
        if tokens <= hi:
            return f"{hi // 4 + 1 if hi > 512 else 1}-{hi}"
    return "8193+"


def _prefill_text() -> str:
    """Prefill batches on the GPU: per size bucket with MIN_PREFILL batches, the median GPU ms per batch of the
    launch's work and (speculative decoding) of the draft's prefill in it, and the median new tokens. Per batch, not
    per token: a small prefill's cost is its launches (live on an H100, 2026-12-06, a 1-2-token prefill of the
    84-layer pair took 159-173 ms), so a rate per token said more about the batch sizes than about the servers."""
    rows = list(PREFILL)
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(tokens_bucket(r[2]), []).append(r)
    shown = sorted(((b, g) for b, g in groups.items() if len(g) >= MIN_PREFILL), key=lambda bg: int(bg[0].split("-")[0].rstrip("+")))
    if not shown:
        return ""

    def field(r, i):
        return r[i] if len(r) > i else None

    def entry(g):
        draft, host = _med(r[1] for r in g), _med(field(r, 3) for r in g)
        cpu, dhost = _med(field(r, 4) for r in g), _med(field(r, 5) for r in g)
        return (f"{_med(r[0] for r in g):.2f} / " + ("-" if draft is None else f"{draft:.2f}")
                + f" ({len(g)}, {_med(r[2] for r in g):g}; host " + ("-" if host is None else f"{host:.2f}")
                + ("" if cpu is None else f", on the CPU {cpu:.2f}")
                + ("" if dhost is None else f", the draft's host {dhost:.2f}") + ")")

    since = " since the traffic warm-up ended" if _WARM["ended"] else ""
    return (f"prefill: {len(rows)} batches timed on the GPU{since}; median GPU ms per batch, the launch / the draft's "
            f"prefill in it (batches, median new tokens; the launch's host ms, of it the scheduler thread on the CPU, "
            f"the draft's prefill's host ms), by new tokens: "
            + ", ".join(f"{b}: {entry(g)}" for b, g in shown) + _alloc_text(rows) + _gc_text(rows))


def _alloc_text(rows: list) -> str:
    """The CUDA caching allocator's calls inside the prefill launches read (none where it was not read)."""
    counts = [r[6] for r in rows if len(r) > 6 and r[6] is not None]
    if not counts:
        return ""
    malloc, free, retries, syncs = (sum(c[i] for c in counts) for i in range(len(ALLOC_KEYS)))
    with_malloc = sum(1 for c in counts if c[0] > 0)
    return (f"; the CUDA allocator inside {len(counts)} of these launches: cudaMalloc {malloc} (in {with_malloc} "
            f"launches), cudaFree {free}, retries {retries}, syncs to free {syncs}")


def _gc_on_cb(phase: str, info: dict) -> None:
    """gc.callbacks: time each collection (on the thread that runs it, holding the GIL: every thread waits)."""
    if phase == "start":
        _GCK["t"] = _gc_now()
    elif _GCK["t"] is not None:
        d = _gc_now() - _GCK["t"]
        _GCK["t"] = None
        _GCK["s"] += d
        _GCK["n"] += 1
        if info.get("generation") == 2:
            _GCK["full"] += 1
        if d > _GCK["max"]:
            _GCK["max"] = d


def gc_clock_on() -> None:
    """Time this process's garbage collections from now on (idempotent). Python's collector runs inside whatever
    allocates past its thresholds, holding the GIL: inside a host-bound prefill launch a collection is launch time.
    Turned on at the first launch the clock reads (our launches, or every launch under enable_everywhere)."""
    if not _GCK["on"]:
        _GCK["on"] = True
        gc.callbacks.append(_gc_on_cb)


def _gc_text(rows: list) -> str:
    """Python's garbage collector inside the prefill launches read, and in this process since the clock turned on
    (none before it is on)."""
    if not _GCK["on"]:
        return ""
    counts = [r[7] for r in rows if len(r) > 7 and r[7] is not None]
    inside = ""
    if counts:
        ms, n, full = (sum(c[i] for c in counts) for i in range(3))
        inside = f"inside {len(counts)} of these launches {ms:.1f} ms in {n} collections ({full} full); "
    since = " since the traffic warm-up ended" if _WARM["ended"] else ""
    return (f"; the garbage collector: {inside}in this process{since} {_GCK['s'] * 1e3:.1f} ms in {_GCK['n']} "
            f"collections ({_GCK['full']} full), the longest {_GCK['max'] * 1e3:.2f} ms")


def _med(values) -> float | None:
    values = [v for v in values if v is not None]
    return median(values) if values else None


def _gpu_text(steps: int) -> str:
    """The state's GPU medians per timed step (ms), once MIN_READ steps were timed."""
    if _GPU["off"]:
        return f"; GPU timing off ({_GPU['off']})"
    rows = list(GPU.get(steps, ()))
    if len(rows) < MIN_READ:
        return ""
    step, launch, before, verify, between = (_med(r[i] for r in rows) for i in range(len(GPU_FIELDS)))
    text = f"; GPU time per step (1 step in {GPU_EVERY}, {len(rows)} timed): {step:.2f} ms, the launch's work {launch:.2f}"
    if verify is not None:
        after = _med(r[1] - r[2] - r[3] for r in rows if r[2] is not None and r[3] is not None)
        text += f" (before the verify {before:.2f}, the verify {verify:.2f}, after it {after:.2f}: the draft extend)"
    return text + f", between launches {between:.2f}"


def _gpu_by_batch(steps: int) -> str:
    """Per batch-size bucket with MIN_READ timed steps: the GPU step and, for speculative decoding, the GPU time after
    the verify (the draft extend)."""
    groups: dict[str, list] = {}
    for r in list(GPU.get(steps, ())):
        b = bucket(r[-1])
        if b is not None:
            groups.setdefault(b, []).append(r)
    shown = sorted(((b, g) for b, g in groups.items() if len(g) >= MIN_READ), key=lambda bg: int(bg[0].split("-")[0]))
    if not shown:
        return ""

    def entry(g):
        after = _med(r[1] - r[2] - r[3] for r in g if r[2] is not None and r[3] is not None)
        return f"{_med(r[0] for r in g):.2f} / " + ("-" if after is None else f"{after:.2f}") + f" ({len(g)})"

    return "; GPU by batch size, step / after the verify ms (timed): " + ", ".join(f"{b}: {entry(g)}" for b, g in shown)


def _by_batch(rows: list) -> str:
    """Per batch-size bucket with MIN_READ readings: the median wall and GPU wait (a state's steps at different batch
    sizes are different work: set them against plain decoding's at the same size)."""
    by_bs: dict[int, list] = {}  # one dict append per reading; the few distinct sizes are bucketed after
    i = len(FIELDS)
    for r in rows:
        by_bs.setdefault(r[i], []).append(r)
    groups: dict[str, list] = {}
    for bs, rs in by_bs.items():
        b = bucket(bs)
        if b is not None:
            groups.setdefault(b, []).extend(rs)
    shown = [(b, g) for b, g in groups.items() if len(g) >= MIN_READ]
    if not shown:
        return ""
    shown.sort(key=lambda bg: int(bg[0].split("-")[0]))
    return "; by batch size, wall / GPU wait ms (steps): " + ", ".join(
        f"{b}: {median([r[0] for r in g]) * 1e3:.2f} / {median([r[4] for r in g]) * 1e3:.2f} ({len(g)})" for b, g in shown)


def tick() -> None:
    """The status writer's poll (every FLUSH_S s, its own thread): the ledger's copy into its file and the medians
    into the row, each when it changed."""
    if ledger_copy():
        _ledger_write()
    try:
        detail = summary()
    except RuntimeError:  # a reading landed while this copied (one more try in FLUSH_S seconds)
        return
    if detail is None or detail == _SHOWN[0]:
        return
    _SHOWN[0] = detail
    hookstatus.record(NAME, TARGETS[NAME], "applied", detail)
    hookstatus.bump()


def traffic_warmup_ended() -> None:
    """serving_compiles, when it first sees the traffic warm-up's end marker: the scheduler thread drops the readings
    taken before it at its next step (warm-up traffic is no serving traffic); the row says "since" after."""
    if not _WARM["ended"]:
        _WARM.update(ended=True, reset=True)


def reset() -> None:
    """Tests: forget every reading."""
    _OPEN.update(t0=None, launch=0.0, verify=0.0, extend=0.0, steps=None, wait=0.0, prepare=0.0, replay=0.0,
                 results=0.0, control=0.0, bs=0)
    _WARM.update(ended=False, reset=False)
    STEPS.clear()
    _READ.clear()
    _SHOWN[0] = None
    _ALL[0] = False
    _gpu_forget()
    _GPU.update(n=0, on=None, free=[], off=None)
    if _GCK["on"] and _gc_on_cb in gc.callbacks:
        gc.callbacks.remove(_gc_on_cb)
    _GCK.update(s=0.0, n=0, full=0, max=0.0, t=None, on=False)
    LEDGER.clear()
    _LED.update(t=None, kind=None, size=0, tags=[])
    LEDGER_COPIES.clear()
    _LEDGER_TEXT.clear()
    _LEDGER_LAST[0] = None
    _LEDGER_WARNED[0] = False
