"""The `sglang-kimi-eagle3` command on what a careless or hostile operator hands it: one exit-2 line naming the
file, field or flag (never exit 3 or a traceback), and never a user's file replaced that the command did not write.
In process, no SGLang import."""

from __future__ import annotations

import json

from sglang_kimi_eagle3.cli import main as cli_main

STATUS = {"plugin": "0", "pid": 1, "time": "t", "table_in_effect": "auto",
          "hooks": [{"name": "draft_topk1", "status": "active", "sites": {"bound": ["a"]}, "call_sites": ["a"],
                     "counters": {"ours": {"b": 3}, "sglang": {"r": {"b": 1}}}}]}


def test_status_running_reads_null_sites_and_counters_as_absent(tmp_path, capsys):
    for field in ("sites", "counters"):
        f = tmp_path / f"port-{field}.json"
        f.write_text(json.dumps({**STATUS, "hooks": [{**STATUS["hooks"][0], field: None}]}))
        assert cli_main(["status", "--running", str(f)]) == 0, capsys.readouterr().err
        assert "draft_topk1" in capsys.readouterr().out
