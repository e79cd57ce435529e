"""Find the ```prd fenced block in Markdown (an LLM answer or a comment someone edited).

Fences follow CommonMark: up to three spaces of indentation, three or more backticks
or tildes, an info string (a backtick fence's info string has no backticks), and a
closing fence of the same character that is at least as long, followed only by
spaces. A fence left open runs to the end of the document, as GitHub shows it.
Other fenced blocks are skipped whole, so a ```prd line inside them is not a fence.
"""

from __future__ import annotations

import re

_OPEN = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_CLOSE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*$")
PRD_INFO_WORD = "prd"


def _opening(line: str) -> tuple[int, str, str] | None:
    """(indent, fence, first info word) if the line opens a fenced block."""
    match = _OPEN.match(line)
    if not match:
        return None
    fence, info = match.group("fence"), match.group("info").strip()
    if fence[0] == "`" and "`" in info:
        return None
    words = info.split()
    return len(match.group("indent")), fence, (words[0] if words else "")


def _closes(line: str, fence: str) -> bool:
    match = _CLOSE.match(line)
    if match is None:
        return False
    found = match.group("fence")
    return found[0] == fence[0] and len(found) >= len(fence)


def _dedent(line: str, indent: int) -> str:
    strip = len(line) - len(line.lstrip(" "))
    return line[min(strip, indent) :]


def extract_prd_block(markdown: str) -> str | None:
    """The inner text of the first fenced block whose info string starts with `prd`.

    Each content line ends with a newline; None if there is no such block.
    """
    lines = re.split(r"\r\n|\r|\n", markdown)
    index = 0
    while index < len(lines):
        opened = _opening(lines[index])
        index += 1
        if opened is None:
            continue
        indent, fence, word = opened
        body: list[str] = []
        while index < len(lines) and not _closes(lines[index], fence):
            body.append(_dedent(lines[index], indent))
            index += 1
        closed = index < len(lines)
        index += 1
        if word.lower() == PRD_INFO_WORD:
            if not closed and body and body[-1] == "":
                body.pop()  # the split's empty tail after a final newline
            return "".join(line + "\n" for line in body)
    return None
