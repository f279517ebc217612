"""The kernel shapes a deployment runs (pure w.r.t. sglang; measurements() takes its wins keys from the
ops modules' shape_key, the keys the hooks look up), from the inputs `check` reads.

Draft head (per draft step, hidden [bs, H] bf16):
  lm_head_gemv   [bs, H] x [R, H]^T, R = this rank's lm_head shard (SGLang's ParallelLMHead padding)
  lm_head_topk   the fused lm_head + top-k of that shard (no hook runs it: only with --ops lm_head_topk)
  draft_topk     top-k over the gathered draft-vocab row [bs, V_draft] (k = --speculative-eagle-topk)
Verify (per target step, N = --speculative-num-draft-tokens, target vocab V):
  argmax_verify  fused argmax over fp32 logits [bs*N, V] + greedy tree walk (greedy requests)
  verify_greedy  the tree walk alone, from target_predict [bs, N]
  tree_sampling  rejection sampling over target_probs [bs, N, V] (temperature > 0)
Batch sizes: the grid the tables key wins by (ops/lm_head_gemv.bs_bucket, integration/hooks/verify_kernels
.shape_key), up to the deployment's largest decode batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UserError
from ..ops.arch import BS_BUCKETS, tree_shape_key

DRAFT_BS = BS_BUCKETS[:-1]  # the draft-head tables were measured up to bs 128
VERIFY_BS = BS_BUCKETS
QUICK_BS = (1, 32, 128)
VOCAB_PADDING = 64  # sglang/srt/layers/vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE

DRAFT_OPS = ("lm_head_gemv", "draft_topk")
VERIFY_OPS = ("argmax_verify", "verify_greedy", "tree_sampling")
OPS = DRAFT_OPS + VERIFY_OPS  # what `tune` measures by default: the ops a hook runs
EXTRA_OPS = ("lm_head_topk",)  # no hook runs it: measured only when named (`tune --ops lm_head_topk`)
ALL_OPS = OPS + EXTRA_OPS


def shard_rows(vocab: int, tp: int) -> int:
    """Rows of one rank's lm_head: SGLang pads the vocab to a multiple of 64 (of 64*tp when the
    padded size does not split evenly) and splits it over tp ranks (VocabParallelEmbedding)."""
    pad = VOCAB_PADDING
    if -(-vocab // pad) * pad % tp:
        pad *= tp
    return -(-vocab // pad) * pad // tp


def bs_grid(buckets: tuple[int, ...], max_bs: int | None) -> tuple[int, ...]:
    """The buckets a deployment reaches: every one up to the first that holds max_bs."""
    if not max_bs:
        return buckets
    out = []
    for b in buckets:
        out.append(b)
        if b >= max_bs:
            break
    return tuple(out)


def quick_grid(full: tuple[int, ...], max_bs: int | None) -> tuple[int, ...]:
    """--quick: QUICK_BS, or with a batch cap those below the cap's bucket plus that bucket (the key it runs)."""
    if not max_bs:
        return QUICK_BS
    return tuple(sorted({b for b in QUICK_BS if b < full[-1]} | {full[-1]}))


@dataclass(slots=True)
class TuneShapes:
    hidden: int  # draft hidden size (the lm_head's input width)
    draft_vocab: int
    target_vocab: int
    tp: int
    topk: int
    steps: int
    draft_tokens: int  # N
    max_bs: int | None = None  # --cuda-graph-max-bs-decode / --max-running-requests, when given
    quick: bool = False
    rows: int = field(init=False)
    draft_bs: tuple = field(init=False)
    verify_bs: tuple = field(init=False)

    def __post_init__(self):
        for name in ("hidden", "draft_vocab", "target_vocab", "tp", "topk", "steps", "draft_tokens"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise UserError(f"tune: {name} = {v!r} must be a positive integer (check the model configs and "
                                f"--tp-size / --speculative-* flags)")
        if self.topk > 16:
            raise UserError(f"--speculative-eagle-topk {self.topk}: our draft top-k kernels take k <= 16")
        self.rows = shard_rows(self.draft_vocab, self.tp)
        self.draft_bs = quick_grid(bs_grid(DRAFT_BS, self.max_bs), self.max_bs) if self.quick else bs_grid(DRAFT_BS, self.max_bs)
        self.verify_bs = quick_grid(bs_grid(VERIFY_BS, self.max_bs), self.max_bs) if self.quick else bs_grid(VERIFY_BS, self.max_bs)

    def describe(self) -> str:
        return (f"draft lm_head shard {self.rows} rows x hidden {self.hidden} (draft vocab {self.draft_vocab}, "
                f"TP {self.tp}); top-k {self.topk}; N {self.draft_tokens} draft tokens over target vocab "
                f"{self.target_vocab}; bs {','.join(map(str, self.draft_bs))} (draft), "
                f"{','.join(map(str, self.verify_bs))} (verify)")


def tree_of(s: TuneShapes) -> tuple[int, int]:
    """(topk, depth) of the measured verify trees: a chain of N for topk 1, else a random tree of
    N nodes with at most topk children and `steps` levels."""
    if s.topk == 1:
        return 1, s.draft_tokens - 1
    return s.topk, s.steps


def measurements(s: TuneShapes) -> list[dict]:
    """Every (op, shape) tune measures, in order: {"op", "shape": {...}, "key": the table's wins key,
    "match": the op_config match fields}."""
    from ..ops import draft_topk, lm_head_gemv, lm_head_topk  # their shape_key: the hooks' lookup keys

    out = []
    H, R, V = s.hidden, s.rows, s.draft_vocab
    for bs in s.draft_bs:
        out.append({"op": "lm_head_gemv", "shape": {"R": R, "H": H, "bs": bs}, "key": lm_head_gemv.shape_key(bs, R, H),
                    "match": {"bs": bs, "rows": R, "hidden": H}})
    ks = sorted({1, s.topk})  # k=1 is SGLang's top-1 contract (first draft step / topk 1)
    for k in ks:
        for bs in s.draft_bs:
            out.append({"op": "lm_head_topk", "shape": {"R": R, "H": H, "k": k, "bs": bs},
                        "key": lm_head_topk.shape_key(bs, R, H, k), "match": {"bs": bs, "rows": R, "hidden": H, "k": k}})
    for k in ks:
        for bs in s.draft_bs:
            out.append({"op": "draft_topk", "shape": {"V": V, "k": k, "bs": bs}, "key": draft_topk.shape_key(bs, V, k),
                        "match": {"bs": bs, "vocab": V, "k": k}})
    n = s.draft_tokens
    for op in VERIFY_OPS:
        for bs in s.verify_bs:
            out.append({"op": op, "shape": {"n": n, "bs": bs, "vocab": s.target_vocab}, "key": tree_shape_key(bs, n),
                        "match": {"bs": bs, "n": n, "vocab": s.target_vocab, "rows": bs * n}})
    return out


def from_configs(target, draft, *, tp: int, topk: int | None, steps: int | None, draft_tokens: int | None,
                 max_bs: int | None = None, quick: bool = False) -> TuneShapes:
    """TuneShapes from the two configs (configs.ModelInfo) and the launch's speculative flags.

    Unset speculative flags take the embedded default's values (steps 3, topk 1, N 4)."""
    if draft is None:
        raise UserError("tune: no --speculative-draft-model-path; tune measures the EAGLE-3 draft head and tree "
                        "verification, give the draft model (or no flags for the embedded default)")
    steps = steps or 3
    topk = topk or 1
    draft_tokens = draft_tokens or (steps + 1 if topk == 1 else 16)
    return TuneShapes(hidden=draft.hidden_size, draft_vocab=draft.draft_vocab_size or draft.vocab_size,
                      target_vocab=target.vocab_size, tp=tp, topk=topk, steps=steps, draft_tokens=draft_tokens,
                      max_bs=max_bs, quick=quick)
