"""Host cost of the eager verify ops: ours vs SGLang 0.5.23's, per call, as a live server runs them.

Why: the other kernel benchmarks time CUDA-graph replays, so they see GPU time only. In SGLang's decode loop
the verify ops (greedy argmax + tree walk, tree sampling) run eagerly after the captured target forward: each
call costs its Python and launch time on the host too, and where the step is host-bound (a small target, low
concurrency) that host time is what the step pays. This file measures, at the Kimi-width serving shapes
(vocab 163840, N 4 = chain 3/1/4, bs 1/4/16/64):
  host_us   host time per call with the GPU kept busy (a sleep kernel first), so nothing waits on the GPU:
            what the call adds to a host-bound step
  eager_us  wall time per call of back-to-back eager calls from an idle GPU, synchronised at the end:
            roughly max(host, GPU) per call
  gpu_us    GPU time per call (CUDA events around calls queued behind the sleep): no host gaps
Providers: `sglang` (its JIT CUDA kernel; greedy: torch.argmax + JIT verify_tree_greedy), `ours` (the op: its
launch plan and compiled launchers, ops/_host.py), `ours_hook` (the whole hook path a server takes: dispatch,
count, op, with the launch known to be EAGLE3 as in a server's scheduler; the process runs with
SGLANG_KIMI_EAGLE3_KERNELS=ours unless set, so the hook takes our kernel whatever
the bundled table says), `ours_binder` (the same kernels through Triton's binder with guards and fresh workspaces
on every call: the path before launch plans), and for argmax + verify `ours_2launch` (the plan with the table's
config but "fused": false: split argmax and walk as two launches, the path before the one-launch kernel) and
`ours_1launch` (the one-launch kernel at every batch, where FUSED_MAX_BS keeps two launches), and `sglang_alloc` /
`ours_alloc` (each side with the buffers a server's call allocates: eagle_sample's zeros / full / empty, the greedy
hook's three torch.empty with the op writing their starting values, init=True), `sglang_eagle_sample` /
`ours_eagle_sample` (the whole call a server makes: SGLang's own eagle_sample on its own verify objects, and the same
call through our greedy hook around it, argmax_verify.HOOK_INIT / HOOK_LENS as set; `ours_eagle_sample_lens` with
HOOK_LENS on); for tree
sampling `pr02` (upstream PR 02's default path: its guards and the one fused launch through Triton's binder, kept
workspaces: what DISPATCH would record a win for). `ours` and `ours_direct` are the same op and config in plans of
their own: `ours` launches through the compiled kernel's launcher (compiled.run), `ours_direct` through Triton's C
launch itself (its plan's first call made with SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH=1), both with pointer arguments as
ints, and `ours_tensors` through the C launch with the tensors (SGLANG_KIMI_EAGLE3_INT_POINTERS=0: the C launch calls
data_ptr() and cuPointerGetAttribute per pointer), so one run separates each saving; `ours_hook` follows the
variables as set for the process.
Rounds alternate the providers (A B C D A B C D ...); the row is the
median over rounds, with min and max. The file's `fast_path` says whether the compiled launchers ran ("" = yes),
`direct_launch` whether the other Steps called Triton's C launch itself (the default; SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH=0: compiled.run),
`direct_fallbacks` the kernels that kept compiled.run and why.

    python -m benchmark.kernels.bench_host [--rounds 3] [--calls 200] [--bs 1 4 16 64] [--providers sglang ours pr02]
                                          (repository root, a GPU; --providers keeps those of each op that it names)
Results: $OUT/host-<device>.json (or benchmark/results/).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from sglang_kimi_eagle3.tuning.timing import eager_time_us

from .bench_verify import V, greedy_inputs, outs, sampling_inputs
from .harness import Results, sglang_module

BS = (1, 4, 16, 64)
N = 4


def _busy(ms: float) -> None:
    """Keep the GPU busy for about `ms` (a sleep kernel of ~2e6 cycles per ms), so host enqueues never wait."""
    torch.cuda._sleep(int(2e6 * ms))


def measure(fn, calls: int) -> dict:
    """host_us, eager_us and gpu_us per call of fn (see the module docstring)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    # host: the GPU sleeps long enough to hold every call in its queue
    _busy(max(20.0, calls * 0.5))
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    # gpu: events around calls queued behind a sleep
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    _busy(max(20.0, calls * 0.5))
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    gpu = start.elapsed_time(end) / calls * 1e3
    # eager: from an idle GPU, synchronised at the end (the per-call time `tune` judges the verify ops on)
    eager = eager_time_us(lambda _item: fn(), calls=calls, samples=1)
    return {"host_us": host, "gpu_us": gpu, "eager_us": eager}


def planned_with(direct: bool, fn, ints: bool = True):
    """fn (an op call whose plan is its own) with its plan's first call made under SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH
    = 1 or 0 and SGLANG_KIMI_EAGLE3_INT_POINTERS = 1 or 0, so its Steps keep the C launch or compiled.run, and take
    pointers as ints or tensors, whatever the process's settings; later calls as is."""
    from sglang_kimi_eagle3.ops._host import ENV_DIRECT, ENV_INT_POINTERS

    first = [True]
    want = {ENV_DIRECT: "1" if direct else "0", ENV_INT_POINTERS: "1" if ints else "0"}

    def run():
        if not first:
            return fn()
        before = {k: os.environ.get(k) for k in want}
        os.environ.update(want)
        try:
            return fn()
        finally:
            first.clear()
            for k, v in before.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    return run


PR02_LAUNCH = {"num_warps": 8, "tiles_per_program": 1}  # upstream PR 02's LAUNCH (N <= 16), the fused kernel's keys


def providers(bs: int):
    """{op: {provider: fn}} at batch size bs."""
    from sglang_kimi_eagle3.integration import dispatch
    from sglang_kimi_eagle3.integration.hooks import verify_kernels
    from sglang_kimi_eagle3.ops import argmax_verify as av
    from sglang_kimi_eagle3.ops import tree_sampling as ts
    from sglang_kimi_eagle3.ops.arch import pdl_supported
    from sglang_kimi_eagle3.ops.tables import launch_table

    tree_mod = sglang_module("kernels.ops.speculative.tree")
    samp_mod = sglang_module("kernels.ops.speculative.sampling")
    cand, ridx, nxt, sib, coins, final, probs, s = sampling_inputs(bs, N)
    o = outs(bs, N, s)
    d = torch.zeros_like(probs)
    sg = samp_mod.tree_speculative_sampling_target_only
    kw = dict(predicts=o[0], accept_index=o[1], accept_token_num=o[2], candidates=cand, retrive_index=ridx,
              retrive_next_token=nxt, retrive_next_sibling=sib, uniform_samples=coins,
              uniform_samples_for_final_sampling=final, target_probs=probs, draft_probs=d, threshold_single=1.0,
              threshold_acc=1.0, deterministic=True)
    dev = cand.device
    pdl = pdl_supported(dev)

    def sampling_binder():  # the pre-plan path: guards, config, workspaces and three binder launches every call
        b, n, s_ = ts.check_tree_inputs(o[0], o[1], o[2], cand, ridx, nxt, sib)
        ts.launch_sampling(*o, cand, ridx, nxt, sib, coins, final, probs, d, 1.0, 1.0, s_,
                           ts.op_config("tree_sampling", {"bs": b, "n": n, "vocab": V}, launch_table(dev)), pdl)

    def sampling_pr02():  # upstream PR 02's default: its guards, then one fused launch through Triton's binder
        b, n, s_ = ts.check_tree_inputs(o[0], o[1], o[2], cand, ridx, nxt, sib)
        ts.check_sampling_inputs(b, n, coins, final, probs, d, 1.0, 1.0)
        ts.launch_sampling_fused(*o, cand, ridx, nxt, sib, coins, final, probs, d, 1.0, 1.0, s_, PR02_LAUNCH)

    # ours / ours_direct: a copy of the launch table each (the same configs), so a plan key of their own (the key
    # names the table by identity): neither shares ours_hook's plan
    t_ours, t_direct, t_tensors = dict(launch_table(dev)), dict(launch_table(dev)), dict(launch_table(dev))
    sampling = {"sglang": lambda: sg(**kw),
                "ours": planned_with(False, lambda: ts.tree_speculative_sampling(**kw, table=t_ours)),
                "ours_direct": planned_with(True, lambda: ts.tree_speculative_sampling(**kw, table=t_direct)),
                "ours_tensors": planned_with(True, lambda: ts.tree_speculative_sampling(**kw, table=t_tensors), False),
                "ours_hook": lambda: verify_kernels.tree_sampling_hook(sg, **kw), "ours_binder": sampling_binder,
                "pr02": sampling_pr02}
    gc, gr, gn, gs, logits, gs_s = greedy_inputs(bs, N)
    go = outs(bs, N, gs_s)

    def sglang_greedy():
        tree_mod.verify_tree_greedy(*go, gc, gr, gn, gs, torch.argmax(logits, -1).view(bs, N))

    def ours_greedy_hook():  # the greedy hook's dispatch around the op (its SGLang batch objects left out)
        return dispatch.call(verify_kernels.H1, verify_kernels.shape_key(bs, N), logits.device, "",
                             lambda: av.argmax_verify_greedy(*go, gc, gr, gn, gs, logits), sglang_greedy)

    depth = go[1].shape[1]

    def sglang_alloc():  # eagle_sample's greedy branch as a server runs it: its three buffers, argmax, the walk
        p = torch.zeros(bs * N, dtype=torch.int32, device=dev)
        a = torch.full((bs, depth), -1, dtype=torch.int32, device=dev)
        k = torch.empty((bs,), dtype=torch.int32, device=dev)
        tree_mod.verify_tree_greedy(p, a, k, gc, gr, gn, gs, torch.argmax(logits, -1).view(bs, N))

    t_init = dict(launch_table(dev))

    def ours_alloc():  # the greedy hook's op as a server runs it: three torch.empty buffers, the op writes them whole
        p = torch.empty(bs * N, dtype=torch.int32, device=dev)
        a = torch.empty((bs, depth), dtype=torch.int32, device=dev)
        k = torch.empty((bs,), dtype=torch.int32, device=dev)
        av.argmax_verify_greedy(p, a, k, gc, gr, gn, gs, logits, table=t_init, init=True)

    # the whole call a server makes: SGLang's own eagle_sample on its own objects (EagleVerifyInput, ScheduleBatch,
    # LogitsProcessorOutput), and the same call through our greedy hook around it (the plugin's server path)
    from sglang.srt.layers.logits_processor import LogitsProcessorOutput

    from sglang_kimi_eagle3.integration.verify_batch import greedy_verify_batch

    eagle_utils = sglang_module("srt.speculative.eagle_utils")
    sg_eagle_sample = eagle_utils.eagle_sample  # SGLang's own: no plugin is loaded in this process
    # a server publishes its config before any verify; eagle_sample reads one flag of it (rejection sampling: off by
    # default, and off HIP it does not enter the greedy choice). No server runs here: that flag, as a server has it
    if not hasattr(eagle_utils, "_kimi_bench_spec"):
        import types

        eagle_utils._kimi_bench_spec = types.SimpleNamespace(speculative_use_rejection_sampling=False)
        eagle_utils.get_spec = lambda: eagle_utils._kimi_bench_spec
    vi, batch = greedy_verify_batch(torch, gc, gr, gn, gs, depth - 1, V, device=str(dev), topk=1)
    lo = LogitsProcessorOutput(next_token_logits=logits)

    def ours_eagle_sample_lens():  # the same with HOOK_LENS on (the kernel writes the accept lengths: no `+ 1`)
        before = av.HOOK_LENS
        av.HOOK_LENS = True
        try:
            return verify_kernels.eagle_sample_hook(sg_eagle_sample, vi, batch, lo)
        finally:
            av.HOOK_LENS = before

    two = dict(av.argmax_config(bs * N, V, bs, N, dev, None, None), fused=False)  # the table's config, two launches
    # one launch at every batch (the table's config otherwise): where FUSED_MAX_BS should sit for eager calls
    one = dict(av.argmax_config(bs * N, V, bs, N, dev, None, None), fused=True, fused_max_bs=1 << 30, rows_per_program=1,
               verify_rows_per_program=1)
    greedy = {"sglang": sglang_greedy,
              "ours": planned_with(False, lambda: av.argmax_verify_greedy(*go, gc, gr, gn, gs, logits, table=t_ours)),
              "ours_direct": planned_with(True, lambda: av.argmax_verify_greedy(*go, gc, gr, gn, gs, logits,
                                                                                 table=t_direct)),
              "ours_tensors": planned_with(True, lambda: av.argmax_verify_greedy(*go, gc, gr, gn, gs, logits,
                                                                                  table=t_tensors), False),
              "ours_hook": ours_greedy_hook, "ours_binder": lambda: av.launch_binder(*go, gc, gr, gn, gs, logits),
              "ours_2launch": lambda: av.argmax_verify_greedy(*go, gc, gr, gn, gs, logits, config=two),
              "ours_1launch": lambda: av.argmax_verify_greedy(*go, gc, gr, gn, gs, logits, config=one),
              "sglang_alloc": sglang_alloc, "ours_alloc": ours_alloc,
              "sglang_eagle_sample": lambda: sg_eagle_sample(vi, batch, lo),
              "ours_eagle_sample": lambda: verify_kernels.eagle_sample_hook(sg_eagle_sample, vi, batch, lo),
              "ours_eagle_sample_lens": ours_eagle_sample_lens}
    return {"tree_sampling": sampling, "argmax+verify": greedy}


# every op's providers, together
PROVIDERS = ("sglang", "ours", "ours_direct", "ours_tensors", "ours_hook", "ours_binder", "ours_2launch", "ours_1launch",
             "sglang_alloc", "ours_alloc", "sglang_eagle_sample", "ours_eagle_sample", "ours_eagle_sample_lens", "pr02")


def keep(provs: dict, names: list[str] | None) -> dict:
    """The providers of one op that `names` lists (all without names), in the op's order."""
    return dict(provs) if not names else {p: fn for p, fn in provs.items() if p in names}


def check_providers(names: list[str] | None) -> None:
    """One line naming the flag and the choices for a name no op has (UserError: exit 2)."""
    from sglang_kimi_eagle3.errors import UserError

    bad = [n for n in names or () if n not in PROVIDERS]
    if bad:
        raise UserError(f"--providers {bad[0]!r}: not a provider; choose from {', '.join(PROVIDERS)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per provider (median reported)")
    ap.add_argument("--calls", type=int, default=200, help="calls per measurement")
    ap.add_argument("--bs", type=int, nargs="+", default=list(BS), help="batch sizes (default: %(default)s)")
    ap.add_argument("--providers", nargs="+", default=None,
                    help=f"keep only these providers of each op (of {', '.join(PROVIDERS)}; default: all)")
    args = ap.parse_args()
    from sglang_kimi_eagle3.errors import UserError

    try:
        check_providers(args.providers)
    except UserError as exc:
        print(f"bench_host: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    from sglang_kimi_eagle3.base import ENV_KERNELS
    from sglang_kimi_eagle3.ops._host import direct_fallbacks, direct_reason, fast_path_reason

    os.environ.setdefault(ENV_KERNELS, "ours")  # ours_hook: the hook takes our kernel (not the table's verdict)
    from sglang_kimi_eagle3.integration import launch_record

    # a scheduler of an EAGLE3 launch has `our_launch()` cached True once SGLang published its spec config; here no
    # config is ever published, so without this every hook call would retry (and fail) that lookup
    launch_record._OURS[0] = True
    res = Results("host")
    res.meta["fast_path"] = fast_path_reason()
    res.meta["kernels"] = os.environ[ENV_KERNELS]
    res.meta["direct_launch"] = direct_reason()  # SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH=1: the C launch itself ("" = on)
    print(f"compiled-launcher fast path: {res.meta['fast_path'] or 'on'}; direct C launch: {res.meta['direct_launch'] or 'on'}",
          flush=True)
    for bs in args.bs:
        ops = providers(bs)
        for op, provs in ops.items():
            provs = keep(provs, args.providers)
            runs: dict = {p: [] for p in provs}
            for _ in range(args.rounds):
                for p, fn in provs.items():
                    runs[p].append(measure(fn, args.calls))
            for p, rs in runs.items():
                row = {}
                for k in ("host_us", "gpu_us", "eager_us"):
                    vals = [r[k] for r in rs]
                    row[k] = statistics.median(vals)
                    row[k + "_min"], row[k + "_max"] = min(vals), max(vals)
                res.add(op, p, {"bs": bs, "n": N, "vocab": V}, {"us": row["host_us"]}, **row, rounds=args.rounds,
                        calls=args.calls)
        res.meta["direct_fallbacks"] = direct_fallbacks()
        res.save()
    lines = [f"{'op':14s} {'bs':>3s} {'provider':11s} {'host µs':>9s} {'gpu µs':>8s} {'eager µs':>9s}"]
    for r in res.rows:
        lines.append(f"{r['op']:14s} {r['shape']['bs']:3d} {r['provider']:11s} {r['host_us']:9.1f} {r['gpu_us']:8.1f} "
                     f"{r['eager_us']:9.1f}")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
