"""EAGLE's deferred steps-0 draft extend (SGLANG_SPEC_DEFER_ZERO_STEP_DRAFT_EXTEND), on the
CPU with TRITON_INTERPRET=1.

Real: EAGLEWorkerV2.forward_batch_generation (its decode branch), DeferredDraftExtend,
EagleDraftWorker._draft_extend_for_decode, prepare_for_draft_extend, ForwardBatch.init_new,
ReqToTokenPool, MHATokenToKVPool, KVIndexTranslator, a TritonAttnBackend built by its own
__init__ (its per-batch buffers sized by the request slots, as on a server), RadixAttention
and the extend kernel. Stood in: the one-layer drafter's dense parts (each row's q, k and v
from its token, the target's hidden state and its position; the logits and hidden state from
the row's attention output), the ScheduleBatch and ModelRunner (namespaces of the fields
SGLang reads), the target verify (a result per step), the draft (it records what it starts
from), and the config bags an unlaunched process has not published.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton compiles anything

import contextlib
import unittest
from types import SimpleNamespace as NS
from unittest import mock

import torch
from transformers import PretrainedConfig

from sglang.srt.configs.model_config import AttentionArch
from sglang.srt.environ import envs
from sglang.srt.layers.attention import triton_backend as tb
from sglang.srt.layers.logits_processor import LogitsProcessorOutput
from sglang.srt.layers.radix_attention import RadixAttention
from sglang.srt.managers.utils import GenerationBatchResult
from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
from sglang.srt.runtime_context import get_parallel
from sglang.srt.speculative import deferred_draft_extend as dde
from sglang.srt.speculative import eagle_worker_v2 as ew
from sglang.srt.speculative.eagle_info import EagleDraftInput
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang.test.ci.ci_register import register_cpu_ci

register_cpu_ci(est_time=90, suite="base-a-test-cpu")

H, D, CTX, KV_SLOTS, REQ_SLOTS, HC, VOCAB = 2, 16, 64, 1024, 6, 8, 32
DEFER = envs.SGLANG_SPEC_DEFER_ZERO_STEP_DRAFT_EXTEND


class Bag(NS):
    """A namespace answering None for any field it was not given."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


class Refuses:
    """A steps-1 resource: any use fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"a steps-0 flush used a steps-1 resource ({name})")


class _Drafted(Exception):
    """Raised by the stand-in draft once it has recorded what it starts from."""


class TestDeferredDraftExtendCpu(unittest.TestCase):
    DEVICE = "cpu"  # test_deferred_draft_extend.py: the same on CUDA, compiled

    def setUp(self):
        self.stack = contextlib.ExitStack()
        self.addCleanup(self.stack.close)
        spec = NS(
            speculative_num_draft_tokens=1,
            speculative_num_steps=0,
            speculative_eagle_topk=1,
            speculative_use_rejection_sampling=False,
        )
        kernel = NS(
            enable_lean_attention=None,
            triton_attention_num_kv_splits=8,
            triton_attention_split_tile_size=None,
        )
        cfg = NS(
            kernel=kernel,
            dllm=NS(dllm_algorithm=None),
            deterministic=NS(enable_deterministic_inference=False),
        )
        schedule = NS(chunked_prefill_size=8192, enable_mixed_chunk=False)
        self.stack.enter_context(
            get_parallel().override(
                attn_tp_size=1,
                attn_dcp_size=1,
                attn_dcp_rank=0,
                dcp_enabled=False,
                moe_ep_size=1,
                moe_tp_size=1,
                tp_size=1,
                pp_size=1,
            )
        )
        patches = [
            (tb, "get_exec", lambda: cfg),
            (tb, "get_spec", lambda: spec),
            (tb, "get_schedule", lambda: schedule),
            (tb, "get_device_core_count", lambda gpu_id=0: 132),
            (ew, "get_spec", lambda: spec),
            (dde, "get_spec", lambda: spec),
            (dde, "get_schedule", lambda: schedule),
            (dde, "require_mlp_sync", lambda: False),
        ]
        for name in (
            "draft_tp_context",
            "speculative_moe_backend_context",
            "speculative_moe_a2a_backend_context",
        ):
            patches.append((ew, name, lambda *args: contextlib.nullcontext()))
        for module, name, value in patches:
            self.stack.enter_context(mock.patch.object(module, name, value))

    # ---- SGLang's pieces ----------

    def draft_worker(self, req_slots=REQ_SLOTS, layers=1):
        """A steps-0 EagleDraftWorker over SGLang's pools, translator and a real
        TritonAttnBackend (its buffers hold `req_slots` rows), with a one-layer drafter
        whose dense parts are row-local."""
        dev = self.DEVICE
        pool = MHATokenToKVPool(
            size=KV_SLOTS,
            page_size=1,
            dtype=torch.float32,
            head_num=H,
            head_dim=D,
            layer_num=1,
            device=dev,
            enable_memory_saver=False,
        )
        rtt = ReqToTokenPool(
            size=req_slots, max_context_len=CTX, device=dev, enable_memory_saver=False
        )
        for r in range(
            1, req_slots
        ):  # row r's position p at slot 100 r + p (row 0: padding)
            rtt.req_to_token[r] = (torch.arange(CTX, dtype=torch.int32) + 100 * r).to(
                dev
            )
        translator = KVIndexTranslator(
            req_to_token=rtt.req_to_token,
            token_to_kv_pool_allocator=None,
            token_to_kv_pool=pool,
            page_size=1,
            device=dev,
        )
        hf_config = PretrainedConfig(
            architectures=["LlamaForCausalLMEagle3"], num_hidden_layers=layers
        )
        model_config = NS(
            attention_arch=AttentionArch.MHA,
            get_max_num_attention_heads=lambda: H,
            get_num_kv_heads=lambda tp, dcp=1: H,
            v_head_dim=D,
            swa_v_head_dim=None,
            context_len=CTX,
            head_dim=D,
            linear_attn_registry_result=None,
            is_encoder_decoder=False,
            model_is_mrope=False,
            vocab_size=VOCAB,
            requires_mm_token_modalities=False,
            spec_hidden_size=HC,
            dtype=torch.float32,
            hf_config=hf_config,
        )
        runner = Bag(
            req_to_token_pool=rtt,
            token_to_kv_pool=pool,
            token_to_kv_pool_allocator=None,
            sliding_window_size=None,
            page_size=1,
            kv_index_translator=translator,
            decode_num_tokens_per_req=lambda: 1,
            model_config=model_config,
            is_draft_worker=True,
            spec_algorithm=SpeculativeAlgorithm.from_string("EAGLE3"),
            device=dev,
            gpu_id=0,
            kv_cache_dtype=torch.float32,
            prefill_attention_backend_str="triton",
            ngram_embedding_manager=NS(enabled=False),
            model=object.__new__(LlamaForCausalLMEagle3),  # the class only
        )
        runner.attn_backend = tb.TritonAttnBackend(runner)
        layer = RadixAttention(
            num_heads=H, head_dim=D, scaling=D**-0.5, num_kv_heads=H, layer_id=0
        )
        scale = torch.linspace(0.1, 1.0, H * D, device=dev)
        runner.forwards = []

        def forward(fb):
            """Row-local q, k, v (no reduction across rows or features), SGLang's
            attention (it writes each row's K and V at its slot, then attends), and
            the row's logits and hidden state from its attention output."""
            n = fb.input_ids.shape[0]
            x = fb.input_ids.float()[:, None] + fb.spec_info.hidden_states[:, :1]
            x = (x + fb.positions.float()[:, None]) * scale
            k, v = x.reshape(n, H, D).sin(), x.reshape(n, H, D).cos()
            o = runner.attn_backend.forward_extend(x, k, v, layer, fb).reshape(n, -1)
            runner.forwards.append(n)
            return NS(
                logits_output=LogitsProcessorOutput(
                    next_token_logits=o[:, :VOCAB].clone(),
                    hidden_states=o[:, :HC].clone(),
                )
            )

        runner.forward = forward
        dw = object.__new__(ew.EagleDraftWorker)
        dw.__dict__.update(
            draft_runner=runner,
            topk=1,
            speculative_num_steps=0,
            speculative_num_draft_tokens=1,
            seed_dsa_topk_from_draft_extend=False,
            plan_stream=None,
            plan_stream_ctx=contextlib.nullcontext(),
            device=dev,
            cuda_graph_runner_for_draft_extend=None,
            draft_extend_attn_backend=None,
            parallel_layout=NS(tp_group=None),
        )
        return dw

    def worker(self, dw):
        """EAGLEWorkerV2 at steps 0 around `dw`: the trivial verify and the target verify
        stood in (the verify writes its token's slot into batch.out_cache_loc and returns
        the step's result), everything after the verify SGLang's."""
        worker = object.__new__(ew.EAGLEWorkerV2)
        ew.BaseSpecWorker.__init__(worker)
        worker.__dict__.update(
            _draft_worker=dw,
            speculative_num_steps=0,
            speculative_num_draft_tokens=1,
            topk=1,
            device=self.DEVICE,
            adaptive_controller=None,
            speculative_algorithm=SpeculativeAlgorithm.from_string("EAGLE3"),
            _build_trivial_verify_input=lambda batch: NS(
                is_verify_input=lambda: True, kv_loc_plan=None
            ),
        )

        def verify(batch, pp_proxy_tensors=None, grammar_barrier=None):
            rtt = dw.draft_runner.req_to_token_pool.req_to_token
            batch.out_cache_loc = rtt[batch.req_pool_indices, batch.seq_lens].long()
            return batch.next_result

        worker.verify = verify
        return worker

    def step_up(self, worker):
        """The adaptive switch to steps 1: the draft-extend resources of steps 1 on the
        draft worker (a flush must not use them)."""
        dw = worker.draft_worker
        worker.speculative_num_steps = dw.speculative_num_steps = 1
        worker.speculative_num_draft_tokens = dw.speculative_num_draft_tokens = 2
        dw.cuda_graph_runner_for_draft_extend = Refuses()
        dw.draft_runner.attn_backend = Refuses()

    # ---- the steps ----------

    def reqs(self, *rows):
        return [Bag(rid=f"r{r}", row=r, lora_id=None) for r in rows]

    def batch(self, dw, reqs, lens, t, cpu_lens=False, spec_info=None):
        """A decode step's batch: request r (pool row r) verifies its token at position
        lens[i]; its result carries the target's sampled token and hidden state."""
        dev, bs = self.DEVICE, len(reqs)
        rows = torch.tensor([r.row for r in reqs], dtype=torch.int64)
        seq = torch.tensor(lens, dtype=torch.int64)
        if spec_info is None:
            spec_info = EagleDraftInput(
                topk_p=torch.zeros((bs, 1), device=dev),
                topk_index=torch.zeros((bs, 1), dtype=torch.int64, device=dev),
                hidden_states=torch.zeros((bs, HC), device=dev),
                bonus_tokens=torch.zeros((bs,), dtype=torch.int64, device=dev),
            )
        tokens = torch.tensor([(7 * t + r.row) % VOCAB for r in reqs], device=dev)
        hidden = torch.arange(HC, device=dev)[None] * 0.01 + t + rows[:, None].to(dev)
        result = GenerationBatchResult(
            logits_output=LogitsProcessorOutput(
                next_token_logits=None, hidden_states=hidden.float()
            ),
            next_token_ids=tokens,
            accept_lens=torch.ones(bs, dtype=torch.int32, device=dev),
            new_seq_lens=(seq + 1).to(dev),
            next_draft_input=EagleDraftInput(),
        )
        return Bag(
            forward_mode=ForwardMode.DECODE,
            reqs=list(reqs),
            req_pool_indices=rows.to(dev),
            req_pool_indices_cpu=rows,
            seq_lens=seq.to(dev),
            seq_lens_cpu=seq.clone() if cpu_lens else None,
            multimodal_inputs=[None] * bs,
            orig_seq_lens=(seq + 1).to(torch.int32).to(dev),
            model_config=dw.draft_runner.model_config,
            spec_algorithm=dw.draft_runner.spec_algorithm,
            return_logprob=False,
            spec_info=spec_info,
            next_result=result,
        )

    def serve(self, worker, schedule, cpu_lens=False, lens=None, first=0):
        """The steps of `schedule` (request lists, the first numbered `first`) through
        forward_batch_generation at steps 0; each request decodes one token a step from
        position 5 + its row (or lens[row]). Returns the results."""
        lens = {} if lens is None else lens
        results = []
        for t, reqs in enumerate(schedule, start=first):
            for r in reqs:
                lens.setdefault(r.row, 5 + r.row)
            batch = self.batch(
                worker.draft_worker, reqs, [lens[r.row] for r in reqs], t, cpu_lens
            )
            results.append(worker.forward_batch_generation(batch))
            for r in reqs:
                lens[r.row] += 1
        return results

    def kv(self, dw, slots):
        pool = dw.draft_runner.token_to_kv_pool
        idx = torch.tensor(sorted(slots), device=self.DEVICE)
        return pool.k_buffer[0][idx].cpu(), pool.v_buffer[0][idx].cpu()

    def serve_both(self, schedule):
        """The schedule with the per-step extend, then deferred (K 8): the two draft
        workers and the deferring EAGLE worker."""
        per_step, deferred = self.draft_worker(), self.draft_worker()
        with DEFER.override(0):
            self.serve(self.worker(per_step), schedule)
        worker = self.worker(deferred)
        with DEFER.override(8):
            self.serve(worker, schedule)
        return per_step, deferred, worker

    def assert_same_kv(self, ref, got, slots):
        for a, b in zip(self.kv(ref, slots), self.kv(got, slots)):
            self.assertTrue(torch.equal(a, b))
            self.assertGreater(a.abs().sum().item(), 0)  # written, not zero in both

    # ---- the tests ----------

    def test_deferred_flushes_write_the_draft_kv_the_per_step_extend_writes(self):
        """Ten steps-0 steps of 3 requests on a 6-slot server with K 8: the stash is
        flushed in groups of two whole steps (6 rows: what the backend's buffers hold) as
        it fills; the last two steps stay stashed, their outputs stubbed. Every slot the
        per-step extend wrote then holds the same K and V, bit for bit, once the stash is
        flushed by the next un-deferred extend."""
        a, b, c = self.reqs(1, 2, 3)
        for cpu_lens in (False, True):
            with self.subTest(cpu_lens=cpu_lens):
                per_step = self.draft_worker()
                with DEFER.override(0):
                    self.serve(self.worker(per_step), [[a, b, c]] * 11, cpu_lens)
                self.assertEqual(per_step.draft_runner.forwards, [3] * 11)
                deferred = self.draft_worker()
                worker = self.worker(deferred)
                with DEFER.override(8):
                    results = self.serve(worker, [[a, b, c]] * 10, cpu_lens)
                self.assertEqual(deferred.draft_runner.forwards, [6] * 4)
                self.assertEqual(len(worker.deferred_draft_extend.pending), 2)
                stub = results[-1].next_draft_input
                self.assertFalse(stub.topk_p.any() or stub.hidden_states.any())
                self.assertEqual(tuple(stub.hidden_states.shape), (3, HC))
                with DEFER.override(0):  # an un-deferred extend: the stash goes first
                    lens = {r: 15 + r for r in (1, 2, 3)}
                    self.serve(worker, [[a, b, c]], cpu_lens, lens, first=10)
                self.assertEqual(deferred.draft_runner.forwards, [6] * 5 + [3])
                written = {100 * r + p for r in (1, 2, 3) for p in range(5 + r, 16 + r)}
                self.assert_same_kv(per_step, deferred, written)
                ext = worker.deferred_draft_extend
                self.assertEqual(
                    (ext.num_flushes, ext.num_rows, ext.pending), (5, 30, [])
                )

    def test_no_flush_carries_more_rows_than_the_request_slots(self):
        """Steps of 1, 2 and 3 requests on a 6-slot server: the stash is flushed before a
        step would take it past 6 rows, so every flush holds whole steps and at most 6
        rows; a longer stash is grouped the same way. Without the cap, a flush of 24 rows
        is refused by the Triton backend's buffers (sized by the request slots)."""
        a, b, c = self.reqs(1, 2, 3)
        schedule = [[a], [a, b], [a, b, c], [a, b, c], [a, b], [a], [a, b, c], [a]]
        per_step, deferred, worker = self.serve_both(schedule)
        self.assertEqual(deferred.draft_runner.forwards, [6, 6])
        ext = worker.deferred_draft_extend
        self.assertEqual([len(step.keys) for step in ext.pending], [3, 1])
        with DEFER.override(8):
            ext.flush(self.batch(deferred, [a, b, c], [0] * 3, 0))
        self.assertEqual(deferred.draft_runner.forwards, [6, 6, 4])
        written = {
            100 * r + p
            for r, n in ((1, 8), (2, 5), (3, 3))
            for p in range(5 + r, 5 + r + n)
        }
        self.assert_same_kv(per_step, deferred, written)
        steps = [NS(keys=[None] * n) for n in (1, 2, 3, 3, 2, 1, 3, 1)]
        groups = dde._whole_step_groups(steps, REQ_SLOTS)
        self.assertEqual(
            [[len(s.keys) for s in g] for g in groups], [[1, 2, 3], [3, 2, 1], [3, 1]]
        )

        uncapped = self.draft_worker()
        worker = self.worker(uncapped)
        with (
            DEFER.override(8),
            mock.patch.object(dde.DeferredDraftExtend, "max_rows", lambda self: 10**6),
        ):
            with self.assertRaisesRegex(RuntimeError, "must match"):
                self.serve(worker, [[a, b, c]] * 8)
        self.assertEqual(uncapped.draft_runner.forwards, [])

    def test_a_request_gone_before_the_flush_writes_only_the_padding_slot(self):
        """Request 3 leaves after step 2; the flush at step 7 sends its three stashed rows
        to slot 0 (its pool row may be another request's by then) and writes the other
        rows as the per-step extend does. A request admitted again with another pool
        row counts as gone too."""
        a, b, c = self.reqs(1, 2, 3)
        schedule = [[a, b, c]] * 3 + [[a, b]] * 5
        per_step, deferred = (
            self.draft_worker(req_slots=32),
            self.draft_worker(req_slots=32),
        )
        with DEFER.override(0):
            self.serve(self.worker(per_step), schedule)
        worker = self.worker(deferred)
        pad = deferred.draft_runner.token_to_kv_pool.k_buffer[0][0].clone()
        with DEFER.override(8):
            self.serve(worker, schedule)
        self.assertEqual(deferred.draft_runner.forwards, [3 * 3 + 2 * 5])
        self.assertEqual(worker.deferred_draft_extend.num_dropped_rows, 3)
        kept = {100 * r + p for r in (1, 2) for p in range(5 + r, 13 + r)}
        self.assert_same_kv(per_step, deferred, kept)
        for k in self.kv(deferred, {300 + p for p in range(8, 11)}):
            self.assertFalse(k.any())
        self.assertFalse(
            torch.equal(deferred.draft_runner.token_to_kv_pool.k_buffer[0][0], pad)
        )

        moved = self.draft_worker(req_slots=32)
        worker = self.worker(moved)
        with DEFER.override(8):
            self.serve(worker, [[a, b]] * 2)
            batch = self.batch(moved, [a, b], [8, 9], 2)
            # `a` retracted and admitted again, in row 9: its stashed rows are gone
            batch.req_pool_indices_cpu = torch.tensor([9, 2])
            worker.deferred_draft_extend.flush(batch)
        self.assertEqual(worker.deferred_draft_extend.num_dropped_rows, 2)
        for k in self.kv(moved, {106, 107}):
            self.assertFalse(k.any())
        self.assert_same_kv(per_step, moved, {207, 208})

    def test_a_step_up_drafts_from_the_per_step_extends_outputs(self):
        """Ten steps-0 steps of 3 requests (K 8), then the adaptive switch to steps 1 and
        a batch of those 3 and a new request. Before the first draft, the stash is
        extended (on the steps-0 resources: the steps-1 ones refuse) and the draft
        starts, for the 3, from exactly the top-k and hidden state the per-step extend's
        last step gave; the new request keeps its own. The draft KV equals the per-step
        extend's."""
        a, b, c, d = self.reqs(1, 2, 3, 4)
        per_step = self.draft_worker()
        with DEFER.override(0):
            results = self.serve(self.worker(per_step), [[a, b, c]] * 10)
        want = results[-1].next_draft_input
        deferred = self.draft_worker()
        worker = self.worker(deferred)
        seen = {}

        def draft(batch):
            seen.update(
                (name, getattr(batch.spec_info, name).clone())
                for name in ("topk_p", "topk_index", "hidden_states")
            )
            raise _Drafted

        deferred.draft = draft
        with DEFER.override(8):
            self.serve(worker, [[a, b, c]] * 10)
            self.assertEqual(len(worker.deferred_draft_extend.pending), 2)
            self.step_up(worker)
            new = {  # the new request's own state (from its prefill)
                "topk_p": torch.full((1, 1), 0.25),
                "topk_index": torch.full((1, 1), 7),
                "hidden_states": torch.full((1, HC), 0.5),
            }
            spec_info = EagleDraftInput(
                bonus_tokens=torch.zeros(4, dtype=torch.int64, device=self.DEVICE),
                **{
                    name: torch.cat([torch.zeros_like(v).expand(3, -1), v]).to(
                        self.DEVICE
                    )
                    for name, v in new.items()
                },
            )
            batch = self.batch(
                deferred, [a, b, c, d], [16, 17, 18, 9], 10, spec_info=spec_info
            )
            with self.assertRaises(_Drafted):
                worker.forward_batch_generation(batch)
        self.assertEqual(worker.deferred_draft_extend.pending, [])
        self.assertEqual(deferred.draft_runner.forwards, [6] * 5)
        self.assertIsInstance(deferred.draft_runner.attn_backend, Refuses)  # put back
        self.assertEqual(deferred.speculative_num_draft_tokens, 2)
        self.assertGreater(want.hidden_states.abs().sum().item(), 0)
        for name, own in new.items():
            got = seen[name].cpu()
            self.assertTrue(torch.equal(got[:3], getattr(want, name).cpu()), name)
            self.assertTrue(torch.equal(got[3:], own), name)
        written = {100 * r + p for r in (1, 2, 3) for p in range(5 + r, 15 + r)}
        self.assert_same_kv(per_step, deferred, written)

    def test_env_0_leaves_the_per_step_extend_untouched(self):
        """With the variable at 0 (its default) forward_batch_generation extends every
        steps-0 step exactly as SGLang's own extend called directly does: same calls,
        same draft KV, same outputs; nothing is stashed."""
        a, b, c = self.reqs(1, 2, 3)
        schedule = [[a, b, c]] * 4 + [[a, b]] * 2
        direct = self.draft_worker()
        outs, lens = [], {}
        for t, reqs in enumerate(schedule):
            for r in reqs:
                lens.setdefault(r.row, 5 + r.row)
            batch = self.batch(direct, reqs, [lens[r.row] for r in reqs], t)
            rtt = direct.draft_runner.req_to_token_pool.req_to_token
            batch.out_cache_loc = rtt[batch.req_pool_indices, batch.seq_lens].long()
            direct._draft_extend_for_decode(batch, batch.next_result, kv_loc_plan=None)
            outs.append(batch.next_result.next_draft_input)
            for r in reqs:
                lens[r.row] += 1
        hooked = self.draft_worker()
        worker = self.worker(hooked)
        self.assertEqual(DEFER.get(), 0)
        with mock.patch.object(
            dde.DeferredDraftExtend, "_stash", side_effect=AssertionError
        ):
            results = self.serve(worker, schedule)
        self.assertEqual(hooked.draft_runner.forwards, direct.draft_runner.forwards)
        self.assertEqual(hooked.draft_runner.forwards, [3, 3, 3, 3, 2, 2])
        for want, got in zip(outs, results):
            for name in ("topk_p", "topk_index", "hidden_states"):
                self.assertTrue(
                    torch.equal(
                        getattr(want, name), getattr(got.next_draft_input, name)
                    )
                )
        written = {
            100 * r + p
            for r, n in ((1, 6), (2, 6), (3, 4))
            for p in range(5 + r, 5 + r + n)
        }
        self.assert_same_kv(direct, hooked, written)

    def test_a_step_over_half_the_slots_or_a_2_layer_drafter_is_not_deferred(self):
        """4 requests on a 6-slot server: a flush could hold one step alone, so each such
        step is extended at once, after the stash of the 2-request steps before it. A
        drafter of 2 layers is not deferred at all, said once in the log."""
        a, b, c, d = self.reqs(1, 2, 3, 4)
        schedule = [[a, b]] * 2 + [[a, b, c, d]] * 3
        per_step, deferred, worker = self.serve_both(schedule)
        self.assertEqual(deferred.draft_runner.forwards, [4, 4, 4, 4])
        self.assertEqual(worker.deferred_draft_extend.num_steps_extended_at_once, 3)
        written = {100 * r + p for r in (1, 2) for p in range(5 + r, 10 + r)}
        written |= {100 * r + p for r in (3, 4) for p in range(5 + r, 8 + r)}
        self.assert_same_kv(per_step, deferred, written)

        two_layers = self.draft_worker(layers=2)
        worker = self.worker(two_layers)
        with DEFER.override(8), self.assertLogs(dde.logger, "INFO") as logs:
            self.serve(worker, [[a, b]] * 3)
        self.assertEqual(two_layers.draft_runner.forwards, [2, 2, 2])
        self.assertEqual(len(logs.output), 1)
        self.assertIn("the drafter has 2 layers", logs.output[0])


if __name__ == "__main__":
    unittest.main()
