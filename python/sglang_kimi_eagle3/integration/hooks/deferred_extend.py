"""Hook: the off-state's draft extend deferred, exactly, for a one-layer drafter (the default,
SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=defer; `keep` or `skip` turn it off).

Upstream target (sglang 0.5.23, through HookRegistry):
  sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_decode   AROUND
Why: at steps 0 SGLang runs one draft forward per decode step over every request's new token, so that the draft KV
  and the last hidden state are current when a slot steps up again. On an H100 (2026-12-05, the deployment-shaped
  pair on Marlin) the off-state's step was 1.044-1.055x plain decoding's, both GPU-bound: GPU work, of which the
  per-step extend is the likely part (the pair's modelled draft / target step ratio is 0.05).
How: for a one-layer EAGLE-3 drafter (SGLang's LlamaForCausalLMEagle3: embedding, fc over the target's captured
  layers, two norms, qkv_proj, rope, KV write) the draft KV a row writes depends on that row's own inputs only (its
  token, the target's hidden state, its position); the attention over the context and all after it feed only the
  row's outputs (the hidden state and top-k a next draft starts from), which the off-state never reads. So while
  every slot of the process is at steps 0 (planner/adaptive_control.OffSkip, as for `skip`), each step's rows are
  stashed (the verified token, the captured hidden state cloned out of its CUDA-graph buffer, the request's pool
  index and position) and the step's extend outputs are stubbed as SGLang's own skip flag stubs them; every K steps
  (SGLANG_KIMI_EAGLE3_DEFER_STEPS, 8), and before anything else runs the extend (a step up, whose two primed
  batches then extend normally over a complete draft KV), the stashed rows are extended at once as M one-token rows, through SGLang's own
  `_draft_extend_for_decode` (the shape its steps-0 extend and captured graph already run), its outputs discarded;
  never more rows in one call than the server's request slots (SGLang's attention buffers are that size: a fuller
  stash is flushed first, in groups of whole steps); a step of more than half the slots is extended at once (a flush
  could hold it alone, so deferring would save no extend).
  A weight-bound drafter costs about the same over M rows as over M / K, so the off-state pays about
  1 / K of the extends. Rows are written only for requests in the launch's batch (their slots are held:
  the overlap scheduler releases a finished request's slots after the launch that still carries it); rows of
  requests gone are sent to the padding slot 0. Outputs stay exact (the target verifies every token); the draft KV
  of a request that finished may miss its last K - 1 positions in the radix cache.
Scope: our launches, with this variable; a drafter of one layer and the LlamaForCausalLMEagle3 class, topk 1, no
  rejection sampling, no DSA seeding, no mrope, no pipeline or DP-attention parallelism, no watermark; otherwise SGLang's
  extend runs every step (the row says why). On an H100 (2026-12-06): the first flush, 24 rows into a 16-slot server,
  was refused by the Triton backend's buffers and SGLang's extend took over (greedy ids equal), so no flush exceeds
  the slots; in that form (run 30, the deployment-shaped pair beside plain) at least 768 flushes of 11,112 rows ran,
  none failed, greedy ids equal plain's, and the off-state's step read 1.017x plain's against 1.052x with SGLang's
  per-step extend; run 31 (the rare-slot hold in place): deferring at 5-32 requests, 1199 flushes of 95,434 rows, the
  server 0.942 / 0.951 of plain at c 8 / 32 against 0.937 / 0.923 with the per-step extend (hence the default);
  test_deferred_extend_sglang.py (SGLang's own extend, batch preparation and TritonAttnBackend: the
  draft KV bit-equal to the per-step extend's) passes on the CPU and compiled on an H100.
  SGLANG_KIMI_EAGLE3_DEFER_FLUSH=kv (opt-in; `extend` the default): a flush writes the rows' K and V alone, with the
  drafter's own modules (embedding, fc, the two norms, qkv_proj and rope: `forward_prepare_native`) and the draft KV
  pool's `set_kv_buffer`, as the Triton backend's extend writes them; no attention, MLP or head, so no cap at the
  request slots and no step extended at once (kv_flush says where it applies: a one-layer input layer, an unscaled
  plain MHA pool with untranslated slots, the Triton backend without DCP; elsewhere the row says why and the extend
  flushes). On the CPU the same K and V as SGLang's extend through the real LlamaForCausalLMEagle3; not yet on a GPU.
Status row `deferred_extend`: registered / applied (flushes, rows, rows dropped, flushes of K and V alone, steps
  extended at once) / skipped (keep, skip, or not eligible, and why; or `upstream has it` where SGLang carries upstream
  PR 05 and defers itself) / failed (then SGLang's extend runs every step).
Remove when: SGLang defers its steps-0 draft extend itself.
"""

from __future__ import annotations

import copy

from ...base import DEFER_STEPS, ENV_DEFER_FLUSH, ENV_OFFSTATE_EXTEND, UserError, defer_steps as _defer_steps, env_choice, logger
from ...status import hookstatus
from .. import registry, upstream_has
from ..launch_record import our_launch
from . import step_clock

NAME = "deferred_extend"
TARGET = "sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_decode"

ACTIVE = [False]  # OffSkip says every slot that runs often is at steps 0: defer (set by adaptive_control's hook)
_PENDING: list = []  # stashed steps: dicts of GPU tensors (tokens, hidden, req, pos) and the host `rids`
_ELIGIBLE: dict = {}  # a sentinel: the draft worker's `_kimi_eagle3_defer_why` not yet read
_STATE = {"flushes": 0, "rows": 0, "dropped": 0, "direct": 0, "failed": None, "steps": None, "kv": 0, "flush": None}
KV_MAX_ROWS = 8192  # a K/V-only flush's rows per pass (its activations: rows x (3 + 2) x hidden; none of SGLang's buffers)


def install() -> None:
    mode = env_choice(ENV_OFFSTATE_EXTEND)
    if mode != "defer":
        hookstatus.record(NAME, TARGET, "skipped", f"{ENV_OFFSTATE_EXTEND}={mode}: not deferred")
        return
    why = upstream_has.detail(NAME)  # SGLang carries upstream PR 05: its worker defers the extend itself
    if why:
        hookstatus.record(NAME, TARGET, "skipped", f"{why}; {_upstream_on()}")
        return
    try:
        _STATE["steps"] = _defer_steps()
    except UserError as exc:  # SGLang would swallow a raise here: the row says it, SGLang's extend every step
        hookstatus.record(NAME, TARGET, "failed", f"{exc}; SGLang's draft extend every step")
        return
    try:
        _STATE["flush"] = env_choice(ENV_DEFER_FLUSH)
    except UserError as exc:
        hookstatus.record(NAME, TARGET, "failed", f"{exc}; SGLang's draft extend every step")
        return
    registry.register(NAME, TARGET, _around, "around", shared=1)  # inside step_clock's timing of the same target


UPSTREAM_ENV = "SGLANG_SPEC_DEFER_ZERO_STEP_DRAFT_EXTEND"  # upstream PR 05's switch (0: off, its default)


def apply_upstream_default() -> str | None:
    """The launch step, main process, our launch, before any scheduler starts: on an SGLang with upstream PR 05 our
    default (defer) is its variable set to the steps per flush, unless the operator set it or chose keep / skip. The
    schedulers inherit it. What was done, or None where SGLang has no PR 05 or the mode is not defer."""
    import os

    if env_choice(ENV_OFFSTATE_EXTEND) != "defer" or not upstream_has.detail(NAME):
        return None
    given = os.environ.get(UPSTREAM_ENV, "").strip()
    if given:
        return f"SGLang defers its steps-0 draft extend itself: {UPSTREAM_ENV}={given}, as the operator set it"
    os.environ[UPSTREAM_ENV] = str(defer_steps())
    return f"SGLang defers its steps-0 draft extend itself: {UPSTREAM_ENV}={defer_steps()} set for this launch"


def _upstream_on() -> str:
    """What SGLang's own deferral runs with in this process (the variable as the launch left it)."""
    import os

    given = os.environ.get(UPSTREAM_ENV, "").strip()
    if given and given != "0":
        return f"{UPSTREAM_ENV}={given}"
    return f"{UPSTREAM_ENV} unset or 0: SGLang's draft extend at every steps-0 step (set it to 8 to defer)"


def defer_steps() -> int:
    """Steps per flush: SGLANG_KIMI_EAGLE3_DEFER_STEPS as read at install (check refuses a bad value before launch)."""
    if _STATE["steps"] is None:
        try:
            _STATE["steps"] = _defer_steps()
        except UserError:
            _STATE["steps"] = DEFER_STEPS
    return _STATE["steps"]


def why_not(dw) -> str | None:
    """None where this draft worker's steps-0 extend may be deferred (row-local KV), else why not (cached)."""
    cached = getattr(dw, "_kimi_eagle3_defer_why", _ELIGIBLE)  # kept on the worker (ids of dead objects recur)
    if cached is _ELIGIBLE:
        cached = _why_not(dw)
        if cached is not None:  # said once, where an operator reads it
            hookstatus.record(NAME, TARGET, "skipped", f"not deferred: {cached}; SGLang's draft extend every step")
            hookstatus.bump()
        try:
            dw._kimi_eagle3_defer_why = cached
        except AttributeError:  # a worker that takes no attribute: asked again each time
            pass
    return cached


def _why_not(dw) -> str | None:
    try:
        from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
        from sglang.srt.runtime_context import get_parallel, get_spec

        runner = dw.draft_runner
        model = runner.model
        cfg = runner.model_config.hf_config
        if not isinstance(model, LlamaForCausalLMEagle3):
            return f"the drafter is {type(model).__name__}, not LlamaForCausalLMEagle3"
        if getattr(cfg, "num_hidden_layers", None) != 1:
            return f"the drafter has {getattr(cfg, 'num_hidden_layers', '?')} layers (row-local KV needs one)"
        if getattr(dw, "topk", None) != 1:
            return f"topk {getattr(dw, 'topk', '?')} (chains only)"
        if get_spec().speculative_use_rejection_sampling:
            return "rejection sampling"
        if getattr(dw, "seed_dsa_topk_from_draft_extend", False):
            return "DSA top-k seeding from the draft extend"
        if getattr(runner.model_config, "model_is_mrope", False):
            return "mrope positions"
        if get_parallel().pp_size > 1:
            return "pipeline parallelism"
        from sglang.srt.utils.common import require_mlp_sync

        if require_mlp_sync():
            return "DP attention (MLP sync)"
        if getattr(runner, "watermark_state", None) is not None:
            return "a watermark"
    except Exception as e:  # noqa: BLE001 - unreadable: not deferred
        return f"not readable ({type(e).__name__}: {e})"
    return None


def _around(original, dw, batch, batch_result, *args, **kwargs):
    """AROUND EagleDraftWorker._draft_extend_for_decode(self, batch, batch_result, *, kv_loc_plan=None)."""
    if _STATE["failed"] or our_launch() is False:
        return original(dw, batch, batch_result, *args, **kwargs)
    try:
        deferring = (ACTIVE[0] and getattr(dw, "speculative_num_draft_tokens", None) == 1
                     and not batch.forward_mode.is_idle() and why_not(dw) is None)
        if deferring and kv_flush(dw) is None:
            pass  # the K/V-only flush has no cap at the request slots: every step may wait for it
        elif deferring and 2 * batch.seq_lens.shape[0] > max_rows(dw):
            deferring = False  # a flush would hold this step alone: deferring saves no extend, SGLang's runs now
            _STATE["direct"] += 1
            hookstatus.record(NAME, TARGET, "applied", detail())  # the row current whenever it is read
            hookstatus.bump()
        if deferring:
            if _PENDING and _pending_rows() + batch.seq_lens.shape[0] > flush_rows(dw):
                _flush(original, dw, batch, batch_result)  # a flush never exceeds what one batch may hold
            _stash(batch, batch_result)
            if len(_PENDING) >= defer_steps():
                _flush(original, dw, batch, batch_result)
            _stub(dw, batch, batch_result)
            return None
        if _PENDING:
            _flush(original, dw, batch, batch_result)  # a complete draft KV before the extend reads it
    except Exception as e:  # noqa: BLE001 - never fail the step: SGLang's extend from here on
        _STATE["failed"] = f"{type(e).__name__}: {e}"[:300]
        _PENDING.clear()
        logger().warning("deferred draft extend off for this process: %s", _STATE["failed"])
        hookstatus.record(NAME, TARGET, "failed", f"{_STATE['failed']}; SGLang's draft extend runs every step")
        hookstatus.bump()
    return original(dw, batch, batch_result, *args, **kwargs)


def _stash(batch, batch_result) -> None:
    """This step's rows: the verified token, the target's hidden state at the verified position, the request's pool
    index and the position (the verify's seq_lens: its token sits at seq_lens)."""
    import torch

    _PENDING.append({
        "tokens": batch_result.next_token_ids.reshape(-1).to(torch.int64).clone(),
        "hidden": batch_result.logits_output.hidden_states.clone(),
        "req": batch.req_pool_indices.clone(),
        "pos": batch.seq_lens.to(torch.int64).clone(),
        # the CPU mirror where the attention backend keeps one (Triton's does not: SGLang then plans on the GPU)
        "pos_cpu": None if getattr(batch, "seq_lens_cpu", None) is None else batch.seq_lens_cpu.clone(),
        "rids": [id(r) for r in batch.reqs],
    })


def rows_alive(pending: list, reqs) -> list[bool]:
    """Per stashed row, in order: is its request in this launch's batch (its slots held)?"""
    alive = {id(r) for r in reqs}
    return [rid in alive for step in pending for rid in step["rids"]]


def max_rows(dw) -> int:
    """Rows one flush may carry: the draft runner's request slots. SGLang's attention backends size their per-batch
    buffers by it (Triton's kv_indptr holds req_to_token_pool.size + 1 entries: live on an H100, 2026-12-06, a flush of
    24 rows into a 16-slot server was refused with 'The expanded size of the tensor (16) must match ... (24)')."""
    return int(dw.draft_runner.req_to_token_pool.size)


def flush_rows(dw) -> int:
    """Rows one flush may carry: the request slots through SGLang's extend (max_rows), KV_MAX_ROWS for the K/V-only
    flush."""
    return KV_MAX_ROWS if kv_flush(dw) is None else max_rows(dw)


def kv_flush(dw) -> str | None:
    """None where this worker's flushes write the rows' K and V alone (SGLANG_KIMI_EAGLE3_DEFER_FLUSH=kv and the
    drafter and pools it needs), else why not (cached on the worker; `extend`: the default)."""
    if _STATE["flush"] != "kv":
        return f"{ENV_DEFER_FLUSH}={_STATE['flush'] or 'extend'}"
    cached = getattr(dw, "_kimi_eagle3_kv_why", _ELIGIBLE)
    if cached is _ELIGIBLE:
        cached = _kv_why_not(dw)
        if cached is not None:
            hookstatus.record(NAME, TARGET, "applied", f"{ENV_DEFER_FLUSH}=kv not used: {cached}; flushes through "
                              "SGLang's draft extend")
            hookstatus.bump()
        try:
            dw._kimi_eagle3_kv_why = cached
        except AttributeError:
            pass
    return cached


def _kv_why_not(dw) -> str | None:
    """The K/V-only flush computes a row's K and V with the drafter's own modules as SGLang's llama_eagle3 does for an
    input layer (embedding, fc over the target's layers, input_layernorm / hidden_norm, qkv_proj and rope through
    `forward_prepare_native`) and writes them with the KV pool's own `set_kv_buffer`, as the Triton backend's extend
    does: only for that drafter's layout, an unscaled plain MHA pool whose slots are physical (no id translation), the
    Triton backend without context parallelism."""
    try:
        runner = dw.draft_runner
        m = runner.model.model
        if len(m.layers) != 1 or not getattr(m.layers[0], "is_input_layer", False):
            return "the drafter's layer is not one input layer"
        layer = m.layers[0]
        for holder, attr in ((m, "embed_tokens"), (layer, "hidden_norm"), (layer, "input_layernorm"),
                             (layer, "self_attn"), (layer.self_attn, "forward_prepare_native"), (layer.self_attn, "attn")):
            if not hasattr(holder, attr):
                return f"the drafter has no {attr}"
        if getattr(m, "is_mrope_enabled", False):
            return "mrope positions"
        attn = layer.self_attn.attn
        if getattr(attn, "k_scale", None) is not None or getattr(attn, "v_scale", None) is not None:
            return "a scaled KV cache"
        pool = runner.token_to_kv_pool
        if type(pool).__name__ != "MHATokenToKVPool" or getattr(pool, "is_quantized_kv_cache", False):
            return f"the draft KV pool is {type(pool).__name__}, not a plain MHATokenToKVPool"
        if getattr(getattr(runner, "kv_index_translator", None), "is_translating", False):
            return "the draft's KV slots are translated (a unified or fused pool)"
        backend = runner.attn_backend
        if type(backend).__name__ != "TritonAttnBackend" or getattr(backend, "dcp_size", 1) != 1:
            return f"the draft's attention backend is {type(backend).__name__} (Triton's without DCP is the one checked)"
    except Exception as e:  # noqa: BLE001 - unreadable: SGLang's extend flushes
        return f"not readable ({type(e).__name__}: {e})"
    return None


def _pending_rows() -> int:
    return sum(len(s["rids"]) for s in _PENDING)


def chunks(pending: list, cap: int) -> list[list]:
    """Consecutive stashed steps grouped so that no group holds more than `cap` rows (a step holds at most `cap`)."""
    out: list[list] = []
    rows = cap + 1
    for step in pending:
        n = len(step["rids"])
        if rows + n > cap:
            out.append([])
            rows = 0
        out[-1].append(step)
        rows += n
    return out


def _flush(original, dw, batch, batch_result) -> None:
    """Extend every stashed row as one-token rows through SGLang's own draft extend, as few calls as the request
    slots allow (max_rows); outputs discarded."""
    pending = list(_PENDING)
    _PENDING.clear()
    step_clock.tag_launch("flush")  # the step clock's ledger reads the steps that flush apart
    kv = kv_flush(dw) is None
    for group in chunks(pending, flush_rows(dw)):
        if kv:
            _flush_kv(dw, batch, group)
        else:
            _flush_rows(original, dw, batch, batch_result, group)


def _flush_rows(original, dw, batch, batch_result, pending: list) -> None:
    import torch

    if not pending:
        return
    tokens, hidden, req, pos, locs, m, dropped = _rows(dw, batch, pending)
    by_id = {id(r): r for r in batch.reqs}
    any_req = batch.reqs[0]
    rows_reqs = [by_id.get(rid, any_req) for s in pending for rid in s["rids"]]

    fb = copy.copy(batch)  # the M-row batch: per-request fields per row; the real batch is not touched
    fb.seq_lens = pos.to(batch.seq_lens.dtype)
    if all(s["pos_cpu"] is not None for s in pending):  # SGLang's CPU-planned path, as the real batch takes it
        fb.seq_lens_cpu = torch.cat([s["pos_cpu"] for s in pending])
        fb.seq_lens_sum = int(fb.seq_lens_cpu.sum())
    else:  # its GPU-only path (no CPU mirror, no host sync)
        fb.seq_lens_cpu = None
        fb.seq_lens_sum = None
    fb.req_pool_indices = req
    fb.orig_seq_lens = (pos + 1).to(torch.int32)  # per row, as every per-request field of the M-row batch
    fb.out_cache_loc = locs
    fb.reqs = rows_reqs
    fb.multimodal_inputs = [None] * m
    fb.sampling_info = None
    fb.return_logprob = False
    fb.top_logprobs_nums = None
    fb.token_ids_logprobs = None
    fr = copy.copy(batch_result)  # a throwaway result: the flush's outputs never reach the real one
    fr.next_token_ids = tokens
    fr.accept_lens = torch.ones((m,), dtype=batch_result.accept_lens.dtype, device=tokens.device)
    fr.prepared_draft_extend_inputs = None
    fr.new_seq_lens = pos + 1
    fr.logits_output = copy.copy(batch_result.logits_output)
    fr.logits_output.hidden_states = hidden
    fr.next_draft_input = copy.copy(batch_result.next_draft_input)
    original(dw, fb, fr, kv_loc_plan=None)
    _STATE["flushes"] += 1
    _STATE["rows"] += m
    _STATE["dropped"] += dropped
    hookstatus.record(NAME, TARGET, "applied", detail())  # current when read (every 256th only: run 30's c-8 status said 1 flush)
    hookstatus.bump()


def _rows(dw, batch, pending: list):
    """The stashed rows of `pending`: (tokens, hidden states, positions, slots, rows, rows dropped); a row of a request
    gone from the batch goes to the padding slot 0."""
    import torch

    ok = rows_alive(pending, batch.reqs)
    m = len(ok)
    tokens = torch.cat([s["tokens"] for s in pending])
    hidden = torch.cat([s["hidden"] for s in pending])
    req = torch.cat([s["req"] for s in pending])
    pos = torch.cat([s["pos"] for s in pending])
    locs = dw.draft_runner.req_to_token_pool.req_to_token[req.long(), pos].to(torch.int64)
    dropped = m - sum(ok)
    if dropped:
        keep = torch.tensor(ok, dtype=torch.bool).to(locs.device, non_blocking=True)
        locs = torch.where(keep, locs, torch.zeros_like(locs))  # slot 0: the padding row's
    return tokens, hidden, req, pos, locs, m, dropped


def _flush_kv(dw, batch, pending: list) -> None:
    """The stashed rows' K and V, written at their slots: what SGLang's draft extend writes for them (kv_flush says
    when), without its attention, MLP, norm and head (their outputs the off-state never reads)."""
    import torch
    from sglang.srt.mem_cache.memory_pool import KVWriteLoc

    if not pending or not any(rows_alive(pending, batch.reqs)):
        return
    tokens, hidden, _req, pos, locs, m, dropped = _rows(dw, batch, pending)
    model = dw.draft_runner.model.model
    layer = model.layers[0]
    with torch.inference_mode():
        embeds = model.embed_tokens(tokens)
        h = hidden
        if h.shape[-1] != embeds.shape[-1]:  # as LlamaModel.forward (llama_eagle3): fc over the target's layers
            if getattr(model, "input_norm", None) is not None:
                h = model.input_norm(h)
            if getattr(model, "fc_norm", None) is not None:
                h = torch.cat([norm(c) for norm, c in zip(model.fc_norm, h.chunk(model.num_aux_hidden_states, dim=-1))],
                              dim=-1)
            h = model.fc(h)
        # as LlamaDecoderLayer.forward for the input layer: cat(input_layernorm(embeds), hidden_norm(hidden))
        x = torch.cat([layer.input_layernorm(embeds), layer.hidden_norm(h)], dim=-1)
        _q, k, v = layer.self_attn.forward_prepare_native(positions=pos, hidden_states=x)
        attn = layer.self_attn.attn
        k = k.view(-1, attn.tp_k_head_num, attn.qk_head_dim)
        v = v.view(-1, attn.tp_v_head_num, attn.v_head_dim)
        dw.draft_runner.token_to_kv_pool.set_kv_buffer(attn, KVWriteLoc(locs, physical=True), k, v)
    _STATE["flushes"] += 1
    _STATE["kv"] += 1
    _STATE["rows"] += m
    _STATE["dropped"] += dropped
    hookstatus.record(NAME, TARGET, "applied", detail())
    hookstatus.bump()


def detail() -> str:
    return (f"{ENV_OFFSTATE_EXTEND}=defer: the off-state's draft extend every {defer_steps()} steps as one-token rows; "
            f"{_STATE['flushes']} flushes, {_STATE['rows']} rows, {_STATE['dropped']} dropped (their requests gone); "
            + (f"{_STATE['kv']} flushes of K and V alone ({ENV_DEFER_FLUSH}=kv); " if _STATE["kv"] else "") +
            f"{_STATE['direct']} steps extended at once (over half the request slots in the batch)")


def _stub(dw, batch, batch_result) -> None:
    """The step's extend outputs as SGLang's skip flag leaves them (EAGLEWorkerV2._stub_skipped_draft_extend): zeroed
    top-k and hidden state of the right shapes, which nothing reads at steps 0 (a step up primes first)."""
    import torch
    from sglang.srt.speculative.eagle_worker_v2 import get_draft_recurrent_hidden_state_spec

    nxt = batch_result.next_draft_input
    bs = batch.seq_lens.shape[0]
    device = batch.seq_lens.device
    nxt.topk_p = torch.zeros((bs, dw.topk), dtype=torch.float32, device=device)
    nxt.topk_index = torch.zeros((bs, dw.topk), dtype=torch.int64, device=device)
    hidden_size, hidden_dtype = get_draft_recurrent_hidden_state_spec(dw.draft_runner)
    if hidden_size is not None:
        nxt.hidden_states = torch.zeros((bs, hidden_size), dtype=hidden_dtype, device=device)


def reset() -> None:
    """Tests: forget the stash, the eligibility and the counts."""
    ACTIVE[0] = False
    _PENDING.clear()
    _STATE.update(flushes=0, rows=0, dropped=0, direct=0, failed=None, steps=None, kv=0, flush=None)
