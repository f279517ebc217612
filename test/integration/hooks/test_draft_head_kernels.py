"""Draft-head kernel hooks on the real installed SGLang (fresh processes, SGLang's own load_plugins()).

ours / auto-with-a-table-win: the EAGLE v2 worker module's draft_topk1_postprocess and
renorm_draft_probs, and LogitsProcessor._compute_lm_head, route through our functions; after the first
draft renorm_draft_probs call the worker's own `fast_topk` name is ours while every other holder of
SGLang's fast_topk (utils, spec_utils: MoE routing, torch.compile'd tree code) keeps SGLang's.
upstream: nothing is touched. The lm_head hook lets the target's LogitsProcessor through untouched.
"""

from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from helpers import AQ_K2_DRAFT, KIMI_K25, run_json

pytest.importorskip("sglang")

PROBE = r"""
import json, torch
from sglang.srt.plugins import load_plugins
load_plugins()
import sglang.kernels.ops.speculative.topk1 as topk1
import sglang.srt.layers.logits_processor as lp
import sglang.srt.speculative.spec_utils as su
import sglang.srt.utils as utils
import sglang.srt.utils.common as common
import sglang.srt.speculative.eagle_worker_v2 as worker
from sglang_kimi_eagle3.status import hookstatus
from sglang_kimi_eagle3.integration.hooks import draft_head_kernels as d
from sglang_kimi_eagle3.integration import refresh_status
from sglang_kimi_eagle3.integration.registry import _chain_contains
refresh_status()
res = {
    "worker_topk1": _chain_contains(worker.draft_topk1_postprocess, d._draft_topk1_postprocess),
    "topk1_module": _chain_contains(topk1.draft_topk1_postprocess, d._draft_topk1_postprocess),
    "worker_renorm": _chain_contains(worker.renorm_draft_probs, d._renorm_draft_probs),
    "lm_head": _chain_contains(lp.LogitsProcessor.__dict__["_compute_lm_head"], d._compute_lm_head),
    "topk1_wrapped": hasattr(worker.draft_topk1_postprocess, "__wrapped__"),
}
# the worker's own call: CPU logits -> SGLang's softmax; binds the worker-local top-k when hooked
probs = worker.renorm_draft_probs(torch.randn(3, 50), None, False)
res["worker_fast_topk_ours"] = worker.fast_topk is d._fast_topk
res["others_fast_topk_upstream"] = all(f is common.fast_topk and f is not d._fast_topk
                                       for f in (su.fast_topk, utils.fast_topk))
v, i = worker.fast_topk(probs, 2, dim=-1)  # CPU: handed to SGLang's
res["fast_topk_result_ok"] = torch.equal(i, torch.topk(probs, 2, dim=-1).indices)
x = torch.randn(2, 40); pos = torch.zeros(2, dtype=torch.long)
try:
    p, i = worker.draft_topk1_postprocess(x, pos)  # CPU: SGLang's Triton kernel (interpreter or not)
    res["topk1_result_ok"] = bool(torch.equal(i.flatten(), x.argmax(-1)) and pos.tolist() == [1, 1])
except Exception as exc:  # no Triton backend for CPU tensors without the interpreter
    res["topk1_result_ok"] = type(exc).__name__
res["rows"] = {r["name"]: r["state"] for r in hookstatus.as_dicts() if r["name"].startswith("draft_")}
print(json.dumps(res))
"""


@pytest.fixture(scope="module")
def probes():
    modes = ("ours", "auto", "upstream")
    with ThreadPoolExecutor(len(modes)) as pool:
        futs = {m: pool.submit(run_json, PROBE, 400, SGLANG_KIMI_EAGLE3_KERNELS=m, TRITON_INTERPRET="1") for m in modes}
        return {m: f.result() for m, f in futs.items()}


MEASURED_WITH_WINS = ()  # GPUs whose bundled draft-head table lists wins (test_auto_gate.py): none since 2026-12-01


def _expect_ours(mode):
    """ours: always; auto: only on a GPU whose table in effect lists a draft-head win (none on a CPU box)."""
    if mode != "auto":
        return mode == "ours"
    torch = pytest.importorskip("torch")
    return torch.cuda.is_available() and torch.cuda.get_device_name() in MEASURED_WITH_WINS


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ours", "auto", "upstream"])
def test_worker_references(mode, probes):
    r = probes[mode]
    ours = _expect_ours(mode)
    for key in ("worker_topk1", "topk1_module", "worker_renorm", "lm_head", "topk1_wrapped", "worker_fast_topk_ours"):
        assert r[key] is ours, (mode, key, r)
    assert r["others_fast_topk_upstream"], r  # never the target's fast_topk, in any mode
    assert r["fast_topk_result_ok"] and r["topk1_result_ok"] is True, r
    if ours:
        assert r["rows"] == {"draft_lm_head": "applied", "draft_topk1": "applied", "draft_probs": "applied",
                             "draft_worker_topk": "applied"}, r["rows"]
    else:
        assert set(r["rows"].values()) == {"skipped"} and len(r["rows"]) == 4, r["rows"]


# ---- lm_head hook: the draft only --------------------------------------------------------------


def _processor(config_dir):
    import json

    cfg = json.loads((config_dir / "config.json").read_text())
    text = cfg.get("text_config", cfg)
    return SimpleNamespace(config=SimpleNamespace(architectures=cfg.get("architectures"),
                                                  draft_vocab_size=text.get("draft_vocab_size")))


def test_lm_head_hook_detects_only_the_draft():
    from sglang_kimi_eagle3.integration.hooks.draft_head_kernels import is_draft_processor

    assert is_draft_processor(_processor(AQ_K2_DRAFT))
    assert not is_draft_processor(_processor(KIMI_K25))


def test_lm_head_hook_passes_the_target_through():
    torch = pytest.importorskip("torch")
    from sglang_kimi_eagle3.integration.hooks.draft_head_kernels import _compute_lm_head

    calls = []

    def original(self, hidden, lm_head, bias=None, *, out=None):
        calls.append(self)
        return "upstream"

    target, draft = _processor(KIMI_K25), _processor(AQ_K2_DRAFT)
    hidden = torch.zeros(2, 8, dtype=torch.bfloat16)
    head = SimpleNamespace(weight=torch.zeros(4, 8, dtype=torch.bfloat16))
    assert _compute_lm_head(original, target, hidden, head) == "upstream" and calls == [target]
    # the draft on CPU tensors is outside the fast path: upstream too (the kernel needs CUDA)
    draft.use_fp32_lm_head = False
    assert _compute_lm_head(original, draft, hidden, head) == "upstream" and calls == [target, draft]
