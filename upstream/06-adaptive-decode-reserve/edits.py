"""PR 06: anchored edits to SGLang's own files (applied by `sglang-kimi-eagle3 upstream export`).

Each edit: file (path in SGLang's repo), anchor (an exact snippet that must occur exactly once),
and one of before / after / replace. A missing or repeated anchor stops the export (exit 2).
This file is data: it imports nothing. PR 03 and PR 05 edit eagle_worker_v2.py and PR 05
environ.py too; none of these anchors overlaps their edits.
"""

PARAMS = "python/sglang/srt/speculative/adaptive_spec_params.py"
STATE = "python/sglang/srt/speculative/adaptive_runtime_state.py"
SIZING = "python/sglang/srt/mem_cache/allocation_sizing.py"
WORKER = "python/sglang/srt/speculative/eagle_worker_v2.py"

EDITS = [
    # -- the policy: which steps a decode batch prepared now can run at --------------------
    {
        "file": PARAMS,
        "anchor": "from functools import cached_property\n",
        "before": "from collections import deque\n",
    },
    {
        "file": PARAMS,
        "anchor": "from sglang.srt.runtime_context import attn_dp_enabled_of\n",
        "before": "from sglang.srt.environ import envs\n",
    },
    {
        "file": PARAMS,
        "anchor": "        self._cuda_graph_bs: list[int] | None = None\n",
        "after": '''        # The decode KV reserve (SGLANG_SPEC_ADAPTIVE_RESERVE_FOLLOWS_STEPS): the
        # steps of the latest two decode forwards (one may still be in flight, its
        # tokens not committed) and the step ups waiting a verified batch
        # (slot -> steps).
        self._ran: deque[int] = deque(maxlen=2)
        self._armed: dict[int, int] = {}
''',
    },
    {
        "file": PARAMS,
        "anchor": '''        params = self._route(batch_size)
        if params.update(num_correct_drafts_per_req):
            return params.current_steps
        return None
''',
        "replace": '''        # Step ups armed at the previous verify: a batch has been prepared with
        # their KV reserve since, so they may run now.
        armed, self._armed = self._armed, {}
        for bs, steps in armed.items():
            self._slots[bs].current_steps = steps
        key = self._find_closest_bs(self._pad_to_cuda_graph_bs(batch_size))
        params = self._slots[key]
        old_steps = params.current_steps
        level = self._level(key)
        if params.update(num_correct_drafts_per_req):
            if (
                envs.SGLANG_SPEC_ADAPTIVE_RESERVE_FOLLOWS_STEPS.get()
                and params.current_steps > level
            ):
                # The overlap scheduler may have prepared this slot's next batch
                # with the reserve of the old level (it can process a result between
                # preparing a batch and launching it): wait one verified batch.
                self._armed[key] = params.current_steps
                params.current_steps = old_steps
                return None
            return params.current_steps
        return params.current_steps if key in armed else None

    def note_forward(self, steps: int) -> None:
        """A decode batch is about to run at *steps* (the worker took its state)."""
        self._ran.append(int(steps))

    def reserve_steps(self, batch_size: int | None = None) -> int | None:
        """The largest steps a decode batch of *batch_size* prepared now, or the
        batch still in flight, can run at: its slot's steps and step up waiting
        (every slot's when the size is not known), and the latest two decode
        forwards' steps. None before the first decode forward (start-up sizing
        keeps the largest candidate)."""
        if not self._ran:
            return None
        if batch_size is None:
            return max(self._level(key) for key in self._slots)
        bs = self._pad_to_cuda_graph_bs(batch_size)
        return self._level(self._find_closest_bs(bs))

    def _level(self, key: int) -> int:
        armed = [self._armed[key]] if key in self._armed else []
        return max([self._slots[key].current_steps, *armed, *self._ran])
''',
    },
    # -- the controller records each decode forward's steps ---------------------------------
    {
        "file": STATE,
        "anchor": '''        target = self.params.get_steps_for_batch(batch_size)
        if target != self.worker.speculative_num_steps:
            self._activate(target)
''',
        "after": '''        note_forward = getattr(self.params, "note_forward", None)
        if note_forward is not None:
            note_forward(self.worker.speculative_num_steps)
''',
    },
    # -- the scheduler's reserve asks the policy ----------------------------------------------
    {
        "file": SIZING,
        "anchor": '''def get_alloc_reserve_per_decode() -> int:
    """KV length reserved per request at each decode step.

    The 2x is a double-buffer that absorbs the kv_committed_len lag in overlap
    mode; see eagle_utils.eagle_prepare_for_decode.
    """
    return 2 * get_alloc_len_per_decode()
''',
        "replace": '''# Adaptive speculative decoding (topk 1) registers its policy's reserve_steps here
# (SGLANG_SPEC_ADAPTIVE_RESERVE_FOLLOWS_STEPS): batch size or None -> the largest
# steps a batch prepared now can run at, or None for the largest candidate's.
_adaptive_reserve_steps = None


def set_adaptive_reserve_steps(fn) -> None:
    global _adaptive_reserve_steps
    _adaptive_reserve_steps = fn


def get_alloc_reserve_per_decode(batch_size: int | None = None) -> int:
    """KV length reserved per request at each decode step.

    The 2x is a double-buffer that absorbs the kv_committed_len lag in overlap
    mode; see eagle_utils.eagle_prepare_for_decode. Under adaptive speculative
    decoding the largest candidate's steps size it unless the policy registered
    reserve_steps: then the steps a batch of batch_size can run at (2 x (steps + 1)
    at topk 1), never more than the largest candidate's.
    """
    reserve = 2 * get_alloc_len_per_decode()
    if _adaptive_reserve_steps is not None:
        steps = _adaptive_reserve_steps(batch_size)
        if steps is not None:
            return min(reserve, 2 * (steps + 1))
    return reserve
''',
    },
    {
        "file": "python/sglang/srt/managers/schedule_batch.py",
        "anchor": "        reserve = get_alloc_reserve_per_decode()\n        total = 0\n",
        "replace": "        reserve = get_alloc_reserve_per_decode(len(requests))\n        total = 0\n",
    },
    {
        "file": "python/sglang/srt/speculative/eagle_utils.py",
        "anchor": "    double_alloc = get_alloc_reserve_per_decode()\n",
        "replace": "    double_alloc = get_alloc_reserve_per_decode(len(batch.reqs))\n",
    },
    # -- the worker registers it ----------------------------------------------------------------
    {
        "file": WORKER,
        "anchor": "from sglang.srt.mem_cache.kv_loc_plan import KVLocPlan\n",
        "before": "from sglang.srt.mem_cache.allocation_sizing import set_adaptive_reserve_steps\n",
    },
    {
        "file": WORKER,
        "anchor": '''                self.adaptive_controller.init_states(
                    cuda_graph_bs=(
                        None
                        if check_cuda_graph_backend(Phase.DECODE, Backend.DISABLED)
                        else get_exec().graph.cuda_graph_bs_decode
                    ),
                )
''',
        "after": '''            # The decode KV reserve follows the states that can run, where this
            # process's scheduler alone sizes the KV (one pipeline stage).
            if (
                envs.SGLANG_SPEC_ADAPTIVE_RESERVE_FOLLOWS_STEPS.get()
                and get_parallel().pp_size == 1
            ):
                set_adaptive_reserve_steps(
                    self.adaptive_controller.params.reserve_steps
                )
''',
    },
    {
        "file": "python/sglang/srt/environ.py",
        "anchor": "    SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND = EnvBool(False)\n",
        "after": "    # Adaptive spec: the decode KV reserve follows the steps a batch can run at\n"
                 "    # (2 x (steps + 1) per request; 2 at steps 0) instead of the largest\n"
                 "    # candidate's at every state; a step up waits one verified batch for it.\n"
                 "    SGLANG_SPEC_ADAPTIVE_RESERVE_FOLLOWS_STEPS = EnvBool(False)\n",
    },
]
