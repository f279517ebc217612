"""Our hook counters on SGLang's /metrics: SGLang's own multiprocess set-up, a spawned scheduler-like child
counting through our dispatch path (SGLang's functions, SGLang's capture -> our publish), read back through
SGLang's own /metrics route (add_prometheus_middleware: prometheus_client's MultiProcessCollector). The
exporter's own row in the status table the scheduler published: applied / skipped / failed."""

import pytest
from helpers import llama_eagle3_argv, run_json

pytestmark = pytest.mark.slow

ARGV = llama_eagle3_argv(31879)

PARENT = r'''
import json, multiprocessing as mp, os, sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, "test")
from sglang.srt.utils.common import set_prometheus_multiproc_dir, add_prometheus_middleware
out = {}
for name, extra, folder in (("metrics_on", ["--enable-metrics"], True), ("metrics_off", [], False),
                            ("metrics_no_dir", ["--enable-metrics"], False)):
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    if folder:
        set_prometheus_multiproc_dir()  # what SGLang's engine does with --enable-metrics, before the schedulers
    from metrics_path import metrics_child
    from sglang_kimi_eagle3.commands.check import platform_facts
    from sglang.srt.plugins import load_plugins
    load_plugins()
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.runtime_context import override_platform
    sa = prepare_server_args(ARGV + extra)
    with override_platform(**platform_facts(90)):
        sa.resolve_once()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=metrics_child, args=(sa, q))
    p.start()
    res = q.get(timeout=400)
    p.join(60)
    if folder:  # SGLang's /metrics route, as its HTTP server mounts it
        from starlette.applications import Starlette
        from starlette.testclient import TestClient
        app = Starlette()
        add_prometheus_middleware(app)
        res["metrics"] = TestClient(app).get("/metrics/").text
        res["dir"] = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    out[name] = res
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def runs():
    return run_json(f"ARGV = {ARGV!r}\n" + PARENT, timeout=900, SGLANG_KIMI_EAGLE3_KERNELS="ours", TRITON_INTERPRET="1")


def _samples(text):
    from prometheus_client.parser import text_string_to_metric_families

    return [s for fam in text_string_to_metric_families(text) for s in fam.samples]


def test_every_counted_call_is_on_sglangs_metrics_with_hook_kernel_reason_bucket_labels(runs):
    on = runs["metrics_on"]
    assert on["ok"] and on["exporting"], on
    calls = {}
    for s in _samples(on["metrics"]):
        if s.name == "sglang_kimi_eagle3:hook_calls_total":
            key = (s.labels["hook"], s.labels["kernel"], s.labels["bucket"], s.labels["reason"])
            calls[key] = calls.get(key, 0) + s.value
            assert s.labels["tp_rank"] == "0"
    want = {tuple(k): n for k, n in on["counts"]}
    assert calls == want, (calls, want)
    # both kinds, both before capture (replayed at start) and after it (through the listener)
    assert {k[1] for k in calls} == {"ours", "sglang"}
    assert any(k[0] == "draft_topk1" and k[1] == "ours" and n >= 2 for k, n in calls.items()), calls
    assert any(k[1] == "sglang" and k[3] for k in calls), calls  # a fallback carries its reason


def test_hook_states_are_a_gauge_per_hook(runs):
    states = {(s.labels["hook"], s.labels["state"]): s.value for s in _samples(runs["metrics_on"]["metrics"])
              if s.name == "sglang_kimi_eagle3:hook_state"}
    assert states[("runtime_status", "applied")] == 1 and states[("runtime_status", "failed")] == 0
    assert sum(v for (h, _), v in states.items() if h == "draft_topk1") == 1


def test_without_enable_metrics_nothing_is_exported(runs):
    off = runs["metrics_off"]
    assert off["ok"] and not off["exporting"] and off["counts"], off


def test_the_exporter_has_its_row_in_the_published_status_table(runs):
    on, off, no_dir = runs["metrics_on"]["row"], runs["metrics_off"]["row"], runs["metrics_no_dir"]["row"]
    assert on["state"] == "applied" and on["status"] == "active" and "hook_state" in on["detail"], on
    assert off["state"] == "skipped" and "--enable-metrics is off" in off["detail"], off
    assert no_dir["state"] == "failed" and "PROMETHEUS_MULTIPROC_DIR" in no_dir["detail"], no_dir
    assert no_dir["status"].startswith("failed (") and not runs["metrics_no_dir"]["exporting"]
    # and its own gauge on /metrics reads applied
    states = {(s.labels["hook"], s.labels["state"]): s.value for s in _samples(runs["metrics_on"]["metrics"])
              if s.name == "sglang_kimi_eagle3:hook_state"}
    assert states[("metrics", "applied")] == 1 and states[("metrics", "registered")] == 0
