"""Compile before serving: every launch of our kernels a deployment can reach, each run once (no sglang).

Triton compiles a kernel the first time it sees a new *specialization*: the constexprs (block sizes, the
launch-table rule in effect, flags such as EVEN or the pow2 of the split count) and, for every integer
argument, whether it equals 1 or is a multiple of 16. Our launchers derive several of those from the
batch (argmax_verify's split count and EVEN flag, the stream-K plan of lm_head_gemv, draft_topk1's
draft-token column), so one launch per batch *bucket* is not enough: a request mix that reaches a new
row count compiles on the serving path, for seconds, in the middle of a decode step. `plan` lists every
(op, rows) a launch can reach and that the kernel switch gives to our kernel; `run` launches each once
on dummy inputs of the real shapes (valid trees, in-range indices) and reports what it did.

Rows each op can see (b = requests in a batch, 1..max_bs; m = N draft tokens, topk), from SGLang
0.5.23's EAGLE v2 worker:
  lm_head_gemv   b (prefill draft-extend), b*topk (draft decode steps), b*N (draft-extend after verify)
  draft_topk1    b, at topk 1 only (draft decode), with the draft-token column 1..steps-1 when SGLang
                 writes the chain in place (no hot-token map)
  topk_rows      b (prefill / decode draft-extend), b*topk (draft decode, topk > 1); k = topk
  argmax_verify, verify_greedy, tree_sampling   b, with N draft tokens per request
An adaptive launch (SGLang's --speculative-adaptive) also runs a runtime state per candidate step, a chain of N =
steps + 1 draft tokens (steps 0: the 1-token verify of the off-state): `plan_states` adds each state's variants
that the launch's own plan lacks (the tree ops per N: N 1 and N 4 share the n4 table key, not a compile).
Rows inside a captured CUDA graph were compiled at capture already; launching them again costs a
cache lookup. Batches above the largest captured graph, the draft-extend after a prefill and every
verify kernel run eagerly: those are the launches this warm-up exists for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from .arch import KERNEL_HOOKS

# op -> (the hook that calls it, the launch-table op whose `wins` decide it under auto): arch.KERNEL_HOOKS
OPS = {op: (hook, table_op) for hook, (op, table_op) in KERNEL_HOOKS.items()}
LM_HEAD_FORMS = ("fp32_rounded", "fp32", "16bit")  # what the draft_lm_head hook asks lm_head_gemv for


@dataclass(slots=True, frozen=True)
class LaunchShapes:
    """What one scheduler's launch can hand our kernels (read from SGLang's worker by the hook)."""
    max_bs: int  # most requests in one batch (--max-running-requests as SGLang resolved it)
    topk: int
    num_steps: int
    num_draft_tokens: int
    target_vocab: int  # width of the verify logits
    draft_vocab: int = 0  # width of the draft logits (top-k input); 0: no draft-head kernel reachable
    lm_head_rows: int = 0  # this rank's draft lm_head rows (the TP shard); 0: not a plain 16-bit lm_head
    hidden: int = 0
    lm_head_form: str = "fp32_rounded"
    chain_column: bool = False  # draft_topk1 writes the draft-token column (topk 1, no hot-token map)
    dtype: str = "bfloat16"  # the draft model's activations

    def __post_init__(self):
        # steps 0 exists only as an adaptive state: a chain of one draft token (the off-state's 1-token verify)
        off = self.num_steps == 0 and self.num_draft_tokens == 1 and self.topk == 1
        if min(self.max_bs, self.topk, self.num_steps or (1 if off else 0), self.num_draft_tokens, self.target_vocab) < 1:
            raise ValueError(f"launch shapes must be positive: {self}")
        if self.lm_head_form not in LM_HEAD_FORMS:
            raise ValueError(f"lm_head_form {self.lm_head_form!r} is not one of {LM_HEAD_FORMS}")


@dataclass(slots=True, frozen=True, order=True)
class Variant:
    op: str
    rows: int  # rows of the op's input (requests for the tree ops)
    column: int = 0  # draft_topk1's draft-token column (0: no column written)
    key: str = ""  # the launch-table shape key the hook files this call under


def _rows(op: str, s: LaunchShapes) -> list[tuple[int, int]]:
    """(rows, column) an op can be launched with under these shapes."""
    bs = range(1, s.max_bs + 1)
    if op == "lm_head_gemv":
        mult = {1, s.num_draft_tokens} | ({s.topk} if s.num_steps > 1 else set())
        return [(r, 0) for r in sorted({b * m for b in bs for m in mult})]
    if op == "draft_topk1":
        if s.topk != 1 or s.num_steps < 2:
            return []
        cols = range(1, s.num_steps) if s.chain_column else [0]
        return [(b, c) for b in bs for c in cols]
    if op == "topk_rows":
        mult = {1} | ({s.topk} if s.topk > 1 and s.num_steps > 1 else set())
        return [(r, 0) for r in sorted({b * m for b in bs for m in mult})]
    return [(b, 0) for b in bs]  # the three tree-verification ops


def shape_key(op: str, rows: int, s: LaunchShapes) -> str:
    """The key the op's hook computes for this call (ops/configs `wins` are filed under it)."""
    from . import arch

    if op == "lm_head_gemv":
        from .lm_head_gemv import shape_key as key

        return key(rows, s.lm_head_rows, s.hidden)
    if op in ("draft_topk1", "topk_rows"):
        from .draft_topk import shape_key as key

        return key(rows, s.draft_vocab, 1 if op == "draft_topk1" else s.topk)
    return arch.tree_shape_key(rows, s.num_draft_tokens)


def ours(mode: str, table: dict, table_op: str, key: str) -> bool:
    """The kernel switch as the hooks apply it (arch.use_ours), with the mode passed in."""
    if mode != "auto":
        return mode == "ours"
    wins = table.get("ops", {}).get(table_op, {}).get("wins", [])
    return "*" in wins or key in wins


def plan(s: LaunchShapes, mode: str, table: dict, hooks: set[str] | None = None) -> list[Variant]:
    """Every launch of ours this deployment can reach: the ops whose hook is installed (`hooks`, default
    all), at the rows above, where the switch (mode auto|ours|upstream, `table`) picks our kernel."""
    out = []
    for op, (hook, table_op) in OPS.items():
        if hooks is not None and hook not in hooks:
            continue
        if op in ("lm_head_gemv",) and not (s.lm_head_rows and s.hidden):
            continue
        if op in ("draft_topk1", "topk_rows") and not s.draft_vocab:
            continue
        for rows, col in _rows(op, s):
            key = shape_key(op, rows, s)
            if ours(mode, table, table_op, key):
                out.append(Variant(op, rows, col, key))
    return out


TREE_OPS = ("argmax_verify", "verify_greedy", "tree_sampling")


def with_steps(s: LaunchShapes, steps: int) -> LaunchShapes:
    """The launch's shapes in the adaptive runtime state of `steps` (a chain: N = steps + 1, as SGLang 0.5.23's
    AdaptiveController.init_states builds it)."""
    return replace(s, num_steps=steps, num_draft_tokens=steps + 1)


def plan_states(s: LaunchShapes, steps: list[int], mode: str, table: dict,
                hooks: set[str] | None = None) -> list[tuple[LaunchShapes, list[Variant]]]:
    """`plan` for the launch, then for each other adaptive candidate step (topk 1 only: SGLang's adaptive mode is a
    chain) the variants not planned already. A tree op's variant is new at a new N even under the same table key
    (N is a constexpr of the kernels); the draft-head ops' rows and columns do not depend on N beyond their key."""
    states = [s] + [with_steps(s, k) for k in sorted(set(steps)) if s.topk == 1 and k >= 0 and k != s.num_steps]
    seen, out = set(), []
    for st in states:
        fresh = []
        for v in plan(st, mode, table, hooks):
            ident = (v.op, v.rows, v.column, v.key, st.num_draft_tokens if v.op in TREE_OPS else 0)
            if ident not in seen:
                seen.add(ident)
                fresh.append(v)
        out.append((st, fresh))
    return out


# ---- running the plan -------------------------------------------------------------------------------


@dataclass(slots=True)
class WarmupResult:
    launches: int = 0
    by_op: dict = field(default_factory=dict)  # op -> launches
    compiled: int | None = None  # new Triton kernels in our kernels' caches (None: interpreter, not counted)
    guarded: int = 0  # launches a launcher's guard refused (the hook would hand those to SGLang)
    skipped_memory: int = 0  # variants left out: their dummy inputs would not fit the memory budget
    error: str = ""  # the first unexpected error (warm-up stops there)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}

    def add(self, other: "WarmupResult") -> "WarmupResult":
        """This result plus another run's (one per adaptive state); the first error stays."""
        self.launches += other.launches
        for op, n in other.by_op.items():
            self.by_op[op] = self.by_op.get(op, 0) + n
        self.compiled = (self.compiled + other.compiled if self.compiled is not None and other.compiled is not None
                         else None)
        self.guarded += other.guarded
        self.skipped_memory += other.skipped_memory
        self.error = self.error or other.error
        self.seconds += other.seconds
        return self


def _jit_functions():
    """Our @triton.jit kernels (JITFunction objects) across the op modules."""
    from triton.runtime.jit import JITFunction

    from . import argmax_verify, draft_topk, lm_head_gemv, tree_sampling, verify_greedy

    seen = {}
    for mod in (lm_head_gemv, draft_topk, argmax_verify, verify_greedy, tree_sampling):
        for v in vars(mod).values():
            if isinstance(v, JITFunction):
                seen[id(v)] = v
    return list(seen.values())


def compiled_count() -> int | None:
    """Compiled variants held by our kernels' Triton caches in this process (None under the interpreter)."""
    try:
        fns = _jit_functions()
    except Exception:
        return None
    if not fns:
        return None
    total = 0
    for fn in fns:
        caches = getattr(fn, "device_caches", None)
        if caches is None:
            return None
        for entry in caches.values():
            total += len(entry[0])
    return total


def _bytes(op: str, rows: int, s: LaunchShapes) -> int:
    """Dummy input bytes of one launch (the buffers are allocated once per op, at its largest launch)."""
    if op == "lm_head_gemv":
        return rows * (s.hidden * 2 + s.lm_head_rows * 4) + s.lm_head_rows * s.hidden * 2
    if op in ("draft_topk1", "topk_rows"):
        return rows * s.draft_vocab * 4
    n, v = s.num_draft_tokens, s.target_vocab
    return rows * n * v * 4 * (2 if op == "tree_sampling" else 1)


def _trees(torch, bs: int, s: LaunchShapes, device):
    """Valid trees of N nodes for bs requests: a chain at topk 1, else a tree of topk children per node."""
    import random

    from ._tree import random_tree_parents, tree_from_parents

    n = s.num_draft_tokens
    if s.topk == 1:
        par = [-1] + list(range(n - 1))
    else:
        par = random_tree_parents(random.Random(0), n, s.topk, s.num_steps)
    return tree_from_parents([par] * bs, device=device)


def run(variants: list[Variant], s: LaunchShapes, device, *, weight=None, budget_bytes: int | None = None) -> WarmupResult:
    """Launch each variant once on `device`. weight: the draft lm_head weight to read (else zeros of
    its shape). budget_bytes caps the dummy inputs of one op (variants above it are counted as
    skipped_memory). Stops at the first error that is not a guard's `Unsupported` (a CUDA error is
    sticky: nothing after it would run) and reports it; never raises."""
    import torch

    from .arch import Unsupported

    res = WarmupResult()
    t0 = time.perf_counter()
    before = compiled_count()
    dtype = getattr(torch, s.dtype)
    by_op: dict[str, list[Variant]] = {}
    for v in variants:
        by_op.setdefault(v.op, []).append(v)
    try:
        for op, vs in by_op.items():
            fit = [v for v in vs if budget_bytes is None or _bytes(op, v.rows, s) <= budget_bytes]
            res.skipped_memory += len(vs) - len(fit)
            if not fit:
                continue
            launch = _launcher(torch, op, max(v.rows for v in fit), s, device, dtype, weight)
            for v in fit:
                try:
                    launch(v)
                except Unsupported:
                    res.guarded += 1
                    continue
                res.launches += 1
                res.by_op[op] = res.by_op.get(op, 0) + 1
            del launch
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception as exc:  # reported in the status table; serving goes on with what compiled
        res.error = f"{type(exc).__name__}: {exc}"[:300]
    after = compiled_count()
    res.compiled = after - before if before is not None and after is not None else None
    res.seconds = time.perf_counter() - t0
    return res


def _launcher(torch, op: str, max_rows: int, s: LaunchShapes, device, dtype, weight):
    """A function launching `op` at one variant's rows over buffers sized for `max_rows` (prefix views)."""
    f32, i32, i64 = torch.float32, torch.int32, torch.int64
    if op == "lm_head_gemv":
        from .lm_head_gemv import lm_head_gemv

        w = weight if weight is not None else torch.zeros((s.lm_head_rows, s.hidden), dtype=dtype, device=device)
        hidden = torch.zeros((max_rows, s.hidden), dtype=dtype, device=device)
        kw = {"fp32_rounded": {"out_dtype": f32, "round_to": w.dtype}, "fp32": {"out_dtype": f32}, "16bit": {}}[
            s.lm_head_form]
        return lambda v: lm_head_gemv(hidden[:v.rows], w, **kw)
    if op in ("draft_topk1", "topk_rows"):
        from .draft_topk import draft_topk1, topk_rows

        x = torch.full((max_rows, s.draft_vocab), 1.0 / s.draft_vocab, dtype=f32, device=device)
        if op == "topk_rows":
            return lambda v: topk_rows(x[:v.rows], s.topk)
        pos = torch.zeros(max_rows, dtype=i64, device=device)
        toks = torch.zeros((max_rows, s.num_steps), dtype=i64, device=device) if s.chain_column else None

        def topk1(v):
            return draft_topk1(x[:v.rows], pos[:v.rows], toks[:v.rows] if v.column else None, v.column)

        return topk1
    if op not in ("argmax_verify", "verify_greedy", "tree_sampling"):
        raise ValueError(f"no warm-up launcher for op {op!r}")
    n, depth, vocab = s.num_draft_tokens, s.num_steps + 1, s.target_vocab
    ridx, nxt, sib = _trees(torch, max_rows, s, device)
    cand = torch.zeros((max_rows, n), dtype=i64, device=device)
    big = torch.full((max_rows * n * vocab,), 1.0 / vocab, dtype=f32, device=device)

    def outs(bs):
        return (torch.zeros(bs * n, dtype=i32, device=device), torch.full((bs, depth), -1, dtype=i32, device=device),
                torch.empty(bs, dtype=i32, device=device))

    tree = lambda bs: (cand[:bs], ridx[:bs], nxt[:bs], sib[:bs])  # noqa: E731
    if op == "argmax_verify":
        from . import argmax_verify as av

        # the variants the greedy hook launches (HOOK_INIT / HOOK_LENS: constexprs of the kernels)
        return lambda v: av.argmax_verify_greedy(*outs(v.rows), *tree(v.rows),
                                                 big[:v.rows * n * vocab].view(v.rows * n, vocab), init=av.HOOK_INIT,
                                                 lens=av.HOOK_LENS)
    if op == "verify_greedy":
        from .verify_greedy import verify_tree_greedy

        tp = torch.zeros(max_rows * n, dtype=i64, device=device)
        return lambda v: verify_tree_greedy(*outs(v.rows), *tree(v.rows), tp[:v.rows * n])
    from .tree_sampling import tree_speculative_sampling

    draft = torch.zeros((max_rows * n * vocab,), dtype=f32, device=device)
    coins = torch.full((max_rows, n), 0.5, dtype=f32, device=device)
    final = torch.full((max_rows,), 0.5, dtype=f32, device=device)

    def sample(v):
        bs = v.rows
        probs = big[:bs * n * vocab].view(bs, n, vocab)
        tree_speculative_sampling(*outs(bs), *tree(bs), coins[:bs], final[:bs], probs,
                                  draft[:bs * n * vocab].view(bs, n, vocab))

    return sample
