"""Every relative link in the README and docs/ names a file that exists, and every `#anchor` a heading of that file
(GitHub's slugs: lower case, punctuation dropped, spaces to hyphens, a repeated heading numbered -1, -2, ...)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _text(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks (a transcript's brackets are no links)."""
    out, fenced = [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def slug(heading: str) -> str:
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)  # GitHub keeps letters, digits, underscores, hyphens and spaces
    return s.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _text(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links():
    for doc in DOCS:
        for no, line in enumerate(_text(doc), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                    continue
                yield doc, no, target


def test_slugs_are_githubs():
    assert slug("The controller (`planner/adaptive_control.py`, pure)") == "the-controller-planneradaptive_controlpy-pure"
    assert slug("Where the off-state's cost goes (2026-12-03, Triton MoE: sources T, U, W)") == (
        "where-the-off-states-cost-goes-2026-12-03-triton-moe-sources-t-u-w")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(doc):
    bad = []
    for src, no, target in links():
        if src != doc:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (src.parent / file_part).resolve() if file_part else src
        if not dest.exists():
            bad.append(f"{src.name} (text line {no}): {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{src.name} (text line {no}): {target}: no heading with that anchor in {dest.name}")
    assert not bad, "\n".join(bad)
