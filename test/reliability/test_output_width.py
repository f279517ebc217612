"""Every command's output and help fit the terminal: at COLUMNS=80 no line is longer than 80 columns, and
the wrapping keeps meaning (commands still paste, tables keep whole headers and numbers)."""

import re
import shlex

import pytest

from sglang_kimi_eagle3 import terminal
from sglang_kimi_eagle3.cli import main as cli_main

W = 80


def run(argv, capsys, monkeypatch, columns=W) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    rc = cli_main(argv)
    out = capsys.readouterr().out
    assert rc == 0, out[-2000:]
    return out


def long_lines(text: str, w: int = W) -> list[str]:
    """Lines past w columns, except a line that is one unbreakable word (a path longer than the terminal, with the
    shell's continuation backslash): no wrapper can break it, and splitting a path would break copy and paste."""
    return [ln for ln in text.splitlines()
            if len(ln) > w and len(ln.strip().removesuffix("\\").split()) != 1]


HELPS = [[], ["--help"], ["check", "--help"], ["plan", "--help"], ["bench", "--help"], ["tune", "--help"],
         ["status", "--help"], ["profiles", "--help"], ["upstream", "--help"], ["profiles"],
         ["plan", "--list-profiles"]]


@pytest.mark.parametrize("argv", HELPS, ids=lambda a: " ".join(a) or "usage")
def test_help_and_listings_fit_80_columns(argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(W))
    try:
        cli_main(argv)  # the bare usage exits 2 (no command), its text is the same
    except SystemExit as exc:  # argparse's --help
        assert exc.code == 0
    out = capsys.readouterr().out
    assert out.strip() and not long_lines(out), long_lines(out)


def test_help_follows_columns_not_a_fixed_width(capsys, monkeypatch):
    wide = run(["check", "--help"], capsys, monkeypatch, columns=160)
    narrow = run(["check", "--help"], capsys, monkeypatch, columns=W)
    assert max(map(len, wide.splitlines())) > W  # the wide terminal is used, not 80 always
    assert " ".join(wide.split()) == " ".join(narrow.split())  # the same words, only wrapped


def test_plan_output_fits_80_columns_and_its_table_keeps_every_column(tmp_path, capsys, monkeypatch):
    # a path of 90 characters (pytest-xdist's tmp paths on the H200 reached 82): it gets a line of its own
    deep = tmp_path / ("d" * max(1, 90 - len(str(tmp_path)) - 8)) / "a.json"
    deep.parent.mkdir()
    out = run(["plan", "--no-sglang-check", "--explain", "-o", str(deep)], capsys, monkeypatch)
    assert not long_lines(out), long_lines(out)
    assert [ln.strip() for ln in out.splitlines() if str(deep) in ln and len(ln) > W] == [f"{deep} \\"]
    for header in ("plain µs", "best (steps/topk/tokens)", "round µs", "speedup", "s1", "s7", "candidate_steps"):
        assert header in out, header  # whole headers: the table is split into parts, not squeezed
    assert "…" not in out
    # the batch-size column heads both parts (bs 64 and 128 are past the default deployment's KV pool: not planned)
    assert len(re.findall(r"│ +1 │", out)) == 2 and len(re.findall(r"│ +32 │", out)) == 2
    # the printed launch flags paste into a shell as one command
    mark = "the adaptive file instead: " if "the adaptive file instead: " in out else "launch flags: "
    text = out[out.index(mark):].removeprefix(mark)
    flags = shlex.split(text.split("\n\n")[0].replace("\\\n", " "))  # as a shell joins continued lines
    assert flags[:2] == ["--speculative-algorithm", "EAGLE3"] and "--speculative-adaptive-config" in flags
    assert flags[flags.index("--speculative-adaptive-config") + 1] == str(deep)


def test_plan_uses_a_wide_terminal(tmp_path, capsys, monkeypatch):
    out = run(["plan", "--no-sglang-check", "-o", str(tmp_path / "a.json")], capsys, monkeypatch, columns=400)
    assert len(re.findall(r"│ +1 │", out)) == 1  # one table when it fits
    line = next(ln for ln in out.splitlines() if ln.startswith("launch flags: "))  # one line when it fits
    assert re.search(r"--speculative-num-(steps|draft-tokens) \d+$", line), line


def test_tune_dry_run_fits_80_columns(tmp_path, capsys, monkeypatch):
    out = run(["tune", "--dry-run", "--cache-dir", str(tmp_path)], capsys, monkeypatch)
    assert "Would measure 28 (op, shape) points" in out and not long_lines(out), long_lines(out)


def test_width_comes_from_columns_then_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "123")
    assert terminal.width() == 123 and terminal.console().width == 123
    monkeypatch.setenv("COLUMNS", "nonsense")
    monkeypatch.setattr(terminal.os, "get_terminal_size", lambda fd: terminal.os.terminal_size((97, 30)))
    assert terminal.width() == 97

    def no_terminal(fd):
        raise OSError("not a terminal")

    monkeypatch.setattr(terminal.os, "get_terminal_size", no_terminal)
    assert terminal.width() == terminal.DEFAULT_WIDTH


def test_fill_hangs_option_text_under_its_description():
    text = "  --for-gpu GPU   " + "the GPU the deployment runs on " * 6
    lines = terminal.fill(text, 60).splitlines()
    assert len(lines) > 1 and all(len(ln) <= 60 for ln in lines)
    assert all(ln.startswith(" " * 18) and ln[18] != " " for ln in lines[1:])


def test_shell_wraps_a_command_that_still_pastes():
    cmd = "--speculative-algorithm EAGLE3 --speculative-adaptive-config '/a path/x.json' --speculative-num-steps 7"
    text = terminal.shell("launch flags: ", cmd, 40)
    lines = text.splitlines()
    assert len(lines) > 1 and all(len(ln) <= 40 for ln in lines)
    assert all(ln.endswith(" \\") for ln in lines[:-1])
    assert shlex.split(text.removeprefix("launch flags: ").replace("\\\n", " ")) == shlex.split(cmd)


def test_tune_progress_line_on_a_terminal_fits_the_width(monkeypatch):
    import io

    from sglang_kimi_eagle3.tuning import run as tune_run

    class Tty(io.StringIO):
        def isatty(self):
            return True

    err = Tty()
    monkeypatch.setattr(tune_run.sys, "stderr", err)
    monkeypatch.setenv("COLUMNS", "50")
    tune_run.progress(1, 3, "lm_head_gemv R=4000 H=7168 bs=128 " * 3)
    tune_run.progress(3, 3, "done in 12 s")
    lines = [seg for seg in err.getvalue().replace("\n", "\r").split("\r") if seg]
    assert len(lines) == 2 and all(len(seg) == 49 for seg in lines), lines


def test_tune_result_table_fits_the_width_with_whole_numbers(capsys, monkeypatch):
    from sglang_kimi_eagle3.tuning.run import _print_table

    monkeypatch.setenv("COLUMNS", "60")
    _print_table([{"op": "tree_sampling", "shape": {"n": 64, "bs": 256, "vocab": 163840}, "sglang_us": 1234.567,
                   "ours_us": 987.654, "chosen": "ours", "exact": True},
                  {"op": "argmax_verify", "shape": {"n": 4, "bs": 1, "vocab": 163840}, "sglang_us": 8.5,
                   "ours_us": None, "chosen": "sglang", "exact": False}])
    out = capsys.readouterr().out
    assert not long_lines(out, 60), long_lines(out, 60)
    for cell in ("1234.57", "987.65", "1.25x", "n=64 bs=256 vocab=163840", "sglang (inexact)"):
        assert cell in out, cell
