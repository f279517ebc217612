"""Decode-step anatomy: per decode step, the GPU time of each kernel family this plugin substitutes - ours
(a server with SGLANG_KIMI_EAGLE3_KERNELS=auto) against SGLang's (=upstream) - and its share of the step.

    # profile steady decode on running servers (SGLang's own /start_profile: torch.profiler, chrome trace)
    python benchmark/serving/anatomy.py capture --server auto=http://127.0.0.1:30002 \\
        --server upstream=http://127.0.0.1:30003 --concurrency 1,64 --temperatures 0,0.7 --out /tmp/anatomy
    # read traces already written (one JSON summary per trace, then the table)
    python benchmark/serving/anatomy.py parse /tmp/anatomy/*.trace.json.gz --json anatomy.json

capture, per server, concurrency c and temperature: one wave of c requests (ignore_eos; output length so the wave fits
--kv-tokens, so all are admitted at once and end together) is sent; after --settle-s every one is decoding (no
prefill in the window), then POST /start_profile {num_steps, activities
CPU+GPU, no stacks/shapes, output_dir, profile_prefix}; SGLang profiles that many scheduler steps, writes
`<prefix>-<id>-TP-0.trace.json.gz` (torch.profiler's chrome trace, gzipped) and stops by itself. The requests
then finish before the next capture starts. The server must write into --out (same machine).

parse: GPU activity is the trace's `"ph": "X"` events of category `kernel` (CUDA-graph replays included: each
captured kernel is its own event), `gpu_memcpy` and `gpu_memset`. A step = one verify (the one-per-step kernel
that ends it: ours `verify_greedy_kernel` / `_sample_kernel`, SGLang's `VerifyTreeGreedy` /
`TreeSpeculativeSamplingTargetOnly`); step wall = first kernel start to last kernel end / steps, GPU busy = the
union of kernel intervals / steps. Families (ours by kernel name; SGLang's by name, or by position where its
kernel is a generic one):
  draft lm_head   ours _lm_head_gemv_kernel; SGLang's: the kernel right before a draft top-k on its stream,
                  skipping copies, casts and softmax (its cuBLAS GEMM has no name of its own)
  draft top-k     ours _row_topk_kernel; SGLang's _draft_topk1_* (top-1) and torch.topk's kernels (top-k > 1)
  greedy verify   ours _argmax_verify_kernel (one launch; with "fused": false _split_argmax_kernel +
                  verify_greedy_kernel); SGLang's VerifyTreeGreedy + the torch.argmax right before it
  sampling verify ours _tree_sampling_kernel (one launch; with "fused": false _walk_kernel, _tile_sums_kernel,
                  _sample_kernel); SGLang's TreeSpeculativeSamplingTargetOnly
`top_kernels`: every GPU activity by name, µs per step, the dearest TOP_K: where the rest of a step goes. A server
without a verify kernel (plain decoding) counts the profiled scheduler steps (capture's --steps) as its steps.
`host_api`: the CUDA runtime and driver calls on the host by name (µs and calls per step, the longest call): a copy
that waited on the GPU, the number of eager launches a step makes.
The host side (`host_verify_path`, a row of its own in the table): per step, the CPU time of the eager path around the
verify kernel, from the end of the CUDA-graph launch before its launch (the target verify) to the start of the next
graph launch (the draft extend), on the thread that launched it (median over the steps; the profiler's own CPU
tracing adds to it, the same on both servers).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import threading
import time
from pathlib import Path

FAMILIES = {  # family -> (ours, SGLang's by name)
    "draft lm_head": (r"_lm_head_gemv_kernel", None),
    "draft top-k": (r"_row_topk_kernel",
                    r"_draft_topk1_(partial_argmax|finalize)_kernel|gatherTopK|sbtopk|mbtopk|radixFindKthValues|"
                    r"computeBlockwise(WithinKCounts|KthCounts)"),
    "greedy verify": (r"_argmax_verify_kernel|_split_argmax_kernel|verify_greedy_kernel", r"VerifyTreeGreedy"),
    "sampling verify": (r"_tree_sampling_kernel|_walk_kernel|_tile_sums_kernel|_sample_kernel",
                        r"TreeSpeculativeSamplingTargetOnly"),
}
# SGLang's kernels found by position: (family, anchor on the same stream, kernels skipped walking back, must match)
BEFORE = (
    ("draft lm_head", r"_draft_topk1_partial_argmax_kernel|_row_topk_kernel|gatherTopK|sbtopk|mbtopk|radixFindKthValues",
     r"copy|elementwise|vectorized|cast|Cast|fill|Memset|Memcpy|SoftMax|softmax|_draft_topk1_|radix|computeBlockwise",
     None),
    ("greedy verify", r"VerifyTreeGreedy", r"fill|Memset|Memcpy|copy", r"ArgMax"),
)
STEP_END = (r"_argmax_verify_kernel|_tree_sampling_kernel|verify_greedy_kernel|_sample_kernel|VerifyTreeGreedy|"
            r"TreeSpeculativeSamplingTargetOnly")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
TOP_K = 15  # kernels listed per summary (top_kernels)


# ---- the trace (pure) -------------------------------------------------------------------------------------


def load_events(path) -> list[dict]:
    """The events of a torch.profiler chrome trace: `.json` or `.json.gz`, an object with traceEvents or a bare list."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise ValueError(f"{path}: no traceEvents list (not a chrome trace)")
    return events


def gpu_events(events: list[dict]) -> list[dict]:
    """GPU activity as {name, cat, ts, end, stream}, sorted by start (µs)."""
    out = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in GPU_CATS or "dur" not in e:
            continue
        ts, dur = float(e["ts"]), float(e["dur"])
        args = e.get("args") or {}
        out.append({"name": str(e.get("name", "")), "cat": e["cat"], "ts": ts, "end": ts + dur, "dur": dur,
                    "stream": args.get("stream", e.get("tid"))})
    out.sort(key=lambda k: (k["ts"], k["end"]))
    return out


def classify(ks: list[dict]) -> list[tuple[str, str] | None]:
    """(family, "ours" | "sglang") for each GPU event, or None."""
    pats = {f: (re.compile(o), re.compile(s) if s else None) for f, (o, s) in FAMILIES.items()}
    out: list = [None] * len(ks)
    for i, k in enumerate(ks):
        if k["cat"] != "kernel":
            continue
        for fam, (ours, theirs) in pats.items():
            if ours.search(k["name"]):
                out[i] = (fam, "ours")
                break
            if theirs is not None and theirs.search(k["name"]):
                out[i] = (fam, "sglang")
                break
    by_stream: dict = {}
    for i, k in enumerate(ks):
        by_stream.setdefault(k["stream"], []).append(i)
    for fam, anchor, skip, must in BEFORE:
        anchor_re, skip_re, must_re = re.compile(anchor), re.compile(skip), re.compile(must) if must else None
        for idx in by_stream.values():
            for pos, i in enumerate(idx):
                if ks[i]["cat"] != "kernel" or not anchor_re.search(ks[i]["name"]):
                    continue
                j = pos - 1
                while j >= 0 and skip_re.search(ks[idx[j]]["name"]):
                    j -= 1
                if j < 0:
                    continue
                prev = idx[j]
                if out[prev] is None and ks[prev]["cat"] == "kernel" and (must_re is None or must_re.search(ks[prev]["name"])):
                    out[prev] = (fam, "sglang")
    return out


def _union_us(ks: list[dict]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for k in ks:  # sorted by start
        if cur_e is None or k["ts"] > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = k["ts"], k["end"]
        else:
            cur_e = max(cur_e, k["end"])
    return total + ((cur_e - cur_s) if cur_e is not None else 0.0)


def anatomy(events: list[dict], steps: int | None = None) -> dict:
    """Per step: wall, GPU busy, and for each family and side the µs, share of the step wall, calls and kernels."""
    ks = gpu_events(events)
    if not ks:
        return {"steps": 0, "step_wall_us": None, "step_gpu_busy_us": None, "families": {},
                "host_verify_path": host_verify_path(events)}
    end_re = re.compile(STEP_END)
    n = sum(1 for k in ks if k["cat"] == "kernel" and end_re.search(k["name"])) or steps or 1
    wall = (max(k["end"] for k in ks) - ks[0]["ts"]) / n
    fams: dict = {}
    for k, tag in zip(ks, classify(ks)):
        if tag is None:
            continue
        node = fams.setdefault(tag[0], {}).setdefault(tag[1], {"us_per_step": 0.0, "calls_per_step": 0.0, "kernels": {}})
        node["us_per_step"] += k["dur"] / n
        node["calls_per_step"] += 1 / n
        node["kernels"][k["name"][:80]] = node["kernels"].get(k["name"][:80], 0.0) + k["dur"] / n
    for sides in fams.values():
        for node in sides.values():
            node["share"] = node["us_per_step"] / wall if wall else None
    return {"steps": n, "step_wall_us": wall, "step_gpu_busy_us": _union_us(ks) / n, "families": fams,
            "top_kernels": top_kernels(ks, n), "host_verify_path": host_verify_path(events),
            "host_api": host_api(events, n)}


def top_kernels(ks: list[dict], n: int, k: int = TOP_K) -> dict:
    """Every GPU activity by name (kernels, copies, sets; names cut at 80 characters), µs per step, the `k` dearest
    first: where a step's GPU time goes whatever family it is (the off-state against plain decoding: which kernels
    the speculative path adds)."""
    by: dict = {}
    for e in ks:
        by[e["name"][:80]] = by.get(e["name"][:80], 0.0) + e["dur"] / n
    return dict(sorted(by.items(), key=lambda kv: -kv[1])[:k])


def host_api(events: list[dict], n: int, k: int = TOP_K) -> dict:
    """The CUDA runtime and driver calls on the host, by name: µs per step, calls per step and the longest single
    call, the `k` dearest first. Where a speculative step costs more than a plain one with no more GPU time, this is
    where the host waited: an H2D copy from pageable memory that CUDA turned into a wait on the step in flight shows
    as a cudaMemcpyAsync of milliseconds, a step's eager launches as the cudaLaunchKernel / cuLaunchKernelEx count."""
    by: dict = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("cuda_runtime", "cuda_driver") or "dur" not in e:
            continue
        row = by.setdefault(str(e.get("name", ""))[:60], {"us_per_step": 0.0, "calls_per_step": 0.0, "max_us": 0.0})
        d = float(e["dur"])
        row["us_per_step"] += d / n
        row["calls_per_step"] += 1 / n
        row["max_us"] = max(row["max_us"], d)
    return dict(sorted(by.items(), key=lambda kv: -kv[1]["us_per_step"])[:k])


def host_verify_path(events: list[dict]) -> dict:
    """The host time of the eager path around each step's verify kernel: on the CPU thread that launched it, from the
    end of the CUDA-graph launch before that kernel's launch (the target-verify graph) to the start of the next
    graph launch (the draft extend), in µs; the runtime launch is found by the kernel's `correlation` id. A step
    without a graph launch on either side is left out (`steps` counts those measured)."""
    # runtime and driver API calls: a Triton kernel (ours) launches through the driver's cuLaunchKernelEx, which the
    # profiler files as `cuda_driver` (run 15 measured no step with the runtime calls alone: the likely cause)
    rt = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "dur" in e]
    by_corr = {(e.get("args") or {}).get("correlation"): e for e in rt}
    end_re = re.compile(STEP_END)
    graphs: dict = {}
    for e in rt:
        if "GraphLaunch" in str(e.get("name", "")):
            graphs.setdefault((e.get("pid"), e.get("tid")), []).append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    for g in graphs.values():
        g.sort()
    spans = []
    for k in events:
        if k.get("ph") != "X" or k.get("cat") != "kernel" or not end_re.search(str(k.get("name", ""))):
            continue
        r = by_corr.get((k.get("args") or {}).get("correlation"))
        g = graphs.get((r.get("pid"), r.get("tid"))) if r is not None else None
        if not g:
            continue
        ts, end = float(r["ts"]), float(r["ts"]) + float(r["dur"])
        before = [ge for gs, ge in g if ge <= ts]
        after = [gs for gs, ge in g if gs >= end]
        if before and after:
            spans.append(after[0] - before[-1])
    spans.sort()
    if not spans:
        return {"steps": 0, "median_us": None, "min_us": None, "max_us": None}
    return {"steps": len(spans), "median_us": spans[len(spans) // 2] if len(spans) % 2 else
            (spans[len(spans) // 2 - 1] + spans[len(spans) // 2]) / 2, "min_us": spans[0], "max_us": spans[-1]}


def _us(node, side):
    v = (node or {}).get(side)
    return v["us_per_step"] if v else 0.0


def table(summaries: list[dict], ours_server: str = "auto", theirs_server: str = "upstream") -> str:
    """Markdown: per family, concurrency, temperature - ours (in the auto server) vs SGLang's (upstream server)."""
    idx = {(s["server"], s["concurrency"], s["temperature"]): s["anatomy"] for s in summaries}
    keys = sorted({(c, t) for (_s, c, t) in idx})
    lines = ["| family | c | T | ours µs/step (auto) | SGLang's µs/step (upstream) | ours / SGLang's | share of step: auto "
             "| share: upstream | step µs: auto / upstream |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c, t in keys:
        a, u = idx.get((ours_server, c, t)), idx.get((theirs_server, c, t))
        if not a or not u:
            continue
        for fam in FAMILIES:
            fa, fu = a["families"].get(fam), u["families"].get(fam)
            if not fa and not fu:
                continue
            ours, theirs = _us(fa, "ours"), _us(fu, "sglang")
            mixed = _us(fa, "sglang")  # in the auto server, SGLang's kernel where the table gives ours no win
            share_a = (ours + mixed) / a["step_wall_us"] if a["step_wall_us"] else 0
            share_u = (theirs + _us(fu, "ours")) / u["step_wall_us"] if u["step_wall_us"] else 0
            ratio = f"{ours / theirs:.2f}" if ours and theirs else "-"
            lines.append(f"| {fam} | {c} | {t:g} | {ours:.1f}" + (f" (+{mixed:.1f} SGLang's)" if mixed else "")
                         + f" | {theirs:.1f} | {ratio} | {100 * share_a:.1f} % | {100 * share_u:.1f} % "
                         f"| {a['step_wall_us']:.0f} / {u['step_wall_us']:.0f} |")
        ha, hu = (a.get("host_verify_path") or {}).get("median_us"), (u.get("host_verify_path") or {}).get("median_us")
        if ha is not None and hu is not None:  # CPU time, not GPU: the eager path between two graph launches
            lines.append(f"| host: eager verify path (CPU) | {c} | {t:g} | {ha:.1f} | {hu:.1f} | {ha / hu:.2f} "
                         f"| {100 * ha / a['step_wall_us']:.1f} % | {100 * hu / u['step_wall_us']:.1f} % "
                         f"| {a['step_wall_us']:.0f} / {u['step_wall_us']:.0f} |")
    return "\n".join(lines)


# ---- capture (a running server) --------------------------------------------------------------------------


PROMPT = "Write a long story about a lighthouse keeper and the sea."


def wave_tokens(c: int, kv_tokens: int, cap: int) -> int:
    """Output tokens per request so that one wave of c requests fits kv_tokens of KV cache (prompt included): one
    wave, all admitted at once and all ending together, keeps prefill out of the profiled decode window."""
    return max(16, min(cap, kv_tokens // c - len(PROMPT) - 8))


def capture_one(url: str, out_dir: Path, prefix: str, c: int, temperature: float, steps: int, max_new_tokens: int,
                settle_s: float, timeout_s: float = 120.0) -> Path:
    """Profile `steps` scheduler steps of steady decode at concurrency c; returns the trace SGLang wrote."""
    from sglang_kimi_eagle3.bench import client

    client.reset()
    sp = {"max_new_tokens": max_new_tokens, "temperature": temperature, "ignore_eos": True}
    text = PROMPT
    threads = [threading.Thread(target=client.generate, args=(url, f"a{i}", "chat", text, sp, timeout_s), daemon=True)
               for i in range(c)]
    for t in threads:
        t.start()
    time.sleep(settle_s)
    before = set(out_dir.glob(f"{prefix}-*.trace.json*"))
    status, body = client.request("POST", url, "/start_profile", {
        "output_dir": str(out_dir), "num_steps": steps, "activities": ["CPU", "GPU"], "with_stack": False,
        "record_shapes": False, "profile_prefix": prefix}, 60.0)
    if status != 200:
        raise RuntimeError(f"{url}/start_profile: HTTP {status}: {body[:200]!r}")
    deadline = time.monotonic() + timeout_s
    path = None
    while time.monotonic() < deadline:
        new = set(out_dir.glob(f"{prefix}-*.trace.json*")) - before
        if new:
            path = sorted(new)[-1]
            size = -1
            while path.stat().st_size != size:  # written: size stable for 1 s
                size = path.stat().st_size
                time.sleep(1.0)
            break
        time.sleep(0.5)
    for t in threads:
        t.join(timeout_s)
    if path is None:
        raise RuntimeError(f"{url}: no trace {prefix}-*.trace.json.gz in {out_dir} after {timeout_s:g} s "
                           "(does the server write to this folder?)")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmark/serving/anatomy.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    cp = sub.add_parser("capture", help="profile running servers, then parse")
    cp.add_argument("--server", action="append", required=True, help="NAME=URL (e.g. auto=..., upstream=...)")
    cp.add_argument("--concurrency", default="1,64")
    cp.add_argument("--temperatures", default="0,0.7")
    cp.add_argument("--steps", type=int, default=30)
    cp.add_argument("--kv-tokens", type=int, default=56000, help="KV budget of one wave (under --max-total-tokens)")
    cp.add_argument("--max-new-tokens", type=int, default=4096, help="cap per request (the context limit)")
    cp.add_argument("--settle-s", type=float, default=0.5, help="wait after sending the wave (admission, prefill)")
    cp.add_argument("--out", required=True, help="folder the servers write their traces into")
    cp.add_argument("--json", help="summary JSON (default OUT/anatomy.json)")
    pp = sub.add_parser("parse", help="summarize traces already written")
    pp.add_argument("traces", nargs="+")
    pp.add_argument("--json")
    a = ap.parse_args(argv)
    summaries = []
    if a.cmd == "capture":
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        dest = a.json or str(out / "anatomy.json")
        # every server at one level before the next level (a cut call keeps whole comparisons), the summary rewritten
        # after every capture
        for t in [float(x) for x in a.temperatures.split(",")]:
            for c in [int(x) for x in a.concurrency.split(",")]:
                for srv in a.server:
                    name, _, url = srv.partition("=")
                    prefix = f"{name}-c{c}-T{t:g}"
                    try:
                        path = capture_one(url, out, prefix, c, t, a.steps, wave_tokens(c, a.kv_tokens, a.max_new_tokens),
                                           a.settle_s)
                    except Exception as exc:  # one failed capture: the others still run
                        print(f"anatomy: {prefix}: {type(exc).__name__}: {exc}", file=sys.stderr)
                        continue
                    summaries.append({"server": name, "concurrency": c, "temperature": t, "trace": path.name,
                                      "anatomy": anatomy(load_events(path), a.steps)})
                    got = summaries[-1]["anatomy"]["steps"]
                    print(f"anatomy: {prefix}: {path.name}, {got} steps, "
                          f"{summaries[-1]['anatomy']['step_wall_us'] or 0:.0f} µs per step"
                          + ("" if got * 2 >= a.steps else " (fewer verifies than steps profiled: the wave ended "
                                                             "early? raise --kv-tokens or lower --settle-s)"), flush=True)
                    _write(dest, summaries)
    else:
        for p in a.traces:
            m = re.match(r"(?P<server>[^-]+)-c(?P<c>\d+)-T(?P<t>[\d.]+)-", Path(p).name)
            summaries.append({"server": m["server"] if m else Path(p).name, "concurrency": int(m["c"]) if m else 0,
                              "temperature": float(m["t"]) if m else 0.0, "trace": Path(p).name,
                              "anatomy": anatomy(load_events(p))})
        dest = a.json
    if dest:
        _write(dest, summaries)
        print(f"wrote {dest}")
    print(table(summaries, _ours_name(summaries)))
    return 0 if summaries or a.cmd != "capture" else 1  # every capture failed: not done


def _ours_name(summaries: list[dict]) -> str:
    """The column of ours: the first server that is not upstream (auto, or ours: device_e2e.sh OURS=1)."""
    return next((x["server"] for x in summaries if x["server"] != "upstream"), "auto")


def _write(dest: str, summaries: list[dict]) -> None:
    from sglang_kimi_eagle3.validate import atomic_write_text

    atomic_write_text(dest, json.dumps({"summaries": summaries, "table": table(summaries, _ours_name(summaries))},
                                       indent=1) + "\n", "--json")


if __name__ == "__main__":
    sys.exit(main())
