"""Which changes of this project's upstream series the running SGLang already carries (a leaf).

The series in `upstream/` (`sglang-kimi-eagle3 upstream export`) gives SGLang itself the draft context
policy (01), vocabulary-parallel tree rejection sampling (02), the draft top-k for topk > 1 (03), the
one-token target verify through the Triton backend's decode path (04) and the deferred steps-0 draft
extend (05).
Where the running SGLang has one of them, the plugin hooks that change replaces are not installed:
each records `skipped` with a detail starting `upstream has it`, and SGLang's own code does the job.
Stacking ours on top would fight it: SGLang's dispatch wraps the very function our hook replaces, so
our call sites would stay unbound (verify_sampling) or replace SGLang's dispatch (the worker's
`fast_topk`), and the draft's ModelConfig would be rewritten twice.

Each marker looks at what the PR adds, in the process where the hook would be installed, importing no
more than the hook does (HookRegistry.apply_hooks imports each hook's target module anyway; a source
file found with importlib.util.find_spec imports only its parent packages):

  draft_context_flag    SGLang's ServerArgs has the field `speculative_draft_context_policy`
                        (sglang.srt.server_args: the flag hooks' target module)
  draft_context_config  SGLang's ModelConfig takes `draft_context_policy` (the draft honours the flag;
                        sglang.srt.configs.model_config: the context_policy hook's target module)
  tree_sampling         verify_sampling.py takes tree_speculative_sampling_target_only through
                        tree_sampling_triton.tree_speculative_sampling_dispatch (source files only)
  draft_topk            eagle_worker_v2.py takes its draft top-k through
                        draft_topk.draft_probs_topk_dispatch (source files only)
  offstate_verify       triton_backend.py's TritonAttnBackend has `_one_token_verify_as_decode` (source file only)
  deferred_extend       speculative/deferred_draft_extend.py defines DeferredDraftExtend and eagle_worker_v2.py
                        imports it and defers through it (source files only)

A marker that cannot be read (a module missing, a name moved) reads as "not there": the plugin's hook
installs as it does on SGLang 0.5.23. Results are cached per process (the installed tree does not change
under a running process).
"""

from __future__ import annotations

import functools
import importlib.util
import re

UPSTREAM_FIELD = "speculative_draft_context_policy"  # SGLang's own flag, where it has one
SPEC_OPS = "sglang.kernels.ops.speculative"


def _source(module: str) -> str:
    """The source text of `module` without importing it ('' when it is not there)."""
    try:
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py"):
            return ""
        with open(origin, encoding="utf-8") as f:
            return f.read()
    except (ImportError, ValueError, OSError):
        return ""


def _dispatched(module: str, name: str, caller: str) -> bool:
    """`module` defines `name`, and `caller` imports it from there and calls it."""
    if not re.search(rf"^def {name}\(", _source(module), re.M):
        return False
    text = _source(caller)
    imported = re.search(rf"from\s+{re.escape(module)}\s+import\s*\(?[\w\s,]*\b{name}\b", text)
    return bool(imported) and re.search(rf"\b{name}\(", text) is not None


@functools.cache
def draft_context_flag() -> str:
    try:
        from sglang.srt.arg_groups.arg_utils import field_names
        from sglang.srt.server_args import ServerArgs
    except Exception:
        return ""
    if UPSTREAM_FIELD not in field_names(ServerArgs):
        return ""
    return (f"upstream has it: SGLang's ServerArgs has its own {UPSTREAM_FIELD} "
            "(--speculative-draft-context-policy on SGLang's parser, carried on the record)")


@functools.cache
def draft_context_config() -> str:
    import inspect

    try:
        from sglang.srt.configs.model_config import ModelConfig

        params = inspect.signature(ModelConfig.__init__).parameters
    except Exception:
        return ""
    if "draft_context_policy" not in params:
        return ""
    return ("upstream has it: SGLang's draft ModelConfig applies --speculative-draft-context-policy "
            "(ModelConfig(draft_context_policy=...), resolved once in the main process)")


@functools.cache
def tree_sampling() -> str:
    if not _dispatched(f"{SPEC_OPS}.tree_sampling_triton", "tree_speculative_sampling_dispatch",
                       f"{SPEC_OPS}.verify_sampling"):
        return ""
    return ("upstream has it: SGLang's verify_sampling dispatches tree_speculative_sampling_target_only "
            "through tree_sampling_triton.tree_speculative_sampling_dispatch")


@functools.cache
def draft_topk() -> str:
    if not _dispatched(f"{SPEC_OPS}.draft_topk", "draft_probs_topk_dispatch", "sglang.srt.speculative.eagle_worker_v2"):
        return ""
    return ("upstream has it: SGLang's eagle_worker_v2 takes its draft top-k through "
            "draft_topk.draft_probs_topk_dispatch")


@functools.cache
def offstate_verify() -> str:
    if not re.search(r"^    def _one_token_verify_as_decode\(", _source("sglang.srt.layers.attention.triton_backend"), re.M):
        return ""
    return ("upstream has it: SGLang's TritonAttnBackend runs a one-token target verify as a decode "
            "(_one_token_verify_as_decode)")


@functools.cache
def deferred_extend() -> str:
    module = "sglang.srt.speculative.deferred_draft_extend"
    if not re.search(r"^class DeferredDraftExtend\b", _source(module), re.M):
        return ""
    worker = _source("sglang.srt.speculative.eagle_worker_v2")
    if not re.search(rf"from\s+{re.escape(module)}\s+import\s+DeferredDraftExtend\b", worker) \
            or ".deferred_draft_extend.defer(" not in worker:
        return ""
    return ("upstream has it: SGLang's EAGLEWorkerV2 defers its own steps-0 draft extend "
            "(deferred_draft_extend.DeferredDraftExtend, SGLANG_SPEC_DEFER_ZERO_STEP_DRAFT_EXTEND=K, K >= 2; off at 0)")


# plugin hook -> the marker of the upstream change that replaces it
STEP_ASIDE = {
    "context_policy_flag": draft_context_flag,
    "context_policy_flag_value": draft_context_flag,
    "context_policy": draft_context_config,
    "verify_tree_sampling": tree_sampling,
    "draft_probs": draft_topk,
    "draft_worker_topk": draft_topk,
    "offstate_attention": offstate_verify,
    "offstate_attention_metadata": offstate_verify,
    "offstate_attention_graph": offstate_verify,
    "deferred_extend": deferred_extend,
}


def detail(hook: str) -> str:
    """'upstream has it: ...' when the running SGLang carries the change that replaces `hook`, else ''."""
    marker = STEP_ASIDE.get(hook)
    return marker() if marker is not None else ""
