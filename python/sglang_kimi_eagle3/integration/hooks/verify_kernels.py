"""Hooks: our Triton tree-verification kernels at SGLang 0.5.23's own boundaries (issue 5).

Three AROUND hooks, each with SGLang's exact signature and return value; each falls through to the
original whenever our kernel does not apply (not CUDA, a case outside the fast path, or the kernel
switch says upstream for this shape, or the op's guard raises ops.arch.Unsupported - the only exception
a hook catches; any other error propagates). Every call goes through dispatch.call (the one per-call
choice) and is counted: ours, or SGLang's with the reason. Launches other than EAGLE/EAGLE3 pass through.
`SGLANG_KIMI_EAGLE3_KERNELS`: upstream -> no hook is queued (status `skipped`); ours -> ours on every
CUDA call; auto (default) -> ours only for the (op, shape) entries where this device's launch table
(ops/tables.py: e.g. ops/configs/NVIDIA_H200.verify.json) records a measured win, and a hook whose op has no
win in that table is not installed (`skipped`: no wrapper of ours on SGLang's call).
All three are CUDA-graph safe: no host sync, allocations depend on shapes only.
"""

from __future__ import annotations

from ...ops import arch, tables
from ...status import hookstatus
from .. import upstream_has
from ..dispatch import call
from . import runtime_status

shape_key = arch.tree_shape_key  # the key the launch tables and `tune` file wins under


H1, H2, H3 = (h for h in arch.KERNEL_HOOKS if h.startswith("verify_"))  # the three verify hooks, in map order

# The greedy hook's two switches live beside the op (ops/argmax_verify.HOOK_INIT / HOOK_LENS), where the kernel
# warm-up reads them too: init (torch.empty buffers, the kernel writing their starting values: no fill launches) and
# lens (the kernel writing the accept lengths: no `+ 1` launch).

_MODS: dict = {}  # op name -> its module, imported at the first call (the ops import Triton; an import statement per
# call costs ~0.6 µs); the op is read off the module on every call, so a patched module attribute is what runs
_OP_MODULES = {"argmax_verify_greedy": "argmax_verify", "verify_tree_greedy": "verify_greedy",
               "tree_speculative_sampling": "tree_sampling"}


def _module(name: str):
    """The ops module holding op `name` (imported at the first call)."""
    mod = _MODS.get(name)
    if mod is None:
        import importlib

        mod = _MODS[name] = importlib.import_module(f"...ops.{_OP_MODULES[name]}", __package__)
    return mod


def _op(name: str):
    return getattr(_module(name), name)


# --- hook 1 ---------------------------------------------------------------------------------------
# Upstream target: sglang.srt.speculative.eagle_utils.eagle_sample (eagle_utils.py:521-860).
# Why: its greedy branch runs torch.argmax over fp32 logits [bs*N, V] and then the JIT CUDA
#   verify_tree_greedy (one thread per request chasing pointers through global memory): 16 µs at
#   bs 1 and 114 µs at bs 128 on the H200 against a 79 µs floor (docs/kernels-verify.md).
# How: AROUND. When the call is the plain greedy verify (not idle, greedy per _verify_uses_greedy,
#   no penalties / logit bias / grammar mask / watermark candidates, no SGLANG_SIMULATE_ACC_LEN, not
#   HIP), run SGLang's own NaN sanitizer, then argmax_verify_greedy (split-vocab argmax feeding the
#   tree walk, target_predict never materialised) into the buffers eagle_sample would allocate (HOOK_INIT:
#   torch.empty, the kernel writing their starting values), and return the same (predict, accept_lens,
#   accept_index). Anything else -> the original.
# Upstream PR/issue: none yet (a fused argmax+verify would belong in kernels/ops/speculative).
# Removable when SGLang's greedy verify reads logits directly at the memory floor.
_SG: list = []  # [torch, eagle_utils, spec_utils, async_probe]: imported at the first call (an import statement per
# call costs about 0.5 µs each); modules, not functions, so a patched attribute is what runs


def _sglang() -> list:
    if not _SG:
        import torch
        from sglang.srt.speculative import eagle_utils, spec_utils
        from sglang.srt.utils import async_probe

        _SG.extend((torch, eagle_utils, spec_utils, async_probe))
    return _SG


def eagle_sample_hook(orig, verify_input, batch, logits_output, grammar_mask=None, uno_target_max_top_k=None, *,
                      watermark_state=None, watermark_full_mask=True):
    torch, eagle_utils, spec_utils, async_probe = _SG or _sglang()
    logits = logits_output.next_token_logits
    info = batch.sampling_info
    fast = (
        logits is not None and grammar_mask is None and not batch.forward_mode.is_idle()
        and not eagle_utils._is_hip and spec_utils.SIMULATE_ACC_LEN <= 0
        and info.acc_additive_penalties is None and info.acc_scaling_penalties is None and info.logit_bias is None
        and (watermark_state is None or not info.has_watermark_candidates)
        # SGLang's own predicate; off HIP the rejection-sampling flag does not enter it
        and eagle_utils._verify_uses_greedy(is_all_greedy=info.is_all_greedy, is_cpu=eagle_utils._is_cpu,
                                            is_hip=False, is_xpu=eagle_utils._is_xpu, use_rejection_sampling=False)
    )
    n = verify_input.draft_token_num
    bs = len(batch.seq_lens)
    why = "" if fast else "not the plain greedy verify (sampling, penalties, bias, grammar or watermark)"

    def upstream():
        return orig(verify_input, batch, logits_output, grammar_mask, uno_target_max_top_k,
                    watermark_state=watermark_state, watermark_full_mask=watermark_full_mask)

    def ours():  # our guards run before any launch: a layout we do not take goes to SGLang untouched
        av = _MODS.get("argmax_verify_greedy") or _module("argmax_verify_greedy")
        init, lens = av.HOOK_INIT, av.HOOK_LENS
        async_probe.sanitize_nan_logits(logits, "verify: target model logits")
        device = batch.device
        # the buffers eagle_sample allocates (predict zeros, accept_index -1); with init the kernel writes those
        # starting values itself, so torch.empty and no fill launch: two launches fewer than SGLang's path per verify
        if init:
            predict = torch.empty(logits.shape[0], dtype=torch.int32, device=device)
            accept_index = torch.empty((bs, verify_input.max_tree_depth), dtype=torch.int32, device=device)
        else:
            predict = torch.zeros(logits.shape[0], dtype=torch.int32, device=device)
            accept_index = torch.full((bs, verify_input.max_tree_depth), -1, dtype=torch.int32, device=device)
        num_correct_drafts = torch.empty((bs,), dtype=torch.int32, device=device)
        av.argmax_verify_greedy(predict, accept_index, num_correct_drafts, verify_input.draft_token.reshape(bs, n),
                                verify_input.retrieve_index, verify_input.retrieve_next_token,
                                verify_input.retrieve_next_sibling, logits, init=init, lens=lens)
        # with lens the buffer already holds the accept lengths (drafts accepted + 1)
        return predict, (num_correct_drafts if lens else num_correct_drafts + 1), accept_index

    return call(H1, shape_key(bs, n), logits.device if logits is not None else None, why, ours, upstream)


# --- hook 2 ---------------------------------------------------------------------------------------
# Upstream target: sglang.kernels.ops.speculative.spec_tree.verify_tree_greedy_func
#   (spec_tree.py:480-551; eagle_utils binds it by `from ... import`, HookRegistry re-binds that).
# Why: the same walk when target_predict already exists (the sparse UNO sampling path, or a greedy
#   call outside hook 1's fast path); SGLang's one-thread walk costs ~6 µs even at bs 1.
# How: AROUND; CUDA tensors and the kernel switch -> ops.verify_greedy.verify_tree_greedy on the
#   same buffers, returning (predicts, accept_index, accept_token_num) as upstream does.
# Upstream PR/issue: none yet. Removable when SGLang's kernel loads rows at once (or with hook 1).
def verify_tree_greedy_hook(orig, predicts, accept_index, accept_token_num, candidates, retrieve_index,
                            retrieve_next_token, retrieve_next_sibling, target_predict, topk=-1):
    import torch

    fits = candidates.ndim == 2 and target_predict.dtype == torch.int64 and target_predict.numel() == candidates.numel()
    bucket = shape_key(candidates.shape[0], candidates.shape[-1]) if candidates.ndim == 2 else "other"
    why = "" if fits else "layout: candidates not [bs, N] or target_predict not int64 of the same size"

    def ours():  # guards run before the launch
        verify_tree_greedy = _op("verify_tree_greedy")
        verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrieve_index, retrieve_next_token,
                           retrieve_next_sibling, target_predict.contiguous())
        return predicts, accept_index, accept_token_num

    return call(H2, bucket, candidates.device, why, ours,
                lambda: orig(predicts, accept_index, accept_token_num, candidates, retrieve_index, retrieve_next_token,
                             retrieve_next_sibling, target_predict, topk))


# --- hook 3 ---------------------------------------------------------------------------------------
# Upstream target: sglang.kernels.ops.speculative.sampling.tree_speculative_sampling_target_only
#   (sampling.py; bound by verify_sampling.py and then eagle_utils/dflash_utils, re-bound by
#   HookRegistry's propagation or read patched when imported later).
# Why: one 1024-thread block per request scans the whole 163840-entry row: 82.6 µs at bs 1.
# How: AROUND; CUDA tensors and the kernel switch -> ops.tree_sampling.tree_speculative_sampling,
#   the same walk (bit-identical accepts) with the residual draw split over the vocabulary.
# Upstream PR/issue: this project's series, upstream/02-tree-sampling-triton. Removable when SGLang's
#   sampler parallelises over the vocabulary; where the running SGLang has that PR's dispatch
#   (upstream_has.tree_sampling) the hook is not installed (`skipped`, `upstream has it: ...`).
def tree_sampling_hook(orig, predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                       retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs,
                       draft_probs, threshold_single=1.0, threshold_acc=1.0, deterministic=True):
    args = (predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
            retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs, draft_probs,
            threshold_single, threshold_acc, deterministic)
    bucket = shape_key(candidates.shape[0], candidates.shape[-1])

    def ours():  # guards run before the first launch
        return _op("tree_speculative_sampling")(*args)

    return call(H3, bucket, candidates.device, "", ours, lambda: orig(*args))


# hook -> (the target HookRegistry patches, the hook function, the sites runtime_status watches); the op each
# hook launches and the launch-table op deciding it come from ops/arch.py's one map (KERNEL_HOOKS)
VERIFY_HOOKS = {
    H1: ("sglang.srt.speculative.eagle_utils.eagle_sample", eagle_sample_hook,
         ["sglang.srt.speculative.eagle_utils:eagle_sample", "sglang.srt.speculative.eagle_worker_common:eagle_sample"]),
    H2: ("sglang.kernels.ops.speculative.spec_tree.verify_tree_greedy_func", verify_tree_greedy_hook,
         ["sglang.kernels.ops.speculative.spec_tree:verify_tree_greedy_func",
          "sglang.srt.speculative.eagle_utils:verify_tree_greedy_func"]),
    H3: ("sglang.kernels.ops.speculative.sampling.tree_speculative_sampling_target_only", tree_sampling_hook,
         ["sglang.kernels.ops.speculative.sampling:tree_speculative_sampling_target_only",
          "sglang.kernels.ops.speculative.verify_sampling:tree_speculative_sampling_target_only",
          "sglang.srt.speculative.eagle_utils:tree_speculative_sampling_target_only"]),
}
SITES = {name: sites for name, (_target, _fn, sites) in VERIFY_HOOKS.items()}
HOOKS = tuple((name, target, fn, arch.TABLE_OP[name]) for name, (target, fn, _sites) in VERIFY_HOOKS.items())


def ops_with_wins(device: tuple | None = None) -> list[str]:
    """The verify ops whose launch table in effect on `device` ((name, cc); default: this process's GPU, as the
    per-call lookup reads it) lists at least one win; under auto only their hooks are installed."""
    return tables.ops_with_wins((op for *_, op in HOOKS), device)


def install() -> None:
    """Queue the three hooks (idempotent: HookRegistry applies a target once); record each row.
    auto: a hook whose op has no win in the launch table in effect is not installed at all (`skipped`): SGLang's
    function runs with no wrapper of ours around it, as under upstream (on the H200, 2026-12-01, `auto` with
    wrappers that handed every call to SGLang's kernels still served 0.83-0.96x of `upstream` at temperature 0.7)."""
    from ..registry import register

    for name, sites in SITES.items():
        runtime_status.watch(name, sites)
    mode = arch.kernels_mode()
    wins = ops_with_wins() if mode == "auto" else None
    for name, target, fn, op in HOOKS:
        if mode == "upstream":
            hookstatus.record(name, target, "skipped", f"{arch.ENV_KERNELS}=upstream: SGLang's kernel")
            continue
        if wins is not None and op not in wins:
            origin = tables.load_table(*tables.current_device())["origin"]
            hookstatus.record(name, target, "skipped", f"the launch table in effect here lists no {op} win ({origin}); "
                              f"SGLang's kernel, no wrapper; {arch.ENV_KERNELS}=ours forces ours")
            continue
        aside = upstream_has.detail(name)  # SGLang already dispatches its own kernel there (upstream_has.py)
        if aside:
            hookstatus.record(name, target, "skipped", aside)
            continue
        if hookstatus.get(name) is not None and hookstatus.get(name).state in ("registered", "applied"):
            continue
        register(name, target, fn, "around")
        how = "ours on every CUDA call" if mode == "ours" else f"auto: ours where the device's launch table records a win for {op}"
        hookstatus.record(name, target, "registered", f"around hook queued for HookRegistry.apply_hooks ({how})")
