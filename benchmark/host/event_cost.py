"""What the step clock's GPU timing costs the scheduler's host: CUDA timing events, and the hook with and without them.

Why: the `step_clock` hook times one decode step in GPU_EVERY on the GPU with CUDA timing events (five records on the
launch's stream, a query and four reads once the GPU passed them). In a GPU-bound step host time is hidden, in a
host-bound one it is not; this measures it on the GPU machine, with no server:
  - the primitives, host µs per call: creating an event, recording it behind a busy stream, querying a completed one,
    `elapsed_time` of two completed ones;
  - the hook's own functions (`_forward` around a launch whose verify and draft extend run inside it, then `_results`
    waiting on a real `copy_done` event), driven as SGLang's overlap scheduler calls them, around launches that only
    queue a short sleep kernel: host µs per decode step with the GPU timing on, and with it off (the same functions,
    the batch's lengths on the CPU), in alternated rounds; the difference is the GPU timing's cost per step
    (amortised over GPU_EVERY steps).

    python3 benchmark/host/event_cost.py [--steps 4000] [--rounds 5] [--json FILE]     (repository root)

Needs a CUDA GPU and PyTorch only (the hook module imports without SGLang).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


def _per_call_us(fn, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n / 1000.0


def primitives(torch, n: int) -> dict:
    """Host µs per call of the event operations the hook uses."""
    torch.cuda._sleep(10_000_000)  # a busy stream for the records
    out = {"create": _per_call_us(lambda: torch.cuda.Event(enable_timing=True), n)}
    events = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    it = iter(events)
    out["record (busy stream)"] = _per_call_us(lambda: next(it).record(), n)
    torch.cuda.synchronize()
    out["query (completed)"] = _per_call_us(events[0].query, n)
    out["elapsed_time (completed)"] = _per_call_us(lambda: events[0].elapsed_time(events[1]), n)
    return out


def hook_steps(torch, steps: int, timed: bool) -> float:
    """Host µs per decode step of the step clock's functions around no-op launches, with the GPU timing on or off."""
    from sglang_kimi_eagle3.integration.hooks import step_clock as hook

    hook.reset()
    hook.enable_everywhere()
    device = "cuda" if timed else "cpu"  # the hook times the GPU where the batch's lengths live on a CUDA device
    batch = types.SimpleNamespace(forward_mode=types.SimpleNamespace(is_decode=lambda: True), is_extend_in_batch=False,
                                  seq_lens=torch.zeros(8, dtype=torch.int64, device=device))
    worker = types.SimpleNamespace(speculative_num_steps=0)

    def verify(w, b):
        torch.cuda._sleep(2000)

    def extend(dw, b):
        torch.cuda._sleep(500)

    def launch(w, b):
        hook._part("verify")(verify, w, b)
        hook._part("extend")(extend, object(), b)

    def process(p, b, r):
        return None

    dones = [torch.cuda.Event() for _ in range(2)]
    t0 = time.perf_counter_ns()
    for i in range(steps):
        hook._forward(launch, worker, batch)
        done = dones[i % 2]
        done.record()
        hook._results(process, object(), batch, types.SimpleNamespace(copy_done=dones[(i + 1) % 2]))
    torch.cuda.synchronize()
    us = (time.perf_counter_ns() - t0) / steps / 1000.0
    got = len(hook.GPU.get(0, ()))
    hook.reset()
    if timed and got == 0:
        raise RuntimeError("no GPU reading was taken: the hook did not time the GPU")
    return us


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4000, help="decode steps per round and mode")
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds (timed, untimed)")
    ap.add_argument("--json", help="write the results here (atomically)")
    a = ap.parse_args(argv)
    if a.steps < 16 or a.rounds < 1:
        ap.error("--steps takes an integer >= 16, --rounds a positive integer")
    import torch

    if not torch.cuda.is_available():
        print("event_cost: no CUDA GPU here; run it on the GPU machine", file=sys.stderr)
        return 2
    from sglang_kimi_eagle3.integration.hooks import step_clock as hook

    prim = primitives(torch, 2000)
    hook_steps(torch, 64, True)  # warm-up
    rows = {"timed": [], "untimed": []}
    for r in range(a.rounds):
        for mode in (("timed", "untimed") if r % 2 == 0 else ("untimed", "timed")):
            rows[mode].append(hook_steps(torch, a.steps, mode == "timed"))
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    print("  event primitives, host µs per call: " + ", ".join(f"{k} {v:.2f}" for k, v in prim.items()))
    print(f"  step clock, host µs per decode step (median of {a.rounds} rounds of {a.steps}): with GPU timing "
          f"(1 step in {hook.GPU_EVERY}) {med['timed']:.2f}, without {med['untimed']:.2f}: "
          f"{med['timed'] - med['untimed']:.2f} per step")
    if a.json:
        doc = {"what": __doc__.splitlines()[0], "device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "cuda": torch.version.cuda, "python": platform.python_version(), "gpu_every": hook.GPU_EVERY,
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "primitives_us": prim,
               "step_us": rows, "step_us_median": med, "gpu_timing_us_per_step": med["timed"] - med["untimed"]}
        from sglang_kimi_eagle3.atomic import write_atomic

        write_atomic(a.json, json.dumps(doc, indent=1), mkdir=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
