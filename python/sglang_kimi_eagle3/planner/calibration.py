"""The planner's error against published end-to-end points (pure): predicted, published, error % per point.

`python -m sglang_kimi_eagle3.planner.calibration` prints the table docs/planner.md shows ('Calibration');
test/planner/test_calibration.py keeps the two equal. A point is predicted with the bundled profile of its
model and GPU, with the i.i.d. acceptance that has the point's published accept length at its steps (the
same reading as the acceptance presets). Published points without a bundled profile are listed with why.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import costs, profiles
from .acceptance import alpha_from_tau
from .model import predict

SPECFORGE = ("SpecForge docs/spec_bundle/public/raw_data/data.json (github.com/sgl-project/SpecForge): "
             "Kimi-K2-Instruct + AQ-MedAI/Kimi-K2-Instruct-eagle3, H200, TP 8")


@dataclass(frozen=True, slots=True)
class Point:
    name: str
    profile: str
    bs: int
    steps: int
    tau: float | None  # published accept length (bonus token included); None: a plain-decode time point
    published: float  # speedup (x), or plain TPOT in ms when tau is None
    source: str


POINTS = [
    Point("GSM8K", "kimi-k2-instruct_8xh200_tp8", 8, 3, 3.27, 1.47, SPECFORGE),
    Point("Math500", "kimi-k2-instruct_8xh200_tp8", 8, 3, 3.47, 1.78, SPECFORGE),
    Point("MT-Bench", "kimi-k2-instruct_8xh200_tp8", 8, 3, 2.39, 1.24, SPECFORGE),
    Point("HumanEval", "kimi-k2-instruct_8xh200_tp8", 8, 3, 3.36, 1.67, SPECFORGE),
    Point("LiveCodeBench", "kimi-k2-instruct_8xh200_tp8", 8, 3, 3.16, 1.68, SPECFORGE),
    Point("GPQA", "kimi-k2-instruct_8xh200_tp8", 8, 3, 2.90, 1.55, SPECFORGE),
    Point("TPOT c 1 (ms)", "kimi-k2-instruct_8xh200_tp8", 1, 0, None, 11.38,
          "SGLang PR #13466: Kimi-K2-Instruct-0905, TP 8 (GPU type not stated in the excerpt read)"),
    Point("TPOT c 2 (ms)", "kimi-k2-instruct_8xh200_tp8", 2, 0, None, 12.46,
          "SGLang PR #13466: Kimi-K2-Instruct-0905, TP 8 (GPU type not stated in the excerpt read)"),
]

NOT_PREDICTED = [
    ("tokenspeed #795: Kimi-K2.7 on 4x GB200 at concurrency 16, 1.36-1.91x with accept length 2.26-2.95",
     "no bundled GB200 / TP 4 profile; the range pairs no speedup with its accept length"),
    ("rtx6kpro PR #10: EAGLE-3 on 2x RTX PRO 6000, 1.24x at concurrency 1", "not a Kimi model (Kimi does not fit in 2 GPUs)"),
    ("EAGLE-3 paper: LLaMA-3.1-8B on H100, SGLang batch 1, 158 -> 373 tok/s", "no bundled Llama-8B / H100 profile"),
    ("LMSYS: DeepSeek-V3 MTP on 16x H200, +60% per-rank throughput at accept length 2.44",
     "MTP, not an EAGLE-3 drafter, over 16 GPUs (the profiles are TP 8)"),
]


def predicted(pt: Point, profile: profiles.Profile | None = None) -> float:
    """The model's number for a point: speedup at (bs, steps, topk 1), or plain TPOT in ms."""
    cost = costs.from_profile(profile or profiles.load(pt.profile))
    if pt.tau is None:
        return cost.target_us(pt.bs, 1) / 1e3
    a = alpha_from_tau(pt.tau, pt.steps)
    return predict([a] * pt.steps, pt.steps, cost, pt.bs).speedup


def rows(points=POINTS, load=profiles.load) -> list[tuple[Point, float, float]]:
    """(point, predicted, error % = 100 (predicted - published) / published)."""
    out = []
    for pt in points:
        p = predicted(pt, load(pt.profile))
        out.append((pt, p, 100.0 * (p - pt.published) / pt.published))
    return out


def markdown(points=POINTS, load=profiles.load) -> str:
    lines = ["| point | profile | bs | steps | published τ | predicted | published | error % |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for pt, p, err in rows(points, load):
        unit = "" if pt.tau is None else "×"
        tau = "—" if pt.tau is None else f"{pt.tau:.2f}"
        lines.append(f"| {pt.name} | `{pt.profile}` | {pt.bs} | {pt.steps or '—'} | {tau} | {p:.2f}{unit} | "
                     f"{pt.published:.2f}{unit} | {err:+.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
