"""The kernel warm-up on a GPU: after one pass over the plan the same launches compile nothing, and SGLang's JIT
modules and token-pool variants the warm-up builds are the ones SGLang's own calls then find (a file of its own: the
suite's longest test, so that the workers share it with test_kernel_warmup.py)."""

import pytest
import torch

from sglang_kimi_eagle3.ops import warmup as W

pytestmark = pytest.mark.slow  # 121 s on the H200 (2026-12-04): handed out early (test/durations.json)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compiles for a CUDA GPU (the H200 suite run)")
def test_on_the_gpu_a_second_pass_compiles_nothing_and_sglangs_jit_modules_build(monkeypatch):
    """What the scheduler's warm-up buys: after one pass over the plan, the same launches compile nothing."""
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_KERNELS", "ours")
    s = W.LaunchShapes(max_bs=4, topk=1, num_steps=3, num_draft_tokens=4, target_vocab=163840, draft_vocab=4000,
                       lm_head_rows=4000, hidden=7168, chain_column=True)
    dev = torch.device("cuda", torch.cuda.current_device())
    vs = W.plan(s, "ours", {})
    first = W.run(vs, s, dev)
    assert first.error == "" and first.launches == len(vs) and first.compiled is not None
    again = W.run(vs, s, dev)
    assert again.error == "" and again.compiled == 0, again
    # an adaptive launch's other states (steps 0: N 1; steps 7: N 8) warm their own variants, and their compile
    # counts add up; a second pass over them compiles nothing either
    states = W.plan_states(s, [0, 3, 7], "ours", {})
    total = W.run(states[0][1], states[0][0], dev)
    for st, more in states[1:]:
        total.add(W.run(more, st, dev))
    assert total.error == "" and isinstance(total.compiled, int) and total.compiled > 0, total
    assert all(W.run(more, st, dev).compiled == 0 for st, more in states[1:])
    from sglang_kimi_eagle3.integration.hooks.kernel_warmup import warm_sglang

    assert len(warm_sglang(s, dev)) == 2
    from sglang_kimi_eagle3.integration.hooks.kernel_warmup import warm_flashinfer_sampling

    assert warm_flashinfer_sampling(s, dev) == "FlashInfer sampling (top-k / top-p renorm)"
    # SGLang's assign_req_to_token_pool: after the warm-up, SGLang's own call at a batch of 5 with an unaligned
    # out_cache_loc (a free-list slice at an odd element) finds its variant compiled
    from sglang.srt.mem_cache.allocation import assign_req_to_token_pool, assign_req_to_token_pool_func

    from sglang_kimi_eagle3.integration.hooks.kernel_warmup import warm_token_pool

    table = torch.zeros(8, 8200, dtype=torch.int32, device=dev)
    assert warm_token_pool(table, 8, dev) == 8
    cache = assign_req_to_token_pool.device_caches[dev.index][0]
    before = len(cache)
    lens = torch.arange(5, dtype=torch.int32, device=dev)
    free = torch.arange(1, 40, dtype=torch.int64, device=dev)
    assign_req_to_token_pool_func(torch.arange(5, device=dev), table, lens, lens + 1, free[1:6], 5)
    torch.cuda.synchronize(dev)
    assert len(cache) == before, "SGLang's own launch compiled a variant the warm-up did not"
