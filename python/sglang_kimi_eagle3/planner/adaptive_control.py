"""The adaptive-steps controller this plugin puts in SGLang's per-batch-size slot (pure: no sglang, no clock).

SGLang's own slot (adaptive_spec_params.AdaptiveStepSlot, 0.5.23) recomputes every `update_interval` (5) batches
and, at steps 0, probes up at each of them: on the H200 (2026-12-02) a c-128 server switched 532 times in ~3
minutes and ran at 0.41x of plain decoding. This one decides from the planner's costs of each candidate step
(the slot's `kimi_eagle3` entry, planner/adaptive_table.py) and the observed acceptance, with:
  - a minimum dwell counted in batches (no wall clock: every TP rank sees the same accept counts and takes the
    same decision; `Controller.update` is a pure function of its state and the counts);
  - hysteresis: a switch needs a predicted gain above `hysteresis` over staying;
  - at steps 0, probes with exponential back-off: after `probe_wait_batches` at 0, `probe_batches` at the
    smallest positive candidate; a probe that does not pay doubles the wait (up to `probe_wait_max_batches`),
    one that pays resets it.
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
decision. The first `settle_batches` after a switch are not read (SGLang's overlap scheduler has the next batch in
flight in the old state when a switch is decided); a median per sync interval keeps outliers out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .acceptance import alpha_from_tau, expected_tokens


@dataclass(slots=True)
class Controller:
    candidates: list[int]
    base_us: float
    round_us: dict[int, float]
    steps: int
    off_us: float | None = None  # one steps-0 (off-state) step; None: priced as plain decoding
    dwell_batches: int = 128
    probe_batches: int = 32
    probe_wait_batches: int = 256
    probe_wait_max_batches: int = 8192
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
    syncs: int = 0
    exploring: bool = False
    explored: set = field(default_factory=set)  # positive candidates visited to be read (each once)

    @classmethod
    def from_entry(cls, candidates: list[int], entry: dict, steps: int) -> Controller:
        knobs = {k: entry[k] for k in ("dwell_batches", "probe_batches", "probe_wait_batches", "probe_wait_max_batches",
                                       "hysteresis", "ema_alpha", "measure", "sync_batches", "settle_batches", "corr_alpha")
                 if k in entry}
        c = cls(sorted(set(candidates)), float(entry["base_us"]), {int(k): float(v) for k, v in entry["round_us"].items()},
                steps if steps in candidates else sorted(set(candidates))[-1],
                float(entry["off_us"]) if entry.get("off_us") else None, **knobs)
        c.wait = c.probe_wait_batches
        return c

    def alpha(self) -> float | None:
        if self.steps == 0 or self.ema is None:
            return None
        return alpha_from_tau(min(1.0 + self.ema, self.steps + 1 - 1e-6), self.steps)

    def modelled_us(self, s: int) -> float:
        """The table's time of one round of `s` (steps 0: one off-state step; plain's without off_us)."""
        if s == 0:
            return self.off_us or self.base_us
        return self.round_us[s]

    def cost_us(self, s: int) -> float:
        """One round of `s`, the modelled time calibrated by the synced measurements (corr)."""
        c = self.corr.get(s)
        if c is None:
            c = sum(self.corr.values()) / len(self.corr) if self.corr else 1.0
        return self.modelled_us(s) * c

    def predicted(self, s: int, alpha: float) -> float:
        if s == 0:
            return self.base_us / self.cost_us(0)
        return expected_tokens([alpha] * s) * self.base_us / self.cost_us(s)

    def observe(self, wall_us: float | None) -> None:
        """The wall time of the batch just verified (this process's reading; it reaches decisions only through a
        sync). Not read in the first settle_batches after a switch, nor when absent or not positive."""
        if not self.measure or wall_us is None or not wall_us > 0 or self.batches <= self.settle_batches:
            return
        xs = self.samples.setdefault(self.steps, [])
        if len(xs) < 4 * self.sync_batches:
            xs.append(wall_us / self.modelled_us(self.steps))

    def summary(self) -> list[float]:
        """Per candidate (in order), the median ratio read since the last sync, 0.0 where none; clears them."""
        out = []
        for s in self.candidates:
            xs = sorted(self.samples.get(s, ()))
            out.append(xs[len(xs) // 2] if xs else 0.0)
        self.samples = {}
        return out

    def apply(self, summary: list[float]) -> None:
        """A synced summary (the same on every rank) into corr."""
        self.syncs += 1
        for s, v in zip(self.candidates, summary):
            if v > 0:
                old = self.corr.get(s)
                self.corr[s] = v if old is None else (1 - self.corr_alpha) * old + self.corr_alpha * v

    def _switch(self, new: int, why: str) -> int:
        self.history = (self.history + [(self.seen, self.steps, new, why)])[-16:]
        self.steps, self.batches, self.ema, self.switches = new, 0, None, self.switches + 1
        return new

    def _sync(self, sync) -> None:
        if self.measure and sync is not None:
            self.apply(sync(self.summary()))

    def update(self, accepted: list[int], wall_us: float | None = None, sync=None) -> int | None:
        """One verify's accepted-draft counts (one per request), the batch's wall time (optional) and `sync`, a
        function from this process's summary to the one every rank applies (None: the costs stay modelled).
        Returns the new steps on a switch, else None."""
        if not accepted:
            return None
        self.seen += 1
        self.batches += 1
        self.observe(wall_us)
        due = self.batches == (self.probe_batches if self.probing or self.exploring else self.dwell_batches)
        if due or self.seen % self.sync_batches == 0:
            self._sync(sync)
        if self.steps > 0:
            mean = sum(accepted) / len(accepted)
            self.ema = mean if self.ema is None else (1 - self.ema_alpha) * self.ema + self.ema_alpha * mean
        if self.steps == 0:
            positive = [s for s in self.candidates if s > 0]
            if positive and self.batches >= self.wait:
                self.probing, self.probes = True, self.probes + 1
                return self._switch(positive[0], "probe")
            return None
        if self.batches < (self.probe_batches if self.probing or self.exploring else self.dwell_batches):
            return None
        self.exploring = False
        if self.measure and sync is not None and not self.probing:
            unread = [s for s in self.candidates if s > 0 and s != self.steps and s not in self.corr
                      and s not in self.explored]
            if unread and self.steps in self.corr:
                self.explored.add(unread[0])
                self.exploring = True
                return self._switch(unread[0], "explore")
        a = self.alpha()
        here = self.predicted(self.steps, a)
        best = max(self.candidates, key=lambda s: (self.predicted(s, a), -s))
        gain = self.predicted(best, a) / here if here > 0 else float("inf")
        if self.probing:
            self.probing = False
            if best == 0 and gain > 1.0 + self.hysteresis or here <= self.predicted(0, a):
                self.failed_probes += 1
                self.wait = min(self.wait * 2, self.probe_wait_max_batches)
                return self._switch(0, "probe did not pay")
            self.wait = self.probe_wait_batches  # it paid: the next time at 0 probes early again
        if best != self.steps and gain > 1.0 + self.hysteresis:
            return self._switch(best, f"predicted {gain:.2f}x at alpha {a:.2f}")
        # re-evaluate every batch after the dwell, no drift (one past the dwell: its end syncs once, not every batch)
        self.batches = min(self.batches, self.dwell_batches + 1)
        return None
