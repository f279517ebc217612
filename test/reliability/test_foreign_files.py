"""Every reader of a file this plugin did not write, fed what a user might hand it by mistake: one exit-2 line
("not a <kind> file: <why>", or "no such <kind> file"), nothing printed before it, never exit 3, never a hang on
a FIFO, never an unbounded read of /dev/zero. Readers: status --running FILE, plan --bench / --profile / --costs,
bench --baseline-json. All in process (no SGLang import: status --running reads the file only)."""

from __future__ import annotations

import json
import os

import pytest

from sglang_kimi_eagle3.cli import main as cli_main
from sglang_kimi_eagle3.planner import profiles

BENCH = {"schema": "sglang-kimi-eagle3-bench/1", "levels": [{"concurrency": 1, "spec": {"histogram": [1, 2, 3],
                                                                                         "tau": 2.0}}]}
STATUS = {"plugin": "0", "pid": 1, "time": "t", "table_in_effect": "auto",
          "hooks": [{"name": "draft_topk1", "status": "active", "sites": {"bound": ["a"]},
                     "counters": {"ours": {"b": 3}, "sglang": {"r": {"b": 1}}}}]}
PROFILE = json.loads((profiles.DIR / f"{profiles.DEFAULT_PROFILE}.json").read_text())

# what the user hands over -> (content, or a special)
FILES = {
    "list": b"[1, 2, 3]",
    "string": b'"hello"',
    "empty": b"",
    "not_utf8": b'{"a": "\xff"}',
    "malformed": b'{"levels": [',
    "deep": b"[" * 100000 + b"]" * 100000,
    "bench_file": json.dumps(BENCH).encode(),
    "status_file": json.dumps(STATUS).encode(),
    "profile_file": json.dumps(PROFILE).encode(),
    "status_string_counters": json.dumps({**STATUS, "hooks": [{**STATUS["hooks"][0],
                                                               "counters": {"ours": {"b": "3"}, "sglang": {}}}]}).encode(),
    "status_missing_keys": json.dumps({"pid": 1, "hooks": []}).encode(),
    "status_hooks_dict": json.dumps({**STATUS, "hooks": {"a": 1}}).encode(),
    "status_bad_launch_path": json.dumps({**STATUS, "launch_path": {"fast_path": "on", "direct_launch": 3,
                                                                    "int_pointers": True}}).encode(),
    "fifo": "fifo",
    "dev_zero": "/dev/zero",
    "folder": "folder",
    "dangling_link": "dangling",
    "huge": "huge",
}

READERS = {  # reader -> (kind, argv builder)
    "status": ("status", lambda f, tmp, url: ["status", "--running", f, "--json"]),
    "status_json_first": ("status", lambda f, tmp, url: ["status", "--json", "--running", f]),
    "plan_bench": ("bench", lambda f, tmp, url: ["plan", "--no-sglang-check", "-o", f"{tmp}/cfg.json", "--bench", f]),
    "plan_profile": ("hardware profile", lambda f, tmp, url: ["plan", "--no-sglang-check", "-o", f"{tmp}/cfg.json",
                                                              "--profile", f]),
    "plan_costs": ("cost table", lambda f, tmp, url: ["plan", "--no-sglang-check", "-o", f"{tmp}/cfg.json", "--alpha",
                                                      "0.7", "--costs", f]),
    "bench_baseline": ("bench", lambda f, tmp, url: ["bench", "--url", url, "--json", f"{tmp}/out.json",
                                                     "--no-progress", "--baseline-json", f]),
}
# the file that IS the reader's kind: accepted (not part of the refusal table)
OWN = {"status": "status_file", "status_json_first": "status_file", "plan_bench": "bench_file",
       "plan_profile": "profile_file", "bench_baseline": None, "plan_costs": None}


def make(tmp_path, name) -> str:
    spec = FILES[name]
    p = tmp_path / f"{name}.json"
    if spec == "fifo":
        os.mkfifo(p)
    elif spec == "/dev/zero":
        return "/dev/zero"
    elif spec == "folder":
        p.mkdir()
    elif spec == "dangling":
        p.symlink_to(tmp_path / "gone.json")
    elif spec == "huge":
        with open(p, "wb") as fh:  # sparse: 100 MB of nothing, no disk used
            fh.truncate(100 << 20)
    else:
        p.write_bytes(spec)
    return str(p)


CASES = [(r, f) for r in READERS for f in FILES if f != OWN[r]
         and not (r == "bench_baseline" and f == "bench_file")]  # a speculating bench file: test_bench_sanity


@pytest.mark.parametrize("reader,name", CASES, ids=[f"{r}-{f}" for r, f in CASES])
def test_foreign_or_damaged_file_is_one_line_before_any_output(tmp_path, capsys, reader, name):
    kind, argv = READERS[reader]
    path = make(tmp_path, name)
    rc = cli_main(argv(path, tmp_path, "http://127.0.0.1:9"))  # bench refuses before any request
    cap = capsys.readouterr()
    assert rc == 2, (rc, cap.out[-500:], cap.err[-800:])
    assert cap.out == ""  # nothing printed before the refusal
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sglang-kimi-eagle3: error:"), lines
    if name == "dangling_link":
        assert "does not exist" in lines[0]
    elif reader == "plan_bench" and name in ("status_file", "status_string_counters", "status_missing_keys",
                                               "status_hooks_dict", "status_bad_launch_path", "profile_file"):
        assert "not a bench file: no 'levels'" in lines[0]
    else:
        assert f"not a {kind} file: " in lines[0], lines[0]
    if name in ("fifo", "dev_zero", "folder"):
        assert "not a regular file" in lines[0]
    if name == "huge":
        assert "more than a" in lines[0]


def test_status_running_accepts_its_own_file_in_either_flag_order(tmp_path, capsys):
    f = make(tmp_path, "status_file")
    for argv in (["status", "--running", f, "--json"], ["status", "--json", "--running", f], ["status", "--running", f]):
        assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "draft_topk1" in out and "calls: ours 3, SGLang 1 (r)" in out


def test_status_running_prints_the_launch_path_its_file_names(tmp_path, capsys):
    lp = {"fast_path": "on", "direct_launch": "on", "int_pointers": True, "fallbacks": {}}
    f = tmp_path / "port3.json"
    f.write_text(json.dumps({**STATUS, "launch_path": lp}))
    assert cli_main(["status", "--running", str(f)]) == 0
    assert "verify ops launch through Triton's C launch directly, pointers as ints" in capsys.readouterr().out
    f.write_text(json.dumps({**STATUS, "launch_path": None}))  # before any launch plan: nothing said
    assert cli_main(["status", "--running", str(f)]) == 0 and "verify ops launch" not in capsys.readouterr().out


@pytest.mark.parametrize("fallbacks", ["absent", None])
def test_status_running_reads_a_launch_path_without_fallbacks(tmp_path, capsys, fallbacks):
    """The reader accepts launch_path.fallbacks absent or null (no fallback); the printer then died on it
    (KeyError / AttributeError, exit 3)."""
    lp = {"fast_path": "on", "direct_launch": "on", "int_pointers": False}
    if fallbacks is None:
        lp["fallbacks"] = None
    f = tmp_path / "port3.json"
    f.write_text(json.dumps({**STATUS, "launch_path": lp}))
    rc = cli_main(["status", "--running", str(f)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "verify ops launch through Triton's C launch directly, pointers as tensors" in cap.out


def test_status_running_passes_over_a_dangling_link_in_the_status_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_STATUS_DIR", str(tmp_path))
    (tmp_path / "port1.json").symlink_to(tmp_path / "gone.json")
    assert cli_main(["status", "--running"]) == 2
    assert "passed over port1.json" in capsys.readouterr().err
    (tmp_path / "port2.json").write_text(json.dumps(STATUS))
    assert cli_main(["status", "--running"]) == 0
    assert "port2.json" in capsys.readouterr().out


def test_status_running_names_a_status_folder_that_is_a_file(tmp_path, capsys, monkeypatch):
    f = tmp_path / "a-file"
    f.write_text("")
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_STATUS_DIR", str(f))
    assert cli_main(["status", "--running"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{f}: is a file, not the status folder" in err[0], err
