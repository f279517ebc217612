"""PR 02: anchored edits to SGLang's own files (applied by `sglang-kimi-eagle3 upstream export`).

Each edit: file (path in SGLang's repo), anchor (an exact snippet that must occur exactly once),
and one of before / after / replace. A missing or repeated anchor stops the export (exit 2).
This file is data: it imports nothing.
"""

EDITS = [
    # the one place every caller (eagle_utils, dflash_utils) takes the op from
    {
        "file": "python/sglang/kernels/ops/speculative/verify_sampling.py",
        "anchor": '''\
    if is_cuda():
        from sglang.kernels.ops.speculative.sampling import (
            tree_speculative_sampling_target_only,
        )
''',
        "after": '''\
        from sglang.kernels.ops.speculative.tree_sampling_triton import (
            tree_speculative_sampling_dispatch,
        )

        # Triton, parallel over the vocabulary, where it was measured to win; else the CUDA kernel
        tree_speculative_sampling_target_only = tree_speculative_sampling_dispatch(
            tree_speculative_sampling_target_only
        )
''',
    },
    {
        "file": "python/sglang/srt/environ.py",
        "anchor": "    SGLANG_SPEC_EXPANSION_SAFETY_FACTOR = EnvInt(2)\n",
        "after": "    SGLANG_SPEC_TREE_SAMPLING_BACKEND = EnvStr(\"auto\")  # auto | triton | cuda\n",
    },
]
