"""The adaptive decode KV reserve (SGLANG_SPEC_ADAPTIVE_RESERVE_FOLLOWS_STEPS), on the CPU.

Real: AdaptiveSpeculativeParams (SGLang's default table, and a table of [0, 3, 7] at every
batch size), AdaptiveController, get_alloc_reserve_per_decode, and the two callers that size a
decode batch's KV: ScheduleBatch.new_tokens_required_next_decode (the memory check and the
retraction loop) and eagle_utils.eagle_prepare_for_decode (the allocation). Stood in: the GPU
worker (its state is a steps number), the batch (a namespace of the fields those two read), the
KV pool's allocation (what it is asked for is recorded) and the config bags an unlaunched
process has not published.

The property that keeps the KV exact is checked at every batch of a long run of state switches,
in both orders SGLang's overlap scheduler runs a step in (the previous batch's result processed
after the next batch is launched, or, where grammar needs the sync, between preparing the next
batch and launching it): each batch's reserve covers the tokens the batch still in flight may
commit plus its own.
"""

import contextlib
import json
import os
import random
import tempfile
import types
import unittest
from types import SimpleNamespace as NS
from unittest import mock

from sglang.srt import runtime_context
from sglang.srt.environ import envs
from sglang.srt.managers import schedule_batch as sb
from sglang.srt.mem_cache import allocation_sizing as al
from sglang.srt.speculative import eagle_utils as eu
from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController
from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang.test.ci.ci_register import register_cpu_ci

register_cpu_ci(est_time=30, suite="base-a-test-cpu")

FOLLOWS = envs.SGLANG_SPEC_ADAPTIVE_RESERVE_FOLLOWS_STEPS
GRAPH_BS = [1, 2, 4, 8, 16, 32, 64, 128]
EVERY_BS = {str(bs): {"candidate_steps": [0, 3, 7]} for bs in (1, 8, 64, 128)}


class Worker:
    """The part of the GPU worker AdaptiveController drives: the state it runs at."""

    def __init__(self, steps):
        self.speculative_num_steps = steps

    def apply_runtime_state(self, state):
        self.speculative_num_steps = state


class Bag(NS):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def follows(on: bool):
    # not EnvField.override: it does not restore the variable when the block raises
    return mock.patch.dict(os.environ, {FOLLOWS.name: "true" if on else "false"})


class AdaptiveDecodeReserveTest(unittest.TestCase):
    def setUp(self):
        self.stack = contextlib.ExitStack()
        # EAGLE3, chain (topk 1), launched at 3 steps, the largest candidate 7:
        # SGLang's reserve is 2 x (7 + 1) per request at every state.
        spec = Bag(speculative_algorithm="EAGLE3", speculative_num_steps=3, speculative_eagle_topk=1,
                   speculative_num_draft_tokens=4, max_speculative_num_draft_tokens=8)
        for module, name, value in (
            (runtime_context, "get_spec", lambda: spec),
            (al, "get_spec", lambda: spec),
            (al, "get_schedule", lambda: Bag(page_size=1)),
            (al, "get_parallel", lambda: Bag(attn_dcp_size=1)),
        ):
            self.stack.enter_context(mock.patch.object(module, name, value))
        self.asked = {}

        def pool_alloc(tree_cache, req_to_token_pool, *, num_needed_tokens, **kw):
            self.asked["tokens"] = num_needed_tokens  # a GPU pool: not here

        self.stack.enter_context(mock.patch.object(eu, "alloc_for_spec_decode", pool_alloc))
        self.stack.callback(al.set_adaptive_reserve_steps, None)

    def tearDown(self):
        self.stack.close()

    def controller(self, table=None):
        path = None
        if table is not None:
            fd, path = tempfile.mkstemp(suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(table, f)
            self.stack.callback(os.remove, path)
        params = AdaptiveSpeculativeParams(3, path)
        params.set_cuda_graph_bs(GRAPH_BS)
        worker = Worker(3)
        ctl = AdaptiveController(worker, params)
        for steps in params.candidate_steps:
            ctl.register(steps, steps)
        return params, worker, ctl

    def prepare(self, bs):
        """SGLang's memory check and decode preparation for a batch of bs requests, each with
        its KV allocated up to its committed tokens: the tokens asked per request."""
        reqs = [NS(kv=NS(kv_committed_len=100, kv_allocated_len=100), decode_batch_idx=0) for _ in range(bs)]
        b = NS(reqs=reqs, token_to_kv_pool_allocator=NS(page_size=1),
               spec_algorithm=SpeculativeAlgorithm.from_string("EAGLE3"), maybe_evict_swa=lambda: None,
               sampling_info=NS(penalizer_orchestrator=NS(is_required=False)), seq_lens_cpu=object(),
               device="cpu", tree_cache=None, req_to_token_pool=None, req_pool_indices=None)
        b._new_tokens_required_next_decode_spec_v2 = types.MethodType(
            sb.ScheduleBatch._new_tokens_required_next_decode_spec_v2, b)
        checked = sb.ScheduleBatch.new_tokens_required_next_decode(b)
        eu.eagle_prepare_for_decode(b)
        self.assertEqual(checked, self.asked["tokens"])  # the check asks what the allocation takes
        return checked // bs

    def run_batches(self, params, worker, ctl, n=12000, seed=7):
        """n decode batches whose drafter agrees on nothing, on everything, on nothing, ...; the
        batch size moves between 1 and 128. Returns the violations and the reserves."""
        rng = random.Random(seed)
        violations, reserves, ran, orders = [], [], set(), {"overlap": 0, "grammar": 0}
        prev = None  # (bs, steps) of the batch in flight
        for i in range(n):
            good = (i // 400) % 3 == 1
            bs = rng.choice([1, 3, 8, 30, 64, 128]) if (i // 97) % 2 else 128
            grammar = rng.random() < 0.3
            orders["grammar" if grammar else "overlap"] += 1
            r = self.prepare(bs)

            def result():
                if prev is not None:
                    pbs, ps = prev
                    ctl.on_verify_complete([ps if good else 0] * pbs, pbs)

            if grammar:
                result()
            ctl.activate_step_by_batch(bs)  # the forward: the worker takes this batch's slot's state
            steps = worker.speculative_num_steps
            # the batch in flight commits up to its steps + 1 tokens before this one's are written
            need = (prev[1] + 1 if prev is not None else 0) + steps + 1
            if r < need:
                violations.append((i, r, need, prev, steps, grammar))
            if not grammar:
                result()
            reserves.append(r)
            ran.add(steps)
            prev = (bs, steps)
        return violations, reserves, ran, orders

    def test_every_batch_reserves_what_the_batch_in_flight_and_its_own_can_write(self):
        for table in (None, EVERY_BS):  # SGLang's default table, and [0, 3, 7] everywhere
            with self.subTest(table="default" if table is None else "0/3/7"), follows(True):
                params, worker, ctl = self.controller(table)
                al.set_adaptive_reserve_steps(params.reserve_steps)  # as EAGLEWorkerV2.init_cuda_graphs does
                self.assertEqual(self.prepare(8), 16)  # no decode forward yet: the largest candidate's
                violations, reserves, ran, orders = self.run_batches(params, worker, ctl)
                self.assertGreater(min(orders.values()), 1000)
                self.assertEqual(min(ran), 0)
                self.assertGreaterEqual(max(ran), 3)  # the run switched up and down
                self.assertEqual(violations, [])
                self.assertIn(2, reserves)  # steps 0: 2 tokens ahead, not 16
                self.assertLessEqual(max(reserves), 16)
                self.assertGreater(sum(r < 16 for r in reserves) / len(reserves), 0.5)

    def test_a_step_up_that_did_not_wait_a_verified_batch_outruns_the_reserve(self):
        # The reserve registered, but the policy told not to hold step ups: a batch prepared at the
        # old level runs at the new one. The check above catches that.
        params, worker, ctl = self.controller(EVERY_BS)
        al.set_adaptive_reserve_steps(params.reserve_steps)
        with follows(False):
            violations, _, _, _ = self.run_batches(params, worker, ctl)
        self.assertGreater(len(violations), 0)
        self.assertTrue(any(v[5] for v in violations))  # in the grammar order

    def test_off_by_default_the_reserve_is_the_largest_candidates(self):
        self.assertFalse(FOLLOWS.get())
        params, worker, ctl = self.controller(EVERY_BS)
        violations, reserves, ran, _ = self.run_batches(params, worker, ctl, n=2000)
        self.assertEqual(set(reserves), {16})
        self.assertEqual(violations, [])
        self.assertEqual(al.get_alloc_reserve_per_decode(), 16)


if __name__ == "__main__":
    unittest.main()
