"""Benchmarks only: the plugin's step_clock on a PLAIN server (no speculation), to set ours' decode steps against.

`device_adaptive.sh` puts this folder first on the plain server's PYTHONPATH, so every Python process of that server
(the HTTP server, its schedulers) runs this file at start. It queues, with SGLang's HookRegistry (applied by SGLang's
own load_plugins() in each process, as for the plugin), the step_clock's launch timer around
`TpModelWorker.forward_batch_generation` and turns it on for this launch (`step_clock.enable_everywhere()`); the
plugin, loaded in that server as in any, already queues the GPU-wait timer (`process_batch_result_decode`), which reads
only while a launch timer runs. A daemon thread writes the medians (`step_clock.summary()`) every STEP_CLOCK_PERIOD_S
seconds (5) to $STEP_CLOCK_DIR/plain-pid<PID>.txt, atomically, once the process has read a decode step. The plugin
itself never does this: for a launch that is not EAGLE/EAGLE3 with a draft it changes nothing.
A sitecustomize further on sys.path (the one this file shadows) is run first.
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
        try:
            text = step_clock.summary()
        except RuntimeError:  # a reading landed while it copied: next period
            continue
        if text and text != last:
            write_atomic(os.path.join(folder, f"plain-pid{os.getpid()}.txt"), text + "\n", mkdir=True)
            last = text


def _install() -> None:
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
