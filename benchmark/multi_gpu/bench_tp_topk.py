"""TP draft top-k on several GPUs: all-gather of the full draft logits vs the k-candidate exchange (issue 7).

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    timeout 600 torchrun --standalone --nproc_per_node=<GPUs> benchmark/multi_gpu/bench_tp_topk.py

One process per GPU; rank r owns rows [r*R, (r+1)*R) of the draft lm_head (R = 32000 / world, H 7168).
Per bs (1, 8, 32, 64, 128) and k (1, 4):
  collective   all-gather of the bs x R fp32 logits shard  vs  all-gather of the packed local answer
               (m, s, k logits, k ids: 2 + 2k words per row)
  tail         SGLang's way: bf16 lm_head shard, .float(), all-gather, top-1 (argmax) / softmax + topk, d2t
               vs ours: lm_head_topk (shard mode, logits never written), exchange, `combine`, d2t
  exactness    rank 0: the combined ids equal the single-GPU fused kernel's on the whole W (ids exact),
               probabilities within fp32 rounding
Timing avoids the usual multi-GPU pitfalls: every op is CUDA-graph captured, all ranks
replay it a FIXED number of times between CUDA events (do_bench picks its count from timing, so ranks
would disagree and deadlock), medians over 30 rounds; rank 0 writes $OUT/tp_topk_x<world>.json before
teardown (a hang after graph-captured NCCL calls was seen at exit: run under `timeout`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))
from harness import capture_graph as graph_of  # noqa: E402  (no do_bench: ranks must replay equal counts)
from sglang_kimi_eagle3.ops.lm_head_topk import LocalTopK, combine, lm_head_topk  # noqa: E402

V, H = 32000, 7168
BS, KS = (1, 8, 32, 64, 128), (1, 4)
ROUNDS, REPLAYS = 30, 20


def replay_us(g) -> float:
    """Median per-replay µs over ROUNDS x REPLAYS replays: the same fixed count on every rank."""
    dist.barrier()
    for _ in range(REPLAYS):
        g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(ROUNDS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(REPLAYS):
            g.replay()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1000 / REPLAYS)
    return sorted(ts)[len(ts) // 2]


def pack(local: LocalTopK) -> torch.Tensor:
    """[bs, 2 + 2k] fp32: m, s, k logits, k ids (int32 bits; draft ids < 2^31)."""
    return torch.cat([local.stats, local.logits, local.ids.int().view(torch.float32)], dim=1)


def unpack(gathered: torch.Tensor, world: int, bs: int, k: int) -> list[LocalTopK]:
    g = gathered.view(world, bs, 2 + 2 * k)
    return [LocalTopK(None, g[r, :, 2 + k:].contiguous().view(torch.int32).long(), g[r, :, 2:2 + k], g[r, :, :2])
            for r in range(world)]


def main() -> None:
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    R = V // world
    gen = torch.Generator(device="cuda").manual_seed(0)  # the same full W / d2t on every rank
    w_full = (torch.randn(V, H, device="cuda", generator=gen) * 0.02).bfloat16()
    hot = torch.randint(0, 163840, (V,), device="cuda", generator=gen)
    w = w_full[rank * R:(rank + 1) * R].contiguous()
    rows = []
    for bs in BS:
        h = (torch.randn(bs, H, device="cuda", generator=gen)).bfloat16()
        for k in KS:
            shard = torch.empty(bs, R, device="cuda")
            full = torch.empty(world * bs, R, device="cuda")
            words = 2 + 2 * k
            mine = torch.empty(bs, words, device="cuda")
            theirs = torch.empty(world * bs, words, device="cuda")
            res = {}

            def sglang_tail():
                logits = (h @ w.t()).float()
                dist.all_gather_into_tensor(full, logits)
                allv = full.view(world, bs, R).permute(1, 0, 2).reshape(bs, world * R)
                if k == 1:
                    res["sg"] = hot[allv.argmax(-1, keepdim=True)]
                else:
                    p, i = torch.softmax(allv, -1).topk(k, dim=-1)
                    res["sg"] = (p, hot[i])

            def ours_tail():
                local = lm_head_topk(h, w, k, probs=None, id_offset=rank * R)
                mine.copy_(pack(local))
                dist.all_gather_into_tensor(theirs, mine)
                res["ours"] = combine(unpack(theirs, world, bs, k), k, hot_token_id=hot)

            timings = {
                "allgather_logits": replay_us(graph_of(lambda: dist.all_gather_into_tensor(full, shard))),
                "exchange_candidates": replay_us(graph_of(lambda: dist.all_gather_into_tensor(theirs, mine))),
                "tail_sglang": replay_us(graph_of(sglang_tail)),
                "tail_ours": replay_us(graph_of(ours_tail)),
            }
            row = {"bs": bs, "k": k, "world": world, "R_per_rank": R,
                   "bytes_per_rank": {"logits": bs * R * 4, "candidates": bs * words * 4},
                   **{f"{n}_us": round(t, 2) for n, t in timings.items()}}
            if rank == 0:  # exactness against the single-GPU fused kernel on the whole W
                single = lm_head_topk(h, w_full, k, hot_token_id=hot)
                probs, ids = res["ours"]
                row["ids_equal_single_gpu"] = bool(torch.equal(ids, single.ids))
                row["probs_max_abs_diff"] = float((probs - single.probs).abs().max())
                sg_ids = res["sg"] if k == 1 else res["sg"][1]
                row["ids_identical_sglang_frac"] = float((ids == sg_ids).float().mean())
                print(json.dumps(row), flush=True)
            rows.append(row)
    if rank == 0:
        out = Path(os.environ.get("OUT") or Path(__file__).resolve().parents[1] / "results")
        out.mkdir(parents=True, exist_ok=True)
        meta = {"device": torch.cuda.get_device_name(), "world": world, "torch": torch.__version__,
                "nccl": ".".join(map(str, torch.cuda.nccl.version())), "rows": rows}
        (out / f"tp_topk_x{world}.json").write_text(json.dumps(meta, indent=1))  # before teardown (see doc)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
