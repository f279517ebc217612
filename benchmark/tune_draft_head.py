"""Superseded by `sglang-kimi-eagle3 tune` (commands/tune.py): a thin wrapper kept for the
benchmarks that import its names (bench_draft_head.py --tune, bench_l2_method.py).

    python benchmark/tune_draft_head.py [--out DIR] [--quick]

runs `sglang-kimi-eagle3 tune --ops lm_head_gemv,lm_head_topk,draft_topk` for the two Kimi drafter
shards (lm_head R 4000 = TP 8, R 32000 = TP 1; H 7168) and writes their draft-head ops as
DIR/<DEVICE>.draft_head.json (default: $OUT, else the per-GPU user cache only). The measuring, the
search grid (tuning/search.py), the timing (tuning/timing.py) and the win rule (exact and ours <
0.97 x SGLang) are the package's; see docs/benchmarks.md, "tune".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

from sglang_kimi_eagle3.ops.tables import clear_cache, device_file_name, user_table
from sglang_kimi_eagle3.tuning import cache
from sglang_kimi_eagle3.tuning.measure import sglang_tail  # noqa: F401  (re-exported for the benches)
from sglang_kimi_eagle3.tuning.timing import copies_past_l2, rotating  # noqa: F401

DEV = "cuda"
H = 7168
ROWS = (4000, 32000)
BS = (1, 8, 32, 64, 128)
DRAFT_HEAD_OPS = "lm_head_gemv,lm_head_topk,draft_topk"
KIMI = ["--model-path", "kimi-k2.5", "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "aq-medai/kimi-k2-eagle3", "--speculative-eagle-topk", "4",
        "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "16"]  # topk 4: k = 1 and 4 measured


def weights(R: int, seed: int = 0) -> list[torch.Tensor]:
    """Enough [R, H] bf16 copies to exceed the L2 when cycled (one when one copy already does)."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    return copies_past_l2(lambda i: (torch.randn(R, H, device=DEV, generator=g) * 0.02).bfloat16(), R * H * 2)


def precompile(workers: int) -> None:
    """Kept for callers; `tune` compiles as it measures (its quick grid is a few kernels per shape)."""


def tune(quick: bool = False, log=print) -> dict:
    """Run `sglang-kimi-eagle3 tune` for TP 8 and TP 1 into a scratch cache; return its table (not
    written anywhere else)."""
    from sglang_kimi_eagle3.commands import tune as tune_cmd

    scratch = tempfile.mkdtemp(prefix="tune-draft-head-")
    for tp in (8, 1):
        argv = ["--ops", DRAFT_HEAD_OPS, "--cache-dir", scratch] + (["--quick"] if quick else []) + KIMI + ["--tp-size", str(tp)]
        if tune_cmd.main(argv) != 0:
            raise RuntimeError(f"tune failed for TP {tp}")
    table, path, note = user_table(torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0), scratch)
    if table is None:
        raise RuntimeError(note or f"tune wrote no table to {scratch}")
    return table


def write(table: dict, out_dir: Path) -> Path:
    path = cache.write_table(Path(out_dir) / f"{device_file_name(table['device'])}.draft_head.json", table)
    clear_cache()
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT"), help="folder for <DEVICE>.draft_head.json")
    ap.add_argument("--quick", action="store_true", help="batch sizes 1, 32, 128 and a smaller grid")
    args = ap.parse_args()
    table = tune(args.quick)
    print(json.dumps({op: spec.get("wins", []) for op, spec in table["ops"].items()}))
    if args.out:
        print(f"wrote {write(table, Path(args.out))}")


if __name__ == "__main__":
    sys.exit(main())
