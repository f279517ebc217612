"""How long `sglang-kimi-eagle3 check` takes on the embedded default, split by who spends it.

    python benchmark/preflight/bench_check.py [--repeat 20]

Phases: interpreter + SGLang import + plugin load; SGLang's own argument parsing and resolution
(resolve_once, emulated SM120); our checks themselves (Deployment build from configs + every check),
cold (first call in the process: includes importing SGLang's Kimi-K2.5 model class to inspect it) and
warm (median of --repeat). The goal (issue 3) is the checks themselves under 1 s, excluding interpreter
and SGLang import. Writes benchmark/results/preflight-<host>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
import warnings

T0 = time.perf_counter()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    import logging

    logging.getLogger("sglang_kimi_eagle3").setLevel(logging.WARNING)
    from sglang.srt.plugins import load_plugins

    from sglang_kimi_eagle3.commands.check import check_launch, parse_gpu, resolve_model_paths
    from sglang_kimi_eagle3.integration.preflight.inputs import build_deployment
    from sglang_kimi_eagle3.preflight import run_checks
    from sglang_kimi_eagle3.profiles import DEFAULT_ARGV

    load_plugins()
    t_import = time.perf_counter() - T0
    logging.getLogger().setLevel(logging.ERROR)
    argv, labels = resolve_model_paths(list(DEFAULT_ARGV))
    argv += ["--device", "cuda"]
    gpu = parse_gpu("sm120", "benchmark")

    def resolved():  # the same public function `check` runs: parse, resolve as on the GPU, our step collects
        return check_launch(argv, gpu, labels)["server_args"]

    t = time.perf_counter()
    sa = resolved()
    t_first_resolve = time.perf_counter() - t  # includes SGLang's lazy imports and our first (cold) checks
    resolve_times = []
    for _ in range(3):
        t = time.perf_counter()
        resolved()
        resolve_times.append(time.perf_counter() - t)

    def ours():
        return run_checks(build_deployment(sa, gpu, labels=labels))

    ours_times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        findings = ours()
        ours_times.append(time.perf_counter() - t)
    out = {
        "bench": "preflight_check", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
        "python": platform.python_version(), "command": " ".join([sys.executable] + sys.argv),
        "interpreter_sglang_import_plugin_load_s": round(t_import, 3),
        "first_resolution_incl_lazy_imports_and_cold_checks_s": round(t_first_resolve, 3),
        "sglang_resolution_warm_median_s": round(statistics.median(resolve_times), 3),
        "our_checks_warm_median_s": round(statistics.median(ours_times), 4),
        "our_checks_warm_max_s": round(max(ours_times), 4),
        "findings": len(findings), "repeat": args.repeat,
    }
    try:
        from importlib.metadata import version

        out["sglang"] = version("sglang")
        out["sglang_kimi_eagle3"] = version("sglang-kimi-eagle3")
    except Exception:
        pass
    dest = os.path.join(os.path.dirname(__file__), "..", "results", "preflight-cpu.json")
    with open(dest, "w") as f:
        json.dump(out, f, indent=1)
    for k, v in out.items():
        print(f"{k:55s} {v}")
    print(f"goal: our checks < 1 s -> {'met' if out['our_checks_warm_median_s'] < 1 else 'MISSED'}")


if __name__ == "__main__":
    main()
