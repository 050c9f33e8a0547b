"""Every relative link in README.md and docs/*.md leads somewhere: the file exists, and an
anchor (``FILE.md#heading``) is a heading of that page, spelt as GitHub makes it (lower case,
punctuation dropped, spaces as hyphens, a repeated heading numbered -1, -2, ...). A newcomer
who follows the README into the docs should never meet a dead link (read as text: no Qt)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target); the target ends at the first space or closing bracket.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"#{1,6}\s+(.*?)\s*#*\s*$")


def _outside_fences(text: str) -> list[str]:
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup and punctuation dropped, lower case, spaces as hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)  # code spans keep their text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its words
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in _outside_fences(page.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def relative_links(page: Path) -> list[str]:
    return [
        target
        for line in _outside_fences(page.read_text(encoding="utf-8"))
        for target in LINK.findall(line)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto: are not ours to check
    ]


def _dead(page: Path, target: str) -> str | None:
    path, _, fragment = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
        return "no such file"
    if fragment and file.suffix == ".md" and fragment not in anchors(file):
        return "no such heading"
    return None


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    dead = [
        f"{page.relative_to(ROOT)}: ({target}) {why}"
        for page in PAGES
        for target in relative_links(page)
        if (why := _dead(page, target)) is not None
    ]
    assert dead == []


def test_the_checker_sees_links_anchors_and_dead_ends(tmp_path: Path) -> None:
    """The rule is checked against a page made for it, so a checker that saw nothing cannot pass."""
    page = tmp_path / "page.md"
    page.write_text(
        "# The `estimate()` call — one plan\n\n## Twice\n\n## Twice\n\n"
        "[ok](#the-estimate-call--one-plan) [second](#twice-1) [gone](#nowhere) [file](page.md) "
        "[missing](other.md) [web](https://example.com/x.md)\n```\n[fenced](fenced.md)\n```\n",
        encoding="utf-8",
    )
    assert anchors(page) == {"the-estimate-call--one-plan", "twice", "twice-1"}
    links = relative_links(page)
    assert links == ["#the-estimate-call--one-plan", "#twice-1", "#nowhere", "page.md", "other.md"]
    assert [_dead(page, t) for t in links] == [None, None, "no such heading", None, "no such file"]


def test_the_pages_have_links_to_check() -> None:
    """README.md links into docs/ (the newcomer's path): at least the architecture page."""
    assert "docs/ARCHITECTURE.md" in relative_links(ROOT / "README.md")
