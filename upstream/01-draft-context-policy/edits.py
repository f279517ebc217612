"""PR 01: anchored edits to SGLang's own files (applied by `sglang-kimi-eagle3 upstream export`).

Each edit: file (path in SGLang's repo), anchor (an exact snippet that must occur exactly once),
and one of before / after / replace. A missing or repeated anchor stops the export (exit 2).
This file is data: it imports nothing.
"""

SPEC = "python/sglang/srt/arg_groups/fields/spec.py"
ORDER = "python/sglang/srt/arg_groups/field_order.py"
MODEL_CONFIG = "python/sglang/srt/configs/model_config.py"
SPEC_HOOK = "python/sglang/srt/arg_groups/speculative_hook.py"

EDITS = [
    # 1. the flag: a Spec field (CLI, pickled to every process, resolvable)
    {
        "file": SPEC,
        "anchor": "    speculative_draft_load_format: A[\n",
        "before": '''\
    speculative_draft_context_policy: A[
        Optional[str],
        Arg(
            help="How a draft model with fewer positions than the served context length is "
            "reconciled. 'strict': refuse (the default, unless "
            "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set). 'extend': serve the target's "
            "length, lifting only the draft's limit (outputs stay exact). 'yarn': YaRN-scale a "
            "plain-RoPE draft to the target's length. 'cap': serve the draft's length.",
            choices=["strict", "extend", "yarn", "cap"],
            resolvable=True,
        ),
    ] = None
''',
    },
    {
        "file": ORDER,
        "anchor": '    "return_aux_hidden_state_layer_ids",\n)\n',
        "replace": '    "return_aux_hidden_state_layer_ids",\n    "speculative_draft_context_policy",\n)\n',
    },
    # 2. the draft ModelConfig honours it
    {
        "file": MODEL_CONFIG,
        "anchor": "        is_draft_quantization_explicit: bool = False,\n    ) -> None:\n",
        "replace": '''\
        is_draft_quantization_explicit: bool = False,
        draft_context_policy: Optional[str] = None,
        draft_rope_margin: int = 0,
    ) -> None:
''',
    },
    {
        "file": MODEL_CONFIG,
        "anchor": "        self.is_draft_quantization_explicit = is_draft_quantization_explicit\n",
        "after": '''\
        self.draft_context_policy = draft_context_policy
        self.draft_rope_margin = draft_rope_margin
''',
    },
    {
        "file": MODEL_CONFIG,
        "anchor": "            speculative_algorithm=cfg.speculative_algorithm,\n            **kwargs,\n        )\n",
        "replace": '''\
            speculative_algorithm=cfg.speculative_algorithm,
            **_draft_context_kwargs(cfg, is_draft_model),
            **kwargs,
        )
''',
    },
    {
        "file": MODEL_CONFIG,
        "anchor": "class ModelConfig:\n",
        "before": '''\
def _draft_context_kwargs(cfg, is_draft_model: bool) -> dict:
    """The draft context policy of a launch (None: resolved from the environment)."""
    if not is_draft_model:
        return {}
    from sglang.srt.speculative.draft_context_policy import spec_rope_margin

    return {
        "draft_context_policy": cfg.speculative_draft_context_policy,
        "draft_rope_margin": spec_rope_margin(
            cfg.speculative_num_steps, cfg.speculative_num_draft_tokens
        ),
    }


''',
    },
    {
        "file": MODEL_CONFIG,
        "anchor": "        derived_context_len = get_context_length(self.hf_text_config)\n",
        "after": '''\
        if (
            is_draft_model
            and context_length is not None
            and context_length > derived_context_len
        ):
            # --speculative-draft-context-policy: extend / yarn rewrite the draft's config,
            # strict refuses naming the flag (draft_context_policy.py).
            from sglang.srt.speculative.draft_context_policy import (
                apply_draft_context_policy,
            )

            derived_context_len = apply_draft_context_policy(
                self, context_length, derived_context_len
            )
''',
    },
    # 3. resolved once, in the main process
    {
        "file": SPEC_HOOK,
        "anchor": "            algo.handle_server_args(server_args)\n",
        "after": '''\

    # The draft path and the speculative counts are final here.
    from sglang.srt.speculative.draft_context_policy import (
        resolve_draft_context_policy,
    )

    resolve_draft_context_policy(server_args)
''',
    },
]
