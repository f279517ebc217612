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
"""

from __future__ import annotations

import os

from .. import hookstatus
from ..base import logger

CALLS = "sglang_kimi_eagle3:hook_calls"  # prometheus_client adds _total
STATE = "sglang_kimi_eagle3:hook_state"
_M: dict = {}


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
    """runtime_status binder (each scheduler, after capture): start exporting where SGLang exports."""
    try:
        from sglang.srt.runtime_context import get_observability, get_parallel

        obs = get_observability()
        if not getattr(obs, "enable_metrics", False):
            return
        rank = int(getattr(get_parallel(), "tp_rank", 0) or 0)
        if rank != 0 and not getattr(obs, "enable_metrics_for_all_schedulers", False):
            return
        from .registry import refresh

        refresh()  # queued rows -> applied / failed, as the status table reads them
        if start(rank):
            logger().info("hook counters exported to SGLang's /metrics as %s_total and %s", CALLS, STATE)
    except Exception as exc:  # never break serving for a metric
        logger().warning("hook counters not exported to Prometheus: %s: %s", type(exc).__name__, exc)


def stop() -> None:
    """Tests: forget the metrics (the listener goes with them)."""
    if _M:
        hookstatus.remove_listener(_on_count)
        _M.clear()
