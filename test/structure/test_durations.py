"""The suite's file order for pytest-xdist: longest first by the measured table (test/durations.py; unknown files by
their `slow` mark), each file's tests together and in their order; the table rebuilt from a junit XML."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import durations

ROOT = Path(__file__).resolve().parents[2]
# the suite's own conftest by its path (`import conftest` finds whichever conftest another file imported first)
_spec = importlib.util.spec_from_file_location("kimi_suite_conftest", ROOT / "test" / "conftest.py")
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)

XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="test.ops.test_a" name="t1" time="1.5"/>
<testcase classname="test.ops.test_a" name="t2" time="2.0"/>
<testcase classname="test.integration.hooks.test_b.TestX" name="t3" time="40"/>
<testcase classname="" name="odd" time="9"/>
</testsuite></testsuites>"""


def item(rel: str, name: str, slow: bool):
    return SimpleNamespace(path=ROOT / rel, name=name,
                           get_closest_marker=lambda m, slow=slow: object() if (m == "slow" and slow) else None)


def test_longest_files_first_each_files_tests_kept_together(monkeypatch):
    table = {"test/a/test_short_slow.py": 10.0, "test/a/test_long_slow.py": 300.0, "test/a/test_long_fast.py": 90.0,
             "test/a/test_short_fast.py": 1.0}
    monkeypatch.setattr(durations, "load", lambda path=None: table)
    items = [item("test/a/test_short_fast.py", "f1", False), item("test/a/test_short_slow.py", "s1", True),
             item("test/a/test_short_slow.py", "s2", True), item("test/a/test_long_fast.py", "l1", False),
             item("test/a/test_unknown_slow.py", "u1", True), item("test/a/test_long_slow.py", "L1", True),
             item("test/a/test_long_slow.py", "L2", True)]
    conftest.pytest_collection_modifyitems(SimpleNamespace(workerinput={}), items)
    # 300 s, 90 s (not marked slow, but measured long), an unknown slow file (DEFAULT_S 60), 10 s, 1 s
    assert [i.name for i in items] == ["L1", "L2", "l1", "u1", "s1", "s2", "f1"]


def test_outside_a_worker_the_order_is_untouched():
    items = [item("test/a/test_x.py", "x", False), item("test/a/test_y.py", "y", True)]
    conftest.pytest_collection_modifyitems(SimpleNamespace(), items)
    assert [i.name for i in items] == ["x", "y"]


def test_table_from_a_junit_xml_is_merged_atomically(tmp_path):
    xml = tmp_path / "suite.xml"
    xml.write_text(XML)
    table = tmp_path / "durations.json"
    table.write_text(json.dumps({"seconds": {"test/ops/test_a.py": 99.0, "test/other/test_c.py": 7.0}}))
    merged = durations.merge(xml, "a test run", table)
    assert merged == {"test/ops/test_a.py": 3.5, "test/integration/hooks/test_b.py": 40.0, "test/other/test_c.py": 7.0}
    assert durations.load(table) == merged and "a test run" in json.loads(table.read_text())["source"]
    assert not list(tmp_path.glob(".durations.*"))  # no temp file left


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "not.xml"
    bad.write_text("not xml at all")
    for args in ([str(tmp_path / "missing.xml"), "--note", "x"], [str(bad), "--note", "x"]):
        cp = subprocess.run([sys.executable, str(ROOT / "test" / "durations.py"), *args], capture_output=True, text=True,
                            cwd=tmp_path)
        assert cp.returncode == 2 and len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def test_the_shipped_table_names_files_that_exist():
    table = durations.load()
    assert len(table) > 50
    missing = [f for f in table if not (ROOT / f).is_file()]
    assert not missing, f"durations.json names files that no longer exist: {missing[:5]} (rebuild it: test/durations.py)"
