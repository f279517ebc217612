"""Model-path forms `check` accepts: a folder, a Hugging Face repo id in the local cache (offline), a
bundled profile name; and SGLang's own refusal reported as one finding among the others."""

import json
import shutil

import pytest
from helpers import AQ_K2_DRAFT, KIMI_K25, run_check

from sglang_kimi_eagle3.configs import read_config
from sglang_kimi_eagle3.errors import UserError
from sglang_kimi_eagle3.integration.preflight.inputs import local_config_dir
from sglang_kimi_eagle3.preflight import Deployment
from sglang_kimi_eagle3.preflight.checks_launch import check_sglang_error
from sglang_kimi_eagle3.profiles import PROFILES, profile_path


def _hf_cache(root, repo: str, src) -> None:
    """The on-disk layout huggingface_hub writes: models--org--name/{refs/main, snapshots/<rev>/config.json}."""
    base = root / ("models--" + repo.replace("/", "--"))
    rev = "0123456789abcdef0123456789abcdef01234567"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(rev)
    snap = base / "snapshots" / rev
    snap.mkdir(parents=True)
    shutil.copy(src / "config.json", snap / "config.json")


def test_repo_id_found_in_the_local_hf_cache_offline(tmp_path, monkeypatch):
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path))
    _hf_cache(tmp_path, "AQ-MedAI/Kimi-K2-Instruct-eagle3", AQ_K2_DRAFT)
    folder = local_config_dir("AQ-MedAI/Kimi-K2-Instruct-eagle3", "--speculative-draft-model-path")
    assert read_config(folder).draft_vocab_size == 32000
    with pytest.raises(UserError) as e:
        local_config_dir("AQ-MedAI/not-downloaded", "--speculative-draft-model-path")
    assert "--speculative-draft-model-path AQ-MedAI/not-downloaded" in str(e.value) and "cache" in str(e.value)


def test_every_bundled_profile_reads_by_name_and_by_folder():
    for name in PROFILES:
        folder = profile_path(name)
        assert local_config_dir(str(folder), "--model-path") == folder
        assert read_config(folder).hidden_size > 0
    assert profile_path("no-such-profile") is None


def test_sglangs_own_refusal_is_one_error_finding_among_the_others():
    d = Deployment(target=read_config(KIMI_K25), draft=read_config(AQ_K2_DRAFT), algorithm="EAGLE3", steps=3, topk=1,
                   draft_tokens=4, sglang_error="trtllm_mha backend only supports topk = 1")
    f = check_sglang_error(d)
    assert len(f) == 1 and f[0].severity == "error" and "trtllm_mha" in f[0].found
    d.sglang_error = None
    assert check_sglang_error(d) == []


def test_model_paths_spelled_as_prefixes_sglang_takes_are_the_model_paths():
    """`--model-p NAME` is `--model-path NAME` to SGLang's parser (a unique prefix). check read it as no model path: it
    overlaid the embedded default, left the profile name unresolved and refused it as not downloaded (exit 2)."""
    cp = run_check("--model-p", "kimi-k2.5", "--speculative-algo", "EAGLE3", "--speculative-draft-model-p",
                   "aq-medai/kimi-k25-eagle3", "--trust-remote-code", "--tp", "8", "--json",
                   "--for-gpu", "sm90")  # not this machine's GPU: Kimi at TP 8 is a memory error on an 80-GB H100
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    out = json.loads(cp.stdout)
    assert out["title"].startswith("launch_server --model-p kimi-k2.5"), out["title"]
    assert out["errors"] == 0, out["findings"]
