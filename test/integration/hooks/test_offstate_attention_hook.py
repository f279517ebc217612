"""The offstate_attention hook around SGLang's real TritonAttnBackend (0.5.23): a one-token TARGET_VERIFY is built
and computed as a DECODE over `seq_lens + 1`; every other pass goes to SGLang untouched.

Real: the backend, made by SGLang's own `__init__` on a stand-in ModelRunner that holds SGLang's pools (an fp32
MLATokenToKVPool, since the interpreter misreads bf16 pools; ReqToTokenPool; KVIndexTranslator); RadixAttention;
each batch's KVLocPlan, bound the way SGLang binds one; ForwardMode; the three wrapped methods plus
`forward_decode` and `init_cuda_graph_state`; SGLang's Triton kernels (on the kernel tests' device,
test/kernel_device.py: Triton's interpreter on the CPU). The parallel widths are stated through SGLang's own
`get_parallel().override`. Stubbed: only the config bags `__init__` reads that an unlaunched process has not published
(get_exec / get_spec / get_schedule) and the SM count (132, an H200's, so SGLang's kv-splits kernel runs). The
ForwardBatch is a SimpleNamespace, as SGLang's own replay view is. The hook's functions are called as HookRegistry's
AROUND wrapper calls them, with the original method first. MLA shapes: 8 heads, 576-wide keys, 512-wide values, one KV
head; prefixes 1, 7 and 33 tokens."""

import inspect
from types import SimpleNamespace as NS

import kernel_device
import pytest

torch = pytest.importorskip("torch")
tb = pytest.importorskip("sglang.srt.layers.attention.triton_backend")

from sglang.srt.configs.model_config import AttentionArch  # noqa: E402
from sglang.srt.layers.radix_attention import RadixAttention  # noqa: E402
from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator  # noqa: E402
from sglang.srt.mem_cache.memory_pool import MLATokenToKVPool, ReqToTokenPool  # noqa: E402
from sglang.srt.model_executor.forward_batch_info import ForwardMode  # noqa: E402
from transformers import PretrainedConfig  # noqa: E402

from sglang_kimi_eagle3 import base  # noqa: E402
from sglang_kimi_eagle3.integration import launch_record  # noqa: E402
from sglang_kimi_eagle3.integration.hooks import offstate_attention as hook  # noqa: E402
from sglang_kimi_eagle3.status import hookstatus  # noqa: E402

H, DK, DV, CTX, SLOTS = 8, 576, 512, 64, 96
SEQ = [1, 7, 33]  # verify seq_lens: each request's prefix, without the verify token
DEV = kernel_device.DEVICE_NAME
I64 = torch.int64
# Triton's tl.dot takes fp32 operands as TF32 on an NVIDIA GPU (10-bit mantissa: output errors up to about 2e-3 on the
# H200, 2026-12-03); the CPU interpreter computes in full fp32
TOL = dict(rtol=1e-4, atol=1e-5) if not kernel_device.ON_GPU else dict(rtol=1e-2, atol=5e-3)


class SG:
    """SGLang's own methods: HookRegistry may have wrapped the class in this process (the plugin loaded by another
    test of the same worker), so each is unwrapped to the function SGLang defines."""

    def __getattr__(self, name):
        return inspect.unwrap(getattr(tb.TritonAttnBackend, name))


Backend = SG()


@pytest.fixture(scope="module")
def kv():
    """SGLang's pools and translator, random prefix keys, request r in req_to_token row r + 1: its prefix slots then
    its verify token's slot (written before attention, as SGLang does); row 0 is the dummy row of padded lanes."""
    from sglang.srt.runtime_context import get_parallel

    with pytest.MonkeyPatch.context() as mp, get_parallel().override(attn_tp_size=1, attn_dcp_size=1, attn_dcp_rank=0,
                                                                     dcp_enabled=False):
        cfg = NS(kernel=NS(enable_lean_attention=None, triton_attention_num_kv_splits=8,
                           triton_attention_split_tile_size=None),
                 dllm=NS(dllm_algorithm=None), deterministic=NS(enable_deterministic_inference=False))
        mp.setattr(tb, "get_exec", lambda: cfg)
        mp.setattr(tb, "get_spec", lambda: NS(speculative_num_draft_tokens=1, speculative_num_steps=0,
                                              speculative_eagle_topk=1))
        mp.setattr(tb, "get_schedule", lambda: NS(chunked_prefill_size=8192))
        mp.setattr(tb, "get_device_core_count", lambda gpu_id=0: 132)
        g = torch.Generator().manual_seed(7)
        pool = MLATokenToKVPool(size=SLOTS, page_size=1, dtype=torch.float32, kv_lora_rank=DV,
                                qk_rope_head_dim=DK - DV, layer_num=1, device=DEV, enable_memory_saver=False)
        pool.kv_buffer[0].copy_(torch.randn(SLOTS + 1, 1, DK, generator=g))
        rtt = ReqToTokenPool(size=4, max_context_len=CTX, device=DEV, enable_memory_saver=False)
        perm, rows, start = torch.randperm(SLOTS, generator=g) + 1, [], 0
        for r, s in enumerate(SEQ):
            rows.append(perm[start:start + s + 1])
            rtt.req_to_token[r + 1, :s + 1] = rows[-1].to(DEV, torch.int32)
            start += s + 1
        tr = KVIndexTranslator(req_to_token=rtt.req_to_token, token_to_kv_pool_allocator=None, token_to_kv_pool=pool,
                               page_size=1, device=DEV)
        q = torch.randn(len(SEQ), H * DK, generator=g)
        k = torch.randn(len(SEQ), 1, DK, generator=g)
        yield NS(pool=pool, rtt=rtt, tr=tr, rows=rows, q=q.to(DEV), k=k.to(DEV),
                 layer=RadixAttention(num_heads=H, head_dim=DK, scaling=DK ** -0.5, num_kv_heads=1, layer_id=0,
                                      v_head_dim=DV))


@pytest.fixture(autouse=True)
def _ours(monkeypatch):
    monkeypatch.setattr(launch_record, "_OURS", [True])  # an EAGLE3 launch with a draft model
    monkeypatch.setattr(hook, "_MIN_BS", [1])  # SGLANG_KIMI_EAGLE3_OFFSTATE=on: every batch size (auto: its own test)
    monkeypatch.setattr(hookstatus, "_COUNTS", type(hookstatus._COUNTS)())
    monkeypatch.setattr(hookstatus, "_TABLE", {})


def backend(kv, **runner):
    """SGLang's TritonAttnBackend.__init__ on the target runner of a steps-0 state (one token per verify)."""
    mc = NS(attention_arch=AttentionArch.MLA, get_max_num_attention_heads=lambda: H, get_num_kv_heads=lambda tp, dcp: 1,
            v_head_dim=128, swa_v_head_dim=None, context_len=CTX, head_dim=DK, linear_attn_registry_result=None, is_encoder_decoder=False,
            hf_config=PretrainedConfig(architectures=["DeepseekV3ForCausalLM"]))
    mr = dict(req_to_token_pool=kv.rtt, token_to_kv_pool=kv.pool, token_to_kv_pool_allocator=None,
              sliding_window_size=None, page_size=1, kv_index_translator=kv.tr, decode_num_tokens_per_req=lambda: 1,
              model_config=mc, is_draft_worker=False, spec_algorithm=None, device=DEV, gpu_id=0,
              kv_cache_dtype=torch.float32)
    return tb.TritonAttnBackend(NS(**{**mr, **runner}))


def batch(kv, mode, seq_lens, rows=(1, 2, 3), tokens=1):
    """A ForwardBatch view; TARGET_VERIFY: `tokens` per request past `seq_lens`, an all-true mask; DECODE: the
    last of `seq_lens` tokens is the new one. Writes go to each request's verify slot."""
    seq = torch.tensor(seq_lens, dtype=I64, device=DEV)
    rpi = torch.tensor(rows, dtype=I64, device=DEV)
    verify = mode.is_target_verify()
    spec = NS(num_tokens_per_req=tokens, draft_token_num=tokens, kv_indptr=None,
              custom_mask=torch.ones(sum(tokens * (s + tokens) for s in seq_lens), dtype=torch.bool, device=DEV))
    fb = NS(forward_mode=mode, batch_size=len(seq_lens), req_pool_indices=rpi, seq_lens=seq, seq_lens_cpu=seq.cpu(),
            seq_lens_sum=sum(seq_lens), spec_info=spec if verify else None, encoder_lens=None, positions=None,
            extend_seq_lens_cpu=None, extend_prefix_lens=None, mha_one_shot=False, attn_attend_prefix_cache=False)
    write = torch.stack([kv.rtt.req_to_token[r, s - (0 if verify else 1)] for r, s in zip(rows, seq_lens)])
    kv.tr.plan(req_pool_indices=rpi, seq_lens=seq, seq_lens_cpu=fb.seq_lens_cpu, write_virtual=write.to(I64),
               read_extent=tokens if verify else 0).bind(fb, kv.tr)
    return fb


def fresh(kv):
    """Each verify slot empty again: the pass under test writes the token's K itself (save_kv_cache=True)."""
    kv.pool.kv_buffer[0][torch.stack([r[-1] for r in kv.rows]).to(DEV)] = 0


def test_one_token_verify_is_sglangs_decode_over_seq_lens_plus_one(kv):
    be, q, k, layer = backend(kv), kv.q, kv.k, kv.layer
    v = k[..., :DV]
    fresh(kv)  # SGLang's own path: verify metadata, the extend kernel with the custom mask
    fb = batch(kv, ForwardMode.TARGET_VERIFY, SEQ)
    Backend.init_forward_metadata(be, fb)
    assert be.forward_metadata.attn_logits is None
    o_ext = Backend.forward_extend(be, q, k, v, layer, fb)
    fresh(kv)  # hooked
    fb = batch(kv, ForwardMode.TARGET_VERIFY, SEQ)
    hook._init_metadata(Backend.init_forward_metadata, be, fb)
    meta = be.forward_metadata
    assert meta.attn_logits is not None and meta.attn_logits.shape[0] == len(SEQ) and meta.custom_mask is None
    assert meta.kv_indptr.tolist() == [0, *torch.cumsum(torch.tensor(SEQ) + 1, 0).tolist()]
    assert torch.equal(meta.kv_indices.cpu(), torch.cat(kv.rows))  # prefix plus the token's own slot
    assert fb.forward_mode == ForwardMode.TARGET_VERIFY and fb.seq_lens.tolist() == SEQ  # the batch is not touched
    o_hook = hook._forward_extend(Backend.forward_extend, be, q, k, v, layer, fb)
    assert hookstatus.counters(hook.NAME) == {hook.NAME: {"ours": {"eager": 1}, "sglang": {}}}
    fresh(kv)  # plain decoding of the same tokens: SGLang's DECODE metadata and forward_decode
    dec = batch(kv, ForwardMode.DECODE, [s + 1 for s in SEQ])
    Backend.init_forward_metadata(be, dec)
    o_dec = Backend.forward_decode(be, q, k, v, layer, dec)
    assert torch.equal(o_hook, o_dec)  # the same kernel over the same KV and splits
    torch.testing.assert_close(o_hook, o_ext, **TOL)  # extend vs decode kernel: reduction order


def test_cuda_graph_capture_and_replay_fill_the_decode_buffers(kv):
    be, bs = backend(kv), 4
    be.init_cuda_graph_state(max_bs=bs, max_num_tokens=bs)
    fill = be.get_cuda_graph_seq_len_fill_value()
    cap = batch(kv, ForwardMode.TARGET_VERIFY, [fill] * bs, rows=(0,) * bs)  # capture: dummy rows, fill lengths
    hook._init_metadata_out_graph(Backend.init_forward_metadata_out_graph, be, cap, in_capture=True)
    meta = be.forward_metadata
    assert meta.attn_logits is be.cuda_graph_attn_logits and meta.num_kv_splits is be.cuda_graph_num_kv_splits
    assert meta.kv_indices is be.cuda_graph_kv_indices and meta.qo_indptr is None and meta.custom_mask is None
    # replay: three requests and one padded lane (row 0, the fill length), as SGLang's replay view pads them
    padded = [*SEQ, fill]
    fb = batch(kv, ForwardMode.TARGET_VERIFY, padded, rows=(1, 2, 3, 0))
    hook._init_metadata_out_graph(Backend.init_forward_metadata_out_graph, be, fb)
    assert be.forward_metadata is meta  # the captured metadata object, its buffers refilled
    fresh(kv)  # the layer's call, as the graph replays it: the decode kernel over the prefix and the token
    q, k = torch.cat([kv.q, kv.q[:1]]), torch.cat([kv.k, kv.k[:1]])
    o = hook._forward_extend(Backend.forward_extend, be, q, k, k[..., :DV], kv.layer, fb).view(bs, H, DV)[:3].cpu()
    keys = kv.pool.kv_buffer[0][:, 0].cpu()
    ref = torch.stack([torch.softmax(kv.q[r].cpu().view(H, DK) @ keys[kv.rows[r]].T * DK ** -0.5, -1)
                       @ keys[kv.rows[r], :DV] for r in range(len(SEQ))])
    torch.testing.assert_close(o, ref, **TOL)
    total = sum(padded) + bs
    got = (meta.kv_indptr.clone(), be.cuda_graph_kv_indices[:total].clone(), be.cuda_graph_num_kv_splits[:bs].clone())
    assert got[0].tolist() == [0, *torch.cumsum(torch.tensor(padded) + 1, 0).tolist()]
    assert torch.equal(got[1][:total - 2].cpu(), torch.cat(kv.rows))
    assert hookstatus.counters(hook.NAME)[hook.NAME]["ours"] == {"graph": 2}
    # SGLang's own replay of a DECODE batch over seq_lens + 1 leaves the same buffers
    be.cuda_graph_kv_indices.zero_(), be.cuda_graph_num_kv_splits.zero_()
    Backend.init_forward_metadata_out_graph(be, batch(kv, ForwardMode.DECODE, [s + 1 for s in padded], rows=(1, 2, 3, 0)))
    for mine, sglang in zip(got, (meta.kv_indptr, be.cuda_graph_kv_indices[:total], be.cuda_graph_num_kv_splits[:bs])):
        assert torch.equal(mine, sglang)


PASSES = {  # case -> (runner fields, batch mode, batch lengths, tokens per request)
    "four_tokens": ({}, ForwardMode.TARGET_VERIFY, SEQ, 4),
    "decode": ({}, ForwardMode.DECODE, [s + 1 for s in SEQ], 1),
    "draft_runner": ({"is_draft_worker": True}, ForwardMode.TARGET_VERIFY, SEQ, 1),
    "sliding_window": ({"sliding_window_size": 16}, ForwardMode.TARGET_VERIFY, SEQ, 1),
    "not_our_launch": ({}, ForwardMode.TARGET_VERIFY, SEQ, 1),
}


@pytest.mark.parametrize("case", list(PASSES))
def test_other_passes_go_to_sglang_untouched(kv, monkeypatch, case):
    if case == "not_our_launch":
        monkeypatch.setattr(launch_record, "_OURS", [False])  # a launch without a draft model, or not EAGLE
    runner, mode, lens, tokens = PASSES[case]
    be, fb = backend(kv, **runner), batch(kv, mode, lens, tokens=tokens)
    seen = []

    def original(*args, **kwargs):
        seen.append((args, kwargs))
        return "sglang"

    assert hook._init_metadata(original, be, fb) == "sglang"
    assert hook._init_metadata_out_graph(original, be, fb, in_capture=True) == "sglang"
    assert [(a[0], a[1], kw) for a, kw in seen] == [(be, fb, {}), (be, fb, {"in_capture": True})]
    assert all(a[1] is fb for a, _ in seen)  # the caller's batch itself, no view
    Backend.init_forward_metadata(be, fb)  # SGLang's own metadata for the pass (a decode's has attn_logits)
    be.forward_decode = lambda *a, **kw: pytest.fail("rerouted to forward_decode")
    assert hook._forward_extend(original, be, kv.q, kv.k, kv.k[..., :DV], kv.layer, fb) == "sglang"
    assert hookstatus.counters(hook.NAME) == {}


def test_auto_reroutes_every_batch_size_deciding_on_the_padded_batch(kv, monkeypatch):
    """auto (the default): every one-token verify batch takes the decode view, one request too (on the H200, 2026-12-04,
    1024-token contexts, rotated rounds: the hooked off-state's step 0.33-0.39x of SGLang's extend path at 1, 2, 4 and
    8 requests). A graph's padded lanes count like requests, so capture and replay of one graph size take the same
    path; a smaller MIN_BS (SGLANG_KIMI_EAGLE3_OFFSTATE=on sets 1 too) decides on the padded size all the same."""
    monkeypatch.delenv(base.ENV_OFFSTATE, raising=False)
    monkeypatch.setattr(hook.registry, "register", lambda *a: None)
    hook.install()
    assert hook._MIN_BS == [hook.MIN_BS_AUTO] == [1]
    be, seen = backend(kv), []

    def original(backend_, fb, *args, **kwargs):
        seen.append(fb)

    one = batch(kv, ForwardMode.TARGET_VERIFY, SEQ[:1], rows=(1,))  # one request: rerouted under auto
    hook._init_metadata(original, be, one)
    assert seen[-1] is not one and seen[-1].forward_mode == ForwardMode.DECODE
    assert seen[-1].seq_lens.tolist() == [SEQ[0] + 1]
    hook._MIN_BS[0] = 8  # a threshold, were one measured again: decided on the padded batch
    small = batch(kv, ForwardMode.TARGET_VERIFY, SEQ)  # 3 requests
    hook._init_metadata(original, be, small)
    assert seen[-1] is small
    rows = (1, 2, 3) * 2 + (0, 0)  # a graph of 8: six requests (rows reused) and two padded lanes on row 0
    fill = be.get_cuda_graph_seq_len_fill_value()
    padded = batch(kv, ForwardMode.TARGET_VERIFY, SEQ * 2 + [fill, fill], rows=rows)
    hook._init_metadata_out_graph(original, be, padded)
    assert seen[-1] is not padded and seen[-1].forward_mode == ForwardMode.DECODE
    assert seen[-1].seq_lens.tolist() == [s + 1 for s in SEQ * 2 + [fill, fill]]
    assert hookstatus.counters(hook.NAME)[hook.NAME]["ours"] == {"eager": 1, "graph": 1}
    monkeypatch.setenv(base.ENV_OFFSTATE, "on")
    hook.install()
    assert hook._MIN_BS == [1]
    hook._init_metadata(original, be, small)  # on: every batch size
    assert seen[-1] is not small and seen[-1].forward_mode == ForwardMode.DECODE


def test_off_installs_nothing_and_a_bad_value_is_named(monkeypatch):
    registered = []
    monkeypatch.setattr(hook.registry, "register", lambda *a: registered.append(a))
    monkeypatch.setenv(base.ENV_OFFSTATE, "off")
    hook.install()
    assert registered == []
    rows = {r.name: (r.target, r.state) for r in hookstatus.rows()}
    assert rows == {name: (target, "skipped") for name, target in hook.TARGETS.items()} and len(rows) == 3
    monkeypatch.setenv(base.ENV_OFFSTATE, "on")
    hook.install()  # on: the three AROUND hooks, each on a method the installed SGLang has
    assert sorted((a[1], a[3]) for a in registered) == sorted((t, "around") for t in hook.TARGETS.values())
    from sglang_kimi_eagle3.integration.registry import _resolve

    assert all(callable(_resolve(t)) for t in hook.TARGETS.values())
    monkeypatch.setenv(base.ENV_OFFSTATE, "sometimes")
    assert [e for e in base.env_errors() if base.ENV_OFFSTATE in e] == [
        f"{base.ENV_OFFSTATE}='sometimes' is not one of auto|on|off; unset it or pick one"]
