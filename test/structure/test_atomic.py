"""The one writer (atomic.write_atomic): whole files only, and the mode a plain open() would give."""

import os
import stat

import pytest

from sglang_kimi_eagle3.atomic import write_atomic


@pytest.fixture
def umask():
    def set_(mask):
        old = os.umask(mask)
        restore.append(old)

    restore = []
    yield set_
    if restore:
        os.umask(restore[0])


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_the_file_mode_follows_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    p = write_atomic(tmp_path / "t.json", "{}\n")
    assert stat.S_IMODE(p.stat().st_mode) == mode  # not the 0600 of a temp file
    assert p.read_text() == "{}\n" and os.listdir(tmp_path) == ["t.json"]


def test_a_failed_check_keeps_the_old_file_and_no_temp(tmp_path):
    p = write_atomic(tmp_path / "t.json", "old")

    def refuse(tmp):
        assert open(tmp).read() == "new"  # the check sees the complete new file
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError):
        write_atomic(p, "new", check=refuse)
    assert p.read_text() == "old" and os.listdir(tmp_path) == ["t.json"]


def test_mkdir_creates_the_folder(tmp_path):
    assert write_atomic(tmp_path / "a" / "b" / "t", b"x", mkdir=True).read_bytes() == b"x"
