"""The kernel warm-up: which variants a launch can reach (pure), launching them (on the suite's kernel device:
the GPU, or the CPU under Triton's interpreter), and the hook inside SGLang's real scheduler path (its row in the
published status table), the switch and the kill switch.
"""

import pytest
import torch
from helpers import LLAMA_8B, llama_eagle3_argv, run_json, triton_source
from kernel_device import ON_GPU, device

from sglang_kimi_eagle3.ops import arch, tables, warmup as W

H200 = tables.load_table("NVIDIA H200", (9, 0))  # the bundled H200 tables (their wins: ops/configs/NVIDIA_H200.*.json)
# the same with the GPU-time wins put back (graph_wins: the table before 2026-12-01), so that the row
# logic of the verify warm-up is still tested against a table that gives them shapes
H200_GRAPH = {**H200, "ops": {op: ({**spec, "wins": spec["graph_wins"]} if "graph_wins" in spec else spec)
                              for op, spec in H200["ops"].items()}}
# Kimi-K2.5 at TP 8, the seed's chain 3/1/4: the draft lm_head shard is 4000 x 7168, top-k over the 32000 draft vocab
KIMI_CHAIN = W.LaunchShapes(max_bs=64, topk=1, num_steps=3, num_draft_tokens=4, target_vocab=163840, draft_vocab=32000,
                            lm_head_rows=4000, hidden=7168, lm_head_form="16bit", chain_column=False)
KIMI_TREE = W.LaunchShapes(max_bs=16, topk=4, num_steps=3, num_draft_tokens=16, target_vocab=163840, draft_vocab=32000,
                           lm_head_rows=4000, hidden=7168, lm_head_form="16bit")


def _by_op(vs):
    out = {}
    for v in vs:
        out.setdefault(v.op, []).append(v)
    return out


def test_the_bundled_h200_table_warms_only_the_verify_ops_it_lists_eager_wins_for():
    """On the H200 the bundled tables list eager per-call wins for tree sampling (N 4, every bucket to bs 128) and
    argmax + verify (N 4, bs 1-128) only (bench_host.py and tune, 2026-12-02 and -04); the draft-head wins are GPU-time only
    (graph_wins): auto warms those two verify ops at every unpadded batch size they win at, nothing else, and
    nothing for the N 16 tree (not measured per eager call)."""
    ops = _by_op(W.plan(KIMI_CHAIN, "auto", H200))
    assert set(ops) == {"tree_sampling", "argmax_verify"}, set(ops)
    assert [v.rows for v in ops["tree_sampling"]] == list(range(1, 65))
    # bs 1 and bs 4 (so the bs 2-8 bucket) win per eager call since 2026-12-04, bs 16-64 since 2026-12-02
    assert [v.rows for v in ops["argmax_verify"]] == list(range(1, 65))
    assert W.plan(KIMI_TREE, "auto", H200) == []


def test_auto_warms_exactly_the_rows_the_h200_table_gives_to_our_kernels():
    ops = _by_op(W.plan(KIMI_CHAIN, "auto", H200_GRAPH))
    # lm_head_gemv wins at R 4000 only in the bs 8 and bs 32 buckets: rows 2..32 (b, b*N, ...), never 1 or > 32
    rows = sorted(v.rows for v in ops["lm_head_gemv"])
    assert rows == list(range(2, 33)) and all(v.key.endswith(("bs8", "bs32"))
                                                                             for v in ops["lm_head_gemv"])
    # topk 1: the draft decode's top-1 at every batch size (V 32000 wins up to bs 128), no column under a hot map
    assert [v.rows for v in ops["draft_topk1"]] == list(range(1, 65)) and {v.column for v in ops["draft_topk1"]} == {0}
    # verify kernels run eagerly at the unpadded batch: every batch size, not one per bucket
    for op in ("argmax_verify", "verify_greedy", "tree_sampling"):
        assert [v.rows for v in ops[op]] == list(range(1, 65)), op


def test_the_one_verify_loss_stays_sglangs_and_topk4_rows_follow_the_draft_decode():
    ops = _by_op(W.plan(KIMI_TREE, "auto", H200_GRAPH))
    # verify_greedy lost at n16_bs1 on the H200: auto keeps SGLang's kernel there, so there is nothing of ours to warm
    assert [v.rows for v in ops["verify_greedy"]] == list(range(2, 17))
    assert [v.rows for v in ops["argmax_verify"]] == list(range(1, 17))
    assert "draft_topk1" not in ops  # topk 4: the worker's top-k, not the top-1
    # the worker's top-k sees b rows (prefill/decode draft-extend) and b*topk rows (draft decode steps)
    assert sorted(v.rows for v in ops["topk_rows"]) == sorted({b * m for b in range(1, 17) for m in (1, 4)})


def test_ours_warms_every_reachable_row_and_upstream_or_missing_hooks_nothing():
    vs = _by_op(W.plan(KIMI_CHAIN, "ours", {}))
    assert len(vs["lm_head_gemv"]) == len({b * m for b in range(1, 65) for m in (1, 4)})  # topk 1: no b*topk set
    assert len(vs["tree_sampling"]) == 64
    assert W.plan(KIMI_CHAIN, "upstream", H200) == []
    only = W.plan(KIMI_CHAIN, "ours", {}, hooks={"verify_tree_sampling"})
    assert {v.op for v in only} == {"tree_sampling"}
    chain = W.LaunchShapes(max_bs=3, topk=1, num_steps=4, num_draft_tokens=5, target_vocab=64, draft_vocab=32,
                           lm_head_rows=32, hidden=16, chain_column=True)
    cols = {(v.rows, v.column) for v in W.plan(chain, "ours", {}) if v.op == "draft_topk1"}
    assert cols == {(b, c) for b in (1, 2, 3) for c in (1, 2, 3)}  # the column is a specialized int: 1 vs 2, 3


def test_a_bucket_is_not_one_compile():
    """Why every row count is warmed: within the bs 32 bucket argmax_verify's launch parameters change
    (the pow2 of the split count is a constexpr of the verify kernel, EVEN of the argmax)."""
    from sglang_kimi_eagle3.ops._tree import pow2
    from sglang_kimi_eagle3.ops.argmax_verify import argmax_plan

    cfg = arch.op_config("argmax_verify", {"n": 4}, H200)
    keys = {(pow2(argmax_plan(bs * 4, 163840, cfg)[3], 1), argmax_plan(bs * 4, 163840, cfg)[5]) for bs in range(9, 33)}
    assert len(keys) > 1, keys


TINY = W.LaunchShapes(max_bs=2, topk=2, num_steps=3, num_draft_tokens=4, target_vocab=50, draft_vocab=40,
                      lm_head_rows=40, hidden=32)


def test_run_launches_every_planned_variant_on_the_kernel_device(monkeypatch):
    """On the suite's kernel device: the CPU under Triton's interpreter, or the GPU (compiled)."""
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_KERNELS", "ours")
    vs = W.plan(TINY, "ours", {})
    res = W.run(vs, TINY, device())
    assert res.error == "" and res.guarded == 0 and res.skipped_memory == 0, res
    assert res.launches == len(vs) and res.by_op == {op: len(v) for op, v in _by_op(vs).items()}
    if ON_GPU:
        assert isinstance(res.compiled, int) and res.compiled >= 0, res  # Triton's caches are read: counted
    else:
        assert res.compiled is None  # the interpreter compiles nothing: not counted, not claimed
    # a memory budget below one op's dummy inputs leaves its variants out, counted
    small = W.run(vs, TINY, device(), budget_bytes=W._bytes("tree_sampling", 1, TINY) - 1)
    assert small.by_op.get("tree_sampling") is None and small.skipped_memory >= 2


@pytest.mark.parametrize("init,lens", [(True, False), (True, True), (False, False)])
def test_the_argmax_verify_warm_up_plans_the_variant_the_greedy_hook_launches(monkeypatch, init, lens):
    """init and lens are constexprs of the argmax + verify kernels: the warm-up launches the op with the greedy
    hook's switches (argmax_verify.HOOK_INIT / HOOK_LENS), so the plans (and compiles) the hook needs exist."""
    from sglang_kimi_eagle3.ops import _host, argmax_verify as av

    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_KERNELS", "ours")
    monkeypatch.setattr(av, "HOOK_INIT", init)
    monkeypatch.setattr(av, "HOOK_LENS", lens)
    monkeypatch.setattr(_host, "_PLANS", {})  # this run's plans only
    res = W.run([W.Variant("argmax_verify", 2)], TINY, device())
    assert res.launches == 1 and res.error == "", res
    assert {k[0] for k in _host._PLANS} == {av._KEYS[init, lens]}, list(_host._PLANS)


def test_run_counts_guard_refusals_and_stops_at_an_error_instead_of_raising(monkeypatch):
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_KERNELS", "ours")
    # an fp32 lm_head weight is outside lm_head_gemv's fast path: its guard refuses, the hook would hand it to SGLang
    res = W.run([W.Variant("lm_head_gemv", 1)], TINY, device(), weight=torch.zeros(40, 32, device=device()))
    assert res.guarded == 1 and res.launches == 0 and res.error == "", res
    vs = [W.Variant("argmax_verify", 1), W.Variant("no_such_op", 1), W.Variant("verify_greedy", 1)]
    res = W.run(vs, TINY, device())
    assert res.launches == 1 and res.by_op == {"argmax_verify": 1} and "no_such_op" in res.error, res


# ---- the hook inside SGLang's scheduler path --------------------------------------------------------

ARGV = llama_eagle3_argv(31879)

PARENT = r'''
import json, multiprocessing as mp, sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, "test")
from warmup_path import scheduler_with_warmup
from sglang_kimi_eagle3.commands.check import platform_facts
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.server_args import prepare_server_args
from sglang.srt.runtime_context import override_platform
out = {}
ctx = mp.get_context("spawn")  # SGLang's start method (engine.py)
children = []  # one scheduler per launch (its own port and status file), all started before any is read
for name, argv, env, again in CASES:
    sa = prepare_server_args(argv)
    with override_platform(**platform_facts(90)):
        sa.resolve_once()
    q = ctx.Queue()
    p = ctx.Process(target=scheduler_with_warmup, args=(sa, q, env, again))
    p.start()
    children.append((name, q, p))
for name, q, p in children:
    out[name] = q.get(timeout=400)
    p.join(60)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def children(tmp_path_factory):
    d = tmp_path_factory.mktemp("warm")
    ngram = ["--model-path", str(LLAMA_8B), "--speculative-algorithm", "NGRAM", "--device", "cuda", "--port", "31880"]
    cases = [("on", ARGV, {}, {"SGLANG_KIMI_EAGLE3_WARMUP": "off"}), ("ngram", ngram, {}, None)]
    out = run_json(f"CASES = {cases!r}\n" + PARENT, timeout=900, SGLANG_KIMI_EAGLE3_KERNELS="ours", TRITON_INTERPRET="1",
                   SGLANG_KIMI_EAGLE3_STATUS_DIR=str(d))
    return out


def _row(snap, name="kernel_warmup"):
    return next(h for h in snap["hooks"] if h["name"] == name)


@pytest.mark.slow
def test_the_scheduler_warms_before_the_status_table_is_published(children):
    on = children["on"]
    assert on["ok"], on.get("error")
    # the status file written by runtime_status's hook (queued after ours) already holds the warm-up's row
    row = _row(on["file"])
    assert row["state"] == "applied" and row["detail"].startswith("warmed in "), row
    last = on["last"]
    shapes = W.LaunchShapes(**last["shapes"])
    assert shapes == W.LaunchShapes(max_bs=2, topk=2, num_steps=3, num_draft_tokens=4, target_vocab=50, draft_vocab=40,
                                    lm_head_rows=40, hidden=32, lm_head_form="fp32_rounded", chain_column=False)
    planned = W.plan(shapes, "ours", {})
    assert last["ours"]["launches"] == last["variants"] == len(planned) and last["ours"]["error"] == ""
    assert f"{len(planned)} variants of ours" in row["detail"]
    # captured up to bs 1, two requests allowed: the eager range and SGLang's flag are named
    assert "batches of 2..2 run outside CUDA graphs" in row["detail"] and "--cuda-graph-max-bs-decode 2" in row["detail"]
    # warm-up launches go straight to the ops: no hook counted them as served calls
    assert all(not sum(h["counters"]["ours"].values()) for h in on["snapshot"]["hooks"] if h["name"].startswith("verify"))


@pytest.mark.slow
def test_the_switch_and_a_foreign_launch_warm_nothing(children):
    off, ngram = children["on"]["again"], children["ngram"]
    assert ngram["ok"], ngram.get("error")
    assert _row(off["snapshot"])["state"] == "skipped" and "SGLANG_KIMI_EAGLE3_WARMUP=off" in _row(off["snapshot"])["detail"]
    assert off["last"] == {} and ngram["last"] == {}
    assert _row(ngram["snapshot"])["state"] == "skipped" and "not an EAGLE/EAGLE3 launch" in _row(ngram["snapshot"])["detail"]


@pytest.mark.slow
def test_kill_switch_queues_no_warmup_and_a_garbage_switch_value_is_named():
    r = run_json(r'''
import json, warnings
warnings.filterwarnings("ignore")
from sglang.srt.plugins import load_plugins
from sglang.srt.plugins.hook_registry import HookRegistry
load_plugins()
from sglang_kimi_eagle3.status import hookstatus
from sglang_kimi_eagle3.base import env_errors
from sglang_kimi_eagle3.integration.hooks import kernel_warmup as kw
hooks = HookRegistry._hooks.get(kw.TARGET, [])
print(json.dumps({"queued": sum(h is kw._after_cuda_graphs for _t, h, _s in hooks), "row": hookstatus.as_dicts(),
                  "errors": env_errors()}))
''', SGLANG_KIMI_EAGLE3="0")
    assert r["queued"] == 0
    row = next(x for x in r["row"] if x["name"] == "kernel_warmup")
    assert row["state"] == "skipped" and "SGLANG_KIMI_EAGLE3=0" in row["detail"]
    import os

    from sglang_kimi_eagle3.base import env_errors

    os.environ["SGLANG_KIMI_EAGLE3_WARMUP"] = "sometimes"
    try:
        assert any(e.startswith("SGLANG_KIMI_EAGLE3_WARMUP='sometimes' is not one of on|off") for e in env_errors())
    finally:
        del os.environ["SGLANG_KIMI_EAGLE3_WARMUP"]


def test_an_outgrown_counter_buffer_stays_alive_for_graphs_captured_before():
    """The warm-up launches after capture, at row counts the graphs never saw: when one needs more reduction
    counters than the buffer holds, the buffer a captured graph points at must not be freed."""
    import gc
    import weakref

    from sglang_kimi_eagle3.ops import lm_head_gemv as op

    dev = torch.device("cpu")
    op._SEMS.pop(op._device_key(dev), None)
    first = weakref.ref(op.semaphores(dev, 8))
    bigger = op.semaphores(dev, op._SEM_MIN + 1)
    gc.collect()
    assert first() is not None and first() is not bigger and bigger.numel() > op._SEM_MIN
    op._SEMS.pop(op._device_key(dev), None)


def test_the_flashinfer_warm_up_calls_what_sglangs_mixed_batch_verify_calls():
    """The renorms the warm-up calls are the ones SGLang's verify imports for a mixed greedy / sampled batch, and on
    CUDA they are FlashInfer's JIT-built sampling kernels (read in the installed SGLang's source: this box has no
    CUDA, where both names are None and the warm-up builds nothing)."""
    import inspect

    eagle_utils = pytest.importorskip("sglang.srt.speculative.eagle_utils")
    from sglang.kernels.ops.sampling import renorm

    from sglang_kimi_eagle3.integration.hooks.kernel_warmup import warm_flashinfer_sampling

    assert eagle_utils.top_k_renorm_prob is renorm.top_k_renorm_prob
    assert eagle_utils.top_p_renorm_prob is renorm.top_p_renorm_prob
    verify = inspect.getsource(eagle_utils)
    assert "if sampling_info.need_top_k_sampling:\n            target_probs = top_k_renorm_prob(" in verify
    src = inspect.getsource(renorm)
    assert 'top_k_renorm_prob = LazyImport("flashinfer.sampling", "top_k_renorm_probs")' in src
    assert 'top_p_renorm_prob = LazyImport("flashinfer.sampling", "top_p_renorm_probs")' in src
    assert warm_flashinfer_sampling(W.LaunchShapes(max_bs=1, topk=1, num_steps=1, num_draft_tokens=2, target_vocab=8,
                                                   draft_vocab=8), torch.device("cpu")) is None


# what the H200 compiled of SGLang's assign_req_to_token_pool in run 10 (2026-12-02, the serving_compiles log lines of
# one server: 13 in its traffic warm-up, the 14th, (16, not16), in the first pass at c 16), --max-running-requests 64
def _h200_line(bs_upper, aligned):
    args = "req_pool_indices,req_to_token,start_offset,end_offset"
    return (f"not16 -; div16 {args},out_cache_loc; " if aligned else f"not16 out_cache_loc; div16 {args}; ") + \
        f"const pool_len=8200,bs_upper={bs_upper}"


def test_the_token_pool_warm_up_compiles_the_variants_the_h200_compiled_on_first_traffic():
    """The arguments the warm-up compiles SGLang's assign_req_to_token_pool with, through Triton's own binder: exactly
    the 14 specializations a decode batch of 1..64 reaches (next power of two x free-list alignment)."""
    allocation = pytest.importorskip("sglang.srt.mem_cache.allocation")
    from sglang_kimi_eagle3.integration.hooks import kernel_warmup as kw
    from sglang_kimi_eagle3.integration.hooks.serving_compiles import variant

    assert kw.token_pool_variants(64) == [(u, a) for u in (1, 2, 4, 8, 16, 32, 64) for a in (True, False)]
    assert kw.token_pool_variants(1) == [(1, True), (1, False)] and len(kw.token_pool_variants(65)) == 16
    table = torch.zeros(3, 8200, dtype=torch.int32)  # the H200 run's pool rows: context 8192 + 8
    got = {variant(triton_source(allocation.assign_req_to_token_pool, *kw.token_pool_args(torch, table, u, a, "cpu")))
           for u, a in kw.token_pool_variants(64)}
    assert got == {_h200_line(u, a) for u in (1, 2, 4, 8, 16, 32, 64) for a in (True, False)}, sorted(got)
    assert kw.warm_token_pool(table, 64, torch.device("cpu")) == 0  # compiles on CUDA only


def test_the_warm_up_line_says_how_long_sglangs_jit_modules_took():
    """On a fresh H100 (2026-12-05) the warm-up line read "warmed in 172.3 s: 0 variants of ours": all of it SGLang's
    JIT builds, which the line did not say. Off CUDA, neither of SGLang's two verify modules is built."""
    from sglang_kimi_eagle3.integration.hooks import kernel_warmup as kw

    s = W.LaunchShapes(max_bs=1, topk=1, num_steps=3, num_draft_tokens=4, target_vocab=20480, draft_vocab=4000)
    assert kw.warm_sglang_tree(s, torch.device("cpu")) is None and kw.warm_sglang_sampling(s, torch.device("cpu")) is None
    assert kw.warm_sglang(s, torch.device("cpu")) == []
    ours = {"launches": 0, "compiled": 0, "by_op": {}, "guarded": 0, "skipped_memory": 0}
    out = {"seconds": 172.3, "sglang_seconds": 168.04, "shapes": {k: getattr(s, k) for k in s.__slots__}, "ours": ours,
           "sglang": ["tree (greedy verify, tree build)", "tree sampling (vec 4)"], "notes": []}
    assert ("; SGLang's JIT modules (168.0 s of it): tree (greedy verify, tree build), tree sampling (vec 4)"
            in kw.describe(out)), kw.describe(out)
    assert "s of it" not in kw.describe({**out, "sglang": []})  # nothing built: no time claimed for it


H100 = tables.load_table("NVIDIA H100 80GB HBM3", (9, 0))  # bundled: tree sampling and argmax + verify win at n4


def test_an_adaptive_launch_warms_the_off_states_one_token_verify_too():
    """On an H100 (2026-12-05, run 28) an adaptive launch (states steps 0 / 3 / 7) warmed 256 variants at N 4 and then
    compiled `_argmax_verify_kernel` while serving, 0.72 s at the first request after a switch to steps 0: N 1 files
    under the same n4 table key, but N is a constexpr of the kernel. Each adaptive state's N is planned; N 8 (n16
    bucket) has no H100 win: SGLang's kernels, nothing to warm."""
    states = W.plan_states(KIMI_CHAIN, [0, 3, 7], "auto", H100)
    assert [(st.num_steps, st.num_draft_tokens) for st, _ in states] == [(3, 4), (0, 1), (7, 8)]
    launch, off, deep = (_by_op(vs) for _st, vs in states)
    assert set(launch) == set(off) == {"argmax_verify", "tree_sampling"} and deep == {}
    for op in ("argmax_verify", "tree_sampling"):
        assert [v.rows for v in off[op]] == list(range(1, 65)) and off[op][0].key == launch[op][0].key == "n4_bs1"
    # kernels forced on: a deeper state adds its own tree ops and draft-extend rows (b * 8) and draft columns, nothing
    # the launch's plan has already (the lm_head rows b of the 1-token state are the launch's prefill rows)
    ours = {st.num_draft_tokens: _by_op(vs) for st, vs in W.plan_states(KIMI_CHAIN, [0, 3, 7], "ours", {})}
    assert set(ours[1]) == {"argmax_verify", "verify_greedy", "tree_sampling"}
    assert {v.rows for v in ours[8]["lm_head_gemv"]} == {b * 8 for b in range(1, 65)} - {b * 4 for b in range(1, 65)}
    assert W.plan_states(KIMI_TREE, [0, 3, 7], "ours", {})[1:] == []  # topk 4: no adaptive chain states
    assert W.plan_states(KIMI_CHAIN, [], "auto", H100) == [(KIMI_CHAIN, W.plan(KIMI_CHAIN, "auto", H100))]
    with pytest.raises(ValueError):  # steps 0 exists only as the 1-token chain
        W.LaunchShapes(max_bs=1, topk=1, num_steps=0, num_draft_tokens=4, target_vocab=50)


def test_the_one_token_verify_state_launches_on_the_kernel_device(monkeypatch):
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_KERNELS", "ours")
    chain = W.LaunchShapes(max_bs=2, topk=1, num_steps=3, num_draft_tokens=4, target_vocab=50, draft_vocab=40)
    (_st, _vs), (off, vs) = W.plan_states(chain, [0, 3], "ours", {}, hooks={"verify_argmax_greedy", "verify_tree_greedy",
                                                                            "verify_tree_sampling"})
    assert off.num_draft_tokens == 1 and {v.op for v in vs} == {"argmax_verify", "verify_greedy", "tree_sampling"}
    res = W.run(vs, off, device())
    assert res.error == "" and res.launches == len(vs) == 6, res
    total = W.run(_vs, _st, device()).add(res)
    assert total.launches == 12 and total.by_op == {"argmax_verify": 4, "verify_greedy": 4, "tree_sampling": 4}
    # compile counts (None under the interpreter) add up only where both runs counted them
    assert W.WarmupResult(compiled=3).add(W.WarmupResult(compiled=2)).compiled == 5
    assert W.WarmupResult(compiled=3).add(W.WarmupResult()).compiled is None
    assert W.WarmupResult(error="a").add(W.WarmupResult(error="b")).error == "a"


def test_the_adaptive_steps_come_from_sglangs_own_controller():
    """kernel_warmup reads the union of candidate steps from SGLang's AdaptiveController, which EAGLEWorkerV2 builds in
    its __init__ (the states themselves are built after the warm-up's hook)."""
    import json
    import tempfile

    from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    from sglang_kimi_eagle3.integration.hooks import kernel_warmup as kw

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"1": {"candidate_steps": [0, 3]}, "8": {"candidate_steps": [0, 7]}}, f)
    worker = type("W", (), {})()
    worker.adaptive_controller = AdaptiveController(worker, AdaptiveSpeculativeParams(initial_steps=3, cfg_path=f.name))
    assert kw.adaptive_steps(worker) == [0, 3, 7]
    worker.adaptive_controller = None
    assert kw.adaptive_steps(worker) == [] and kw.adaptive_steps(object()) == []
    s = KIMI_CHAIN
    ours = {"launches": 384, "compiled": 40, "by_op": {"argmax_verify": 192, "tree_sampling": 192}, "guarded": 0,
            "skipped_memory": 0}
    out = {"seconds": 30.0, "sglang_seconds": 0.1, "shapes": {k: getattr(s, k) for k in s.__slots__}, "ours": ours,
           "states": [[1, 128], [8, 0]], "sglang": [], "notes": []}
    assert "N 4 (adaptive states: 128 more at N 1, 0 more at N 8), topk 1" in kw.describe(out), kw.describe(out)
