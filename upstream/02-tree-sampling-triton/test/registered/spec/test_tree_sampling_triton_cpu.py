"""Triton tree rejection sampling vs its plain-torch reference under TRITON_INTERPRET=1 (CPU),
and the dispatch rule (which kernel a call gets)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton compiles anything

import importlib.util
import math
import random
import unittest
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from sglang.test.ci.ci_register import register_cpu_ci

register_cpu_ci(est_time=60, suite="base-a-test-cpu")


# ----------------------------------------------------------------------------- numpy port of the CUDA kernel
# TreeSpeculativeSamplingTargetOnly (sgl_kernel/speculative/sampling.cuh) with flashinfer's
# DeviceSamplingFromProb and DeterministicInclusiveSum, line by line, in fp32, one 1024-thread block per
# request; vectorised over the coin so that its law can be enumerated over every fp32 coin on a grid.

F32 = np.float32
BLOCK = 1024


def _warp_sum(x):
    """Shuffle-down tree over the last axis (32 lanes): lane 0's value."""
    x = x.copy()
    off = 16
    while off >= 1:
        x[..., : 32 - off] = (x[..., : 32 - off] + x[..., off:32]).astype(F32)
        off //= 2
    return x[..., 0]


def _block_sum(vals):
    """BlockReduce Sum over [BLOCK, VEC] (each thread's items, then warp reductions)."""
    t = np.zeros(BLOCK, F32)
    for j in range(vals.shape[1]):
        t = (t + vals[:, j]).astype(F32)
    w = _warp_sum(t.reshape(BLOCK // 32, 32))
    return F32(_warp_sum(np.concatenate([w, np.zeros(32 - len(w), F32)])[None, :])[0])


def _warp_exclusive_scan(x):
    """DeterministicInclusiveSum's up-sweep / down-sweep over 32 lanes: (exclusive prefix, total)."""
    x, lane, off = x.astype(F32).copy(), np.arange(32), 1
    while off < 32:
        tmp = np.concatenate([x[:off], x[:-off]])  # __shfl_up_sync: low lanes keep their own value
        x = np.where((lane + 1) % (off * 2) == 0, (x + tmp).astype(F32), x)
        off *= 2
    total, x[31], off = x[31], 0, 16
    while off >= 1:
        tmp = x[lane ^ off]
        x = np.where((lane + 1) % (off * 2) == 0, (tmp + x).astype(F32), np.where((lane + 1) % (off * 2) == off, tmp, x))
        off //= 2
    return x, total


def _inclusive_sum(vals):
    """DeterministicInclusiveSum over [BLOCK, VEC]: (warp prefix + thread prefix) + running item sum."""
    run, s = np.zeros_like(vals), np.zeros(BLOCK, F32)
    for j in range(vals.shape[1]):
        s = (s + vals[:, j]).astype(F32)
        run[:, j] = s
    excl, wsum = np.zeros(BLOCK, F32), np.zeros(BLOCK // 32, F32)
    for w in range(BLOCK // 32):
        excl[w * 32 : (w + 1) * 32], wsum[w] = _warp_exclusive_scan(s[w * 32 : (w + 1) * 32])
    wex, _ = _warp_exclusive_scan(np.concatenate([wsum, np.zeros(32 - len(wsum), F32)]))
    return ((wex[np.arange(BLOCK) // 32] + excl).astype(F32)[:, None] + run).astype(F32)


def cuda_final_draw(q, p, use_p, coins):
    """The token the CUDA kernel draws from relu(q - p) of one row, for each coin (fp32 array)."""
    d, coins = len(q), np.asarray(coins, F32)
    vec = math.gcd(4, d)
    tile = BLOCK * vec

    def relu(i):  # q_vec / p_vec loads of tile i (p only when there is a draft for this token)
        qv, pv, hi = np.zeros(tile, F32), np.zeros(tile, F32), min(d, (i + 1) * tile)
        qv[: hi - i * tile] = q[i * tile : hi]
        if use_p:
            pv[: hi - i * tile] = p[i * tile : hi]
        return np.maximum((qv - pv).astype(F32), F32(0)).reshape(BLOCK, vec)

    tiles = -(-d // tile)
    total = F32(0)
    for i in range(tiles):
        total = F32(total + _block_sum(relu(i)))
    u = (coins * total).astype(F32)
    sampled, last_valid = np.full(coins.shape, d), np.full(coins.shape, -1)
    aggregate, live = np.zeros(coins.shape, F32), np.ones(coins.shape, bool)
    for i in range(tiles):  # DeviceSamplingFromProb(i, ...), then break once aggregate > u
        x = relu(i)
        n = min(tile, d - i * tile)
        valid = (x > 0).reshape(-1)[:n]
        pg = np.where(x > 0, x, F32(0)).astype(F32)
        local = _block_sum(pg)
        run = live & ((aggregate + local).astype(F32) > u)
        if run.any():
            cdf = _inclusive_sum(pg).reshape(-1)[:n]
            gt = ((cdf[None, :] + aggregate[:, None]).astype(F32) > u[:, None]) & valid[None, :]
            head = gt != np.concatenate([np.zeros((len(coins), 1), bool), gt[:, :-1]], 1)  # FlagHeads, 0 before
            first = np.where(head.any(1), head.argmax(1) + i * tile, d)
            sampled = np.where(run, np.minimum(sampled, first), sampled)  # atomicMin
        if valid.any():
            last_valid = np.where(live, np.nonzero(valid)[0][-1] + i * tile, last_valid)
        aggregate = np.where(live, (aggregate + local).astype(F32), aggregate)
        live &= ~(aggregate > u)
    return np.where(sampled == d, np.where(last_valid == -1, d - 1, last_valid), sampled)


def cuda_children_walk(q_row, tokens, coins, threshold_single=1.0, threshold_acc=1.0):
    """The kernel's `while (cur_index != -1)` over one node's children (tokens in sibling order): the
    accepted child's position for each coin (fp32 array), -1 when all are rejected."""
    thr_single, thr_acc = F32(threshold_single), max(F32(threshold_acc), F32(1e-9))
    coins = np.asarray(coins, F32)
    accepted, prob_acc = np.full(coins.shape, -1), F32(0)
    for k, tok in enumerate(tokens):
        q = F32(q_row[tok])
        prob_acc = F32(prob_acc + q)
        if q > 0:
            accepted[(accepted < 0) & ((coins < F32(prob_acc / thr_acc)) | (q >= thr_single))] = k
    return accepted


def cuda_kernel_one_request(cand, ridx, nxt, sib, coins, final_coin, tp, dp, s, **thresholds):
    """The CUDA kernel for one request (dp, this request's draft_probs, mutated): (predicts {retrive
    index: token}, accept_index row, accept_token_num)."""
    predicts, accept_index = {}, [int(ridx[0])]
    last, cur, row, n_acc, coin = int(ridx[0]), 0, 0, 0, coins[0]
    for _ in range(1, s):
        chain, c = [], int(nxt[cur])
        while c != -1:
            chain.append(c)
            c = int(sib[c])
        k = int(cuda_children_walk(tp[row], [int(cand[c]) for c in chain], [coin], **thresholds)[0])
        for c in chain if k < 0 else chain[:k]:  # rejected: draft_probs = target_probs there
            dp[row, int(cand[c])] = tp[row, int(cand[c])]
        if k < 0:
            break
        cur = chain[k]
        predicts[last] = int(cand[cur])
        n_acc += 1
        accept_index.append(int(ridx[cur]))
        last, row, coin = int(ridx[cur]), cur, coins[cur]
    predicts[last] = int(cuda_final_draw(tp[row], dp[row], n_acc != s - 1, [final_coin])[0])
    return predicts, accept_index, n_acc


def cuda_emission_law(parents, cand, tp, s, bits=20, children_walk=cuda_children_walk):
    """The exact law of the tuples one request emits under the CUDA kernel (draft_probs zero, thresholds
    1), each coin uniform on the fp32 grid {k / 2^bits}: every node's outcome enumerated over the whole
    grid. Coins of different nodes are different entries of uniform_samples: independent."""
    tp = np.asarray(tp, F32)
    grid = (np.arange(2**bits, dtype=np.float64) / 2**bits).astype(F32)
    kids = [[c for c in range(1, len(parents)) if parents[c] == v] for v in range(len(parents))]
    law = {}

    def draw(v, p, use_p, prefix, prob):
        for tok, cnt in zip(*np.unique(cuda_final_draw(tp[v], p, use_p, grid), return_counts=True)):
            law[prefix + (int(tok),)] = law.get(prefix + (int(tok),), 0.0) + prob * cnt / len(grid)

    def visit(v, prefix, prob, depth):
        if depth == s - 1:  # the bonus draw: no draft
            return draw(v, None, False, prefix, prob)
        toks = [int(cand[c]) for c in kids[v]]
        accepted = children_walk(tp[v], toks, grid)
        for k, c in enumerate(kids[v]):
            if (accepted == k).any():
                visit(c, prefix + (toks[k],), prob * float((accepted == k).mean()), depth + 1)
        if (accepted < 0).any():
            p = np.zeros_like(tp[v])
            p[toks] = tp[v][toks]  # every child rejected
            draw(v, p, True, prefix, prob * float((accepted < 0).mean()))

    visit(0, (), 1.0, 0)
    return law


class TestTreeSamplingTritonCpu(unittest.TestCase):
    def _case(self, bs, n, vocab, topk, depth, seed, **kw):
        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        rng = random.Random(seed)
        g = torch.Generator().manual_seed(seed)
        if bs:
            ridx, nxt, sib = ts.tree_from_parents(
                [ts.random_tree_parents(rng, n, topk, depth) for _ in range(bs)]
            )
        else:
            ridx = nxt = sib = torch.empty((0, n), dtype=torch.int64)
        w = torch.randint(0, 4, (bs, n, vocab), generator=g).float()
        w[..., 0] += 1
        tp = torch.floor(w / w.sum(-1, keepdim=True) * 256) / 256  # dyadic: exact fp32 sums
        tp[..., 0] += 1 - tp.sum(-1)
        dp = torch.roll(tp, 1, dims=-1).contiguous()
        cand = torch.where(
            torch.rand(bs, n, generator=g) < 0.6,
            tp.argmax(-1),
            torch.randint(0, vocab, (bs, n), generator=g),
        )
        us, uf = torch.rand(bs, n, generator=g), torch.rand(bs, generator=g)
        outs = []
        for fn in (ts.tree_speculative_sampling_triton, ts.tree_speculative_sampling_ref):
            p = torch.full((bs * n,), -7, dtype=torch.int32)
            a = torch.full((bs, depth + 1), -7, dtype=torch.int32)
            k = torch.full((bs,), -7, dtype=torch.int32)
            d = dp.clone()
            fn(p, a, k, cand, ridx, nxt, sib, us, uf, tp, d, **kw)
            outs.append((p, a, k, d))
        for name, x, y in zip(("predicts", "accept_index", "accept_token_num", "draft_probs"), *outs):
            self.assertTrue(torch.equal(x, y), name)
        # the numpy port of the CUDA kernel agrees with the reference too
        thresholds = {k: kw[k] for k in ("threshold_single", "threshold_acc") if k in kw}
        p, a, k, d = outs[1]
        dp = dp.numpy().copy()
        for b in range(bs):
            preds, acc, n_acc = cuda_kernel_one_request(
                cand[b].numpy(), ridx[b].numpy(), nxt[b].numpy(), sib[b].numpy(), us[b].numpy(),
                uf[b].numpy(), tp[b].numpy(), dp[b], depth + 1, **thresholds,
            )
            self.assertEqual((n_acc, acc), (int(k[b]), a[b, : n_acc + 1].tolist()), f"request {b}: path")
            self.assertEqual(preds, {r: int(p[r]) for r in preds}, f"request {b}: predicts")
        self.assertTrue(np.array_equal(dp, d.numpy()), "draft_probs (port)")
        return outs[0]

    def test_chain_matches_the_reference(self):
        self._case(3, 4, 300, 1, 3, 0)

    def test_tree_over_several_tiles_matches_the_reference(self):
        _, _, k, _ = self._case(2, 8, 5000, 3, 3, 1)  # 5000 > one 4096-entry tile
        self.assertTrue(bool((k >= 0).all()))

    def test_thresholds_match_the_reference(self):
        self._case(4, 4, 64, 1, 3, 2, threshold_single=0.3, threshold_acc=0.5)

    def test_emitted_tokens_follow_the_target_distribution(self):
        """Chi-square of the emitted tokens (up to three per request, 36 bins) against the rule's law:
        a small case of the CUDA test's construction, so that CPU CI checks the construction itself."""
        from scipy import stats

        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        rows = 6000
        (cand, ridx, nxt, sib, us, uf, tp, dp), s, law = ts.emission_case(rows, seed=0)
        p = torch.zeros(rows * cand.shape[1], dtype=torch.int32)
        a = torch.full((rows, s), -1, dtype=torch.int32)
        k = torch.zeros(rows, dtype=torch.int32)
        cfg = {"walk_rows_per_program": 128, "rows_per_program": 512, "sample_rows_per_program": 512}
        ts.tree_speculative_sampling_triton(p, a, k, cand, ridx, nxt, sib, us, uf, tp, dp, config=cfg)
        observed, expected = ts.emission_counts(ts.emitted_tokens(p, a, k), law)  # raises off the law's support
        self.assertGreater(float(expected.min()) * rows, 5, "chi-square needs >= 5 expected per bin")
        pval = stats.chisquare(observed, expected * rows).pvalue
        self.assertGreaterEqual(pval, 1e-3, f"emitted tokens differ from the rule's law (p = {pval:.2e})")
        # power on these counts: a 10% shift of the mass toward the most likely sequence is rejected
        shifted = 0.9 * expected + 0.1 * (expected == expected.max()).double()
        self.assertLess(stats.chisquare(observed, shifted * rows).pvalue, 1e-3, "chi-square too weak")

    def test_emission_law_is_the_cuda_kernels_law(self):
        """emission_law (what the CUDA test's chi-square tests against) equals the law of the numpy port
        of SGLang's CUDA kernel on the CUDA test's case, enumerated over every coin of a 2^20 fp32 grid:
        at EMISSION_ROWS requests their chi-square noncentrality is < 0.01 (no effect on the test), and
        the comparison rejects a wrong rule (prob_acc reset per sibling instead of summed)."""
        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        parents = [-1, 0, 0, 1, 2]  # emission_case's tree
        (cand, ridx, nxt, sib, us, uf, tp, dp), s, law = ts.emission_case(1, seed=ts.EMISSION_SEED)
        self.assertTrue(all(torch.equal(x, y) for x, y in zip((ridx, nxt, sib), ts.tree_from_parents([parents]))))
        keys = sorted(law)
        want = np.array([law[k] for k in keys])
        want /= want.sum()

        def noncentrality(got):  # infinite off the support (emission_counts raises there)
            if sorted(got) != keys:
                return math.inf
            return ts.EMISSION_ROWS * float((((np.array([got[k] for k in keys]) - want) ** 2) / want).sum())

        cuda_law = cuda_emission_law(parents, cand[0].tolist(), tp[0].numpy(), s)
        self.assertEqual(sorted(cuda_law), keys, "support")
        lam = noncentrality(cuda_law)
        self.assertLess(lam, 0.01, "emission_law is not the CUDA kernel's law")

        def reset_walk(q_row, tokens, coins, **kw):  # the wrong rule: each sibling against its own q only
            out = np.full(np.shape(coins), -1)
            for k, tok in enumerate(tokens):
                out[(out < 0) & (np.asarray(coins) < q_row[tok])] = k
            return out

        wrong = cuda_emission_law(parents, cand[0].tolist(), tp[0].numpy(), s, children_walk=reset_walk)
        self.assertGreater(noncentrality(wrong), 100, "the comparison cannot tell a wrong rule")
        print(f"emission_law vs the CUDA port: noncentrality {lam:.2e} at {ts.EMISSION_ROWS} requests")

    def test_cuda_case_coins_pass_under_the_reference(self):
        """The CUDA chi-square's fixed coins (EMISSION_SEED, drawn on the CPU): the reference's emitted
        tokens on them pass the same test, so there a kernel fails only by departing from the rule."""
        from scipy import stats

        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        rows = ts.EMISSION_ROWS
        (cand, ridx, nxt, sib, us, uf, tp, dp), s, law = ts.emission_case(rows, seed=ts.EMISSION_SEED)
        p = torch.full((rows * cand.shape[1],), -7, dtype=torch.int32)
        a = torch.full((rows, s), -7, dtype=torch.int32)
        k = torch.full((rows,), -7, dtype=torch.int32)
        ts.tree_speculative_sampling_ref(p, a, k, cand, ridx, nxt, sib, us, uf, tp, dp)
        observed, expected = ts.emission_counts(ts.emitted_tokens(p, a, k), law)
        pval = stats.chisquare(observed, expected * rows).pvalue
        self.assertGreaterEqual(pval, 1e-3, f"seed {ts.EMISSION_SEED}: the reference fails on these coins (p = {pval:.2e})")

    def test_benchmark_inputs_are_valid_at_large_batch(self):
        """bench_tree_sampling_triton.py's inputs at bs 128 and 256, both shapes: within the kernels'
        contract (its check_inputs, which rejects a bad index), and the walk on them matches the
        reference (small vocabulary; the interpreter raises on an out-of-range load)."""
        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        path = Path(__file__).resolve().parents[3] / "benchmark/kernels/speculative/bench_tree_sampling_triton.py"
        spec = importlib.util.spec_from_file_location("bench_tree_sampling_triton", path)
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
        for n in bench.SHAPES:
            for bs in (128, 256):
                with self.subTest(n=n, bs=bs):
                    inputs, out = bench.setup(bs, n, 1000, device="cpu")
                    bench.check_inputs(inputs, out())
        inputs, out = bench.setup(128, 16, 1000, device="cpu")
        bad = list(inputs)
        bad[0] = bad[0].clone()
        bad[0][5, 3] = 1000  # a candidate past the vocabulary
        with self.assertRaisesRegex(ValueError, "candidates"):
            bench.check_inputs(bad, out())
        bad = list(inputs)
        bad[2] = bad[2].clone()
        bad[2][7, 1] = 0  # a link back to the root
        with self.assertRaisesRegex(ValueError, "linked twice"):
            bench.check_inputs(bad, out())
        results = []
        cfg = {"walk_rows_per_program": 32, "rows_per_program": 128, "sample_rows_per_program": 128}  # interpreter speed
        for fn, kw in ((ts.tree_speculative_sampling_triton, {"config": cfg}), (ts.tree_speculative_sampling_ref, {})):
            p, a, k = out()
            fn(p, a, k, *inputs[:-1], inputs[-1].clone(), **kw)
            results.append((a, k))
        self.assertTrue(torch.equal(results[0][0], results[1][0]), "accept_index")
        self.assertTrue(torch.equal(results[0][1], results[1][1]), "accept_token_num")
        self.assertTrue(bool((results[0][1] > 0).any()), "some drafts accepted")

    def test_empty_batch(self):
        self._case(0, 4, 64, 1, 3, 3)

    def test_the_replayable_launch_takes_its_workspaces_as_arguments(self):
        """_sampling_fused_checked (what replay_launches records per operand signature on CUDA): the guards and
        one launch into the workspaces it is handed, equal to the reference. On the CPU (the interpreter) the op
        never goes through the replay: its recording cannot see interpreted launches."""
        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        def via_checked(p, a, k, cand, ridx, nxt, sib, us, uf, tp, d, threshold_single=1.0, threshold_acc=1.0):
            tile_sums, tile_lasts, counters = (torch.full_like(w, -3) for w in ts.fused_workspaces(
                cand.device, cand.shape[0], ts._tiles(tp.shape[2])))
            counters.zero_()  # the one workspace that starts at zero (the kernel leaves it zero)
            ts._sampling_fused_checked(p, a, k, cand, ridx, nxt, sib, us, uf, tp, d, tile_sums, tile_lasts,
                                       counters, threshold_single, threshold_acc)
            self.assertTrue(bool((counters == 0).all()), "counters left zero")

        with mock.patch.object(ts, "tree_speculative_sampling_triton", via_checked):
            self._case(3, 4, 300, 1, 3, 0)
            self._case(2, 8, 5000, 3, 3, 1)  # several tiles
            self._case(16, 4, 64, 1, 3, 2, threshold_single=0.5, threshold_acc=0.7)
        with mock.patch.object(ts, "_replayed", side_effect=AssertionError("the replay ran on the CPU")):
            self._case(3, 4, 300, 1, 3, 0)

    def test_dispatch_rule(self):
        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        env = ts.ENV_BACKEND
        cpu = torch.device("cpu")
        with mock.patch.dict(os.environ, {env: "auto"}):
            self.assertFalse(ts.use_triton(8, 4, 163840, cpu))  # not CUDA: the CUDA kernel path
        with mock.patch.dict(os.environ, {env: "triton"}):
            self.assertTrue(ts.use_triton(8, 4, 163840, cpu))
        with mock.patch.dict(os.environ, {env: "cuda"}):
            self.assertFalse(ts.use_triton(8, 4, 163840, cpu))
        with mock.patch.object(ts, "_capability_major", lambda d: 9):
            cuda = torch.device("cuda", 0)
            with mock.patch.dict(os.environ, {env: "auto"}):
                # SM90: measured no slower per eager call at N <= 16, bs <= 64
                self.assertTrue(ts.use_triton(1, 4, 163840, cuda))
                self.assertTrue(ts.use_triton(64, 4, 163840, cuda))
                self.assertTrue(ts.use_triton(64, 16, 163840, cuda))
                self.assertFalse(ts.use_triton(65, 4, 163840, cuda))  # bs > 64: not measured per eager call
                self.assertFalse(ts.use_triton(4, 32, 163840, cuda))  # N > 16: not measured
                self.assertFalse(ts.use_triton(4, 4, 32000, cuda))  # vocab not measured
        with mock.patch.object(ts, "_capability_major", lambda d: 9), mock.patch.dict(ts.DISPATCH, {9: (16, 256, (163840,))}):
            cuda = torch.device("cuda", 0)
            with mock.patch.dict(os.environ, {env: "auto"}):
                self.assertTrue(ts.use_triton(128, 16, 163840, cuda))  # a recorded win
                self.assertFalse(ts.use_triton(128, 32, 163840, cuda))  # N > 16: not measured
                self.assertFalse(ts.use_triton(512, 4, 163840, cuda))  # bs > 256: not measured
                self.assertFalse(ts.use_triton(8, 4, 32000, cuda))  # vocab not measured
        with mock.patch.object(ts, "_capability_major", lambda d: 12):
            with mock.patch.dict(os.environ, {env: "auto"}):
                self.assertFalse(ts.use_triton(8, 4, 163840, torch.device("cuda", 0)))  # SM120: no table

    def test_dispatcher_hands_unsupported_calls_to_the_cuda_kernel(self):
        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        seen = []
        op = ts.tree_speculative_sampling_dispatch(lambda *a: seen.append(len(a)))
        self.assertIsNone(ts.tree_speculative_sampling_dispatch(None))
        t = torch.zeros(2, 4, 8)
        with mock.patch.dict(os.environ, {ts.ENV_BACKEND: "triton"}):
            op(*([torch.zeros(1)] * 9), t, t)  # malformed tree inputs: Unsupported -> CUDA kernel
        self.assertEqual(seen, [14])


if __name__ == "__main__":
    unittest.main()
