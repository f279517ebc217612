"""The plugin as SGLang loads it: entry-point discovery, the hook table, kill switch, idempotence, status CLI."""

import json

import pytest
from helpers import clean_env, python, run_json

pytestmark = pytest.mark.slow

OURS = ("context_policy_flag", "context_policy_flag_value", "context_policy", "delegation_probe", "runtime_status")

LOAD = r'''
import json, warnings
warnings.filterwarnings("ignore")
from sglang.srt.plugins import load_plugins
from sglang.srt.plugins.hook_registry import HookRegistry
load_plugins()
load_plugins()                                   # SGLang's guard: once per process
import sglang_kimi_eagle3
sglang_kimi_eagle3.register()                    # and our own guard: a second register() queues nothing
from sglang_kimi_eagle3.status import hookstatus
from sglang_kimi_eagle3.integration import refresh_status
from sglang_kimi_eagle3.integration.hooks.context_policy import TARGET, _derive_context_length
from sglang.srt.arg_groups.resolution_hooks import _HOOKS
from sglang_kimi_eagle3.integration.hooks.launch_step import _step as _preflight_step
from sglang.srt.configs.model_config import ModelConfig
refresh_status()
print(json.dumps({
    "rows": hookstatus.as_dicts(),
    "queued_context_hooks": sum(h is _derive_context_length for _t, h, _s in HookRegistry._hooks.get(TARGET, [])),
    "resolution_wrappers": sum(f is _preflight_step for f in _HOOKS.get("handle_speculative_decoding", [])),
    "derive_is_wrapped": hasattr(ModelConfig._derive_context_length, "__wrapped__"),
}))
'''


def test_sglang_load_plugins_discovers_us_and_every_hook_is_applied():
    r = run_json(LOAD)
    states = {row["name"]: row["state"] for row in r["rows"]}
    for name in OURS:
        assert states[name] == "applied", (name, r["rows"])
    assert r["derive_is_wrapped"]
    assert r["queued_context_hooks"] == 1 and r["resolution_wrappers"] == 1  # idempotent
    assert states["launch_step"] == "registered"  # in SGLang's resolution pipeline; runs at resolve_once


def test_kill_switch_applies_nothing_and_says_so():
    r = run_json(LOAD, SGLANG_KIMI_EAGLE3="0")
    assert r["rows"] and all(row["state"] == "skipped" and "SGLANG_KIMI_EAGLE3=0" in row["detail"] for row in r["rows"])
    assert not r["derive_is_wrapped"]
    assert r["queued_context_hooks"] == 0 and r["resolution_wrappers"] == 0


def test_a_hook_sglang_failed_to_apply_is_reported_failed_not_silent():
    # HookRegistry.apply_hooks logs and swallows a bad target; our table must still say "failed".
    r = run_json(r'''
import json, warnings
warnings.filterwarnings("ignore")
from sglang_kimi_eagle3.integration import registry
registry.register("probe", "sglang.srt.configs.model_config.ModelConfig.no_such_method", lambda orig, *a: orig(*a), "around")
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang_kimi_eagle3.status import hookstatus
registry.refresh()
print(json.dumps(hookstatus.as_dicts()))
''')
    probe = next(row for row in r if row["name"] == "probe")
    assert probe["state"] == "failed" and "no_such_method" in probe["detail"]


def test_status_command_prints_the_table_from_a_launch_server_like_process():
    cp = python(["-m", "sglang_kimi_eagle3.cli", "status", "--json"], timeout=300, env=clean_env())
    assert cp.returncode == 0, cp.stderr[-2000:]
    out = json.loads(cp.stdout)
    assert out["sglang"] == "0.5.23"
    import torch

    if torch.cuda.is_available():  # a GPU box: the table `auto` reads there, named by its files
        assert out["kernel_table"].startswith("SGLANG_KIMI_EAGLE3_KERNELS=auto; ") and (
            ".json" in out["kernel_table"] or "no bundled table for this GPU" in out["kernel_table"]), out
    else:  # no GPU: no launch table applies, and status says so rather than naming one
        assert out["kernel_table"].startswith("SGLANG_KIMI_EAGLE3_KERNELS=auto; no bundled table for this GPU"), out
    rows = {row["name"]: row for row in out["hooks"]}
    assert all(rows[n]["state"] == "applied" for n in OURS)
    # sglang 0.5.23 already has the three Kimi-K2.5 delegation methods (PR #19689): left alone
    assert rows["delegation"]["state"] == "skipped" and "left alone" in rows["delegation"]["detail"]


def test_a_hook_that_fails_at_run_time_stays_failed_after_a_refresh():
    """A hook's own `failed` row (recorded while serving: e.g. the deferred extend's flush refused by SGLang's code)
    survives every later refresh, though its wrapper stays in SGLang's chain; a row `registered` before
    load_plugins() still turns `applied`."""
    r = run_json(r'''
import json, warnings
warnings.filterwarnings("ignore")
from sglang_kimi_eagle3.integration import registry
target = "sglang.srt.configs.model_config.ModelConfig._derive_context_length"
registry.register("probe", target, lambda orig, *a, **k: orig(*a, **k), "around")
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang_kimi_eagle3.status import hookstatus
registry.refresh()
first = hookstatus.get("probe").state
hookstatus.record("probe", target, "failed", "RuntimeError: refused at run time")
registry.refresh()
registry.refresh()
print(json.dumps({"first": first, "after": hookstatus.get("probe").state, "detail": hookstatus.get("probe").detail}))
''')
    assert r["first"] == "applied"
    assert r["after"] == "failed" and "refused at run time" in r["detail"]
