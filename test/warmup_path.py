"""A scheduler-like child whose EAGLE worker carries the attributes the kernel warm-up reads (tiny shapes).

Spawned the way SGLang spawns run_scheduler_process (load_plugins first, then publish with spawn ranks),
it ends in SGLang's own Scheduler.init_all_cuda_graphs -> BaseSpecWorker.init_cuda_graphs, whose AFTER
hooks (kernel_warmup, then runtime_status) run exactly as in a server. The model workers cannot run on a
CPU box, so the worker is a stand-in holding SGLang's attribute layout (EAGLEWorkerV2: topk,
speculative_num_*, _draft_worker.draft_runner.model.{lm_head, logits_processor}, _target_worker
.model_runner.{max_running_requests, model_config.vocab_size, decode_cuda_graph_runner}); the draft's
LogitsProcessor is SGLang's own.
"""

TINY = {"max_bs": 2, "topk": 2, "steps": 3, "tokens": 4, "vocab": 50, "draft_vocab": 40, "hidden": 32, "graph_bs": 1}


def stand_in_worker(torch, t=TINY):
    import types

    from sglang.srt.layers.logits_processor import LogitsProcessor
    from sglang.srt.speculative.base_spec_worker import BaseSpecWorker

    cfg = types.SimpleNamespace(vocab_size=t["draft_vocab"], draft_vocab_size=t["draft_vocab"],
                                architectures=["LlamaForCausalLMEagle3"])
    head = torch.nn.Module()
    head.weight = torch.nn.Parameter(torch.zeros(t["draft_vocab"], t["hidden"], dtype=torch.bfloat16), requires_grad=False)
    model = types.SimpleNamespace(lm_head=head, logits_processor=LogitsProcessor(cfg))

    class _DraftWorker:  # EagleDraftWorker: its own graphs are captured in init_cuda_graphs (nothing to do here)
        draft_runner = types.SimpleNamespace(model=model)
        hot_token_id = None
        cuda_graph_runner = types.SimpleNamespace(max_bs=t["graph_bs"])

        def init_cuda_graphs(self):
            return None

    class _TargetWorker:
        model_runner = types.SimpleNamespace(max_running_requests=t["max_bs"],
                                             model_config=types.SimpleNamespace(vocab_size=t["vocab"]),
                                             decode_cuda_graph_runner=types.SimpleNamespace(max_bs=t["graph_bs"]))

        def init_cuda_graphs(self):
            return None

    class _Worker:  # EAGLEWorkerV2's attributes; SGLang's own BaseSpecWorker.init_cuda_graphs
        topk, speculative_num_steps, speculative_num_draft_tokens = t["topk"], t["steps"], t["tokens"]
        device = "cpu"
        _draft_worker, _target_worker = _DraftWorker(), _TargetWorker()
        draft_worker = property(lambda self: self._draft_worker)
        init_cuda_graphs = BaseSpecWorker.init_cuda_graphs

    return _TargetWorker(), _Worker()


def scheduler_with_warmup(server_args, out_q, env: dict, again: dict | None = None):
    import json
    import os
    import warnings

    warnings.filterwarnings("ignore")
    os.environ.update(env)
    from sglang.srt.plugins import load_plugins

    load_plugins()
    from sglang.srt.runtime_context import SpawnRanks, publish, spawn_world_rank

    publish(server_args, role="scheduler", ranks=SpawnRanks(world_rank=spawn_world_rank(server_args, tp_rank=0, pp_rank=0),
                                                            dp_rank=None, gpu_id=None))
    try:
        import sglang.srt.speculative.eagle_worker_v2  # noqa: F401  (what building the Scheduler imports)
        import torch
        from sglang.srt.managers.scheduler import Scheduler

        stand_in = type("S", (), {})()
        stand_in.tp_worker, stand_in.draft_worker = stand_in_worker(torch)
        Scheduler.init_all_cuda_graphs(stand_in)
        from sglang_kimi_eagle3.integration.hooks import kernel_warmup, runtime_status

        path = runtime_status._STATE["path"]
        out = {"ok": True, "snapshot": runtime_status.snapshot(), "last": dict(kernel_warmup._LAST),
               "file": json.loads(path.read_text()) if path else None}
        if again:  # the same scheduler path once more, with these variables (e.g. the switch off)
            kernel_warmup._LAST.clear()
            os.environ.update(again)
            Scheduler.init_all_cuda_graphs(stand_in)
            out["again"] = {"snapshot": runtime_status.snapshot(), "last": dict(kernel_warmup._LAST)}
        out_q.put(out)
    except Exception:
        import traceback

        out_q.put({"ok": False, "error": traceback.format_exc()[-3000:]})
