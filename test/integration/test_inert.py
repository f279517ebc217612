"""The plugin changes nothing outside its own launches (issue 10, point 1).

Through SGLang's real `prepare_server_args` + `resolve_once`, in fresh interpreters with and without the
plugin: a plain GPT-2 config, a Llama config without speculative flags and a model path that is neither a
folder nor in the HF cache resolve to the same ServerArgs (every declared field) or fail the same way.
A garbage value of one of our variables leaves those launches alone too, and refuses an EAGLE-3 launch
with one line naming the variable.
"""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import AQ_K2_DRAFT, KIMI_K25, LLAMA_8B, run_json

pytestmark = pytest.mark.slow

GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2,
        "vocab_size": 100, "n_positions": 128}
CPU = ["--device", "cpu", "--skip-tokenizer-init"]
EAGLE3 = ["--model-path", str(KIMI_K25), "--trust-remote-code", "--tp-size", "8", "--speculative-algorithm", "EAGLE3",
          "--speculative-draft-model-path", str(AQ_K2_DRAFT), "--speculative-num-steps", "3",
          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--device", "cuda"]

CODE = r'''
import json, os, sys, warnings
warnings.filterwarnings("ignore")
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.server_args import prepare_server_args
from sglang.srt.arg_groups.arg_utils import field_names
from sglang.srt.runtime_context import override_platform

from sglang_kimi_eagle3.commands.check import platform_facts
SM90 = platform_facts(90)

def resolve(argv, env):
    os.environ.update(env)
    try:
        sa = prepare_server_args(argv)
        if "cuda" in argv:
            with override_platform(**SM90):
                sa.resolve_once()
        else:
            sa.resolve_once()
        return {"ok": True, "fields": {f: repr(getattr(sa, f, None)) for f in sorted(field_names(type(sa)))}}
    except BaseException as exc:
        return {"ok": False, "type": type(exc).__name__, "error": " ".join(str(exc).split())[:600]}
    finally:
        for k in env:
            os.environ.pop(k, None)

from sglang_kimi_eagle3.status import hookstatus
out = {name: resolve(argv, env) for name, (argv, env) in CASES.items()}
out["_rows"] = {r.name: [r.state, r.detail] for r in hookstatus.rows()}
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    gpt2 = tmp_path_factory.mktemp("gpt2")
    (gpt2 / "config.json").write_text(json.dumps(GPT2))
    plain = {
        "gpt2": (["--model-path", str(gpt2), *CPU], {}),
        "llama": (["--model-path", str(LLAMA_8B), *CPU], {}),
        "not_local": (["--model-path", "no-such-org/no-such-model-kimi-eagle3", *CPU], {}),
    }
    ours = {
        "eagle3_bad_kernels": (EAGLE3, {"SGLANG_KIMI_EAGLE3_KERNELS": "fastest"}),
        "eagle3_bad_preflight": (EAGLE3, {"SGLANG_KIMI_EAGLE3_PREFLIGHT": "loud"}),
        "gpt2_bad_kernels": (plain["gpt2"][0], {"SGLANG_KIMI_EAGLE3_KERNELS": "fastest"}),
    }
    envs = {"off": ({"SGLANG_KIMI_EAGLE3": "0"}, plain), "on": ({}, {**plain, **ours}),
            "garbage": ({"SGLANG_KIMI_EAGLE3": "maybe"}, {**plain, "eagle3": (EAGLE3, {})})}

    def one(env, cases):
        return run_json(f"CASES = {cases!r}\n" + CODE, timeout=400, HF_HUB_OFFLINE="1", **env)

    with ThreadPoolExecutor(len(envs)) as pool:
        futs = {k: pool.submit(one, env, cases) for k, (env, cases) in envs.items()}
        return {k: f.result() for k, f in futs.items()}


@pytest.mark.parametrize("case", ["gpt2", "llama", "not_local"])
def test_resolves_identically_with_and_without_the_plugin(runs, case):
    off, on, garbage = runs["off"][case], runs["on"][case], runs["garbage"][case]
    assert on == off, (case, on.get("error"), off.get("error"))
    assert garbage == off, (case, garbage.get("error"), off.get("error"))
    if case == "gpt2":
        assert off["ok"], off  # the issue's GPT-2 config resolves at all
    if case == "not_local":
        assert "kimi-eagle3 preflight" not in json.dumps(on)


def test_launch_step_is_on_and_passed_through(runs):
    assert runs["on"]["_rows"]["launch_step"][0] == "applied"
    assert "passed through" in runs["on"]["_rows"]["launch_step"][1]


def test_garbage_values_refuse_our_launch_with_one_line_and_leave_others(runs):
    on = runs["on"]
    for case, var, value, accepted in (("eagle3_bad_kernels", "SGLANG_KIMI_EAGLE3_KERNELS", "fastest", "auto|ours|upstream"),
                                       ("eagle3_bad_preflight", "SGLANG_KIMI_EAGLE3_PREFLIGHT", "loud", "on|warn|off")):
        r = on[case]
        assert not r["ok"] and r["type"] == "UserError", r
        assert f"{var}='{value}'" in r["error"] and accepted in r["error"], r
    assert on["gpt2_bad_kernels"] == runs["off"]["gpt2"]
    garbage = runs["garbage"]
    r = garbage["eagle3"]
    assert not r["ok"] and r["type"] == "UserError" and "SGLANG_KIMI_EAGLE3='maybe'" in r["error"], r
    rows = garbage["_rows"]
    assert rows["context_policy"][0] == "failed" and "SGLANG_KIMI_EAGLE3" in rows["context_policy"][1]
