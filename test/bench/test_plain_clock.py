"""benchmark/serving/plain_clock: on a plain server (the benchmark's comparison for ours' step_clock row), a fresh
interpreter with the folder on PYTHONPATH runs its sitecustomize: after SGLang's own load_plugins() the plain worker's
forward_batch_generation routes through the step_clock's launch timer, which times this launch's decode steps (the
plugin alone would not: not an EAGLE launch), and the medians land in $STEP_CLOCK_DIR/plain-pid<PID>.txt, labelled
plain decoding, the ledger of the loop's time beside it (ledger-plain-pid<PID>.json). The decode steps are driven the way HookRegistry's AROUND wrapper calls the timer (SGLang's method
itself needs a GPU and a model)."""

import json
import re
import subprocess
import sys

import pytest
from helpers import ROOT, clean_env, pythonpath

pytest.importorskip("sglang.srt.managers.tp_worker")
pytestmark = pytest.mark.slow

CODE = r"""
import json, os, time, types
import sglang.srt.plugins as plugins
plugins.load_plugins()
from sglang.srt.managers.tp_worker import TpModelWorker
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang_kimi_eagle3.integration import registry
from sglang_kimi_eagle3.integration.hooks import step_clock as sc
from sglang.srt.managers.schedule_batch import ScheduleBatch
from sglang.srt.model_executor.runner_backend.full_cuda_graph_backend import FullCudaGraphBackend
hooked = registry._chain_contains(TpModelWorker.forward_batch_generation, sc._forward)
parts = [registry._chain_contains(ScheduleBatch.prepare_for_decode, sc._prepare),
         registry._chain_contains(FullCudaGraphBackend.replay, sc._replay)]  # the plugin's, as in any launch
batch = types.SimpleNamespace(forward_mode=ForwardMode.DECODE, is_extend_in_batch=False)
t_start = time.time()
for _ in range(40):  # launch (1 ms of host), then the previous result's wait and processing (the plugin's timer around it), then the rest
    sc._forward(lambda w, b: time.sleep(0.001), object(), batch)
    sc._results(lambda p, b, r: time.sleep(0.0005), object(), object(),
                types.SimpleNamespace(copy_done=types.SimpleNamespace(synchronize=lambda: time.sleep(0.004))))
    time.sleep(0.001)
t_end = time.time()
time.sleep(1.0)
d = os.environ["STEP_CLOCK_DIR"]
files = sorted(os.listdir(d))
text = [open(os.path.join(d, f)).read() for f in files if f.startswith("plain-pid")]
ledger = [json.load(open(os.path.join(d, f))) for f in files if f.startswith("ledger-plain-pid")]
print(json.dumps({"hooked": hooked, "parts": parts, "all": sc._ALL[0], "files": files, "text": text[0] if text else None,
                  "ledger": ledger[0] if ledger else None, "t": [t_start, t_end]}))
"""


def test_a_plain_servers_decode_steps_are_timed_and_written(tmp_path):
    env = clean_env(STEP_CLOCK_DIR=str(tmp_path / "clock"), STEP_CLOCK_PERIOD_S="0.2")
    env["PYTHONPATH"] = pythonpath(ROOT / "benchmark" / "serving" / "plain_clock")
    cp = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300, env=env, cwd=str(ROOT))
    assert cp.returncode == 0, cp.stderr[-3000:]
    out = json.loads(cp.stdout.strip().splitlines()[-1])
    assert out["hooked"] and out["all"] and out["parts"] == [True, True]  # its preparation and graph launches too
    pid = out["files"][-1][len("plain-pid"):-len(".txt")]
    assert out["files"] == [f"ledger-plain-pid{pid}.json", f"plain-pid{pid}.txt"], out["files"]
    # the ledger: the 39 closed intervals of 6.5 ms each (1 + 4 + 0.5 + 1 ms of sleeps: the loop's whole time) under
    # plain decoding's kind, in copies stamped with the wall clock within the run (a sleep never returns early)
    copies = out["ledger"]["copies"]
    assert copies and all(out["t"][0] <= t <= out["t"][1] + 1.0 for t, _ in copies), (copies, out["t"])
    seconds, intervals, requests = copies[-1][1]["decode"]
    assert intervals == 39 and requests == 0 and seconds >= 39 * 6.5e-3, copies[-1]
    assert list(copies[-1][1]) == ["decode"]
    text = out["text"]
    assert text.startswith("plain decoding: 39 steps read") and text.rstrip().endswith("GPU-bound"), text
    # the 0.5-ms sleep after the wait is read as the result's processing (a sleep never returns early; no upper bound:
    # a loaded box may oversleep)
    got = re.search(r"the previous step's results ([\d.]+)", text)
    assert got and float(got.group(1)) >= 0.45, text


def test_without_the_folder_set_nothing_is_queued(monkeypatch):
    """Loaded where STEP_CLOCK_DIR is unset (every other process on a box with the folder on its path): inert."""
    import importlib.util

    from sglang.srt.plugins.hook_registry import HookRegistry

    from sglang_kimi_eagle3.integration.hooks import step_clock

    monkeypatch.delenv("STEP_CLOCK_DIR", raising=False)
    monkeypatch.setattr(HookRegistry, "register", classmethod(lambda cls, *a, **k: pytest.fail(f"queued: {a}")))
    path = ROOT / "benchmark" / "serving" / "plain_clock" / "sitecustomize.py"
    spec = importlib.util.spec_from_file_location("plain_clock_under_test", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert step_clock._ALL == [False]


PINNED = r"""
import json, torch
import sglang.srt.plugins as plugins
plugins.load_plugins()
import sitecustomize as site
import sglang.srt.speculative.eagle_utils as eu
from sglang_kimi_eagle3.integration import registry
print(json.dumps({"hooked": registry._chain_contains(eu.eagle_prepare_for_decode, site.pinned_prepare)}))
"""


def test_pinned_lens_routes_sglangs_prepare_through_pinned_cpu_tensors(monkeypatch):
    """DA_PINNED's server: with PINNED_LENS=1, after SGLang's load_plugins() eagle_prepare_for_decode runs with its
    module's torch.tensor(..., device="cpu") pinned, for that call only; other tensors and attributes are torch's own.
    (pin_memory needs a CUDA driver: here Tensor.pin_memory is a stand-in that marks the tensor.)"""
    import importlib.util

    import torch

    env = clean_env(PINNED_LENS="1")
    env["PYTHONPATH"] = pythonpath(ROOT / "benchmark" / "serving" / "plain_clock")
    cp = subprocess.run([sys.executable, "-c", PINNED], capture_output=True, text=True, timeout=300, env=env, cwd=str(ROOT))
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert json.loads(cp.stdout.strip().splitlines()[-1]) == {"hooked": True}

    import sglang.srt.speculative.eagle_utils as eu

    monkeypatch.delenv("STEP_CLOCK_DIR", raising=False)
    monkeypatch.delenv("PINNED_LENS", raising=False)
    spec = importlib.util.spec_from_file_location("plain_clock_pinned", ROOT / "benchmark" / "serving" / "plain_clock" / "sitecustomize.py")
    site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site)
    pinned = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda t: pinned.append(t.tolist()) or t, raising=False)

    def sglang_prepare(batch):  # as eagle_prepare_for_decode builds its two length tensors
        cur = eu.torch.tensor(batch, dtype=eu.torch.int32, device="cpu")
        other = eu.torch.tensor([9])
        return cur, other, eu.torch.int32

    real = eu.torch
    cur, other, dtype = site.pinned_prepare(sglang_prepare, [5, 7])
    assert cur.tolist() == [5, 7] and cur.dtype == torch.int32 and dtype is torch.int32 and other.tolist() == [9]
    assert len(pinned) == 1 and len(pinned[0]) == 1024  # one ring slot, pinned once
    assert eu.torch is real  # restored after the call
    # the ring: 8 slots, each pinned once and then reused (a later tensor of another length reads its own values)
    for k in range(1, 9):
        cur, _, _ = site.pinned_prepare(sglang_prepare, list(range(k)) or [0])
        assert cur.tolist() == (list(range(k)) or [0])
    assert len(pinned) == site.PinnedRing.RING and site._RING.next == 1
    big = list(range(2000))  # larger than the slot: that slot grows
    assert site.pinned_prepare(sglang_prepare, big)[0].tolist() == big and len(pinned[-1]) == 2000
    with pytest.raises(ZeroDivisionError):
        site.pinned_prepare(lambda b: 1 / 0, None)
    assert eu.torch is real  # and after a failing one
