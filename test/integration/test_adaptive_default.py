"""Adaptive steps by default, through SGLang's real load_plugins + prepare_server_args + resolve_once, and SGLang's
own AdaptiveSpeculativeParams built from the resolved record: a chain EAGLE3 launch gets --speculative-adaptive
with our table (and its slots our controller); the operator's adaptive flags, topk 2, the switch off and a plain
launch keep SGLang's choice."""

import json

import pytest

from helpers import LLAMA_8B, llama_eagle3_argv, run_json

pytestmark = pytest.mark.slow

CODE = r'''
import json, os, warnings
warnings.filterwarnings("ignore")
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.server_args import prepare_server_args
from sglang.srt.arg_groups.overrides import resolution_result
from sglang.srt.runtime_context import override_platform
from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams
from sglang_kimi_eagle3.status import hookstatus
from sglang_kimi_eagle3.integration import refresh_status
from sglang_kimi_eagle3.commands.check import platform_facts

out = {}
for name, argv, env in CASES:
    os.environ.update(env)
    sa = prepare_server_args(argv)
    with override_platform(**platform_facts(90)):
        sa.resolve_once()
    r = {f: resolution_result(sa, f) for f in ("speculative_adaptive", "speculative_adaptive_config",
         "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")}
    r["launch_step"] = hookstatus.get("launch_step").detail
    r["kept"] = getattr(sa, "_kimi_eagle3_adaptive_kept", None)
    r["capped"] = getattr(sa, "_kimi_eagle3_adaptive_capped", None)
    from sglang_kimi_eagle3.integration.preflight.inputs import build_deployment
    from sglang_kimi_eagle3.preflight.checks_memory import adaptive_states
    from sglang_kimi_eagle3.commands.check import parse_gpu
    found = adaptive_states(build_deployment(sa, parse_gpu("h200", "test")))
    r["preflight"] = [[f.severity, f.check] for f in found]
    r["fixes"] = [f.fix for f in found if f.check == "adaptive"]
    if r["speculative_adaptive"]:
        params = AdaptiveSpeculativeParams(r["speculative_num_steps"], r["speculative_adaptive_config"])
        # SGLang's own pruning: per state, the decode CUDA-graph sizes (here every size to 512) whose slot lists it
        params.set_cuda_graph_bs(list(range(1, 513)))
        r["reach"] = {s: max(params.cuda_graph_bs_for_step(s) or [0]) for s in params.candidate_steps}
        params = AdaptiveSpeculativeParams(r["speculative_num_steps"], r["speculative_adaptive_config"])
        params.set_cuda_graph_bs([1, 2, 4, 8, 16, 32, 64, 128])
        r["ours"] = [hasattr(s, "_kimi_eagle3_ctl") for s in params._slots.values()]
        r["start"] = params.get_steps_for_batch(128)
        switches = 0
        for i in range(3000):  # all drafts accepted, then none, flipping every 300 batches
            steps = params.get_steps_for_batch(128)
            new = params.on_verify_complete([steps if (i // 300) % 2 == 0 else 0] * 128, 128)
            switches += new is not None
        r["switches"] = switches
        r["counted"] = sum(n for (hook, *_), n in hookstatus.count_items() if hook == "adaptive_control")
    for k in env:
        os.environ.pop(k)
refresh_status()
row = hookstatus.get("adaptive_control")
out["_row"] = [row.state, row.detail, row.target]
print(json.dumps(out))
'''

CODE = CODE.replace("    for k in env:\n", "    out[name] = r\n    for k in env:\n", 1)


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("adaptive")
    theirs = tmp / "theirs.json"
    theirs.write_text(json.dumps({"1": {"candidate_steps": [2, 3]}}))
    from sglang_kimi_eagle3.planner import costs, profiles
    from sglang_kimi_eagle3.planner.adaptive_table import table

    marked = tmp / "marked.json"  # a table this plugin writes (controller marks), reused by hand in another launch
    marked.write_text(json.dumps(table(costs.from_profile(profiles.load(profiles.DEFAULT_PROFILE)), [1, 8, 64, 512],
                                       operator_steps=3, max_states=3)))
    eagle3 = llama_eagle3_argv(31981)
    chain = eagle3[:]
    chain[chain.index("--speculative-eagle-topk") + 1] = "1"
    chain[chain.index("--speculative-num-draft-tokens") + 1] = "4"
    big = chain[:]  # SGLang's default decode CUDA graphs up to bs 512: the extra states are modelled over 8 GB
    chain = chain + ["--cuda-graph-max-bs-decode", "64"]
    plain = ["--model-path", str(LLAMA_8B), "--device", "cuda", "--port", "31982"]
    # chain: measured costs off, as the loop below feeds verify results microseconds apart (no step clock); they are
    # tested with one in test/integration/hooks/test_adaptive_measured.py
    cases = [("plain", plain, {}), ("chain", chain, {"SGLANG_KIMI_EAGLE3_ADAPTIVE_MEASURE": "off"}), ("too_big", big, {}),
             ("too_big_allowed", big, {"SGLANG_KIMI_EAGLE3_ADAPTIVE_MAX_GB": "1000"}),
             ("too_big_anywhere", big, {"SGLANG_KIMI_EAGLE3_ADAPTIVE_MAX_GB": "0.001"}),
             ("few_requests", big + ["--max-running-requests", "128"], {}), ("off", chain, {"SGLANG_KIMI_EAGLE3_ADAPTIVE": "off"}),
             ("unhooked", chain, {"SGLANG_KIMI_EAGLE3_OFFSTATE": "off"}),
             ("tree", eagle3, {}), ("operator_flag", chain + ["--speculative-adaptive"], {}),
             ("operator_file", chain + ["--speculative-adaptive", "--speculative-adaptive-config", str(theirs)], {}),
             ("operator_flag_big", big + ["--speculative-adaptive"], {}),
             ("operator_flag_big_off", big + ["--speculative-adaptive"], {"SGLANG_KIMI_EAGLE3_ADAPTIVE": "off"}),
             ("operator_marked_big", big + ["--speculative-adaptive", "--speculative-adaptive-config", str(marked)], {})]
    # SGLang's draft extend every steps-0 step (keep, read once at the plugin's load), so that every switch counted is
    # one SGLang's slot made: the default (defer) primes each step up first, counted apart (test_adaptive_control.py)
    return run_json(f"CASES = {cases!r}\n" + CODE, timeout=600, HF_HUB_OFFLINE="1", XDG_CACHE_HOME=str(tmp / "cache"),
                    SGLANG_KIMI_EAGLE3_STATUS_DIR=str(tmp / "status"), SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND="keep"), theirs


def test_a_chain_launch_gets_our_table_and_every_slot_our_controller(launches):
    out, _ = launches
    c = out["chain"]
    assert c["speculative_adaptive"] is True and "sglang-kimi-eagle3/adaptive/table-" in c["speculative_adaptive_config"]
    assert c["speculative_num_steps"] == 3 and c["speculative_eagle_topk"] == 1 and c["speculative_num_draft_tokens"] == 4
    cfg = json.loads(open(c["speculative_adaptive_config"]).read())
    assert len({s for k, v in cfg.items() if k.isdigit() for s in v["candidate_steps"]}) <= 3
    assert all(c["ours"]) and c["start"] in (0, 1, 3)
    # the flipping acceptance: dwell and hysteresis hold the switches to a few (SGLang's slot: hundreds)
    assert 0 < c["switches"] <= 3000 // 32 and c["counted"] == c["switches"]
    assert "adaptive steps on: states" in c["launch_step"]
    assert out["_row"][0] == "applied" and out["_row"][2].endswith("AdaptiveStepSlot.__init__")
    # the off-state priced with the offstate_attention hook from the batch it reroutes (every batch under the default
    # auto); with the hook off, at SGLang's own path cost
    cold = json.loads(open(out["unhooked"]["speculative_adaptive_config"]).read())
    assert cfg["_generated_by"]["offstate_hooked_from"] == 1 and cold["_generated_by"]["offstate_hooked_from"] is None
    assert cfg["1"]["kimi_eagle3"]["off_us"] < cold["1"]["kimi_eagle3"]["off_us"]
    assert cfg["64"]["kimi_eagle3"]["off_us"] < cold["64"]["kimi_eagle3"]["off_us"]


def test_the_operators_choice_the_switch_topk2_and_plain_keep_sglangs(launches):
    out, theirs = launches
    assert out["operator_flag"]["speculative_adaptive"] is True and out["operator_flag"]["speculative_adaptive_config"] is None
    assert not any(out["operator_flag"]["ours"])  # SGLang's default table: SGLang's slot logic
    assert out["operator_file"]["speculative_adaptive_config"] == str(theirs) and not any(out["operator_file"]["ours"])
    assert "operator's --speculative-adaptive" in out["operator_file"]["launch_step"]
    # SGLang's default table is held to the budget our own keeps (a warning: the operator's choice is served): with
    # graphs to bs 512 its extra states model over 8 GB at Llama's vocabulary; to bs 64, and the small file, within it
    assert out["operator_flag_big"]["preflight"] == [["info", "memory"], ["warning", "adaptive"]], out["operator_flag_big"]
    assert out["operator_flag"]["preflight"] == [["info", "memory"]] and out["operator_file"]["preflight"] == [["info", "memory"]]
    assert out["operator_flag_big"]["fixes"][0].startswith("leave out --speculative-adaptive")
    # with the plugin's default off, leaving the flags out gives a fixed chain: the fix does not promise our table
    off = out["operator_flag_big_off"]
    assert off["preflight"] == [["info", "memory"], ["warning", "adaptive"]] and "leave out" not in off["fixes"][0], off
    # a table of ours reused by hand is the operator's: held to the budget too (it was skipped for its marks)
    assert out["operator_marked_big"]["preflight"] == [["info", "memory"], ["warning", "adaptive"]], out["operator_marked_big"]
    for name, why in (("off", "SGLANG_KIMI_EAGLE3_ADAPTIVE=off"), ("tree", "--speculative-eagle-topk 2")):
        assert not out[name]["speculative_adaptive"] and out[name]["speculative_num_draft_tokens"] == 4, name
        assert why in out[name]["launch_step"], out[name]["launch_step"]
    assert not out["plain"]["speculative_adaptive"] and out["plain"]["speculative_adaptive_config"] is None


def test_states_over_the_budget_at_every_batch_run_adaptive_up_to_the_batch_where_they_fit(launches):
    """SGLang's default decode graphs to bs 512 put the extra states over 8 GB (13.0 GB at this vocabulary): the table's
    slots above 256 run the launch's chain only, so SGLang captures the other states' graphs to 256 at most (6.5 GB),
    never slower up to it; the fix for every batch is still named. A budget nothing fits keeps the fixed chain."""
    out, _ = launches
    big = out["too_big"]
    assert big["speculative_adaptive"] is True and big["speculative_num_steps"] == 3 and big["kept"] is None
    assert "adaptive steps on up to batch 256, the fixed chain above it (" in big["launch_step"], big["launch_step"]
    assert "over the 8 GB budget" in big["launch_step"] and "SGLANG_KIMI_EAGLE3_ADAPTIVE_MAX_GB" in big["launch_step"]
    assert big["capped"]["top"] == 256 and big["capped"]["found"].startswith("up to batch 256 only (6.5 GB")
    assert big["capped"]["fix"].startswith("--cuda-graph-max-bs-decode 256 (its extra states modelled at 6.5 GB")
    # SGLang's own per-state graph pruning on this table: every state but the launch's stops at 256
    assert big["reach"]["3"] == 512 and all(top <= 256 for s, top in big["reach"].items() if s != "3"), big["reach"]
    cfg = json.loads(open(big["speculative_adaptive_config"]).read())
    assert cfg["257"]["candidate_steps"] == [3] and all(0 in v["candidate_steps"] for k, v in cfg.items()
                                                        if k.isdigit() and int(k) <= 256)
    assert all(big["ours"]) and big["preflight"] == [["warning", "adaptive"], ["info", "memory"]]
    assert out["chain"]["kept"] is None and out["chain"]["capped"] is None
    assert ["warning", "adaptive"] not in out["chain"]["preflight"]
    assert out["too_big_allowed"]["speculative_adaptive"] is True and out["too_big_allowed"]["capped"] is None
    # SGLang captures no graph above the request pool: 128 running requests at most, graphs to 128, the states fit
    few = out["few_requests"]
    assert few["speculative_adaptive"] is True and few["capped"] is None and few["kept"] is None
    assert "adaptive steps on: states" in few["launch_step"] and few["preflight"] == [["info", "memory"]]
    nowhere = out["too_big_anywhere"]
    assert nowhere["speculative_adaptive"] is False and nowhere["kept"]["found"].endswith("over the 0.001 GB budget")
    assert nowhere["preflight"] == [["warning", "adaptive"]] and "SGLang's choice kept" in nowhere["launch_step"]
