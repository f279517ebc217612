"""Benchmarks only: the plugin's step_clock on a PLAIN server (no speculation), to set ours' decode steps against.

`device_adaptive.sh` puts this folder first on the plain server's PYTHONPATH, so every Python process of that server
(the HTTP server, its schedulers) runs this file at start. It queues, with SGLang's HookRegistry (applied by SGLang's
own load_plugins() in each process, as for the plugin), the step_clock's launch timer around
`TpModelWorker.forward_batch_generation` and turns it on for this launch (`step_clock.enable_everywhere()`); the
plugin, loaded in that server as in any, already queues the GPU-wait timer (`process_batch_result_decode`), which reads
only while a launch timer runs. A daemon thread writes the medians (`step_clock.summary()`) every STEP_CLOCK_PERIOD_S
seconds (5) to $STEP_CLOCK_DIR/plain-pid<PID>.txt, atomically, once the process has read a decode step, and the step
clock's ledger (the loop's busy seconds by launch kind, timestamped copies) to ledger-plain-pid<PID>.json beside it.
The plugin itself never does this: for a launch that is not EAGLE/EAGLE3 with a draft it changes nothing.
A sitecustomize further on sys.path (the one this file shadows) is run first.

With PINNED_LENS=1 (the `pinned` server of device_adaptive.sh, DA_PINNED=1: ours with this folder on its path) it
queues instead an experiment on speculative decoding's next-batch preparation: SGLang 0.5.23's
`eagle_prepare_for_decode` builds two small CPU tensors (`torch.tensor(..., device="cpu")`) and copies them to the GPU
with non_blocking=True on the schedule stream, which SGLang chains to the step in flight; from pageable memory CUDA
may stage such a copy through a stream sync, blocking the host for the rest of that step. Around that one function the
`torch` its module sees hands back those CPU tensors in pinned memory, so the copies are truly asynchronous; nothing
else changes (same values, same order). The pinned memory is a ring of RING buffers allocated once and reused (each
slot grown to the largest tensor asked of it; before a slot is refilled, the event recorded after the copy that last
read it is waited for, in practice long done): on an H100 (2026-12-05, benchmark/host/pageable_copy.py) pinning each
small tensor anew (`pin_memory()`) cost 191-207 µs of host time behind a busy stream, more than the pageable copy's
135-155. Measured side by side with `ours`, it says whether the step_clock's "preparing the next batch" time was those
copies. Benchmark only: the plugin never does it.
"""

import importlib.util
import os
import sys
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = "sglang.srt.managers.tp_worker.TpModelWorker.forward_batch_generation"


def _chain() -> None:
    for p in sys.path:
        if not p or os.path.abspath(p) == _HERE:
            continue
        cand = os.path.join(p, "sitecustomize.py")
        if os.path.isfile(cand):
            spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", cand)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


def _writer(step_clock, folder: str, period: float) -> None:
    from sglang_kimi_eagle3.atomic import write_atomic

    last = None
    while True:
        time.sleep(period)
        if step_clock.ledger_copy():  # the ledger (where the loop's time went, by launch kind) when it changed
            write_atomic(os.path.join(folder, f"ledger-plain-pid{os.getpid()}.json"), step_clock.ledger_json() + "\n",
                         mkdir=True)
        try:
            text = step_clock.summary()
        except RuntimeError:  # a reading landed while it copied: next period
            continue
        if text and text != last:
            write_atomic(os.path.join(folder, f"plain-pid{os.getpid()}.txt"), text + "\n", mkdir=True)
            last = text


class PinnedRing:
    """RING reused pinned CPU buffers: take(t) copies t into the next slot and returns that view (t's shape and dtype)."""

    RING = 8

    def __init__(self):
        self.slots = [None] * self.RING  # (pinned 1-D buffer, event recorded after its last copy or None)
        self.next = 0
        self.taken = []  # slot indices handed out in the current call

    def take(self, torch, t):
        i = self.next
        self.next = (i + 1) % self.RING
        buf, event = self.slots[i] or (None, None)
        if event is not None:
            event.synchronize()  # the copy that last read this slot (RING calls ago) is done
        n = t.numel()
        if buf is None or buf.dtype != t.dtype or buf.numel() < n:
            buf = torch.empty(max(n, 1024), dtype=t.dtype).pin_memory()
        self.slots[i] = (buf, None)
        self.taken.append(i)
        view = buf[:n].view(t.shape)
        view.copy_(t)
        return view

    def record(self, torch):
        """After the call: an event on the current stream for every slot handed out (the copies from them are queued)."""
        if self.taken and torch.cuda.is_available():
            for i in self.taken:
                event = torch.cuda.Event()
                event.record()
                self.slots[i] = (self.slots[i][0], event)
        self.taken = []


_RING = PinnedRing()


class PinnedTensors:
    """`torch` as a module sees it: every attribute torch's own, except that torch.tensor(..., device="cpu") comes back
    in a slot of the pinned ring."""

    def __init__(self, torch):
        self._torch = torch

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def tensor(self, *args, **kwargs):
        t = self._torch.tensor(*args, **kwargs)
        return _RING.take(self._torch, t) if kwargs.get("device") == "cpu" else t


PREPARE = "sglang.srt.speculative.eagle_utils.eagle_prepare_for_decode"


def pinned_prepare(original, batch, *args, **kwargs):
    """AROUND eagle_prepare_for_decode: its module's `torch` pins the CPU tensors it builds, for this call only (the
    scheduler thread is the only caller)."""
    import sglang.srt.speculative.eagle_utils as module

    real = module.torch
    module.torch = PinnedTensors(real)
    try:
        return original(batch, *args, **kwargs)
    finally:
        module.torch = real
        _RING.record(real)


def _install() -> None:
    if os.environ.get("PINNED_LENS") == "1":
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType

        HookRegistry.register(PREPARE, pinned_prepare, HookType.AROUND)
    folder = os.environ.get("STEP_CLOCK_DIR")
    if not folder:
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from sglang_kimi_eagle3.integration.hooks import step_clock

    step_clock.enable_everywhere()
    HookRegistry.register(TARGET, step_clock._forward, HookType.AROUND)
    period = float(os.environ.get("STEP_CLOCK_PERIOD_S", "5"))
    threading.Thread(target=_writer, args=(step_clock, folder, period), name="plain-step-clock", daemon=True).start()


_chain()
try:
    _install()
except Exception as exc:  # a benchmark aid: never stop the server it rides in
    print(f"plain_clock: not installed: {type(exc).__name__}: {exc}", file=sys.stderr)
