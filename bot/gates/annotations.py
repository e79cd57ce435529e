"""Check-run annotations parsed from the text output of common quality tools.

Each parser reads a tool's plain output (ANSI colours are ignored) and returns
annotations whose paths are relative to the repository: the `root` prefix and
leading ``./`` are removed, and a path still absolute or above the root afterwards
is dropped, because GitHub can only annotate files of the repository.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Level = Literal["notice", "warning", "failure"]

TITLE_LIMIT = 255
MESSAGE_LIMIT_BYTES = 64 * 1024
_ELLIPSIS = "…"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_PATH = r"(?P<path>[^\s:][^:]*?)"


class Annotation(BaseModel):
    """One GitHub check-run annotation: a message attached to lines of a file."""

    model_config = ConfigDict(frozen=True)

    path: str = Field(min_length=1, description="Repository-relative path of the annotated file.")
    start_line: int = Field(ge=1, description="First annotated line, 1-based.")
    end_line: int = Field(ge=1, description="Last annotated line, 1-based, not before start_line.")
    annotation_level: Level = Field(description="How serious the problem is.")
    message: str = Field(description="What is wrong, shown under the annotated lines.")
    title: str | None = Field(default=None, description="Short heading, e.g. the tool and rule.")
    start_column: int | None = Field(default=None, ge=1, description="First column, 1-based.")
    end_column: int | None = Field(default=None, ge=1, description="Last column, 1-based.")

    @model_validator(mode="after")
    def _lines_in_order(self) -> Annotation:
        if self.end_line < self.start_line:
            raise ValueError("end_line must not come before start_line")
        return self

    def as_github(self) -> dict[str, Any]:
        """The annotation as GitHub's API takes it: no None fields, capped title and message.

        GitHub accepts columns only for a single-line annotation, so they are dropped otherwise.
        """
        data: dict[str, Any] = {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "annotation_level": self.annotation_level,
            "message": _cap_bytes(self.message, MESSAGE_LIMIT_BYTES),
        }
        if self.title is not None:
            data["title"] = (
                self.title if len(self.title) <= TITLE_LIMIT else self.title[: TITLE_LIMIT - 1] + "…"
            )
        if self.start_line == self.end_line:
            if self.start_column is not None:
                data["start_column"] = self.start_column
            if self.end_column is not None:
                data["end_column"] = self.end_column
        return data


def _cap_bytes(text: str, limit: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    room = limit - len(_ELLIPSIS.encode("utf-8"))
    return encoded[:room].decode("utf-8", errors="ignore") + _ELLIPSIS


def strip_ansi(text: str) -> str:
    """`text` without ANSI colour and cursor escape sequences."""
    return _ANSI.sub("", text)


def relative_path(path: str, root: str | None = None) -> str | None:
    """`path` relative to the repository root, or None when it lies outside the repository."""
    path = path.strip()
    if root:
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            path = path[len(prefix) :]
    while path.startswith("./"):
        path = path[2:]
    if not path or path.startswith(("/", "../")) or path == "..":
        return None
    return path


def _lines(output: str) -> list[str]:
    return [line.rstrip() for line in strip_ansi(output).splitlines()]


def _annotation(
    path: str,
    *,
    root: str | None,
    line: int,
    level: Level,
    message: str,
    title: str | None,
    column: int | None = None,
    end_line: int | None = None,
    end_column: int | None = None,
) -> Annotation | None:
    rel = relative_path(path, root)
    if rel is None:
        return None
    start = max(line, 1)
    return Annotation(
        path=rel,
        start_line=start,
        end_line=max(end_line or start, start),
        annotation_level=level,
        message=message.strip() or "(no message)",
        title=title,
        start_column=column if column else None,
        end_column=end_column if end_column else None,
    )


# --- ruff -------------------------------------------------------------------------

_RUFF_CODE = r"(?P<code>[A-Z]+[0-9]+|invalid-syntax|SyntaxError):? (?:\[\*\] )?(?P<msg>.+)"
_RUFF_CONCISE = re.compile(rf"^{_PATH}:(?P<line>\d+):(?P<col>\d+): {_RUFF_CODE}$")
_RUFF_HEADER = re.compile(rf"^{_RUFF_CODE}$")
_RUFF_ARROW = re.compile(r"^\s*--> (?P<path>.+?):(?P<line>\d+):(?P<col>\d+)$")


def parse_ruff(output: str, *, root: str | None = None) -> list[Annotation]:
    """Ruff's concise (`path:line:col: CODE message`) and full (header then `-->`) formats."""
    found: list[Annotation | None] = []
    previous = ""
    for line in _lines(output):
        concise = _RUFF_CONCISE.match(line)
        arrow = _RUFF_ARROW.match(line)
        header = _RUFF_HEADER.match(previous)
        if concise:
            where, what = concise, concise
        elif arrow and header:
            where, what = arrow, header
        else:
            previous = line
            continue
        found.append(
            _annotation(
                where["path"],
                root=root,
                line=int(where["line"]),
                column=int(where["col"]),
                level="failure",
                message=what["msg"],
                title=f"ruff {what['code']}",
            )
        )
        previous = line
    return [a for a in found if a]


# --- mypy -------------------------------------------------------------------------

_MYPY = re.compile(
    rf"^{_PATH}:(?P<line>\d+)(?::(?P<col>\d+))?(?::(?P<eline>\d+):(?P<ecol>\d+))?: "
    r"(?P<sev>error|warning|note): (?P<msg>.*)$"
)
_MYPY_CODE = re.compile(r"^(?P<msg>.*?)\s+\[(?P<code>[a-z0-9-]+)\]$", re.DOTALL)
_MYPY_LEVELS: dict[str, Level] = {"error": "failure", "warning": "warning", "note": "notice"}


def _mypy_wrapped(lines: list[str], start: int) -> tuple[str, int]:
    """With `--pretty`, a long message continues on unindented lines up to its `[code]`."""
    for end in range(start, min(start + 5, len(lines))):
        line = lines[end]
        if not line or line[0].isspace() or _MYPY.match(line):
            break
        if _MYPY_CODE.match(line):
            return " " + " ".join(lines[start : end + 1]), end + 1
    return "", start


def parse_mypy(output: str, *, root: str | None = None) -> list[Annotation]:
    """mypy's `path:line[:col[:end_line:end_col]]: error|note: message  [code]` lines."""
    lines = _lines(output)
    found: list[Annotation | None] = []
    index = 0
    while index < len(lines):
        match = _MYPY.match(lines[index])
        index += 1
        if not match:
            continue
        message = match["msg"]
        if match["sev"] != "note" and not _MYPY_CODE.match(message):
            more, index = _mypy_wrapped(lines, index)
            message += more
        coded = _MYPY_CODE.match(message)
        found.append(
            _annotation(
                match["path"],
                root=root,
                line=int(match["line"]),
                column=int(match["col"]) if match["col"] else None,
                end_line=int(match["eline"]) if match["eline"] else None,
                end_column=int(match["ecol"]) if match["ecol"] else None,
                level=_MYPY_LEVELS[match["sev"]],
                message=coded["msg"] if coded else message,
                title=f"mypy [{coded['code']}]" if coded else "mypy",
            )
        )
    return [a for a in found if a]


# --- pytest -----------------------------------------------------------------------

_PYTEST_SUMMARY = re.compile(
    r"^(?P<outcome>FAILED|ERROR) (?P<nodeid>\S.*?\.py(?:::.+?)?)(?: - (?P<msg>.*))?$"
)
_PYTEST_SECTION = re.compile(r"^_{3,} (?P<title>.+?) _{3,}$")
_PYTEST_FRAMES = (
    re.compile(r"^(?P<path>[^\s:][^:]*\.py):(?P<line>\d+)(?::(?: |$)|$)"),  # long/short traceback
    re.compile(r'File "(?P<path>[^"]+\.py)", line (?P<line>\d+)'),  # SyntaxError while collecting
    re.compile(r"^file (?P<path>\S.*\.py), line (?P<line>\d+)$"),  # fixture not found
)


def _pytest_sections(lines: list[str]) -> Iterator[tuple[str, list[str]]]:
    """(title, body) of each `___ title ___` block of the FAILURES and ERRORS reports."""
    title: str | None = None
    body: list[str] = []
    for line in lines:
        header = _PYTEST_SECTION.match(line)
        if header or line.startswith("====="):
            if title is not None:
                yield title, body
            title, body = (header["title"], []) if header else (None, [])
        elif title is not None:
            body.append(line)
    if title is not None:
        yield title, body


def parse_pytest(output: str, *, root: str | None = None) -> list[Annotation]:
    """pytest's short summary (`FAILED path::test - msg`, `ERROR path - msg`) on the test file.

    The line is the last traceback frame in the test file (`path:line: ...`) when the
    report is in the output, else 1; the message is the report's `E` lines when present.
    """
    lines = _lines(output)
    sections = list(_pytest_sections(lines))
    found: list[Annotation | None] = []
    for line in lines:
        match = _PYTEST_SUMMARY.match(line)
        if not match:
            continue
        path, _, rest = match["nodeid"].partition("::")
        name = rest.replace("::", ".")
        if match["outcome"] == "FAILED":
            titles, title = {name}, f"{name or path} failed"
        elif name:
            titles, title = {f"ERROR at setup of {name}", f"ERROR at teardown of {name}"}, f"{name} errored"
        else:
            titles, title = {f"ERROR collecting {path}"}, f"{path} could not be collected"
        number, details = _pytest_location(sections, titles=titles, path=path, root=root)
        found.append(
            _annotation(
                path,
                root=root,
                line=number,
                level="failure",
                message=details or match["msg"] or title,
                title=title,
            )
        )
    return [a for a in found if a]


def _pytest_location(
    sections: list[tuple[str, list[str]]], *, titles: set[str], path: str, root: str | None
) -> tuple[int, str]:
    """The last frame's line in `path` and the `E` lines of the first matching report."""
    wanted = relative_path(path, root)
    for title, body in sections:
        if title not in titles:
            continue
        frames = [m for line in body for pattern in _PYTEST_FRAMES if (m := pattern.search(line))]
        lines = [int(m["line"]) for m in frames if relative_path(m["path"], root) == wanted]
        if lines:
            errors = [line[1:].strip() for line in body if line.startswith("E ")]
            return lines[-1], "\n".join(e for e in errors if e)
    return 1, ""


# --- eslint -----------------------------------------------------------------------

_ESLINT_PROBLEM = re.compile(
    r"^\s+(?P<line>\d+):(?P<col>\d+)\s+(?P<sev>error|warning)\s+(?P<msg>.+?)"
    r"(?:\s{2,}(?P<rule>[@\w][\w@/.-]*))?$"
)
_ESLINT_FILE = re.compile(r"^(?P<path>[^\s✖].*\.[A-Za-z0-9]+)$")
_ESLINT_UNIX = re.compile(
    rf"^{_PATH}:(?P<line>\d+):(?P<col>\d+): (?P<msg>.*?) \[(?P<sev>Error|Warning)(?:/(?P<rule>[^\]]+))?\]$"
)


def parse_eslint(output: str, *, root: str | None = None) -> list[Annotation]:
    """ESLint's default `stylish` format and `--format unix` (`path:line:col: msg [Error/rule]`)."""
    found: list[Annotation | None] = []
    current: str | None = None
    for line in _lines(output):
        problem = _ESLINT_PROBLEM.match(line) if current else None
        unix = _ESLINT_UNIX.match(line)
        if problem and current:
            path, match = current, problem
        elif unix:
            path, match = unix["path"], unix
        else:
            file_line = _ESLINT_FILE.match(line)
            current = file_line["path"] if file_line else None
            continue
        rule = match["rule"]
        found.append(
            _annotation(
                path,
                root=root,
                line=int(match["line"]),
                column=int(match["col"]) or None,
                level="failure" if match["sev"].lower() == "error" else "warning",
                message=match["msg"],
                title=f"eslint {rule}" if rule else "eslint",
            )
        )
    return [a for a in found if a]


# --- tsc --------------------------------------------------------------------------

_TSC_TAIL = r"(?P<sev>error|warning|message) (?P<code>TS\d+): (?P<msg>.*)$"
_TSC_PLAIN = re.compile(rf"^(?P<path>\S.*?)\((?P<line>\d+),(?P<col>\d+)\): {_TSC_TAIL}")
_TSC_PRETTY = re.compile(rf"^{_PATH}:(?P<line>\d+):(?P<col>\d+) - {_TSC_TAIL}")


def parse_tsc(output: str, *, root: str | None = None) -> list[Annotation]:
    """tsc's `path(line,col): error TSnnnn: msg` and pretty `path:line:col - error TSnnnn: msg`.

    Indented lines right after a diagnostic (a chained explanation) join its message.
    """
    lines = _lines(output)
    found: list[Annotation | None] = []
    for index, line in enumerate(lines):
        match = _TSC_PLAIN.match(line) or _TSC_PRETTY.match(line)
        if not match:
            continue
        message = [match["msg"]]
        for following in lines[index + 1 :]:
            if not following or not following[0].isspace():
                break
            message.append(following.strip())
        found.append(
            _annotation(
                match["path"],
                root=root,
                line=int(match["line"]),
                column=int(match["col"]),
                level="failure" if match["sev"] == "error" else "warning",
                message="\n".join(message),
                title=f"tsc {match['code']}",
            )
        )
    return [a for a in found if a]


PARSERS: dict[str, Callable[..., list[Annotation]]] = {
    "ruff": parse_ruff,
    "mypy": parse_mypy,
    "pytest": parse_pytest,
    "eslint": parse_eslint,
    "tsc": parse_tsc,
}


def parse_any(output: str, *, root: str | None = None) -> list[Annotation]:
    """Every parser's annotations, in parser order, without repeats of a place and message."""
    seen: set[tuple[str, int, int | None, str]] = set()
    result: list[Annotation] = []
    for parser in PARSERS.values():
        for annotation in parser(output, root=root):
            key = (annotation.path, annotation.start_line, annotation.start_column, annotation.message)
            if key not in seen:
                seen.add(key)
                result.append(annotation)
    return result
