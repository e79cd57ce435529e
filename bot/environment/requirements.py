"""pip's requirements files as pip reads them. Pure.

- Bytes to text (`decode`): a byte-order mark names the encoding and is dropped, else a
  `# -*- coding: … -*-` comment in the first two lines, else UTF-8 (pip's `auto_decode`; pip
  takes the locale's encoding last, UTF-8 on every runner we know).
- Logical lines (`logical_lines`): a line ending in `\\` continues on the next, comments go
  (`#` at the start or after whitespace), blank lines are dropped.
- A requirement line's requirement (`requirement_of`): what comes before its first option
  (`pyyaml==5.3 --hash=sha256:…` is `pyyaml==5.3`).
- Included files (`includes`): `-r`/`--requirement` and `-c`/`--constraint`, resolved against
  the including file's folder as pip does; one outside the repository (an absolute path, a
  path above its root, a URL) has no repository path.
"""

from __future__ import annotations

import codecs
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass

_BOMS = (
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)
_CODING = re.compile(rb"coding[:=]\s*([-\w.]+)")
_COMMENT = re.compile(r"(^|\s+)#.*$")
_INCLUDE_FLAGS = {"-r": "-r", "--requirement": "-r", "-c": "-c", "--constraint": "-c"}


@dataclass(frozen=True)
class Include:
    """A file a requirements file includes: as written, and its repository path (None: outside)."""

    flag: str
    """`-r` (requirements) or `-c` (constraints)."""
    written: str
    path: str | None


def decode(data: bytes) -> str:
    """A requirements file's text, decoded as pip decodes it (undecodable bytes replaced)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, errors="replace")
    for line in data.split(b"\n")[:2]:
        found = _CODING.search(line) if line[:1] == b"#" else None
        if found is not None:
            try:
                return data.decode(found.group(1).decode("ascii"), errors="replace")
            except LookupError:
                break  # an encoding Python does not know: pip fails on it; read as UTF-8
    return data.decode("utf-8", errors="replace")


def logical_lines(text: str) -> Iterator[str]:
    """The lines pip parses: continuations joined, comments and blank lines gone."""
    pending: list[str] = []
    for line in text.splitlines():
        if line.endswith("\\") and not _COMMENT.match(line):
            pending.append(line.strip("\\"))
            continue
        if _COMMENT.match(line):
            line = " " + line  # a comment ends a continuation and is dropped with it
        joined = _COMMENT.sub("", "".join([*pending, line])).strip()
        pending = []
        if joined:
            yield joined
    if pending and (joined := _COMMENT.sub("", "".join(pending)).strip()):
        yield joined


def requirement_of(line: str) -> str:
    """The requirement of a logical line: its words before the first option."""
    words: list[str] = []
    for word in line.split():
        if word.startswith("-"):
            break
        words.append(word)
    return " ".join(words)


def includes(path: str, text: str) -> list[Include]:
    """The files the requirements file at `path` (a repository path) includes, in order."""
    found: list[Include] = []
    for line in logical_lines(text):
        if not line.startswith("-"):
            continue  # a requirement line's options never include a file (pip)
        words = line.split()
        for i, word in enumerate(words):
            flag, value = _include(word, words[i + 1] if i + 1 < len(words) else "")
            if flag and value:
                found.append(Include(flag, value, _inside(path, value)))
    return found


def _include(word: str, following: str) -> tuple[str, str]:
    """The include flag `word` starts and its value (attached, after `=`, or the next word)."""
    if word in _INCLUDE_FLAGS:
        return _INCLUDE_FLAGS[word], following
    for long in ("--requirement=", "--constraint="):
        if word.startswith(long):
            return _INCLUDE_FLAGS[long[:-1]], word[len(long) :]
    if word[:2] in ("-r", "-c") and len(word) > 2 and not word.startswith("--"):
        return word[:2], word[2:]
    return "", ""


def _inside(path: str, written: str) -> str | None:
    """`written` (relative to `path`'s folder) as a repository path; None when it is outside."""
    if "://" in written or written.startswith(("/", "~", "\\")) or re.match(r"^[A-Za-z]:", written):
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), written))
    if joined == ".." or joined.startswith("../") or joined == ".":
        return None
    return joined
