"""Measured costs in this plugin's controller, on SGLang's real AdaptiveStepSlot: the time between verify results
recalibrates the modelled costs, and at TP > 1 every rank applies TP rank 0's readings (a broadcast over SGLang's own
TP group, gloo on CPU here), so the ranks switch together."""

import json
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest

from sglang_kimi_eagle3.base import ENV_ADAPTIVE_MEASURE
from sglang_kimi_eagle3.integration.hooks import adaptive_control as hook
from sglang_kimi_eagle3.planner import adaptive_table as T, profiles
from sglang_kimi_eagle3.planner.costs import from_profile
from sglang_kimi_eagle3.status import hookstatus

AdaptiveStepSlot = pytest.importorskip("sglang.srt.speculative.adaptive_spec_params").AdaptiveStepSlot
CHILD = Path(__file__).with_name("tp_sync_child.py")


def _cfg():
    # the seed's bs-128 slot with the states [0, 1, 3] (a budget that keeps 7 out)
    return T.table(from_profile(profiles.load(profiles.DEFAULT_PROFILE)), [1, 128], operator_steps=3, budget_gb=13.0,
                   state_gb=lambda s: T.state_memory_gb(s, 163840, 128))["128"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("measure", ["on", "off"])
def test_a_state_slower_than_modelled_is_left_at_tp1(monkeypatch, measure):
    """Steps 3 runs at 3x its modelled round: measured, the slot leaves it at the dwell's end; with
    SGLANG_KIMI_EAGLE3_ADAPTIVE_MEASURE=off the model's choice stands."""
    monkeypatch.setenv(ENV_ADAPTIVE_MEASURE, measure)
    monkeypatch.setattr(hook, "_SYNC", [])
    cfg = _cfg()
    slot = AdaptiveStepSlot(initial_steps=3, cfg=cfg)  # SGLang's class, unhooked here
    hook.attach(slot, cfg[T.KEY])
    ctl, now = slot._kimi_eagle3_ctl, [0.0]
    monkeypatch.setattr(hook, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(hook, "_CORR", {})
    hookstatus.record(hook.NAME, hook.TARGET, "applied", "around hook")  # as refresh() finds it after load_plugins
    before = hookstatus.counters(hook.NAME).get(hook.NAME, {}).get("ours", {}).get("measured", 0)
    for _ in range(ctl.dwell_batches + 8):
        s = slot.current_steps
        now[0] += ctl.modelled_us(s) * (3.0 if s == 3 else 1.0) / 1e6
        slot.update([min(s, 3)] * 6 + [0, 1])  # accept length ~3.4 at steps 3
    syncs = hookstatus.counters(hook.NAME).get(hook.NAME, {}).get("ours", {}).get("measured", 0) - before
    if measure == "off":
        assert slot.current_steps == 3 and not ctl.corr and syncs == 0
        assert hookstatus.get(hook.NAME).detail == "around hook"
    else:
        assert slot.current_steps == 1 and abs(ctl.corr[3] - 3.0) < 1e-6 and syncs == ctl.syncs >= 2
        # the status row says what the controller measured, per slot
        assert hookstatus.get(hook.NAME).detail.startswith("around hook; measured step time / modelled: bs 128: ")
        assert "steps 3 x3.00" in hookstatus.get(hook.NAME).detail


def test_idle_gaps_are_not_read_as_steps(monkeypatch):
    monkeypatch.setattr(hook, "_SYNC", [])
    monkeypatch.setattr(hook, "_LAST", [None])
    cfg = _cfg()
    slot = AdaptiveStepSlot(initial_steps=3, cfg=cfg)
    hook.attach(slot, cfg[T.KEY])
    ctl, now = slot._kimi_eagle3_ctl, [100.0]
    monkeypatch.setattr(hook, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    for gap in (0.0, 0.05, 0.05, 0.05, hook.MAX_WALL_S + 1, 0.05):
        now[0] += gap
        slot.update([3] * 8)
    # the first call has no previous result, the next is a settle batch; then two steps, the gap skipped, one more
    assert ctl.samples[3] == pytest.approx([50000.0 / ctl.modelled_us(3)] * 3)


def test_an_interval_holding_a_serving_time_compile_is_not_read(monkeypatch):
    """Run 24 (H200, 2026-12-04, the plugin's warm-up off): ours compiled its verify kernels while serving, 0.1-1.4 s
    each; such an interval is no decode step. Triton's compilation listener, as serving_compiles chains it, breaks the
    adaptive clock; a load from Triton's disk cache does not."""
    import importlib.util

    from sglang_kimi_eagle3.integration.hooks import serving_compiles as sc

    spec = importlib.util.spec_from_file_location("_sc_tests", Path(__file__).with_name("test_serving_compiles.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _compile_event = mod._compile_event  # Triton's own ASTSource and CompileTimes, as triton.compile hands them

    monkeypatch.setattr(hook, "_SYNC", [])
    monkeypatch.setattr(hook, "_LAST", [None])
    monkeypatch.setattr(sc, "serving_started", lambda: True)
    monkeypatch.setitem(sc._STATE, "prev", None)
    cfg = _cfg()
    slot = AdaptiveStepSlot(initial_steps=3, cfg=cfg)
    hook.attach(slot, cfg[T.KEY])
    ctl, now = slot._kimi_eagle3_ctl, [100.0]
    monkeypatch.setattr(hook, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    for i in range(8):
        now[0] += 0.05 if i not in (4, 6) else 0.9
        if i == 4:
            sc.listener(**_compile_event(0.85))  # inside the interval that ends at verify 4: not read
        if i == 6:
            sc.listener(**_compile_event(0.85, cache_hit=True))  # a disk-cache load: the interval is read as it is
        slot.update([3] * 8)
    # verify 0 has no previous result and 1 settles; 2, 3, 5 and 7 read 50 ms, 6 its 900 ms (the cache load); 4, the
    # 900 ms holding the compile, is not read (the clock restarts there)
    assert ctl.samples[3] == pytest.approx([x / ctl.modelled_us(3) for x in (5e4, 5e4, 5e4, 9e5, 5e4)])


def _two_ranks(mode: str) -> list[dict]:
    out = subprocess.run([sys.executable, str(CHILD), str(_port()), mode], capture_output=True, text=True, timeout=300)
    rows = sorted((json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")), key=lambda r: r["rank"])
    assert len(rows) == 2 and not any("error" in r for r in rows), out.stdout[-3000:] + out.stderr[-3000:]
    return rows


def test_tp_ranks_with_different_clocks_switch_together_on_rank_zeros_readings():
    """Rank 0 reads steps 3 at 3x its model, rank 1 as modelled. Synced, both leave 3 at the same batch and hold the
    same corrections; each on its own readings (what the sync prevents), rank 1 would stay at 3 (read as modelled,
    nothing beats it: back there after reading the off-state) while rank 0 left it for 1: SGLang would then run
    different states on the ranks of one TP group.
    The first decision comes after a probe's worth of batches (32): a visit to the unread off-state (a probe's worth of
    requests, 4 batches of 8 here), then to the unread steps 1, which wins."""
    synced = _two_ranks("sync")
    assert synced[0]["trace"] == synced[1]["trace"] == [[31, 0], [37, 1]]
    assert synced[0]["corr"] == synced[1]["corr"] and synced[0]["syncs"] == synced[1]["syncs"] > 0
    assert synced[1]["measured"]["adaptive_control"]["ours"]["measured"] == synced[1]["syncs"]
    alone = _two_ranks("own")
    assert alone[0]["trace"] == [[31, 0], [37, 1]] and alone[1]["trace"] == [[31, 0], [37, 3]]


CLOCK = r'''
import json, warnings
warnings.filterwarnings("ignore")
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang_kimi_eagle3.integration import refresh_status
from sglang_kimi_eagle3.integration.hooks import adaptive_control as hook
from sglang_kimi_eagle3.status import hookstatus
from sglang.srt.managers.scheduler_components.batch_result_processor import SchedulerBatchResultProcessor as P
refresh_status()
hook._LAST[0] = 123.0
try:  # SGLang's own method, as the scheduler calls it; its body fails on these stand-ins after our before hook ran
    P.process_batch_result_prefill(object(), None, None)
except Exception as exc:
    err = type(exc).__name__
row = hookstatus.get(hook.CLOCK)
print(json.dumps({"row": [row.state, row.detail], "last": hook._LAST[0], "err": err}))
'''


@pytest.mark.parametrize("measure", ["on", "off"])
def test_a_prefill_result_ends_the_interval_on_sglangs_own_processor(measure):
    """The adaptive_clock hook on SGLang's real SchedulerBatchResultProcessor.process_batch_result_prefill: a prefill
    between two decode results makes the next decode result start a new interval, not read a prefill as a step."""
    from helpers import run_json

    r = run_json(CLOCK, SGLANG_KIMI_EAGLE3_ADAPTIVE_MEASURE=measure)
    if measure == "on":
        assert r["row"][0] == "applied" and r["last"] is None, r
    else:
        assert r["row"][0] == "skipped" and "costs stay modelled" in r["row"][1] and r["last"] == 123.0, r


def test_the_row_shows_the_readings_and_where_the_off_state_is_priced_from_the_positive_ones():
    cfg = _cfg()
    slot = AdaptiveStepSlot(initial_steps=3, cfg=cfg)
    hook.attach(slot, cfg[T.KEY])
    ctl = slot._kimi_eagle3_ctl
    ctl.corr, ctl.reads = {0: 1.37, 3: 0.53}, {0: 12, 3: 200}  # run 24's bs-1 slot: the off-state read dearer
    assert hook._corr_text(ctl, 0, 1.37) == "steps 0 x1.37 (12 read here; priced x0.53)"
    assert hook._corr_text(ctl, 3, 0.53) == "steps 3 x0.53 (200 read here)"
    ctl.corr = {0: 0.45, 3: 0.83}
    assert hook._corr_text(ctl, 0, 0.45) == "steps 0 x0.45 (12 read here)"
    # the raw readings' median beside the ratio: comparable with the step clock's medians (run 37's bs-8 slot read
    # steps 3 at x1.09 of a model time nobody sees; its milliseconds are what the step clock also shows)
    ctl.measure, ctl.batches, ctl.steps = True, ctl.settle_batches + 1, 3
    for w in [40_000.0] * 70 + [36_000.0] * 30 + [52_000.0] * 33:
        ctl.observe(w)
    assert ctl.reads[3] == 333 and len(ctl.walls[3]) == 64  # the latest 64 kept (all of them: 40 ms)
    assert hook._corr_text(ctl, 3, 0.83) == "steps 3 x0.83 (333 read here, latest median 52.0 ms)"
