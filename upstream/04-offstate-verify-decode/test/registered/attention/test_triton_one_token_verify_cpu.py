"""TritonAttnBackend: a one-token TARGET_VERIFY runs as a DECODE over seq_lens + 1 (TRITON_INTERPRET=1, CPU).

A real backend built by its own __init__ on a stand-in ModelRunner holding SGLang's pools (fp32 MLA pool,
ReqToTokenPool, KVIndexTranslator); only the config bags __init__ reads and the SM count are stubbed.
MLA shapes: 8 heads, 576-wide keys, 512-wide values; prefixes of 1, 7 and 33 tokens.
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
from sglang.srt.layers.radix_attention import RadixAttention
from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator
from sglang.srt.mem_cache.memory_pool import MLATokenToKVPool, ReqToTokenPool
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.runtime_context import get_parallel
from sglang.test.ci.ci_register import register_cpu_ci

register_cpu_ci(est_time=60, suite="base-a-test-cpu")

H, DK, DV, CTX, SLOTS = 8, 576, 512, 64, 96
SEQ = [1, 7, 33]  # verify seq_lens: each request's prefix, without the verify token
VERIFY, DECODE = ForwardMode.TARGET_VERIFY, ForwardMode.DECODE


class TestTritonOneTokenVerifyCpu(unittest.TestCase):
    DEVICE = "cpu"  # test_triton_one_token_verify.py: the same on CUDA, compiled
    TOL = dict(rtol=1e-4, atol=1e-5)  # extend vs decode kernel, and vs torch: reduction order

    @classmethod
    def setUpClass(cls):
        dev = cls.DEVICE
        cls.stack = contextlib.ExitStack()
        cls.stack.enter_context(get_parallel().override(attn_tp_size=1, attn_dcp_size=1, attn_dcp_rank=0, dcp_enabled=False))
        kernel = NS(enable_lean_attention=None, triton_attention_num_kv_splits=8, triton_attention_split_tile_size=None)
        cfg = NS(kernel=kernel, dllm=NS(dllm_algorithm=None), deterministic=NS(enable_deterministic_inference=False))
        spec = NS(speculative_num_draft_tokens=1, speculative_num_steps=0, speculative_eagle_topk=1)
        for name, value in (("get_exec", lambda: cfg), ("get_spec", lambda: spec),
                            ("get_schedule", lambda: NS(chunked_prefill_size=8192)),
                            ("get_device_core_count", lambda gpu_id=0: 132)):
            cls.stack.enter_context(mock.patch.object(tb, name, value))
        g = torch.Generator().manual_seed(7)
        cls.pool = MLATokenToKVPool(size=SLOTS, page_size=1, dtype=torch.float32, kv_lora_rank=DV,
                                    qk_rope_head_dim=DK - DV, layer_num=1, device=dev, enable_memory_saver=False)
        cls.pool.kv_buffer[0].copy_(torch.randn(SLOTS + 1, 1, DK, generator=g).to(dev))
        cls.rtt = ReqToTokenPool(size=4, max_context_len=CTX, device=dev, enable_memory_saver=False)
        perm, cls.rows, start = torch.randperm(SLOTS, generator=g) + 1, [], 0
        for r, s in enumerate(SEQ):  # request r in row r + 1: its prefix slots, then its verify token's slot
            cls.rows.append(perm[start:start + s + 1].to(dev))
            cls.rtt.req_to_token[r + 1, :s + 1] = cls.rows[-1].to(torch.int32)
            start += s + 1
        cls.tr = KVIndexTranslator(req_to_token=cls.rtt.req_to_token, token_to_kv_pool_allocator=None,
                                   token_to_kv_pool=cls.pool, page_size=1, device=dev)
        cls.q = torch.randn(len(SEQ), H * DK, generator=g).to(dev)
        cls.k = torch.randn(len(SEQ), 1, DK, generator=g).to(dev)
        cls.layer = RadixAttention(num_heads=H, head_dim=DK, scaling=DK**-0.5, num_kv_heads=1, layer_id=0, v_head_dim=DV)

    @classmethod
    def tearDownClass(cls):
        cls.stack.close()

    def backend(self, **runner):
        mc = NS(attention_arch=AttentionArch.MLA, get_max_num_attention_heads=lambda: H,
                get_num_kv_heads=lambda tp, dcp: 1, v_head_dim=128, swa_v_head_dim=None, context_len=CTX, head_dim=DK,
                linear_attn_registry_result=None, is_encoder_decoder=False,
                hf_config=PretrainedConfig(architectures=["DeepseekV3ForCausalLM"]))
        mr = dict(req_to_token_pool=self.rtt, token_to_kv_pool=self.pool, token_to_kv_pool_allocator=None,
                  sliding_window_size=None, page_size=1, kv_index_translator=self.tr,
                  decode_num_tokens_per_req=lambda: 1, model_config=mc, is_draft_worker=False, spec_algorithm=None,
                  device=self.DEVICE, gpu_id=0, kv_cache_dtype=torch.float32)
        return tb.TritonAttnBackend(NS(**{**mr, **runner}))

    def batch(self, mode, seq_lens, rows=(1, 2, 3), tokens=1):
        """TARGET_VERIFY: `tokens` per request past seq_lens, all-true mask; DECODE: the last token is the new one."""
        seq, rpi = torch.tensor(seq_lens, device=self.DEVICE), torch.tensor(rows, device=self.DEVICE)
        verify = mode.is_target_verify()
        spec = NS(num_tokens_per_req=tokens, draft_token_num=tokens, kv_indptr=None,
                  custom_mask=torch.ones(sum(tokens * (s + tokens) for s in seq_lens), dtype=torch.bool, device=self.DEVICE))
        fb = NS(forward_mode=mode, batch_size=len(seq_lens), req_pool_indices=rpi, seq_lens=seq, seq_lens_cpu=seq.cpu(),
                seq_lens_sum=sum(seq_lens), spec_info=spec if verify else None, encoder_lens=None, positions=None,
                extend_seq_lens_cpu=None, extend_prefix_lens=None, mha_one_shot=False, attn_attend_prefix_cache=False)
        write = torch.stack([self.rtt.req_to_token[r, s - (0 if verify else 1)] for r, s in zip(rows, seq_lens)])
        self.tr.plan(req_pool_indices=rpi, seq_lens=seq, seq_lens_cpu=fb.seq_lens_cpu, write_virtual=write.long(),
                     read_extent=tokens if verify else 0).bind(fb, self.tr)
        return fb

    def fresh(self):  # each verify slot empty again: the pass under test writes the token's K itself
        self.pool.kv_buffer[0][torch.stack([r[-1] for r in self.rows])] = 0

    def test_one_token_verify_is_a_decode_over_seq_lens_plus_one(self):
        be, q, k, layer = self.backend(), self.q, self.k, self.layer
        self.fresh()
        with envs.SGLANG_TRITON_ONE_TOKEN_VERIFY_AS_DECODE.override(False):  # the extend kernel, custom mask
            fb = self.batch(VERIFY, SEQ)
            be.init_forward_metadata(fb)
            self.assertIsNone(be.forward_metadata.attn_logits)
            o_ext = be.forward_extend(q, k, k[..., :DV], layer, fb)
        self.fresh()
        fb = self.batch(VERIFY, SEQ)
        be.init_forward_metadata(fb)
        meta = be.forward_metadata
        self.assertIsNotNone(meta.attn_logits)
        self.assertIsNone(meta.custom_mask)
        self.assertEqual(meta.kv_indptr.tolist(), [0, *torch.cumsum(torch.tensor(SEQ) + 1, 0).tolist()])
        self.assertTrue(torch.equal(meta.kv_indices, torch.cat(self.rows)))  # prefix plus the token's own slot
        self.assertEqual((fb.forward_mode, fb.seq_lens.tolist()), (VERIFY, SEQ))  # the caller's batch untouched
        o = be.forward_extend(q, k, k[..., :DV], layer, fb)
        self.fresh()  # plain decoding of the same tokens
        dec = self.batch(DECODE, [s + 1 for s in SEQ])
        be.init_forward_metadata(dec)
        o_dec = be.forward_decode(q, k, k[..., :DV], layer, dec)
        self.assertTrue(torch.equal(o, o_dec))
        torch.testing.assert_close(o, o_ext, **self.TOL)

    def test_cuda_graph_capture_and_replay_equal_a_decode_replay(self):
        be, bs = self.backend(), 4
        be.init_cuda_graph_state(max_bs=bs, max_num_tokens=bs)
        fill = be.get_cuda_graph_seq_len_fill_value()
        be.init_forward_metadata_out_graph(self.batch(VERIFY, [fill] * bs, rows=(0,) * bs), in_capture=True)
        meta = be.forward_metadata
        self.assertIs(meta.attn_logits, be.cuda_graph_attn_logits)
        self.assertIs(meta.kv_indices, be.cuda_graph_kv_indices)
        self.assertIsNone(meta.custom_mask)
        padded = [*SEQ, fill]  # three requests and one padded lane on the dummy row 0
        fb = self.batch(VERIFY, padded, rows=(1, 2, 3, 0))
        be.init_forward_metadata_out_graph(fb)
        self.assertIs(be.forward_metadata, meta)  # the captured metadata, its buffers refilled
        self.fresh()
        q, k = torch.cat([self.q, self.q[:1]]), torch.cat([self.k, self.k[:1]])
        o = be.forward_extend(q, k, k[..., :DV], self.layer, fb).view(bs, H, DV)[:3]
        keys = self.pool.kv_buffer[0][:, 0]
        ref = torch.stack([torch.softmax(self.q[r].view(H, DK) @ keys[self.rows[r]].T * DK**-0.5, -1)
                           @ keys[self.rows[r], :DV] for r in range(len(SEQ))])
        torch.testing.assert_close(o, ref, **self.TOL)
        total = sum(padded) + bs
        got = (meta.kv_indptr.clone(), be.cuda_graph_kv_indices[:total].clone(), be.cuda_graph_num_kv_splits[:bs].clone())
        be.cuda_graph_kv_indices.zero_(), be.cuda_graph_num_kv_splits.zero_()
        be.init_forward_metadata_out_graph(self.batch(DECODE, [s + 1 for s in padded], rows=(1, 2, 3, 0)))
        want = (meta.kv_indptr, be.cuda_graph_kv_indices[:total], be.cuda_graph_num_kv_splits[:bs])
        for mine, sglang in zip(got, want):
            self.assertTrue(torch.equal(mine, sglang))

    def test_other_passes_are_untouched(self):
        cases = {"four_tokens": ({}, VERIFY, SEQ, 4), "decode": ({}, DECODE, [s + 1 for s in SEQ], 1),
                 "draft_runner": ({"is_draft_worker": True}, VERIFY, SEQ, 1)}
        for case, (runner, mode, lens, tokens) in cases.items():
            with self.subTest(case):
                be, fb = self.backend(**runner), self.batch(mode, lens, tokens=tokens)
                self.assertIsNone(be._one_token_verify_as_decode(fb))
                be.init_forward_metadata(fb)
                self.assertEqual(be.forward_metadata.attn_logits is not None, mode == DECODE)
                if mode.is_target_verify() and tokens == 1:  # the extend kernel, never forward_decode
                    with mock.patch.object(be, "forward_decode", side_effect=AssertionError("decode")):
                        be.forward_extend(self.q, self.k, self.k[..., :DV], self.layer, fb)


if __name__ == "__main__":
    unittest.main()
