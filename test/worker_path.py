"""Code run in a fresh interpreter: a launch parsed, resolved and published by SGLang's own code, then the
target and draft ModelConfig built exactly as TpModelWorker / EagleDraftWorker build them
(tp_worker.py _init_model_config; eagle_worker_v2.py: draft context_length = target's context_len).

Usage from a test: run_json(WORKER_PATH + "print(json.dumps(matrix(CASES)))", **env)
"""

from helpers import EMULATED_SM90_PREFLIGHT

WORKER_PATH = r'''
import json, os, warnings
warnings.filterwarnings("ignore")
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.server_args import prepare_server_args
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.runtime_context import override_platform, publish, get_model, get_spec

from sglang_kimi_eagle3.commands.check import platform_facts
SM90 = platform_facts(90)  # an H200's SGLang platform facts, as `check --for-gpu sm90` emulates them
#EMULATED_SM90_PREFLIGHT

def launch(argv, env):
    """One launch: returns what the target and draft ModelConfigs came out as, or the error."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update({k: v for k, v in env.items() if v is not None})
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
    try:
        sa = prepare_server_args(argv + ["--device", "cuda"])
        with override_platform(**SM90):
            sa.resolve_once()
        publish(sa, role="scheduler")
        stage = "target"
        target = ModelConfig.from_server_args(sa, model_path=get_model().model_path, model_revision=get_model().revision,
                                              is_draft_model=False, context_length=None)
        stage = "draft"
        draft = ModelConfig.from_server_args(sa, model_path=get_spec().speculative_draft_model_path,
                                             model_revision=get_spec().speculative_draft_model_revision,
                                             is_draft_model=True, context_length=target.context_len)
        h = draft.hf_text_config
        rope = getattr(h, "rope_parameters", None) or getattr(h, "rope_scaling", None)
        return {"ok": True, "target_ctx": target.context_len, "draft_ctx": draft.context_len,
                "draft_mpe": h.max_position_embeddings, "draft_rope": dict(rope) if rope else None,
                "env_overwrite_after": os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")}
    except Exception as exc:
        return {"ok": False, "stage": stage if "stage" in dir() else "resolve", "type": type(exc).__name__,
                "error": str(exc)[:2000], "env_overwrite_after": os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

def matrix(cases):
    return {name: launch(argv, env) for name, (argv, env) in cases.items()}
'''.replace("#EMULATED_SM90_PREFLIGHT", EMULATED_SM90_PREFLIGHT, 1)


# ---- a scheduler-like child, spawned the way SGLang spawns run_scheduler_process -------------------



def greedy_verify_batch(torch, cand, ridx, nxt, sib, depth, vocab):
    """SGLang's own EagleVerifyInput and ScheduleBatch for one greedy target-verify of `cand` [bs, N] over a
    topk-2 tree (CPU tensors, seq_len 17): what the worker hands eagle_sample."""
    from sglang_kimi_eagle3.integration.verify_batch import greedy_verify_batch as build

    return build(torch, cand, ridx, nxt, sib, depth, vocab)


def _verify_call(torch):
    """One greedy verify through SGLang's own eagle_sample (real SGLang objects, CPU tensors)."""
    import random

    from sglang.srt.layers.logits_processor import LogitsProcessorOutput
    from sglang.srt.speculative import eagle_utils

    from sglang_kimi_eagle3.ops.verify_greedy import random_tree_parents, tree_from_parents

    bs, n, V, depth = 2, 4, 50, 3
    rng = random.Random(0)
    ridx, nxt, sib = tree_from_parents([random_tree_parents(rng, n, 2, depth) for _ in range(bs)])
    logits = torch.randn(bs * n, V, generator=torch.Generator().manual_seed(0))
    cand = logits.argmax(-1).reshape(bs, n)
    vi, batch = greedy_verify_batch(torch, cand, ridx, nxt, sib, depth, V)
    eagle_utils.eagle_sample(vi, batch, LogitsProcessorOutput(next_token_logits=logits))
    # the dispatcher with an int32 target_predict: outside our fast path -> SGLang's, counted with its reason
    p = torch.zeros(bs * n, dtype=torch.int32)
    a = torch.full((bs, depth + 1), -1, dtype=torch.int32)
    k = torch.empty(bs, dtype=torch.int32)
    try:
        eagle_utils.verify_tree_greedy_func(predicts=p, accept_index=a, accept_token_num=k, candidates=cand,
                                            retrieve_index=ridx, retrieve_next_token=nxt, retrieve_next_sibling=sib,
                                            target_predict=cand.to(torch.int32), topk=2)
    except RuntimeError as exc:  # counted before SGLang's ran; on a CUDA box its JIT kernel refuses CPU tensors
        if "[cuda]" not in str(exc):  # (H200, 2026-11-30: "Device value [cpu] not in the allowed options: [cuda]")
            raise


def _draft_calls(torch):
    """The EAGLE v2 worker's own top-1 (as draft_forward calls it) and its prefill-extend top-k."""
    import sglang.srt.speculative.eagle_worker_v2 as worker

    x = torch.randn(3, 40, generator=torch.Generator().manual_seed(1))
    worker.draft_topk1_postprocess(x, torch.zeros(3, dtype=torch.long))  # ours (interpreter)
    try:  # float64 logits: outside our fast path -> counted, then SGLang's (whatever its own kernel does with them)
        worker.draft_topk1_postprocess(x.double(), torch.zeros(3, dtype=torch.long))
    except Exception:
        pass
    probs = worker.renorm_draft_probs(x, None, False)
    worker.fast_topk(probs, 1, dim=-1)  # prefill draft-extend: top-k at topk 1 on the draft probabilities


CHILD_WATCHDOG_S = 120  # a scheduler_like child's own steps (2-core CPU box: 5-6 s of each child's 35 s; the rest is its start)


def scheduler_like(server_args, out_q, mask: str | None = None, calls: bool = True):
    """run_scheduler_process's first steps (load_plugins, publish with spawn ranks), the worker modules
    imported as building a Scheduler imports them, optional calls through SGLang's own functions, then
    SGLang's own Scheduler.init_all_cuda_graphs -> BaseSpecWorker.init_cuda_graphs (whose AFTER hook publishes
    our runtime status)."""
    import faulthandler
    import time
    import warnings

    # a child that hangs (a kernel build, a lock) prints every thread's stack to its stderr and exits, instead of
    # leaving the parent waiting on the queue with nothing to show (run 16 on the H200: not ended in 390 s)
    faulthandler.dump_traceback_later(CHILD_WATCHDOG_S, exit=True)
    t0, phases = time.monotonic(), {}

    def mark(name):
        phases[name] = round(time.monotonic() - t0, 2)

    warnings.filterwarnings("ignore")
    from sglang.srt.plugins import load_plugins

    load_plugins()
    mark("load_plugins")
    from sglang.srt.runtime_context import SpawnRanks, publish, spawn_world_rank

    publish(server_args, role="scheduler", ranks=SpawnRanks(world_rank=spawn_world_rank(server_args, tp_rank=0, pp_rank=0),
                                                            dp_rank=None, gpu_id=None))
    import sglang.srt.speculative.eagle_worker_v2  # noqa: F401  (what building the Scheduler imports)
    import torch
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.speculative import eagle_utils

    if mask == "eagle_utils.verify_tree_greedy_func":  # a stale binding: the caller keeps SGLang's function
        from sglang.kernels.ops.speculative import spec_tree

        eagle_utils.verify_tree_greedy_func = spec_tree.verify_tree_greedy_func.__wrapped__
    mark("imports")
    try:
        if calls:
            _verify_call(torch)
            mark("verify_call")
            _draft_calls(torch)
            mark("draft_calls")

        from sglang.srt.speculative.base_spec_worker import BaseSpecWorker

        class _TargetWorker:  # the model workers cannot run on this CPU box: their graph capture is a no-op
            def init_cuda_graphs(self):
                return None

        class _SpecWorker:  # SGLang's own BaseSpecWorker.init_cuda_graphs, with no draft worker to capture
            draft_worker = None
            init_cuda_graphs = BaseSpecWorker.init_cuda_graphs

        stand_in = type("S", (), {})()
        stand_in.tp_worker, stand_in.draft_worker = _TargetWorker(), _SpecWorker()
        Scheduler.init_all_cuda_graphs(stand_in)
        from sglang_kimi_eagle3.integration.hooks import runtime_status

        mark("init_all_cuda_graphs")
        out_q.put({"ok": True, "path": str(runtime_status._STATE["path"]), "snapshot": runtime_status.snapshot(),
                   "phases_s": phases})
    except Exception:
        import traceback

        out_q.put({"ok": False, "error": traceback.format_exc()[-3000:], "phases_s": phases})
    finally:
        faulthandler.cancel_dump_traceback_later()
