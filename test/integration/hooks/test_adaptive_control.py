"""The adaptive_control hook on SGLang's real AdaptiveStepSlot: a controller that raises never reaches the scheduler
(the slot goes back to SGLang's own update, the status row says failed)."""

import os
import re

import pytest

from sglang_kimi_eagle3.integration.hooks import adaptive_control as hook
from sglang_kimi_eagle3.planner import profiles
from sglang_kimi_eagle3.planner.adaptive_control import Controller
from sglang_kimi_eagle3.planner.adaptive_table import KEY, table
from sglang_kimi_eagle3.planner.costs import from_profile
from sglang_kimi_eagle3.status import hookstatus

AdaptiveStepSlot = pytest.importorskip("sglang.srt.speculative.adaptive_spec_params").AdaptiveStepSlot


def _entry():
    return table(from_profile(profiles.load(profiles.DEFAULT_PROFILE)), [1, 8], operator_steps=3)["1"][KEY]


def _slot(bs="1"):
    cfg = table(from_profile(profiles.load(profiles.DEFAULT_PROFILE)), [1, 8], operator_steps=3)[bs]
    slot = AdaptiveStepSlot(initial_steps=3, cfg=cfg)  # SGLang's class, unhooked here
    hook.attach(slot, cfg[KEY])
    return slot


@pytest.mark.parametrize("pool", ["on", "off"])
def test_the_slots_of_a_process_learn_together(monkeypatch, pool):
    """SGLang's slots for bs 1 and 8, attached through the hook: the bs-1 slot learns the drafter agrees on nothing
    and leaves steps 3 after a probe's worth of batches; the bs-8 slot then leaves it at its first batch, on the pooled
    estimate. With SGLANG_KIMI_EAGLE3_ADAPTIVE_POOL=off each slot learns alone (the bs-8 slot keeps 3 for now)."""
    from sglang_kimi_eagle3.base import ENV_ADAPTIVE_MEASURE, ENV_ADAPTIVE_POOL

    monkeypatch.setenv(ENV_ADAPTIVE_POOL, pool)
    monkeypatch.setenv(ENV_ADAPTIVE_MEASURE, "off")  # modelled costs: this test's clock is not a server's
    monkeypatch.setattr(hook, "_CORR", {})
    hookstatus.record(hook.NAME, hook.TARGET, "applied", "around hook")  # as refresh() finds it after load_plugins
    one, eight = _slot("1"), _slot("8")
    assert (one._kimi_eagle3_ctl.shared is eight._kimi_eagle3_ctl.shared) and (one._kimi_eagle3_ctl.shared is None) == (pool == "off")
    for _ in range(one._kimi_eagle3_ctl.probe_batches):
        one.update([0])
    assert one.current_steps == 0
    assert eight.update([0] * 8) is (pool == "on") and eight.current_steps == (0 if pool == "on" else 3)
    detail = hookstatus.get(hook.NAME).detail
    if pool == "on":
        assert eight._kimi_eagle3_ctl.history[-1][3].startswith("pooled: ")
        # the status row says what the pool read (at each switch): 32 batches of bs 1, the one of bs 8
        assert "; pooled: acceptance alpha 0.00 over 33 batches, 0 probes (0 did not pay)" in detail, detail
        assert "launched without EAGLE" not in detail
        # and the latest switches with their reasons, per slot (the counters say how often, these why)
        assert re.search(r"; latest switches: bs 1 3->0 \(pooled: predicted [\d.]+x at alpha 0\.00\), bs 8 3->0 \(pooled: "
                         r"predicted [\d.]+x at alpha 0\.00\)", detail), detail
        # the drafter never agrees: after three probes in a row that did not pay, the row tells the operator
        for _ in range(4000):
            one.update([0])
        detail = hookstatus.get(hook.NAME).detail
        assert re.search(r"(\d+) probes \(\1 did not pay\)", detail) and "launched without EAGLE it would serve faster" in detail
        assert one._kimi_eagle3_ctl.shared.failed_probes >= 3
        # a probe that pays (the drafter agrees now) takes the line back: it counts probes in a row, any slot's
        ctl = one._kimi_eagle3_ctl
        for _ in range(1 << 14):
            one.update([ctl.steps])
            if ctl.steps and not ctl.probing:
                break
        assert ctl.steps > 0 and ctl.shared.streak == 0
        assert "launched without EAGLE" not in hookstatus.get(hook.NAME).detail
    else:
        assert "pooled" not in detail


def test_the_warm_up_readings_are_dropped_at_a_sync_on_tp_rank_0s_word(monkeypatch):
    """The traffic warm-up's step times are no serving traffic's: at the first sync where TP rank 0 has seen the
    warm-up's end, every rank forgets the readings so far (its own and the pool's), whatever it saw itself; readings
    taken after refill them. This rank never saw the marker; the sync hands it rank 0's flag."""
    from sglang_kimi_eagle3.base import ENV_ADAPTIVE_MEASURE

    monkeypatch.setenv(ENV_ADAPTIVE_MEASURE, "on")
    monkeypatch.setattr(hook, "_CORR", {})
    monkeypatch.setattr(hook, "_warm_ended", lambda: False)
    rank0 = [False]
    sent = []

    def broadcast(values):  # TP rank 0's values on this rank: its medians, and its flag where one is carried
        sent.append(len(values))
        return list(values[:-1]) + [1.0 if rank0[0] else 0.0] if len(values) > len(ctl.candidates) else list(values)

    monkeypatch.setattr(hook, "_SYNC", [broadcast])
    hookstatus.record(hook.NAME, hook.TARGET, "applied", "around hook")  # as install leaves it
    one = _slot("1")
    ctl = one._kimi_eagle3_ctl
    while not ctl.corr:
        one.update([0])
    assert "warm-up's readings dropped" not in hookstatus.get(hook.NAME).detail
    assert not ctl.warm_dropped and ctl.shared.corr and sent[-1] == len(ctl.candidates) + 1
    rank0[0] = True
    syncs = ctl.syncs
    while ctl.syncs == syncs:
        one.update([0])
    assert ctl.warm_dropped and ctl.corr == {} and ctl.shared.corr == {} and ctl.reads == {}
    assert any(k[3] == "warm-up readings dropped" and n for k, n in hookstatus.count_items() if k[0] == hook.NAME)
    while not ctl.corr:  # serving's readings from here on, no flag carried
        one.update([0])
    assert sent[-1] == len(ctl.candidates) and ctl.shared.corr
    assert "(the traffic warm-up's readings dropped in 1 slots)" in hookstatus.get(hook.NAME).detail  # the row says so


@pytest.mark.parametrize("attaches", [1, 2])
def test_a_controller_that_raises_hands_the_slot_back_to_sglang(monkeypatch, attaches):
    """Also when the slot was attached twice (the __init__ hook, installed by a plugin load earlier in the process,
    then attach): the hand-back still reaches SGLang's update, not ours again (a recursion before the fix)."""
    slot = _slot()
    if attaches == 2:
        hook.attach(slot, _entry())
    assert slot.update([3]) is False and hasattr(slot, "_kimi_eagle3_ctl")  # ours: dwell, no switch yet

    def boom(self, counts, *rest):
        raise RuntimeError("broken")

    monkeypatch.setattr(Controller, "update", boom)
    assert slot.update([3]) is False  # SGLang's update answered (its warm-up batches), nothing raised
    assert slot.update.__func__ is AdaptiveStepSlot.update  # the slot is SGLang's from now on
    row = hookstatus.get(hook.NAME)
    assert row.state == "failed" and "RuntimeError: broken" in row.detail


def test_each_runtime_state_sglang_builds_is_measured_in_its_own_process(monkeypatch):
    """The `adaptive_states` row: the growth of this process's allocator across SGLang's state build, per steps
    (SGLang's own log reads the whole GPU's free memory, which servers starting beside it move)."""
    import inspect

    from sglang_kimi_eagle3.integration import registry

    real = registry._resolve(hook.STATES_TARGET)  # the installed SGLang's method, called by keyword there
    assert list(inspect.signature(real).parameters)[:3] == ["self", "speculative_num_steps", "speculative_num_draft_tokens"]
    readings = iter([10.0, 12.5, 12.5, 13.25])
    monkeypatch.setattr(hook, "_reserved_gb", lambda: next(readings))
    monkeypatch.setattr(hook, "_MEASURED", {})
    built = []

    def original(worker, speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs=None):
        built.append((worker, speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs))
        return f"state {speculative_num_steps}"

    assert hook._build_state(original, "w", speculative_num_steps=3, speculative_num_draft_tokens=4,
                             cuda_graph_bs=[1, 8]) == "state 3"
    assert hook._build_state(original, "w", 0, 1) == "state 0"
    assert built == [("w", 3, 4, [1, 8]), ("w", 0, 1, None)]  # built as SGLang asked
    row = hookstatus.get(hook.STATES)
    assert row.state == "applied" and "steps 0: 0.75 GB, steps 3: 2.50 GB" in row.detail


def test_without_a_reading_the_state_is_built_and_nothing_is_claimed(monkeypatch):
    monkeypatch.setattr(hook, "_MEASURED", {})
    monkeypatch.setattr(hook, "_reserved_gb", lambda: None)  # no CUDA (or the reading failed)
    hookstatus.record(hook.STATES, hook.STATES_TARGET, "registered", "queued")
    assert hook._build_state(lambda w, s, n: (w, s, n), "w", 1, 2) == ("w", 1, 2)
    assert hookstatus.get(hook.STATES).state == "registered"  # no number made up


def _off_slots(monkeypatch, policy):
    from sglang_kimi_eagle3.base import ENV_ADAPTIVE_MEASURE, ENV_OFFSTATE_EXTEND

    monkeypatch.setenv(ENV_OFFSTATE_EXTEND, policy)
    monkeypatch.setenv(ENV_ADAPTIVE_MEASURE, "off")
    monkeypatch.setattr(hook, "_CORR", {})
    return _slot("1"), _slot("8")


def test_the_off_state_skips_sglangs_draft_extend_while_every_slot_is_off_and_primes_a_step_up(monkeypatch):
    """SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=skip on SGLang's real slots: once the bs-1 slot is off and four batches ran
    at 0, SGLang's own variable is set in the process and the unvisited bs-8 slot is parked at 0 (no positive batch
    may follow a skipped one); the probe's step up is held two batches with the variable back at 0 (their extends
    run), then reaches SGLang; with a slot positive it never skips."""
    monkeypatch.delenv(hook.SKIP_VAR, raising=False)
    one, eight = _off_slots(monkeypatch, "skip")
    ctl = one._kimi_eagle3_ctl
    for _ in range(ctl.probe_batches):
        one.update([0])
    assert one.current_steps == 0 and eight.current_steps == 3 and hook.SKIP_VAR not in os.environ
    for _ in range(3):
        one.update([0])
    assert hook.SKIP_VAR not in os.environ
    one.update([0])  # the 4th batch at 0 with every visited slot off
    assert os.environ[hook.SKIP_VAR] == "1" and eight.current_steps == 0 and eight._kimi_eagle3_ctl.steps == 0
    assert sdk_envs().SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND.get() is True  # what SGLang's worker reads
    n = 0
    while one.update([0]) is False and n < 10000:  # at 0 until the pooled probe
        n += 1
        if ctl.steps > 0:
            break
    assert ctl.steps > 0 and ctl.probing and one.current_steps == 0  # the controller probes; SGLang's slot waits
    assert os.environ[hook.SKIP_VAR] == "0"
    assert one.update([0]) is False and one.current_steps == 0  # the batch in flight
    assert one.update([0]) is True and one.current_steps == ctl.steps > 0  # primed: SGLang switches now
    assert os.environ[hook.SKIP_VAR] == "0"
    for _ in range(8):
        eight.update([0] * 8)
    assert os.environ[hook.SKIP_VAR] == "0"  # a slot is positive: SGLang's extend every step
    row = hookstatus.get(hook.EXTEND)
    assert row.state == "applied" and "1 step ups primed" in row.detail, row.detail
    # counted where an operator reads them: each toggle of SGLang's variable, the park and the primed step up
    assert {k[2] for k, n in hookstatus.count_items() if k[0] == hook.EXTEND and n} >= {"skip on", "skip off"}
    assert {k[3] for k, n in hookstatus.count_items() if k[0] == hook.NAME and n} >= {"park", "primed"}


def test_under_defer_the_off_state_policy_drives_the_deferred_extend_not_sglangs_variable(monkeypatch):
    """SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=defer: the same OffSkip policy as `skip` (every slot off, four batches at 0;
    a step up held two batches), but what it switches is the deferred_extend hook's ACTIVE (SGLang's own extend runs
    and the hook defers it), never SGLang's skip variable; the step up turns it off before its primed batches."""
    from sglang_kimi_eagle3.integration.hooks import deferred_extend

    monkeypatch.delenv(hook.SKIP_VAR, raising=False)
    one, eight = _off_slots(monkeypatch, "defer")
    ctl = one._kimi_eagle3_ctl
    for _ in range(ctl.probe_batches + 3):
        one.update([0])
    assert deferred_extend.ACTIVE[0] is False
    one.update([0])
    assert deferred_extend.ACTIVE[0] is True and eight.current_steps == 0 and hook.SKIP_VAR not in os.environ
    n = 0
    while one.update([0]) is False and n < 10000 and ctl.steps == 0:
        n += 1
    assert ctl.steps > 0 and one.current_steps == 0 and deferred_extend.ACTIVE[0] is False  # held: extends back on
    assert one.update([0]) is False and one.update([0]) is True and one.current_steps == ctl.steps
    assert hook.SKIP_VAR not in os.environ
    assert {k[2] for k, n in hookstatus.count_items() if k[0] == hook.EXTEND and n} >= {"defer on", "defer off"}
    row = hookstatus.get(hook.EXTEND)
    assert row.state == "applied" and "=defer: the off-state defers its draft extend" in row.detail, row.detail


@pytest.mark.parametrize("case", ["keep", "operator"])
def test_the_off_state_extend_is_sglangs_by_default_and_an_operators_setting_is_left_alone(monkeypatch, case):
    if case == "operator":
        monkeypatch.setenv(hook.SKIP_VAR, "false")
    else:
        monkeypatch.delenv(hook.SKIP_VAR, raising=False)
    one, _eight = _off_slots(monkeypatch, "skip" if case == "operator" else "keep")
    for _ in range(one._kimi_eagle3_ctl.probe_batches + 50):
        one.update([0])
    assert one.current_steps == 0
    assert os.environ.get(hook.SKIP_VAR) == ("false" if case == "operator" else None)
    row = hookstatus.get(hook.EXTEND)
    assert row.state == "skipped" and ("set by the operator" if case == "operator" else "=keep") in row.detail


def sdk_envs():
    from sglang.srt.environ import envs

    return envs


def test_sglangs_worker_reads_the_variable_at_every_steps_zero_step():
    """The variable this policy drives is what SGLang 0.5.23's EAGLE worker reads, per step, at steps 0 (a release
    that renames it or reads it once fails here, not silently in a server)."""
    import inspect

    from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2

    src = " ".join(inspect.getsource(EAGLEWorkerV2.forward_batch_generation).split())
    assert ("self.speculative_num_steps == 0 and envs.SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND.get() ): "
            "self._stub_skipped_draft_extend(batch, batch_output)") in src
    env = sdk_envs().SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND
    assert env.name == hook.SKIP_VAR


def test_a_slot_fixed_to_the_launchs_chain_is_not_parked_and_stops_skipping_once_it_runs(monkeypatch):
    """A slot whose candidates hold no 0 (a capped table's slot above its batch size) cannot be parked: the off-state
    still skips while it has run no batch; once it runs one (at the launch's steps, positive) skipping stops."""
    monkeypatch.delenv(hook.SKIP_VAR, raising=False)
    one, eight = _off_slots(monkeypatch, "skip")
    eight._kimi_eagle3_ctl.candidates = [3]
    for _ in range(one._kimi_eagle3_ctl.probe_batches + 50):
        one.update([0])
    assert one.current_steps == 0 and eight.current_steps == 3 and os.environ[hook.SKIP_VAR] == "1"
    eight.update([1] * 8)
    assert eight.current_steps == 3 and os.environ[hook.SKIP_VAR] == "0"


def test_a_positive_slot_that_ran_no_batch_lately_does_not_keep_the_extend_on_and_is_parked(monkeypatch):
    """Run 24 (H200, 2026-12-04, q 0.3): the bs-1 slot ran only at the tails of the rounds and sat at steps 7, so at c 32
    and 64, with every batch of the loaded slots at steps 0, the off-state never skipped its extend. A slot that does
    not run often (OffSkip.frequent) does not count: skipping starts, and SGLang's slot is parked at 0; its controller
    keeps its decision, held while the slot runs rarely and restored after a prime once it runs often."""
    monkeypatch.delenv(hook.SKIP_VAR, raising=False)
    one, eight = _off_slots(monkeypatch, "skip")
    eight.update([1] * 8)  # the bs-8 slot runs one batch at the launch's steps 3, then goes idle
    assert eight.current_steps == 3
    off = hook._OFF[0]
    for _ in range(off.min_runs + 8):  # the bs-1 slot's batches, to 0 and on at 0: the bs-8 slot ran one, not often
        one.update([0])
    # skipping: SGLang's bs-8 slot runs at 0 from now on, its controller keeps its steps 3
    assert os.environ[hook.SKIP_VAR] == "1" and eight.current_steps == 0 and eight._kimi_eagle3_ctl.steps == 3
    assert any(k[3] == "park, kept" and n for k, n in hookstatus.count_items() if k[0] == hook.NAME)
    seen = eight._kimi_eagle3_ctl.seen
    for _ in range(off.min_runs - 2):  # with its first, min_runs - 1 batches: not often yet, held at 0, skipping on
        assert eight.update([0] * 8) is False
        assert os.environ[hook.SKIP_VAR] == "1" and eight.current_steps == 0
    assert eight._kimi_eagle3_ctl.seen == seen and off.held == off.min_runs - 2  # the controller reads none of them
    assert eight.update([0] * 8) is False  # it runs often now: skipping stops, its kept steps wait for the prime
    assert os.environ[hook.SKIP_VAR] == "0" and eight.current_steps == 0 and eight._kimi_eagle3_ctl.seen == seen
    one.update([0])
    assert eight.current_steps == 0  # one batch with the extend on is in flight
    one.update([0])
    assert eight.current_steps == 3 and hook.SKIP_VAR in os.environ and os.environ[hook.SKIP_VAR] == "0"  # primed


def test_a_rarely_used_positive_slot_does_not_keep_the_deferred_extend_off(monkeypatch):
    """Run 30 (H100, 2026-12-06, q 0.3, c 8): the 3-4-request slot ran a few batches at steps 3 at the tail of each
    round and the deferred extend ran for fewer than half of the 5-8-request steps. Here the bs-8 slot carries the
    load at steps 0 and the bs-1 slot, at steps 3, runs 2 batches in every 300: it is parked at 0 with its steps kept
    and the extend stays deferred for every batch after the first skip; its batches run at 0 and are counted."""
    from sglang_kimi_eagle3.integration.hooks import deferred_extend

    one, eight = _off_slots(monkeypatch, "defer")
    ectl = eight._kimi_eagle3_ctl
    one.update([1])  # the bs-1 slot ran at the launch's steps 3 (its controller has seen a batch)
    assert one.current_steps == 3 and one._kimi_eagle3_ctl.steps == 3
    while ectl.steps != 0:  # the bs-8 slot decides the off-state on the pooled acceptance
        eight.update([0] * 8)
    ectl.shared.wait = 1 << 30  # no pooled probe in this window (a probe's step up stops deferring, rightly)
    off = hook._OFF[0]
    deferred = []
    for i in range(1500):
        if i % 300 in (150, 151):
            one.update([0])  # the tail of a round: SGLang runs the bs-1 slot at what it holds
            assert one.current_steps == 0  # parked at 0
        else:
            eight.update([0] * 8)
            deferred.append(deferred_extend.ACTIVE[0])
    assert one._kimi_eagle3_ctl.steps == 3 and id(one) in off.parked  # its decision kept
    first = deferred.index(True)
    assert first < off.min_runs + 8 and all(deferred[first:]), deferred[first:].count(False)
    assert off.held == 10 and "10 batches of rarely used slots held at 0" in hook.extend_detail(off)
    shown = int(re.search(r"(\d+) batches deferred", hookstatus.get(hook.EXTEND).detail).group(1))
    assert off.skipped - 16 < shown <= off.skipped  # the row refreshed while deferring, not every 256th


def test_a_positive_slot_that_ran_often_but_not_lately_does_not_keep_the_deferred_extend_off(monkeypatch):
    """Run 40 (H100, 2026-12-07, q 0.6, c 8, rounds of about 640 decode batches): the bs-1 slot ran the tail of each
    round at steps 3, 32 batches or more, so it still ran often (min_runs within idle_batches) for most of the next
    round and the deferred extend ran for about a fifth of the 5-8-request steps. A slot counts only while its
    latest batch is recent (OffSkip.recent_batches): here the bs-8 slot carries each round at steps 0 and the bs-1
    slot, positive, runs a tail of 60 batches after it; the bs-8 slot's batches defer their extend from
    recent_batches + quiet_batches after each tail on, and the tail's slot runs positive once it runs often."""
    from sglang_kimi_eagle3.integration.hooks import deferred_extend

    one, eight = _off_slots(monkeypatch, "defer")
    ectl, octl = eight._kimi_eagle3_ctl, one._kimi_eagle3_ctl
    one.update([1])  # the bs-1 slot ran at the launch's steps 3
    while ectl.steps != 0:  # the bs-8 slot decides the off-state on the pooled acceptance
        eight.update([0] * 8)
    ectl.shared.wait = 1 << 30  # no pooled probe in this window (a probe's step up stops deferring, rightly)
    ectl.candidates = [0]  # at 5-8 requests speculation does not pay here, whatever the tail's acceptance
    off = hook._OFF[0]
    deferred, tail_steps = [], []
    for _ in range(4):
        for _ in range(640):
            eight.update([0] * 8)
            deferred.append(deferred_extend.ACTIVE[0])
        for _ in range(60):
            one.update([one.current_steps])  # one request, every draft accepted: a good drafter at the tail
            tail_steps.append(one.current_steps)
    assert octl.steps == 3 and max(tail_steps[-30:]) == 3  # the tail's slot ran positive once it ran often
    late = deferred[640:]  # the rounds after the first tail
    share = sum(late) / len(late)
    assert share > 1 - (off.recent_batches + off.quiet_batches + 8) / 640, share


def test_a_failing_off_state_policy_gives_sglang_its_extend_back_and_releases_held_switches(monkeypatch):
    """If the policy itself raises (a bug), the scheduler goes on: SGLang's variable is removed, a held step up reaches
    SGLang's slot, the row says failed, and the controller keeps deciding."""
    monkeypatch.delenv(hook.SKIP_VAR, raising=False)
    one, _eight = _off_slots(monkeypatch, "skip")
    ctl = one._kimi_eagle3_ctl
    n = 0
    while not (ctl.steps > 0 and one.current_steps == 0) and n < 10000:  # off, skipping, then a held probe
        one.update([0])
        n += 1
    assert ctl.steps > 0 and one.current_steps == 0 and hook._OFF[0].pending

    def boom(*a):
        raise RuntimeError("policy bug")

    monkeypatch.setattr(hook, "_off_step", boom)
    one.update([0])
    assert one.current_steps == ctl.steps > 0 and hook.SKIP_VAR not in os.environ and hook._OFF[0] is None
    row = hookstatus.get(hook.EXTEND)
    assert row.state == "failed" and "policy bug" in row.detail


def test_a_value_the_off_state_extend_policy_does_not_accept_is_a_failed_row_not_a_silent_raise(monkeypatch):
    """SGLang swallows a plugin's exception at install: a bad SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND must not leave the
    hooks after it unregistered with nothing said. The row says failed and why; the controller's hooks still queue."""
    from sglang_kimi_eagle3.base import ENV_OFFSTATE_EXTEND

    queued = []
    monkeypatch.setattr(hook.registry, "register", lambda name, *a: queued.append(name))  # no HookRegistry queue here
    monkeypatch.setenv(ENV_OFFSTATE_EXTEND, "sometimes")
    hook.install()
    row = hookstatus.get(hook.EXTEND)
    assert row.state == "failed" and "SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND='sometimes'" in row.detail, row.detail
    assert queued == [hook.STATES, hook.NAME, hook.RESERVE, hook.FORWARD, hook.BATCH, hook.CHECK, hook.CLOCK] and hook._OFF == [None]


def test_a_bad_reserve_switch_is_a_failed_row_and_the_other_hooks_still_queue(monkeypatch):
    """SGLANG_KIMI_EAGLE3_ADAPTIVE_RESERVE=maybe: install does not raise (SGLang would swallow it and leave the hooks
    after it unqueued); the row says failed and why, the reserve's hooks are not queued, the rest are."""
    from sglang_kimi_eagle3.base import ENV_ADAPTIVE_RESERVE

    queued = []
    monkeypatch.setattr(hook.registry, "register", lambda name, *a: queued.append(name))
    monkeypatch.setenv(ENV_ADAPTIVE_RESERVE, "maybe")
    hook.install()
    row = hookstatus.get(hook.RESERVE)
    assert row.state == "failed" and "SGLANG_KIMI_EAGLE3_ADAPTIVE_RESERVE='maybe'" in row.detail, row.detail
    assert queued == [hook.STATES, hook.NAME, hook.CLOCK]
    assert hookstatus.get(hook.FORWARD).state == "skipped"


def test_a_forward_whose_steps_cannot_be_read_gives_sglang_its_reserve_back(monkeypatch):
    """The reserve hook's forward record never raises into SGLang's forward: where the worker's steps cannot be read,
    the row says failed and every later reserve is SGLang's."""
    from types import SimpleNamespace as NS

    monkeypatch.setattr(hook, "_OFF", [None])
    slot = _slot("1")  # at the launch's steps 3
    assert hook._reserve(lambda: 16) == 16  # no decode forward yet: SGLang's
    hook._forward(None, NS(worker=NS(speculative_num_steps=3), params=None))
    assert hook._reserve(lambda: 16) == 8  # steps 3 can run: 2 x (3 + 1)
    slot.current_steps = 0
    hook._forward(None, NS(worker=NS(speculative_num_steps=0), params=None))
    hook._forward(None, NS(worker=NS(speculative_num_steps=0), params=None))
    assert hook._reserve(lambda: 16) == 2
    hook._forward(None, NS(params=None))  # a worker without its steps
    row = hookstatus.get(hook.RESERVE)
    assert row.state == "failed" and "SGLang's reserve back: AttributeError" in row.detail, row.detail
    assert hook._reserve(lambda: 16) == 16
