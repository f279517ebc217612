"""The step_clock hook: per decode step, wall time = the launch's host time (its verify and draft-extend parts) + the
wait on the GPU + the rest of the scheduler loop, medians per runtime state, and a verdict (host- or GPU-bound).

In-process: the hook's functions are called in the order SGLang's overlap scheduler calls the wrapped methods (launch
step k, whose verify and draft extend run inside it, then process step k-1's result, which first waits on the GPU),
as HookRegistry's AROUND / BEFORE wrappers call them; batches carry SGLang's own ForwardMode. Stand-ins: SGLang's
methods themselves (they need a GPU and a loaded model; each stand-in advances a clock by the host time it is given)
and the result's CUDA event (`synchronize` advances the clock by the GPU wait). In a fresh interpreter: after SGLang's
own load_plugins() the four targets route through the hook, or with SGLANG_KIMI_EAGLE3_STEP_CLOCK=off none does.
"""

import gc
import json
import statistics
import types

import pytest
import torch
from helpers import run_json

from sglang_kimi_eagle3.integration import launch_record
from sglang_kimi_eagle3.integration.hooks import step_clock as hook
from sglang_kimi_eagle3.status import hookstatus

ForwardMode = pytest.importorskip("sglang.srt.model_executor.forward_batch_info").ForwardMode


@pytest.fixture
def clock(monkeypatch):
    now = [100.0, 0.0]  # the host's clock, the scheduler thread's CPU clock
    monkeypatch.setattr(hook, "time", types.SimpleNamespace(perf_counter=lambda: now[0], thread_time=lambda: now[1]))
    monkeypatch.setattr(launch_record, "_OURS", [True])
    hook.reset()
    yield now
    hook.reset()


class Worker:
    def __init__(self, steps):
        self.speculative_num_steps = steps


class Gpu:
    """Stand-in for the GPU's clock and CUDA timing events (CPU-only box): the work a call enqueues advances `t` (ms)
    when it is enqueued, an event takes `t` when recorded, and the GPU has passed an event once `done` says so."""

    def __init__(self):
        self.t, self.done, self.created = 0.0, True, 0

    def event(self):
        gpu = self
        gpu.created += 1

        class Event:
            at = None

            def record(self):
                self.at = gpu.t

            def query(self):
                return gpu.done

            def elapsed_time(self, end):
                return end.at - self.at

        return Event()


class Lens:
    """A batch's `seq_lens` on a CUDA device, as the hook sees it (its device and shape)."""

    def __init__(self, bs, device="cuda"):
        self.shape, self.device = (bs,), types.SimpleNamespace(type=device)


@pytest.fixture
def gpu(clock, monkeypatch):
    g = Gpu()
    monkeypatch.setattr(hook, "_new_event", g.event)
    return g


def _step(now, worker, mode=ForwardMode.DECODE, launch=(0.3e-3, 1.0e-3, 0.4e-3), wait=0.0, rest=8.0e-3,
          prev_result=True, prepare=0.5e-3, replay=0.1e-3, bs=0, results=0.0, control=0.0, gpu=None,
          gpu_ms=(0.1, 10.0, 0.45, 0.3), plain=False, in_extend=None):
    """One pass of the scheduler loop: launch a batch (its own host time, then verify, then draft extend), then the
    previous step's result (its GPU wait first, then its processing, `results` of `rest`, which feeds the adaptive
    controller, `control` of `results`), then the rest of the loop, which ends preparing the next batch (`prepare` of
    `rest`). With `gpu` (a Gpu on a CUDA batch), each part also enqueues its GPU work (`gpu_ms`: before the verify,
    the verify, the draft extend, the scheduler's own after the launch); `plain`: a plain worker's launch (no verify,
    no draft extend: its whole forward is `gpu_ms[1]`); `in_extend`: called inside the draft extend (a hook there)."""
    own, verify, extend = launch
    g_before, g_verify, g_extend, g_between = gpu_ms

    def sglang_replay(backend, shape_key, fb):  # a CUDA-graph launch: a quarter of each part's host time
        now[0] += replay

    def enqueue(ms):
        if gpu is not None:
            gpu.t += ms

    def sglang_verify(w, batch):
        now[0] += verify - replay
        enqueue(g_verify)
        hook._replay(sglang_replay, object(), None, None)

    def sglang_extend(dw, batch, out, kv_loc_plan=None):
        now[0] += extend - replay
        if in_extend is not None:
            in_extend()
        enqueue(g_extend)
        hook._replay(sglang_replay, object(), None, None)

    def sglang_forward(w, batch):
        now[0] += own
        if plain:
            enqueue(g_verify)
            return
        enqueue(g_before)
        hook._part("verify")(sglang_verify, w, batch)
        hook._part("extend")(sglang_extend, object(), batch, None, kv_loc_plan=None)

    # SGLang's batch: one length per request (on a CUDA device where the GPU is timed)
    lens = {"seq_lens": Lens(bs) if gpu is not None else torch.zeros(bs, dtype=torch.int64)} if bs else {}
    hook._forward(sglang_forward, worker, types.SimpleNamespace(forward_mode=mode, is_extend_in_batch=False, **lens))
    enqueue(g_between)
    if prev_result:
        event = types.SimpleNamespace(synchronize=lambda: now.__setitem__(0, now[0] + wait))

        def sglang_on_verify_complete_cpu(w, counts, batch_size=0):
            now[0] += control

        def sglang_process(processor, batch, result):
            now[0] += results - control
            hook._part("control")(sglang_on_verify_complete_cpu, object(), [1], batch_size=1)

        hook._results(sglang_process, object(), object(), types.SimpleNamespace(copy_done=event))
    now[0] += rest - prepare - (results if prev_result else 0.0)

    def sglang_prepare(batch):
        now[0] += prepare

    hook._prepare(sglang_prepare, types.SimpleNamespace())


def test_a_host_bound_step_is_split_into_launch_wait_and_rest(clock):
    w = Worker(0)
    for _ in range(40):
        _step(clock, w, wait=0.0)
    assert hook._READ == {0: 39}  # 40 launches, 39 intervals closed
    detail = hook.summary()
    assert detail.startswith("steps 0: 39 steps read")
    assert ("wall 9.70 ms, launch 1.70 (verify 1.00, draft extend 0.40; graph launches 0.20), waiting on the GPU "
            "0.00, rest of the loop 8.00 (preparing the next batch 0.50; the previous step's results 0.00, the adaptive "
            "controller 0.00 of it)") in detail
    assert detail.endswith("waited over 0.2 ms in 0% of steps: host-bound")


def test_a_gpu_bound_step_waits_and_states_are_kept_apart(clock):
    w = Worker(3)
    for _ in range(20):
        _step(clock, w, wait=5e-3, rest=1e-3)
    w.speculative_num_steps = 0
    for _ in range(20):
        _step(clock, w, wait=0.1e-3)
    detail = hook.summary()
    s3, s0 = detail.split(" | ")[1], detail.split(" | ")[0]
    assert s3.startswith("steps 3: 20 steps read") and "wall 7.70 ms" in s3
    assert "waiting on the GPU 5.00, rest of the loop 1.00" in s3
    assert s3.endswith("in 100% of steps: GPU-bound")
    # the interval that switched state is read as the state the step ran at (the launch's, after SGLang's switch)
    assert s0.startswith("steps 0: 19 steps read") and "wall 9.80 ms" in s0 and s0.endswith("host-bound")


def test_the_previous_steps_result_processing_and_its_adaptive_controller_are_read_apart(clock):
    """The row splits the rest of the loop: the previous step's result processing (after its GPU wait) and the
    adaptive controller it feeds; outside an open interval neither is timed, and the wait stays the wait."""
    hook._results(lambda p, b, r: clock.__setitem__(0, clock[0] + 1.0), object(), object(),
                  types.SimpleNamespace(copy_done=None))
    assert hook._OPEN["results"] == 0.0
    w = Worker(0)
    for _ in range(20):
        _step(clock, w, wait=2.0e-3, rest=1.5e-3, prepare=0.25e-3, results=0.9e-3, control=0.06e-3)
    detail = hook.summary()
    assert ("waiting on the GPU 2.00, rest of the loop 1.50 (preparing the next batch 0.25; the previous step's "
            "results 0.90, the adaptive controller 0.06 of it)") in detail, detail
    assert "wall 5.20 ms" in detail


def test_a_host_blocked_preparing_the_next_batch_is_named(clock):
    """A copy to the GPU that syncs with the step in flight blocks in prepare_for_decode, not in copy_done: the row
    names it; outside an open interval (before the first decode launch) prepare_for_decode is not timed."""
    hook._prepare(lambda batch: clock.__setitem__(0, clock[0] + 1.0), types.SimpleNamespace())
    assert hook._OPEN["prepare"] == 0.0
    w = Worker(0)
    for _ in range(20):
        _step(clock, w, wait=0.0, rest=8.5e-3, prepare=8.0e-3)
    detail = hook.summary()
    assert "rest of the loop 8.50 (preparing the next batch 8.00;" in detail
    assert detail.endswith("in 0% of steps: host-bound, blocked preparing the next batch"), detail
    hook.reset()
    for _ in range(20):
        _step(clock, w, wait=0.0, rest=8.5e-3, prepare=1.0e-3)
    assert hook.summary().endswith("host-bound")


def test_a_host_busy_launching_cuda_graphs_is_named(clock):
    """cudaGraphLaunch of a large graph is host time inside the launch: the row names it; outside an open interval
    a replay (a prefill's, a warm-up's) is not timed."""
    hook._replay(lambda backend: clock.__setitem__(0, clock[0] + 1.0), object())
    assert hook._OPEN["replay"] == 0.0
    w = Worker(0)
    for _ in range(20):
        _step(clock, w, launch=(0.5e-3, 6.0e-3, 3.5e-3), wait=0.0, rest=1.0e-3, replay=3.0e-3)
    detail = hook.summary()
    assert "wall 11.00 ms, launch 10.00 (verify 6.00, draft extend 3.50; graph launches 6.00)" in detail, detail
    assert detail.endswith("host-bound, mostly launching CUDA graphs"), detail


def test_prefills_idle_gaps_compiles_and_foreign_launches_are_not_read(clock, monkeypatch):
    w = Worker(0)
    _step(clock, w)
    _step(clock, w)  # 1 read
    _step(clock, w, mode=ForwardMode.EXTEND)  # a prefill: the interval holding it and the next are not read
    _step(clock, w)
    _step(clock, w)  # 2 read
    clock[0] += 6.0  # idle: over MAX_WALL_S
    _step(clock, w)  # not read (the idle interval)
    hook.broken()  # a serving-time compile
    _step(clock, w)  # not read
    _step(clock, w)  # 3 read
    assert hook._READ == {0: 3}
    monkeypatch.setattr(launch_record, "_OURS", [False])  # not our launch: nothing read, nothing changed
    for _ in range(5):
        _step(clock, w)
    assert hook._READ == {0: 3}


def test_the_row_shows_the_medians_once_a_state_has_enough_steps(clock):
    hookstatus.record(hook.NAME, hook.TARGETS[hook.NAME], "applied", "around hook")
    w = Worker(7)
    for _ in range(hook.MIN_READ):  # MIN_READ launches: one step short
        _step(clock, w)
    calls = hookstatus.calls()
    hook.tick()
    assert hookstatus.get(hook.NAME).detail == "around hook" and hookstatus.calls() == calls
    _step(clock, w)
    hook.tick()
    row = hookstatus.get(hook.NAME)
    assert row.state == "applied" and row.detail.startswith(f"steps 7: {hook.MIN_READ} steps read")
    assert hookstatus.calls() == calls + 1  # the status writer rewrites its file
    hook.tick()  # nothing new: no rewrite
    assert hookstatus.calls() == calls + 1


def test_steps_are_also_shown_per_batch_size_bucket(clock):
    """A state's steps at 2 and at 8 requests are different work: the row gives each bucket's medians (wall / GPU
    wait), the only like-for-like comparison with plain decoding's row; buckets under MIN_READ readings are left out."""
    assert [hook.bucket(b) for b in (0, 1, 2, 3, 4, 5, 8, 9, 16, 128, 129)] == [
        None, "1", "2", "3-4", "3-4", "5-8", "5-8", "9-16", "9-16", "65-128", "129-256"]
    w = Worker(0)
    for _ in range(20):
        _step(clock, w, wait=2e-3, rest=1e-3, bs=2)
    for _ in range(20):
        _step(clock, w, wait=6e-3, rest=1e-3, bs=7)
    for _ in range(5):
        _step(clock, w, wait=9e-3, rest=1e-3, bs=64)
    detail = hook.summary()
    # an interval is read under the batch its launch ran (the first bs-7 launch closes a bs-2 interval)
    assert detail.endswith("; by batch size, wall / GPU wait ms (steps): 2: 4.70 / 2.00 (20), 5-8: 8.70 / 6.00 (20)"), detail


def test_one_decode_step_in_gpu_every_is_timed_on_the_gpu(clock, gpu):
    """A GPU-bound step's wall time is GPU time, which no host split places (on an H100 the off-state's step was
    1.04-1.06x plain's, both waiting on the GPU in 97 % of steps): CUDA events on one step in GPU_EVERY give its GPU
    time, the launch's part before the verify, the verify, after it (the draft extend) and between launches."""
    w = Worker(0)
    for _ in range(20 * hook.GPU_EVERY):
        _step(clock, w, wait=6e-3, rest=1.5e-3, bs=7, gpu=gpu, gpu_ms=(0.1, 10.0, 0.45, 0.3))
    detail = hook.summary()
    # 20 timed launches; the last one's end (the next launch) has not come
    assert ("GPU time per step (1 step in 4, 19 timed): 10.85 ms, the launch's work 10.55 (before the verify 0.10, "
            "the verify 10.00, after it 0.45: the draft extend), between launches 0.30") in detail, detail
    assert detail.endswith("; GPU by batch size, step / after the verify ms (timed): 5-8: 10.85 / 0.45 (19)"), detail
    assert gpu.created <= 2 * 5  # events are reused: a timed step in flight and one being launched
    assert sum(1 for _ in hook.GPU[0]) == 19


def test_plain_decodings_gpu_step_has_no_verify_part(clock, gpu):
    w = Worker(hook.PLAIN)
    for _ in range(20 * hook.GPU_EVERY):
        _step(clock, w, wait=8e-3, rest=1e-3, bs=6, gpu=gpu, gpu_ms=(0, 10.3, 0, 0.25), plain=True)
    detail = hook.summary()
    assert "GPU time per step (1 step in 4, 19 timed): 10.55 ms, the launch's work 10.30, between launches 0.25" in detail
    assert detail.endswith("GPU by batch size, step / after the verify ms (timed): 5-8: 10.55 / - (19)"), detail


def _prefill(worker, gpu, tokens=1000, target_ms=40.0, draft_ms=2.0, draft=True, now=None, host_ms=0.0, cpu_ms=None,
             draft_host_ms=0.0, alloc=None, collect=False):
    """A prefill launch as SGLang's EAGLE worker runs it: the target's extend, then the draft's prefill inside it
    (`host_ms` of host time on the `now` clock, `cpu_ms` of it on the CPU: all of it unless said, `draft_host_ms` of
    host time in the draft's part; `alloc`: [counts, calls] where the launch adds `calls` to the allocator's `counts`)."""
    def sglang_draft_prefill(dw, batch, out):
        gpu.t += draft_ms
        if now is not None:
            now[0] += draft_host_ms / 1e3

    def sglang_forward(w, batch):
        if now is not None:
            now[0] += host_ms / 1e3
            now[1] += (host_ms if cpu_ms is None else cpu_ms) / 1e3
        if alloc is not None:
            alloc[0][:] = [a + b for a, b in zip(alloc[0], alloc[1])]
        if collect:
            gc.collect()  # a full collection inside the launch (Python's collector runs wherever allocations trip it)
        gpu.t += target_ms
        if draft:
            hook._draft_prefill(sglang_draft_prefill, object(), batch, None)

    hook._forward(sglang_forward, worker, types.SimpleNamespace(forward_mode=ForwardMode.EXTEND, is_extend_in_batch=False,
                                                                extend_num_tokens=tokens, seq_lens=Lens(4)))


def test_prefill_batches_are_timed_on_the_gpu_with_the_drafts_part(clock, gpu, monkeypatch):
    """Decode steps within 1-2.5 % of plain's while the server runs 5-6 % slower end to end (an H100, 2026-12-06): the
    rest is outside the decode steps. Every prefill launch is timed on the GPU (the draft's prefill inside it apart),
    per batch (its median new tokens and host time beside), by batch size in new tokens, read after a later result's
    wait."""
    w = Worker(0)
    counts = [5, 1, 0, 0]  # the CUDA allocator's calls so far (a stand-in: no CUDA device here)
    monkeypatch.setattr(hook, "alloc_counts", lambda: tuple(counts))
    for _ in range(3):
        _step(clock, w, bs=4, gpu=gpu)
    for _ in range(hook.MIN_PREFILL):
        _prefill(w, gpu, now=clock, host_ms=39.0, cpu_ms=30.0, draft_host_ms=2.0)  # host-bound: host about its GPU span
        _prefill(w, gpu, tokens=3000, target_ms=90.0, draft_ms=4.5, now=clock, host_ms=60.0,
                 alloc=[counts, (2, 1, 0, 0)])  # two cudaMalloc and a cudaFree inside
        _step(clock, w, bs=4, gpu=gpu)  # its result's wait reads the prefills the GPU has passed
    _prefill(w, gpu, tokens=200, target_ms=12.0, draft_ms=0.5)  # a bucket under MIN_PREFILL: not shown
    _step(clock, w, bs=4, gpu=gpu)
    assert len(hook.PREFILL) == 2 * hook.MIN_PREFILL + 1 and not hook._PF["pending"]
    assert hook.summary().split(
        "prefill: 17 batches timed on the GPU; median GPU ms per batch, the launch / the draft's prefill in it "
        "(batches, median new tokens; the launch's host ms, of it the scheduler thread on the CPU, the draft's "
        "prefill's host ms), by new tokens: 513-2048: 42.00 / 2.00 (8, 1000; host 41.00, on the CPU 30.00, the "
        "draft's host 2.00), 2049-8192: 94.50 / 4.50 (8, 3000; host 60.00, on the CPU 60.00, the draft's host 0.00); "
        "the CUDA allocator inside 17 of these launches: cudaMalloc 16 (in 8 launches), cudaFree 8, retries 0, syncs to "
        "free 0", 1)[1].startswith("; the garbage collector: inside 17 of these launches "), hook.summary()
    monkeypatch.setattr(hook, "alloc_counts", lambda: None)  # not read (no CUDA device): no allocator part
    # the GPU not there yet: the readings wait; a plain worker's prefill has no draft part; a foreign launch's none
    hook.reset()
    monkeypatch.setattr(hook, "_new_event", gpu.event)
    gpu.done = False
    _prefill(w, gpu, draft=False)
    _step(clock, w, bs=4, gpu=gpu)
    assert not hook.PREFILL and len(hook._PF["pending"]) == 1
    gpu.done = True
    _step(clock, w, bs=4, gpu=gpu)
    ((gpu_ms, draft_ms, tokens, host, cpu, dhost, alloc, _gc),) = hook.PREFILL
    assert (gpu_ms, draft_ms, tokens, host, dhost, alloc) == (40.0, None, 1000, 0.0, None, None) and cpu >= 0
    monkeypatch.setattr(launch_record, "_OURS", [False])
    _prefill(w, gpu)
    assert not hook._PF["pending"] and hook._PF["open"] is None


def test_garbage_collections_inside_prefill_launches_are_counted(clock, gpu, monkeypatch):
    """A prefill launch of the deployment-shaped pair is host-bound (about 170 ms of Python launching its eager layers:
    an H100, 2026-12-07), and Python's collector runs inside whatever allocates past its thresholds, holding the GIL:
    the collections inside prefill launches, and the process's, are in the row (for ours and plain decoding alike)."""
    monkeypatch.setattr(hook, "alloc_counts", lambda: None)
    w = Worker(0)
    assert not hook._GCK["on"]  # nothing timed before the first launch the clock reads
    _step(clock, w, bs=4, gpu=gpu)
    assert hook._GCK["on"] and hook._gc_on_cb in gc.callbacks
    for i in range(hook.MIN_PREFILL):
        _prefill(w, gpu, now=clock, host_ms=40.0, collect=i < 3)  # three launches hold a full collection
        _step(clock, w, bs=4, gpu=gpu)
    gc.collect()  # one outside the launches: the process's count only
    rows = [r[7] for r in hook.PREFILL]
    assert [r[2] >= 1 for r in rows] == [True] * 3 + [False] * 5 and all(r[0] > 0 for r in rows[:3])
    text = hook.summary().split("the garbage collector: ", 1)[1]
    full = sum(r[2] for r in rows)
    assert text.startswith(f"inside 8 of these launches {sum(r[0] for r in rows):.1f} ms in ") and f"({full} full); " in text
    assert hook._GCK["full"] >= full + 1 and text.endswith(f"the longest {hook._GCK['max'] * 1e3:.2f} ms"), text
    hook.reset()  # the callback goes with the readings
    assert hook._gc_on_cb not in gc.callbacks and not hook._GCK["on"]


def test_gpu_readings_wait_for_the_gpu_and_broken_intervals_are_not_timed(clock, gpu, monkeypatch):
    w = Worker(0)
    gpu.done = False  # the GPU has not reached the events: nothing is read, the timed steps wait
    for _ in range(3 * hook.GPU_EVERY):
        _step(clock, w, bs=4, gpu=gpu)
    assert 0 not in hook.GPU and len(hook._GPU["pending"]) == 2
    gpu.done = True
    _step(clock, w, bs=4, gpu=gpu)
    assert len(hook.GPU[0]) == 3 and not hook._GPU["pending"]  # the third got its end at this launch
    # a timed step whose interval holds a prefill, or a compile, is dropped, not read with that time in it
    hook.reset()
    monkeypatch.setattr(hook, "_new_event", gpu.event)
    for i in range(1, 4 * hook.GPU_EVERY + 1):
        _step(clock, w, bs=4, gpu=gpu)
        if i == hook.GPU_EVERY:
            _step(clock, w, mode=ForwardMode.EXTEND, bs=4, gpu=gpu)
        if i == 2 * hook.GPU_EVERY:
            hook.broken()
    assert len(hook.GPU[0]) == 1, hook.GPU  # of 4 timed steps: the 1st and 2nd broken, the 4th has no end yet
    # a process whose batches are not on a CUDA device records no event at all
    hook.reset()
    monkeypatch.setattr(hook, "_new_event", lambda: pytest.fail("an event on a CPU batch"))
    for _ in range(3 * hook.GPU_EVERY):
        _step(clock, w, bs=4)
    assert hook.GPU == {}


def test_a_failing_event_turns_the_gpu_timing_off_and_serving_goes_on(clock, gpu, monkeypatch):
    """An event that cannot be recorded or read (a capturing stream, a driver error) must not break the step or the
    result processing it sits in: the timing goes off for the process and the row says why."""
    w = Worker(0)
    for _ in range(4 * hook.GPU_EVERY):
        _step(clock, w, bs=4, gpu=gpu)

    def broken_event():
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(hook, "_new_event", broken_event)
    hook._GPU["free"].clear()
    for _ in range(20 * hook.GPU_EVERY):
        _step(clock, w, bs=4, gpu=gpu)
    detail = hook.summary()
    assert "GPU timing off (RuntimeError: operation not permitted when stream is capturing)" in detail, detail
    assert hook._READ[0] == 24 * hook.GPU_EVERY - 1  # every step still read on the host
    hook.reset()
    monkeypatch.setattr(hook, "_new_event", gpu.event)

    def bad_read(self, end):
        raise RuntimeError("device not ready")

    gpu.done = False  # the timed steps wait for the GPU, then their first read fails
    for _ in range(2 * hook.GPU_EVERY + 1):
        _step(clock, w, bs=4, gpu=gpu)
    monkeypatch.setattr(type(hook._GPU["pending"][0]["ev"]["L0"]), "elapsed_time", bad_read)
    gpu.done = True
    _step(clock, w, bs=4, gpu=gpu)
    assert hook._GPU["off"] == "RuntimeError: device not ready" and hook.GPU == {}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA timing events need a GPU")
def test_real_cuda_events_place_a_steps_gpu_work(clock):
    """On a GPU, with real CUDA events: a launch enqueuing 1 matmul before its verify, 8 in it and 2 after (the draft
    extend) reads each part positive and the verify the largest, on the stream the work ran on."""
    a = torch.randn(2048, 2048, device="cuda")

    def work(n):
        for _ in range(n):
            torch.mm(a, a)

    def sglang_forward(w, batch):
        work(1)
        hook._part("verify")(lambda w, b: work(8), w, batch)
        hook._part("extend")(lambda dw, b: work(2), object(), batch)

    w, batch = Worker(0), types.SimpleNamespace(forward_mode=ForwardMode.DECODE, is_extend_in_batch=False,
                                                seq_lens=torch.zeros(4, dtype=torch.int64, device="cuda"))
    stream = torch.cuda.Stream()  # SGLang launches on its own forward stream
    with torch.cuda.stream(stream):
        for _ in range(12 * hook.GPU_EVERY):
            hook._forward(sglang_forward, w, batch)
            done = torch.cuda.Event()
            done.record()
            hook._results(lambda p, b, r: None, object(), object(), types.SimpleNamespace(copy_done=done))
            clock[0] += 5e-3
    torch.cuda.synchronize()
    rows = list(hook.GPU[0])
    assert len(rows) >= 10
    step, launch, before, verify, between = (statistics.median(r[i] for r in rows) for i in range(5))
    after = launch - before - verify
    # where the events sit, not how fast the GPU is: 8 matmuls in the verify against 1 before it and 2 after
    assert 0 < before < verify and 0 < after < verify and launch <= step, rows


def test_readings_before_the_traffic_warm_up_ended_are_dropped(clock, monkeypatch, tmp_path):
    """serving_compiles finds the HTTP server's end-of-warm-up marker (the real file, as the warm-up leaves it): the
    scheduler thread then drops the readings taken before it, the interval in flight included."""
    from sglang_kimi_eagle3.integration.hooks import serving_compiles

    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_STATUS_DIR", str(tmp_path))
    monkeypatch.setitem(serving_compiles._STATE, "port", 30000)
    monkeypatch.setitem(serving_compiles._STATE, "t0", 1.0)
    monkeypatch.setitem(serving_compiles._STATE, "warm_done", False)
    w = Worker(0)
    for _ in range(30):  # warm-up traffic
        _step(clock, w, wait=0.0, rest=20e-3)
    assert serving_compiles.warmup_ended() is False
    for _ in range(3):
        gc.collect()  # the warm-up's collections (full ones): the process's count drops them with the readings
    assert hook._GCK["full"] >= 3
    hook.tick()
    assert hookstatus.get(hook.NAME).detail.startswith("steps 0: 29 steps read; medians")
    from sglang_kimi_eagle3.integration.hooks import adaptive_control

    assert adaptive_control._warm_ended() is False
    serving_compiles.mark_warmup_done(30000, "applied")  # the HTTP server, at the warm-up's end
    assert serving_compiles.warmup_ended() is True  # the status writer's poll finds it
    assert adaptive_control._warm_ended() is True  # the controllers drop their readings at their next sync
    for _ in range(21):
        _step(clock, w, wait=0.0, rest=5e-3)
    hook.tick()
    detail = hookstatus.get(hook.NAME).detail
    assert detail.startswith("steps 0: 20 steps read since the traffic warm-up ended; medians per step of the last 20: "
                             "wall 6.70 ms"), detail
    assert hook._GCK["full"] < 3 and "in this process since the traffic warm-up ended" in hook._gc_text([])


ROUTED = """
import json, os
import sglang.srt.plugins as plugins
plugins.load_plugins()
from sglang_kimi_eagle3.status import hookstatus
from sglang_kimi_eagle3.integration import refresh_status, registry
from sglang_kimi_eagle3.integration.hooks import step_clock as hook
refresh_status()
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2, EagleDraftWorker
from sglang.srt.managers.scheduler_components.batch_result_processor import SchedulerBatchResultProcessor as P
from sglang.srt.managers.schedule_batch import ScheduleBatch
from sglang.srt.model_executor.runner_backend.full_cuda_graph_backend import FullCudaGraphBackend
got = {"forward": (EAGLEWorkerV2.forward_batch_generation, hook._forward),
       "wait": (P.process_batch_result_decode, hook._results),
       "prepare": (ScheduleBatch.prepare_for_decode, hook._prepare),
       "replay": (FullCudaGraphBackend.replay, hook._replay)}
print(json.dumps({"hooked": {k: registry._chain_contains(a, fn) for k, (a, fn) in got.items()},
                  "wrapped": [hasattr(EAGLEWorkerV2.verify, "__wrapped__"),
                              hasattr(EagleDraftWorker._draft_extend_for_decode, "__wrapped__"),
                              hasattr(EagleDraftWorker._draft_extend_for_prefill, "__wrapped__"),
                              hasattr(EAGLEWorkerV2.on_verify_complete_cpu, "__wrapped__")],
                  "rows": {r.name: r.state for r in hookstatus.rows() if r.name.startswith("step_clock")}}))
"""


def test_the_ledger_puts_each_interval_under_the_launch_that_opened_it(clock, monkeypatch, tmp_path):
    """The ledger: the scheduler loop's busy time, launch to next launch, by the kind of the launch that began each
    interval (a decode state, a prefill with its host work after it), cumulative; an idle interval (over MAX_WALL_S)
    or one opened by a launch that raised is not counted. The status writer keeps a timestamped copy when it changed
    and writes the copies beside the status file."""
    w = Worker(0)
    _step(clock, w, bs=4)  # opens a steps-0 interval: each _step is 9.7 ms of the loop
    _step(clock, w, bs=4)

    def prefill_launch(worker, batch):
        clock[0] += 0.030  # the prefill's launch (host-bound)

    hook._forward(prefill_launch, w, types.SimpleNamespace(forward_mode=ForwardMode.EXTEND, is_extend_in_batch=False,
                                                           extend_num_tokens=700))
    clock[0] += 0.200  # the host's work after it (its result, the next batch) before the next launch
    w.speculative_num_steps = 3
    _step(clock, w, bs=2)
    _step(clock, w, bs=2)
    clock[0] += 6.0  # idle
    _step(clock, w, bs=2)  # the interval holding the idle time is not counted

    def raising(worker, batch):
        clock[0] += 0.001
        raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError):
        hook._forward(raising, w, types.SimpleNamespace(forward_mode=ForwardMode.DECODE, is_extend_in_batch=False))
    clock[0] += 0.004
    _step(clock, w, bs=2)  # the raised launch's interval (5 ms) is not counted; this one stays open
    got = {k: [round(v[0] * 1e3, 3), v[1], v[2]] for k, v in hook.LEDGER.items()}
    # (the first step after the prefill read apart, under its tag)
    assert got == {"steps 0": [19.4, 2, 8], "prefill": [230.0, 1, 700], "steps 3 (after a prefill)": [9.7, 1, 2],
                   "steps 3": [9.7, 1, 2]}

    assert hook.ledger_copy(now=50.0) and not hook.ledger_copy(now=52.0)  # unchanged: no second copy
    _step(clock, w, bs=2)
    assert hook.ledger_copy(now=54.0)
    copies = [(t, {k: [round(v[0] * 1e3, 3), v[1], v[2]] for k, v in c.items()}) for t, c in hook.LEDGER_COPIES]
    assert copies == [(50.0, got), (54.0, {**got, "steps 3": [19.4, 2, 4]})]

    from sglang_kimi_eagle3.integration.hooks import runtime_status

    monkeypatch.setitem(runtime_status._STATE, "path", tmp_path / "port30000.json")
    _step(clock, w, bs=2)
    hook.tick()  # the writer's poll: a copy (the ledger changed) into ledger-port30000.json
    data = json.loads((tmp_path / "ledger-port30000.json").read_text())
    assert [c[1]["steps 3"][1] for c in data["copies"]] == [1, 2, 3] and data["idle_over_s"] == hook.MAX_WALL_S
    assert not (tmp_path / "port30000.json").exists()  # the status file is the status writer's, not this one's


def test_the_ledger_reads_tagged_decode_steps_apart_the_step_after_a_prefill_and_a_flush(clock):
    """A decode launch right after a prefill launch, and one in which a hook named what it did (deferred_extend's
    flush: tag_launch), go to the ledger under their kind with the tag in brackets, so their seconds are read apart
    from the state's other steps (a tail the medians do not show). A tag outside a decode launch is dropped."""
    w = Worker(0)
    _step(clock, w, bs=4)

    def prefill_launch(worker, batch):
        clock[0] += 0.030
        hook.tag_launch("flush")  # inside a prefill launch: no decode step's tag

    hook._forward(prefill_launch, w, types.SimpleNamespace(forward_mode=ForwardMode.EXTEND, is_extend_in_batch=False,
                                                           extend_num_tokens=700))
    assert hook._LED["tags"] == []
    clock[0] += 0.050
    _step(clock, w, bs=4)  # right after the prefill
    for _ in range(6):
        _step(clock, w, bs=4)

    def flush():  # the draft extend flushes the stashed rows in this step (tagged twice: kept once)
        clock[0] += 0.003
        hook.tag_launch("flush")
        hook.tag_launch("flush")

    _step(clock, w, bs=4, in_extend=flush)
    _step(clock, w, bs=4)
    hook.tag_launch("flush")  # between launches (the open interval's kind known): nothing
    assert hook._LED["tags"] == []
    _step(clock, w, bs=4)
    got = {k: [round(v[0] * 1e3, 3), v[1]] for k, v in hook.LEDGER.items()}
    assert got == {"steps 0": [77.6, 8], "prefill": [80.0, 1], "steps 0 (after a prefill)": [9.7, 1],
                   "steps 0 (flush)": [12.7, 1]}, got

    plain = Worker(0)
    del plain.speculative_num_steps  # plain decoding's worker: no steps
    hook._forward(prefill_launch, plain, types.SimpleNamespace(forward_mode=ForwardMode.EXTEND,
                                                               is_extend_in_batch=False, extend_num_tokens=10))
    _step(clock, plain, bs=2, plain=True)
    _step(clock, plain, bs=2, plain=True)
    assert hook.LEDGER["decode (after a prefill)"][1] == 1 and hook.LEDGER["steps 0"][1] == 9


def test_an_unwritable_ledger_is_said_once_and_the_writer_goes_on(clock, monkeypatch, tmp_path, caplog):
    from sglang_kimi_eagle3.integration.hooks import runtime_status

    (tmp_path / "ledger-port30001.json").mkdir()  # where the file should go: a folder (the rename fails)
    monkeypatch.setitem(runtime_status._STATE, "path", tmp_path / "port30001.json")
    w = Worker(0)
    with caplog.at_level("WARNING"):
        for _ in range(3):
            _step(clock, w, bs=2)
            _step(clock, w, bs=2)
            hook.tick()  # a new copy each time, each write refused: no exception into the writer
    said = [r for r in caplog.records if "cannot write the ledger" in r.getMessage()]
    assert len(said) == 1 and "ledger-port30001.json" in said[0].getMessage(), caplog.text
    assert len(hook.LEDGER_COPIES) == 3


NAMES = ["step_clock", "step_clock_verify", "step_clock_draft_extend", "step_clock_wait", "step_clock_control",
         "step_clock_prepare", "step_clock_replay", "step_clock_draft_prefill"]


@pytest.mark.slow
def test_sglangs_load_plugins_routes_the_eight_targets_through_the_hook():
    out = run_json(ROUTED)
    assert out["hooked"] == {"forward": True, "wait": True, "prepare": True, "replay": True}
    assert out["wrapped"] == [True, True, True, True]
    assert out["rows"] == {n: "applied" for n in NAMES}


def test_switched_off_nothing_is_queued(monkeypatch):
    from sglang_kimi_eagle3.integration import registry

    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_STEP_CLOCK", "off")
    monkeypatch.setattr(registry, "register", lambda *a, **k: pytest.fail(f"queued with the clock off: {a}"))
    hook.install()
    assert {n: hookstatus.get(n).state for n in NAMES} == {n: "skipped" for n in NAMES}
    assert "SGLANG_KIMI_EAGLE3_STEP_CLOCK=off" in hookstatus.get(hook.NAME).detail
