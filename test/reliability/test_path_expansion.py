"""One guarded `~` expansion (validate.expand_path) for every path a command is handed: `~user` of an unknown
user, an empty path, or a parent folder that cannot be searched is one exit-2 line naming the flag, never the
internal error (exit 3) that Path.expanduser's RuntimeError ("Could not determine home directory") gave."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from sglang_kimi_eagle3.cli import main as cli_main
from sglang_kimi_eagle3.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
NOBODY = "~nosuchuser-kimi"

COMMANDS = {
    "tune --cache-dir": (["tune", "--dry-run", "--cache-dir", f"{NOBODY}/tuned"], "--cache-dir"),
    "bench --json": (["bench", "--url", "http://127.0.0.1:9", "--json", f"{NOBODY}/r.json", "--no-progress"], "--json"),
    "plan -o": (["plan", "--no-sglang-check", "-o", f"{NOBODY}/a.json"], "-o"),
    "plan --bench": (["plan", "--no-sglang-check", "-o", "{tmp}/a.json", "--bench", f"{NOBODY}/b.json"], "--bench"),
    "upstream export --sglang-src": (["upstream", "export", "--check", "--sglang-src", f"{NOBODY}/sglang"],
                                     "--sglang-src"),
}


@pytest.mark.parametrize("name", COMMANDS)
def test_unknown_user_in_a_path_exits_2_naming_the_flag(name, tmp_path, capsys):
    argv, flag = COMMANDS[name]
    assert cli_main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"{flag} {NOBODY}/" in err and "cannot expand '~'" in err and "internal error" not in err
    assert len(err.strip().splitlines()) == 1


def test_tuned_table_folder_from_the_environment_is_guarded_too(monkeypatch, capsys):
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_TUNE_DIR", f"{NOBODY}/t")
    assert cli_main(["tune", "--dry-run"]) == 2
    assert "$SGLANG_KIMI_EAGLE3_TUNE_DIR" in capsys.readouterr().err


def test_expand_path_cases(tmp_path):
    from sglang_kimi_eagle3.validate import expand_path

    assert expand_path("~", "-o") == Path(os.path.expanduser("~"))
    assert expand_path(str(tmp_path / "x"), "-o") == tmp_path / "x"
    for bad, words in (("", "is empty"), ("  ", "is empty"), (f"{NOBODY}", "no user"), ("a\x00b", "NUL")):
        with pytest.raises(UserError, match=words):
            expand_path(bad, "--flag")
    if os.geteuid() != 0:  # root searches any folder
        locked = tmp_path / "locked"
        locked.mkdir(mode=0)
        with pytest.raises(UserError, match="may not be read or searched"):
            expand_path(str(locked / "a.json"), "-o")


def test_every_expanduser_goes_through_expand_path():
    """The one expansion: no other module calls expanduser (it raises RuntimeError on `~nosuchuser`)."""
    pkg = ROOT / "python" / "sglang_kimi_eagle3"
    sites = [f"{p.relative_to(pkg)}:{i}" for p in pkg.rglob("*.py") if p.name != "validate.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\bexpanduser\(", line)]
    assert sites == []
