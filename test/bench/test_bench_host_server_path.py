"""bench_host's server-level greedy providers (`sglang_eagle_sample` / `ours_eagle_sample`) call what a server calls:
SGLang's real eagle_sample on its own verify objects, and the same call through our greedy hook. On the CPU only our
side runs (SGLang has no CPU kernel for the walk): through the hook it returns the reference walk's answer, on
SGLang's objects that the shared builder made for the batch's own device."""

import pytest
from helpers import run_json

pytestmark = pytest.mark.slow

CODE = """
import json, sys
sys.path.insert(0, ".")
import torch
from benchmark.kernels import bench_host as bh, bench_verify as bv
bv.DEV, bv.V, bh.V = "cpu", 300, 300  # small CPU inputs (the interpreter runs our kernel)
from sglang_kimi_eagle3.ops.verify_greedy import verify_tree_greedy_ref
bs = 3
greedy = bh.providers(bs)["argmax+verify"]
from sglang_kimi_eagle3.ops import argmax_verify as av
av.HOOK_LENS = False  # ours_eagle_sample as the switch is set (off here), the lens provider with it on for one call
predict, accept_lens, accept_index = greedy["ours_eagle_sample"]()
lens = greedy["ours_eagle_sample_lens"]()  # HOOK_LENS on for that call only
from sglang_kimi_eagle3.ops import argmax_verify as av
cand, ridx, nxt, sib, logits, s = bv.greedy_inputs(bs, bh.N)  # the same seeded inputs the providers built
p = torch.zeros(bs * bh.N, dtype=torch.int32); a = torch.full((bs, s), -1, dtype=torch.int32)
k = torch.empty(bs, dtype=torch.int32)
verify_tree_greedy_ref(p, a, k, cand, ridx, nxt, sib, logits.argmax(-1).view(bs, bh.N))
from sglang_kimi_eagle3.status import hookstatus
try:  # SGLang's side up to its kernel (its CPU walk writes nothing here): it needs the config a server publishes
    greedy["sglang_eagle_sample"]()
    sglang_side = "ran"
except Exception as exc:
    sglang_side = f"{type(exc).__name__}: {exc}"
print(json.dumps({"same": [torch.equal(predict, p), torch.equal(accept_lens, k + 1), torch.equal(accept_index, a)],
                  "lens_same": [torch.equal(lens[0], p), torch.equal(lens[1], k + 1), torch.equal(lens[2], a)],
                  "lens_after": av.HOOK_LENS, "sglang_side": sglang_side,
                  "plans": sorted({k[0] for k in __import__("sglang_kimi_eagle3.ops._host", fromlist=["_PLANS"])._PLANS}),
                  "accepted": int(k.sum()), "names": sorted(greedy),
                  "ours_calls": sum(n for (h, side, _, _), n in hookstatus.count_items() if side == "ours")}))
"""


def test_ours_eagle_sample_is_the_hooks_answer_on_sglangs_objects():
    out = run_json(CODE, SGLANG_KIMI_EAGLE3_KERNELS="ours", TRITON_INTERPRET="1")
    assert out["same"] == [True, True, True], out
    assert out["lens_same"] == [True, True, True] and out["lens_after"] is False, out  # and the switch put back
    assert {"argmax_verify_init", "argmax_verify_init_lens"} <= set(out["plans"]), out["plans"]  # each ran its kernel
    assert out["accepted"] > 0, "nothing accepted: the walk was not exercised"
    assert {"sglang_eagle_sample", "ours_eagle_sample"} <= set(out["names"])
    assert out["sglang_side"] == "ran", out["sglang_side"]  # SGLang's own call, as bench_host times it
    assert out["ours_calls"] >= 2, "the hook handed a call to SGLang instead of our kernel"
