"""Hook: a request-driven warm-up `kimi_eagle3` in SGLang's --warmups, run before the server accepts traffic.

Upstream target: SGLang's custom warm-ups, `sglang.srt.entrypoints.warmup` (sglang 0.5.23): the registry
  `_warmup_registry`, filled through its public decorator `warmup(name)`, and the field `warmups`
  (--warmups NAME[,NAME], arg_groups/fields/serving.py). http_server.py's FastAPI lifespan calls
  `execute_warmups(disaggregation_mode, names, tokenizer_manager)` (http_server.py:418) in the HTTP server
  process, after the schedulers are ready and before the server accepts requests.
Why: on the H200 (2026-12-01), with the kernel warm-up on (kernel_warmup.py), every server, plain decoding
  too, still compiled SGLang's extend-attention Triton kernel `_fwd_kernel` 3-4 times (1.0-2.1 s each) on
  its first traffic, one at each new concurrency (c 1, 4, 16, 64). Triton specializes the kernel's int
  arguments (the batch size: == 1, divisible by 16, other) and compiles per constexpr variant (prefill,
  the target verify with its custom mask, the draft extend), so the first prefill/verify batch of each
  new kind stalls the batch. Only real requests through the scheduler reach those launches.
How: in the main process, for our launches only (EAGLE/EAGLE3 with a draft: launch_step._step calls
  `apply_to_launch` after the context policy), when SGLANG_KIMI_EAGLE3_WARMUP is `on` (the default):
  register `kimi_eagle3` with `warmup` and declare `warmups` = the operator's names + `kimi_eagle3`
  (None -> "kimi_eagle3", never twice). SGLang then runs `kimi_eagle3` before it listens: `plan()` (pure)
  gives a few request batches - batch sizes 1, 3 (neither 1 nor a multiple of 16), 4, 16, 64 (capped by
  --max-running-requests, and that bound itself; one past --cuda-graph-max-bs-decode too, the first eager
  decode), a short and a
  long prompt under the context length, temperature 0 and 0.7 - each sent as ONE GenerateReqInput (the
  scheduler gets its requests together) with max_new_tokens 8, ignore_eos, so prefill, target verify and
  draft extend run at each size; then the token-count ladder: one request per prompt length that gives the
  target's fused MoE a new (config bucket, token count mod 16) pair (216 lengths, 1-3600 tokens; see MOE_GRID),
  max_new_tokens 2 (left out where no fused-MoE layer of the target runs the Triton fused MoE: row
  `traffic_warmup_moe`, an AFTER hook on BaseSpecWorker.init_cuda_graphs in each scheduler, names the layers'
  method and leaves moe-port<PORT>.json for this coroutine; see NO_TRITON_MOE); then a closed loop at c 2-64
  (LOOP_LEVELS): c concurrent clients of 3 requests each,
  fresh and prefix-hit prompts, random lengths and max_new_tokens, greedy and 0.7 side by side, so the running
  batch shrinks through every size and prefills mix cached and fresh requests. The coroutine logs one line
  and never raises into SGLang (`failed` is a log line; serving goes on, compiling on first use as before).
  Prefill/decode disaggregation: skipped (its bootstrap pairing is not faked here). SGLang's Engine API has no HTTP server and runs no
  --warmups: there this warm-up does not run.
  Compiles during the warm-up happen after the schedulers' `mark_serving_started()`, so SGLang logs them
  ("... took 1.33 s to compile after serving started") and serving_compiles counts them: the status row
  then shows them, before the first real request.
Status row `traffic_warmup` (in each scheduler, from the mark the main process left on the record):
  registered  queued; the launch step decides at resolve_once
  applied     `kimi_eagle3` is in this launch's --warmups (runs in the HTTP server before it accepts requests)
  skipped     SGLANG_KIMI_EAGLE3_WARMUP=off, --tokenizer-worker-num > 1 (those worker processes load no
              plugins), or not an EAGLE/EAGLE3 launch with a draft model
  failed      the main process could not register it (the detail says why)
Remove when: SGLang warms its extend-attention variants (and the speculative extend paths) itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from dataclasses import dataclass

from ...base import ENV_WARMUP, env_choice, logger
from ...status import hookstatus
from .. import registry

NAME = "traffic_warmup"
WARMUP = "kimi_eagle3"
TARGET = "sglang.srt.entrypoints.warmup:_warmup_registry"
MARK = "_kimi_eagle3_traffic_warmup"  # bookkeeping attribute on the record: pickled to the schedulers
APPLIED = "appended to --warmups: runs in the HTTP server before it accepts requests"

LADDER = (1, 3, 4, 16, 64)  # 1, neither 1 nor a multiple of 16, then the concurrency ladder of first traffic
MAX_BS = 64
SHORT, LONG = 31, 512  # prompt tokens: Triton specializes int arguments (token counts among them) on ==1, %16 == 0 and other
TEMPERATURES = (0.0, 0.7)
MAX_NEW_TOKENS = 8  # several verify / draft-extend rounds per request
BATCH_TOKENS = 16384  # prompt tokens of one batch at most: the long prompt shrinks for the big batches
FIRST_ID = 10  # prompt ids are drawn from [FIRST_ID, vocab_size): clear of the usual special ids
SEED = 0


SHARED_PREFIX = 8  # "shared" batches: the first ids of the fresh prompts of their size, then a fresh tail
# The prefix-cache batches, after the fresh short prompts of each size at the first temperature: on the H200
# (2026-12-01) every serving-time `_fwd_kernel` compile left after the fresh-prompt warm-up came from a prefill
# that hit the radix cache (#cached-token 7 / 153 / 918 / 1921, new tokens 159 / 2 / 12 / 13, batches of 1 to 13)
REUSES = ("extend", "shared")

# The token-count ladder, after everything else: one fresh prompt per request, so a prefill forward sees exactly
# that many tokens. SGLang's Triton fused MoE picks its tile config by the nearest entry of its tuned grid to the
# batch's token count M (fused_moe_triton_config.py: `min(configs, key=|k - M|)` over the tuning script's grid below)
# and Triton specializes the kernel's int arguments (M * top_k, the padded sorted-id count, ...) on divisibility by
# 16: a new (grid entry, M mod 16) pair is a new compile. On the H200 (2026-12-01) 30 `fused_moe_kernel` variants of
# about 0.5 s each compiled after serving started, too short for SGLang's 1-s log line. One length per pair that a
# prefill can reach covers every int argument affine in M for every grid entry: 216 prompts, 176K tokens at most.
MOE_GRID = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
LADDER_NEW_TOKENS = 2  # the prefill (and the draft extend after it) is what the ladder is for
# The ladder is for the Triton fused MoE only, and it costs its 176K prefill tokens: 344 s of a start on a tiny
# INT4 target running the Triton WNA16 MoE on an H100 (2026-12-05). SGLang 0.5.23 runs an INT4 compressed-tensors
# target such as Kimi-K2.5's on Marlin (compressed_tensors.py: unless --moe-runner-backend triton, or auto on SM100),
# which compiles nothing per token count. After capture each scheduler names the method of the target's fused-MoE
# layers (MOE_ROW, the file MOE_MARK); the HTTP server's warm-up skips the ladder where every layer runs one of
# NO_TRITON_MOE or the target has none. Anything else, or no fresh file: the ladder runs, as before.
MOE_ROW = "traffic_warmup_moe"
MOE_TARGET = "sglang.srt.speculative.base_spec_worker.BaseSpecWorker.init_cuda_graphs"
MOE_MARK = "moe-port{port}.json"
NO_TRITON_MOE = ("CompressedTensorsWNA16MoE",)  # SGLang 0.5.23's Marlin WNA16 scheme (compressed_tensors_wNa16_moe.py)
_LOADED = time.time()  # this process's plugin import: a marker older than it is another launch's


# The closed loop, last: at each level c, c clients each send LOOP_REQUESTS requests one after another (fresh
# prompts of random lengths, then the previous prompt plus a new tail: a prefix hit), with random max_new_tokens and
# greedy / 0.7 clients side by side. Requests then arrive while others decode and finish one by one, so the running
# batch passes through every size below c and prefills mix cached and fresh requests, as served traffic does and
# the batches above (sent together, finishing together) do not. On the H200 (2026-12-02), after the batches and the
# ladder, the first pass at c 4 and c 16 still compiled `write_req_to_token_pool_triton`, `_small_copy_kernel`
# (0.2 s each) and `assign_req_to_token_pool` (0.1 s; its `bs_upper` is the batch size's next power of two).
LOOP_LEVELS = (2, 4, 8, 16, 32, 64)
LOOP_REQUESTS = 3
LOOP_PROMPT = (8, 300)  # fresh prompt lengths, inclusive
LOOP_TAIL = (1, 40)  # new ids after a reused prompt
LOOP_NEW_TOKENS = (2, 24)


def loop_levels(max_running_requests: int | None = None) -> list[int]:
    """The closed loop's concurrency levels: LOOP_LEVELS up to min(64, --max-running-requests), and that bound."""
    cap = MAX_BS if not max_running_requests or max_running_requests < 1 else min(MAX_BS, max_running_requests)
    return sorted({c for c in LOOP_LEVELS if c <= cap} | ({cap} if cap > 1 else set()))


def loop_requests(c: int, vocab_size: int, room: int | None = None) -> list[list[dict]]:
    """Level c's requests, per client in order: {"input_ids", "max_new_tokens", "temperature"} (pure, seeded)."""
    lo = FIRST_ID if vocab_size > FIRST_ID else 0
    top = LOOP_PROMPT[1] if room is None else max(1, min(LOOP_PROMPT[1], room - LOOP_TAIL[1]))
    out = []
    for w in range(c):
        rng = random.Random(f"{SEED}-loop-{c}-{w}")
        mine, prev = [], None
        for j in range(LOOP_REQUESTS):
            if prev is not None and j % 2:
                ids = prev + [rng.randrange(lo, vocab_size) for _ in range(rng.randint(*LOOP_TAIL))]
            else:
                ids = [rng.randrange(lo, vocab_size) for _ in range(rng.randint(min(LOOP_PROMPT[0], top), top))]
            new = rng.randint(*LOOP_NEW_TOKENS)
            if room is not None:
                ids, new = ids[:max(1, room - new)], min(new, max(1, room - 1))
            mine.append({"input_ids": ids, "max_new_tokens": new, "temperature": TEMPERATURES[w % len(TEMPERATURES)]})
            prev = ids
        out.append(mine)
    return out


def moe_bucket(m: int) -> int:
    """The grid entry SGLang's fused MoE takes its config from for a batch of m tokens (ties: the smaller)."""
    return min(MOE_GRID, key=lambda k: abs(k - m))


def ladder_lengths(room: int | None = None) -> list[int]:
    """The smallest prompt length for each (moe_bucket(M), M mod 16) pair, ascending, each at most `room`."""
    first: dict = {}
    for m in range(1, MOE_GRID[-1] + 16):
        first.setdefault((moe_bucket(m), m % 16), m)
    return sorted(m for m in first.values() if room is None or m <= room)


@dataclass(frozen=True, slots=True)
class Batch:
    size: int  # requests in the one GenerateReqInput
    prompt_len: int  # tokens of each prompt
    temperature: float
    # fresh: new prompts; extend: the last fresh short prompts of this size + 1 new id (a whole-prompt cache hit,
    # one token to extend); shared: their first SHARED_PREFIX ids + a fresh tail (a partial hit); ladder: a fresh
    # prompt of the token-count ladder (not kept for reuse)
    reuse: str = "fresh"
    new_tokens: int = MAX_NEW_TOKENS


def plan(max_running_requests: int | None = None, context_len: int | None = None,
         cuda_graph_max_bs_decode: int | None = None, ladder: bool = True) -> list[Batch]:
    """The request batches of the warm-up, in order (pure).

    Sizes: LADDER up to min(64, --max-running-requests) and that bound itself, plus one past the decode
    CUDA-graph bound (the first batch decoded eagerly) where that is still allowed. Prompt lengths: SHORT and LONG, each kept
    under the context length with room for the new tokens, LONG shrunk so a batch holds at most
    BATCH_TOKENS prompt tokens. Every size at both temperatures. Then the token-count ladder (ladder_lengths), one
    request each at the first temperature, LADDER_NEW_TOKENS new tokens (ladder=False: none)."""
    cap = MAX_BS if not max_running_requests or max_running_requests < 1 else min(MAX_BS, max_running_requests)
    sizes = {s for s in LADDER if s <= cap} | {cap}  # cap: the batch every higher concurrency is served at
    if cuda_graph_max_bs_decode and cuda_graph_max_bs_decode < cap:
        sizes.add(cuda_graph_max_bs_decode + 1)
    room = None if not context_len else context_len - MAX_NEW_TOKENS - 1
    if room is not None and room < 1:
        return []
    out = []
    for temperature in TEMPERATURES:
        for size in sorted(sizes):
            lens = {SHORT, max(SHORT, min(LONG, BATCH_TOKENS // size))}
            short = min(SHORT, room) if room else SHORT
            for n in sorted({min(n, room) if room else n for n in lens}):
                out.append(Batch(size, n, temperature))
                if temperature == TEMPERATURES[0] and n == short and short > SHARED_PREFIX:
                    out += [Batch(size, n, temperature, reuse) for reuse in REUSES]
    if ladder:
        ladder_room = None if room is None else context_len - LADDER_NEW_TOKENS - 1
        out += [Batch(1, n, TEMPERATURES[0], "ladder", LADDER_NEW_TOKENS) for n in ladder_lengths(ladder_room)]
    return out


# ---- which MoE the target runs (the ladder's reason to exist) -------------------------------------------------


def moe_methods(model) -> dict[str, int]:
    """{method: layers} over the model's fused-MoE layers (SGLang's FusedMoE and its subclasses): the layer's
    compressed-tensors scheme where it has one (`layer.scheme`), else its quant_method's class. Empty: no MoE."""
    from sglang.srt.layers.moe.fused_moe_triton.layer import FusedMoE

    out: dict[str, int] = {}
    for m in model.modules():
        if isinstance(m, FusedMoE):
            name = type(getattr(m, "scheme", None) or getattr(m, "quant_method", None) or m).__name__
            out[name] = out.get(name, 0) + 1
    return out


def ladder_wanted(methods: dict[str, int]) -> bool:
    """True unless the target has no fused-MoE layer or every one runs a method that is not the Triton fused MoE."""
    return any(name not in NO_TRITON_MOE for name in methods)


def describe_moe(methods: dict[str, int]) -> str:
    if not methods:
        return "the target has no fused-MoE layer: the token-count ladder is skipped"
    names = ", ".join(f"{k} x{v}" for k, v in sorted(methods.items()))
    if ladder_wanted(methods):
        return f"the target's fused-MoE layers run {names}: the token-count ladder runs (Triton fused MoE configs)"
    return f"the target's fused-MoE layers run {names} (Marlin, no Triton fused MoE): the token-count ladder is skipped"


def _moe_mark_path(port):
    from .runtime_status import status_dir

    return status_dir() / MOE_MARK.format(port=port)


def _after_cuda_graphs(result, worker=None, *args, **kwargs):
    """AFTER BaseSpecWorker.init_cuda_graphs (each scheduler of our launches): name the target's MoE method in the
    row and the marker file the HTTP server's warm-up reads. Never raises."""
    try:
        from ..launch_record import our_launch

        if our_launch() is not True:
            hookstatus.record(MOE_ROW, MOE_TARGET, "skipped", "not an EAGLE/EAGLE3 launch with a draft model")
            return result
        model = getattr(getattr(getattr(worker, "_target_worker", None), "model_runner", None), "model", None)
        if model is None:
            hookstatus.record(MOE_ROW, MOE_TARGET, "skipped", f"{type(worker).__name__} has no target model runner "
                              "here: the token-count ladder runs")
            return result
        methods = moe_methods(model)
        from sglang.srt.runtime_context import get_server_args

        from ...atomic import write_atomic

        write_atomic(_moe_mark_path(get_server_args().port), json.dumps(
            {"pid": os.getpid(), "written": time.time(), "methods": methods, "ladder": ladder_wanted(methods)}) + "\n",
            mkdir=True)
        hookstatus.record(MOE_ROW, MOE_TARGET, "applied", describe_moe(methods))
    except Exception as exc:  # never break serving for a warm-up's shortcut: the ladder then runs
        hookstatus.record(MOE_ROW, MOE_TARGET, "failed", f"{type(exc).__name__}: {exc}; the token-count ladder runs"[:300])
    return result


def read_moe_mark(port) -> tuple[bool, str]:
    """HTTP server: (run the ladder?, why). No marker, one older than this process, or an unreadable one: run it."""
    try:
        path = _moe_mark_path(port)
        if path.stat().st_mtime < _LOADED:
            return True, "the schedulers' MoE marker is another launch's"
        doc = json.loads(path.read_text())
        methods = {str(k): int(v) for k, v in doc["methods"].items()}
        return ladder_wanted(methods), describe_moe(methods)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return True, f"no MoE marker from the schedulers ({type(exc).__name__})"


def prompts(batch: Batch, vocab_size: int, rng: random.Random, last: dict | None = None) -> list[list[int]]:
    """`batch.size` prompts of ids in [FIRST_ID, vocab_size). fresh: `batch.prompt_len` new ids each (no prefix-cache
    hits between requests), remembered in `last` by size; extend / shared: built on `last[size]` (see Batch)."""
    lo = FIRST_ID if vocab_size > FIRST_ID else 0
    last = {} if last is None else last

    def ids(n):
        return [rng.randrange(lo, vocab_size) for _ in range(n)]

    base = last.get(batch.size)
    if batch.reuse == "extend" and base:
        return [p + ids(1) for p in base]
    if batch.reuse == "shared" and base:
        return [p[:SHARED_PREFIX] + ids(len(p) - SHARED_PREFIX) for p in base]
    out = [ids(batch.prompt_len) for _ in range(batch.size)]
    if batch.reuse == "fresh" and batch.prompt_len == min(SHORT, batch.prompt_len):
        last[batch.size] = out
    return out


# ---- the coroutine SGLang runs -------------------------------------------------------------------------


def _bounds(tokenizer_manager) -> dict:
    """plan()'s bounds from the HTTP server's TokenizerManager: its record (resolved values: the record's own
    fields keep the operator's input) and the context length the schedulers reported."""
    sa = getattr(tokenizer_manager, "server_args", None)

    def resolved(field):
        try:
            from sglang.srt.arg_groups.overrides import resolution_result

            return resolution_result(sa, field)
        except Exception:
            return getattr(sa, field, None)

    ctx = getattr(tokenizer_manager, "max_req_input_len", None) or getattr(tokenizer_manager, "context_len", None)
    return {"max_running_requests": resolved("max_running_requests"), "context_len": ctx,
            "cuda_graph_max_bs_decode": resolved("cuda_graph_max_bs_decode")}


async def kimi_eagle3(disaggregation_mode: str, tokenizer_manager) -> None:
    """SGLang's --warmups entry `kimi_eagle3`: send the planned batches in order, drain each. Never raises."""
    log = logger()
    if disaggregation_mode not in (None, "null"):
        log.info("traffic warm-up (skipped): disaggregation mode %s (its bootstrap pairing is not faked here)",
                 disaggregation_mode)
        return
    t0, sent, done = time.perf_counter(), 0, 0
    try:
        from sglang.srt.managers.io_struct import GenerateReqInput

        vocab = int(tokenizer_manager.model_config.vocab_size)
        bounds = _bounds(tokenizer_manager)
        wanted, moe = read_moe_mark(getattr(getattr(tokenizer_manager, "server_args", None), "port", None))
        batches = plan(**bounds, ladder=wanted)
        rng, last = random.Random(SEED), {}
        for b in batches:
            req = GenerateReqInput(input_ids=prompts(b, vocab, rng, last),
                                   sampling_params={"max_new_tokens": b.new_tokens, "temperature": b.temperature,
                                                    "top_p": 1.0, "ignore_eos": True})
            sent += b.size
            async for _ in tokenizer_manager.generate_request(req, None):
                pass
            done += 1
        ctx = bounds["context_len"]
        room = None if not ctx else ctx - 1
        levels = loop_levels(bounds["max_running_requests"])

        async def client(reqs):
            for r in reqs:
                req = GenerateReqInput(input_ids=r["input_ids"],
                                       sampling_params={"max_new_tokens": r["max_new_tokens"], "top_p": 1.0,
                                                        "temperature": r["temperature"], "ignore_eos": True})
                async for _ in tokenizer_manager.generate_request(req, None):
                    pass

        for c in levels:
            per_client = loop_requests(c, vocab, room)
            sent += sum(map(len, per_client))
            await asyncio.gather(*(client(reqs) for reqs in per_client))
    except Exception as exc:  # SGLang would stop the server's start-up: serving must go on
        log.warning("traffic warm-up (failed): %s: %s after %d batches (%d requests sent) in %.1f s; serving goes "
                    "on, compiling on first use", type(exc).__name__, exc, done, sent, time.perf_counter() - t0)
        _mark_done(tokenizer_manager, f"failed after {done} batches")
        return
    _mark_done(tokenizer_manager, f"applied: {done} batches, {sent} requests")
    ladder = [b.prompt_len for b in batches if b.reuse == "ladder"]
    log.info("traffic warm-up (applied): %d batches, %d requests in %.1f s (sizes %s, temperatures %s, prefix-cache "
             "hits at every size, %d single prompts of %s tokens (%s); closed loop at c %s)", done, sent,
             time.perf_counter() - t0, sorted({b.size for b in batches}), list(TEMPERATURES), len(ladder),
             f"{ladder[0]}-{ladder[-1]}" if ladder else "no", moe, ",".join(map(str, levels)) or "none")


def _mark_done(tokenizer_manager, detail: str) -> None:
    """The marker the schedulers' serving_compiles row splits its count at (compiles after the warm-up)."""
    from . import serving_compiles

    port = getattr(getattr(tokenizer_manager, "server_args", None), "port", None)
    if port is not None:
        serving_compiles.mark_warmup_done(port, detail)


# ---- the launch step's part and the status row ----------------------------------------------------------


def install() -> None:
    from . import runtime_status

    hookstatus.record(NAME, TARGET, "registered", "the launch step adds `kimi_eagle3` to --warmups of EAGLE/EAGLE3 "
                      "launches at resolve_once")
    runtime_status.on_publish(confirm_in_scheduler)
    if env_choice(ENV_WARMUP) == "off":
        hookstatus.record(MOE_ROW, MOE_TARGET, "skipped", f"{ENV_WARMUP}=off: no traffic warm-up to shorten")
    else:
        registry.register(MOE_ROW, MOE_TARGET, _after_cuda_graphs, "after")


def with_ours(names: str | None) -> str:
    """--warmups with `kimi_eagle3` appended once: None -> "kimi_eagle3", "voice_chat" -> "voice_chat,kimi_eagle3"."""
    kept = [n.strip() for n in (names or "").split(",") if n.strip()]
    return ",".join(kept if WARMUP in kept else [*kept, WARMUP])


def apply_to_launch(server_args) -> tuple[str, str]:
    """Main process, our launches only (launch_step._step): register the warm-up and declare --warmups.
    Returns (state, detail), also left on the record for the schedulers. Never raises: the launch goes on."""
    try:
        from sglang.srt.arg_groups.overrides import declare_resolution, resolving_view

        if env_choice(ENV_WARMUP) == "off":
            done = ("skipped", f"{ENV_WARMUP}=off: --warmups left as given")
        elif (getattr(resolving_view(server_args), "tokenizer_worker_num", 1) or 1) > 1:
            done = ("skipped", "--tokenizer-worker-num > 1: SGLang's tokenizer worker processes run --warmups without "
                    "loading plugins (they would not find `kimi_eagle3`); --warmups left as given")
        else:
            from sglang.srt.entrypoints.warmup import _warmup_registry, warmup

            if _warmup_registry.get(WARMUP) is not kimi_eagle3:
                warmup(WARMUP)(kimi_eagle3)
            current = getattr(resolving_view(server_args), "warmups", None)
            if with_ours(current) != current:
                declare_resolution(server_args, "sglang-kimi-eagle3.traffic_warmup", warmups=with_ours(current))
                done = ("applied", f"`{WARMUP}` {APPLIED}")
            else:  # the operator named it already
                done = ("applied", f"`{WARMUP}` already in --warmups: {APPLIED.split(': ', 1)[1]}")
    except Exception as exc:
        done = ("failed", f"{type(exc).__name__}: {exc}; serving compiles on first use")
    setattr(server_args, MARK, done)
    hookstatus.record(NAME, TARGET, *done)
    return done


def not_our_launch() -> None:
    """Main process, every other launch: nothing registered, --warmups untouched; the row says so."""
    hookstatus.record(NAME, TARGET, "skipped", "not an EAGLE/EAGLE3 launch with a draft model: --warmups left as given")


def confirm_in_scheduler() -> None:
    """The schedulers of our launches: the row says what the main process did, checked against --warmups."""
    from sglang.srt.runtime_context import get_server_args, get_serving

    done = getattr(get_server_args(), MARK, None)
    warmups = get_serving().warmups  # the published value (the record keeps the operator's input)
    names = [n.strip() for n in (warmups or "").split(",")]
    if done is None:
        hookstatus.record(NAME, TARGET, "skipped", "the launch step did not run in the main process (plugins "
                          "loaded after resolve_once?): no `kimi_eagle3` warm-up")
    elif done[0] == "applied" and WARMUP not in names:
        hookstatus.record(NAME, TARGET, "failed", f"declared, but this launch's --warmups is {warmups!r}")
    elif done[0] == "applied":
        hookstatus.record(NAME, TARGET, "applied", f"{done[1]} (an Engine API launch has none and runs no --warmups); "
                          "it runs in the HTTP server, not here: its outcome is that process's log line "
                          "`traffic warm-up (applied|failed|skipped): ...`")
    else:
        hookstatus.record(NAME, TARGET, *done)
