"""Another SGLang release than the tested one: said once per process, in the log and the headers; nothing refused."""

import json

import pytest
from helpers import run_python

from sglang_kimi_eagle3.base import TESTED_SGLANG
from sglang_kimi_eagle3.integration.hooks.runtime_status import format_snapshot
from sglang_kimi_eagle3.versions import installed_sglang, version_note


def test_the_tested_release_has_no_note_and_is_what_is_installed_here():
    assert installed_sglang() == TESTED_SGLANG == "0.5.23"
    assert version_note("0.5.23") == ""
    note = version_note("0.5.24")
    assert "sglang 0.5.24 is not the release this plugin is tested with (0.5.23)" in note and "nothing is refused" in note


def test_the_status_file_header_carries_the_note():
    snap = {"pid": 1, "time": "t", "table_in_effect": "x", "hooks": [], "sglang": "0.5.24", "tested_sglang": "0.5.23"}
    assert "note: sglang 0.5.24 is not the release" in format_snapshot(snap)
    assert "note" not in format_snapshot(dict(snap, sglang="0.5.23"))


@pytest.mark.slow
def test_another_release_is_logged_once_per_process_and_every_hook_still_installs():
    cp = run_python('''
        import json, warnings
        warnings.filterwarnings("ignore")
        from sglang_kimi_eagle3 import versions
        versions.installed_sglang = lambda: "0.5.24"
        from sglang.srt.plugins import load_plugins
        load_plugins()
        from sglang_kimi_eagle3.integration import plugin
        plugin.register()  # a second load in the same process says nothing new
        from sglang_kimi_eagle3.status import hookstatus
        print(json.dumps({r.name: r.state for r in hookstatus.rows()}))
    ''')
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert cp.stderr.count("sglang 0.5.24 is not the release this plugin is tested with (0.5.23)") == 1, cp.stderr[-3000:]
    states = json.loads(cp.stdout.strip().splitlines()[-1])
    assert states["launch_step"] in ("registered", "applied") and "failed" not in states.values(), states
