"""PR 04: anchored edits to SGLang's own files (applied by `sglang-kimi-eagle3 upstream export`).

Each edit: file (path in SGLang's repo), anchor (an exact snippet that must occur exactly once),
and one of before / after / replace. A missing or repeated anchor stops the export (exit 2).
This file is data: it imports nothing.
"""

BACKEND = "python/sglang/srt/layers/attention/triton_backend.py"

EDITS = [
    {
        "file": BACKEND,
        "anchor": "import contextlib\n",
        "after": "import copy\n",
    },
    {
        "file": BACKEND,
        "anchor": "    def _update_target_verify_buffers(\n",
        "before": '''    def _one_token_verify_as_decode(self, forward_batch: ForwardBatch):
        """A TARGET_VERIFY batch of exactly one token per request (EAGLE's adaptive
        steps-0 state) seen as the DECODE batch it is: a one-token query at position
        seq_lens with an all-true mask is a decode over the prefix plus the token's
        own slot (seq_lens + 1; req_to_token already holds that slot). Returns a
        shallow copy with DECODE mode, or None when the pass is not such a batch."""
        window = self.sliding_window_size
        if (
            not forward_batch.forward_mode.is_target_verify()
            or self.is_draft_runner
            or not envs.SGLANG_TRITON_ONE_TOKEN_VERIFY_AS_DECODE.get()
            or self._target_verify_num_tokens_per_req(forward_batch.spec_info) != 1
            or self.dcp_size != 1
            or self.dllm_attention is not None
            or self.enable_deterministic
            or (window is not None and window > 0)
            or self.use_verify_shared_kv
            or self.use_verify_splitkv
        ):
            return None
        view = copy.copy(forward_batch)
        view.forward_mode = ForwardMode.DECODE
        view.spec_info = None
        view.seq_lens = forward_batch.seq_lens + 1
        bs = len(forward_batch.seq_lens)
        if getattr(forward_batch, "seq_lens_sum", None) is not None:
            view.seq_lens_sum = forward_batch.seq_lens_sum + bs
        if getattr(forward_batch, "seq_lens_cpu", None) is not None:
            view.seq_lens_cpu = forward_batch.seq_lens_cpu + 1
        return view

''',
    },
    {
        "file": BACKEND,
        "anchor": "        in_capture: bool = False,\n    ):\n        if self.dllm_attention is not None:\n"
                  "            return self.dllm_attention.init_forward_metadata_out_graph(\n",
        "replace": "        in_capture: bool = False,\n    ):\n"
                   "        view = self._one_token_verify_as_decode(forward_batch)\n"
                   "        if view is not None:\n"
                   "            forward_batch = view\n"
                   "        if self.dllm_attention is not None:\n"
                   "            return self.dllm_attention.init_forward_metadata_out_graph(\n",
    },
    {
        "file": BACKEND,
        "anchor": '        """Init auxiliary variables for triton attention backend."""\n',
        "after": "        view = self._one_token_verify_as_decode(forward_batch)\n"
                 "        if view is not None:\n"
                 "            forward_batch = view\n",
    },
    {
        "file": BACKEND,
        "anchor": "        aux_tensors=None,\n    ):\n        if (\n            k is not None\n            and v is not None\n"
                  "            and sinks is None\n",
        "replace": '''        aux_tensors=None,
    ):
        if (
            forward_batch.forward_mode.is_target_verify()
            and self.forward_metadata is not None
            and self.forward_metadata.attn_logits is not None
        ):
            # Metadata built by _one_token_verify_as_decode: a one-token verify is a decode.
            return self.forward_decode(
                q,
                k,
                v,
                layer,
                forward_batch,
                save_kv_cache=save_kv_cache,
                sinks=sinks,
                score_mod=score_mod,
                aux_tensors=aux_tensors,
            )
        if (
            k is not None
            and v is not None
            and sinks is None
''',
    },
    {
        "file": "python/sglang/srt/environ.py",
        "anchor": "    SGLANG_ENABLE_SPLITKV_VERIFY = EnvBool(True)\n",
        "after": "    # Triton backend: a target verify of one token per request (adaptive steps 0)\n"
                 "    # runs as a decode over seq_lens + 1; false sends it to the extend kernel.\n"
                 "    SGLANG_TRITON_ONE_TOKEN_VERIFY_AS_DECODE = EnvBool(True)\n",
    },
]
