"""PR 03: anchored edits to SGLang's own files (applied by `sglang-kimi-eagle3 upstream export`).

Each edit: file (path in SGLang's repo), anchor (an exact snippet that must occur exactly once),
and one of before / after / replace. A missing or repeated anchor stops the export (exit 2).
This file is data: it imports nothing.
"""

WORKER = "python/sglang/srt/speculative/eagle_worker_v2.py"

EDITS = [
    {
        "file": WORKER,
        "anchor": "from sglang.srt.speculative.pp_draft_embedding import resolve_draft_embed_and_head\n",
        "before": "from sglang.kernels.ops.speculative.draft_topk import draft_probs_topk_dispatch\n",
    },
    {
        "file": WORKER,
        "anchor": "    fast_topk,\n    get_available_gpu_memory,\n",
        "replace": "    get_available_gpu_memory,\n",
    },
    {
        "file": WORKER,
        "anchor": "from sglang.srt.utils.common import (\n",
        "before": "from sglang.srt.utils.common import fast_topk as _torch_fast_topk\n",
    },
    {
        "file": WORKER,
        "anchor": "logger = logging.getLogger(__name__)\n",
        "after": '''
# The draft's top-k (topk > 1) over its probabilities: one Triton launch where it was measured to win
# over torch.topk, torch.topk elsewhere (kernels/ops/speculative/draft_topk.py).
_draft_probs_topk = draft_probs_topk_dispatch(_torch_fast_topk)


def fast_topk(values, topk, dim):
    if dim in (-1, values.ndim - 1) and topk > 1:
        return _draft_probs_topk(values, topk)
    return _torch_fast_topk(values, topk, dim)
''',
    },
    {
        "file": "python/sglang/srt/environ.py",
        "anchor": "    SGLANG_SPEC_EXPANSION_SAFETY_FACTOR = EnvInt(2)\n",
        "after": "    SGLANG_SPEC_DRAFT_TOPK_BACKEND = EnvStr(\"auto\")  # auto | triton | torch\n",
    },
]
