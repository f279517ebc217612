"""The `sglang-kimi-eagle3` command on what a careless or hostile operator hands it: one exit-2 line naming the
file, field or flag (never exit 3 or a traceback), and never a user's file replaced that the command did not write.
In process, no SGLang import."""

from __future__ import annotations

import json

import pytest

from sglang_kimi_eagle3.cli import main as cli_main
from sglang_kimi_eagle3.errors import UserError

STATUS = {"plugin": "0", "pid": 1, "time": "t", "table_in_effect": "auto",
          "hooks": [{"name": "draft_topk1", "status": "active", "sites": {"bound": ["a"]}, "call_sites": ["a"],
                     "counters": {"ours": {"b": 3}, "sglang": {"r": {"b": 1}}}}]}


def test_status_running_reads_null_sites_and_counters_as_absent(tmp_path, capsys):
    for field in ("sites", "counters"):
        f = tmp_path / f"port-{field}.json"
        f.write_text(json.dumps({**STATUS, "hooks": [{**STATUS["hooks"][0], field: None}]}))
        assert cli_main(["status", "--running", str(f)]) == 0, capsys.readouterr().err
        assert "draft_topk1" in capsys.readouterr().out


def test_plan_never_replaces_a_json_or_plot_file_it_did_not_write(tmp_path, capsys):
    base = ["plan", "--no-sglang-check", "-o", str(tmp_path / "cfg.json")]
    for flag, name in (("--json", "notes.json"), ("--plot", "photo.png")):
        mine = tmp_path / name
        mine.write_text('{"mine": 1}')
        assert cli_main([*base, flag, str(mine)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{flag} {mine}: exists and was not written by `plan`; pass --force" in err[0]
        assert mine.read_text() == '{"mine": 1}'
        assert cli_main([*base, flag, str(mine), "--force"]) == 0  # --force: the operator's word
    capsys.readouterr()
    assert cli_main([*base, "--json", str(tmp_path / "notes.json")]) == 0  # plan's own file: a rerun replaces it
    assert cli_main([*base, "--plot", str(tmp_path / "photo.png")]) == 0, capsys.readouterr().err


def test_check_refuses_a_memory_fraction_outside_0_1_before_sglang_parses(capsys):
    for val in ("nan", "inf", "2", "-0.5", "0"):  # nan was exit 3 (ValueError in the memory check)
        assert cli_main(["check", "--mem-fraction-static", val]) == 2, val
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--mem-fraction-static {val}: expected a number in (0, 1]" in err[0], err


def test_bench_never_replaces_a_json_file_it_did_not_write(tmp_path, capsys):
    mine = tmp_path / "notes.json"
    mine.write_text('{"mine": 1}')
    argv = ["bench", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--min-requests", "1", "--rounds", "1",
            "--warmup", "0", "--timeout", "2", "--no-progress", "--json", str(mine)]
    assert cli_main(argv) == 2  # refused before any request (port 9: nothing listens)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--json {mine}: exists and was not written by bench" in err[0], err
    assert mine.read_text() == '{"mine": 1}'
    ours = tmp_path / "run.json"
    assert cli_main([*argv[:-1], str(ours)]) == 1  # no server: a failed run, its JSON written
    assert cli_main([*argv[:-1], str(ours)]) == 1  # bench's own file: a rerun replaces it


def test_bench_keeps_a_measured_result_when_the_rerun_measures_nothing(tmp_path, capsys):
    """A typo in --url used to replace yesterday's measured bench.json with a run of failed requests."""
    from sglang_kimi_eagle3.bench.document import SCHEMA

    done = tmp_path / "bench.json"
    earlier = {"schema": SCHEMA, "date": "2026-12-01T10:00:00+00:00", "status": "finished", "interrupted": None,
               "levels": [{"concurrency": 1, "requests": 8, "spec": {"requests": 8, "ok": 8, "agg_tok_s": 120.0}}]}
    done.write_text(json.dumps(earlier, indent=1))
    before = done.read_bytes()
    argv = ["bench", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--min-requests", "1", "--rounds", "1",
            "--warmup", "0", "--timeout", "2", "--no-progress", "--json", str(done)]
    assert cli_main(argv) == 1  # nothing listens on port 9: every request fails
    out, err = capsys.readouterr()
    assert done.read_bytes() == before  # the earlier result, untouched, through the whole run
    assert f"wrote {done}" not in out
    assert f"kept the earlier result in {done} (1 measured level, 2026-12-01T10:00:00+00:00)" in err, err
    assert not list(tmp_path.glob("*.tmp*"))


def test_an_empty_flag_value_is_refused_not_read_as_absent(tmp_path, capsys):
    """`--bench "$RUN"` with RUN unset used to plan from the preset, `--prompts ''` to send the bundled prompts."""
    plan = ["plan", "--no-sglang-check", "-o", str(tmp_path / "cfg.json")]
    bench = ["bench", "--url", "http://127.0.0.1:9", "--json", str(tmp_path / "b.json"), "--concurrency", "1",
             "--warmup", "0", "--timeout", "2", "--no-progress"]
    cases = [(plan, f, v) for f in ("--bench", "--costs", "--profile", "--json", "--plot") for v in ("", " ")]
    cases += [(bench, f, "") for f in ("--baseline-url", "--baseline-json", "--prompts", "--workload", "--plots")]
    cases += [(bench, "--categories", v) for v in ("", ",,")]
    for argv, flag, value in cases:
        assert cli_main([*argv, flag, value]) == 2, (flag, value)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{flag} {value!r} is empty; give a value or leave {flag} out" in err[0], err
    assert not list(tmp_path.iterdir())


def test_bench_url_with_another_scheme_suggests_the_http_url(capsys):
    for url, fix in (("ftp://h:30000", "use e.g. http://h:30000"), ("localhost:30000", "use e.g. http://localhost:30000"),
                     ("", "use e.g. http://127.0.0.1:30000")):
        assert cli_main(["bench", "--url", url]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].endswith(fix), err


def test_upstream_export_refuses_an_empty_sglang_src(capsys):
    for flag in ("--sglang-src", "--only"):  # --sglang-src '' exported the installed SGLang instead
        assert cli_main(["upstream", "export", "--check", flag, ""]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{flag} '' is empty; give a value or leave {flag} out" in err[0], err


def test_an_unknown_profile_names_the_flag_or_variable_that_gave_it(tmp_path, capsys, monkeypatch):
    assert cli_main(["plan", "--no-sglang-check", "-o", str(tmp_path / "cfg.json"), "--profile", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--profile: hardware profile 'nope' not found; bundled: " in err[0], err
    from sglang_kimi_eagle3.integration.adaptive_default import table_for  # the launch's adaptive table (and check's)

    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_ADAPTIVE_PROFILE", "nope")
    with pytest.raises(UserError, match="^SGLANG_KIMI_EAGLE3_ADAPTIVE_PROFILE: hardware profile 'nope' not found"):
        table_for(object())


def test_tune_checks_the_table_folder_from_the_environment_before_measuring(tmp_path, capsys, monkeypatch):
    f = tmp_path / "a-file"
    f.write_text("mine")
    for var, value, words in (("SGLANG_KIMI_EAGLE3_TUNE_DIR", f, f"$SGLANG_KIMI_EAGLE3_TUNE_DIR {f}: is a file"),
                              ("XDG_CACHE_HOME", f, f"lies under {f}, which is a file")):
        monkeypatch.delenv("SGLANG_KIMI_EAGLE3_TUNE_DIR", raising=False)
        monkeypatch.setenv(var, str(value))
        assert cli_main(["tune", "--dry-run"]) == 2
        out = capsys.readouterr()
        err = out.err.strip().splitlines()
        assert len(err) == 1 and words in err[0] and "would be written" not in out.out, err
    assert f.read_text() == "mine"


def test_plan_bench_without_spec_fields_names_the_file_and_the_fix(tmp_path, capsys):
    bench = tmp_path / "plain.json"  # a baseline run's JSON handed to plan: no steps anywhere in it
    bench.write_text(json.dumps({"schema": "sglang-kimi-eagle3-bench/1", "levels": [{"concurrency": 1}]}))
    assert cli_main(["plan", "--no-sglang-check", "-o", str(tmp_path / "cfg.json"), "--bench", str(bench)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--bench {bench}: the speculative server's steps are unknown" in err[0], err
    assert "--acceptance-conditional" in err[0]


def test_bench_url_with_a_control_character_or_space_inside_is_refused(tmp_path, capsys):
    """urlsplit drops tab/CR/LF silently: 'http://127.0.0.1\\n:9' was benchmarked as http://127.0.0.1:9 (and
    'http://a\\tb:1' as host 'ab'), the typed URL kept in the JSON and the error line split in two."""
    argv = ["--concurrency", "1", "--min-requests", "1", "--rounds", "1", "--warmup", "0", "--timeout", "2",
            "--no-progress", "--json", str(tmp_path / "b.json")]
    for flag, url in (("--url", "http://127.0.0.1\n:9"), ("--url", "http://a\tb:1"), ("--url", "http://my host:9"),
                      ("--baseline-url", "http://127.0.0.1:\r9")):
        extra = ["--url", "http://127.0.0.1:9"] if flag != "--url" else []
        assert cli_main(["bench", *extra, flag, url, *argv]) == 2, url
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{flag} {url!r}: holds a space or control character" in err[0], err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("where,field,value", [
    (None, "sglang", 5), (None, "tested_sglang", ["0.5.23"]), (None, "plugin", {"v": 1}),
    (0, "state", [1]), (0, "target", 7), (0, "detail", {"x": 1}),
])
def test_status_running_refuses_optional_fields_of_the_wrong_type(tmp_path, capsys, where, field, value):
    """`"state": [1]` was printed as "[1] on the lead", `"sglang": 5` as a release note, exit 0: one line, exit 2 now."""
    doc = json.loads(json.dumps(STATUS))
    (doc if where is None else doc["hooks"][where])[field] = value
    f = tmp_path / "port9.json"
    f.write_text(json.dumps(doc))
    assert cli_main(["status", "--running", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    key = field if where is None else f"hooks[{where}].{field}"
    assert len(err) == 1 and "not a status file" in err[0] and repr(key) in err[0], err
    doc = json.loads(json.dumps(STATUS))
    (doc if where is None else doc["hooks"][where])[field] = None  # null reads as absent
    f.write_text(json.dumps(doc))
    assert cli_main(["status", "--running", str(f)]) == 0, capsys.readouterr().err


def test_status_running_refuses_an_empty_port_or_file(tmp_path, monkeypatch, capsys):
    """`status --running "$PORT"` with PORT unset read '' as the file '.' ('.: not a status file: it is a folder')."""
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_STATUS_DIR", str(tmp_path))
    for value in ("", " "):
        assert cli_main(["status", "--running", value]) == 2, value
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"status --running {value!r} is empty; give a PORT or FILE, or leave it out" in err[0], err
