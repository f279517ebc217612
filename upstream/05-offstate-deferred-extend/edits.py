"""PR 05: anchored edits to SGLang's own files (applied by `sglang-kimi-eagle3 upstream export`).

Each edit: file (path in SGLang's repo), anchor (an exact snippet that must occur exactly once),
and one of before / after / replace. A missing or repeated anchor stops the export (exit 2).
This file is data: it imports nothing. PR 03 edits the same worker file (its imports and
`fast_topk`); none of these anchors overlaps its edits.
"""

WORKER = "python/sglang/srt/speculative/eagle_worker_v2.py"

EDITS = [
    {
        "file": WORKER,
        "anchor": "import contextlib\nimport logging\nimport time\n",
        "replace": "import contextlib\nimport functools\nimport logging\nimport time\n",
    },
    {
        "file": WORKER,
        "anchor": "from sglang.srt.speculative.dp_spec_prefill_coordination import (\n",
        "before": "from sglang.srt.speculative.deferred_draft_extend import DeferredDraftExtend\n",
    },
    {
        "file": WORKER,
        "anchor": "    @property\n    def last_shared_read_runner(self):\n",
        "before": '''    @functools.cached_property
    def deferred_draft_extend(self) -> DeferredDraftExtend:
        # Adaptive steps 0: SGLANG_SPEC_DEFER_ZERO_STEP_DRAFT_EXTEND defers the
        # draft extend and runs it K steps at once. Built on first use, so that
        # subclasses which skip this class's __init__ have one too.
        return DeferredDraftExtend(self._draft_worker)

''',
    },
    {
        # A step up with steps-0 rows stashed: extend them before the first draft,
        # which then starts from their outputs instead of the zeroed stubs.
        "file": WORKER,
        "anchor": "            elif self.speculative_num_steps == 0:\n"
                  "                # Drafting disabled (high batch size). _draft_extend below still\n"
                  "                # runs, keeping draft KV warm for when the batch shrinks.\n"
                  "                verify_input = self._build_trivial_verify_input(batch)\n"
                  "            else:\n",
        "after": '''                if self.deferred_draft_extend.pending:
                    # A step up: the deferred steps-0 rows are extended first,
                    # and this draft starts from their exact outputs.
                    with (
                        draft_tp_context(self.draft_worker.parallel_layout),
                        speculative_moe_backend_context(),
                        speculative_moe_a2a_backend_context(),
                        spec_stage_span("draft_extend"),
                    ):
                        self.deferred_draft_extend.flush(batch, restore=True)
''',
    },
    {
        # At steps 0 the extend may be deferred; any other extend reads a complete
        # draft KV (a pending stash is flushed first).
        "file": WORKER,
        "anchor": "                    self.draft_worker._draft_extend_for_decode(\n"
                  "                        batch, batch_output, kv_loc_plan=verify_input.kv_loc_plan\n"
                  "                    )\n",
        "replace": '''                    if not self.deferred_draft_extend.defer(batch, batch_output):
                        self.draft_worker._draft_extend_for_decode(
                            batch, batch_output, kv_loc_plan=verify_input.kv_loc_plan
                        )
''',
    },
    {
        "file": "python/sglang/srt/environ.py",
        "anchor": "    SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND = EnvBool(False)\n",
        "after": "    # Defer that draft_extend instead, exactly (one-layer EAGLE-3 chains): K >= 2\n"
                 "    # stashes the steps=0 rows and extends K steps of them in one draft forward,\n"
                 "    # and before any other draft forward; a step up drafts from exact state.\n"
                 "    SGLANG_SPEC_DEFER_ZERO_STEP_DRAFT_EXTEND = EnvInt(0)\n",
    },
]
