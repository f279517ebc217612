"""`sglang-kimi-eagle3 check --json` through the real check path (SGLang's parser and resolution, the plugin's
launch step): the predicted-speedup finding for known drafters, none for a pair without a cost profile."""

import pytest
from helpers import run_json

pytestmark = pytest.mark.slow

CODE = r'''
import contextlib, io, json, warnings
warnings.filterwarnings("ignore")
from sglang_kimi_eagle3.cli import main
out = {}
runs = {
    "default": [],
    "h200_k25_drafter": ["--for-gpu", "H200", "--speculative-draft-model-path", "aq-medai/kimi-k25-eagle3"],
    "llama": ["--model-path", "llama-3.1-8b-instruct", "--speculative-algorithm", "EAGLE3",
              "--speculative-draft-model-path", "llama-3.1-8b-eagle3", "--for-gpu", "sm90"],
}
for name, argv in runs.items():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["check", "--json", *argv])
    doc = json.loads(buf.getvalue())
    out[name] = {"rc": rc, "errors": doc["errors"],
                 "speedup": [f for f in doc["findings"] if f["check"] == "speedup (prediction)"]}
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def checks():
    return run_json(CODE, timeout=600, HF_HUB_OFFLINE="1")


def test_the_embedded_default_predicts_its_speedup_as_an_upper_bound(checks):
    (f,) = checks["default"]["speedup"]
    assert f["found"].startswith("PREDICTION (planner model, not a measurement)") and "recommended: " in f["found"]
    assert all(f"c {c} " in f["found"] for c in (1, 16, 64, 128))
    assert "planner profile kimi-k2.5_8xrtxpro6000_tp8" in f["expected"] and "upper bound" in f["expected"]
    assert checks["default"]["errors"] == 0 and checks["default"]["rc"] == 0  # a prediction never refuses a launch
    # the launch step made this chain launch adaptive (up to bs 128 within the memory budget): the recommendation says so
    assert "this plugin serves the launch with adaptive steps [0, 3] up to batch 128" in f["found"], f["found"]


def test_an_h200_with_a_k25_drafter_uses_the_h200_profile(checks):
    (f,) = checks["h200_k25_drafter"]["speedup"]
    assert "planner profile kimi-k2.5_8xh200_tp8 (H200, TP 8)" in f["expected"] and "aq-medai-k25-gsm8k" in f["expected"]
    assert "upper bound" not in f["expected"]


def test_a_pair_without_a_cost_profile_gets_no_prediction(checks):
    assert checks["llama"]["speedup"] == []
