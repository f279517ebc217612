"""The plugin steps aside where the running SGLang already carries a PR of the series.

On the exported tree (every PR applied) with the plugin ON, the hooks each PR replaces are not installed
and report `skipped (upstream has it: ...)` in `sglang-kimi-eagle3 status --json` (01: the flag hooks and
the draft ModelConfig hook; 02: verify_tree_sampling; 03: draft_probs and draft_worker_topk; 04: the three
offstate_attention rows; 05: deferred_extend, under SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=defer, the mode it serves,
set for both trees); the others
stay. The tiny pair's launch shape (draft positions half the target's) then resolves through SGLang's own
`prepare_server_args` + `resolve_once` with SGLang's flag (extend accepted, strict refused naming the flag,
no flag: the plugin's default handed to SGLang), and `check` still reads the policy right on the embedded
default and the tiny pair. On the installed SGLang 0.5.23 the same hooks are installed as before.
"""

import json

import pytest
from helpers import ROOT, pythonpath, run_json

pytestmark = pytest.mark.slow

STEPPED_ASIDE = ("context_policy_flag", "context_policy_flag_value", "context_policy",  # PR 01
                 "verify_tree_sampling",  # PR 02
                 "draft_probs", "draft_worker_topk",  # PR 03
                 "offstate_attention", "offstate_attention_metadata", "offstate_attention_graph",  # PR 04
                 "deferred_extend")  # PR 05
# step_clock times the draft extend on any tree (a measurement, replaced by no PR): it wraps deferred_extend's target too
TIMING = {"sglang_kimi_eagle3.integration.hooks.step_clock"}
STAYS = ("draft_lm_head", "draft_topk1", "verify_argmax_greedy", "verify_tree_greedy", "launch_step", "runtime_status")

STATUS = r'''
import contextlib, io, json
from sglang_kimi_eagle3.commands import status as status_cmd
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    rc = status_cmd.main(["--json", "--no-model-class"])
text = buf.getvalue()
status = json.loads(text[text.index("{"):])
from sglang_kimi_eagle3.integration.hooks.draft_head_kernels import bind_worker_topk_outside_a_server
bind_worker_topk_outside_a_server()  # as `status` without --no-model-class: the worker's top-k binds or says why
from sglang_kimi_eagle3.status import hookstatus
from sglang.srt.plugins.hook_registry import HookRegistry
def modules(h):  # a dispatcher of ours (hooks sharing a target, registry.register(shared=)): the hooks in it
    return [f.__module__ for _r, _n, f in h._kimi_eagle3_fns] if hasattr(h, "_kimi_eagle3_fns") else [h.__module__]
ours = {name: [m for _t, h, _s in hooks for m in modules(h) if m.startswith("sglang_kimi_eagle3")]
        for name, hooks in HookRegistry._hooks.items()}
out = {"rc": rc, "status": {h["name"]: h["status"] for h in status["hooks"]},
       "rows": {r.name: [r.state, r.target, r.detail] for r in hookstatus.rows()}, "queued": ours}
'''

LAUNCH = r'''
import tempfile
from pathlib import Path
import sglang
from sglang.srt.arg_groups.overrides import resolving_view
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.server_args import prepare_server_args
from sglang_kimi_eagle3.commands import check as check_cmd
from sglang_kimi_eagle3.tiny.launch import spec_args
from sglang_kimi_eagle3.tiny.spec import TinySpec, draft_config, target_config
d = Path(tempfile.mkdtemp())
s = TinySpec()
for name, cfg in (("target", target_config(s)), ("draft", draft_config(s))):
    (d / name).mkdir()
    (d / name / "config.json").write_text(json.dumps(cfg))
out["sglang"] = sglang.__file__
tiny = ["--model-path", str(d / "target"), *spec_args(str(d / "draft"), "chain")]
for policy in ("extend", "strict", None):
    argv = [*tiny, "--device", "cpu"] + (["--speculative-draft-context-policy", policy] if policy else [])
    try:
        sa = prepare_server_args(argv)
        sa.resolve_once()
        t = ModelConfig.from_server_args(sa)
        dr = ModelConfig.from_server_args(sa, model_path=str(d / "draft"), is_draft_model=True, context_length=t.context_len)
        out[str(policy)] = {"ok": True, "target": t.context_len, "draft": dr.context_len,
                            "draft_positions": s.draft_max_position_embeddings,
                            "mpe": dr.hf_text_config.max_position_embeddings,
                            "policy": resolving_view(sa).speculative_draft_context_policy,
                            "launch_step": getattr(sa, "_kimi_eagle3_launch_step", None)}
    except Exception as e:
        out[str(policy)] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
for key, argv in (("check_default", []), ("check_tiny", tiny),
                  ("check_tiny_strict", [*tiny, "--speculative-draft-context-policy", "strict"])):
    r = check_cmd.run(argv)
    out[key] = [[f.severity, f.check, f.found] for f in r["findings"] if f.severity == "error" or f.check == "context"]
'''


def _run(script: str, path: str):
    return run_json(script + "\nprint(json.dumps(out))\n", timeout=500, PYTHONPATH=path,
                    SGLANG_KIMI_EAGLE3="1", SGLANG_KIMI_EAGLE3_KERNELS="ours",  # ours: the draft-head hooks install here
                    SGLANG_KIMI_EAGLE3_PREFLIGHT="off",  # the CPU launch is not a servable one; `check` still checks
                    SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND="defer")  # deferred_extend installs only under defer


@pytest.fixture(scope="module")
def patched(exported):
    return _run(STATUS + LAUNCH, pythonpath(exported / 'tree' / 'python', ROOT / 'python'))


def test_on_the_patched_tree_the_replaced_hooks_are_skipped_upstream_has_it(patched, exported):
    assert patched["sglang"].startswith(str(exported / "tree" / "python")), patched["sglang"]
    for name in STEPPED_ASIDE:
        state, _target, detail = patched["rows"][name]
        assert state == "skipped" and detail.startswith("upstream has it"), (name, patched["rows"][name])
        assert patched["status"][name] == f"skipped ({detail})", name  # the status table's word
    for name in STAYS:  # what no PR replaces is still ours
        assert patched["rows"][name][0] in ("applied", "registered"), (name, patched["rows"][name])
    # not installed: none of ours is queued on the targets SGLang now handles itself
    for name in STEPPED_ASIDE:
        target = patched["rows"][name][1]
        assert not set(patched["queued"].get(target, [])) - TIMING, (name, target, patched["queued"][target])
    assert patched["rc"] == 0  # nothing failed


def test_on_the_patched_tree_sglangs_flag_resolves_the_tiny_pair(patched):
    ext = patched["extend"]
    assert ext["ok"], ext
    assert ext["target"] == ext["draft"] == 2 * ext["draft_positions"]  # the draft's positions: half the target's
    assert ext["mpe"] >= ext["target"] and ext["mpe"] % 128 == 0  # SGLang's own extend sized the rotary cache
    assert ext["policy"] == "extend" and ext["launch_step"], ext  # our launch step still ran (preflight, gate)
    # PR 05: our default (defer) becomes SGLang's own variable for the launch, which the schedulers inherit
    assert "SGLANG_SPEC_DEFER_ZERO_STEP_DRAFT_EXTEND=8 set for this launch" in ext["launch_step"], ext
    strict = patched["strict"]
    assert not strict["ok"] and strict["error"].startswith("ValueError"), strict
    assert "--speculative-draft-context-policy extend" in strict["error"], strict
    default = patched["None"]  # no flag: the plugin's default (auto = extend) handed to SGLang's field
    assert default["ok"] and default["policy"] == "extend", default
    assert default["draft"] == default["target"] and default["mpe"] == ext["mpe"], default


def test_on_the_patched_tree_check_reads_sglangs_policy(patched):
    assert patched["check_default"] == [["info", "context", patched["check_default"][0][2]]], patched["check_default"]
    assert patched["check_default"][0][2].startswith("auto -> extend"), patched["check_default"]
    ctx = [f for f in patched["check_tiny"] if f[1] == "context"]
    assert [f[0] for f in ctx] == ["info"] and ctx[0][2].startswith("auto -> extend"), patched["check_tiny"]
    assert not any(f[0] == "error" and "context" in f[2] for f in patched["check_tiny"]), patched["check_tiny"]
    strict = [f for f in patched["check_tiny_strict"] if f[1] == "context"]
    assert strict and strict[0][0] == "error" and strict[0][2].startswith("strict:"), patched["check_tiny_strict"]


def test_on_the_installed_sglang_the_same_hooks_are_installed():
    r = _run(STATUS, pythonpath(ROOT / "python"))
    for name in STEPPED_ASIDE:
        state, target, detail = r["rows"][name]
        assert state == "applied" and "upstream has it" not in detail, (name, r["rows"][name])
        if name != "draft_worker_topk":  # a module-local rebinding, not a HookRegistry hook
            queued = [m for m in r["queued"].get(target, []) if m not in TIMING]
            assert queued == ["sglang_kimi_eagle3.integration.hooks." + (
                "verify_kernels" if name == "verify_tree_sampling" else
                "draft_head_kernels" if name == "draft_probs" else
                "offstate_attention" if name.startswith("offstate_attention") else
                "deferred_extend" if name == "deferred_extend" else "context_policy")], (name, queued)
    assert r["rc"] == 0
