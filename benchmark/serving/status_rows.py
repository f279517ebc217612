"""One line per server from its status file, for the device scripts' logs (device_adaptive.sh after the rounds).

    python3 benchmark/serving/status_rows.py status FILE      # adaptive_control / offstate_extend: state, switches
    python3 benchmark/serving/status_rows.py step_clock FILE  # the step_clock row: per runtime state, medians
    python3 benchmark/serving/status_rows.py compare FILE PLAIN_TXT  # its states' steps over plain's, per batch size,
                                                                     # then where the loop's time goes, side by side,
                                                                     # and the GPU's time (CUDA events) likewise

A file that is missing or not a status file prints one line saying so (never a traceback, never an empty line: on
2026-12-05 an inline `python3 -c` with nested double quotes printed nothing for every server, and the run's
step_clock reading had to be dug out of the packed status files)."""

from __future__ import annotations

import json
import re
import sys

BY_BATCH = re.compile(r"; by batch size, wall / GPU wait ms \(steps\): (.*?)(?:; GPU by batch size|$)")
ENTRY = re.compile(r"(\d+(?:-\d+)?): ([\d.]+) / ([\d.]+) \((\d+)\)")
# the GPU's side (CUDA events on one step in a few: since 2026-12-05, an older row has none): per state, and per bucket
GPU_PARTS = re.compile(r"GPU time per step \(1 step in \d+, (\d+) timed\): ([\d.]+) ms, the launch's work ([\d.]+)"
                       r"(?: \(before the verify ([\d.]+), the verify ([\d.]+), after it ([\d.]+): the draft extend\))?, "
                       r"between launches ([\d.]+)")
GPU_BY_BATCH = re.compile(r"; GPU by batch size, step / after the verify ms \(timed\): (.*)$")
GPU_ENTRY = re.compile(r"(\d+(?:-\d+)?): ([\d.]+) / ([\d.]+|-) \((\d+)\)")
# the medians of one state's step: launch, GPU wait, rest of the loop and its parts (results and controller: since
# 2026-12-05; an older row has neither)
PARTS = re.compile(r"launch ([\d.]+) \(.*?\), waiting on the GPU ([\d.]+), rest of the loop ([\d.]+) \(preparing the "
                   r"next batch ([\d.]+)(?:; the previous step's results ([\d.]+), the adaptive controller ([\d.]+) of it)?\)")


def _rows(path: str) -> dict:
    with open(path) as f:
        return {r["name"]: r for r in json.load(f)["hooks"]}


def status_line(path: str) -> str:
    rows = _rows(path)
    parts = []
    for name in ("adaptive_control", "offstate_extend"):
        r = rows.get(name)
        if r:
            parts.append(f"{name} {r['state']} {(r.get('counters') or {}).get('ours')} ...{r.get('detail', '')[-160:]}")
    return "; ".join(parts) if parts else "no adaptive_control or offstate_extend row"


def step_clock_line(path: str) -> str:
    r = _rows(path).get("step_clock")
    return f"{r['state']}: {r.get('detail', '')}" if r else "no step_clock row"


def by_batch(detail: str) -> dict[str, dict[str, tuple[float, float, int]]]:
    """A step_clock detail (the row's, or plain_clock's file) -> {state label: {bucket: (wall ms, GPU wait ms, n)}}."""
    out = {}
    for part in detail.split(" | "):
        label = part.split(":", 1)[0].strip()
        m = BY_BATCH.search(part)
        out[label] = {b: (float(w), float(g), int(n)) for b, w, g, n in ENTRY.findall(m.group(1))} if m else {}
    return out


PREFILL = re.compile(r"by new tokens: (.*)$")
PREFILL_ENTRY = re.compile(r"(\d+-\d+|\d+\+): ([\d.]+) / ([\d.]+|-) \((\d+), ([\d.]+)(?:; host ([\d.]+|-)"
                           r"(?:, on the CPU ([\d.]+))?(?:, the draft's host ([\d.]+))?)?\)")
PREFILL_ALLOC = re.compile(r"the CUDA allocator inside (\d+) of these launches: cudaMalloc (\d+) \(in (\d+) launches\), "
                           r"cudaFree (\d+), retries (\d+), syncs to free (\d+)")


PREFILL_GC = re.compile(r"the garbage collector: (?:inside (\d+) of these launches ([\d.]+) ms in (\d+) collections "
                        r"\((\d+) full\); )?in this process(?: since the traffic warm-up ended)? ([\d.]+) ms in "
                        r"(\d+) collections \((\d+) full\), the longest ([\d.]+) ms")


def _num(x: str):
    return float(x) if x not in ("", "-") else None


def prefill(detail: str) -> dict[str, tuple]:
    """A step_clock detail's prefill part -> {new-token bucket: (median GPU ms per batch, the draft's part of it or
    None, batches, median new tokens, the launch's host ms, of it the scheduler thread's CPU ms, the draft's prefill's
    host ms; each of the last three None where the detail does not say)}; {} where the detail has none."""
    for part in detail.split(" | "):
        if part.startswith("prefill:"):
            m = PREFILL.search(part)
            return {b: (float(x), _num(d), int(n), float(t), _num(h), _num(c), _num(dh))
                    for b, x, d, n, t, h, c, dh in PREFILL_ENTRY.findall(m.group(1))} if m else {}
    return {}


def prefill_alloc(detail: str) -> tuple | None:
    """A step_clock detail's CUDA allocator calls inside its prefill launches: (launches read, cudaMalloc, launches
    with one, cudaFree, retries, syncs to free), or None where it does not say."""
    m = PREFILL_ALLOC.search(detail)
    return tuple(int(x) for x in m.groups()) if m else None


def prefill_gc(detail: str) -> tuple | None:
    """A step_clock detail's garbage collector: (prefill launches read, ms in collections inside them, collections,
    full ones; each None where it did not say, then the process's ms, collections, full ones, the longest ms), or
    None where the detail does not say."""
    m = PREFILL_GC.search(detail)
    if not m:
        return None
    return tuple(None if x is None else (float(x) if "." in x else int(x)) for x in m.groups())


def _per_state(detail: str, pattern: re.Pattern) -> dict[str, tuple]:
    """{state label: the pattern's groups as floats (None where a group did not match)} over a detail's states."""
    out = {}
    for part in detail.split(" | "):
        m = pattern.search(part)
        if m:
            out[part.split(":", 1)[0].strip()] = tuple(float(x) if x is not None else None for x in m.groups())
    return out


def loop_parts(detail: str) -> dict[str, tuple]:
    """A step_clock detail -> {state label: (launch, GPU wait, rest, preparing, results, controller) ms; the last two
    None in a row written before they were read}."""
    return _per_state(detail, PARTS)


def gpu_parts(detail: str) -> dict[str, tuple]:
    """A step_clock detail -> {state label: (timed, step, launch's work, before the verify, verify, after it, between)
    ms; the verify's three None for plain decoding}."""
    return _per_state(detail, GPU_PARTS)


def gpu_by_batch(detail: str) -> dict[str, dict[str, tuple]]:
    """A step_clock detail -> {state label: {bucket: (GPU step ms, after the verify ms or None, timed)}}."""
    out = {}
    for part in detail.split(" | "):
        m = GPU_BY_BATCH.search(part)
        out[part.split(":", 1)[0].strip()] = {
            b: (float(s), None if a == "-" else float(a), int(n)) for b, s, a, n in GPU_ENTRY.findall(m.group(1))} if m else {}
    return out


def _gpu_text(ours: tuple, plain: tuple) -> str:
    """The GPU's side of one step, this state / plain decoding (medians over every batch size timed)."""
    return (f"GPU, ms, this / plain: step {_pair(ours[1], plain[1])}, the launch's work {_pair(ours[2], plain[2])} "
            f"(before the verify {_pair(ours[3], None)}, the verify {_pair(ours[4], None)}, after it {_pair(ours[5], None)}), "
            f"between launches {_pair(ours[6], plain[6])}")


def _gc_pair(ours: tuple | None, plain: tuple | None) -> str:
    """Python's garbage collector per prefill launch, this server / plain decoding, and each process's longest pause."""
    if not ours or not plain:
        return ""
    text = ""
    if ours[0] and plain[0]:
        per = [(x[1] / x[0], x[2] / x[0], x[3] / x[0]) for x in (ours, plain)]
        text = ("; the garbage collector per prefill launch, this / plain: {:.2f} / {:.2f} ms, collections {:.2f} / {:.2f} "
                "(full {:.3f} / {:.3f})").format(per[0][0], per[1][0], per[0][1], per[1][1], per[0][2], per[1][2])
    return text + "; in the process, this / plain: {:.0f} / {:.0f} ms in collections, full {} / {}, the longest {:.1f} / {:.1f} ms".format(
        ours[4], plain[4], ours[6], plain[6], ours[7], plain[7])


def _alloc_pair(ours: tuple | None, plain: tuple | None) -> str:
    """The CUDA allocator's calls per prefill launch, this server / plain decoding (cudaMalloc, cudaFree, retries)."""
    if not ours or not plain or not ours[0] or not plain[0]:
        return ""
    per = [tuple(x[i] / x[0] for i in (1, 3, 4)) for x in (ours, plain)]
    return ("; the CUDA allocator per prefill launch, this / plain: cudaMalloc {:.2f} / {:.2f}, cudaFree {:.2f} / {:.2f}, "
            "retries {:.2f} / {:.2f}").format(per[0][0], per[1][0], per[0][1], per[1][1], per[0][2], per[1][2])


def _pair(a, b) -> str:
    return " / ".join("-" if x is None else f"{x:.2f}" for x in (a, b))


def _loop_text(ours: tuple, plain: tuple) -> str:
    """Where one step's time goes, this state / plain decoding (medians over every batch size read)."""
    return (f"the loop, ms, this / plain: launch {_pair(ours[0], plain[0])}, GPU wait {_pair(ours[1], plain[1])}, "
            f"rest {_pair(ours[2], plain[2])} (results {_pair(ours[4], plain[4])}, controller {_pair(ours[5], plain[5])}, "
            f"preparing {_pair(ours[3], plain[3])})")


def compare_line(path: str, plain_path: str) -> str:
    """Each of the server's states over plain decoding, median wall per decode step, bucket by bucket; then the parts
    of its step against plain's."""
    r = _rows(path).get("step_clock")
    with open(plain_path) as f:
        plain_text = f.read().strip()
    plain = by_batch(plain_text).get("plain decoding", {})
    plain_parts = loop_parts(plain_text).get("plain decoding")
    if not r or not plain:
        return "no per-batch-size readings to compare (" + ("plain's" if r else "this server's") + " are missing)"
    parts = []
    detail = r.get("detail", "")
    ours_parts, ours_gpu, ours_gpu_bs = loop_parts(detail), gpu_parts(detail), gpu_by_batch(detail)
    plain_gpu = gpu_parts(plain_text).get("plain decoding")
    plain_gpu_bs = gpu_by_batch(plain_text).get("plain decoding", {})
    ours_pf, plain_pf = prefill(detail), prefill(plain_text)
    pf_common = [b for b in ours_pf if b in plain_pf]
    if pf_common:  # first: the line is cut at 2000 characters
        parts.append("prefill / plain's, GPU ms per batch: " + ", ".join(
            f"{b}: {ours_pf[b][0] / plain_pf[b][0]:.3f} ({ours_pf[b][0]:.2f} / {plain_pf[b][0]:.2f} ms, new tokens "
            f"{ours_pf[b][3]:g} / {plain_pf[b][3]:g}"
            + ("" if ours_pf[b][1] is None else f", the draft's prefill {ours_pf[b][1]:.2f}")
            + ("" if ours_pf[b][4] is None or plain_pf[b][4] is None
               else f", host {ours_pf[b][4]:.2f} / {plain_pf[b][4]:.2f}")
            + ("" if ours_pf[b][5] is None or plain_pf[b][5] is None
               else f" (on the CPU {ours_pf[b][5]:.2f} / {plain_pf[b][5]:.2f})")
            + ("" if ours_pf[b][6] is None else f", the draft's host {ours_pf[b][6]:.2f}") + ")" for b in pf_common)
            + _alloc_pair(prefill_alloc(detail), prefill_alloc(plain_text))
            + _gc_pair(prefill_gc(detail), prefill_gc(plain_text)))
    for label, buckets in by_batch(detail).items():
        common = [b for b in buckets if b in plain]
        if common:
            text = f"{label} / plain decoding: " + ", ".join(
                f"bs {b}: {buckets[b][0] / plain[b][0]:.3f} ({buckets[b][0]:.2f} / {plain[b][0]:.2f} ms)"
                for b in common)
            if label in ours_parts and plain_parts:
                text += f"; {_loop_text(ours_parts[label], plain_parts)}"
            if label in ours_gpu and plain_gpu:
                text += f"; {_gpu_text(ours_gpu[label], plain_gpu)}"
            gpu_common = [b for b in ours_gpu_bs.get(label, {}) if b in plain_gpu_bs]
            if gpu_common:
                g = ours_gpu_bs[label]
                text += "; GPU step / plain's: " + ", ".join(
                    f"bs {b}: {g[b][0] / plain_gpu_bs[b][0]:.3f} ({g[b][0]:.2f} / {plain_gpu_bs[b][0]:.2f} ms"
                    + ("" if g[b][1] is None else f", after the verify {g[b][1]:.2f}") + ")" for b in gpu_common)
            parts.append(text)
    return " | ".join(parts) if parts else "no batch-size bucket read on both"


def main(argv: list[str]) -> int:
    if not ((len(argv) == 2 and argv[0] in ("status", "step_clock")) or (len(argv) == 3 and argv[0] == "compare")):
        print("usage: status_rows.py status|step_clock STATUS_FILE | compare STATUS_FILE PLAIN_CLOCK_TXT", file=sys.stderr)
        return 2
    kind, path = argv[:2]
    try:
        line = (status_line(path) if kind == "status" else step_clock_line(path) if kind == "step_clock"
                else compare_line(path, argv[2]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        line = f"unreadable status file {path}: {type(e).__name__}: {e}"
    print(line[:2000])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
