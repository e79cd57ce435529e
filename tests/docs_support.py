"""Reading the docs as GitHub renders them: headings and their anchors, links, code.

Shared by the tests that keep README.md and docs/ true (tests/test_docs_*.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[1]


def pages() -> list[Path]:
    """README.md, docs/*.md and the Action's README: every page a reader follows links in."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "action" / "README.md"]


def name(path: Path) -> str:
    """A page's path from the repository's root, for messages."""
    return str(path.relative_to(ROOT))


@cache
def tokens(path: Path) -> list[Token]:
    """The page's tokens as CommonMark with GitHub's tables."""
    return MarkdownIt("commonmark").enable("table").parse(path.read_text(encoding="utf-8"))


def inline_text(token: Token) -> str:
    """The text of an inline token as GitHub shows it (code spans' content, no markup)."""
    return "".join(
        child.content
        for child in token.children or []
        if child.type in ("text", "code_inline", "html_inline")
    )


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (github-slugger): lower case, everything but letters,
    digits, `_`, `-` and spaces dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    line: int


def headings(path: Path) -> list[Heading]:
    """The page's headings in order."""
    found, stream = [], tokens(path)
    for i, token in enumerate(stream):
        if token.type == "heading_open":
            line = token.map[0] + 1 if token.map else 0
            found.append(Heading(int(token.tag[1]), inline_text(stream[i + 1]), line))
    return found


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every `#anchor` the page has: its headings' slugs (repeats get -1, -2, …) and HTML ids."""
    seen: dict[str, int] = {}
    found = set()
    for heading in headings(path):
        base = slug(heading.text)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    text = path.read_text(encoding="utf-8")
    found |= set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return frozenset(found)


@dataclass(frozen=True)
class Link:
    href: str
    line: int


def links(path: Path) -> Iterator[Link]:
    """Every link and image target on the page (inline HTML aside)."""
    for token in tokens(path):
        line = token.map[0] + 1 if token.map else 0
        for child in token.children or []:
            if child.type == "link_open":
                yield Link(str(child.attrs.get("href", "")), line)
            elif child.type == "image":
                yield Link(str(child.attrs.get("src", "")), line)


@dataclass(frozen=True)
class Code:
    info: str
    text: str
    line: int
    heading: str
    """The text of the nearest heading above it."""
    fenced: bool


def code(path: Path) -> Iterator[Code]:
    """Every fenced block and every code span of the page, with the heading it sits under."""
    stream, heading = tokens(path), ""
    for i, token in enumerate(stream):
        line = token.map[0] + 1 if token.map else 0
        if token.type == "heading_open":
            heading = inline_text(stream[i + 1])
        elif token.type in ("fence", "code_block"):
            yield Code(token.info.strip(), token.content, line, heading, True)
        elif token.type == "inline":
            for child in token.children or []:
                if child.type == "code_inline":
                    yield Code("", child.content, line, heading, False)
