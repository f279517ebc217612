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
predicted speedup is expected_tokens(alpha, s') x base_us / round_us[s']; steps 0 is SGLang's off-state, base_us /
off_us (below 1: on the H200 one steps-0 step cost 1.24-2.32x a plain one; 1.0 for a table without off_us).
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

    @classmethod
    def from_entry(cls, candidates: list[int], entry: dict, steps: int) -> Controller:
        knobs = {k: entry[k] for k in ("dwell_batches", "probe_batches", "probe_wait_batches", "probe_wait_max_batches",
                                       "hysteresis", "ema_alpha") if k in entry}
        c = cls(sorted(set(candidates)), float(entry["base_us"]), {int(k): float(v) for k, v in entry["round_us"].items()},
                steps if steps in candidates else sorted(set(candidates))[-1],
                float(entry["off_us"]) if entry.get("off_us") else None, **knobs)
        c.wait = c.probe_wait_batches
        return c

    def alpha(self) -> float | None:
        if self.steps == 0 or self.ema is None:
            return None
        return alpha_from_tau(min(1.0 + self.ema, self.steps + 1 - 1e-6), self.steps)

    def predicted(self, s: int, alpha: float) -> float:
        if s == 0:
            return self.base_us / self.off_us if self.off_us else 1.0
        return expected_tokens([alpha] * s) * self.base_us / self.round_us[s]

    def _switch(self, new: int, why: str) -> int:
        self.history = (self.history + [(self.seen, self.steps, new, why)])[-16:]
        self.steps, self.batches, self.ema, self.switches = new, 0, None, self.switches + 1
        return new

    def update(self, accepted: list[int]) -> int | None:
        """One verify's accepted-draft counts (one per request). Returns the new steps on a switch, else None."""
        if not accepted:
            return None
        self.seen += 1
        self.batches += 1
        if self.steps > 0:
            mean = sum(accepted) / len(accepted)
            self.ema = mean if self.ema is None else (1 - self.ema_alpha) * self.ema + self.ema_alpha * mean
        if self.steps == 0:
            positive = [s for s in self.candidates if s > 0]
            if positive and self.batches >= self.wait:
                self.probing, self.probes = True, self.probes + 1
                return self._switch(positive[0], "probe")
            return None
        if self.batches < (self.probe_batches if self.probing else self.dwell_batches):
            return None
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
        self.batches = min(self.batches, self.dwell_batches)  # re-evaluate every batch after the dwell, no drift
        return None
