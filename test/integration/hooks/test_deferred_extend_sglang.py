"""The deferred_extend hook through SGLang's own draft extend (0.5.23): the flushes go through the real
`EagleDraftWorker._draft_extend_for_decode`, `prepare_for_draft_extend`, `ForwardBatch.init_new`, the draft runner's
real TritonAttnBackend (its per-batch buffers sized by the request slots, as on a server) and its extend kernel, into
SGLang's MHATokenToKVPool; the per-step extend they replace runs the same code one step at a time.

Real: the worker's method (unwrapped, as HookRegistry's AROUND wrapper hands it to the hook), the batch preparation,
ForwardBatch, KVIndexTranslator and its plans, ReqToTokenPool, the KV pool, the backend made by its own `__init__`,
RadixAttention and SGLang's Triton kernels (on the kernel tests' device, test/kernel_device.py: Triton's interpreter on
the CPU). Stood in: the draft model's layers (one layer's row-local work: q, k and v of each row from its token, the
target's hidden state and the position SGLang computed for it, then the real backend's `forward_extend`, which writes
the row's K and V at its slot and attends), the ScheduleBatch and ModelRunner (namespaces holding the fields SGLang
reads, None for the rest), and the config bags an unlaunched process has not published. On an H100 on 2026-12-06 the
first live flush (24 rows into a 16-slot server) failed in exactly this backend; `test_without_the_cap_...` is that
failure on the CPU."""

import contextlib
import inspect
from types import SimpleNamespace as NS

import kernel_device
import pytest

torch = pytest.importorskip("torch")
tb = pytest.importorskip("sglang.srt.layers.attention.triton_backend")

import sglang.srt.speculative.eagle_worker_v2 as ew  # noqa: E402
from sglang.srt.configs.model_config import AttentionArch  # noqa: E402
from sglang.srt.layers.radix_attention import RadixAttention  # noqa: E402
from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator  # noqa: E402
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool  # noqa: E402
from sglang.srt.model_executor.forward_batch_info import ForwardMode  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402
from transformers import PretrainedConfig  # noqa: E402

from sglang_kimi_eagle3.integration import launch_record  # noqa: E402
from sglang_kimi_eagle3.integration.hooks import deferred_extend as hook  # noqa: E402
from sglang_kimi_eagle3.status import hookstatus  # noqa: E402

H, D, CTX, KV_SLOTS, REQ_SLOTS, HC, VOCAB = 2, 16, 64, 1024, 6, 8, 64
DEV = kernel_device.DEVICE_NAME


def sglang_extend():
    """SGLang's own draft extend, read at call time: a plugin load in this process (another test) rebinds any module
    global holding the original function to its hooked wrapper (HookRegistry patches the name's importers too)."""
    return inspect.unwrap(ew.EagleDraftWorker._draft_extend_for_decode)


class Bag(NS):
    """A namespace that answers None for any field it was not given (SGLang reads many it does not use here)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


@pytest.fixture(autouse=True)
def _ours(monkeypatch):
    """An EAGLE3 launch of ours; the status table fresh per test; eligibility given."""
    monkeypatch.setattr(hookstatus, "_TABLE", {})
    monkeypatch.setattr(launch_record, "_OURS", [True])
    monkeypatch.setattr(hook, "why_not", lambda dw: None)  # eligibility: test_deferred_extend.py
    hook.reset()
    yield
    hook.reset()


@pytest.fixture
def sglang_config():
    """The parallel widths through SGLang's own override; the config bags SGLang's backend and worker read."""
    from sglang.srt.runtime_context import get_parallel

    spec = NS(speculative_num_draft_tokens=1, speculative_num_steps=0, speculative_eagle_topk=1,
              speculative_use_rejection_sampling=False)
    cfg = NS(kernel=NS(enable_lean_attention=None, triton_attention_num_kv_splits=8,
                       triton_attention_split_tile_size=None),
             dllm=NS(dllm_algorithm=None), deterministic=NS(enable_deterministic_inference=False))
    with pytest.MonkeyPatch.context() as mp, get_parallel().override(
            attn_tp_size=1, attn_dcp_size=1, attn_dcp_rank=0, dcp_enabled=False, moe_ep_size=1, moe_tp_size=1,
            tp_size=1, pp_size=1):
        mp.setattr(tb, "get_exec", lambda: cfg)
        mp.setattr(tb, "get_spec", lambda: spec)
        mp.setattr(ew, "get_spec", lambda: spec)
        mp.setattr(tb, "get_schedule", lambda: NS(chunked_prefill_size=8192))
        mp.setattr(tb, "get_device_core_count", lambda gpu_id=0: 132)
        yield


def draft_worker(req_slots=REQ_SLOTS):
    """A steps-0 draft worker: SGLang's pools and translator, a real TritonAttnBackend over them (its buffers hold
    `req_slots` rows, as a server's draft runner's hold its request slots), and a one-layer row-local model."""
    pool = MHATokenToKVPool(size=KV_SLOTS, page_size=1, dtype=torch.float32, head_num=H, head_dim=D, layer_num=1,
                            device=DEV, enable_memory_saver=False)
    rtt = ReqToTokenPool(size=req_slots, max_context_len=CTX, device=DEV, enable_memory_saver=False)
    for r in range(1, req_slots):  # request row r's positions at slots 100 r + p (row 0: the padding row)
        rtt.req_to_token[r] = (torch.arange(CTX, dtype=torch.int32) + 100 * r).to(DEV)
    tr = KVIndexTranslator(req_to_token=rtt.req_to_token, token_to_kv_pool_allocator=None, token_to_kv_pool=pool,
                           page_size=1, device=DEV)
    mc = NS(attention_arch=AttentionArch.MHA, get_max_num_attention_heads=lambda: H,
            get_num_kv_heads=lambda tp, dcp=1: H, v_head_dim=D, swa_v_head_dim=None, context_len=CTX, head_dim=D,
            linear_attn_registry_result=None, is_encoder_decoder=False, model_is_mrope=False, vocab_size=VOCAB,
            requires_mm_token_modalities=False, spec_hidden_size=HC, dtype=torch.float32,
            hf_config=PretrainedConfig(architectures=["LlamaForCausalLMEagle3"]))
    runner = Bag(req_to_token_pool=rtt, token_to_kv_pool=pool, token_to_kv_pool_allocator=None,
                 sliding_window_size=None, page_size=1, kv_index_translator=tr, decode_num_tokens_per_req=lambda: 1,
                 model_config=mc, is_draft_worker=True, spec_algorithm=SpeculativeAlgorithm.from_string("EAGLE3"),
                 device=DEV, gpu_id=0, kv_cache_dtype=torch.float32, prefill_attention_backend_str="triton",
                 ngram_embedding_manager=NS(enabled=False))
    runner.attn_backend = tb.TritonAttnBackend(runner)
    layer = RadixAttention(num_heads=H, head_dim=D, scaling=D ** -0.5, num_kv_heads=H, layer_id=0)
    scale = torch.linspace(0.1, 1.0, H * D, device=DEV)
    runner.forwards = []

    def forward(fb):
        """One layer's row-local work (no reduction across rows or features: equal bits at any batch size), then
        SGLang's attention, which writes each row's K and V at its slot."""
        n = fb.input_ids.shape[0]
        x = (fb.input_ids.float()[:, None] + fb.spec_info.hidden_states[:, :1] + fb.positions.float()[:, None]) * scale
        runner.attn_backend.forward_extend(x, x.reshape(n, H, D).sin(), x.reshape(n, H, D).cos(), layer, fb)
        runner.forwards.append(n)
        return NS(logits_output=NS(next_token_logits=x[:, :VOCAB].clone(), hidden_states=x[:, :HC].clone()))

    runner.forward = forward
    return Bag(draft_runner=runner, topk=1, speculative_num_draft_tokens=1, seed_dsa_topk_from_draft_extend=False,
               plan_stream=None, plan_stream_ctx=contextlib.nullcontext(), device=DEV,
               cuda_graph_runner_for_draft_extend=None)


def step(dw, reqs, lens, t, cpu_lens):
    """A steps-0 step as SGLang's worker hands it to the extend: request r (pool row r) verified its token at position
    lens[i], written at that position's slot; the target's captured hidden state of that token."""
    bs = len(reqs)
    rows = torch.tensor([r.row for r in reqs], dtype=torch.int64, device=DEV)
    seq = torch.tensor(lens, dtype=torch.int64, device=DEV)
    batch = Bag(forward_mode=ForwardMode.DECODE, reqs=list(reqs), req_pool_indices=rows, seq_lens=seq,
                seq_lens_cpu=seq.cpu() if cpu_lens else None, seq_lens_sum=None,
                out_cache_loc=dw.draft_runner.req_to_token_pool.req_to_token[rows, seq].to(torch.int64),
                multimodal_inputs=[None] * bs, orig_seq_lens=(seq + 1).to(torch.int32),
                model_config=dw.draft_runner.model_config, spec_algorithm=dw.draft_runner.spec_algorithm,
                return_logprob=False, sampling_info=None)
    tokens = torch.tensor([(7 * t + r.row) % VOCAB for r in reqs], dtype=torch.int64, device=DEV)
    result = NS(next_token_ids=tokens, accept_lens=torch.ones(bs, dtype=torch.int32, device=DEV),
                prepared_draft_extend_inputs=None, new_seq_lens=seq + 1,
                logits_output=NS(hidden_states=(torch.arange(HC, device=DEV)[None] * 0.01 + t + rows[:, None]).float()),
                next_draft_input=NS(topk_p=None, topk_index=None, hidden_states=None))
    return batch, result


def serve(dw, schedule, defer, cpu_lens=False, make_step=None, ctx=contextlib.nullcontext):
    """The steps of `schedule` (request lists), each through the hook (which defers while `defer(t)`) around SGLang's
    real extend (inside `ctx()`); each request decodes one token a step from position 5 + its row."""
    lens = {}
    for t, reqs in enumerate(schedule):
        hook.ACTIVE[0] = defer(t)
        for r in reqs:
            lens.setdefault(r.row, 5 + r.row)
        batch, result = (make_step or step)(dw, reqs, [lens[r.row] for r in reqs], t, cpu_lens)
        with ctx():
            hook._around(sglang_extend(), dw, batch, result, kv_loc_plan=None)
        for r in reqs:
            lens[r.row] += 1


def kv(dw, slots):
    pool = dw.draft_runner.token_to_kv_pool
    idx = torch.tensor(sorted(slots), device=DEV)
    return pool.k_buffer[0][idx].cpu(), pool.v_buffer[0][idx].cpu()


def reqs(*rows):
    return [Bag(rid=f"r{r}", row=r, lora_id=None) for r in rows]


@pytest.mark.parametrize("cpu_lens", [False, True], ids=["gpu-planned", "cpu-mirror"])
def test_deferred_flushes_write_the_draft_kv_sglangs_per_step_extend_writes(sglang_config, cpu_lens):
    """Ten off-state steps of 3 requests on a 6-slot server, deferred with K 8: the stash is flushed in groups of two
    whole steps (6 rows, what SGLang's buffers hold) as it fills, and the rest before the step up at step 10, whose
    own extend then runs as SGLang's. Every slot the per-step extend wrote holds the same K and V, bit for bit."""
    a, b, c = reqs(1, 2, 3)
    schedule = [[a, b, c]] * 11
    per_step = draft_worker()
    serve(per_step, schedule, defer=lambda t: False, cpu_lens=cpu_lens)
    assert per_step.draft_runner.forwards == [3] * 11
    hook.reset()
    deferred = draft_worker()
    serve(deferred, schedule, defer=lambda t: t < 10, cpu_lens=cpu_lens)
    assert deferred.draft_runner.forwards == [6] * 5 + [3], deferred.draft_runner.forwards
    written = {100 * r + p for r in (1, 2, 3) for p in range(5 + r, 5 + r + 11)}
    for ref, got in zip(kv(per_step, written), kv(deferred, written)):
        assert torch.equal(ref, got)
        assert ref.abs().sum() > 0  # the slots were written, not left at zero by both
    assert hookstatus.get(hook.NAME).state == "applied"
    assert hook._STATE["flushes"] == 5 and hook._STATE["rows"] == 30 and hook._STATE["failed"] is None


def test_a_request_gone_by_the_flush_writes_only_the_padding_slot(sglang_config):
    """Request 3 leaves after step 2; the flush at step 7 sends its three stashed rows to slot 0 (its pool row may be
    another request's by then) and writes the others' rows as the per-step extend does."""
    a, b, c = reqs(1, 2, 3)
    schedule = [[a, b, c]] * 3 + [[a, b]] * 5
    per_step, deferred = draft_worker(req_slots=32), draft_worker(req_slots=32)
    serve(per_step, schedule, defer=lambda t: False)
    hook.reset()
    serve(deferred, schedule, defer=lambda t: True)
    assert deferred.draft_runner.forwards == [3 * 3 + 2 * 5] and hook._STATE["dropped"] == 3
    kept = {100 * r + p for r in (1, 2) for p in range(5 + r, 5 + r + 8)}
    for ref, got in zip(kv(per_step, kept), kv(deferred, kept)):
        assert torch.equal(ref, got)
    gone = {300 + p for p in range(8, 11)}
    for k in kv(deferred, gone):
        assert not k.any()


def test_without_the_cap_sglangs_backend_refuses_the_flush(sglang_config, monkeypatch):
    """The live failure of 2026-12-06 on the CPU: a flush of more rows than the request slots (8 steps x 3 rows into
    6 slots) is refused by the backend's buffers; the hook hands the extend back to SGLang for good and says why."""
    monkeypatch.setattr(hook, "max_rows", lambda dw: 10 ** 6)
    a, b, c = reqs(1, 2, 3)
    dw = draft_worker()
    serve(dw, [[a, b, c]] * 10, defer=lambda t: True)
    row = hookstatus.get(hook.NAME)
    assert row.state == "failed" and "must match" in row.detail, row.detail
    assert dw.draft_runner.forwards == [3, 3, 3]  # step 7's own extend after the refused flush, then steps 8 and 9


def test_a_step_over_half_the_slots_is_extended_at_once(sglang_config):
    """4 requests on a 6-slot server: a flush could hold one step alone, so deferring would save no extend. Each such
    step goes to SGLang's extend at once (after any stash: here the steps of 2 requests before it), counted."""
    a, b, c, d = reqs(1, 2, 3, 4)
    schedule = [[a, b]] * 2 + [[a, b, c, d]] * 3
    per_step, deferred = draft_worker(), draft_worker()
    serve(per_step, schedule, defer=lambda t: False)
    hook.reset()
    serve(deferred, schedule, defer=lambda t: True)
    assert deferred.draft_runner.forwards == [4, 4, 4, 4]  # steps 0-1 flushed before step 2, then steps 2-4 each
    written = {100 * r + p for r in (1, 2) for p in range(5 + r, 5 + r + 5)} | {
        100 * r + p for r in (3, 4) for p in range(5 + r, 5 + r + 3)}
    for ref, got in zip(kv(per_step, written), kv(deferred, written)):
        assert torch.equal(ref, got)
    assert hook._STATE["direct"] == 3 and "3 steps extended at once" in hookstatus.get(hook.NAME).detail  # current


# ---- SGLANG_KIMI_EAGLE3_DEFER_FLUSH=kv: the rows' K and V alone, set against SGLang's extend through the real drafter --

KV_H, KV_D, KV_HID = 2, 64, 128  # rope's CPU path takes head sizes 64/128/256/512


def one_rank():
    """SGLang's parallel names for one rank, as a launched process would have published them (the drafter's layers
    read them when built and when run)."""
    from sglang.srt.runtime_context import get_parallel

    group = NS(is_first_rank=True, is_last_rank=True, rank_in_group=0, world_size=1)
    return get_parallel().override(attn_tp_size=1, attn_dcp_size=1, attn_dcp_rank=0, dcp_enabled=False, moe_ep_size=1,
                                   moe_tp_size=1, tp_size=1, pp_size=1, pp_group=group, tp_group=None, tp_rank=0,
                                   attn_tp_rank=0, enable_dp_lm_head=False, enable_tp_lm_head_all_to_all=False)


def real_drafter():
    """SGLang's own LlamaForCausalLMEagle3 (one input layer, fc over three target layers), built on the CPU with the
    parallel and config bags an unlaunched process lacks, random weights (seeded)."""
    from unittest import mock

    import sglang.srt.layers.logits_processor as lp
    import sglang.srt.layers.rotary_embedding.base as rb
    import sglang.srt.models.llama_eagle3 as le
    from transformers import LlamaConfig

    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=KV_HID, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=KV_H, num_key_value_heads=KV_H, head_dim=KV_D, rms_norm_eps=1e-6,
                      max_position_embeddings=CTX)
    cfg.draft_vocab_size, cfg.target_hidden_size = VOCAB, KV_HID
    bag = Bag(features=Bag(), deterministic=Bag(), kernel=Bag(), dllm=Bag())
    with one_rank(), \
            mock.patch.object(le, "get_spec", lambda: NS(speculative_draft_window_size=None)), \
            mock.patch.object(rb, "_is_cpu", True), mock.patch.object(lp, "get_exec", lambda: bag):
        model = le.LlamaForCausalLMEagle3(cfg)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return model.float().to(DEV)


def real_worker(model, req_slots=REQ_SLOTS):
    """draft_worker's pools and backend around SGLang's real drafter: its forward is LlamaModel.forward (the layer's
    RadixAttention writes K and V through the real TritonAttnBackend), logits from its lm_head."""
    dw = draft_worker(req_slots)
    runner = dw.draft_runner
    runner.token_to_kv_pool = MHATokenToKVPool(size=KV_SLOTS, page_size=1, dtype=torch.float32, head_num=KV_H,
                                               head_dim=KV_D, layer_num=1, device=DEV, enable_memory_saver=False)
    runner.kv_index_translator = KVIndexTranslator(req_to_token=runner.req_to_token_pool.req_to_token,
                                                   token_to_kv_pool_allocator=None,
                                                   token_to_kv_pool=runner.token_to_kv_pool, page_size=1, device=DEV)
    mc = runner.model_config
    mc.get_max_num_attention_heads, mc.get_num_kv_heads = (lambda: KV_H), (lambda tp, dcp=1: KV_H)
    mc.v_head_dim = mc.head_dim = KV_D
    mc.spec_hidden_size = 3 * KV_HID
    runner.attn_backend = tb.TritonAttnBackend(runner)
    runner.model = model

    from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

    def forward(fb):  # as ModelRunner.forward: the model's attention reads its backend from the forward context
        with torch.inference_mode(), one_rank(), forward_context(ForwardContext(attn_backend=runner.attn_backend)):
            hidden, aux = model.model(fb.input_ids, fb.positions, fb)
        runner.forwards.append(fb.input_ids.shape[0])
        return NS(logits_output=NS(next_token_logits=hidden @ model.lm_head.weight.T, hidden_states=aux[0]))

    runner.forward = forward
    return dw


def real_step(dw, reqs, lens, t, cpu_lens):
    batch, result = step(dw, reqs, lens, t, cpu_lens)
    rows = batch.req_pool_indices
    result.logits_output = NS(hidden_states=(torch.arange(3 * KV_HID, device=DEV)[None] * 0.003 + 0.1 * t
                                             + 0.2 * rows[:, None]).float().sin())
    return batch, result


def real_serve(dw, schedule, defer):
    serve(dw, schedule, defer, make_step=real_step, ctx=one_rank)


@pytest.mark.skipif(kernel_device.ON_GPU, reason="the drafter's CUDA layers read a launched process's config bags (RMSNorm, "
                    "rope): on a GPU the DEFER_FLUSH=kv check is a live server's (device_adaptive.sh DA_KVFLUSH=1)")
def test_a_kv_only_flush_writes_what_sglangs_extend_writes_through_the_real_drafter(sglang_config, monkeypatch):
    """DEFER_FLUSH=kv: SGLang's LlamaForCausalLMEagle3 on the CPU, its extend through the real TritonAttnBackend at
    every step, against the rows stashed for 10 steps and flushed as K and V alone (embedding, fc, the two norms,
    qkv_proj and rope of the drafter's own modules, the pool's set_kv_buffer): every slot holds the same K and V. The
    flush is not capped at the request slots (8 steps of 3 rows into 6 slots: one flush of 24), and a request gone by
    the flush writes only the padding slot."""
    model = real_drafter()
    a, b, c = reqs(1, 2, 3)
    schedule = [[a, b, c]] * 8 + [[a, b]] * 2 + [[a, b]]
    per_step = real_worker(model)
    real_serve(per_step, schedule, defer=lambda t: False)
    assert per_step.draft_runner.forwards == [3] * 8 + [2] * 3
    hook.reset()
    monkeypatch.setitem(hook._STATE, "flush", "kv")
    deferred = real_worker(model)
    real_serve(deferred, schedule, defer=lambda t: t < 10)
    assert hook.kv_flush(deferred) is None, hook.kv_flush(deferred)
    assert deferred.draft_runner.forwards == [2], deferred.draft_runner.forwards  # only step 10's own extend
    assert hook._STATE["kv"] == 2 and hook._STATE["rows"] == 24 + 4 and hook._STATE["failed"] is None, hook._STATE
    written = {100 * r + p for r in (1, 2) for p in range(5 + r, 5 + r + 11)} | {300 + p for p in range(8, 16)}
    ref, got = kv(per_step, written), kv(deferred, written)
    for x, y in zip(ref, got):
        torch.testing.assert_close(y, x, rtol=1e-5, atol=1e-6)
        assert x.abs().sum() > 0
    assert "2 flushes of K and V alone" in hookstatus.get(hook.NAME).detail
