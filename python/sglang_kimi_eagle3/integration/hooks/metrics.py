"""This plugin's per-hook counters in SGLang's Prometheus registry, when the launch has `--enable-metrics`.

SGLang 0.5.23 runs prometheus_client in multiprocess mode: the main process sets PROMETHEUS_MULTIPROC_DIR
(utils/common.py `set_prometheus_multiproc_dir`, from entrypoints/engine.py when enable_metrics is on)
before it starts the schedulers, every process's metrics are files in that folder, and the HTTP server's
`/metrics` reads them all with `multiprocess.MultiProcessCollector` (`add_prometheus_middleware`).
So a metric this plugin creates in a scheduler appears on SGLang's `/metrics` next to `sglang:spec_*`.

Exported (docs/metrics.md):
  sglang_kimi_eagle3:hook_calls_total{hook, kernel="ours"|"sglang", reason, bucket, tp_rank}  counter
    every call a kernel hook saw (hookstatus.count): whose kernel ran, why SGLang's ("" for ours), the
    shape bucket. Calls replayed from a CUDA graph never reach Python: a captured batch size counts once.
  sglang_kimi_eagle3:hook_state{hook, state, tp_rank}  gauge, 1 for the hook's state after capture
    (applied / skipped / failed / registered), 0 for its other states.
Like SGLang's scheduler metrics, only the TP-0 scheduler exports unless --enable-metrics-for-all-schedulers.
Fed from hookstatus: the counts so far when the exporter starts (after the draft CUDA graphs are captured),
then each new count as it happens.

Status row `metrics` (in the one table, so `status --running` shows what happened in the scheduler):
  registered  queued; runs in each scheduler of an EAGLE/EAGLE3 launch after capture (runtime_status.on_publish)
  applied     exporting in this process
  skipped     --enable-metrics off, or a TP rank > 0 without --enable-metrics-for-all-schedulers
  failed      --enable-metrics on but no PROMETHEUS_MULTIPROC_DIR here, or an error creating the metrics
              (serving goes on either way: a metric never stops a launch)
"""

from __future__ import annotations

import os

from ...base import logger
from ...status import hookstatus

NAME = "metrics"
TARGET = "sglang.srt.speculative.base_spec_worker.BaseSpecWorker.init_cuda_graphs"  # runs in runtime_status's hook
CALLS = "sglang_kimi_eagle3:hook_calls"  # prometheus_client adds _total
STATE = "sglang_kimi_eagle3:hook_state"
_M: dict = {}


def install() -> None:
    """Record the row and run the exporter where the status table is published (each scheduler, after capture)."""
    from . import runtime_status

    hookstatus.record(NAME, TARGET, "registered", "exports the hook counters to SGLang's /metrics in each scheduler "
                      "after CUDA-graph capture, when the launch has --enable-metrics")
    runtime_status.on_publish(on_publish)


def metrics_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def start(tp_rank: int = 0) -> bool:
    """Create the two metrics in this process and feed them; False when SGLang's multiprocess folder is not
    set (metrics off). Idempotent."""
    if _M:
        return True
    if metrics_dir() is None:
        return False
    from prometheus_client import Counter, Gauge  # after PROMETHEUS_MULTIPROC_DIR, as SGLang imports it

    calls = Counter(CALLS, "Calls seen by a sglang-kimi-eagle3 kernel hook: whose kernel ran (ours or SGLang's), "
                    "why SGLang's, shape bucket", labelnames=["hook", "kernel", "reason", "bucket", "tp_rank"])
    state = Gauge(STATE, "sglang-kimi-eagle3 hook state after CUDA-graph capture (1 for the current state)",
                  labelnames=["hook", "state", "tp_rank"], multiprocess_mode="mostrecent")
    rank = str(tp_rank)
    _M.update(calls=calls, state=state, rank=rank)
    for (hook, who, bucket, reason), n in hookstatus.count_items():
        calls.labels(hook, who, reason, bucket, rank).inc(n)
    hookstatus.add_listener(_on_count)
    publish_states()
    return True


def _on_count(hook: str, who: str, bucket: str, reason: str) -> None:
    _M["calls"].labels(hook, who, reason, bucket, _M["rank"]).inc()


def publish_states() -> None:
    if not _M:
        return
    for row in hookstatus.rows():
        for s in hookstatus.STATES:
            _M["state"].labels(row.name, s, _M["rank"]).set(1 if row.state == s else 0)


def on_publish() -> None:
    """runtime_status binder (each scheduler, after capture): start exporting where SGLang exports, and say so
    in the status row (applied / skipped / failed)."""
    try:
        from sglang.srt.runtime_context import get_observability, get_parallel

        obs = get_observability()
        if not getattr(obs, "enable_metrics", False):
            hookstatus.record(NAME, TARGET, "skipped", "--enable-metrics is off: nothing exported (the status file "
                              "and `status --running` still report)")
            return
        rank = int(getattr(get_parallel(), "tp_rank", 0) or 0)
        if rank != 0 and not getattr(obs, "enable_metrics_for_all_schedulers", False):
            hookstatus.record(NAME, TARGET, "skipped", f"TP rank {rank}: only the TP-0 scheduler exports, as SGLang's "
                              "scheduler metrics (--enable-metrics-for-all-schedulers exports every rank)")
            return
        from ..registry import refresh

        refresh()  # queued rows -> applied / failed, as the status table reads them
        if not start(rank):
            hookstatus.record(NAME, TARGET, "failed", "--enable-metrics is on but PROMETHEUS_MULTIPROC_DIR is not set "
                              "in this scheduler (SGLang's engine sets it before it starts the schedulers): SGLang's "
                              "/metrics cannot read our counters")
            logger().warning("hook counters not exported to Prometheus: %s", hookstatus.get(NAME).detail)
            return
        hookstatus.record(NAME, TARGET, "applied", f"exporting {CALLS}_total and {STATE} (tp_rank {rank}) to "
                          "SGLang's /metrics")
        publish_states()  # this row's own gauge now reads applied
        logger().info("hook counters exported to SGLang's /metrics as %s_total and %s", CALLS, STATE)
    except Exception as exc:  # never break serving for a metric
        hookstatus.record(NAME, TARGET, "failed", f"{type(exc).__name__}: {exc}"[:300])
        logger().warning("hook counters not exported to Prometheus: %s: %s", type(exc).__name__, exc)


def stop() -> None:
    """Tests: forget the metrics (the listener goes with them)."""
    if _M:
        hookstatus.remove_listener(_on_count)
        _M.clear()
