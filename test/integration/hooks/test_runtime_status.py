"""Runtime truth from the process where the hooks run (issue 10, point 3).

A parent launches like launch_server (load_plugins, SGLang's own prepare_server_args + resolve_once), then
spawns scheduler-like children the way SGLang does (multiprocessing spawn; run_scheduler_process's order:
load_plugins() first, then publish with spawn ranks; see worker_path.scheduler_like). Each child calls
SGLang's own eagle_sample / verify_tree_greedy_func / the EAGLE v2 worker's draft functions on CPU tensors
(Triton interpreter, SGLANG_KIMI_EAGLE3_KERNELS=ours), then SGLang's own Scheduler.init_all_cuda_graphs,
whose AFTER hook writes the status file. One child has a stale call-site binding.
"""

import json

import pytest
from helpers import clean_env, llama_eagle3_argv, python, run_python

pytestmark = pytest.mark.slow

ARGV = llama_eagle3_argv(31877)

PARENT = r'''
import json, multiprocessing as mp, queue, sys, time, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, "test")
from worker_path import scheduler_like
from sglang_kimi_eagle3.commands.check import platform_facts
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.server_args import prepare_server_args
from sglang.srt.runtime_context import override_platform
sa = prepare_server_args(ARGV)
with override_platform(**platform_facts(90)):
    sa.resolve_once()
ctx = mp.get_context("spawn")  # SGLang's start method (engine.py)
out = {}
for name, mask in (("plain", None), ("masked", "eagle_utils.verify_tree_greedy_func")):
    q = ctx.Queue()
    p = ctx.Process(target=scheduler_like, args=(sa, q, mask, mask is None))
    p.start()
    t0 = time.monotonic()
    while True:  # a child that died without a result (its watchdog, a crash) ends the wait at once, with its exit code
        try:
            out[name] = q.get(timeout=2)
            break
        except queue.Empty:
            if not p.is_alive() or time.monotonic() - t0 > 240:
                out[name] = {"ok": False, "error": f"the {name} child ended without a result: exit code {p.exitcode} "
                             f"after {time.monotonic() - t0:.0f} s (its stderr, above, has any watchdog stack)"}
                break
    p.join(60)
    print(f"{name} child: {out[name].get('phases_s')}", file=sys.stderr)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def children(tmp_path_factory):
    d = tmp_path_factory.mktemp("status")
    cp = run_python(f"ARGV = {ARGV!r}\n" + PARENT, timeout=900, SGLANG_KIMI_EAGLE3_KERNELS="ours",
                    TRITON_INTERPRET="1", SGLANG_KIMI_EAGLE3_STATUS_DIR=str(d))
    assert cp.returncode == 0, f"subprocess failed ({cp.returncode}):\n{cp.stdout[-3000:]}\n{cp.stderr[-6000:]}"
    out = json.loads(cp.stdout.strip().splitlines()[-1])
    for v in out.values():  # a failed child: its stderr (the watchdog's stacks) goes into the message the tests show
        if not v.get("ok"):
            v["error"] = f"{v.get('error')}\n--- stderr ---\n{cp.stderr[-6000:]}"
    print("scheduler_like phases (s):", {k: v.get("phases_s") for k, v in out.items()})  # shown with -s
    return out, d


def _hooks(snap):
    return {h["name"]: h for h in snap["hooks"]}


def test_the_scheduler_child_counts_our_calls_and_sglangs_with_reasons(children):
    out, _d = children
    plain = out["plain"]
    assert plain["ok"], plain.get("error")
    h = _hooks(plain["snapshot"])
    # SGLang's own eagle_sample -> our fused argmax+verify
    assert sum(h["verify_argmax_greedy"]["counters"]["ours"].values()) == 1
    assert h["verify_argmax_greedy"]["status"] == "active"
    # the dispatcher with an int32 target_predict: SGLang's, with the reason
    vtg = h["verify_tree_greedy"]["counters"]["sglang"]
    assert any("target_predict not int64" in reason for reason in vtg), vtg
    # the worker's top-1 as draft_forward calls it: ours once, and a strided one handed to SGLang with the reason
    t1 = h["draft_topk1"]["counters"]
    assert sum(t1["ours"].values()) == 1 and any("layout" in r for r in t1["sglang"]), t1
    # prefill draft-extend calls the worker's fast_topk at topk 1: ours
    assert sum(h["draft_worker_topk"]["counters"]["ours"].values()) == 1, h["draft_worker_topk"]
    # call sites verified, not only the defining attribute
    assert h["draft_topk1"]["sites"]["bound"] == ["topk1.draft_topk1_postprocess", "eagle_worker_v2.draft_topk1_postprocess"]
    assert "eagle_worker_common.eagle_sample" in h["verify_argmax_greedy"]["sites"]["bound"]
    assert h["runtime_status"]["status"] == "active"
    # the serving-time compile counter chained Triton's listener in the scheduler; nothing compiled after serving
    assert h["serving_compiles"]["state"] == "applied", h["serving_compiles"]
    assert h["serving_compiles"]["detail"] == "listening: no Triton compile since serving started"
    # the launch step ran in the parent (main process); its mark travelled to the child with the record
    assert h["launch_step"]["status"] == "active" and "preflight on" in h["launch_step"]["detail"], h["launch_step"]
    # the traffic warm-up: the parent's launch step put `kimi_eagle3` in --warmups; the child read it published
    assert h["traffic_warmup"]["state"] == "applied", h["traffic_warmup"]
    assert "runs in the HTTP server before it accepts requests" in h["traffic_warmup"]["detail"]
    # no call at all yet: bound, and what the kernel switch would choose
    assert h["draft_lm_head"]["status"].startswith("installed, ours for every call in its fast path"), h["draft_lm_head"]
    assert h["draft_lm_head"]["table_wins"] == ["*"]


def test_a_masked_call_site_is_reported_failed_and_status_running_reads_the_file(children):
    out, d = children
    masked = out["masked"]
    assert masked["ok"], masked.get("error")
    h = _hooks(masked["snapshot"])["verify_tree_greedy"]
    assert h["status"].startswith("failed (not bound at eagle_utils.verify_tree_greedy_func"), h
    assert h["state"] == "applied"  # the defining attribute alone would have said all is well
    assert masked["path"] == str(d / "port31877.json")
    cp = python(["-m", "sglang_kimi_eagle3.cli", "status", "--running", "31877"], timeout=120,
                env=clean_env(SGLANG_KIMI_EAGLE3_STATUS_DIR=str(d)))
    assert cp.returncode == 1, cp.stdout + cp.stderr  # a failed hook: exit 1
    line = next(ln for ln in cp.stdout.splitlines() if ln.strip().startswith("verify_tree_greedy"))
    assert "failed (not bound at eagle_utils.verify_tree_greedy_func" in line
    data = json.loads((d / "port31877.json").read_text())
    assert data["pid"] != out["plain"]["snapshot"]["pid"]  # the masked child rewrote it


def test_the_status_folder_variable_is_read_as_a_path(monkeypatch, tmp_path):
    """SGLANG_KIMI_EAGLE3_STATUS_DIR from an env file ('~/run', padded with spaces) is the home's run folder, not a
    literal './~/run'; an unknown '~user' is refused at launch (env_errors: one line naming the variable)."""
    from pathlib import Path

    from sglang_kimi_eagle3.base import env_errors
    from sglang_kimi_eagle3.integration.hooks import runtime_status as rs

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_STATUS_DIR", " ~/run ")
    assert rs.status_dir() == tmp_path / "run" and not env_errors()
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_STATUS_DIR", str(tmp_path / "x"))
    assert rs.status_dir() == Path(tmp_path / "x")
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_STATUS_DIR", "~nosuchuser-kimi/run")
    bad = env_errors()
    assert len(bad) == 1 and "SGLANG_KIMI_EAGLE3_STATUS_DIR" in bad[0] and "cannot expand" in bad[0], bad
