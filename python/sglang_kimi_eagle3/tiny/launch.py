"""launch_server flags for the tiny pair (pure), shared by the live GPU test, its CPU twin and the recipe.

The tiny target carries a byte-level tokenizer, so text requests (the bench) work; the live test sends
input_ids. The triton attention backend (the MLA target and the MHA drafter both run on it without
FA3), the pytorch sampler and no grammar backend keep FlashInfer and xgrammar out of the path;
`--trust-remote-code` as for Kimi checkpoints; prefill CUDA graphs off (decode graphs stay: our
kernels run inside them).
"""

from __future__ import annotations

# name -> (steps, topk, draft tokens): the seed's chain and a top-4 tree
SPEC_SHAPES = {"chain": (3, 1, 4), "tree": (3, 4, 8)}


def base_args(target: str, tp: int = 1, mem_fraction: float = 0.3) -> list[str]:
    return ["--model-path", str(target), "--tp-size", str(tp), "--trust-remote-code",
            "--attention-backend", "triton", "--sampling-backend", "pytorch", "--grammar-backend", "none",
            "--mem-fraction-static", str(mem_fraction), "--max-total-tokens", "65536", "--max-running-requests", "16",
            "--cuda-graph-max-bs-decode", "8", "--disable-prefill-cuda-graph"]


def spec_args(draft: str, shape: str = "chain") -> list[str]:
    steps, topk, tokens = SPEC_SHAPES[shape]
    return ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft),
            "--speculative-num-steps", str(steps), "--speculative-eagle-topk", str(topk),
            "--speculative-num-draft-tokens", str(tokens)]
