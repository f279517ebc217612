"""The deferred_extend hook (SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=defer): while the off-state holds, each step's draft
extend rows are stashed and extended every K steps as one-token rows, exactly.

In-process, on CPU tensors: the hook's AROUND function is called as HookRegistry calls it, with a stand-in for SGLang's
`EagleDraftWorker._draft_extend_for_decode` that does what that extend does to the draft KV for a one-layer drafter
(each row writes, at its slot, a value of its own token, target hidden state and position: row-local) and records
the batch it was handed. Real: SGLang's LlamaForCausalLMEagle3 class (for the eligibility check), its
SpeculativeAlgorithm and its hidden-state spec function (for the stubs), its worker's source (that the stubs match
SGLang's skip flag's, and that the extend is called with the batch, its result and `kv_loc_plan`). The exactness that
needs SGLang's real draft forward on a GPU (the KV pool after a flush equal to the per-step extend's) is not here: not
yet run.
"""

import inspect
import types

import pytest
import torch

from sglang_kimi_eagle3.integration import launch_record
from sglang_kimi_eagle3.integration.hooks import deferred_extend as hook
from sglang_kimi_eagle3.status import hookstatus

ForwardMode = pytest.importorskip("sglang.srt.model_executor.forward_batch_info").ForwardMode
SpeculativeAlgorithm = pytest.importorskip("sglang.srt.speculative.spec_info").SpeculativeAlgorithm

HC, HD, POOL, CTX = 6, 4, 16, 64  # captured target hidden width, the draft's recurrent hidden, req pool rows, context


class Req:
    def __init__(self, rid):
        self.rid, self.lora_id = rid, None


def _runner(layers=1, cls=None, slots=POOL * 4):
    from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3

    model = object.__new__(cls or LlamaForCausalLMEagle3)  # the class only: nothing loaded
    r2t = torch.arange(POOL * CTX, dtype=torch.int32).reshape(POOL, CTX) + 1000  # slot of (req row, position)
    return types.SimpleNamespace(
        model=model, watermark_state=None, spec_algorithm=SpeculativeAlgorithm.from_string("EAGLE3"),
        model_config=types.SimpleNamespace(hf_config=types.SimpleNamespace(num_hidden_layers=layers), model_is_mrope=False,
                                           spec_hidden_size=HD, dtype=torch.float32),
        req_to_token_pool=types.SimpleNamespace(req_to_token=r2t, size=slots))


def _worker(**kw):  # kw: _runner's
    return types.SimpleNamespace(draft_runner=_runner(**kw), topk=1, speculative_num_draft_tokens=1,
                                 seed_dsa_topk_from_draft_extend=False)


class Extend:
    """SGLang's draft extend as the hook sees it: the calls it was handed, and a draft KV pool written row-locally."""

    def __init__(self):
        self.kv, self.calls = {}, []

    def __call__(self, dw, batch, result, kv_loc_plan=None):
        loc = (batch.out_cache_loc if batch.out_cache_loc is not None
               else dw.draft_runner.req_to_token_pool.req_to_token[batch.req_pool_indices.long(), batch.seq_lens])
        toks, hid, pos = result.next_token_ids.reshape(-1), result.logits_output.hidden_states, batch.seq_lens
        for i in range(len(pos)):
            self.kv[int(loc[i])] = (int(toks[i]), float(hid[i].sum()), int(pos[i]))
        self.calls.append((batch, result, kv_loc_plan))
        nxt = result.next_draft_input
        nxt.topk_p = torch.full((len(pos), 1), 0.5)
        nxt.topk_index = toks.reshape(-1, 1)
        nxt.hidden_states = torch.ones((len(pos), HD))


def _step(reqs, rows, lens, t, cpu_lens=False):
    """A steps-0 step's batch and result: request i (pool row rows[i]) verified its token at position lens[i]."""
    bs = len(reqs)
    batch = types.SimpleNamespace(
        forward_mode=ForwardMode.DECODE, reqs=list(reqs), req_pool_indices=torch.tensor(rows, dtype=torch.int64),
        seq_lens=torch.tensor(lens, dtype=torch.int64),
        seq_lens_cpu=torch.tensor(lens, dtype=torch.int64) if cpu_lens else None, seq_lens_sum=None, out_cache_loc=None,
        multimodal_inputs=[None] * bs, orig_seq_lens=torch.tensor(lens, dtype=torch.int32) + 1, sampling_info="real", return_logprob=False, top_logprobs_nums=None,
        token_ids_logprobs=None)
    result = types.SimpleNamespace(
        next_token_ids=torch.tensor([100 * t + r for r in rows], dtype=torch.int64),
        accept_lens=torch.ones(bs, dtype=torch.int32), prepared_draft_extend_inputs=None,
        new_seq_lens=batch.seq_lens + 1,
        logits_output=types.SimpleNamespace(hidden_states=torch.full((bs, HC), float(t)) + torch.tensor(rows)[:, None]),
        next_draft_input=types.SimpleNamespace(topk_p=None, topk_index=None, hidden_states=None))
    return batch, result


@pytest.fixture(autouse=True)
def _row_restored():
    """The status table is process-wide: a row these tests leave failed would fail `status` in a later test."""
    before = hookstatus.get(hook.NAME)
    yield
    if before is None:
        hookstatus._TABLE.pop(hook.NAME, None)
    else:
        hookstatus._TABLE[hook.NAME] = before


@pytest.fixture
def ours(monkeypatch):
    monkeypatch.setattr(launch_record, "_OURS", [True])
    monkeypatch.setattr(hook, "why_not", lambda dw: None)  # eligibility: its own test below
    hook.reset()
    yield
    hook.reset()


def _serve(extend, dw, schedule, active, cpu_lens=False):
    """Steps of a batch whose membership follows `schedule` (a list of request lists, one per step); each request
    decodes one token a step from position 10 + its pool row. Returns the per-step results."""
    lens = {}
    out = []
    for t, reqs in enumerate(schedule):
        hook.ACTIVE[0] = active(t)
        rows = [r.rid for r in reqs]
        for r in rows:
            lens[r] = lens.get(r, 10 + r)
        batch, result = _step(reqs, rows, [lens[r] for r in rows], t, cpu_lens)
        hook._around(extend, dw, batch, result, kv_loc_plan="the verify's plan")
        out.append((batch, result))
        for r in rows:
            lens[r] += 1
    return out


def test_deferred_rows_write_the_draft_kv_the_per_step_extend_writes(ours):
    """Twelve off-state steps, request 3 leaving after step 5 and request 4 joining at step 7: deferred with K 8 (a
    flush at step 7, then the stash flushed before the first extend that reads it, a step up's), the draft KV equals
    the per-step extend's at every slot of the requests in the batch at the flush; request 3's rows, stashed and gone
    by then (its slots may be another request's), are sent to the padding slot 0: its last positions stay unextended.
    The deferred steps' own outputs are SGLang's skip stubs."""
    a, b, c, d = (Req(i) for i in (1, 2, 3, 4))
    schedule = [[a, b, c]] * 6 + [[a, b]] + [[a, b, d]] * 5
    dw = _worker()
    per_step = Extend()
    _serve(per_step, dw, schedule, active=lambda t: False)
    assert len(per_step.calls) == 12
    hook.reset()
    deferred = Extend()
    outs = _serve(deferred, dw, schedule, active=lambda t: t < 12)
    assert len(deferred.calls) == 1  # steps 0-7 flushed at step 7 (8 stashed); 8-11 still stashed
    batch, result, plan = deferred.calls[0]
    assert plan is None and len(batch.seq_lens) == 3 * 6 + 2 + 3  # M one-token rows, steps 0-7
    assert batch.sampling_info is None and len(batch.reqs) == len(batch.seq_lens)
    # step 7's result got the stubs, not the flush's outputs
    nxt = outs[7][1].next_draft_input
    assert nxt.topk_p.shape == (3, 1) and not nxt.topk_p.any() and nxt.hidden_states.shape == (3, HD)
    hook.ACTIVE[0] = False  # a step up: the stash (steps 8-11) is flushed before SGLang's extend of step 12
    batch12, result12 = _step([a, b, d], [1, 2, 4], [10 + 1 + 12, 10 + 2 + 12, 10 + 4 + 5], 12)
    hook._around(deferred, dw, batch12, result12, kv_loc_plan="plan 12")
    assert len(deferred.calls) == 3 and deferred.calls[2][2] == "plan 12" and deferred.calls[2][0] is batch12
    per_step12 = Extend()
    per_step12.kv = dict(per_step.kv)
    b12, r12 = _step([a, b, d], [1, 2, 4], [10 + 1 + 12, 10 + 2 + 12, 10 + 4 + 5], 12)
    per_step12(dw, b12, r12)
    r2t = dw.draft_runner.req_to_token_pool.req_to_token
    gone = {int(r2t[3, p]) for p in range(13, 13 + 6)}  # request 3's six positions (steps 0-5)
    assert {k: v for k, v in per_step12.kv.items() if k not in gone} == {k: v for k, v in deferred.kv.items() if k != 0}
    assert gone.isdisjoint(deferred.kv) and 0 in deferred.kv
    assert hook._STATE["flushes"] == 2 and hook._STATE["rows"] == 23 + 12 and hook._STATE["dropped"] == 6
    assert "2 flushes, 35 rows, 6 dropped" in hookstatus.get(hook.NAME).detail  # the row as of the last flush


def test_a_flush_tags_the_decode_launch_it_runs_in_for_the_step_clocks_ledger(ours):
    """The step clock's ledger reads the steps that flush apart (`steps 0 (flush)`): the flush names itself to the
    decode launch it runs in, and only that one (K 8: the eighth deferred step)."""
    from sglang_kimi_eagle3.integration.hooks import step_clock

    a, b = Req(1), Req(2)
    dw, ext, tagged, lens = _worker(), Extend(), [], [11, 12]
    step_clock.reset()
    try:
        for t in range(12):
            hook.ACTIVE[0] = True
            step_clock._ledger_open(float(t), None, 2)  # a decode launch opened its interval: its kind not yet known
            batch, result = _step([a, b], [1, 2], lens, t)
            hook._around(ext, dw, batch, result, kv_loc_plan=None)
            tagged.append(list(step_clock._LED["tags"]))
            lens = [n + 1 for n in lens]
    finally:
        step_clock.reset()
    assert len(ext.calls) == 1 and [t for t, tags in enumerate(tagged) if tags] == [7] and tagged[7] == ["flush"]


def test_rows_of_a_request_gone_by_the_flush_go_to_the_padding_slot(ours):
    a, b, c = Req(1), Req(2), Req(3)
    dw = _worker()
    ext = Extend()
    schedule = [[a, b, c]] * 3 + [[a, b]] * 5  # request 3 leaves after step 2; the flush comes at step 7
    _serve(ext, dw, schedule, active=lambda t: True)
    (batch, result, _), = ext.calls
    assert len(batch.seq_lens) == 3 * 3 + 2 * 5 and hook._STATE["dropped"] == 3
    assert (batch.out_cache_loc == 0).sum() == 3 and {r.rid for r in batch.reqs} == {1, 2}


def test_the_real_batch_and_result_are_not_touched_by_a_flush(ours):
    a, b = Req(1), Req(2)
    dw = _worker()
    ext = Extend()
    outs = _serve(ext, dw, [[a, b]] * 8, active=lambda t: True)
    batch, result = outs[-1]
    assert batch.sampling_info == "real" and batch.out_cache_loc is None and len(batch.reqs) == 2
    assert result.accept_lens.shape == (2,) and result.logits_output.hidden_states.shape == (2, HC)
    fb, fr, plan = ext.calls[0]  # the flush's batch: every per-request field one entry per row (8 steps x 2)
    assert plan is None and len(fb.reqs) == len(fb.multimodal_inputs) == 16
    for name in ("seq_lens", "req_pool_indices", "out_cache_loc", "orig_seq_lens"):
        assert getattr(fb, name).shape == (16,), name
    assert fr.next_token_ids.shape == fr.accept_lens.shape == (16,) and fr.logits_output.hidden_states.shape == (16, HC)


def test_no_flush_carries_more_rows_than_the_request_slots(ours):
    """A server of 5 request slots, 2 requests a step: SGLang's attention buffers hold 5 rows, so the 8 steps' 16 rows
    go in groups of at most 5 (whole steps: 4 rows), flushed as the stash fills; a step up (step 8) flushes the last
    group before its own extend, and the draft KV is the per-step extend's."""
    a, b = Req(1), Req(2)
    per_step, deferred = Extend(), Extend()
    _serve(per_step, _worker(), [[a, b]] * 9, active=lambda t: False)
    _serve(deferred, _worker(slots=5), [[a, b]] * 9, active=lambda t: t < 8)
    sizes = [len(c[0].seq_lens) for c in deferred.calls]
    assert sizes == [4, 4, 4, 4, 2] and deferred.kv == per_step.kv
    assert hook.chunks([{"rids": [1] * n} for n in (3, 2, 1, 5, 4)], 5) == [
        [{"rids": [1] * 3}, {"rids": [1] * 2}], [{"rids": [1]}], [{"rids": [1] * 5}], [{"rids": [1] * 4}]]


@pytest.mark.parametrize("cpu_lens", [False, True], ids=["gpu-planned", "cpu-mirror"])
def test_the_flush_plans_as_the_real_batch_does(ours, cpu_lens):
    """Triton's batches carry no CPU mirror of seq_lens (SGLang's extend then plans on the GPU): neither does the
    flush's; a backend that keeps the mirror gets one per row, and its sum."""
    a, b = Req(1), Req(2)
    ext = Extend()
    _serve(ext, _worker(), [[a, b]] * 8, active=lambda t: True, cpu_lens=cpu_lens)
    fb = ext.calls[0][0]
    if cpu_lens:
        assert torch.equal(fb.seq_lens_cpu, fb.seq_lens) and fb.seq_lens_sum == int(fb.seq_lens.sum())
    else:
        assert fb.seq_lens_cpu is None and fb.seq_lens_sum is None


def test_outside_the_off_state_and_for_foreign_launches_sglangs_extend_runs(ours, monkeypatch):
    a = Req(1)
    dw = _worker()
    ext = Extend()
    _serve(ext, dw, [[a]] * 10, active=lambda t: False)
    assert len(ext.calls) == 10 and not hook._PENDING
    dw.speculative_num_draft_tokens = 4  # a positive state's extend: never deferred
    _serve(ext, dw, [[a]] * 3, active=lambda t: True)
    assert len(ext.calls) == 13
    monkeypatch.setattr(launch_record, "_OURS", [False])
    dw.speculative_num_draft_tokens = 1
    _serve(ext, dw, [[a]] * 3, active=lambda t: True)
    assert len(ext.calls) == 16 and not hook._PENDING


def test_a_failing_flush_gives_sglang_its_extend_back_for_good(ours):
    a = Req(1)
    dw = _worker()
    calls = []

    def extend(dw, batch, result, kv_loc_plan=None):
        calls.append(len(batch.seq_lens))
        if len(batch.seq_lens) > 1:
            raise RuntimeError("flush bug")

    _serve(extend, dw, [[a]] * 12, active=lambda t: True)
    # the flush at step 7 failed: that step's own extend ran, and every step after
    assert calls == [8, 1, 1, 1, 1, 1]
    row = hookstatus.get(hook.NAME)
    assert row.state == "failed" and "flush bug" in row.detail


def test_eligibility_is_a_one_layer_llama_eagle3_chain_without_rejection_sampling(monkeypatch):
    import sglang.srt.runtime_context as rc
    import sglang.srt.utils.common as common

    hook.reset()
    spec = types.SimpleNamespace(speculative_use_rejection_sampling=False)
    monkeypatch.setattr(rc, "get_spec", lambda: spec)
    monkeypatch.setattr(rc, "get_parallel", lambda: types.SimpleNamespace(pp_size=1))
    monkeypatch.setattr(common, "require_mlp_sync", lambda: False)
    assert hook.why_not(_worker()) is None
    assert "2 layers" in hook.why_not(_worker(layers=2))
    row = hookstatus.get(hook.NAME)  # the operator reads why
    assert row.state == "skipped" and row.detail.startswith("not deferred: the drafter has 2 layers"), row.detail
    from sglang.srt.models.llama import LlamaForCausalLM

    assert "not LlamaForCausalLMEagle3" in hook.why_not(_worker(cls=LlamaForCausalLM))
    dw = _worker()
    dw.topk = 4
    assert "topk 4" in hook.why_not(dw)
    spec.speculative_use_rejection_sampling = True
    assert hook.why_not(_worker()) == "rejection sampling"
    hook.reset()
    monkeypatch.setattr(rc, "get_spec", lambda: (_ for _ in ()).throw(ValueError("not published")))
    assert hook.why_not(_worker()).startswith("not readable (ValueError")


def test_the_stubs_and_the_call_match_sglangs_worker():
    """SGLang's skip flag stubs exactly the three fields ours does, and its worker calls the extend with the batch, its
    result and `kv_loc_plan`: a change there breaks this test, not a server."""
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker, EAGLEWorkerV2

    stub = inspect.getsource(EAGLEWorkerV2._stub_skipped_draft_extend)
    assert all(f"next_draft_input.{f} =" in stub for f in ("topk_p", "topk_index", "hidden_states"))
    fwd = " ".join(inspect.getsource(EAGLEWorkerV2.forward_batch_generation).split())
    assert "self.draft_worker._draft_extend_for_decode( batch, batch_output, kv_loc_plan=verify_input.kv_loc_plan )" in fwd
    params = list(inspect.signature(inspect.unwrap(EagleDraftWorker._draft_extend_for_decode)).parameters)
    assert params == ["self", "batch", "batch_result", "kv_loc_plan"]


def test_install_queues_the_hook_under_defer_the_default(monkeypatch):
    from sglang_kimi_eagle3.base import ENV_OFFSTATE_EXTEND

    queued = []
    monkeypatch.setattr(hook.registry, "register", lambda name, *a, **k: queued.append(name))
    for mode in ("keep", "skip"):
        monkeypatch.setenv(ENV_OFFSTATE_EXTEND, mode)
        hook.install()
        assert queued == [] and hookstatus.get(hook.NAME).state == "skipped"
    monkeypatch.setenv(ENV_OFFSTATE_EXTEND, "defer")
    hook.install()
    assert queued == [hook.NAME]
    monkeypatch.delenv(ENV_OFFSTATE_EXTEND)  # unset: the default since run 31 (an H100, c 8 and 32 at or above keep)
    hook.install()
    assert queued == [hook.NAME, hook.NAME]


ONE_AROUND = """
import json
import sglang.srt.plugins as plugins
plugins.load_plugins()
from sglang_kimi_eagle3.integration import refresh_status
from sglang_kimi_eagle3.integration.hooks import deferred_extend as D, step_clock as C
from sglang_kimi_eagle3.integration import launch_record
from sglang_kimi_eagle3.status import hookstatus
from sglang.srt.plugins.hook_registry import HookRegistry
from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker
refresh_status()
target = "sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_decode"
launch_record._OURS[0] = True
calls = []
D.ACTIVE[0] = False  # not deferring: the hook hands the call on; the clock times it inside an open interval
C._OPEN["t0"] = 0.0
import types
batch = types.SimpleNamespace(forward_mode=types.SimpleNamespace(is_idle=lambda: False), seq_lens=None)
try:
    EagleDraftWorker._draft_extend_for_decode(types.SimpleNamespace(), batch, None)
except Exception as e:
    calls.append(type(e).__name__)
print(json.dumps({"queued": [h.__module__ for _t, h, _s in HookRegistry._hooks.get(target, [])],
                  "rows": {n: hookstatus.get(n).state for n in (D.NAME, "step_clock_draft_extend")},
                  "extend_timed": C._OPEN["extend"] > 0, "calls": calls}))
"""


@pytest.mark.slow
def test_with_the_step_clock_one_around_of_ours_wraps_sglangs_extend():
    """The default launch puts both the deferral and the step clock's timing on SGLang's draft extend: one AROUND
    (SGLang logs a warning on stderr at every plugin load for several on one target), both rows applied, the clock
    outermost, SGLang's extend reached through both."""
    from helpers import run_python

    cp = run_python(ONE_AROUND)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "Multiple AROUND hooks" not in cp.stderr, cp.stderr[-3000:]
    import json

    out = json.loads(cp.stdout.strip().splitlines()[-1])
    assert out["queued"] == ["sglang_kimi_eagle3.integration.registry"], out  # the one dispatcher
    assert out["rows"] == {hook.NAME: "applied", "step_clock_draft_extend": "applied"}, out
    assert out["extend_timed"] and out["calls"] == ["AttributeError"], out  # SGLang's own extend ran (and refused the stand-in)


def test_a_bad_step_count_is_one_line_at_check_and_a_failed_row_at_launch(monkeypatch):
    from sglang_kimi_eagle3.base import ENV_DEFER_STEPS, ENV_OFFSTATE_EXTEND, env_errors

    monkeypatch.setenv(ENV_DEFER_STEPS, "100")
    assert [e for e in env_errors() if ENV_DEFER_STEPS in e] == [
        "SGLANG_KIMI_EAGLE3_DEFER_STEPS='100': expected a whole number of steps from 2 to 64 (default 8)"]
    monkeypatch.setenv(ENV_OFFSTATE_EXTEND, "defer")
    monkeypatch.setattr(hook.registry, "register", lambda *a: pytest.fail("queued with a bad step count"))
    hook.reset()
    hook.install()
    row = hookstatus.get(hook.NAME)
    assert row.state == "failed" and "from 2 to 64" in row.detail
    monkeypatch.setenv(ENV_DEFER_STEPS, "4")
    assert not [e for e in env_errors() if ENV_DEFER_STEPS in e]
