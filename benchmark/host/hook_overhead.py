"""Host cost per decode step of this plugin's own hooks (wrapper dispatch + the hook's Python), SGLang's work excluded.

Why: on the H200 (2026-12-04) SGLang's steps-0 off-state took a flat ~10.0 ms a step where plain decoding took
8.7-10.0 ms; is it the host, and how much of the host is ours? This measures, on any machine (no GPU), what each
hook that runs at least once per decode step costs on the host at batch sizes 1/8/32/128.

Method. Each wrapper is built exactly as SGLang's HookRegistry builds it (`hook_registry._wrap_fn`, the same
AROUND/BEFORE closure) around a no-op in place of SGLang's function, and timed (a) against (b) calling that no-op
directly with the same arguments: the overhead is the median of the paired differences a - b over --repeats runs of
--calls calls each (time.perf_counter_ns). Inputs are SGLang's own objects where cheap (ForwardMode, EagleVerifyInput,
ScheduleBatch, SamplingBatchInfo, ForwardBatch, TritonAttnBackend's class and its `_target_verify_num_tokens_per_req`,
`build_replay_fb_view`, AdaptiveSpeculativeParams / AdaptiveStepSlot / AdaptiveController) and stand-ins otherwise:
  - tensors are CPU tensors; where a hook decides on a tensor's device, a stand-in with `.device = cuda:0` and `.shape`
    takes its place and device 0 is named an H200 (as benchmark/kernels/host_lookups.py does), so dispatch takes the
    path an H200 takes (the bundled H200 launch table: our kernel for argmax_verify / tree_sampling at n4_bs*);
  - our Triton kernel launches (ops.argmax_verify_greedy, ops.tree_speculative_sampling) are replaced by no-ops: their
    host launch cost is measured on the GPU by benchmark/kernels/bench_host.py, not here;
  - `seq_lens + 1` in the offstate_attention hook runs on a CPU tensor (on the H200 it is a CUDA launch);
  - step_clock's `copy_done.synchronize()` is a no-op (on the GPU a cudaEventSynchronize that SGLang then repeats);
  - the adaptive controller's clock (`time.perf_counter` inside the hook) is replaced by a simulated clock that
    advances by each state's modelled step time (ratio 1.0 at steps 0, 1.5 at positive steps, acceptance 0.3 per
    position), so the controller reaches the H200's steady off-state (probes that do not pay, back-off at 8192
    batches); the simulated clock's own cost is measured and subtracted.
Calls per step are those of SGLang 0.5.23's EAGLE v2 decode step at steps 0 (forward_batch_generation -> trivial
verify input -> verify (target CUDA-graph replay, eagle_sample) -> draft extend (CUDA-graph replay) -> result
processing (on_verify_complete) -> prepare_for_decode), defaults everywhere (SGLANG_KIMI_EAGLE3_KERNELS=auto,
_OFFSTATE=auto, _OFFSTATE_EXTEND=keep, _STEP_CLOCK=on, _ADAPTIVE=on, _ADAPTIVE_MEASURE=on, _ADAPTIVE_POOL=on, metadata
glue graph off, no --enable-metrics), both runners on SGLang's Triton attention backend.

    python -m benchmark.host.hook_overhead [--bs 1 8 32 128] [--calls 20000] [--repeats 7] [--layers 61]
                                           [--step-ms 10] [--cycles 2] [--no-children]      (repository root)
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import repeat
from types import SimpleNamespace as NS

V = 163840  # Kimi's vocabulary (only a stand-in's shape: nothing is allocated at this width)


def noop(*args, **kwargs):
    return None


class FakeCuda:
    """A tensor stand-in for the hooks that only read `.device` / `.shape` / `.ndim` before our kernel launches."""

    __slots__ = ("shape", "device", "ndim")

    def __init__(self, shape, device):
        self.shape, self.device, self.ndim = tuple(shape), device, len(shape)


# ---- timing ---------------------------------------------------------------------------------------------------------


def _loop_ns(fn, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in repeat(None, n):
        fn()
    return (time.perf_counter_ns() - t0) / n


def paired(a, b, calls: int, repeats: int) -> dict:
    """Median ns per call of a and of b, and the median of their paired differences, in µs."""
    for f in (a, b):
        for _ in range(min(calls, 2000)):
            f()
    ta, tb = [], []
    for _ in range(repeats):
        gc.collect()
        ta.append(_loop_ns(a, calls))
        tb.append(_loop_ns(b, calls))
    return {"wrapped_us": statistics.median(ta) / 1e3, "direct_us": statistics.median(tb) / 1e3,
            "overhead_us": statistics.median(x - y for x, y in zip(ta, tb)) / 1e3}


# ---- setup shared by the rows ---------------------------------------------------------------------------------------


def setup_process():
    """This process as a scheduler of an EAGLE3 launch on an H200 sees it (no GPU needed)."""
    import torch

    from sglang_kimi_eagle3.integration import launch_record
    from sglang_kimi_eagle3.ops import tables

    launch_record._OURS[0] = True  # our_launch(): SGLang published an EAGLE3 spec config with a draft
    tables._DEVICE_KEYS[0] = ("NVIDIA H200", (9, 0))  # device 0 named an H200: the bundled H200 launch table
    return torch


def verify_objects(torch, bs: int, greedy: bool = True):
    """SGLang's own (EagleVerifyInput, ScheduleBatch) of the off-state's trivial verify input: one node per request
    (draft_token_num 1, spec_steps 0, topk 1), as _build_trivial_verify_input makes it."""
    from sglang_kimi_eagle3.integration.verify_batch import greedy_verify_batch

    cand = torch.zeros((bs, 1), dtype=torch.int64)
    ridx = torch.arange(bs, dtype=torch.long).unsqueeze(1)
    nxt = torch.full((bs, 1), -1, dtype=torch.long)
    vi, batch = greedy_verify_batch(torch, cand, ridx, nxt, nxt.clone(), depth=0, vocab=V, topk=1)
    if not greedy:
        batch.sampling_info.is_all_greedy = False
        batch.sampling_info.is_any_greedy = False
    return vi, batch


# ---- rows -----------------------------------------------------------------------------------------------------------

ROWS: list[dict] = []


def row(key, hook, target, calls, per_bs, note="", scenario="graph"):
    ROWS.append({"key": key, "hook": hook, "target": target, "calls": calls, "per_bs": per_bs, "note": note,
                 "scenario": scenario})


def bench_step_clock(torch, bss, a):
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

    from sglang_kimi_eagle3.integration.hooks import step_clock as sc

    sc.reset()
    worker = NS(speculative_num_steps=0)
    draft_worker = NS()
    processor = NS()
    result = NS(copy_done=NS(synchronize=noop))  # stand-in for a CUDA event (see the module docstring)
    w_fwd = _wrap_fn(noop, sc._forward, HookType.AROUND)
    w_ver = _wrap_fn(noop, sc._part("verify"), HookType.AROUND)
    w_ext = _wrap_fn(noop, sc._part("extend"), HookType.AROUND)
    w_wait = _wrap_fn(noop, sc._results, HookType.AROUND)
    w_ctl = _wrap_fn(noop, sc._part("control"), HookType.AROUND)
    w_prep = _wrap_fn(noop, sc._prepare, HookType.AROUND)
    w_replay = _wrap_fn(noop, sc._replay, HookType.AROUND)
    w_dpre = _wrap_fn(noop, sc._draft_prefill, HookType.AROUND)
    backend = NS()
    out = {k: {} for k in ("fwd", "ver", "ext", "wait", "ctl", "prep", "replay", "dpre")}
    for bs in bss:
        batch = NS(forward_mode=ForwardMode.DECODE, is_extend_in_batch=False, seq_lens=torch.zeros(bs))
        out["fwd"][bs] = paired(lambda: w_fwd(worker, batch), lambda: noop(worker, batch), a.calls, a.repeats)
        assert sc._OPEN["t0"] is not None and sc._READ.get(0), "step_clock did not time the decode launch"
        out["ver"][bs] = paired(lambda: w_ver(worker, batch), lambda: noop(worker, batch), a.calls, a.repeats)
        out["ext"][bs] = paired(lambda: w_ext(draft_worker, batch, result, kv_loc_plan=None),
                                lambda: noop(draft_worker, batch, result, kv_loc_plan=None), a.calls, a.repeats)
        sc._OPEN["t0"] = time.perf_counter()  # an interval is open (as between two decode launches)
        out["wait"][bs] = paired(lambda: w_wait(processor, batch, result), lambda: noop(processor, batch, result),
                                 a.calls, a.repeats)
        out["ctl"][bs] = paired(lambda: w_ctl(worker, [0] * bs, batch_size=bs), lambda: noop(worker, [0] * bs, batch_size=bs),
                                a.calls, a.repeats)
        out["prep"][bs] = paired(lambda: w_prep(batch), lambda: noop(batch), a.calls, a.repeats)
        out["replay"][bs] = paired(lambda: w_replay(backend, (bs,), batch), lambda: noop(backend, (bs,), batch),
                                   a.calls, a.repeats)
        out["dpre"][bs] = paired(lambda: w_dpre(draft_worker, batch, result), lambda: noop(draft_worker, batch, result),
                                 a.calls, a.repeats)
    W = "eagle_worker_v2.EAGLEWorkerV2"
    row("step_clock", "step_clock", f"{W}.forward_batch_generation (AROUND)", 1, out["fwd"],
        "closes the previous interval (deque append), opens the next; 2 perf_counter")
    row("step_clock_verify", "step_clock_verify", f"{W}.verify (AROUND)", 1, out["ver"], "2 perf_counter, try/finally")
    row("step_clock_draft_extend", "step_clock_draft_extend", "EagleDraftWorker._draft_extend_for_decode (AROUND)", 1,
        out["ext"], "0/step while OffSkip skips the extend (opt-in); with deferred_extend (the default) in one AROUND")
    row("step_clock_wait", "step_clock_wait", "SchedulerBatchResultProcessor.process_batch_result_decode (AROUND)", 1,
        out["wait"], "copy_done.synchronize() stubbed (GPU wait, not host work); times the processing after it")
    row("step_clock_control", "step_clock_control", f"{W}.on_verify_complete_cpu (AROUND)", 1, out["ctl"],
        "2 perf_counter, try/finally")
    row("step_clock_prepare", "step_clock_prepare", "ScheduleBatch.prepare_for_decode (AROUND)", 1, out["prep"])
    row("step_clock_replay", "step_clock_replay", "FullCudaGraphBackend.replay (AROUND)", 2, out["replay"],
        "the target verify's and the draft extend's graph launches")
    row("step_clock_draft_prefill", "step_clock_draft_prefill", "EagleDraftWorker._draft_extend_for_prefill (AROUND)",
        0, out["dpre"], "once per prefill batch, never in a decode step (outside a timed prefill: a pass-through)")


def _backend(torch, draft: bool, fwd_decode=noop):
    """SGLang's TritonAttnBackend class, its instance state set to what the hook reads (no __init__: it needs a
    ModelRunner with pools): a target (draft False) or draft runner of a plain launch (no DCP, DLLM, deterministic
    mode, sliding window, verify split-KV / shared-KV)."""
    from sglang.srt.layers.attention.triton_backend import TritonAttnBackend

    be = object.__new__(TritonAttnBackend)
    be.__dict__.update(is_draft_runner=draft, target_verify_num_tokens_per_req=1, sliding_window_size=None, dcp_size=1,
                       dllm_attention=None, enable_deterministic=False, use_verify_shared_kv=False,
                       use_verify_splitkv=False, forward_decode=fwd_decode,
                       forward_metadata=NS(attn_logits=None if draft else torch.empty(1)))
    return be


def _replay_view(torch, bs: int, mode, spec_info):
    """SGLang's own replay view (decode_cuda_graph_runner.build_replay_fb_view), the object
    init_forward_metadata_out_graph gets at every CUDA-graph replay, over CPU buffers."""
    from sglang.srt.model_executor.runner.decode_cuda_graph_runner import build_replay_fb_view

    i64 = torch.int64
    buffers = NS(input_ids=torch.zeros(bs, dtype=i64), positions=torch.zeros(bs, dtype=i64),
                 req_pool_indices=torch.arange(bs, dtype=i64), seq_lens=torch.full((bs,), 1024, dtype=i64),
                 seq_lens_cpu=torch.full((bs,), 1024, dtype=i64), encoder_lens=None, mamba_track_indices=None)
    fb = NS(forward_mode=mode, seq_lens_sum=1024 * bs, seq_lens_cpu=buffers.seq_lens_cpu, max_seq_len_host=1024,
            out_cache_loc=torch.zeros(bs, dtype=i64), out_cache_loc_virtual=None, kv_loc_plan=None, kv_loc_cols=None,
            max_seq_len_override=None, spec_info=spec_info, lora_ids=None, can_run_decode_cuda_graph=True)
    return build_replay_fb_view(forward_batch=fb, buffers=buffers, bs=bs, raw_bs=bs, num_tokens=bs,
                                global_num_tokens_cpu=None, seq_len_fill_value=1, capture_forward_mode=mode,
                                is_encoder_decoder=False)


def _forward_batch(torch, bs: int, mode, spec_info):
    """A real ForwardBatch (all 131 dataclass fields at their defaults, no __post_init__) of an eager pass."""
    from sglang.srt.model_executor.forward_batch_info import ForwardBatch

    fb = object.__new__(ForwardBatch)
    for f in dataclasses.fields(ForwardBatch):
        if f.default is not dataclasses.MISSING:
            v = f.default
        elif f.default_factory is not dataclasses.MISSING:
            v = f.default_factory()
        else:
            v = None
        object.__setattr__(fb, f.name, v)
    fb.forward_mode, fb.batch_size, fb.spec_info = mode, bs, spec_info
    fb.seq_lens = torch.full((bs,), 1024, dtype=torch.int64)
    fb.seq_lens_cpu = fb.seq_lens.clone()
    fb.seq_lens_sum = 1024 * bs
    return fb


def bench_offstate(torch, bss, a):
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

    from sglang_kimi_eagle3.base import offstate_min_bs
    from sglang_kimi_eagle3.integration.hooks import offstate_attention as oa
    from sglang_kimi_eagle3.status import hookstatus

    oa._MIN_BS[0] = offstate_min_bs() or oa.MIN_BS_AUTO  # install() under the default (auto: every batch)
    tv, dx = ForwardMode.TARGET_VERIFY, ForwardMode.DRAFT_EXTEND_V2
    tgt, drf = _backend(torch, False), _backend(torch, True)
    w_graph = _wrap_fn(noop, oa._init_metadata_out_graph, HookType.AROUND)
    w_eager = _wrap_fn(noop, oa._init_metadata, HookType.AROUND)
    w_fext = _wrap_fn(noop, oa._forward_extend, HookType.AROUND)
    q = k = v = torch.empty(1)
    layer = NS(layer_id=0)
    out = {k_: {} for k_ in ("graph_t", "graph_d", "eager_t", "eager_d", "fext_t", "fext_d")}
    for bs in bss:
        vi, _ = verify_objects(torch, bs)
        view_t, view_d = _replay_view(torch, bs, tv, vi), _replay_view(torch, bs, dx, None)
        fb_t, fb_d = _forward_batch(torch, bs, tv, vi), _forward_batch(torch, bs, dx, None)
        before = hookstatus.counters(oa.NAME).get(oa.NAME, {"ours": {}})["ours"]
        w_graph(tgt, view_t)
        w_eager(tgt, fb_t)
        after = hookstatus.counters(oa.NAME)[oa.NAME]["ours"]
        assert after.get("graph", 0) > before.get("graph", 0) and after.get("eager", 0) > before.get("eager", 0), \
            "offstate_attention did not reroute the one-token verify"
        out["graph_t"][bs] = paired(lambda: w_graph(tgt, view_t), lambda: noop(tgt, view_t), a.calls, a.repeats)
        out["graph_d"][bs] = paired(lambda: w_graph(drf, view_d), lambda: noop(drf, view_d), a.calls, a.repeats)
        out["eager_t"][bs] = paired(lambda: w_eager(tgt, fb_t), lambda: noop(tgt, fb_t), a.calls, a.repeats)
        out["eager_d"][bs] = paired(lambda: w_eager(drf, fb_d), lambda: noop(drf, fb_d), a.calls, a.repeats)
        out["fext_t"][bs] = paired(lambda: w_fext(tgt, q, k, v, layer, fb_t, save_kv_cache=True),
                                   lambda: noop(tgt, q, k, v, layer, fb_t, save_kv_cache=True), a.calls, a.repeats)
        out["fext_d"][bs] = paired(lambda: w_fext(drf, q, k, v, layer, fb_d, save_kv_cache=True),
                                   lambda: noop(drf, q, k, v, layer, fb_d, save_kv_cache=True), a.calls, a.repeats)
    T = "TritonAttnBackend"
    row("offstate_graph_target", "offstate_attention_graph", f"{T}.init_forward_metadata_out_graph (AROUND), target",
        1, out["graph_t"], "reroute: copy.copy(view), seq_lens+1 (CPU here, a CUDA launch on the GPU), "
        "seq_lens_cpu+1, count")
    row("offstate_graph_draft", "offstate_attention_graph", f"{T}.init_forward_metadata_out_graph (AROUND), draft extend",
        1, out["graph_d"], "pass-through (not a target verify)")
    row("offstate_eager_target", "offstate_attention_metadata", f"{T}.init_forward_metadata (AROUND), target", 1,
        out["eager_t"], "reroute: copy.copy of a 131-field ForwardBatch, 2 tensor adds, count", scenario="eager")
    row("offstate_eager_draft", "offstate_attention_metadata", f"{T}.init_forward_metadata (AROUND), draft extend", 1,
        out["eager_d"], "pass-through", scenario="eager")
    row("offstate_fext_target", "offstate_attention", f"{T}.forward_extend (AROUND), target, per layer", a.layers,
        out["fext_t"], f"-> forward_decode; x{a.layers} layers", scenario="eager")
    row("offstate_fext_draft", "offstate_attention", f"{T}.forward_extend (AROUND), draft extend", 1, out["fext_d"],
        "pass-through (draft metadata has no attn_logits)", scenario="eager")


def bench_verify(torch, bss, a):
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

    from sglang_kimi_eagle3.integration.hooks import verify_kernels as vk
    from sglang_kimi_eagle3.ops import argmax_verify as av
    from sglang_kimi_eagle3.status import hookstatus

    cuda0 = torch.device("cuda", 0)
    # our kernels' launches replaced by no-ops (their host launch cost: benchmark/kernels/bench_host.py on a GPU)
    vk._MODS["argmax_verify_greedy"] = NS(HOOK_INIT=av.HOOK_INIT, HOOK_LENS=av.HOOK_LENS, argmax_verify_greedy=noop)
    vk._MODS["tree_speculative_sampling"] = NS(tree_speculative_sampling=noop)
    w_es = _wrap_fn(noop, vk.eagle_sample_hook, HookType.AROUND)
    w_ts = _wrap_fn(noop, vk.tree_sampling_hook, HookType.AROUND)
    out = {k: {} for k in ("greedy", "sampled", "tree")}
    for bs in bss:
        vi, batch = verify_objects(torch, bs, greedy=True)
        _, sbatch = verify_objects(torch, bs, greedy=False)
        lo = NS(next_token_logits=FakeCuda((bs * vi.draft_token_num, V), cuda0), hidden_states=None)
        kw = dict(uno_target_max_top_k=None, watermark_state=None, watermark_full_mask=True)
        key = ("verify_argmax_greedy", "ours", vk.shape_key(bs, 1), "")
        n0 = dict(hookstatus.count_items()).get(key, 0)
        w_es(vi, batch, lo, None, **kw)
        assert dict(hookstatus.count_items()).get(key, 0) == n0 + 1, "eagle_sample hook did not take our kernel"
        out["greedy"][bs] = paired(lambda: w_es(vi, batch, lo, None, **kw), lambda: noop(vi, batch, lo, None, **kw),
                                   a.calls, a.repeats)
        out["sampled"][bs] = paired(lambda: w_es(vi, sbatch, lo, None, **kw), lambda: noop(vi, sbatch, lo, None, **kw),
                                    a.calls, a.repeats)
        cand = FakeCuda((bs, 1), cuda0)
        tkw = dict(predicts=None, accept_index=None, accept_token_num=None, candidates=cand, retrive_index=None,
                   retrive_next_token=None, retrive_next_sibling=None, uniform_samples=None,
                   uniform_samples_for_final_sampling=None, target_probs=None, draft_probs=None, threshold_single=1.0,
                   threshold_acc=1.0, deterministic=True)
        out["tree"][bs] = paired(lambda: w_ts(**tkw), lambda: noop(**tkw), a.calls, a.repeats)
    row("verify_greedy", "verify_argmax_greedy", "eagle_utils.eagle_sample (AROUND), greedy batch", 1, out["greedy"],
        "ours: predicate, why_not (memo), 3 torch.empty (CPU here), reshape, count; kernel launch stubbed")
    row("verify_sampled", "verify_argmax_greedy", "eagle_utils.eagle_sample (AROUND), sampled batch", 1,
        out["sampled"], "not greedy: predicate, why_not, count, SGLang's eagle_sample", scenario="sampled")
    row("verify_tree_sampling", "verify_tree_sampling", "sampling.tree_speculative_sampling_target_only (AROUND)", 1,
        out["tree"], "inside SGLang's eagle_sample for a sampled batch; kernel launch stubbed", scenario="sampled")


def bench_draft_head(torch, bss, a):
    """draft_lm_head's pass-through for the target's LogitsProcessor (only reached eagerly, and only where the hook is
    installed: not under auto on the H200, whose draft-head table lists no win)."""
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

    from sglang_kimi_eagle3.integration.hooks import draft_head_kernels as dh

    w = _wrap_fn(noop, dh._compute_lm_head, HookType.AROUND)
    proc = NS(config=NS(architectures=["DeepseekV3ForCausalLM"]))
    dh.is_draft_processor(proc)
    out = {}
    for bs in bss:
        h = torch.empty((bs, 8))
        out[bs] = paired(lambda: w(proc, h, None, None, out=None), lambda: noop(proc, h, None, None, out=None),
                         a.calls, a.repeats)
    row("draft_lm_head_target", "draft_lm_head", "LogitsProcessor._compute_lm_head (AROUND), target processor", 0, out,
        "not installed under auto on the H200 (no draft-head win); eager passes only", scenario="other")


# ---- the adaptive controller ----------------------------------------------------------------------------------------

RATIO = {0: 1.0}  # measured / modelled step time per state in the simulated clock; positive states 1.5
ALPHA = 0.3


def _adaptive_table():
    from sglang_kimi_eagle3.base import offstate_min_bs
    from sglang_kimi_eagle3.integration import adaptive_default
    from sglang_kimi_eagle3.planner import profiles
    from sglang_kimi_eagle3.planner.adaptive_table import table
    from sglang_kimi_eagle3.planner.costs import from_profile

    # adaptive_default.table_for without the memory budget (no model config here): the default profile, the default
    # batch sizes, --speculative-num-steps 3 (the H200 runs' chain 3/1/4)
    return table(from_profile(profiles.load(profiles.DEFAULT_PROFILE)), list(adaptive_default.BATCH_SIZES),
                 operator_steps=3, max_states=adaptive_default.MAX_STATES, source="benchmark",
                 hooked_from=offstate_min_bs())


def _reset_adaptive(ac):
    from sglang_kimi_eagle3.status import hookstatus

    for lst in (ac._POOL, ac._SLOTS, ac._OFF, ac._SYNC):
        lst.clear()
    ac._LAST[0] = None
    ac._CORR.clear()
    ac._WARNED[:] = [True]  # the once-per-process warning already given (steady state)
    hookstatus.record(ac.NAME, ac.TARGET, "applied", "around hook")  # as registry.refresh() leaves it in a server


def _controller(asp, path, plugin: bool, ac):
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn
    from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController

    orig = asp.AdaptiveStepSlot.__init__
    if plugin:  # the adaptive_control hook as HookRegistry applies it, for this construction only
        asp.AdaptiveStepSlot.__init__ = _wrap_fn(orig, ac._init, HookType.AROUND)
    try:
        params = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=path)
    finally:
        asp.AdaptiveStepSlot.__init__ = orig

    class Worker:
        speculative_num_steps = 3

        def apply_runtime_state(self, state):
            self.speculative_num_steps = state.speculative_num_steps

    ctrl = AdaptiveController(Worker(), params)
    for s in params.candidate_steps:
        ctrl.register(NS(speculative_num_steps=s), s)
    params.set_cuda_graph_bs([1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256])
    return ctrl


def bench_adaptive(torch, bss, a):
    from sglang.srt.speculative import adaptive_spec_params as asp

    from sglang_kimi_eagle3.base import ENV_OFFSTATE_EXTEND
    from sglang_kimi_eagle3.integration.hooks import adaptive_control as ac

    cfg = _adaptive_table()
    fd, path = tempfile.mkstemp(suffix=".json", prefix="adaptive-table-")
    with os.fdopen(fd, "w") as fh:
        json.dump(cfg, fh)
    real_time = ac.time
    out = {k: {} for k in ("ovc", "ovc_skip", "act")}
    detail = {}
    try:
        for variant in ("keep", "skip"):
            if variant == "skip":
                if ac.SKIP_VAR in os.environ:
                    print(f"  (OffSkip row skipped: {ac.SKIP_VAR} is set in this environment)")
                    continue
                os.environ[ENV_OFFSTATE_EXTEND] = "skip"
            try:
                for bs in bss:
                    res = _adaptive_one(torch, asp, ac, path, bs, a, variant)
                    out["ovc" if variant == "keep" else "ovc_skip"][bs] = res["ovc"]
                    if variant == "keep":
                        out["act"][bs] = res["act"]
                        detail[bs] = res["detail"]
            finally:
                os.environ.pop(ENV_OFFSTATE_EXTEND, None)
                os.environ.pop(ac.SKIP_VAR, None)
    finally:
        ac.time = real_time
        os.unlink(path)
        _reset_adaptive(ac)
    row("adaptive_control", "adaptive_control", "AdaptiveStepSlot.update (instance attr, set by the __init__ AROUND "
        "hook), via AdaptiveController.on_verify_complete", 1, out["ovc"],
        "steady off-state cycles: 128 dwell + ~8064 pooled evaluations at 0 + a 32-batch probe at 3, syncs every 64")
    row("adaptive_activate", "(none)", "AdaptiveController.activate_step_by_batch", 1, out["act"],
        "no plugin code on this path: SGLang reads slot.current_steps")
    if out["ovc_skip"]:
        row("adaptive_offskip", "offstate_extend", "same, with SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=skip (opt-in)", 1,
            out["ovc_skip"], "OffSkip's _off_step every batch (replaces the adaptive_control row)", scenario="other")
    return detail


def _adaptive_one(torch, asp, ac, path, bs, a, variant):
    """One batch size: the plugin's controller driven to the steady off-state, then whole back-off cycles timed against
    SGLang's routing with a no-op slot update."""
    _reset_adaptive(ac)
    if variant == "skip":  # the previous batch size's OffSkip left SGLang's variable set: it would read as the operator's
        os.environ.pop(ac.SKIP_VAR, None)
    ctrl = _controller(asp, path, True, ac)
    slot = ctrl.params._route(bs)
    if variant == "skip":
        assert ac._OFF and ac._OFF[0] is not None, "OffSkip not in effect"
    ctl = slot._kimi_eagle3_ctl
    rng = random.Random(bs)

    def counts(s):
        row_ = []
        for _ in range(bs):
            n = 0
            while n < s and rng.random() < ALPHA:
                n += 1
            row_.append(n)
        return row_

    pos = {s: [counts(s) for _ in range(64)] for s in ctl.candidates if s > 0}
    zeros = [0] * bs  # steps 0: every request's verify accepts only the bonus token
    clock_t = [0.0]

    def clock():  # the simulated clock: one step of the state SGLang ran (see the module docstring)
        s = slot.current_steps
        clock_t[0] += ctl.modelled_us(s) * RATIO.get(s, 1.5) * 1e-6
        return clock_t[0]

    ac.time = NS(perf_counter=clock)

    fed = [0]  # batches fed so far: the next positive batch's counts are pos[s][fed & 63]

    def feed(n):
        cur, ovc, k0 = slot, ctrl.on_verify_complete, fed[0]
        for i in range(k0, k0 + n):
            s = cur.current_steps
            ovc(zeros if s == 0 else pos[s][i & 63], bs)
        fed[0] = k0 + n

    # warm up: the launch's steps 3, first decisions, failed probes until the back-off is at its maximum, then stop at
    # the batch a probe hands back to steps 0 (a cycle's start)
    for _ in range(200000):
        s_before = slot.current_steps
        feed(1)
        if (ctl.shared.wait >= ctl.probe_wait_max_batches and ctl.shared.failed_probes >= 3
                and s_before > 0 and slot.current_steps == 0):
            break
    assert slot.current_steps == 0, f"bs {bs}: the controller did not settle in the off-state ({ctl.history[-3:]})"
    cycle = ctl.probe_wait_max_batches + ctl.probe_batches
    n = cycle * a.cycles
    switches0 = ctl.switches
    ta = []
    for _ in range(3):
        gc.collect()
        t0 = time.perf_counter_ns()
        feed(n)
        ta.append((time.perf_counter_ns() - t0) / n)
    switches = ctl.switches - switches0
    steps_ran = slot.current_steps
    # the simulated clock's own cost (one call per update), to subtract
    clk = statistics.median(_loop_ns(clock, 20000) for _ in range(5))
    # SGLang's routing with a no-op slot update, the same feed loop
    base = _controller(asp, path, False, ac)
    bslot = base.params._route(bs)
    for s_ in base.params._slots.values():
        s_.update = lambda counts_, _f=False: _f
    bfeed_cur, bovc = bslot, base.on_verify_complete
    pos_any = next(iter(pos.values()))

    def bfeed(n_):
        for i in range(n_):
            s = bfeed_cur.current_steps
            bovc(zeros if s == 0 else pos_any[i & 63], bs)

    bslot.current_steps = 0
    tb = []
    for _ in range(3):
        gc.collect()
        t0 = time.perf_counter_ns()
        bfeed(n)
        tb.append((time.perf_counter_ns() - t0) / n)
    res = {"ovc": {"wrapped_us": (statistics.median(ta) - clk) / 1e3, "direct_us": statistics.median(tb) / 1e3,
                   "overhead_us": (statistics.median(ta) - clk - statistics.median(tb)) / 1e3,
                   "switches_timed": switches, "batches_timed_x3": 3 * n, "clock_us": clk / 1e3}}
    if variant == "keep":
        # activate_step_by_batch: plugin slot vs SGLang's own (the same code; the plugin only sets current_steps)
        ctrl.worker.speculative_num_steps = slot.current_steps
        base.worker.speculative_num_steps = bslot.current_steps
        res["act"] = paired(lambda: ctrl.activate_step_by_batch(bs), lambda: base.activate_step_by_batch(bs),
                            a.calls, a.repeats)
        res["detail"] = _adaptive_breakdown(slot, ctl, bs, a)
        res["detail"]["state"] = (f"steps {steps_ran}, pooled wait {ctl.shared.wait}, failed probes "
                                  f"{ctl.shared.failed_probes}, switches while timed {switches} in {3 * n} batches, "
                                  f"corr {({k_: round(v_, 2) for k_, v_ in ctl.corr.items()})}")
    return res


def _adaptive_breakdown(slot, ctl, bs, a):
    """Where an off-state batch's controller time goes (pieces called alone, state unchanged)."""
    from sglang_kimi_eagle3.integration.hooks import adaptive_control as ac

    zeros = [0] * bs
    saved = (ctl.batches, ctl.shared.since)
    ctl.batches = ctl.dwell_batches + 1
    d = {}
    n = max(2000, a.calls // 4)
    d["_at_zero (pooled evaluation: max over candidates of predicted, gain)"] = \
        statistics.median(_loop_ns(ctl._at_zero, n) for _ in range(5)) / 1e3
    d["predicted(0, alpha)"] = statistics.median(
        _loop_ns(lambda: ctl.predicted(0, 0.3), n) for _ in range(5)) / 1e3
    d["predicted(3, alpha)"] = statistics.median(
        _loop_ns(lambda: ctl.predicted(3, 0.3), n) for _ in range(5)) / 1e3
    d[f"list(counts) copy in _update (bs {bs})"] = statistics.median(
        _loop_ns(lambda: list(zeros), n) for _ in range(5)) / 1e3
    d["_note_measured (each sync: every 64 batches)"] = statistics.median(
        _loop_ns(lambda: ac._note_measured(slot, ctl), 2000) for _ in range(3)) / 1e3
    ctl.batches, ctl.shared.since = saved
    return d


def bench_breakdown(torch, bs, a):
    """The pieces of the two largest per-call rows, each called alone (µs): what their lines cost."""
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    from sglang_kimi_eagle3.integration import dispatch
    from sglang_kimi_eagle3.integration.hooks import offstate_attention as oa

    vi, batch = verify_objects(torch, bs)
    view = _replay_view(torch, bs, ForwardMode.TARGET_VERIFY, vi)
    tgt = _backend(torch, False)
    cuda0 = torch.device("cuda", 0)

    def imp():
        from sglang.srt.model_executor.forward_batch_info import ForwardMode  # noqa: F401

    n = max(2000, a.calls // 2)
    pieces = {
        "offstate: one_token_verify (offstate_attention.py:68-84)": lambda: oa.one_token_verify(tgt, view),
        "offstate: decode_view whole (:87-101)": lambda: oa.decode_view(view),
        "offstate:   copy.copy(replay view) (:90)": lambda: copy.copy(view),
        "offstate:   import ForwardMode per call (:91)": imp,
        "offstate:   seq_lens + 1 (:95, CPU; CUDA launch on GPU)": lambda: view.seq_lens + 1,
        "offstate:   len(seq_lens) of a tensor (:75, :96)": lambda: len(view.seq_lens),
        "verify: torch.empty x3 (verify_kernels.py:109-114, CPU)": lambda: (
            torch.empty(bs, dtype=torch.int32, device="cpu"),
            torch.empty((bs, vi.max_tree_depth), dtype=torch.int32, device="cpu"),
            torch.empty((bs,), dtype=torch.int32, device="cpu")),
        "verify: draft_token.reshape (:115)": lambda: vi.draft_token.reshape(bs, 1),
        "verify: dispatch.why_not, memo hit (dispatch.py:67-84)": lambda: dispatch.why_not(
            "verify_argmax_greedy", "n4_bs1", cuda0),
    }
    return {k: round(statistics.median(_loop_ns(f, n) for _ in range(5)) / 1e3, 2) for k, f in pieces.items()}


# ---- counters, metrics, the status writer ---------------------------------------------------------------------------


def bench_count(a):
    from sglang_kimi_eagle3.status import hookstatus

    r = paired(lambda: hookstatus.count("offstate_attention", "ours", "graph"), lambda: noop("o", "o", "g"),
               a.calls, a.repeats)
    return r


def bench_step_clock_tick(a):
    """step_clock.tick(): the status writer thread's poll every 2 s (its summary over the kept readings), with the row
    as full as a server that has run long enough fills it: steps 0 and 3 at KEEP steps, steps 7 at 600, each state's
    GPU-timed steps (one in GPU_EVERY), KEEP prefill batches with every field, the garbage collector's counts on."""
    from sglang_kimi_eagle3.integration.hooks import step_clock as sc

    sc.reset()
    from collections import deque

    rng = random.Random(0)
    parts = (0.002, 0.001, 0.0005, 0.0001, 0.0003, 0.0004, 0.0002, 0.0006, 0.00005)[:len(sc.FIELDS) - 1]  # after its wall
    sizes = (1, 2, 4, 8, 16, 64)  # each reading ends with its batch size: the row's per-bucket medians
    for steps, n, wall in ((0, sc.KEEP, 0.010), (3, sc.KEEP, 0.017), (7, 600, 0.024)):
        sc.STEPS[steps] = deque(((wall + rng.random() * 1e-3, *parts, rng.choice(sizes)) for _ in range(n)),
                                maxlen=sc.KEEP)
        sc._READ[steps] = 100000
        sc.GPU[steps] = deque(((wall * 1e3, wall * 900, 2.0, 1.0, 0.1, rng.choice(sizes))
                               for _ in range(n // sc.GPU_EVERY)), maxlen=sc.KEEP)
    sc.PREFILL.extend((190.0 + rng.random(), 3.4, rng.randint(100, 2000), 200.0, 195.0, 3.5, (0, 0, 0, 0), (0.0, 0, 0))
                      for _ in range(sc.KEEP))
    sc._GCK["on"] = True  # the row's collector text (no callback installed: nothing here collects on its behalf)
    detail = sc.summary() or ""
    missing = [p for p in ("steps 7:", "GPU time per step", "GPU by batch size", "prefill:", "garbage collector")
               if p not in detail]
    assert not missing, f"the step clock's row no longer reads these filled readings: {missing}"  # its shapes changed
    ts = []
    for _ in range(7):
        sc._SHOWN[0] = None
        t0 = time.perf_counter_ns()
        sc.tick()
        ts.append(time.perf_counter_ns() - t0)
    sc.reset()
    return statistics.median(ts) / 1e6


def child_metrics(a):
    """In a fresh process with PROMETHEUS_MULTIPROC_DIR set (as SGLang's engine sets it with --enable-metrics):
    hookstatus.count with and without this plugin's Prometheus listener."""
    setup_process()
    from sglang_kimi_eagle3.integration.hooks import metrics
    from sglang_kimi_eagle3.status import hookstatus

    def cnt():
        hookstatus.count("offstate_attention", "ours", "graph")

    without = statistics.median(_loop_ns(cnt, a.calls) for _ in range(a.repeats))
    assert metrics.start(0), "metrics did not start"
    cnt()
    with_ = statistics.median(_loop_ns(cnt, a.calls) for _ in range(a.repeats))
    print(json.dumps({"count_us": without / 1e3, "count_with_listener_us": with_ / 1e3}))


def child_status(a):
    """In a fresh process with the plugin loaded by SGLang's load_plugins() (only ours): one status-file write as the
    lead scheduler's writer thread does it every 2 s while calls are counted (snapshot, json, atomic write + fsync),
    and its poll of the on_tick callables."""
    setup_process()
    import sglang.srt.plugins as plugins

    from sglang_kimi_eagle3.integration.hooks import runtime_status as rs
    from sglang_kimi_eagle3.status import hookstatus

    t0 = time.perf_counter()
    plugins.load_plugins()
    load_s = time.perf_counter() - t0
    for h, b in (("offstate_attention", "graph"), ("offstate_attention", "eager"), ("verify_argmax_greedy", "n4_bs1"),
                 ("verify_argmax_greedy", "n4_bs8"), ("verify_argmax_greedy", "n4_bs32"),
                 ("verify_argmax_greedy", "n4_bs128"), ("adaptive_control", "measured")):
        for _ in range(50):
            hookstatus.count(h, "ours", b)
    rs._STATE["path"] = rs.status_path(30000)
    rs.write_status()
    ws, ss = [], []
    for _ in range(15):
        t = time.perf_counter_ns()
        rs.write_status()
        ws.append(time.perf_counter_ns() - t)
        t = time.perf_counter_ns()
        rs.snapshot()
        ss.append(time.perf_counter_ns() - t)
    ticks = [getattr(f, "__module__", "") + "." + getattr(f, "__qualname__", str(f)) for f in rs._ON_TICK]
    ts = []
    for _ in range(15):
        t = time.perf_counter_ns()
        rs._run_ticks()
        ts.append(time.perf_counter_ns() - t)
    print(json.dumps({"load_plugins_s": load_s, "write_status_ms": statistics.median(ws) / 1e6,
                      "snapshot_ms": statistics.median(ss) / 1e6,
                      "run_ticks_empty_ms": statistics.median(ts) / 1e6, "rows": len(hookstatus.rows()), "on_tick": ticks}))


def run_child(kind: str, a, env_extra: dict) -> dict | None:
    env = dict(os.environ, **env_extra)
    cmd = [sys.executable, "-m", "benchmark.host.hook_overhead", "--child", kind, "--calls", str(a.calls),
           "--repeats", str(a.repeats)]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900,
                           cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    except subprocess.TimeoutExpired:
        print(f"  ({kind} child timed out)")
        return None
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        print(f"  ({kind} child failed, rc {p.returncode}: {p.stderr.strip().splitlines()[-3:]})")
        return None
    return json.loads(lines[-1])


# ---- report ---------------------------------------------------------------------------------------------------------


def report(bss, a, extra):
    import torch

    print(f"\n# hook overhead on the host: python {platform.python_version()}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {a.calls} calls x {a.repeats} repeats")
    print("# per call: wrapper-with-no-op minus no-op direct (median of paired differences), µs; per step = x calls")
    hdr = "  ".join(f"bs{b:>4}" for b in bss)
    print(f"\n{'row':26s} {'calls':>5s}   µs/call: {hdr}   µs/step: {hdr}")
    for scen, title in (("graph", "off-state, CUDA-graph replay (the default path, bs <= largest captured graph)"),
                        ("eager", "off-state, eager (bs above the largest graph / --disable-cuda-graph): "
                                  "replaces the two offstate_graph rows"),
                        ("sampled", "temperature > 0 batch: replaces verify_greedy"),
                        ("other", "not on the default H200 path")):
        rs = [r for r in ROWS if r["scenario"] == scen]
        if not rs:
            continue
        print(f"-- {title}")
        for r in rs:
            per_call = "  ".join(f"{r['per_bs'][b]['overhead_us']:6.2f}" for b in bss)
            per_step = "  ".join(f"{r['per_bs'][b]['overhead_us'] * r['calls']:6.1f}" for b in bss)
            print(f"{r['key']:26s} {r['calls']:>5}   µs/call: {per_call}   µs/step: {per_step}")

    def total(keys):
        return {b: sum(r["per_bs"][b]["overhead_us"] * r["calls"] for r in ROWS if r["key"] in keys) for b in bss}

    graph_keys = [r["key"] for r in ROWS if r["scenario"] == "graph"]
    eager_keys = [k for k in graph_keys if not k.startswith("offstate_graph")] + \
        [r["key"] for r in ROWS if r["scenario"] == "eager"]
    tg, te = total(graph_keys), total(eager_keys)
    print("\nTOTAL off-state, CUDA graphs (default):  " + "  ".join(f"bs{b} {tg[b]:6.1f}" for b in bss) + "  µs/step")
    print("TOTAL off-state, eager:                  " + "  ".join(f"bs{b} {te[b]:6.1f}" for b in bss) + "  µs/step")
    if extra.get("writer_ms") is not None:
        per = extra["writer_ms"] * 1e3 * a.step_ms / 2000.0
        print(f"+ status writer thread (every 2 s, GIL): {extra['writer_ms']:.2f} ms a tick -> {per:.1f} µs/step "
              f"amortized at {a.step_ms:g} ms steps ({extra.get('writer_parts')})")
    print("\nwrapped / direct per call (µs), for scale:")
    for r in ROWS:
        print(f"  {r['key']:26s} " + "  ".join(f"bs{b} {r['per_bs'][b]['wrapped_us']:6.2f}/{r['per_bs'][b]['direct_us']:5.2f}"
                                              for b in bss) + f"   {r['target']}; {r['note']}")
    for k, v in extra.items():
        if k not in ("writer_ms", "writer_parts"):
            print(f"{k}: {v}")
    import sglang

    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, no GPU needed", "torch": torch.__version__,
            "sglang": sglang.__version__, "command": "python -m benchmark.host.hook_overhead " + " ".join(sys.argv[1:]),
            "calls": a.calls, "repeats": a.repeats}
    return {"meta": meta, "rows": ROWS, "total_graph": tg, "total_eager": te, "extra": extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bs", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--layers", type=int, default=61, help="target layers (Kimi K2.5: 61), for the eager rows")
    ap.add_argument("--step-ms", type=float, default=10.0, help="step time the status writer is amortized over")
    ap.add_argument("--cycles", type=int, default=2, help="adaptive back-off cycles (8224 batches each) per timing")
    ap.add_argument("--no-children", action="store_true", help="skip the metrics and status-writer subprocesses")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--child", choices=["metrics", "status"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child == "metrics":
        return child_metrics(a)
    if a.child == "status":
        return child_status(a)
    t_start = time.time()
    torch = setup_process()
    torch.set_num_threads(1)
    bss = a.bs
    print("timing step_clock ...", flush=True)
    bench_step_clock(torch, bss, a)
    print("timing offstate_attention ...", flush=True)
    bench_offstate(torch, bss, a)
    print("timing verify kernels' dispatch ...", flush=True)
    bench_verify(torch, bss, a)
    bench_draft_head(torch, bss, a)
    print("timing the adaptive controller (warm-up to the steady off-state) ...", flush=True)
    detail = bench_adaptive(torch, bss, a)
    extra = {}
    c = bench_count(a)
    extra["hookstatus.count alone (inside the rows above), µs"] = round(c["overhead_us"], 3)
    for bs, d in detail.items():
        extra[f"adaptive breakdown bs {bs}"] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in d.items()}
    extra[f"line costs at bs {bss[-1]}, µs"] = bench_breakdown(torch, bss[-1], a)
    tick_ms = bench_step_clock_tick(a)
    extra["step_clock.tick (status writer poll; steps 0 / 3 / 7: 2048 / 2048 / 600 kept, GPU-timed, 2048 prefills), ms"] = round(tick_ms, 2)
    if not a.no_children:
        print("timing the metrics listener and the status writer in child processes ...", flush=True)
        m = run_child("metrics", a, {"PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(prefix="prom-")})
        if m:
            extra["metrics (--enable-metrics only): hookstatus.count without / with the Prometheus listener, µs"] = \
                (round(m["count_us"], 2), round(m["count_with_listener_us"], 2))
        s = run_child("status", a, {"SGLANG_PLUGINS": "kimi_eagle3",
                                    "SGLANG_KIMI_EAGLE3_STATUS_DIR": tempfile.mkdtemp(prefix="status-")})
        if s:
            extra["writer_ms"] = s["write_status_ms"] + tick_ms
            extra["writer_parts"] = (f"write_status {s['write_status_ms']:.2f} ms (snapshot {s['snapshot_ms']:.2f}, "
                                     f"{s['rows']} rows) + step_clock.tick {tick_ms:.2f} ms; on_tick {s['on_tick']}")
    res = report(bss, a, extra)
    print(f"\n({time.time() - t_start:.0f} s)")
    if a.json:
        from sglang_kimi_eagle3.atomic import write_atomic

        write_atomic(a.json, json.dumps(res, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
