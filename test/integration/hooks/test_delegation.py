"""Delegation guarantee on the real KimiK25ForConditionalGeneration class (class level).

Building a tiny Kimi-K2.5 through SGLang on this CPU is not possible: after SGLang's own resolve_once
(emulated SM90) and publish(role="scheduler"), `initialize_model_parallel(1)` over gloo raises TypeError
in GroupCoordinator.__init__ (distributed/parallel_state.py:339), and the constructor stops in the vision
tower (layers/attention/vision.py:1124: "parallel name 'attn_tp_rank' has not been written in this
process"); the CPU engine path instead needs sgl_kernel's CPU ops, absent from the PyPI wheel. So the
inner language model is a real DeepseekV3ForCausalLM instance created without __init__, carrying just
the attributes its own EAGLE-3 methods read - those methods are SGLang's, unmodified.
"""

import pytest
from helpers import KIMI_K25, run_json

pytestmark = pytest.mark.slow

CODE = r'''
import json, types, warnings
warnings.filterwarnings("ignore")
import torch
torch.cuda.synchronize = lambda *a, **k: None  # DeepseekV2.set_embed_and_head ends with a GPU sync; no GPU here
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.models.kimi_k25 import KimiK25ForConditionalGeneration as Kimi
from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM
from sglang_kimi_eagle3.status import hookstatus
from sglang_kimi_eagle3.integration.hooks.delegation import DELEGATES, METHODS, ensure_delegation
out = {}

# 1. sglang 0.5.23 has all three: left alone, identity preserved
before = {m: Kimi.__dict__[m] for m in METHODS}
out["upstream_state"] = ensure_delegation(Kimi)
out["upstream_untouched"] = all(Kimi.__dict__[m] is before[m] for m in METHODS)

# 2. the real class as an older SGLang shipped it (before PR #19689): the three methods masked out
#    (a subclass, because the real class's __setattr__ uses zero-argument super())
Old = type("KimiK25ForConditionalGeneration", (Kimi,), {m: None for m in METHODS})
out["old_has_before"] = [m for m in METHODS if callable(getattr(Old, m, None))]
out["old_state"] = ensure_delegation(Old)
out["old_state_again"] = ensure_delegation(Old)
out["old_are_ours"] = all(getattr(Old, m) is DELEGATES[m] for m in METHODS)

def inner_model():
    lm = object.__new__(DeepseekV3ForCausalLM)
    torch.nn.Module.__init__(lm)
    lm.pp_group = types.SimpleNamespace(is_last_rank=True)
    lm.config = types.SimpleNamespace(num_hidden_layers=61)
    lm.model = torch.nn.Module()
    lm.model.layers_to_capture = []
    lm.model.embed_tokens = torch.nn.Embedding(16, 8)
    lm.lm_head = torch.nn.Linear(8, 16, bias=False)
    return lm

for name, cls in (("old", Old), ("upstream", Kimi)):
    outer = object.__new__(cls)
    torch.nn.Module.__init__(outer)
    outer.language_model = lm = inner_model()
    outer.set_eagle3_layers_to_capture([1, 29, 57])  # TorchSpec-style ids: DeepSeek rule adds 1
    a = list(lm.model.layers_to_capture)
    outer.set_eagle3_layers_to_capture(None)
    b = list(lm.model.layers_to_capture)
    e, h = outer.get_embed_and_head()
    got = e is lm.model.embed_tokens.weight and h is lm.lm_head.weight
    ne, nh = torch.nn.Parameter(torch.ones(16, 8)), torch.nn.Parameter(torch.zeros(16, 8))
    outer.set_embed_and_head(ne, nh)
    replaced = lm.model.embed_tokens.weight is ne and lm.lm_head.weight is nh
    outer.language_model = None  # built encoder-only
    try:
        outer.get_embed_and_head()
        enc = "no error"
    except AttributeError as exc:
        enc = str(exc)
    out[name] = {"capture_ids": a, "capture_default": b, "get": got, "set": replaced, "encoder_only": enc}

# 3. the hook fires where SGLang resolves the model class (scheduler, before construction)
from sglang.srt.server_args import prepare_server_args
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_loader.utils import get_model_architecture
hookstatus.record("delegation", "-", "registered", "reset by the test")
sa = prepare_server_args(["--model-path", KIMI, "--trust-remote-code"])
cls, arch = get_model_architecture(ModelConfig.from_server_args(sa))
out["resolved"] = [cls.__name__, arch, hookstatus.get("delegation").state]
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def result():
    return run_json(CODE.replace("KIMI,", repr(str(KIMI_K25)) + ","), timeout=300)


def test_upstream_methods_are_left_alone(result):
    assert result["upstream_state"] == "skipped" and result["upstream_untouched"]


def test_missing_methods_are_added_once(result):
    assert result["old_has_before"] == []
    assert result["old_state"] == result["old_state_again"] == "applied"
    assert result["old_are_ours"]


@pytest.mark.parametrize("cls", ["old", "upstream"])
def test_delegates_reach_the_inner_deepseek_model(result, cls):
    r = result[cls]
    assert r["capture_ids"] == [2, 30, 58] and r["capture_default"] == [2, 30, 58]
    assert r["get"] and r["set"]


def test_encoder_only_model_gives_a_clear_error(result):
    assert "encoder-only" in result["old"]["encoder_only"]
    assert "language_model" in result["upstream"]["encoder_only"]


def test_the_hook_runs_where_sglang_resolves_the_class(result):
    assert result["resolved"] == ["KimiK25ForConditionalGeneration", "KimiK25ForConditionalGeneration", "skipped"]
