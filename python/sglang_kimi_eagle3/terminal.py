"""Output that fits the terminal: one width for every command, its help and its tables.

The width is `COLUMNS` when set (as argparse and rich read it), else the terminal's own width, else 80
(no terminal: a pipe or a file). Every printer of the CLI goes through here:

  echo(text)           plain text, each line wrapped to the width with a hanging indent
  fill(text)           the same, as a string (help texts)
  shell(prefix, cmd)   a shell command wrapped with ` \\` continuations, so it still pastes
  console()            a rich Console of that width (markup, tables)
  print_table(con, t)  a rich table; when its columns cannot fit, printed as several tables, each
                       repeating the first (key) columns, instead of folding numbers mid-digit
  HelpFormatter        argparse's raw-description formatter, wrapping long description lines too

Errors stay one line (the CLI's rule: one clear line naming the flag and the fix), whatever the width.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import textwrap

DEFAULT_WIDTH = 80  # no COLUMNS and no terminal (rich and argparse do the same)
MIN_WIDTH = 40  # below this a table cannot show a row; narrower settings are raised to it


def width() -> int:
    """COLUMNS when it is a positive integer, else the terminal's width (stdout, then stderr), else 80."""
    raw = os.environ.get("COLUMNS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return max(MIN_WIDTH, int(raw))
    for fd in (1, 2):
        try:
            return max(MIN_WIDTH, os.get_terminal_size(fd).columns)
        except (OSError, ValueError):
            continue
    return DEFAULT_WIDTH


_columns = width  # (for HelpFormatter, whose argparse signature names a parameter `width`)
COMMANDS = ("sglang-kimi-eagle3 ", "python ", "python3 ", "$ ")  # lines that fill() wraps as shell commands


def _hang(line: str, w: int) -> int:
    """Where a wrapped line continues: under the description of an option or command line
    (`  --flag ARG   text`), after `usage: prog` ([first option), under a list item's text, else at the
    line's own indent."""
    lead = len(line) - len(line.lstrip())
    body = line[lead:]
    if body.startswith("usage: "):
        m = re.search(r" [\[<]", body)
        return lead + (m.start() + 1 if m and m.start() + 1 <= w // 2 else 7)
    m = re.search(r"\S( {2,})(?=\S)", body)
    if m and lead + m.end() <= w // 2:
        return lead + m.end()
    if body.startswith(("- ", "* ")):
        return lead + 2
    return lead


def fill(text: str, w: int | None = None, hang: int | None = None) -> str:
    """`text` with every line longer than the width wrapped (shorter lines, blank lines and indents kept);
    continuation lines start at column `hang` when given, else where _hang() finds."""
    w = w or width()
    out = []
    for line in text.splitlines():
        line = line.rstrip()
        if len(line) <= w:
            out.append(line)
            continue
        lead = len(line) - len(line.lstrip())
        body = line[lead:]
        if body.startswith(COMMANDS):  # an example command: its comment above it, then the command pasteable
            cmd, _, comment = body.partition("  # ")
            if comment:
                out.append(fill(" " * lead + "# " + comment.strip(), w))
            out.append(shell(" " * lead, cmd.strip(), w))
            continue
        if body.startswith("usage: "):  # an option group [--flag ARG] stays on one line, as argparse keeps it
            body = re.sub(r"\[[^\]]*\]", lambda m: m.group(0).replace(" ", "\0"), body)
        wrapped = textwrap.wrap(body, width=w, initial_indent=" " * lead,
                                subsequent_indent=" " * (_hang(line, w) if hang is None else hang),
                                break_on_hyphens=False, break_long_words=True)
        out += [x.replace("\0", " ") for x in wrapped] or [""]
    return "\n".join(out)


def echo(text: str = "", file=None) -> None:
    """print(), wrapped to the width."""
    print(fill(str(text)), file=file or sys.stdout)


def shell(prefix: str, command: str, w: int | None = None) -> str:
    """`prefix` + a shell command; when too wide, broken between a flag and the next one with ` \\`, so the
    printed lines still paste into a shell as one command."""
    w = w or width()
    if len(prefix) + len(command) <= w:
        return prefix + command
    try:
        words = shlex.split(command)
    except ValueError:
        return fill(prefix + command, w)
    groups: list[str] = []  # a flag with its value stays on one line
    for word in words:
        q = shlex.quote(word)
        if groups and not word.startswith("-") and groups[-1].startswith("-") and " " not in groups[-1]:
            groups[-1] += " " + q
        else:
            groups.append(q)
    lead = " " * (len(prefix) - len(prefix.lstrip()))
    cont = lead + "    "
    items = []  # a flag and its value apart only where together they do not fit on a continuation line
    for g in groups:
        items += g.split(" ", 1) if len(cont) + len(g) + 2 > w and " " in g else [g]
    lines, cur = [], prefix
    for g in items:
        if cur.strip() and len(cur) + len(g) + 2 > w:  # (a continuation line takes one item, however long)
            lines.append(cur.rstrip() + " \\")
            cur = cont
        cur += g + " "
    lines.append(cur.rstrip())
    return "\n".join(lines)


class _Rstripped:
    """The stream `get()` returns at each write (pytest's capsys swaps sys.stdout), without the spaces rich
    pads lines with (before a newline; style codes kept)."""

    _PAD = re.compile(r" +((?:\x1b\[[0-9;]*m)*)\n")

    def __init__(self, get):
        self._get = get

    def write(self, text: str) -> int:
        self._get().write(self._PAD.sub(r"\1\n", text))
        return len(text)

    def flush(self) -> None:
        self._get().flush()

    def isatty(self) -> bool:
        return self._get().isatty()

    def fileno(self) -> int:
        return self._get().fileno()


def console(stderr: bool = False, file=None):
    """A rich Console of this width on stdout (stderr, or `file`); no automatic highlighting (numbers keep
    the table's own style); no trailing spaces on its lines."""
    from rich.console import Console

    stream = _Rstripped(lambda: file or (sys.stderr if stderr else sys.stdout))
    return Console(width=width(), highlight=False, soft_wrap=False, file=stream)


def _sub_table(table, cols: list[int], title):
    from rich.table import Table

    sub = Table(title=title, title_justify=table.title_justify, box=table.box, show_lines=table.show_lines,
                show_header=table.show_header, show_edge=table.show_edge, expand=table.expand,
                padding=table.padding, header_style=table.header_style, title_style=table.title_style)
    for i in cols:
        c = table.columns[i]
        sub.add_column(c.header, justify=c.justify, overflow=c.overflow, no_wrap=c.no_wrap, style=c.style,
                       header_style=c.header_style, min_width=c.min_width, max_width=c.max_width, vertical=c.vertical)
    cells = [list(table.columns[i].cells) for i in cols]
    for r, row in enumerate(table.rows):
        sub.add_row(*(c[r] for c in cells), style=row.style, end_section=row.end_section)
    return sub


def _natural_width(con, table) -> int:
    """The width of the table with no cell wrapped (rich's maximum, unclamped by the console)."""
    from rich.measure import Measurement

    return Measurement.get(con, con.options.update_width(1 << 16), table).maximum


def print_table(con, table, keep: int = 1) -> None:
    """Print a rich table within the console's width. When it does not fit with every cell on one line, its
    columns are split over several tables that each do, each repeating the first `keep` (key) columns; the
    title goes on the first. (Rich alone would narrow the widest columns, cutting headers and numbers.)"""
    n = len(table.columns)
    if n <= keep + 1 or _natural_width(con, table) <= con.width:
        con.print(table)
        return
    groups, cur = [], list(range(keep))
    for i in range(keep, n):
        if len(cur) > keep and _natural_width(con, _sub_table(table, cur + [i], None)) > con.width:
            groups.append(cur)
            cur = list(range(keep))
        cur.append(i)
    groups.append(cur)
    for k, cols in enumerate(groups):
        title = table.title if k == 0 else None
        con.print(_sub_table(table, cols, title))


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse help at this module's width: options wrapped by argparse, the description and epilog kept as
    written (examples line by line) but with lines longer than the width wrapped."""

    def __init__(self, prog, indent_increment=2, max_help_position=30, width=None):
        super().__init__(prog, indent_increment, max_help_position, width or _columns())

    def _fill_text(self, text, width, indent):
        return fill(textwrap.indent(text, indent), self._width)
