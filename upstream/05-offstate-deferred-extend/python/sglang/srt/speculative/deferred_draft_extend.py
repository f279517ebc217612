"""Deferred draft extend for EAGLE's adaptive steps 0 (the off-state).

At ``speculative_num_steps == 0`` the EAGLE worker verifies one token per
request and still runs one draft extend per step, only so that the draft KV
cache is complete when drafting resumes. For a one-layer EAGLE-3 drafter
(``LlamaForCausalLMEagle3``: embedding, fc over the target's hidden states,
norms, qkv projection, rope, KV write) the K and V a row writes depend on that
row alone (its token, the target's hidden state, its position); attention only
reads the cache and feeds the row's own outputs. So the rows of K steps can be
stashed and extended later as one-token rows, in one call of the draft worker's
own ``_draft_extend_for_decode``: the backend writes every row's K and V before
it attends, so each row sees the same prefix as in the per-step extend and the
draft KV and each row's outputs are the same.

With ``SGLANG_SPEC_DEFER_ZERO_STEP_DRAFT_EXTEND=K`` (K >= 2) the worker

* at steps 0 stashes each step's rows and stubs its outputs as
  ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND`` does (nothing reads them while
  at steps 0), flushing every K steps;
* flushes first wherever a draft extend runs un-deferred, so that it reads a
  complete draft KV;
* at a step up flushes before the first draft, and gives the requests of the
  last stashed step their exact top-k and hidden state in ``batch.spec_info``.

A flush never carries more rows than the request slots (the attention backends
size their per-batch buffers by them), in groups of whole steps; a step of
more than half the slots is extended at once (deferring it saves no extend).
Rows of requests no longer in the batch go to the padding slot 0: their
req_to_token row may be another request's by then. The draft KV of a request
that finished may therefore miss its last K - 1 positions in the radix cache
(draft quality only: the target verifies every token).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple

import torch

from sglang.srt.environ import envs
from sglang.srt.layers.logits_processor import LogitsProcessorOutput
from sglang.srt.managers.utils import GenerationBatchResult
from sglang.srt.runtime_context import get_parallel, get_schedule, get_spec
from sglang.srt.speculative.eagle_info import EagleDraftInput
from sglang.srt.speculative.eagle_utils import get_draft_recurrent_hidden_state_spec
from sglang.srt.utils.common import require_mlp_sync

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req, ScheduleBatch
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker

logger = logging.getLogger(__name__)

_UNCHECKED = object()


def _row_keys(batch: ScheduleBatch) -> List[Tuple[int, int]]:
    """(id of the request, its req_to_token row) for each request of the batch.

    The row is part of the key: a request retracted and admitted again holds
    another row, and its stashed rows must not be written through the old one.
    """
    rows = batch.req_pool_indices_cpu
    rows = [-1] * len(batch.reqs) if rows is None else rows.tolist()
    return [(id(req), row) for req, row in zip(batch.reqs, rows)]


@dataclass
class _StashedStep:
    """One deferred steps-0 step: one row per request, in batch order."""

    tokens: torch.Tensor  # (bs,) int64: the verified token
    hidden_states: torch.Tensor  # (bs, hidden): the target's hidden state of it
    req_pool_indices: torch.Tensor  # (bs,)
    positions: torch.Tensor  # (bs,) int64: the token's position (the verify's seq_lens)
    positions_cpu: Optional[torch.Tensor]
    reqs: List[Req]  # held, so that their ids stay theirs while stashed
    keys: List[Tuple[int, int]]


def _whole_step_groups(
    steps: List[_StashedStep], max_rows: int
) -> List[List[_StashedStep]]:
    """Consecutive steps grouped so that no group holds more than max_rows rows
    (a step holds at most max_rows: larger ones are never stashed)."""
    groups: List[List[_StashedStep]] = []
    rows = max_rows + 1
    for step in steps:
        if rows + len(step.keys) > max_rows:
            groups.append([])
            rows = 0
        groups[-1].append(step)
        rows += len(step.keys)
    return groups


class DeferredDraftExtend:
    """The stash and the flush of one EAGLE worker's deferred steps-0 draft extend."""

    def __init__(self, draft_worker: Optional[EagleDraftWorker]):
        self.draft_worker = draft_worker
        self.pending: List[_StashedStep] = []
        # The draft worker's draft-extend resources at steps 0, taken at each
        # stash: a flush after a step up runs on them, not on the new state's.
        self._steps0_resources: Optional[tuple] = None
        self._why_not = _UNCHECKED
        self.num_flushes = 0
        self.num_rows = 0
        self.num_dropped_rows = 0
        self.num_steps_extended_at_once = 0

    @staticmethod
    def steps_per_flush() -> int:
        return envs.SGLANG_SPEC_DEFER_ZERO_STEP_DRAFT_EXTEND.get()

    @property
    def num_pending_rows(self) -> int:
        return sum(len(step.keys) for step in self.pending)

    def max_rows(self) -> int:
        """Rows one flush may carry: the request slots, which size the attention
        backends' per-batch buffers (Triton's kv_indptr has size + 1 entries)."""
        return int(self.draft_worker.draft_runner.req_to_token_pool.size)

    def why_not(self) -> Optional[str]:
        """None where the steps-0 extend may be deferred, else why not (said once)."""
        if self._why_not is _UNCHECKED:
            self._why_not = self._check()
            if self._why_not is None:
                logger.info(
                    "Deferring the steps-0 draft extend: %d steps per flush.",
                    self.steps_per_flush(),
                )
            else:
                logger.info(
                    "SGLANG_SPEC_DEFER_ZERO_STEP_DRAFT_EXTEND is set, but the draft "
                    "extend runs every step: %s.",
                    self._why_not,
                )
        return self._why_not

    def _check(self) -> Optional[str]:
        # A model module: imported on first use only.
        from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3

        dw = self.draft_worker
        runner = dw.draft_runner
        num_layers = getattr(runner.model_config.hf_config, "num_hidden_layers", None)
        if not isinstance(runner.model, LlamaForCausalLMEagle3):
            name = type(runner.model).__name__
            return f"the drafter is {name}, not LlamaForCausalLMEagle3"
        if num_layers != 1:
            return f"the drafter has {num_layers} layers (row-local draft KV needs one)"
        if dw.topk != 1:
            return f"topk {dw.topk} (chains only)"
        if get_spec().speculative_use_rejection_sampling:
            return "rejection sampling"
        if dw.seed_dsa_topk_from_draft_extend:
            return "DSA top-k seeded from the draft extend"
        if runner.model_config.model_is_mrope:
            return "mrope positions"
        if get_parallel().pp_size > 1:
            return "pipeline parallelism"
        if require_mlp_sync():
            return "DP attention (MLP sync)"
        if getattr(runner, "watermark_state", None) is not None:
            return "a watermark"
        if get_schedule().enable_mixed_chunk:
            # A mixed batch's draft extend reads its decode requests' draft KV.
            return "mixed chunked prefill"
        return None

    def defer(self, batch: ScheduleBatch, batch_result: GenerationBatchResult) -> bool:
        """Called where the worker runs a decode step's draft extend.

        At steps 0, enabled and eligible: stashes the step's rows, flushes every
        K steps, stubs the step's outputs and returns True (the caller skips the
        extend). Otherwise flushes any stash, so that the extend the caller then
        runs reads a complete draft KV, and returns False.
        """
        steps = self.steps_per_flush()
        dw = self.draft_worker
        bs = batch.seq_lens.shape[0]
        deferring = (
            steps >= 2
            and dw is not None
            and dw.speculative_num_steps == 0
            and dw.speculative_num_draft_tokens == 1
            and not batch.forward_mode.is_idle()
            and self.why_not() is None
        )
        if deferring and 2 * bs > self.max_rows():
            # A flush could hold this step alone: deferring it saves no extend.
            deferring = False
            self.num_steps_extended_at_once += 1
        if not deferring:
            if self.pending:
                self.flush(batch)
            return False
        if self.pending and self.num_pending_rows + bs > self.max_rows():
            self.flush(batch)
        self._stash(batch, batch_result)
        if len(self.pending) >= steps:
            self.flush(batch)
        self._stub(batch, batch_result)
        return True

    def flush(self, batch: ScheduleBatch, restore: bool = False) -> None:
        """Extend every stashed row as a one-token row, in as few draft extends
        as the request slots allow (groups of whole steps).

        restore: the requests of ``batch`` that were in the last stashed step get
        their row's outputs (top-k and hidden state) in ``batch.spec_info`` in
        place of the stubs, so the first draft after a step up starts from them.
        """
        steps, self.pending = self.pending, []
        if not steps:
            return
        groups = _whole_step_groups(steps, self.max_rows())
        result = None
        with self._steps0_extend():
            for group in groups:
                result = self._extend_rows(batch, group)
        if restore and result is not None:
            self._restore(batch, groups[-1], result)

    def _stash(self, batch: ScheduleBatch, batch_result: GenerationBatchResult) -> None:
        dw = self.draft_worker
        self._steps0_resources = (
            dw.speculative_num_draft_tokens,
            dw.draft_extend_attn_backend,
            dw.cuda_graph_runner_for_draft_extend,
            dw.draft_runner.attn_backend,
        )
        seq_lens_cpu = batch.seq_lens_cpu
        self.pending.append(
            _StashedStep(
                tokens=batch_result.next_token_ids.reshape(-1).to(torch.int64).clone(),
                # May live in a CUDA-graph output buffer: copied out.
                hidden_states=batch_result.logits_output.hidden_states.clone(),
                req_pool_indices=batch.req_pool_indices.clone(),
                positions=batch.seq_lens.to(torch.int64).clone(),
                positions_cpu=None if seq_lens_cpu is None else seq_lens_cpu.clone(),
                reqs=list(batch.reqs),
                keys=_row_keys(batch),
            )
        )

    @contextlib.contextmanager
    def _steps0_extend(self) -> Iterator[None]:
        """The draft-extend resources of steps 0 on the draft worker, put back
        after: at a step up the adaptive switch has already replaced them."""
        dw = self.draft_worker
        runner = dw.draft_runner
        saved = (
            dw.speculative_num_draft_tokens,
            dw.draft_extend_attn_backend,
            dw.cuda_graph_runner_for_draft_extend,
            runner.attn_backend,
        )
        (
            dw.speculative_num_draft_tokens,
            dw.draft_extend_attn_backend,
            dw.cuda_graph_runner_for_draft_extend,
            runner.attn_backend,
        ) = self._steps0_resources
        try:
            yield
        finally:
            (
                dw.speculative_num_draft_tokens,
                dw.draft_extend_attn_backend,
                dw.cuda_graph_runner_for_draft_extend,
                runner.attn_backend,
            ) = saved

    def _extend_rows(
        self, batch: ScheduleBatch, steps: List[_StashedStep]
    ) -> Optional[GenerationBatchResult]:
        """One draft extend of the stashed rows of `steps` (M one-token rows) on a
        shallow copy of `batch`; returns its throwaway result (None when every
        row's request is gone: nothing to write)."""
        current = _row_keys(batch)
        alive_keys = set(current)
        alive = [key in alive_keys for step in steps for key in step.keys]
        num_rows = len(alive)
        num_alive = sum(alive)
        self.num_dropped_rows += num_rows - num_alive
        if num_alive == 0:
            return None

        tokens = torch.cat([step.tokens for step in steps])
        hidden_states = torch.cat([step.hidden_states for step in steps])
        req_pool_indices = torch.cat([step.req_pool_indices for step in steps])
        positions = torch.cat([step.positions for step in steps])
        req_to_token = self.draft_worker.draft_runner.req_to_token_pool.req_to_token
        out_cache_loc = req_to_token[req_pool_indices.long(), positions].to(torch.int64)
        if num_alive < num_rows:
            # A request gone since its step: its row may be another request's now.
            keep = torch.tensor(alive, dtype=torch.bool).to(
                out_cache_loc.device, non_blocking=True
            )
            out_cache_loc = torch.where(
                keep, out_cache_loc, torch.zeros_like(out_cache_loc)
            )
        req_of = dict(zip(current, batch.reqs))
        rows_reqs = [
            req_of.get(key, batch.reqs[0]) for step in steps for key in step.keys
        ]

        # The M-row batch: every per-request field per row; `batch` is not touched.
        rows_batch = copy.copy(batch)
        rows_batch.seq_lens = positions.to(batch.seq_lens.dtype)
        if all(step.positions_cpu is not None for step in steps):
            rows_batch.seq_lens_cpu = torch.cat([step.positions_cpu for step in steps])
            rows_batch.seq_lens_sum = int(rows_batch.seq_lens_cpu.sum())
        else:  # the GPU-only planning path, as the real batch takes it
            rows_batch.seq_lens_cpu = None
            rows_batch.seq_lens_sum = None
        rows_batch.req_pool_indices = req_pool_indices
        if batch.req_pool_indices_cpu is not None:
            rows_batch.req_pool_indices_cpu = torch.tensor(
                [row for step in steps for _, row in step.keys], dtype=torch.int64
            )
        rows_batch.orig_seq_lens = (positions + 1).to(torch.int32)
        rows_batch.out_cache_loc = out_cache_loc
        rows_batch.reqs = rows_reqs
        rows_batch.multimodal_inputs = [None] * num_rows
        rows_batch.sampling_info = None
        rows_batch.return_logprob = False
        rows_batch.top_logprobs_nums = None
        rows_batch.token_ids_logprobs = None

        # A throwaway result: one accepted token per row; the outputs land here.
        result = GenerationBatchResult(
            logits_output=LogitsProcessorOutput(
                next_token_logits=None, hidden_states=hidden_states
            ),
            next_token_ids=tokens,
            accept_lens=torch.ones(
                (num_rows,), dtype=torch.int32, device=tokens.device
            ),
            new_seq_lens=positions + 1,
            next_draft_input=EagleDraftInput(),
        )
        self.draft_worker._draft_extend_for_decode(rows_batch, result, kv_loc_plan=None)
        self.num_flushes += 1
        self.num_rows += num_rows
        return result

    def _restore(
        self,
        batch: ScheduleBatch,
        steps: List[_StashedStep],
        result: GenerationBatchResult,
    ) -> None:
        """batch.spec_info's top-k and hidden state rows, for the requests of the
        last stashed step, from their rows of the flush (the last of `steps`)."""
        offset = sum(len(step.keys) for step in steps[:-1])
        row_of = {key: offset + j for j, key in enumerate(steps[-1].keys)}
        dst, src = [], []
        for i, key in enumerate(_row_keys(batch)):
            if key in row_of:
                dst.append(i)
                src.append(row_of[key])
        if not dst:
            return
        device = batch.seq_lens.device
        dst = torch.tensor(dst, dtype=torch.int64, device=device)
        src = torch.tensor(src, dtype=torch.int64, device=device)
        spec_info = batch.spec_info
        outputs = result.next_draft_input
        for name in ("topk_p", "topk_index", "hidden_states"):
            rows, stubs = getattr(outputs, name), getattr(spec_info, name)
            if rows is None or stubs is None:
                continue
            restored = stubs.clone()
            restored[dst] = rows[src].to(stubs.dtype)
            setattr(spec_info, name, restored)

    def _stub(self, batch: ScheduleBatch, batch_result: GenerationBatchResult) -> None:
        """The step's outputs as EAGLEWorkerV2._stub_skipped_draft_extend leaves
        them: zeroed top-k and hidden state of the right shapes, never read at
        steps 0 (a step up flushes and restores them first)."""
        dw = self.draft_worker
        next_draft_input = batch_result.next_draft_input
        bs = batch.seq_lens.shape[0]
        device = batch.seq_lens.device
        next_draft_input.topk_p = torch.zeros(
            (bs, dw.topk), dtype=torch.float32, device=device
        )
        next_draft_input.topk_index = torch.zeros(
            (bs, dw.topk), dtype=torch.int64, device=device
        )
        hidden_size, hidden_dtype = get_draft_recurrent_hidden_state_spec(
            dw.draft_runner
        )
        if hidden_size is not None:
            next_draft_input.hidden_states = torch.zeros(
                (bs, hidden_size), dtype=hidden_dtype, device=device
            )
