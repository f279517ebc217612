"""`check`'s (and `status`'s) human output at 80 columns: compact by default (errors and warnings with their
fixes, a count of the info rows, the verdict), the full table with --verbose, --json unchanged; and the
README's transcript is what the CLI prints. One fresh process runs the real CLI four times (SGLang imported once)."""

import json
import re

import pytest
from helpers import ROOT, run_json

pytestmark = pytest.mark.slow

CODE = """
import contextlib, io, json, os
os.environ["COLUMNS"] = "80"
from sglang_kimi_eagle3.cli import main
out = {}
for name, argv in (("compact", ["check"]), ("verbose", ["check", "--verbose"]), ("json", ["check", "--json"]),
                   ("status", ["status"])):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv)
    out[name] = {"rc": rc, "out": buf.getvalue()}
print(json.dumps(out))
"""

JSON_KEYS = {"title", "gpu", "errors", "findings", "hooks", "kernel_table", "timing"}  # what machine readers read


@pytest.fixture(scope="module")
def runs():
    return run_json(CODE, timeout=600)


def test_every_line_fits_80_columns(runs):
    assert "Kernel launch table on this machine" in runs["status"]["out"]  # (`status` runs here too)
    for name in ("compact", "verbose", "status"):
        long = [ln for ln in runs[name]["out"].splitlines() if len(ln) > 80]
        assert not long, (name, long)
        assert not [ln for ln in runs[name]["out"].splitlines() if ln != ln.rstrip()], name  # no padding


def test_compact_shows_what_to_fix_and_counts_the_rest(runs):
    doc, out = json.loads(runs["json"]["out"]), runs["compact"]["out"]
    assert runs["compact"]["rc"] == runs["json"]["rc"] == 0
    flat = " ".join(out.split())
    acting = [f for f in doc["findings"] if f["severity"] in ("error", "warning")]
    info = [f for f in doc["findings"] if f["severity"] == "info"]
    assert acting and info
    for f in acting:  # each with what was found, what is expected and the fix, in full
        for field in ("found", "expected", "fix"):
            assert " ".join(f[field].split()) in flat, (f["check"], field)
    for f in info:  # the info rows' text is not printed, only counted and named
        assert " ".join(f["found"].split()) not in flat, f["check"]
    assert f"{len(info)} info row(s), nothing to fix:" in flat and "`check --verbose` shows them" in flat
    assert "┃" not in out and "│" not in out  # no table
    assert out.splitlines()[-1].startswith(f"0 error(s), {len(acting)} warning(s), {len(info)} info: ")
    assert "would start." in out.splitlines()[-1]
    assert len(out.splitlines()) < 60  # it was 139+ lines at 80 columns


def test_verbose_shows_the_full_table_and_every_hook(runs):
    doc, out = json.loads(runs["json"]["out"]), runs["verbose"]["out"]
    assert runs["verbose"]["rc"] == 0
    lines = out.splitlines()
    top = next(i for i, ln in enumerate(lines) if ln.startswith("┏"))
    header = " ".join(lines[top + 1:next(i for i, ln in enumerate(lines) if ln.startswith("┡"))])
    assert all(col in header for col in ("severity", "check", "found", "expected", "fix")), header
    flat = re.sub(r"[│┃\s]+", " ", out)  # the table's cells, read across wrapped lines
    for f in doc["findings"]:
        assert f["check"] in flat and f["severity"] in flat
    for h in doc["hooks"]:
        assert f"{h['name']}={h['state']}" in "".join(out.split())
    assert out.splitlines()[-1] == runs["compact"]["out"].splitlines()[-1]


def test_json_is_unchanged(runs):
    doc = json.loads(runs["json"]["out"])
    assert set(doc) == JSON_KEYS
    assert all(set(f) >= {"severity", "check", "found", "expected", "fix"} for f in doc["findings"])
    assert {f["severity"] for f in doc["findings"]} >= {"warning", "info"}  # info rows stay in the JSON


def _readme_transcript() -> tuple[str, list[str]]:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"```\n\$ \.venv/bin/sglang-kimi-eagle3 check +# exit code (\d) \(COLUMNS=80\)\n(.*?)```", text, re.S)
    assert m, "README: the `check` transcript block (COLUMNS=80) is missing"
    return m.group(1), m.group(2).splitlines()


def _without_hooks(lines: list[str]) -> list[str]:
    """The hook states depend on this machine's GPU (the auto gate): the README's are a CPU box's."""
    out, skipping = [], False
    for ln in lines:
        if ln.startswith("Plugin hooks: "):
            skipping = True
        elif skipping and ln.startswith("Kernel launch table"):
            skipping = False
        if not skipping:
            out.append(ln)
    return out


def test_readme_transcript_is_what_the_cli_prints(runs):
    """Regenerate with `python benchmark/make_doc_transcripts.py`."""
    rc, lines = _readme_transcript()
    assert int(rc) == runs["compact"]["rc"]
    assert _without_hooks(lines) == _without_hooks(runs["compact"]["out"].splitlines())
