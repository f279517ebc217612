"""The series exported once per test session (the `exported` fixture): `DIR/tree/python/sglang` is the
installed SGLang with every PR applied, shared by every test file here."""

import pytest

from sglang_kimi_eagle3 import cli


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("series")
    assert cli.main(["upstream", "export", "--out", str(out)]) == 0
    return out
