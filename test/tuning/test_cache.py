"""tuning/cache.py (writing) + ops/tables.py (reading): where user tables live, which table is in effect, staleness."""

import json
import os

import pytest

from sglang_kimi_eagle3.ops import arch, tables
from sglang_kimi_eagle3.tuning import cache

H200, SM90 = "NVIDIA H200", (9, 0)


@pytest.fixture
def tune_dir(tmp_path, monkeypatch):
    for var in (tables.ENV_DIR, tables.ENV_BUNDLED, arch.ENV_KERNELS):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(tables.ENV_DIR, str(tmp_path / "tuned"))
    tables.clear_cache()
    yield tmp_path / "tuned"
    tables.clear_cache()


def user_table(**over) -> dict:
    t = {"device": H200, "cc": "9.0", "driver": tables.driver_version(), "triton": tables.triton_version(),
         "date": "2026-11-30T19:21Z",
         "ops": {"draft_topk": {"default": {}, "rules": [{"min_bs": 1, "max_bs": 1, "k": 1, "min_vocab": 4000,
                                                          "max_vocab": 4000, "config": {"BLOCK": 1024}}],
                                "wins": [], "measured": {"V4000:k1:bs1": {"ours_us": 9.0, "upstream_us": 8.0}}}}}
    t.update(over)
    return t


def test_cache_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv(tables.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tables.cache_dir() == tmp_path / "xdg" / "sglang-kimi-eagle3" / "tuned"
    monkeypatch.setenv(tables.ENV_DIR, str(tmp_path / "env"))
    assert tables.cache_dir() == tmp_path / "env"
    assert tables.cache_dir(tmp_path / "flag") == tmp_path / "flag"
    assert tables.table_path(H200, tmp_path) == tmp_path / "NVIDIA_H200.json"


def test_write_atomic_replaces_and_leaves_no_temp(tmp_path):
    p = tmp_path / "d" / "t.json"
    cache.write_table(p, {"a": 1})
    cache.write_table(p, {"a": 2})
    assert json.loads(p.read_text()) == {"a": 2} and os.listdir(p.parent) == ["t.json"]


def test_bundled_only_origin(tune_dir):
    t = tables.load_table(H200, SM90)
    assert t["origin"].startswith("bundled sm90.draft_head.json (compile-verified only, no measured wins)")
    assert "NVIDIA_H200.draft_head.json (measured on NVIDIA H200, 2026-11-29)" in t["origin"]
    assert "NVIDIA_H200.verify.json (measured on NVIDIA H200" in t["origin"] and "note" not in t["origin"]
    h800 = tables.load_table("NVIDIA H800", SM90)  # same architecture, not measured there: no wins
    assert "NVIDIA_H200" not in h800["origin"] and not any(s.get("wins") for s in h800["ops"].values())
    h100 = tables.load_table("NVIDIA H100 80GB HBM3", SM90)  # its own verify table: measured there
    assert "NVIDIA_H100_80GB_HBM3.verify.json (measured on NVIDIA H100 80GB HBM3" in h100["origin"]
    assert "NVIDIA_H200" not in h100["origin"] and h100["ops"]["tree_sampling"]["wins"]
    sm120 = tables.load_table("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", (12, 0))
    assert "compile-verified only, no measured wins" in sm120["origin"]
    # compile-verified tables only: the line says what measures this GPU (a table measured somewhere does not)
    hint = "; `sglang-kimi-eagle3 tune` on this GPU measures where ours win"
    assert sm120["origin"].endswith(hint) and h800["origin"].endswith(hint) and "tune" not in t["origin"]
    assert "no bundled table" in tables.load_table(None, None)["origin"]
    b200 = tables.load_table("NVIDIA B200", (10, 0))["origin"]  # no table of any kind: the same hint
    assert b200.startswith("no bundled table for this GPU") and b200.endswith(hint), b200
    assert not tables.load_table(None, None)["origin"].endswith(hint)  # no GPU: nothing to tune


def test_the_tune_hint_only_where_the_table_decides(tune_dir, monkeypatch):
    """Under SGLANG_KIMI_EAGLE3_KERNELS=ours / upstream no table is read, so the line does not send the operator to
    `tune` (it did)."""
    from sglang_kimi_eagle3.integration.hooks.runtime_status import table_in_effect

    sm120 = ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", (12, 0))
    assert table_in_effect(sm120).endswith(tables.TUNE_HINT)
    for mode in ("ours", "upstream"):
        monkeypatch.setenv("SGLANG_KIMI_EAGLE3_KERNELS", mode)
        line = table_in_effect(sm120)
        assert line.startswith(f"SGLANG_KIMI_EAGLE3_KERNELS={mode}; bundled sm120") and "tune" not in line, line


def _bundled_with_graph_wins(folder):
    """The bundled tables with the H200 draft-head GPU-time wins (graph_wins) put back as wins, as they were before
    the live A/B of 2026-12-01: a bundled table that lists wins, for the merge rules below."""
    folder.mkdir()
    for f in tables.CONFIG_DIR.glob("*.json"):
        doc = json.loads(f.read_text())
        if f.name == "NVIDIA_H200.draft_head.json":
            for spec in doc["ops"].values():
                spec["wins"] = spec.get("graph_wins", spec["wins"])
        (folder / f.name).write_text(json.dumps(doc))
    return folder


def test_the_bundled_h200_table_lists_eager_verify_wins_only_and_keeps_the_gpu_time_ones_apart(tune_dir):
    t = tables.load_table(H200, SM90)
    wins = {op: spec.get("wins") for op, spec in t["ops"].items() if spec.get("wins")}
    assert set(wins) == {"tree_sampling", "argmax_verify"}, wins  # measured per eager call (2026-12-02 and -04)
    # argmax + verify: an eager win at bs 1-128 (bs 2-8 since run 22's bs 4), none at N 16 (not measured per call)
    assert "n4_bs1" in wins["tree_sampling"] and "n4_bs8" in wins["argmax_verify"]
    assert "n16_bs8" not in wins["argmax_verify"] and "n16_bs8" in t["ops"]["argmax_verify"]["graph_wins"]
    assert "V4000:k1:bs8" in t["ops"]["draft_topk"]["graph_wins"] and not arch.use_ours("draft_topk", "V4000:k1:bs8", t)


def test_user_table_goes_first_and_decides_only_what_it_measured(tune_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(tables.ENV_BUNDLED, str(_bundled_with_graph_wins(tmp_path / "bundled")))
    tables.clear_cache()
    assert arch.use_ours("draft_topk", "V4000:k1:bs1", tables.load_table(H200, SM90))  # the bundled win
    cache.write_table(tables.table_path(H200), user_table())
    tables.clear_cache()
    t = tables.load_table(H200, SM90)
    assert t["origin"].startswith(f"user-tuned {tables.table_path(H200)} (measured on NVIDIA H200, 2026-11-30T19:21Z")
    assert "over bundled sm90" in t["origin"]
    assert not arch.use_ours("draft_topk", "V4000:k1:bs1", t)  # measured here: SGLang was faster
    assert arch.use_ours("draft_topk", "V4000:k1:bs8", t)  # not measured: the bundled win stands
    assert arch.op_config("draft_topk", {"bs": 1, "k": 1, "vocab": 4000}, t) == {"BLOCK": 1024}  # the user's rule first
    assert arch.op_config("draft_topk", {"bs": 8, "k": 1, "vocab": 4000}, t)["BLOCK"] == 4096  # then the bundled rules


def test_user_table_over_hidden_bundled(tune_dir, tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(tables.ENV_BUNDLED, str(empty))
    tables.clear_cache()
    assert not arch.use_ours("argmax_verify", "n4_bs8", tables.load_table(H200, SM90))
    cache.write_table(tables.table_path(H200), user_table(ops={"tree_sampling": {"wins": ["n4_bs1"], "measured": {"n4_bs1": {}}}}))
    tables.clear_cache()
    t = tables.load_table(H200, SM90)
    assert t["origin"].endswith("over no bundled table for this GPU")
    assert arch.use_ours("tree_sampling", "n4_bs1", t) and not arch.use_ours("tree_sampling", "n4_bs8", t)


@pytest.mark.parametrize("over,why", [
    ({"device": "NVIDIA H100 80GB HBM3"}, "tuned on 'NVIDIA H100 80GB HBM3', this GPU is 'NVIDIA H200'"),
    ({"cc": "9.1"}, "compute capability 9.1"),
    ({"triton": "2.3.1"}, "tuned with triton 2.3.1"),
    ({"driver": "1.0"}, "tuned with driver 1.0"),
])
def test_stale_tables_are_ignored_with_a_note(tune_dir, tmp_path, monkeypatch, over, why):
    monkeypatch.setenv(tables.ENV_BUNDLED, str(_bundled_with_graph_wins(tmp_path / "bundled")))
    if "driver" in over:  # this box may have no NVIDIA driver: pretend one
        monkeypatch.setattr(tables, "driver_version", lambda: "580.159.04")
    cache.write_table(tables.table_path(H200), user_table(**over))
    table, path, note = tables.user_table(H200, SM90)
    assert table is None and why in note and str(path) in note and "sglang-kimi-eagle3 tune" in note
    tables.clear_cache()
    t = tables.load_table(H200, SM90)
    assert t["origin"].startswith("bundled ") and f"note: ignored {path}" in t["origin"]
    assert arch.use_ours("draft_topk", "V4000:k1:bs1", t)  # the bundled table decides


def test_unreadable_table_is_a_note_not_a_crash(tune_dir):
    p = tables.table_path(H200)
    p.parent.mkdir(parents=True)
    p.write_text("{not json")
    tables.clear_cache()
    assert "unreadable" in tables.load_table(H200, SM90)["origin"]


def test_a_hand_edited_op_entry_is_a_note_and_the_bundled_table_decides(tune_dir, tmp_path, monkeypatch):
    """A user table whose `wins` is no list of names would raise inside a serving kernel hook (SGLang does not catch
    it there): ignored with a note, like an unreadable file."""
    monkeypatch.setenv(tables.ENV_BUNDLED, str(_bundled_with_graph_wins(tmp_path / "bundled")))
    bad = user_table()
    bad["ops"]["draft_topk"]["wins"] = "V4000:k1:bs1"
    cache.write_table(tables.table_path(H200), bad)
    table, path, note = tables.user_table(H200, SM90)
    assert table is None and "unreadable (ops.draft_topk: wins not of a launch table's type)" in note, note
    tables.clear_cache()
    t = tables.load_table(H200, SM90)
    assert t["origin"].startswith("bundled ") and f"note: ignored {path}" in t["origin"]


def test_retuning_replaces_only_the_shapes_it_measured():
    r = lambda bs, cfg: {"min_bs": bs, "max_bs": bs, "min_rows": 4000, "max_rows": 4000, "config": cfg}  # noqa: E731
    old = {"default": {}, "rules": [r(1, {"a": 1}), r(8, {"a": 8})], "wins": ["bs1", "bs8"],
           "measured": {"bs1": {"us": 1}, "bs8": {"us": 8}}}
    new = {"default": {}, "rules": [r(8, {"a": 80})], "wins": [], "measured": {"bs8": {"us": 80}}}
    m = cache.merge_op(old, new)
    assert m["rules"] == [r(8, {"a": 80}), r(1, {"a": 1})]
    assert m["wins"] == ["bs1"] and m["measured"] == {"bs1": {"us": 1}, "bs8": {"us": 80}}
    assert cache.merge_op(None, new) is new


def test_tuned_tables_and_run_status_share_the_xdg_cache_home(monkeypatch, tmp_path):
    from sglang_kimi_eagle3.integration.hooks import runtime_status

    for var in (tables.ENV_DIR, runtime_status.ENV_STATUS_DIR):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tables.cache_dir() == tmp_path / "sglang-kimi-eagle3" / "tuned"
    assert runtime_status.status_dir() == tmp_path / "sglang-kimi-eagle3" / "run"
