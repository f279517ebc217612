"""Hook: this plugin's adaptive-steps controller inside SGLang's per-batch-size slot, for the tables it wrote.

Upstream target: sglang/srt/speculative/adaptive_spec_params.py `AdaptiveStepSlot.__init__` (0.5.23), through
  HookRegistry (AROUND). SGLang builds one slot per batch-size key of --speculative-adaptive-config with
  cfg = {**top-level keys, **the key's entry}, in every scheduler (TP rank) of a launch with
  --speculative-adaptive; `AdaptiveController.on_verify_complete` feeds each verify's accepted-draft counts to
  the slot's `update`, which returns True when `current_steps` changed (SGLang then switches runtime state).
Why: SGLang's slot recomputes every 5 batches and at steps 0 probes up at each recompute: on the H200
  (2026-12-02) a c-128 server switched state 532 times in ~3 minutes and ran at 0.41x of plain decoding.
How: after SGLang's __init__, a slot whose entry carries `kimi_eagle3` (only tables the launch step wrote:
  integration/adaptive_default.py, planner/adaptive_table.py) gets planner/adaptive_control.Controller as its
  `update` (an instance attribute): dwell and hysteresis in batches, cost-based choice, bounded probes at
  steps 0 with exponential back-off. Every rank gets the same counts, so every rank reaches each decision point at
  the same batch. Any other slot (SGLang's default table, the operator's file) is left exactly as SGLang made it.
  Each switch is counted (hookstatus.count: `adaptive_control`, bucket `steps A->B`, reason probe / back / explore /
  cost), so the status file shows the switches per process.
  Measured costs (SGLANG_KIMI_EAGLE3_ADAPTIVE_MEASURE, default on): each call hands the controller the wall time since
  this process's previous verify result (one decode step in steady state; an interval holding a prefill's result is
  not read: the `adaptive_clock` row, a BEFORE hook on SGLang's prefill result processing; nor one holding a Triton
  compile: serving_compiles calls interval_broken) and a sync function: at
  TP 1 the identity, at TP > 1 a broadcast of TP rank 0's summary over SGLang's TP CPU group (gloo), called by every
  rank at the same batch counts; where the TP group cannot be read, no sync: that rank keeps modelled costs (the same
  SGLang reads its group the same way on every rank, so in practice all or none).
  Each sync is counted (bucket `measured`).
  Pooled learning (SGLANG_KIMI_EAGLE3_ADAPTIVE_POOL, default on): every slot of a process gets the same
  planner/adaptive_control.Shared, so the slots decide on one acceptance estimate, one probe back-off and each
  other's cost readings (on the H200, 2026-12-04, each slot learning alone ran a q 0.3 server at 0.72-0.91x of plain).
  The off-state's draft extend (SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=skip, opt-in): while every slot of the process is
  at steps 0, SGLang's own SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND is set in this process (SGLang reads it every
  step), so the off-state stops running a draft forward per step; a slot leaving 0 first has its switch held for two
  verified batches with the extend back on (planner/adaptive_control.OffSkip). Outputs stay exact; the draft KV of the
  tokens decoded while skipping is not written (acceptance after a step up). An operator's own setting of SGLang's
  variable wins (never touched). Row `offstate_extend`.
Status rows: `adaptive_control` registered/applied (HookRegistry patched the target), skipped
  (SGLANG_KIMI_EAGLE3_ADAPTIVE=off), failed (the target is missing or was not patched); `adaptive_clock` the same, also
  skipped with SGLANG_KIMI_EAGLE3_ADAPTIVE_MEASURE=off; `adaptive_states` measures each runtime state SGLang builds
  (below), whatever the table and the switch.
Remove when: SGLang's slot has dwell, hysteresis and probe back-off of its own.
"""

from __future__ import annotations

import os
import time
import types
from collections import deque

from ...base import (
    ENV_ADAPTIVE,
    ENV_ADAPTIVE_MEASURE,
    ENV_ADAPTIVE_POOL,
    ENV_ADAPTIVE_RESERVE,
    ENV_OFFSTATE_EXTEND,
    env_choice,
    logger,
)
from ...errors import UserError
from ...status import hookstatus
from .. import registry

NAME = "adaptive_control"
TARGET = "sglang.srt.speculative.adaptive_spec_params.AdaptiveStepSlot.__init__"
KEY = "kimi_eagle3"


# The memory of each runtime state SGLang builds for adaptive mode, measured where it is built: the growth of this
# process's CUDA caching allocator (reserved bytes, its CUDA-graph pools included) across
# EAGLEWorkerV2.build_adaptive_runtime_state. SGLang's own log line measures the whole GPU's free memory, which other
# processes starting beside it move (on 2026-12-03 the same steps-0 state read 0.72 / 1.37 / 2.45 GB in three
# servers). A measurement only: the state is built exactly as SGLang builds it, for any table (ours or not).
STATES = "adaptive_states"
STATES_TARGET = "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.build_adaptive_runtime_state"
_MEASURED: dict[int, float] = {}


# The measured costs' clock (below, _update): a prefill batch's result between two decode results means the interval
# holds the prefill's time too; such an interval is not read (the next decode result starts a new one).
CLOCK = "adaptive_clock"
CLOCK_TARGET = ("sglang.srt.managers.scheduler_components.batch_result_processor.SchedulerBatchResultProcessor"
                ".process_batch_result_prefill")


# The off-state's draft extend: SGLang's variable (read by EAGLEWorkerV2.forward_batch_generation at every steps-0
# step), which this process sets while skipping (OffSkip) under SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=skip.
EXTEND = "offstate_extend"
SKIP_VAR = "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND"
EXTEND_TARGET = f"sglang.srt.environ.envs.{SKIP_VAR}"


# The decode KV reserve (planner/adaptive_control.Reserve): SGLang's function, read at every decode batch's allocation
# (eagle_utils.eagle_prepare_for_decode) and by the scheduler's memory check and retraction
# (schedule_batch.ScheduleBatch.new_tokens_required_next_decode), both through names imported from allocation_sizing
# (HookRegistry re-binds them); each decode forward's steps are read where SGLang's worker takes its slot's state.
RESERVE = "adaptive_reserve"
RESERVE_TARGET = "sglang.srt.mem_cache.allocation_sizing.get_alloc_reserve_per_decode"
RESERVE_SITES = ["sglang.srt.mem_cache.allocation_sizing:get_alloc_reserve_per_decode",
                 "sglang.srt.speculative.eagle_utils:get_alloc_reserve_per_decode",
                 "sglang.srt.managers.schedule_batch:get_alloc_reserve_per_decode"]
FORWARD = "adaptive_forward"
FORWARD_TARGET = "sglang.srt.speculative.adaptive_runtime_state.AdaptiveController.activate_step_by_batch"
# the batch each reserve is read for (its size routes it to a slot, as SGLang's worker routes it at the forward): the
# decode allocation and the scheduler's memory check / retraction (a subset of the running batch)
BATCH = "adaptive_reserve_batch"
BATCH_TARGET = "sglang.srt.speculative.eagle_utils.eagle_prepare_for_decode"
CHECK = "adaptive_reserve_check"
CHECK_TARGET = "sglang.srt.managers.schedule_batch.ScheduleBatch.new_tokens_required_next_decode"


def install() -> None:
    registry.register(STATES, STATES_TARGET, _build_state, "around")
    if env_choice(ENV_ADAPTIVE) == "off":
        hookstatus.record(NAME, TARGET, "skipped", f"{ENV_ADAPTIVE}=off: SGLang's own slot logic everywhere")
        hookstatus.record(CLOCK, CLOCK_TARGET, "skipped", f"{ENV_ADAPTIVE}=off: no controller to time")
        hookstatus.record(EXTEND, EXTEND_TARGET, "skipped", f"{ENV_ADAPTIVE}=off: no controller")
        for name, target in ((RESERVE, RESERVE_TARGET), (FORWARD, FORWARD_TARGET), (BATCH, BATCH_TARGET),
                             (CHECK, CHECK_TARGET)):
            hookstatus.record(name, target, "skipped", f"{ENV_ADAPTIVE}=off: SGLang's reserve")
        return
    registry.register(NAME, TARGET, _init, "around")
    try:
        reserve_off = env_choice(ENV_ADAPTIVE_RESERVE) == "off"
    except UserError as exc:  # a value we do not accept (the launch step refuses it): the row says so, no raise here
        reserve_off = True    # (SGLang would swallow it and leave the hooks after it unregistered)
        hookstatus.record(RESERVE, RESERVE_TARGET, "failed", f"{exc}; SGLang's reserve")
    if reserve_off:
        for name, target in ((RESERVE, RESERVE_TARGET), (FORWARD, FORWARD_TARGET), (BATCH, BATCH_TARGET),
                             (CHECK, CHECK_TARGET)):
            if (hookstatus.get(name) is None or hookstatus.get(name).state != "failed"):
                hookstatus.record(name, target, "skipped", f"{ENV_ADAPTIVE_RESERVE}=off: SGLang's reserve (its "
                                  "largest candidate's) at every decode batch")
    else:
        from . import runtime_status

        runtime_status.watch(RESERVE, RESERVE_SITES)
        registry.register(RESERVE, RESERVE_TARGET, _reserve, "around")
        registry.register(FORWARD, FORWARD_TARGET, _forward, "after")
        registry.register(BATCH, BATCH_TARGET, _prepare, "around")
        registry.register(CHECK, CHECK_TARGET, _check, "around")
    try:
        extend_policy()
    except UserError as exc:  # a value we do not accept: the row says so (SGLang would swallow the raise)
        _OFF[:] = [None]
        hookstatus.record(EXTEND, EXTEND_TARGET, "failed", f"{exc}; SGLang's draft extend at every steps-0 step")
    if env_choice(ENV_ADAPTIVE_MEASURE) == "off":
        hookstatus.record(CLOCK, CLOCK_TARGET, "skipped", f"{ENV_ADAPTIVE_MEASURE}=off: the costs stay modelled")
        return
    registry.register(CLOCK, CLOCK_TARGET, _prefill_result, "before")


def _prefill_result(*args, **kwargs):
    """A prefill batch's result is being processed: the interval to the next decode result holds it, not read."""
    interval_broken()


def interval_broken() -> None:
    """Something that is no decode step stalled this process (serving_compiles: a Triton compile while serving, 0.1-1.4
    s each on the H200 in run 24, where the plugin's warm-up was off): the interval to the next verify result holds
    it, not read."""
    _LAST[0] = None


def _reserved_gb() -> float | None:
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        torch.cuda.synchronize()
        return torch.cuda.memory_reserved() / 1e9
    except Exception:  # a measurement only: never in the way of the build
        return None


def _build_state(original, worker, speculative_num_steps, *args, **kwargs):
    before = _reserved_gb()
    out = original(worker, speculative_num_steps, *args, **kwargs)
    after = _reserved_gb()
    if before is not None and after is not None:
        _MEASURED[int(speculative_num_steps)] = after - before
        hookstatus.record(STATES, STATES_TARGET, "applied", states_detail())
    return out


def states_detail() -> str:
    return ("runtime states built here, growth of this process's CUDA allocator (reserved): "
            + ", ".join(f"steps {s}: {gb:.2f} GB" for s, gb in sorted(_MEASURED.items())))


def _init(original, slot, initial_steps, cfg, *args, **kwargs):
    out = original(slot, initial_steps, cfg, *args, **kwargs)
    entry = cfg.get(KEY) if isinstance(cfg, dict) else None
    if isinstance(entry, dict):
        try:
            attach(slot, entry)
        except Exception as exc:  # a malformed entry: SGLang's own logic stays, the row says why
            _FOREIGN[0] += 1
            hookstatus.record(NAME, TARGET, "failed", f"slot left to SGLang: {type(exc).__name__}: {exc}")
    else:
        _FOREIGN[0] += 1  # SGLang's own slot logic moves its steps: the reserve stays SGLang's in this process
    return out


def attach(slot, entry: dict) -> None:
    """Give one SGLang slot our controller (its `update`), starting at the slot's current steps."""
    from ...planner.adaptive_control import Controller

    slot._kimi_eagle3_ctl = Controller.from_entry(list(slot.candidate_steps), entry, slot.current_steps)
    if env_choice(ENV_ADAPTIVE_MEASURE) == "off":
        slot._kimi_eagle3_ctl.measure = False
    slot._kimi_eagle3_ctl.shared = pool(entry)
    # SGLang's own update, bound: taken back if ours ever raises. A slot attached before (the __init__ hook, then an
    # explicit attach) keeps the one it saved: saving our own _update here would make that hand-back recurse
    if getattr(slot, "_kimi_eagle3_sglang_update", None) is None:
        slot._kimi_eagle3_sglang_update = slot.update
    slot.current_steps = slot._kimi_eagle3_ctl.steps
    slot._kimi_eagle3_sync = None  # made for this controller at its first sync (_slot_sync)
    slot._kimi_eagle3_bs = entry.get("bs")
    slot.update = types.MethodType(_update, slot)
    if not any(s is slot for s in _SLOTS):
        _SLOTS.append(slot)
    off = extend_policy()
    if off is not None:
        hookstatus.record(EXTEND, EXTEND_TARGET, "applied", extend_detail(off))


_POOL: list = []  # [Shared]: this process's slots learn together (one scheduler, one pool)
_SLOTS: list = []  # the slots attached in this process (OffSkip reads their steps)
_OFF: list = []  # [OffSkip or None]: this process's off-state extend policy, resolved once
_DEFER = [False]  # that policy drives the deferred_extend hook (OFFSTATE_EXTEND=defer), not SGLang's skip flag
_FOREIGN = [0]  # slots of this process whose steps SGLang's own logic moves (a table not ours, a malformed entry)
_RES: list = []  # [Reserve]: this process's decode KV reserve (planner/adaptive_control.Reserve), made at first use


def extend_policy():
    """This process's OffSkip under SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=skip, else None (SGLang's extend at every
    steps-0 step, untouched); also None, the variable untouched, where the operator set SGLang's variable. Resolved
    once per process; the row says which."""
    if not _OFF:
        from ...planner.adaptive_control import OffSkip

        mode = env_choice(ENV_OFFSTATE_EXTEND)
        if mode == "keep":
            _OFF.append(None)
            hookstatus.record(EXTEND, EXTEND_TARGET, "skipped", f"{ENV_OFFSTATE_EXTEND}=keep: SGLang's draft extend at "
                              "every steps-0 step")
        elif mode == "defer":  # the deferred_extend hook defers while OffSkip says `skipping` (SGLang's flag untouched)
            _OFF.append(OffSkip())
            _DEFER[0] = True
            hookstatus.record(EXTEND, EXTEND_TARGET, "registered", f"{ENV_OFFSTATE_EXTEND}=defer: the off-state will "
                              "defer its draft extend while every slot of ours that runs often is at steps 0 (row "
                              "deferred_extend)")
        elif SKIP_VAR in os.environ:
            _OFF.append(None)
            hookstatus.record(EXTEND, EXTEND_TARGET, "skipped", f"{SKIP_VAR}={os.environ[SKIP_VAR]} set by the operator: "
                              "left as set")
        else:
            _OFF.append(OffSkip())
            hookstatus.record(EXTEND, EXTEND_TARGET, "registered", f"{ENV_OFFSTATE_EXTEND}=skip: the off-state will "
                              "skip SGLang's draft extend while every slot of ours that runs often is at steps 0")
    return _OFF[0]


def extend_detail(off) -> str:
    if _DEFER[0]:
        return (f"{ENV_OFFSTATE_EXTEND}=defer: the off-state defers its draft extend while every slot that runs often "
                f"is at steps 0 ({'deferring now' if off.skipping else 'not deferring now'}; {off.skipped} batches deferred, "
                f"{off.primes} step ups primed, {off.held} batches of rarely used slots held at 0; flushes: row "
                "deferred_extend)")
    return (f"{ENV_OFFSTATE_EXTEND}=skip: the off-state skips SGLang's draft extend while every slot that runs "
            f"often is at steps 0 ({'skipping now' if off.skipping else 'not skipping now'}; {off.skipped} batches skipped, "
            f"{off.primes} step ups primed, {off.held} batches of rarely used slots held at 0)")


def _set_skip(off) -> None:
    """SGLang's variable as `off` says: "1" while skipping, "0" after (unset before the first skip); written only on a
    change, counted. Under `defer` the deferred_extend hook's switch instead (SGLang extends, the hook defers)."""
    if _DEFER[0]:
        from . import deferred_extend

        if deferred_extend.ACTIVE[0] != off.skipping:
            deferred_extend.ACTIVE[0] = off.skipping
            hookstatus.count(EXTEND, "ours", "defer on" if off.skipping else "defer off")
        return
    now = os.environ.get(SKIP_VAR)
    if off.skipping != (now == "1") and (off.skipping or now is not None):
        os.environ[SKIP_VAR] = "1" if off.skipping else "0"
        hookstatus.count(EXTEND, "ours", "skip on" if off.skipping else "skip off")
        hookstatus.record(EXTEND, EXTEND_TARGET, "applied", extend_detail(off))
        hookstatus.bump()


def _all_zero(off) -> bool:
    """Every slot of this process that counts (`_counts`: it runs often) is at steps 0 (a slot whose step up waits
    counts positive). A positive slot that does not run often is parked at 0 when skipping starts, where its
    candidates hold 0; one whose do not (a slot of a capped table, fixed to the launch's chain above a batch
    size) stays as it is: its next batch, should one come while skipping, drafts once from SGLang's zeroed stubs
    (outputs exact), and skipping stops there."""
    return all(s._kimi_eagle3_ctl.steps == 0 for s in _SLOTS if _counts(off, s))


def _counts(off, s) -> bool:
    """Slot `s` counts for `_all_zero`: it runs often (OffSkip.frequent), or it ran lately and cannot be parked (no 0
    among its candidates). A rarely used positive slot does not keep the extend on: it is parked while skipping."""
    if off.frequent(id(s)):
        return True
    return 0 not in s._kimi_eagle3_ctl.candidates and off.active(getattr(s, "_kimi_eagle3_last", None))


def _park_unvisited(off) -> None:
    """Before the first skipped batch, SGLang's slot goes to steps 0 where it ran no batch within `off.idle_batches`:
    one that never ran with its controller (the launch's steps were no decision); an idle one keeping its controller's
    steps (OffSkip.parked: restored after a prime when its next batch comes)."""
    for s in _SLOTS:
        ctl = s._kimi_eagle3_ctl
        if off.frequent(id(s)) or s.current_steps == 0 or 0 not in ctl.candidates:
            continue
        if ctl.seen == 0:
            ctl.park()
            hookstatus.count(NAME, "ours", f"steps {ctl.history[-1][1]}->0", "park")
        else:
            off.parked[id(s)] = ctl.steps
            hookstatus.count(NAME, "ours", f"steps {ctl.steps}->0", "park, kept")
        s.current_steps = 0


def reserve_state():
    """This process's Reserve, where ours decides every slot (slots attached, none left to SGLang's own logic) and
    SGLANG_KIMI_EAGLE3_ADAPTIVE_RESERVE is on; else None (SGLang's reserve). The switch is read once."""
    if not _SLOTS or _FOREIGN[0]:
        return None
    if not _RES:
        from ...planner.adaptive_control import Reserve

        try:
            off = env_choice(ENV_ADAPTIVE_RESERVE) == "off"
        except UserError:  # refused at the launch step; never raised inside a scheduler
            off = True
        _RES.append(None if off else Reserve())
    return _RES[0]


def _current(off, slot=None) -> list[int]:
    """The steps SGLang reads for `slot` (every slot's without one), and the step up OffSkip holds for it (it reaches
    SGLang after its prime)."""
    if slot is None:
        return [s.current_steps for s in _SLOTS] + (list(off.pending.values()) if off is not None else [])
    return [slot.current_steps] + ([off.pending[id(slot)]] if off is not None and id(slot) in off.pending else [])


_BS = [None]  # the size of the batch whose reserve SGLang is reading (set around its two callers), else None
_PARAMS = [None]  # SGLang's AdaptiveSpeculativeParams of this process (its router), seen at the first decode forward


def _level(res, off) -> int:
    """The reserve's level for the batch being prepared: its slot's (routed as SGLang's worker routes it at the
    forward), or every slot's where the batch or the router is not known."""
    bs, params = _BS[0], _PARAMS[0]
    if bs and params is not None:
        try:
            slot = params._route(bs)
        except Exception:  # SGLang's router moved: every slot's, still exact
            slot = None
        if slot is not None and any(s is slot for s in _SLOTS):
            return res.level(_current(off, slot), id(slot))
    return res.level(_current(off))


def _size(batch, selected=None) -> int | None:
    """The batch's size (the subset's where SGLang checks one), None where it cannot be read (every slot's level)."""
    try:
        return len(batch.reqs) if selected is None else len(selected)
    except Exception:
        return None


def _prepare(original, batch, *args, **kwargs):
    """SGLang allocates a decode batch's KV: its reserve is read for this batch's slot."""
    _BS[0] = _size(batch)
    try:
        return original(batch, *args, **kwargs)
    finally:
        _BS[0] = None


def _check(original, batch, selected_indices=None, *args, **kwargs):
    """SGLang checks that the next decode fits (and retracts until it does): the reserve of that batch's slot."""
    _BS[0] = _size(batch, selected_indices)
    try:
        return original(batch, selected_indices, *args, **kwargs)
    finally:
        _BS[0] = None


_RESERVED = [None]  # (tokens per request, SGLang's) at the latest call: the row is rewritten when it changes


def _reserve(original, *args, **kwargs):
    """SGLang's decode KV reserve per request, or ours (Reserve.tokens) where ours is smaller and in effect: this
    process's slots are all ours and a decode batch has run (before that, the pools are being sized: SGLang's)."""
    full = original(*args, **kwargs)
    res = reserve_state()
    if res is None or not res.ran or _RES_FAILED[0]:
        return full
    try:
        ours = res.tokens(_level(res, _OFF[0] if _OFF else None))
    except Exception as exc:  # SGLang's reserve from now on (larger: it covers every state), the row says why
        _RES_FAILED[0] = True
        hookstatus.record(RESERVE, RESERVE_TARGET, "failed", f"raised, SGLang's reserve back: {type(exc).__name__}: {exc}")
        return full
    out = min(ours, full)
    if _RESERVED[0] != (out, full):
        _RESERVED[0] = (out, full)
        hookstatus.record(RESERVE, RESERVE_TARGET, "applied", reserve_detail(res))
        hookstatus.bump()
    return out


_RES_FAILED = [False]


def reserve_detail(res) -> str:
    now = _RESERVED[0]
    head = (f"decode KV reserved per request ahead of the committed tokens: {now[0]} now (SGLang's {now[1]})"
            if now else "decode KV reserved per request: SGLang's until the first decode batch")
    return f"{head}; follows the steps that can run; {res.arms} step ups waited one verified batch for it"


def _forward(result, controller, *args, **kwargs):
    """SGLang's worker has taken the state its next decode batch runs at: the reserve remembers it (in flight)."""
    res = reserve_state()
    if res is None or _RES_FAILED[0]:
        return None
    try:
        if _PARAMS[0] is None:
            _PARAMS[0] = getattr(controller, "params", None)
        res.forward(controller.worker.speculative_num_steps)
    except Exception as exc:  # never into SGLang's forward: SGLang's reserve from now on (it covers every state)
        _RES_FAILED[0] = True
        hookstatus.record(RESERVE, RESERVE_TARGET, "failed", f"the forward's steps unreadable, SGLang's reserve back: "
                          f"{type(exc).__name__}: {exc}")
    return None


def _apply_armed(slot) -> bool:
    """A decode batch was verified: the step ups armed before it reach SGLang's slots (their next batches are
    prepared with the raised reserve already). True when `slot` itself was armed (its batch ran at the old steps)."""
    res = _RES[0] if _RES else None
    if res is None or not res.armed:
        return False
    ready = res.verified()
    for s in _SLOTS:
        if id(s) in ready:
            s.current_steps = ready[id(s)]
    return id(slot) in ready


def pool(entry: dict):
    """This process's Shared (made from the first slot's entry), None with SGLANG_KIMI_EAGLE3_ADAPTIVE_POOL=off."""
    from ...planner.adaptive_control import Shared

    if env_choice(ENV_ADAPTIVE_POOL) == "off":
        return None
    if not _POOL:
        _POOL.append(Shared.from_entry(entry))
    return _POOL[0]


_CORR: dict = {}  # slot batch size -> the synced measured / modelled step time per steps, as the status row shows it
# the latest switches of this process's controllers with their reasons, as the status row shows them: the counters say
# how often, these say why (run 37's c-8 rounds at steps 3 and 7 could be explained only from the code)
_SWITCHES: deque = deque(maxlen=6)


def _corr_text(ctl, s: int, c: float) -> str:
    """`steps 0 x1.37 (212 read here, latest median 26.1 ms; priced x0.53)`: the synced ratio, this process's
    readings of it and the median of its latest raw ones (Controller.wall_ms: the step clock's medians are their
    comparison), and for the off-state the ratio it is priced at where the positive readings overrule it
    (Controller.off_ratio)."""
    priced = ctl.off_ratio(c) if s == 0 else c
    ms = ctl.wall_ms(s)
    return (f"steps {s} x{c:.2f} ({ctl.reads.get(s, 0)} read here{f', latest median {ms:.1f} ms' if ms else ''}"
            f"{f'; priced x{priced:.2f}' if priced != c else ''})")


def _note_measured(slot, ctl) -> None:
    """The adaptive_control row's detail gains the synced measured / modelled step times, per slot, and what the
    pool has read (an applied row only: a failed one keeps its reason)."""
    if ctl.corr:
        _CORR[slot._kimi_eagle3_bs] = ", ".join(_corr_text(ctl, s, c) for s, c in sorted(ctl.corr.items()))
    row = hookstatus.get(NAME)
    if row is not None and row.state == "applied":
        head = row.detail.split("; ")[0]
        detail = head
        if _CORR:
            parts = "; ".join(f"bs {k}: {v}" for k, v in sorted(_CORR.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))
            detail += f"; measured step time / modelled: {parts}"
        if _WARM_DROPS[0]:
            detail += f" (the traffic warm-up's readings dropped in {_WARM_DROPS[0]} slots)"
        if _SWITCHES:
            detail += f"; latest switches: {', '.join(_SWITCHES)}"
        sh = ctl.shared
        if sh is not None and sh.last:
            detail += (f"; pooled: acceptance alpha {sh.alpha():.2f} over {sh.count} batches, "
                       f"{sh.probes} probes ({sh.failed_probes} did not pay)")
            if not_paying(sh):
                detail += f"; {NOT_PAYING}"
                if not _WARNED:
                    _WARNED.append(True)
                    logger().warning("adaptive steps: %s (acceptance alpha %.2f)", NOT_PAYING, sh.alpha())
        hookstatus.record(NAME, row.target, "applied", detail)
        hookstatus.bump()


# What the operator is told when the pooled probes keep failing: the off-state then carries the server, and it costs
# more than a plain step (on the H200, 2026-12-04: 1.04-1.19x on the deployment-shaped pair).
NOT_PAYING = ("speculation has not paid here (3 probes in a row did not): the server runs SGLang's off-state, which "
              "costs more than a plain decoding step; launched without EAGLE it would serve faster "
              "(`sglang-kimi-eagle3 plan` on a bench of this traffic says so with numbers)")
_WARNED: list = []  # [True] once this process has logged it


def not_paying(sh) -> bool:
    """Three probes in a row, any slot's, did not pay."""
    return sh.streak >= 3


# the previous verify result's time in this process (every slot's: one decode step runs one slot's batch)
_LAST: list = [None]
_SYNC: list = []  # [the sync function of this process, or None], resolved at the first call
MAX_WALL_S = 5.0  # a gap above this is idle time, not a step


def broadcast_summary(values: list[float], group, src: int) -> list[float]:
    """TP rank `src`'s values on every rank of `group` (a torch.distributed CPU group, gloo)."""
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(v) for v in values], dtype=torch.float64)
    dist.broadcast(t, src=src, group=group)
    return t.tolist()


def _identity(values: list[float]) -> list[float]:
    return values


def resolve_sync():
    """This process's sync function: the identity in a process without torch.distributed or with a TP group of one
    rank, else a broadcast from the TP group's first rank over its CPU group; None where torch.distributed is up but
    SGLang's TP group cannot be read (measurements then never decide on this rank; every rank runs the same SGLang,
    so in practice all read it or none does)."""
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return _identity
        from sglang.srt.distributed import parallel_state as ps

        group = ps.get_tp_group()
        if group.world_size <= 1:
            return _identity
        cpu, src = group.cpu_group, group.first_rank
    except Exception as exc:
        hookstatus.count(NAME, "ours", "measured", f"off: TP group not readable ({type(exc).__name__})")
        return None
    return lambda values: broadcast_summary(values, cpu, src)


def _counted(fn):
    def sync(values):
        out = fn(values)
        hookstatus.count(NAME, "ours", "measured", "sync")
        return out

    return sync


def _sync_fn():
    """This process's sync function (resolve_sync, each call counted), resolved once."""
    if not _SYNC:
        fn = resolve_sync()
        _SYNC.append(None if fn is None else _counted(fn))
    return _SYNC[0]


_WARM_DROPS = [0]  # slots of this process that dropped the traffic warm-up's readings (the row says how many)
_WARM_ENDED = [False]  # serving_compiles saw the end of the server's traffic warm-up (its marker) in this process


def traffic_warmup_ended() -> None:
    """serving_compiles, when it first sees the traffic warm-up's end marker."""
    _WARM_ENDED[0] = True


def _warm_ended() -> bool:
    return _WARM_ENDED[0]


def _slot_sync(slot):
    """The slot's sync function: the process's (_sync_fn), carrying one more value, TP rank 0's "the traffic warm-up
    has ended"; the first time it comes back set, the slot forgets its readings (Controller.drop_warm) and this
    sync applies none (they were the warm-up's). None where the process has no sync. Made once per slot."""
    fn = getattr(slot, "_kimi_eagle3_sync", None)
    if fn is not None:
        return fn
    base = _sync_fn()
    if base is None:
        return None
    ctl = slot._kimi_eagle3_ctl

    def sync(values):
        if ctl.warm_dropped:
            return base(values)
        out = base(list(values) + [1.0 if _warm_ended() else 0.0])
        if out[-1] > 0:
            ctl.drop_warm()
            _CORR.pop(slot._kimi_eagle3_bs, None)
            _WARM_DROPS[0] += 1
            hookstatus.count(NAME, "ours", "measured", "warm-up readings dropped")
            return [0.0] * (len(out) - 1)
        return out[:-1]

    slot._kimi_eagle3_sync = sync
    return sync


def _update(slot, num_correct_drafts_per_req) -> bool:
    ctl = slot._kimi_eagle3_ctl
    now = time.perf_counter()
    last, _LAST[0] = _LAST[0], now
    wall_us = (now - last) * 1e6 if last is not None and now - last < MAX_WALL_S else None
    off = _OFF[0] if _OFF else None
    if _apply_armed(slot):  # this slot's armed step up reaches SGLang now (counted when armed); the batch just
        return True         # verified ran at the old steps: its controller does not read it
    if off is not None and num_correct_drafts_per_req:
        try:
            held = _off_step(slot, off)
        except Exception as exc:  # never take the scheduler down: SGLang's extend everywhere from now on, held switches
            _OFF[0] = None        # reach SGLang (their controllers are there already)
            os.environ.pop(SKIP_VAR, None)
            if _DEFER[0]:
                from . import deferred_extend

                deferred_extend.ACTIVE[0] = False  # its stash is flushed at the next extend
            res = reserve_state()
            for s in _SLOTS:
                if id(s) in off.parked and res is not None and res.ran and not _RES_FAILED[0]:
                    res.arm(id(s), s._kimi_eagle3_ctl.steps)  # held at 0 until now: not in the reserve yet
                elif id(s) in off.pending or id(s) in off.parked:  # pending: in the reserve already
                    s.current_steps = s._kimi_eagle3_ctl.steps
            hookstatus.record(EXTEND, EXTEND_TARGET, "failed", f"raised, SGLang's extend back: {type(exc).__name__}: {exc}")
            held = None
        if held is not None:
            return held
    old = ctl.steps
    syncs = ctl.syncs
    try:
        new = ctl.update(list(num_correct_drafts_per_req), wall_us, _slot_sync(slot) if ctl.measure else None)
        if new is not None:
            _SWITCHES.append(f"bs {slot._kimi_eagle3_bs} {old}->{new} ({ctl.history[-1][3]})")
        if new is not None or (ctl.syncs != syncs and ctl.corr):  # the row: readings, pool (a switch or a sync)
            _note_measured(slot, ctl)
    except Exception as exc:  # never take the scheduler down: this slot goes back to SGLang's logic, the row says so
        slot.update = slot._kimi_eagle3_sglang_update
        hookstatus.record(NAME, TARGET, "failed", f"controller raised, slot back to SGLang's: {type(exc).__name__}: {exc}")
        return slot.update(num_correct_drafts_per_req)
    if new is None:
        return False
    why = ctl.history[-1][3]
    if off is not None and _OFF[0] is off and old == 0 < new and off.skipping and not off.frequent(id(slot)):
        off.parked[id(slot)] = new  # a rarely used slot: SGLang's slot stays at 0 and skipping goes on (OffSkip.hold)
        hookstatus.count(NAME, "ours", f"steps {old}->{new}", "park, kept")
        return False
    if off is not None and _OFF[0] is off and old == 0 < new and off.stale():
        off.defer(id(slot), new)  # SGLang's slot stays at 0 until the prime (_off_step)
        _set_skip(off)
        hookstatus.count(NAME, "ours", f"steps {old}->{new}", "primed")
        return False
    kind = why if why in ("probe", "explore") else "back" if why.startswith("probe did not") else "cost"
    res = reserve_state()
    if res is not None and res.ran and not _RES_FAILED[0] and new > res.level(_current(off, slot), id(slot)):
        res.arm(id(slot), new)  # SGLang's slot moves at the next verified batch, prepared with the raised reserve
        hookstatus.count(NAME, "ours", f"steps {old}->{new}", kind)
        logger().debug("adaptive steps %s -> %s armed (%s; switch %d)", old, new, why, ctl.switches)
        return False
    slot.current_steps = new
    hookstatus.count(NAME, "ours", f"steps {old}->{new}", kind)
    logger().debug("adaptive steps %s -> %s (%s; switch %d)", old, new, why, ctl.switches)
    return True


def _off_step(slot, off):
    """OffSkip's part of one verify result of `slot`: the batch counted, the primed switches applied (SGLang reads
    each slot's current_steps at its next batch), skipping set. Returns what the slot's update returns while its own
    switch waits or was just applied (False / True), else None (the controller decides)."""
    ran = slot.current_steps  # the steps SGLang ran this slot's batch at
    waiting = id(slot) in off.pending
    slot._kimi_eagle3_last = off.batch  # this batch's index (off.ran counts it)
    off.note(id(slot))
    ready, turned_on = off.ran(ran, _all_zero(off) and not off.pending)
    if off.hold(id(slot)):  # parked and not run often: it ran at 0, skipping goes on, its controller does not read it
        waiting = True
    elif off.unpark(id(slot)):  # parked with a decision, it ran at 0 (skipping stops): held, then restored after the prime
        waiting = True
        hookstatus.count(NAME, "ours", f"steps 0->{off.pending[id(slot)]}", "primed")
    for s in _SLOTS:
        if id(s) in ready:
            s.current_steps = s._kimi_eagle3_ctl.steps
    if turned_on:
        _park_unvisited(off)
    _set_skip(off)
    if off.skipping and off.skipped % 16 == 0:  # the row's count of skipped batches, refreshed while skipping
        hookstatus.record(EXTEND, EXTEND_TARGET, "applied", extend_detail(off))
        hookstatus.bump()
    if id(slot) in ready:
        return True
    return False if waiting else None
