"""The serving_compiles row: Triton compiles after the server is ready, counted through Triton's own listener and
chained with SGLang 0.5.23's own (sglang/srt/utils/triton_load_watch.py), whichever installs first.

A compile cannot happen on this CPU (the interpreter compiles nothing), so the listener is called the way
`triton.compile` calls it (triton/compiler/compiler.py: keyword arguments src, metadata, metadata_group, times,
cache_hit), with Triton's own ASTSource and CompileTimes."""

from __future__ import annotations

import logging

import pytest
import triton
import triton.knobs as knobs
import triton.language as tl
from helpers import triton_source
from triton.compiler import ASTSource

from sglang_kimi_eagle3.base import logger
from sglang_kimi_eagle3.integration.hooks import serving_compiles as sc
from sglang_kimi_eagle3.status import hookstatus

LOGGER = logger().name

watch = pytest.importorskip("sglang.srt.utils.triton_load_watch")  # the real installed SGLang


@triton.jit
def _fwd_kernel(x_ptr, n, BLOCK: tl.constexpr):  # named like SGLang's extend attention, the run-6 stall
    pass


def _compile_event(seconds: float, cache_hit: bool = False) -> dict:
    src = ASTSource(fn=_fwd_kernel, signature={"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                    constexprs={"BLOCK": 16})
    times = knobs.CompileTimes(ir_initialization=int(seconds * 1e6), lowering_stages=[], store_results=0)
    return {"src": src, "metadata": {}, "metadata_group": {}, "times": times, "cache_hit": cache_hit}


@pytest.fixture
def clean():
    """Triton's listener, SGLang's watch state and our counts as they were."""
    before = (knobs.compilation.listener, watch._installed, watch._prev_compile_listener, watch._serving_started)
    sc.stop()
    yield
    sc.stop()
    if watch._installed and before[1] is False:
        knobs.runtime.kernel_load_start_hook.remove(watch._on_kernel_load)
    knobs.compilation.listener, watch._installed, watch._prev_compile_listener, watch._serving_started = before


def test_counts_after_serving_started_and_keeps_sglangs_listener_installed_after_ours(clean, caplog):
    assert sc.start() is None and knobs.compilation.listener is sc.listener
    watch._installed, watch._serving_started = False, False
    watch.install()  # the scheduler installs SGLang's after our publish: SGLang's wraps ours
    assert knobs.compilation.listener is watch._on_compilation and watch._prev_compile_listener is sc.listener
    knobs.compilation.listener(**_compile_event(2.0))  # before serving: SGLang's flag off, nothing counted
    assert not sc.COMPILES
    watch.mark_serving_started()
    before = hookstatus.calls()
    with caplog.at_level(logging.WARNING, logger=watch.__name__), caplog.at_level(logging.INFO, logger=LOGGER):
        knobs.compilation.listener(**_compile_event(1.59))
        knobs.compilation.listener(**_compile_event(0.2))  # under SGLang's 1 s threshold: only we count it
        knobs.compilation.listener(**_compile_event(0.5, cache_hit=True))
    assert "took 1.59 s to compile after serving started" in caplog.text  # SGLang's own warning still fires
    # and ours: one line per uncached compile, the short one too (its time in the server log), none for the load
    ours = [r.getMessage() for r in caplog.records if "serving-time Triton compile" in r.getMessage()]
    variant = "[not16 x_ptr,n; div16 -; const BLOCK=16]"  # this made-up source has no divisibility attributes
    assert ours == [f"sglang-kimi-eagle3: serving-time Triton compile: _fwd_kernel took 1.59 s (uncached) {variant}",
                    f"sglang-kimi-eagle3: serving-time Triton compile: _fwd_kernel took 0.20 s (uncached) {variant}"
                    ], caplog.text
    assert sc.COMPILES["_fwd_kernel"] == 2 and abs(sc.SECONDS["_fwd_kernel"] - 1.79) < 1e-9
    assert sc.LOADS["_fwd_kernel"] == 1
    row = hookstatus.get(sc.NAME)
    assert row.state == "applied"
    assert row.detail.startswith("2 uncached Triton compiles after serving started (1.8 s): _fwd_kernel x2 (1.8 s)")
    assert "1 loaded from Triton's disk cache" in row.detail
    assert hookstatus.calls() == before + 3  # each event has the status file rewritten


def test_the_log_line_names_the_argument_that_made_a_new_variant(clean, caplog):
    """SGLang's `write_req_to_token_pool_triton` (one of the three small kernels the first traffic at c 4 / 16 still
    compiled on the H200, run 9): an int64 `out_cache_loc` sliced from the allocator's free list at an odd offset is
    not 16-byte aligned, a new variant. The line says which argument (and the tuple elements of `_small_copy_kernel`)."""
    import torch

    common = pytest.importorskip("sglang.kernels.ops.memory.common")
    small = pytest.importorskip("sglang.kernels.ops.memory.small_copy")
    a, table = torch.arange(64, dtype=torch.int64), torch.zeros(4, 4096, dtype=torch.int32)
    w = common.write_req_to_token_pool_triton
    aligned = sc.variant(triton_source(w, table, a[:2], a[2:4], a[4:6], a[6:8], a[8:10], a[10:20], 4096))
    odd = sc.variant(triton_source(w, table, a[:2], a[2:4], a[4:6], a[6:8], a[8:10], a[11:20], 4096))
    assert aligned.startswith("not16 -; div16 req_to_token_ptr,req_pool_indices,prefix_tensors,pre_lens,seq_lens,"
                              "extend_lens,out_cache_loc; const req_to_token_ptr_stride=4096"), aligned
    assert odd.startswith("not16 out_cache_loc; div16 req_to_token_ptr,req_pool_indices,prefix_tensors,pre_lens,"
                          "seq_lens,extend_lens; "), odd
    copy = sc.variant(triton_source(small._small_copy_kernel, (a[:4], a[1:5]), (a[8:12], a[20:24]), (4, 4), (4, 4),
                                   ((0, 1), (0, 1)), ((0, 1), (0, 1)), (64, 64), 256))
    assert copy.startswith("not16 sources[1],sizes[0],sizes[1],cols[0],cols[1]; div16 sources[0],destinations[0],"
                           "destinations[1],"), copy
    watch._serving_started = True
    sc.start()
    event = _compile_event(0.2)
    event["src"] = triton_source(w, table, a[:2], a[2:4], a[4:6], a[6:8], a[8:10], a[11:20], 4096)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        knobs.compilation.listener(**event)
    assert f"write_req_to_token_pool_triton took 0.20 s (uncached) [{odd}]" in caplog.text
    assert sc.variant(object()) == "not16 -; div16 -; const -" and sc.variant(None).startswith("not16 -")


def test_chains_onto_a_listener_installed_before_and_puts_it_back(clean):
    seen = []
    knobs.compilation.listener = lambda **kw: seen.append(kw["cache_hit"])
    prev = knobs.compilation.listener
    watch._serving_started = True
    assert sc.start() is None and sc.start() is None  # idempotent: chained once
    knobs.compilation.listener(**_compile_event(1.0))
    assert seen == [False] and sc.COMPILES["_fwd_kernel"] == 1  # the earlier listener ran, once, and we counted
    sc.stop()
    assert knobs.compilation.listener is prev


def test_a_failing_earlier_listener_still_fails_and_is_still_counted(clean):
    def broken(**kw):
        raise RuntimeError("someone else's listener")

    knobs.compilation.listener = broken
    watch._serving_started = True
    sc.start()
    with pytest.raises(RuntimeError, match="someone else's"):
        knobs.compilation.listener(**_compile_event(1.0))  # not ours to swallow
    assert sc.COMPILES["_fwd_kernel"] == 1


def test_publish_says_what_it_does_where_triton_has_no_listener(clean, monkeypatch):
    sc.on_publish()
    assert hookstatus.get(sc.NAME).state == "applied"
    assert hookstatus.get(sc.NAME).detail == "listening: no Triton compile since serving started"
    sc.stop()
    monkeypatch.delattr(knobs.compilation_knobs, "listener", raising=False)
    monkeypatch.setattr(knobs, "compilation", object())
    sc.on_publish()
    assert hookstatus.get(sc.NAME).state == "skipped" and "no compilation listener" in hookstatus.get(sc.NAME).detail


def test_compiles_after_the_warm_up_marker_are_counted_apart_and_a_stale_marker_is_ignored(clean, tmp_path,
                                                                                           monkeypatch):
    """The warm-up (kimi_eagle3) compiles after serving started too: on the H200 (run 9) 80 of them, all before the
    server listened. Its end marker splits the count; a marker older than this scheduler is a previous launch's."""
    import os
    import time

    from sglang_kimi_eagle3.integration.hooks import runtime_status

    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_STATUS_DIR", str(tmp_path))
    stale = sc.mark_path(30111)
    stale.write_text("{}")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))  # a previous launch on the same port
    monkeypatch.setattr(runtime_status, "_ON_TICK", [])
    monkeypatch.setattr(runtime_status, "_ON_PUBLISH", [])
    sc.install()  # the plugin's install: the listener at publish, the marker poll in the status writer
    assert runtime_status._ON_PUBLISH == [sc.on_publish] and runtime_status._ON_TICK == [sc.tick]
    watch._serving_started = True
    assert sc.start(30111) is None
    knobs.compilation.listener(**_compile_event(0.5))  # during the warm-up
    sc.tick()
    assert not sc.warmup_ended() and not sc.AFTER
    row = hookstatus.get(sc.NAME)
    assert row.detail.endswith("; the kimi_eagle3 warm-up has not ended (or does not run in this launch)")
    before = hookstatus.calls()
    sc.mark_warmup_done(30111, "applied: 3 batches")  # what traffic_warmup's coroutine does at its end
    assert sc.mark_path(30111).name == "warmup-port30111.json"
    sc.tick()  # the status writer's poll: the row says so and the file is rewritten
    assert hookstatus.calls() == before + 1
    assert hookstatus.get(sc.NAME).detail.endswith("; after the kimi_eagle3 warm-up ended: 0 (0.0 s)")
    sc.tick()
    assert hookstatus.calls() == before + 1  # once
    knobs.compilation.listener(**_compile_event(0.25))
    assert sc.COMPILES["_fwd_kernel"] == 2 and sc.AFTER["_fwd_kernel"] == 1
    detail = hookstatus.get(sc.NAME).detail
    assert detail.startswith("2 uncached Triton compiles after serving started (0.8 s)")
    assert detail.endswith("; after the kimi_eagle3 warm-up ended: 1 (0.2 s): _fwd_kernel x1 (0.2 s)"), detail


def test_without_a_port_nothing_is_split_and_a_broken_tick_leaves_the_writer(clean, monkeypatch, caplog):
    from sglang_kimi_eagle3.integration.hooks import runtime_status

    watch._serving_started = True
    assert sc.start() is None
    knobs.compilation.listener(**_compile_event(0.5))
    assert not sc.warmup_ended() and not sc.AFTER

    def broken():
        raise OSError("the status folder went away")

    monkeypatch.setattr(runtime_status, "_ON_TICK", [broken, sc.tick])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        runtime_status._run_ticks()
        runtime_status._run_ticks()
    assert runtime_status._ON_TICK == [sc.tick]  # dropped once, the others kept
    assert caplog.text.count("dropped after OSError: the status folder went away") == 1
