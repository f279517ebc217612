"""Hook: SGLang's steps-0 off-state verifies its one token per request through the Triton backend's DECODE kernels.

Upstream target: sglang/srt/layers/attention/triton_backend.py `TritonAttnBackend` (0.5.23): three methods through
  HookRegistry (AROUND): `init_forward_metadata` (eager), `init_forward_metadata_out_graph` (CUDA-graph capture and
  replay, the glue graph included) and `forward_extend` (the per-layer attention call).
Why: in adaptive mode at steps 0 (the off-state) SGLang still runs a TARGET_VERIFY pass with one token per request,
  and the Triton backend sends it through its EXTEND kernel with a custom mask. On the H200 (2026-12-03, c 128, the
  deployment-shaped pair) that kernel took 28.3 ms a step where plain decoding's attention took 6.5 ms for the same
  tokens: 21.8 of the 25 ms the off-state cost above a plain step.
How: for a target-verify pass of exactly one token per request (topk any, so steps 0; the target runner only; no
  DCP, DLLM, deterministic mode, sliding window, or the ROCm verify kernels) the metadata is built as SGLang builds
  a DECODE batch's over the prefix plus the token's own slot (`seq_lens + 1`: spec v2's verify `seq_lens` excludes the
  token, whose slot `req_to_token` already holds), and each layer's `forward_extend` calls `forward_decode`. A
  one-token query with an all-true mask at position `seq_lens` IS a decode, so the math is plain decoding's
  attention over the same KV (exact, not bit-equal to the extend kernel: reduction order). The graph buffers a
  decode needs (KV splits, attention logits) exist in every Triton backend's CUDA-graph state.
  `forward_extend` switches only when the verify metadata was built here (its `attn_logits` is set, which SGLang's
  own verify metadata never is), so capture and replay agree by construction.
Where: every batch under SGLANG_KIMI_EAGLE3_OFFSTATE=auto (the default; MIN_BS_AUTO is 1) and `on`; `off` installs
  nothing. On the H200 (2026-12-04, the deployment-shaped pair on SGLang's Marlin MoE, 1024-token contexts, three
  rotated rounds) the hooked off-state's step was 0.33-0.39x of SGLang's own at 1, 2, 4 and 8 requests (17.8 against
  53.3 ms at 1 request; plain decoding 18.8), and at c 128 its attention took 6.5 against 28.0 ms a step (2026-12-03).
  The 1.09-1.20x once read at 1 request came from 64-token contexts, where the extend kernel's walk is short. The
  batch size decided on is the one SGLang builds the metadata for: a graph's padded size at capture and at replay
  alike, so a graph is always replayed with the path it was captured with.
Scope: our launches only (EAGLE/EAGLE3 with a draft).
  Each metadata build it reroutes is counted (hookstatus.count, bucket `eager` / `graph`; a graph replay whose
  metadata prep SGLang captured in its glue graph runs no Python, so `graph` counts capture and unglued replays).
Upstream PR: upstream/04-offstate-verify-decode (the same change inside TritonAttnBackend); on an SGLang that carries
  it the three rows are `skipped (upstream has it: ...)` and nothing is registered.
Remove when: SGLang's Triton backend verifies one-token batches through its decode path.
"""

from __future__ import annotations

import copy

from ...base import ENV_OFFSTATE, OFFSTATE_MIN_BS_AUTO, offstate_min_bs
from ...status import hookstatus
from .. import registry, upstream_has
from ..launch_record import our_launch

NAME = "offstate_attention"
MIN_BS_AUTO = OFFSTATE_MIN_BS_AUTO  # the smallest batch where the hook was measured to win (above: Where)
_MIN_BS = [MIN_BS_AUTO]  # set by install() from SGLANG_KIMI_EAGLE3_OFFSTATE (base.offstate_min_bs)
CLS = "sglang.srt.layers.attention.triton_backend.TritonAttnBackend"
TARGETS = {  # status row -> method
    NAME: f"{CLS}.forward_extend",
    f"{NAME}_metadata": f"{CLS}.init_forward_metadata",
    f"{NAME}_graph": f"{CLS}.init_forward_metadata_out_graph",
}


def install() -> None:
    min_bs = offstate_min_bs()
    why = (f"{ENV_OFFSTATE}=off: SGLang's extend kernel verifies the off-state" if min_bs is None
           else upstream_has.detail(NAME))  # SGLang carries upstream PR 04: its own backend does this
    _MIN_BS[0] = min_bs or MIN_BS_AUTO
    if why:
        for name, target in TARGETS.items():
            hookstatus.record(name, target, "skipped", why)
        return
    registry.register(NAME, TARGETS[NAME], _forward_extend, "around")
    registry.register(f"{NAME}_metadata", TARGETS[f"{NAME}_metadata"], _init_metadata, "around")
    registry.register(f"{NAME}_graph", TARGETS[f"{NAME}_graph"], _init_metadata_out_graph, "around")


def one_token_verify(backend, forward_batch) -> bool:
    """True for the pass this hook reroutes: a target-verify batch of one token per request, of at least _MIN_BS
    requests (padded lanes counted, as the metadata is built for them), that SGLang's Triton backend would send
    through its extend kernel, in one of our launches."""
    mode = forward_batch.forward_mode
    if not mode.is_target_verify() or getattr(backend, "is_draft_runner", True):
        return False
    if len(forward_batch.seq_lens) < _MIN_BS[0]:
        return False
    if backend._target_verify_num_tokens_per_req(forward_batch.spec_info) != 1:
        return False
    window = getattr(backend, "sliding_window_size", None)
    if (getattr(backend, "dcp_size", 1) != 1 or getattr(backend, "dllm_attention", None) is not None
            or getattr(backend, "enable_deterministic", False) or (window is not None and window > 0)
            or getattr(backend, "use_verify_shared_kv", False) or getattr(backend, "use_verify_splitkv", False)):
        return False
    return our_launch() is not False


def decode_view(forward_batch):
    """The same batch as SGLang's decode metadata sees one: DECODE mode, no spec input, each request's length with
    its verify token (seq_lens + 1; a graph replay's padded lanes read one slot more of their dummy row)."""
    view = copy.copy(forward_batch)
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    view.forward_mode = ForwardMode.DECODE
    view.spec_info = None
    view.seq_lens = forward_batch.seq_lens + 1
    n = len(forward_batch.seq_lens)
    if getattr(forward_batch, "seq_lens_sum", None) is not None:
        view.seq_lens_sum = forward_batch.seq_lens_sum + n
    if getattr(forward_batch, "seq_lens_cpu", None) is not None:
        view.seq_lens_cpu = forward_batch.seq_lens_cpu + 1
    return view


def _rerouting(bucket: str):
    """The AROUND wrapper of one metadata builder: a one-token verify goes in as its decode view, counted."""
    def wrapper(original, backend, forward_batch, *args, **kwargs):
        if not one_token_verify(backend, forward_batch):
            return original(backend, forward_batch, *args, **kwargs)
        out = original(backend, decode_view(forward_batch), *args, **kwargs)
        hookstatus.count(NAME, "ours", bucket)
        return out
    return wrapper


_init_metadata = _rerouting("eager")  # init_forward_metadata (eager passes)
_init_metadata_out_graph = _rerouting("graph")  # init_forward_metadata_out_graph (capture, replay)


def _forward_extend(original, backend, q, k, v, layer, forward_batch, *args, **kwargs):
    meta = backend.forward_metadata
    if meta is not None and meta.attn_logits is not None and forward_batch.forward_mode.is_target_verify():
        return backend.forward_decode(q, k, v, layer, forward_batch, *args, **kwargs)
    return original(backend, q, k, v, layer, forward_batch, *args, **kwargs)
