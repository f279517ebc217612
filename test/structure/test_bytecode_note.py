"""test/bytecode_note.py: its line only where the variable is set and SGLang's byte-code is missing."""

import importlib.util

import bytecode_note


def _package(tmp_path, compiled: bool) -> str:
    init = tmp_path / "site" / "sglang" / "__init__.py"
    init.parent.mkdir(parents=True)
    init.write_text("")
    if compiled:
        import py_compile

        py_compile.compile(str(init), cfile=importlib.util.cache_from_source(str(init)))
    return str(init)


def test_the_note_names_the_variable_and_the_compileall_of_the_site(tmp_path):
    origin = _package(tmp_path, compiled=False)
    line = bytecode_note.note({"PYTHONDONTWRITEBYTECODE": "1"}, origin)
    assert line and "PYTHONDONTWRITEBYTECODE" in line and f"compileall -q {tmp_path / 'site'}" in line, line


def test_no_note_without_the_variable_or_where_the_byte_code_exists(tmp_path):
    assert bytecode_note.note({}, _package(tmp_path / "a", compiled=False)) is None
    assert bytecode_note.note({"PYTHONDONTWRITEBYTECODE": "1"}, _package(tmp_path / "b", compiled=True)) is None
