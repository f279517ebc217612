"""The adaptive-steps controller this plugin puts in SGLang's per-batch-size slot (pure: no sglang, no clock).

SGLang's own slot (adaptive_spec_params.AdaptiveStepSlot, 0.5.23) recomputes every `update_interval` (5) batches
and, at steps 0, probes up at each of them: on the H200 (2026-12-02) a c-128 server switched 532 times in ~3
minutes and ran at 0.41x of plain decoding. This one decides from the planner's costs of each candidate step
(the slot's `kimi_eagle3` entry, planner/adaptive_table.py) and the observed acceptance, with:
  - a minimum dwell counted in batches (no wall clock: every TP rank sees the same accept counts and takes the
    same decision; `Controller.update` is a pure function of its state and the counts);
  - hysteresis: a switch needs a predicted gain above `hysteresis` over staying;
  - at steps 0, probes with exponential back-off: after `probe_wait_batches` at 0, a probe at the smallest positive
    candidate; a probe that does not pay doubles that slot's wait (up to `probe_wait_max_batches`), one that pays resets it.
    A probe (and a visit to read a state) lasts `probe_batches` verified requests, at least `probe_min_batches`
    batches, at most `probe_batches` batches, and decides on the acceptance per request it read: its information is
    per request, its cost per batch. On an H100 (2026-12-05, q 0.3, the deployment-shaped pair on Marlin) a steps-3
    step at 5-8 requests cost 3.2x a plain one, and a probe of 32 batches held there cut the c-8 round it fell in
    from 0.99x of plain to 0.84-0.86x.
The acceptance estimate: an EMA of accepted drafts per request per verify at the current steps s, turned into an
iid per-position acceptance alpha (tau = 1 + accepted; planner/acceptance.alpha_from_tau); each candidate's
predicted speedup is expected_tokens(alpha, s') x base_us / cost(s'); steps 0 is SGLang's off-state, base_us /
cost(0) (below 1: on the H200 one steps-0 step cost 1.24-2.32x a plain one; 1.0 for a table without off_us).

Measured costs. The table's costs are modelled (round_us, off_us), and the model can be far off where it was not
measured: on the H200 (2026-12-03) it put the fixed steps 3 at 2.9x of plain at bs 8, which ran 0.92x. So each
batch's wall time (the hook hands it in: the time between two verify results of this process, one decode step in
steady state) is read as a ratio to the modelled time of the state that ran it, and cost(s) = modelled(s) x corr[s],
corr[s] the measured ratio of s (a state not read yet takes the mean ratio of those read, so the model's relative
costs stand until it is read). To read every positive candidate, the first dwell's end at a positive state that
finds one never read visits it for `probe_batches` (`explore`, once per candidate and slot), then decides on the
readings. Ratios are kept per process and reach decisions only at a sync point: every `sync_batches` batches and at
each evaluation that ends a dwell or a probe, all counted in batches, so every TP rank reaches the same sync points;
there `sync(summary)` (the hook: a broadcast of TP rank 0's medians over the TP group's CPU group; identity at TP 1)
returns the same values on every rank, and decisions read only synced values: every rank still takes the same
decision. The readings taken before the server's traffic warm-up ended are dropped at the first sync after it
(`drop_warm`, on TP rank 0's word). The first `settle_batches` after a switch are not read (SGLang's overlap
scheduler has the next batch in flight in the old state when a switch is decided); the lower median per sync interval
keeps outliers out (`summary`: what lands in a reading by chance only adds time).

Learning together (`Shared`, one per process). SGLang keeps one slot per batch size and a server's batch size moves
with its load, so on the H200 (2026-12-04, q 0.3 drafter, deployment-shaped pair) every slot paid its own first dwell
at the launch's steps, its own visit of steps 7 and its own probes, each at 2-3x of a plain step: 50 runtime-state
switches in 8 minutes and 0.71-0.87x of plain where the off-state's step ratio allows 0.84-0.96x. Acceptance is the
drafter's and the workload's, not the batch size's, so with a Shared the slots pool it: a slot without its own
estimate decides on the pooled one (at its first batch: no dwell at the launch's steps), a slot at steps 0 steps up
when the pooled estimate (read by other slots within the last `probe_wait_batches`) says so, and one probe refreshes
it for all. The probe back-off is by batch size: a probe fails at one size for that size's costs, not for the
acceptance alone. With one back-off for the process, a c-64 load whose probes did not pay grew the wait to thousands
of batches and kept the estimate they left "fresh" as long; a c-1 load after it, whose bs-1 slot dropped to the off-
state on one noisy window, stayed there that long: simulated on an H100's measured step costs (c 1 -> 64 -> 1 -> 8 ->
1, 3000 batches each, a q 0.6 drafter, 5 seeds) the c-1 phases after c 64 served 1.02-1.12x of plain and 0.99-1.16x
where the first served 1.15-1.18x. Now a slot waits as long as the probes that did not pay at its size or a smaller
one (a larger batch makes a round dearer against a plain step) and the c-1 phases serve 1.10-1.16x and 1.13-1.19x;
single loads are served as before. Without any estimate yet, the first decision comes after `probe_batches`, not a
whole dwell. A state a slot has not read is priced from another slot's synced reading, scaled by this slot's own
readings of the states both read. A positive candidate is visited to be read only where it could win: priced at the
most favourable of the model and every ratio read anywhere, it must beat the best read state, and at the model's
relative prices the off-state (at acceptance 0.3 steps 7 never could). All of it is driven by the counts and the
synced readings, in the order every TP rank sees them: still the same decision on every rank.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .acceptance import alpha_from_tau, expected_tokens

# Raw readings kept per state for the status row (`Controller.wall_ms`): they never decide. On an H100 (2026-12-06)
# the bs-8 slot's steps-3 ratio implied 51.8 ms a round where the step clock's median at 5-8 requests read 36.1: that
# slot runs 8-14 requests (SGLang pads a batch to a CUDA-graph size, 1-8, 10, 12, ..., and takes the largest slot at
# or below), the step clock's 9-16 bucket read 46.5; the ratio alone could not show it.
WALLS_KEPT = 64


@dataclass(slots=True)
class Shared:
    """What the slots of one process learn together (see the module docstring): the acceptance, the synced cost
    readings, which probes did not pay."""
    ema_alpha: float = 0.1
    probe_batches: int = 32  # observations before the pooled estimate decides a slot's first batch
    probe_wait_batches: int = 256
    probe_wait_max_batches: int = 8192
    count: int = 0  # observations so far
    ema: dict = field(default_factory=dict)  # steps -> EMA of accepted drafts per request per verify, any slot
    last: int = 0  # the steps of the latest observation (0: none yet)
    since: int = 0  # batches of any slot since acceptance was last observed
    wait: int = 256  # an estimate read within the last `wait` batches is fresh (probe_wait_batches: not a back-off)
    corr: dict = field(default_factory=dict)  # steps -> the latest synced measured / modelled ratio, any slot
    probes: int = 0
    failed_probes: int = 0
    streak: int = 0  # probes in a row, any slot, that did not pay (the status row's "has not paid")
    waits: dict = field(default_factory=dict)  # slot batch size -> batches at 0 before its next probe (its back-off)
    cache: tuple = (None, None)  # ((steps, ema), alpha): alpha_from_tau once per new estimate
    warm_dropped: bool = False  # the traffic warm-up's readings and acceptance were dropped (Controller.drop_warm)

    @classmethod
    def from_entry(cls, entry: dict) -> Shared:
        knobs = {k: entry[k] for k in ("ema_alpha", "probe_batches", "probe_wait_batches", "probe_wait_max_batches")
                 if k in entry}
        sh = cls(**knobs)
        sh.wait = sh.probe_wait_batches
        return sh

    def observe(self, steps: int, mean: float) -> None:
        old = self.ema.get(steps)
        self.ema[steps] = mean if old is None else (1 - self.ema_alpha) * old + self.ema_alpha * mean
        self.last, self.since, self.count = steps, 0, self.count + 1

    def known(self) -> bool:
        """Enough observations (a probe's worth) to decide a slot's first batch on."""
        return self.count >= self.probe_batches

    def alpha(self) -> float | None:
        """The iid acceptance of the latest pooled estimate (None before any)."""
        if not self.last:
            return None
        key = (self.last, self.ema[self.last])
        if self.cache[0] != key:
            self.cache = (key, alpha_from_tau(min(1.0 + key[1], key[0] + 1 - 1e-6), key[0]))
        return self.cache[1]

    def fresh(self) -> bool:
        """Some slot read the acceptance within the last `wait` batches."""
        return bool(self.last) and self.since < self.wait


@dataclass(slots=True)
class Controller:
    candidates: list[int]
    base_us: float
    round_us: dict[int, float]
    steps: int
    off_us: float | None = None  # one steps-0 (off-state) step; None: priced as plain decoding
    dwell_batches: int = 128
    probe_batches: int = 32  # a probe's (and a visit's) verified requests, and its most batches
    probe_wait_batches: int = 256
    probe_wait_max_batches: int = 8192
    probe_min_batches: int = 4  # a probe's fewest batches (its first settle_batches are not timed)
    hysteresis: float = 0.05
    ema_alpha: float = 0.1
    ema: float | None = None  # accepted drafts per request per verify, at the current steps
    batches: int = 0  # batches since the last switch
    wait: int = 0  # batches to wait at steps 0 before the next probe
    probing: bool = False
    switches: int = 0
    probes: int = 0
    failed_probes: int = 0
    history: list = field(default_factory=list)  # (batch index, old, new, why) of the last switches (bounded)
    seen: int = 0
    measure: bool = True  # calibrate the modelled costs with measured batch times (corr)
    sync_batches: int = 64
    settle_batches: int = 2
    corr_alpha: float = 0.5  # weight of a newly synced ratio in corr
    corr: dict = field(default_factory=dict)  # steps -> measured / modelled step time, as synced (decisions read it)
    samples: dict = field(default_factory=dict)  # steps -> this process's ratios since the last sync (never decides)
    reads: dict = field(default_factory=dict)  # steps -> this process's readings so far (the status row; never decides)
    walls: dict = field(default_factory=dict)  # steps -> this process's latest raw readings, µs (the status row only)
    syncs: int = 0
    exploring: bool = False
    explored: set = field(default_factory=set)  # candidates visited to be read (each once; the warm-up's forgotten)
    visit_alpha: float | None = None  # the acceptance a visit to the off-state left at (a slot alone decides on it)
    shared: Shared | None = None  # this process's pooled learning (None: this slot learns alone)
    decided: bool = False  # the first decision at a positive state was taken
    warm_dropped: bool = False  # its readings taken in the traffic warm-up were dropped (drop_warm)
    verified: int = 0  # requests verified since the last switch
    accepted_sum: int = 0  # their accepted drafts
    size: int = 0  # the slot's batch size (the entry's `bs`; 0: not known): orders the pooled back-offs

    @classmethod
    def from_entry(cls, candidates: list[int], entry: dict, steps: int) -> Controller:
        knobs = {k: entry[k] for k in ("dwell_batches", "probe_batches", "probe_wait_batches", "probe_wait_max_batches",
                                       "probe_min_batches", "hysteresis", "ema_alpha", "measure", "sync_batches",
                                       "settle_batches", "corr_alpha")
                 if k in entry}
        c = cls(sorted(set(candidates)), float(entry["base_us"]), {int(k): float(v) for k, v in entry["round_us"].items()},
                steps if steps in candidates else sorted(set(candidates))[-1],
                float(entry["off_us"]) if entry.get("off_us") else None, **knobs)
        c.wait = c.probe_wait_batches
        c.size = int(entry.get("bs") or 0)
        return c

    def alpha(self) -> float | None:
        """This slot's estimate at its current steps; else the pooled one (None: nothing read)."""
        if self.steps > 0 and self.ema is not None:
            return alpha_from_tau(min(1.0 + self.ema, self.steps + 1 - 1e-6), self.steps)
        return self.shared.alpha() if self.shared is not None else None

    def modelled_us(self, s: int) -> float:
        """The table's time of one round of `s` (steps 0: one off-state step; plain's without off_us)."""
        if s == 0:
            return self.off_us or self.base_us
        return self.round_us[s]

    def corr_of(self, s: int) -> float | None:
        """The synced measured / modelled ratio of `s`: this slot's; else another slot's (Shared), scaled by this
        slot's readings of the states both read; None when nobody read it."""
        c = self.corr.get(s)
        sh = self.shared
        if c is not None or sh is None or s not in sh.corr:
            return c
        both = [t for t in self.corr if t in sh.corr]
        scale = sum(self.corr[t] / sh.corr[t] for t in both) / len(both) if both else 1.0
        return sh.corr[s] * scale

    def cost_us(self, s: int) -> float:
        """One round of `s`, the modelled time calibrated by the synced measurements (corr_of; a state nobody read
        takes the mean ratio of this slot's readings, so the model's relative costs stand until it is read; the
        off-state no dearer than a positive round read: off_ratio)."""
        c = self.corr_of(s)
        if c is None:
            c = sum(self.corr.values()) / len(self.corr) if self.corr else 1.0
        if s == 0:
            c = self.off_ratio(c)
        return self.modelled_us(s) * c

    def off_ratio(self, c: float) -> float:
        """The off-state's ratio `c`, unless it prices the off-state at or above a positive round read at this slot.
        A steps-0 step does a subset of a positive round's work on the same path (a one-token verify and a one-token
        draft extend, no drafting), so such readings contradict each other, and a slot that believed them would
        speculate where nothing is accepted: on the H200 (2026-12-04, q 0.3 drafter) the bs-1 slot read steps 0 at
        26 ms (x1.37) and steps 7 at 17 ms (x0.53) where a plain step took 9.6 ms, ran steps 7 at c 1 and served 0.79x
        of plain. The off-state then takes the smallest ratio of the positive states read (the model's relative
        price against the cheapest reading)."""
        pos = [(t, r) for t in self.candidates if t > 0 and (r := self.corr_of(t)) is not None]
        if pos and self.modelled_us(0) * c >= min(self.modelled_us(t) * r for t, r in pos):
            return min(r for _, r in pos)
        return c

    def predicted(self, s: int, alpha: float, corr: float | None = None) -> float:
        """Tokens per unit of plain decoding's time at `s` (corr: price `s` at this ratio instead)."""
        cost = self.cost_us(s) if corr is None else self.modelled_us(s) * corr
        if s == 0:
            return self.base_us / cost
        return expected_tokens([alpha] * s) * self.base_us / cost

    def observe(self, wall_us: float | None) -> None:
        """The wall time of the batch just verified (this process's reading; it reaches decisions only through a
        sync). Not read in the first settle_batches after a switch, nor when absent or not positive."""
        if not self.measure or wall_us is None or not wall_us > 0 or self.batches <= self.settle_batches:
            return
        xs = self.samples.setdefault(self.steps, [])
        if len(xs) < 4 * self.sync_batches:
            xs.append(wall_us / self.modelled_us(self.steps))
            self.reads[self.steps] = self.reads.get(self.steps, 0) + 1
            ws = self.walls.setdefault(self.steps, [])
            ws.append(wall_us)
            del ws[:-WALLS_KEPT]

    def wall_ms(self, s: int) -> float | None:
        """The lower median of this process's latest raw readings at `s` (up to WALLS_KEPT), ms; None where none."""
        ws = sorted(self.walls.get(s, ()))
        return ws[(len(ws) - 1) // 2] / 1000 if ws else None

    def summary(self) -> list[float]:
        """Per candidate (in order), the lower median of the ratios read since the last sync, 0.0 where none; clears
        them. The lower one: what lands in a reading by chance (a prefill, a compile, a flush, a collection) only adds
        time, and a probe at a large batch reads two batches (probe_min_batches less settle_batches), whose upper
        median is the larger. On an H100 (2026-12-07, the q 0.9 drafter at temperature 0.7, c 64) the 64-request slot's
        probe of steps 3 read 241 ms a step over two readings (its steps 7 106 ms, its off-state 21.7), three probes in
        a row did not pay, and the 32- and 64-request slots sat at steps 0 for three of four rounds (0.98x of plain;
        the round that speculated 1.24x)."""
        out = []
        for s in self.candidates:
            xs = sorted(self.samples.get(s, ()))
            out.append(xs[(len(xs) - 1) // 2] if xs else 0.0)
        self.samples = {}
        return out

    def apply(self, summary: list[float]) -> None:
        """A synced summary (the same on every rank) into corr."""
        self.syncs += 1
        for s, v in zip(self.candidates, summary):
            if v > 0:
                old = self.corr.get(s)
                self.corr[s] = v if old is None else (1 - self.corr_alpha) * old + self.corr_alpha * v
                if self.shared is not None:
                    self.shared.corr[s] = self.corr[s]

    def park(self) -> None:
        """To steps 0 without a decision: a slot that has run no batch, before the off-state skips its draft extend
        (OffSkip); it then steps up as any slot at 0 does (a visit it was on ends unread)."""
        self.exploring = False
        self._switch(0, "park")

    def drop_warm(self) -> None:
        """Forget the cost readings taken so far, once: the server's traffic warm-up has ended and its steps are no
        serving traffic's. On an H100 (2026-12-06, q 0.3) the slots that ran only in the warm-up read the off-state at
        x0.53-0.63 of the model where the loaded bs-8 slot read x0.44 while serving, and the bs-4 slot priced steps 3
        at 1.4x its off-state where the step clock read 2.0x at the tails of the rounds: it stepped up there. The
        pool's readings go once too (Shared.warm_dropped), with its acceptance estimate and its probe back-off: the
        warm-up's prompts are random ids, so what a drafter is accepted there and the probes that did not pay there
        say nothing of the served traffic (the next probe comes `probe_wait_batches` later, not after a back-off of
        thousands of batches, and the "has not paid" line counts serving's probes only). This slot's own EMA at its
        current steps stays (it is replaced within its window). Called at a sync point, with the same flag on every
        TP rank (the hook's sync carries TP rank 0's), so every rank forgets at the same batch."""
        self.corr.clear()
        self.samples = {}
        self.reads.clear()
        self.walls.clear()
        self.explored.clear()  # a visit's reading went with the rest: the state may be visited again
        self.warm_dropped = True
        self.wait, self.probes, self.failed_probes = self.probe_wait_batches, 0, 0
        sh = self.shared
        if sh is not None and not sh.warm_dropped:
            sh.corr.clear()
            sh.ema, sh.last, sh.count, sh.since, sh.cache = {}, 0, 0, 0, (None, None)
            sh.wait, sh.probes, sh.failed_probes, sh.streak = sh.probe_wait_batches, 0, 0, 0
            sh.waits.clear()
            sh.warm_dropped = True

    def _switch(self, new: int, why: str) -> int:
        self.history = (self.history + [(self.seen, self.steps, new, why)])[-16:]
        self.steps, self.batches, self.ema, self.switches = new, 0, None, self.switches + 1
        self.verified = self.accepted_sum = 0
        return new

    def _sync(self, sync) -> None:
        if self.measure and sync is not None:
            self.apply(sync(self.summary()))

    def window(self) -> int:
        """Batches at the current state before it is evaluated: a probe's or a visit's; the first decision at a
        positive state at once on a pooled estimate, else after a probe's worth; a probe's worth at a positive state
        read while the off-state is not (its visit comes then); a dwell otherwise."""
        if self.probing or self.exploring:
            return self.probe_batches
        if self.decided and self.steps > 0 and self.syncs and self.off_unread():
            return self.probe_batches  # the floor read soon (_to_read visits it): a positive state is kept on readings
        if self.decided or self.steps == 0:
            return self.dwell_batches
        return 1 if self.shared is not None and self.shared.known() else self.probe_batches

    def off_unread(self) -> bool:
        """The off-state is a candidate this slot has neither read nor visited (with measured costs on)."""
        return self.measure and 0 in self.candidates and 0 not in self.corr and 0 not in self.explored

    def probe_done(self) -> bool:
        """A probe or a visit has read enough: `probe_batches` verified requests in at least `probe_min_batches`
        batches, or `probe_batches` batches (one request a batch: the same end as a batch count)."""
        return self.batches >= self.probe_batches or (
            self.batches >= self.probe_min_batches and self.verified >= self.probe_batches)

    def update(self, accepted: list[int], wall_us: float | None = None, sync=None) -> int | None:
        """One verify's accepted-draft counts (one per request), the batch's wall time (optional) and `sync`, a
        function from this process's summary to the one every rank applies (None: the costs stay modelled).
        Returns the new steps on a switch, else None."""
        if not accepted:
            return None
        self.seen += 1
        self.batches += 1
        self.verified += len(accepted)
        self.accepted_sum += sum(accepted)
        self.observe(wall_us)
        short = self.probing or self.exploring  # a probe's or a visit's window: ends on probe_done
        window = self.window()
        ends = self.probe_done() if short else self.batches == window
        if ends or self.seen % self.sync_batches == 0:
            self._sync(sync)
        sh = self.shared
        if self.steps > 0:
            mean = sum(accepted) / len(accepted)
            self.ema = mean if self.ema is None else (1 - self.ema_alpha) * self.ema + self.ema_alpha * mean
            if sh is not None:
                sh.observe(self.steps, mean)
        elif sh is not None:
            sh.since += 1
        if self.steps == 0:
            return self._visited_off(ends) if self.exploring else self._at_zero()
        if (not ends) if short else self.batches < window:
            return None
        self.exploring = False
        first, self.decided = not self.decided, True
        if short and self.batches < self.probe_batches:  # ended by its requests: decide on their mean, not on an
            # EMA of a few batches (its first batch would weigh 0.73 after four)
            self.ema = self.accepted_sum / self.verified
            a = self.alpha()
        else:
            # the first decision reads the pooled estimate (this slot's own is one batch old or part of it)
            a = sh.alpha() if first and sh is not None and sh.known() else self.alpha()
        if self.measure and sync is not None and not self.probing:
            visit = self._to_read(a)
            if visit is not None:
                return self._visit(visit, a)
        here = self.predicted(self.steps, a)
        best = max(self.candidates, key=lambda s: (self.predicted(s, a), -s))
        gain = self.predicted(best, a) / here if here > 0 else float("inf")
        if self.probing:
            self.probing = False
            if best == 0 and gain > 1.0 + self.hysteresis or here <= self.predicted(0, a):
                self.failed_probes += 1
                self.wait = min(self._wait() * 2, self.probe_wait_max_batches)  # see _at_zero
                if sh is not None:
                    sh.failed_probes += 1
                    sh.streak += 1
                    sh.waits[self.size] = self.wait
                return self._switch(0, "probe did not pay")
            self.wait = self.probe_wait_batches  # it paid: the next time at 0 probes early again
            if sh is not None:
                sh.streak = 0
                for k in [k for k in sh.waits if k <= self.size]:  # where it paid, a smaller batch would too
                    del sh.waits[k]
        if best != self.steps and gain > 1.0 + self.hysteresis:
            return self._switch(best, f"{'pooled: ' if first and sh is not None else ''}predicted {gain:.2f}x at alpha {a:.2f}")
        # re-evaluate every batch after the dwell, no drift (one past the dwell: its end syncs once, not every batch)
        self.batches = min(self.batches, self.dwell_batches + 1)
        return None

    def _to_read(self, a: float) -> int | None:
        """A candidate this slot has not read and should (None: nothing worth a visit). First the off-state, the floor
        every decision stands on, once per slot (after the traffic warm-up) unless its guessed price already makes it
        best (then the slot steps down by cost and reads it there): unread, it is priced by a guess (the model's
        relative price, or another slot's reading scaled), and a visit costs a probe's few batches once. Then a
        positive candidate that could win: priced at the most favourable of the model (ratio 1) and every ratio read
        anywhere, it beats the best state with a reading and, at the model's relative prices, the off-state.

        The off-state always: on an H100 (2026-12-06, the deployment-shaped pair, a q 0.6 drafter, c 8) the bs-8 slot
        read steps 3 at x1.09 of its model and, never having read steps 0, priced it at that same ratio: the model's
        steps 3 is 1.9x its off-state step, the measured one 3.2x (36 against 11.2 ms; plain 10.7), so it kept
        steps 3 and 7 (accept length 2.2) for two rounds that served 0.63-0.78x of plain; the third, at steps 0,
        0.97x."""
        if self.steps not in self.corr:
            return None
        best = max(self.predicted(t, a) for t in self.candidates if t > 0 and self.corr_of(t) is not None)
        if self.off_unread() and self.predicted(0, a) <= best:
            return 0  # (where its guessed price already makes it best, the slot steps down by cost and reads it there)
        unread = [s for s in self.candidates if s > 0 and s != self.steps and s not in self.corr and s not in self.explored]
        if not unread:
            return None
        seen = list(self.corr.values()) + (list(self.shared.corr.values()) if self.shared is not None else [])
        lo = min(seen + [1.0])
        if 0 in self.candidates and self.corr_of(0) is not None:
            best = max(best, self.predicted(0, a))
        floor = self.predicted(0, a, 1.0) if 0 in self.candidates else 0.0
        return next((s for s in unread if self.predicted(s, a, lo) > best and self.predicted(s, a, 1.0) > floor), None)

    def _visit(self, s: int, a: float) -> int:
        """To `s` for a visit's window, to read it (once per slot: explored)."""
        self.explored.add(s)
        self.exploring, self.visit_alpha = True, a
        return self._switch(s, "explore")

    def _visited_off(self, ends: bool) -> int | None:
        """A visit to the off-state (`_to_read`) ends: now that the off-state is read, a positive candidate that could
        win is visited next (`_to_read`), else back to the best state at the acceptance read before it (the pool's,
        where it has one), unless the off-state is best or within the hysteresis (then the slot stays at 0, as after
        any step down)."""
        if not ends:
            return None
        self.exploring = False
        sh = self.shared
        a = sh.alpha() if sh is not None and sh.alpha() is not None else self.visit_alpha
        if a is None:
            return None
        visit = self._to_read(a) if self.measure else None
        if visit is not None:
            return self._visit(visit, a)
        best = max(self.candidates, key=lambda s: (self.predicted(s, a), -s))
        gain = self.predicted(best, a) / self.predicted(0, a)
        if best != 0 and gain > 1.0 + self.hysteresis:
            return self._switch(best, f"off-state read: predicted {gain:.2f}x at alpha {a:.2f}")
        return None

    def _wait(self) -> int:
        """Batches at 0 before this slot's next probe: its own back-off, alone; pooled, the longest back-off of the
        probes that did not pay at this slot's batch size or a smaller one (a larger batch makes a round dearer
        against a plain step), since one paid there."""
        sh = self.shared
        if sh is None:
            return self.wait
        return max([w for k, w in sh.waits.items() if k <= self.size], default=sh.probe_wait_batches)

    def _at_zero(self) -> int | None:
        """At the off-state: alone, probe after `wait` batches; pooled, step up when another slot's fresh estimate
        says so (checked each batch after a dwell), probe only when nobody read the acceptance for this slot's `wait`
        batches (its own back-off: another slot's probes that did not pay at its own batch size leave it alone).
        A pooled step up to a state this slot has not read itself lasts a visit (`probe_batches` requests), then the
        slot decides on its own reading: on an H100 (2026-12-07, q 0.6, c 8) the small slots that run a few batches
        at the tails of each round priced steps 3 from other slots' readings after the warm-up's went and held it for
        a dwell of 128 of their batches at 3.9x a plain step (3-4 requests); simulated as such rounds meet a fresh
        server, a q 0.59 drafter then served 0.87-0.96x of plain, now 0.96-0.97x."""
        positive = [s for s in self.candidates if s > 0]
        if not positive:
            return None
        sh = self.shared
        if sh is None:
            if self.batches >= self.wait:
                self.probing, self.probes = True, self.probes + 1
                return self._switch(positive[0], "probe")
            return None
        if sh.fresh():
            if self.batches >= self.dwell_batches:
                self.batches = self.dwell_batches + 1
                a = sh.alpha()
                best = max(self.candidates, key=lambda s: (self.predicted(s, a), -s))
                gain = self.predicted(best, a) / self.predicted(0, a)
                if best != 0 and gain > 1.0 + self.hysteresis:
                    self.decided = True
                    unread = self.measure and best not in self.corr
                    new = self._switch(best, f"pooled: predicted {gain:.2f}x at alpha {a:.2f}")
                    if unread:  # priced from other slots' readings: a visit's window, then this slot's own reading
                        self.exploring, self.visit_alpha = True, a
                        self.explored.add(best)
                    return new
            return None
        if sh.since >= self._wait():  # this slot's own back-off, counted from the pool's latest reading
            sh.since, sh.probes = 0, sh.probes + 1  # one probe refreshes the estimate for every slot
            self.probing, self.probes = True, self.probes + 1
            return self._switch(positive[0], "probe")
        return None


@dataclass(slots=True)
class OffSkip:
    """When one process's off-state may skip SGLang's per-step draft extend (pure: the hook drives SGLang's
    SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND from `skipping`, every TP rank at the same batch).

    At steps 0 SGLang still runs one draft forward per step over every request's new token, so that the draft's KV
    and last hidden state are current when a slot steps up again: on the H200 that extend was most of what the
    off-state cost above a plain step (2026-12-03, Triton MoE: 0.87 / 1.03x of plain at c 1 / 8 without it, 1.24-1.35x
    with it). Skipping it keeps every output exact (the target verifies every token; the draft only proposes) and
    costs acceptance after a step up: the first draft would start from SGLang's zeroed stubs, and the draft KV of the
    tokens decoded while skipping stays unwritten for the requests that lived through it. So:
      - it skips only while every slot that ran a batch within the last `idle_batches` is at steps 0 (a mixed server,
        one slot positive, keeps SGLang's extend: the next batch may be that slot's) and after `quiet_batches` verified
        batches in a row at 0; a slot idle longer counts as one that has run none (below): on the H200 (2026-12-04, q
        0.3) a bs-1 slot that ran only at the tails of the rounds sat positive and kept the extend on at every load;
      - a slot leaving 0 while the draft state may be stale (skipping now, or within the last `prime_batches`
        batches) waits: skipping stops at once, and its switch reaches SGLang only after `prime_batches` more
        verified batches (their extends run: with SGLang's overlap scheduler one batch is already in flight when a
        decision is taken), so its first draft reads a real hidden state;
      - a slot that has run no batch yet (or none within `idle_batches`) may sit at a positive state: `turned_on`
        asks the caller to park such slots at 0 before the first skipped batch (where their candidates hold 0; one that
        cannot be parked may draft once from the stubs when its next batch comes, and skipping stops there). A slot
        that never ran goes to 0 for good (its steps were the launch's, not a decision); an idle one keeps its
        controller's decision (`parked`): once it runs often again (below) its next batch runs at 0, stops skipping
        and is held like a step up, so its decision reaches SGLang after the prime;
      - a slot counts for `all_zero` only once it runs often: `min_runs` of the last `idle_batches` verified batches
        (`frequent`). On an H100 (2026-12-06, q 0.3, c 8) the 3-4-request slot ran a few batches at steps 3 at the tail
        of each round, and the deferred extend ran for fewer than half of the 5-8-request steps. So while skipping, a
        rarely used slot is parked at 0 with its decision kept (`hold`: its batches run at 0 and skipping goes on)
        until it runs often, and a step up it decides meanwhile is parked the same way (the hook does both). A slot
        that cannot be parked (no 0 among its candidates) counts whenever it is `active`;
      - and only while its latest batch is among the last `recent_batches`: on an H100 (2026-12-07, q 0.6, c 8, rounds
        of about 640 decode batches) the 1-request slot ran the tail of each round at steps 3, 32 batches or more, so
        it still ran often for most of the next round and the extend was deferred for about a fifth of the 5-8-request
        steps. A slot idle for `recent_batches` is parked like a rare one; when it runs again while `min_runs` of its
        batches are within `idle_batches` it runs often at once, so its kept steps come back after the prime."""
    quiet_batches: int = 4
    prime_batches: int = 2
    idle_batches: int = 512
    min_runs: int = 32
    recent_batches: int = 64
    batch: int = 0  # verified batches so far (any slot): the clock of `active`
    zero_run: int = 0  # verified batches in a row at steps 0 (any slot)
    since_on: int = 1 << 30  # verified batches since one ran while skipping
    pending: dict = field(default_factory=dict)  # slot key -> its controller's new steps, waiting for the prime
    parked: dict = field(default_factory=dict)  # slot key -> the positive steps it keeps while SGLang runs it at 0
    primed: int = 0  # verified batches since the first pending switch
    skipping: bool = False
    skipped: int = 0  # verified batches that ran while skipping
    primes: int = 0  # step ups that waited for a prime
    runs: dict = field(default_factory=dict)  # slot key -> the indices of its latest batches (at most min_runs)
    held: int = 0  # batches of a rarely used slot held at 0 while skipping

    def note(self, key) -> None:
        """Slot `key` runs the batch about to be counted (call before `ran`)."""
        r = self.runs.get(key)
        if r is None:
            r = self.runs[key] = deque(maxlen=self.min_runs)
        r.append(self.batch)

    def frequent(self, key) -> bool:
        """Slot `key` ran `min_runs` of the last `idle_batches` verified batches, the latest within `recent_batches`."""
        r = self.runs.get(key)
        return (r is not None and len(r) >= self.min_runs and self.batch - r[0] <= self.idle_batches
                and self.batch - r[-1] <= self.recent_batches)

    def hold(self, key) -> bool:
        """While skipping, a parked slot that does not run often stays at 0 (its batch is counted as held)."""
        if self.skipping and key in self.parked and not self.frequent(key):
            self.held += 1
            return True
        return False

    def ran(self, steps: int, all_zero: bool) -> tuple[list, bool]:
        """A batch SGLang ran at `steps` was verified; `all_zero`: every slot that ran a batch lately (`active`) is at
        steps 0 (a pending slot counts as positive). Returns (the pending slot keys now primed: apply their switches,
        whether skipping just turned on: park the slots that have run no batch lately)."""
        self.batch += 1
        self.zero_run = self.zero_run + 1 if steps == 0 else 0
        if self.skipping:
            self.skipped += 1
            self.since_on = 0
        else:
            self.since_on += 1
        ready = []
        if self.pending:
            self.primed += 1
            if self.primed >= self.prime_batches:
                ready, self.pending, self.primed = list(self.pending), {}, 0
        was = self.skipping
        self.skipping = not self.pending and not ready and all_zero and self.zero_run >= self.quiet_batches
        return ready, self.skipping and not was

    def active(self, last: int | None) -> bool:
        """A slot whose latest batch was verified batch `last` (None: it has run none) counts for `all_zero`."""
        return last is not None and self.batch - last <= self.idle_batches

    def stale(self) -> bool:
        """The draft state may be stale: skipping now, or a skipped batch within the last `prime_batches`."""
        return self.skipping or self.since_on <= self.prime_batches

    def unpark(self, key) -> bool:
        """A parked slot's batch was just verified (at 0): its kept steps wait for the prime (defer). False: not parked."""
        if key not in self.parked:
            return False
        self.defer(key, self.parked.pop(key))
        return True

    def defer(self, key, steps: int) -> None:
        """A slot's controller left steps 0 for `steps` while stale(): skipping stops, its switch waits for the prime."""
        if not self.pending:
            self.primed = 0
        self.pending[key] = steps
        self.skipping = False
        self.primes += 1


@dataclass(slots=True)
class Reserve:
    """The KV each decode batch reserves per request while this plugin's controller holds every slot of a process
    (pure: the hook reads `tokens` in SGLang's decode allocation and feeds `forward`, `arm` and `verified`).

    SGLang 0.5.23 (spec v2, topk 1, its overlap scheduler) allocates each decode batch's KV up to the committed length
    plus 2 x (steps + 1) per request: one batch in flight whose accepted tokens are not committed yet, and the next
    one. Under --speculative-adaptive it takes `steps` from the largest candidate, whatever state runs: with steps 7
    in the table that is 16 tokens per request ahead at steps 0 too, where a plain server holds 1. On an H100
    (2026-12-06, the deployment-shaped pair, fresh chat prompts at c 128, the KV pool the limit) the q 0.3 server at
    steps 0 held 745 tokens per running request where plain held 724, ran 75.8 requests where plain ran 77.8, and
    served 0.96x of plain.

    Here the reserve follows the states that can run instead: `level` is the largest of the steps of the slot the
    batch routes to (every slot's where the batch is not known), its step up waiting (`armed`; OffSkip's pending one,
    the caller adds it to `current`) and the steps of the latest two decode forwards (one may still be in flight, its
    tokens uncommitted); `tokens(level)` = 2 x (level + 1), the formula above at that level. A slot's step up can
    come after the scheduler reserved KV for its next batch (SGLang's scheduler processes a result between preparing a
    batch and running it where grammar needs the sync), so a step up above its slot's level waits one verified batch
    `armed`: its batch is then prepared with the raised reserve before it runs at the new state. Step downs are
    immediate (the in-flight batch stays covered by `ran`)."""
    ran: deque = field(default_factory=lambda: deque(maxlen=2))  # steps of this process's latest decode forwards
    armed: dict = field(default_factory=dict)  # slot key -> the steps its switch waits a verified batch for
    arms: int = 0  # step ups that waited

    def forward(self, steps: int) -> None:
        """A decode batch is about to run at `steps` (SGLang's worker has just taken its slot's state)."""
        self.ran.append(int(steps))

    def level(self, current, key=None) -> int:
        """The largest steps a batch prepared now, or the one in flight, can run at. `current`: the steps SGLang reads
        for the slot the batch routes to (`key`) and the step up OffSkip holds for it; without a key, every slot's
        (a caller whose batch is not known)."""
        armed = self.armed.values() if key is None else [self.armed[key]] if key in self.armed else []
        return max([0, *current, *armed, *self.ran])

    def arm(self, key, steps: int) -> None:
        self.armed[key] = int(steps)
        self.arms += 1

    def verified(self) -> dict:
        """A decode batch was verified: every armed step up has had a batch prepared with the raised reserve since it
        was armed; returns them (slot key -> steps), to apply now."""
        out, self.armed = self.armed, {}
        return out

    @staticmethod
    def tokens(level: int) -> int:
        """KV tokens reserved per request ahead of the committed length at `level` (topk 1)."""
        return 2 * (int(level) + 1)
