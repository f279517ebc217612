"""The speedup model: Leviathan's closed form as a special case, hand-computed rounds, cost sources."""

import pytest

from sglang_kimi_eagle3.planner import costs
from sglang_kimi_eagle3.planner.costs import CostModel, interp, pass_us
from sglang_kimi_eagle3.planner.model import Acceptance, predict, round_us, search, settings
from sglang_kimi_eagle3.planner.profiles import Hardware, PassModel


@pytest.mark.parametrize("alpha", [0.4, 0.7, 0.9])
@pytest.mark.parametrize("gamma", [1, 3, 6])
@pytest.mark.parametrize("c", [0.0, 0.05, 0.3])
def test_reduces_to_leviathan_closed_form(alpha, gamma, c):
    p = predict([alpha] * gamma, gamma, costs.leviathan(c), bs=1)
    assert p.speedup == pytest.approx((1 - alpha ** (gamma + 1)) / ((1 - alpha) * (gamma * c + 1)), rel=1e-12)


def test_hand_computed_round():
    # target(bs, n) = 10 + n, draft = 2, verify = 1; steps 2 -> round = target(1, 3) + 1*draft + draft(extend) + verify
    cm = CostModel("toy", lambda bs, n: 10.0 + n, lambda bs, n: 2.0, lambda bs, n: 1.0)
    assert round_us(cm, 1, 2, 1, 3) == 13 + 2 + 2 + 1
    p = predict([0.5, 0.5], 2, cm, bs=1)
    assert p.tau == pytest.approx(1.75)
    assert p.base_us == 11 and p.round_us == 18
    assert p.speedup == pytest.approx(1.75 * 11 / 18)


def test_no_speculation_is_exactly_one():
    p = predict([], 0, costs.leviathan(0.1), bs=8)
    assert (p.steps, p.tau, p.speedup) == (0, 1.0, 1.0)


def test_settings_tree_constraints():
    assert settings([3], [1], None) == [(3, 1, 4)]
    # topk 2, steps 3: N must lie in (3, 2 + (3 - 1) * 2^2 + 1] = (3, 11] (SGLang's organize_draft_results)
    assert settings([3], [2], [3, 4, 7, 8, 11, 12]) == [(3, 2, 4), (3, 2, 7), (3, 2, 8), (3, 2, 11)]


def test_search_best_and_skips_unmeasured_trees():
    acc = Acceptance([0.8, 0.6, 0.4], "test", {(2, 4, 6): [0.9, 0.8]})
    cm = costs.leviathan(0.1)
    plan, skipped = search(acc, cm, [1, 64], settings([1, 2, 3], [1, 4], [6, 8]))
    assert (3, 4, 8) in skipped and (2, 4, 6) not in skipped
    preds, best = plan[1]
    assert best.speedup == max(p.speedup for p in preds)
    assert any(p.topk == 4 and p.steps == 2 and p.draft_tokens == 6 for p in preds)


def test_search_prefers_no_speculation_when_drafting_is_expensive():
    plan, _ = search(Acceptance([0.1], "low"), costs.leviathan(2.0), [1], settings([1, 2], [1], None))
    assert plan[1][1].steps == 0


HW = Hardware(mem_GBps=1000, mem_efficiency=1.0, bf16_tflops=100, compute_efficiency=1.0, allreduce_latency_us=10,
              allreduce_GBps=100, layer_overhead_us=5)


def test_pass_us_dense_hand_computed():
    m = PassModel(layers=2, pass_overhead_us=7, static_bytes_per_gpu=1e6, moe_layers=0, experts=0, experts_per_token=0,
                  expert_bytes_per_gpu=0, kv_bytes_per_ctx_token=100, gemm_flops_per_token=1e6,
                  attn_flops_per_ctx_token=0, allreduces=3, allreduce_bytes_per_token=1000, tail_us=1)
    # memory: (1e6 + 2*10*100) B / (1000 GB/s = 1e6 B/us) = 1.002 us; compute: 4e6 / 1e8 = 0.04 us
    # comm: 3 * (10 + 4*1000/1e5) = 30.12; total 7 + 2*5 + 1.002 + 30.12 + 1
    assert pass_us(m, HW, bs=2, n=2, ctx=10) == pytest.approx(7 + 10 + 1.002 + 30.12 + 1)


def test_pass_us_moe_expected_distinct_experts():
    m = PassModel(layers=0, pass_overhead_us=0, static_bytes_per_gpu=0, moe_layers=1, experts=4, experts_per_token=2,
                  expert_bytes_per_gpu=1e6, kv_bytes_per_ctx_token=0, gemm_flops_per_token=0,
                  attn_flops_per_ctx_token=0, allreduces=0, allreduce_bytes_per_token=0, tail_us=0)
    # T = 2 tokens: E_hit = 4 * (1 - (1 - 2/4)^2) = 3 experts -> 3e6 B at 1e6 B/us
    assert pass_us(m, HW, bs=2, n=1, ctx=0) == pytest.approx(3.0)
    # many tokens touch every expert, never more
    assert pass_us(m, HW, bs=64, n=8, ctx=0) == pytest.approx(4.0)


def test_interp_linear_and_extension():
    pts = {1: 10.0, 3: 30.0}
    assert interp(pts, 2) == 20.0 and interp(pts, 5) == 50.0 and interp(pts, 0) == 0.0
    assert interp({4: 7.0}, 100) == 7.0


def test_from_table_and_harness_rows():
    t = costs.from_table({"target_us": {"1": {"1": 100, "4": 130}, "8": {"1": 200, "4": 280}},
                          "draft_us": {"1": 10, "8": 20}}, "t.json")
    assert t.target_us(1, 4) == 130 and t.target_us(8, 1) == 200
    assert t.target_us(4.5, 1) == pytest.approx(150)  # halfway in bs
    assert t.draft_us(8, 3) == 20 and t.verify_us(1, 4) == 0.0
    rows = {"rows": [{"op": "target_pass", "shape": {"bs": 1, "n": 1}, "us": 100},
                     {"op": "target_pass", "shape": {"bs": 1, "n": 4}, "us": 130},
                     {"op": "draft_pass", "shape": {"bs": 1, "n": 1}, "us": 9},
                     {"op": "verify", "shape": {"bs": 1, "n": 4}, "us": 5},
                     {"op": "other", "shape": {"bs": 1}, "us": 1e9}]}
    h = costs.from_table(rows, "harness.json")
    assert (h.target_us(1, 4), h.draft_us(1, 1), h.verify_us(1, 4)) == (130, 9, 5)


def test_from_bench_reproduces_measured_speedup_at_measured_steps():
    levels = [{"concurrency": 1, "spec": {"tok_s_per_req_mean": 150.0, "tau": 2.5}, "baseline": {"tok_s_per_req_mean": 100.0}},
              {"concurrency": 8, "spec": {"tok_s_per_req_mean": 90.0, "tau": 2.5}, "baseline": {"tok_s_per_req_mean": 80.0}}]
    cm = costs.from_bench(levels, steps=3, source="b.json")
    for bs, ratio in ((1, 1.5), (8, 90 / 80)):
        assert predict([1.0, 0.5, 0.0], 3, cm, bs).speedup == pytest.approx(ratio)  # tau = 1 + 1 + 0.5 + 0 = 2.5
    # one step fewer costs a third less overhead: round = t1 + extra * 2/3
    t1, extra = 1e6 / 100, 1e6 * 2.5 / 150 - 1e6 / 100
    assert round_us(cm, 1, 2, 1, 3) == pytest.approx(t1 + extra * 2 / 3)


def test_from_bench_without_baseline_is_a_user_error():
    from sglang_kimi_eagle3.errors import UserError

    with pytest.raises(UserError, match="baseline"):
        costs.from_bench([{"concurrency": 1, "spec": {"tok_s_per_req_mean": 1.0, "tau": 2.0}, "baseline": None}], 3, "x")
