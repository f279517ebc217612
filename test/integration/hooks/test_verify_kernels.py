"""Tree-verification hooks on the real installed SGLang 0.5.23, one fresh interpreter per kernel mode.

After `sglang.srt.plugins.load_plugins()` (which runs our entry point and HookRegistry.apply_hooks):
  - ours: every hooked reference (eagle_utils / eagle_worker_common bindings included) routes through our
    function, the status rows say `applied`, and calls through SGLang's own entry points with real SGLang
    objects (EagleVerifyInput, ScheduleBatch, SamplingBatchInfo, LogitsProcessorOutput) return exactly what
    the reference walk gives (CPU tensors: our kernels run under the Triton interpreter; SGLang has no CPU
    kernel here, so a fall-through to upstream would raise);
  - upstream: nothing is hooked, rows are `skipped`, the references are SGLang's own functions;
  - auto: a hook whose op has no win in the launch table in effect is not installed (rows `skipped`, SGLang's
    own functions in every reference, as under upstream); with a table that lists wins (a user table of a
    GPU this box pretends to be) the hooks are applied, and calls with CPU tensors fall through to SGLang's
    own code; the table lookup itself is checked on the shipped SM90 / SM120 tables.
"""

import pytest
from helpers import run_json

pytestmark = pytest.mark.slow

# auto with a table that lists wins: this process pretends to be an H200 whose user-tuned table (tune's format, no
# driver/triton stamp: it applies) records a win for each verify op at one shape
PRETEND_TUNED = """
import json, os, pathlib
from sglang_kimi_eagle3.ops import tables
tables.current_device = lambda: ("NVIDIA H200", (9, 0))
d = pathlib.Path(os.environ["SGLANG_KIMI_EAGLE3_TUNE_DIR"]); d.mkdir(parents=True, exist_ok=True)
(d / "NVIDIA_H200.json").write_text(json.dumps({"device": "NVIDIA H200", "cc": "9.0", "ops": {
    op: {"default": {}, "rules": [], "wins": ["n4_bs256"], "measured": {"n4_bs256": {}}}
    for op in ("argmax_verify", "verify_greedy", "tree_sampling")}}))
"""

PROLOGUE = """
import json, random
import torch
import sglang.srt.plugins as plugins
plugins.load_plugins()
from sglang_kimi_eagle3.status import hookstatus
from sglang_kimi_eagle3.integration import refresh_status, registry
from sglang_kimi_eagle3.integration.hooks import verify_kernels as vk
refresh_status()
from sglang.srt.speculative import eagle_utils
import sglang.srt.speculative.eagle_worker_common as ewc
from sglang.kernels.ops.speculative import sampling, spec_tree

REFS = {
    "eagle_utils.eagle_sample": (lambda: eagle_utils.eagle_sample, vk.eagle_sample_hook),
    "eagle_worker_common.eagle_sample": (lambda: ewc.eagle_sample, vk.eagle_sample_hook),
    "spec_tree.verify_tree_greedy_func": (lambda: spec_tree.verify_tree_greedy_func, vk.verify_tree_greedy_hook),
    "eagle_utils.verify_tree_greedy_func": (lambda: eagle_utils.verify_tree_greedy_func, vk.verify_tree_greedy_hook),
    "sampling.tree_speculative_sampling_target_only": (lambda: sampling.tree_speculative_sampling_target_only,
                                                       vk.tree_sampling_hook),
}
from sglang.srt.utils import is_cuda
out = {"sglang_cuda": bool(is_cuda()),  # SGLang's own platform branch: its JIT CUDA kernels on a GPU box
       "hooked": {k: registry._chain_contains(get(), fn) for k, (get, fn) in REFS.items()},
       "wrapped": {k: hasattr(get(), "__wrapped__") for k, (get, fn) in REFS.items()},
       "rows": {r.name: r.state for r in hookstatus.rows() if r.name.startswith("verify_")}}

from sglang_kimi_eagle3.ops.verify_greedy import random_tree_parents, tree_from_parents, verify_tree_greedy_ref
from sglang_kimi_eagle3.ops.tree_sampling import tree_speculative_sampling_ref
bs, n, V, depth = 3, 6, 50, 3
rng = random.Random(0)
parents = [random_tree_parents(rng, n, 2, depth) for _ in range(bs)]
ridx, nxt, sib = tree_from_parents(parents)
logits = torch.randn(bs * n, V, generator=torch.Generator().manual_seed(0)) * 3
am = logits.argmax(-1)
cand = torch.tensor([[int(am[b * n + parents[b][i]]) if i and rng.random() < 0.7 else rng.randrange(V)
                      for i in range(n)] for b in range(bs)])

def ref_greedy():
    p, a, k = torch.zeros(bs * n, dtype=torch.int32), torch.full((bs, depth + 1), -1, dtype=torch.int32), torch.empty(bs, dtype=torch.int32)
    verify_tree_greedy_ref(p, a, k, cand, ridx, nxt, sib, am.reshape(bs, n))
    return p, a, k
"""

CALLS = """
import sys
sys.path.insert(0, "test")
from worker_path import greedy_verify_batch
from sglang.srt.layers.logits_processor import LogitsProcessorOutput

def call(name, fn):
    try:
        out["calls"][name] = fn()
    except Exception as exc:
        out["calls"][name] = f"raised {type(exc).__name__}: {str(exc)[:600]}"

out["calls"] = {}
rp, ra, rk = ref_greedy()

def via_eagle_sample():  # the worker's verify entry point, greedy batch
    vi, batch = greedy_verify_batch(torch, cand, ridx, nxt, sib, depth, V)
    predict, accept_lens, accept_index = eagle_utils.eagle_sample(vi, batch, LogitsProcessorOutput(next_token_logits=logits.clone()))
    return [torch.equal(predict, rp), torch.equal(accept_lens, rk + 1), torch.equal(accept_index, ra), int(rk.sum())]

def via_verify_func():  # spec_tree's dispatcher, as eagle_utils calls it (keywords)
    p, a, k = torch.zeros(bs * n, dtype=torch.int32), torch.full((bs, depth + 1), -1, dtype=torch.int32), torch.empty(bs, dtype=torch.int32)
    r = eagle_utils.verify_tree_greedy_func(predicts=p, accept_index=a, accept_token_num=k, candidates=cand,
                                            retrieve_index=ridx, retrieve_next_token=nxt, retrieve_next_sibling=sib,
                                            target_predict=am.reshape(bs, n), topk=2)
    return [r[0] is p, torch.equal(p, rp), torch.equal(a, ra), torch.equal(k, rk)]

def via_sampling():  # the target-only tree sampler, as eagle_utils calls it (keywords)
    probs = torch.softmax(logits.reshape(bs, n, V), -1)
    coins, final = torch.rand(bs, n, generator=torch.Generator().manual_seed(1)), torch.rand(bs, generator=torch.Generator().manual_seed(2))
    res = []
    for fn in (sampling.tree_speculative_sampling_target_only, tree_speculative_sampling_ref):
        p, a, k = torch.zeros(bs * n, dtype=torch.int32), torch.full((bs, depth + 1), -1, dtype=torch.int32), torch.empty(bs, dtype=torch.int32)
        d = torch.zeros_like(probs)
        fn(predicts=p, accept_index=a, accept_token_num=k, candidates=cand, retrive_index=ridx, retrive_next_token=nxt,
           retrive_next_sibling=sib, uniform_samples=coins, uniform_samples_for_final_sampling=final, target_probs=probs,
           draft_probs=d, threshold_single=1.0, threshold_acc=1.0, deterministic=True)
        res.append((p, a, k, d))
    return [torch.equal(x, y) for x, y in zip(*res)]

call("eagle_sample", via_eagle_sample)
call("verify_tree_greedy_func", via_verify_func)
call("tree_sampling", via_sampling)
"""

EPILOGUE = "print(json.dumps(out))"


def _run(mode, calls=True, pre="", **env):
    return run_json(pre + PROLOGUE + (CALLS if calls else "") + EPILOGUE, SGLANG_KIMI_EAGLE3_KERNELS=mode,
                    TRITON_INTERPRET="1", **env)


ROWS = ("verify_argmax_greedy", "verify_tree_greedy", "verify_tree_sampling")


def test_ours_routes_every_reference_and_call_through_our_kernels():
    out = _run("ours")
    assert all(out["hooked"].values()), out["hooked"]
    assert out["rows"] == dict.fromkeys(ROWS, "applied")
    eagle = out["calls"]["eagle_sample"]
    assert eagle[:3] == [True, True, True], eagle  # predict, accept_lens, accept_index as the reference walk
    assert eagle[3] > 0, "nothing accepted: the tree walk was not exercised"
    assert out["calls"]["verify_tree_greedy_func"] == [True] * 4, out["calls"]["verify_tree_greedy_func"]
    assert out["calls"]["tree_sampling"] == [True] * 4, out["calls"]["tree_sampling"]


GARBAGE_INIT = """
from sglang_kimi_eagle3.ops import argmax_verify as _av
_av.HOOK_INIT = True
_empty = torch.empty
def _garbage(*a, **k):  # every int32 buffer starts as garbage: the kernel must write the starting values itself
    t = _empty(*a, **k)
    return t.fill_(-123457) if t.dtype == torch.int32 else t
torch.empty = _garbage
"""


def test_greedy_init_writes_the_hooks_empty_buffers_whole():
    """HOOK_INIT (the hook allocating with torch.empty, the kernel writing eagle_sample's starting values): through
    SGLang's real eagle_sample, from garbage buffers, the same predict / accept_lens / accept_index as the reference."""
    out = run_json(PROLOGUE + GARBAGE_INIT + CALLS + EPILOGUE, SGLANG_KIMI_EAGLE3_KERNELS="ours", TRITON_INTERPRET="1")
    eagle = out["calls"]["eagle_sample"]
    assert eagle[:3] == [True, True, True] and eagle[3] > 0, eagle


def test_greedy_lens_returns_eagle_samples_accept_lens_from_the_kernel():
    """HOOK_LENS (the kernel writing the accept lengths, no `+ 1` launch), with HOOK_INIT: through SGLang's real
    eagle_sample, accept_lens equal to the reference walk's count + 1, predict and accept_index unchanged."""
    out = run_json(PROLOGUE + GARBAGE_INIT + "_av.HOOK_LENS = True\n" + CALLS + EPILOGUE,
                   SGLANG_KIMI_EAGLE3_KERNELS="ours", TRITON_INTERPRET="1")
    eagle = out["calls"]["eagle_sample"]
    assert eagle[:3] == [True, True, True] and eagle[3] > 0, eagle


def test_upstream_leaves_sglang_untouched():
    out = _run("upstream", calls=False)
    assert not any(out["hooked"].values()) and not any(out["wrapped"].values()), out
    assert out["rows"] == dict.fromkeys(ROWS, "skipped")


NO_WINS = """
from sglang_kimi_eagle3.ops import tables
tables.current_device = lambda: ("NVIDIA H800", (9, 0))  # the generic SM90 table: no wins listed
"""


def test_auto_without_a_table_win_installs_no_hook(tmp_path):
    """No win in the table in effect (an SM90 GPU other than the H200, nothing tuned; on the H200 itself the bundled
    table lists wins): SGLang's functions stay where they are, unwrapped."""
    out = _run("auto", calls=False, pre=NO_WINS, SGLANG_KIMI_EAGLE3_TUNE_DIR=str(tmp_path / "tuned"))
    assert not any(out["hooked"].values()) and not any(out["wrapped"].values()), out
    assert out["rows"] == dict.fromkeys(ROWS, "skipped")


def test_auto_with_a_table_win_hooks_and_falls_through_off_cuda(tmp_path):
    out = _run("auto", pre=PRETEND_TUNED, SGLANG_KIMI_EAGLE3_TUNE_DIR=str(tmp_path / "tuned"))
    assert all(out["hooked"].values()), out["hooked"]
    assert out["rows"] == dict.fromkeys(ROWS, "applied")
    # no launch table for a CPU: SGLang's own code runs, and with these CPU tensors it has no kernel: its
    # eagle_sample needs the server's runtime context; its greedy dispatcher, on a CPU-only box, finds no
    # platform branch and writes nothing, and on a CUDA box takes its JIT CUDA kernel, which refuses CPU
    # tensors; its sampler tries to JIT-build (or run) the CUDA kernel
    calls = out["calls"]
    assert calls["eagle_sample"].startswith("raised ValueError: config namespace 'spec'"), calls
    if out["sglang_cuda"]:
        greedy = calls["verify_tree_greedy_func"]
        assert isinstance(greedy, str) and greedy.startswith("raised RuntimeError") and "tree.cuh" in greedy \
            and "allowed options: [cuda]" in greedy, calls
    else:
        assert calls["verify_tree_greedy_func"] == [True, False, False, False], calls
    assert calls["tree_sampling"].startswith("raised"), calls


def test_auto_uses_ours_exactly_where_the_table_records_a_win():
    from sglang_kimi_eagle3.integration.hooks.verify_kernels import shape_key
    from sglang_kimi_eagle3.ops.arch import use_ours
    from sglang_kimi_eagle3.ops.tables import load_table

    h200, sm120 = load_table("NVIDIA H200", (9, 0)), load_table(None, (12, 0))
    ops = ("argmax_verify", "verify_greedy", "tree_sampling")
    # the bundled H200 table: the eager per-call wins of 2026-12-02 and -04 (bench_host.py, tune): tree sampling at
    # N 4 up to bs 128, argmax + verify at N 4 bs 1-128 (bs 2-8 since run 22); never verify_greedy alone, N 16 or bs
    # 256 (not measured per call)
    assert all(use_ours("tree_sampling", shape_key(bs, 4), h200) for bs in (1, 4, 8, 16, 64, 128))
    assert [bs for bs in (1, 4, 8, 9, 16, 64, 128, 256) if use_ours("argmax_verify", shape_key(bs, 4), h200)] == [
        1, 4, 8, 9, 16, 64, 128]
    assert not any(use_ours("verify_greedy", shape_key(bs, n), h200) for bs in (1, 8, 64) for n in (4, 16))
    assert not any(use_ours(op, shape_key(bs, 16), h200) or use_ours(op, shape_key(256, 4), h200)
                   for op in ops for bs in (1, 8, 64))
    # the rule itself, on the GPU-time wins the table keeps as graph_wins
    graph = {**h200, "ops": {op: {**spec, "wins": spec.get("graph_wins", spec.get("wins", []))}
                             for op, spec in h200["ops"].items()}}
    assert use_ours("argmax_verify", shape_key(1, 4), graph) and use_ours("tree_sampling", shape_key(200, 16), graph)
    assert not use_ours("verify_greedy", shape_key(1, 16), graph)  # measured loss (7.2 vs 7.0 µs)
    assert not use_ours("argmax_verify", shape_key(1, 64), graph)  # never measured: SGLang's kernel
    assert not any(use_ours(op, shape_key(8, 4), sm120) for op in ops)
