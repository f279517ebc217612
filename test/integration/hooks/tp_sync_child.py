"""Two TP ranks on CPU (gloo, SGLang's own GroupCoordinator) feeding this plugin's controller in SGLang's real
AdaptiveStepSlot the same accept counts but different step times; prints one JSON line per rank. Run by
test_adaptive_measured.py:  python tp_sync_child.py PORT MODE  (MODE: sync, the hook's own sync; own, each rank its own
readings: what the sync prevents)."""

import json
import os
import random
import sys
import types

import torch.multiprocessing as mp

STEPS = 1500


def rank_main(rank: int, port: int, mode: str, q) -> None:
    try:
        from sglang.srt.distributed import parallel_state as ps
        from sglang.srt.speculative.adaptive_spec_params import AdaptiveStepSlot

        from sglang_kimi_eagle3.integration.hooks import adaptive_control as hook
        from sglang_kimi_eagle3.planner import adaptive_table as T, profiles
        from sglang_kimi_eagle3.planner.costs import from_profile

        ps.init_distributed_environment(backend="gloo", world_size=2, rank=rank, local_rank=rank,
                                        distributed_init_method=f"tcp://127.0.0.1:{port}")
        tp = ps.init_model_parallel_group([[0, 1]], local_rank=rank, backend="gloo", group_name="tp", use_pynccl=False,
                                          use_custom_allreduce=False, use_mscclpp=False,
                                          use_torch_symm_mem_allreduce=False)
        ps.get_parallel().override_permanently(tp_group=tp)  # what SGLang's initialize_model_parallel publishes
        cfg = T.table(from_profile(profiles.load(profiles.DEFAULT_PROFILE)), [1, 128], operator_steps=3,
                      budget_gb=13.0, state_gb=lambda s: T.state_memory_gb(s, 163840, 128))["128"]
        slot = AdaptiveStepSlot(initial_steps=3, cfg=cfg)
        hook.attach(slot, cfg[T.KEY])
        if mode == "own":
            hook._SYNC[:] = [hook._identity]
        ctl = slot._kimi_eagle3_ctl
        # the clock: each verify result one step after the last; rank 0 reads steps 3 at 3x its model, rank 1 as
        # modelled (what the model predicts: it would stay at 3)
        now = [0.0]
        hook.time = types.SimpleNamespace(perf_counter=lambda: now[0])
        rng, trace = random.Random(4), []
        for i in range(STEPS):
            s = slot.current_steps
            now[0] += ctl.modelled_us(s) * (3.0 if rank == 0 and s == 3 else 1.0) / 1e6
            counts = []
            for _ in range(8):
                k = 0
                while k < s and rng.random() < 0.8:
                    k += 1
                counts.append(k)
            if slot.update(counts):
                trace.append((i, slot.current_steps))
        q.put(json.dumps({"rank": rank, "trace": trace, "corr": {str(k): v for k, v in ctl.corr.items()},
                          "syncs": ctl.syncs, "measured": hook.hookstatus.counters(hook.NAME)}))
    except Exception:
        import traceback

        q.put(json.dumps({"rank": rank, "error": traceback.format_exc()[-2000:]}))


if __name__ == "__main__":
    port, mode = int(sys.argv[1]), sys.argv[2]
    # the ranks see no GPU: SGLang's group coordinator then keeps its tensors on the CPU, as on a CPU box (on a CUDA
    # box it would put them on cuda:<local rank>, and a one-GPU machine has no cuda:1); what is tested is the CPU
    # group's broadcast, the one SGLang's TP ranks use for it
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, port, mode, q)) for r in range(2)]
    for p in procs:
        p.start()
    for _ in procs:
        print(q.get(timeout=240), flush=True)
    for p in procs:
        p.join(30)
