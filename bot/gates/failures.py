"""What a failing gate's output says, read so that two runs can be compared. Pure.

Judging a story against the base (`gates.baseline`) needs three readings of a gate's output:

- **its failures, item by item** (`failures`), kept as digests:
  - tests by id: pytest's `FAILED`/`ERROR` summary lines (`tests/test_x.py::test_y`), jest's
    and vitest's `●`/`✕`/`FAIL` lines (a suite that fails to run is a failure of its file),
    TAP's `not ok` lines (node's test runner), go test's `--- FAIL: TestX` (with its package,
    without its timing) and `FAIL pkg [build failed]`, cargo test's `test foo::bar ... FAILED`
    (with the test binary it ran in);
  - type, lint and compile errors by file, code and message, counted (mypy, ruff, tsc, eslint,
    rustc and clippy's `error[E0308]: …` with its `--> file`, go's `file.go:3:2: message`): a
    line number moves whenever a story edits above it, so it is not part of the identity, but a
    second error of the same kind in the same file counts as new;
- **the tool's own counts** (`counts`): `3 failed` of pytest, jest's failed suites and tests,
  mocha's `1 failing`, cargo's `test result:` lines, TAP's `# fail`, mypy's, ruff's, tsc's and
  eslint's error totals;
- **the output as a whole** (`fingerprint`), without what changes from run to run on its own
  (timings, the worktree's path, hashes): two runs that print the same thing failed the same way.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterator

from bot.gates.annotations import (
    Annotation,
    parse_eslint,
    parse_mypy,
    parse_ruff,
    parse_tsc,
    relative_path,
    strip_ansi,
)

Parser = Callable[..., list[Annotation]]
_TOOLS: tuple[Parser, ...] = (parse_mypy, parse_ruff, parse_tsc, parse_eslint)

MAX_FAILURES = 3000
"""Failures kept per gate; an output with more is not itemised (its counts and output are compared)."""
_PYTEST = re.compile(r"^(?:FAILED|ERROR) (?P<id>\S.*?\.py(?:::.+?)?)(?: - .*)?$")
_JEST = re.compile(r"^\s*(?:●|✕|×|FAIL)\s+(?P<id>\S.*?)(?:\s+\(\d+(?:\.\d+)? ?m?s\))?$")
_JEST_FILE = re.compile(r"^\s*FAIL\s+(?P<file>\S+\.[cm]?[jt]sx?)$")
_TAP = re.compile(r"^\s*not ok \d+ (?:- )?(?P<id>.+?)(?:\s+#.*)?$")
_GO_TEST = re.compile(r"^\s*--- FAIL: (?P<name>\S+) \(\d+(?:\.\d+)?s\)$")
_GO_PACKAGE = re.compile(
    r"^FAIL\t(?P<pkg>\S+)(?:\t(?:\d+(?:\.\d+)?s|\(cached\))|(?P<why> \[[a-z ]+ failed\]))?$"
)
_GO_ERROR = re.compile(r"^(?:vet: )?(?P<path>[^\s:]+\.go):\d+(?::\d+)?: (?P<msg>.+)$")
_CARGO_TARGET = re.compile(r"^\s+(?:Running (?:unittests )?(?P<target>\S+)|Doc-tests (?P<doc>\S+))")
_CARGO_TEST = re.compile(r"^test (?P<name>.+?)(?: - (?P<item>.+?))?(?: \(line \d+\))? \.\.\. FAILED$")
_RUST_ERROR = re.compile(r"^error(?:\[(?P<code>E\d{4})\])?: (?P<msg>.+)$")
_RUST_AT = re.compile(r"^\s*--> (?P<path>.+?):\d+:\d+$")
_NOT_A_TEST = ("Console",)
_SUITE_FAILED = "Test suite failed to run"

_COUNTS: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    # (which tool's summary, the line, the labels it carries: each is 0 when the line omits it)
    (
        "pytest",
        re.compile(
            r"^=*\s*(?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)"
            r"(?:, )?)+ in [\d.]+s(?: \([^)]*\))?\s*=*$"
        ),
        ("failed", "error"),
    ),
    ("jest suites", re.compile(r"^Test Suites:\s+.*\btotal$"), ("failed",)),
    ("jest tests", re.compile(r"^Tests:\s+.*\btotal$"), ("failed",)),
    ("vitest files", re.compile(r"^\s*Test Files\s+\d+ .*\(\d+\)$"), ("failed",)),
    ("vitest tests", re.compile(r"^\s*Tests\s+\d+ .*\(\d+\)$"), ("failed",)),
    ("mocha", re.compile(r"^\s*\d+ (?:passing \(.*\)|failing|pending)$"), ("failing",)),
    ("tap", re.compile(r"^# fail \d+$"), ("fail",)),
    ("cargo tests", re.compile(r"^test result: (?:ok|FAILED)\. \d+ passed; \d+ failed;"), ("failed",)),
    ("rustc", re.compile(r"^error: could not compile .* due to \d+ previous errors?"), ("previous error",)),
    ("mypy", re.compile(r"^(?:Found \d+ errors? in \d+ files?|Success: no issues found)"), ("error",)),
    ("ruff or tsc", re.compile(r"^(?:Found \d+ errors?\.?(?: \(.*\))?|All checks passed!)$"), ("error",)),
    ("eslint", re.compile(r"^✖ \d+ problems? \(\d+ errors?, \d+ warnings?\)$"), ("error",)),
)
_HEADLINES = (
    re.compile(
        r"^=*\s*(?P<h>(?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|warnings?|deselected)"
        r"(?:, )?)+ in [\d.]+s(?: \([^)]*\))?)\s*=*$"
    ),
    re.compile(r"^(?P<h>Found \d+ errors? in \d+ files? \(checked \d+ source files?\))$"),
    re.compile(r"^(?P<h>Success: no issues found in \d+ source files?)$"),
    re.compile(r"^(?P<h>Found \d+ errors?\.?)(?: \(.*\))?$"),
    re.compile(r"^(?P<h>All checks passed!)$"),
    re.compile(r"^Tests:\s+(?P<h>.+)$"),
    re.compile(r"^# (?P<h>(?:pass|fail) \d+)$"),
    re.compile(r"^(?P<h>no tests ran in [\d.]+s)$"),
    re.compile(r"^(?P<h>test result: FAILED\. \d+ passed; \d+ failed)"),
    re.compile(r"^(?P<h>Test Suites:\s+.+)$"),
    re.compile(r"^(?P<h>error: could not compile .* due to \d+ previous errors?)"),
    re.compile(r"^\s*(?P<h>\d+ failing)$"),
    re.compile(r"^(?P<h>✖ \d+ problems? \(\d+ errors?, \d+ warnings?\))$"),
)
_VARYING = (
    re.compile(r"\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|secs?|seconds?|min|minutes?)\b"),  # timings
    re.compile(r"\b\d+m\d+(?:\.\d+)?s\b"),  # go's 10m0s
    re.compile(r"\b\d{1,2}:\d\d:\d\d(?:[.,]\d+)?\b"),  # clock times
    re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d"),  # dates of timestamps
    re.compile(r"\b[0-9a-f]{12,}\b"),  # hashes: build ids, temporary names
)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def failures(output: str, *, root: str | None = None) -> list[str] | None:
    """Digests of the failures `output` reports (repeats kept); None when it reports none we know."""
    text = strip_ansi(output)
    keys = [key for _, key in _items(text.splitlines(), root)]
    for parser in _TOOLS:
        keys += _tool_errors(parser, text, root)
    if not keys or len(keys) > MAX_FAILURES:
        return None
    return sorted(_digest(key) for key in keys)


def failure_lines(output: str, known: list[str], *, root: str | None) -> list[str]:
    """The lines of `output` that report failures not among the digests `known` (for people)."""
    left = Counter(known)
    lines = strip_ansi(output).splitlines()
    keyed: dict[int, list[str]] = {}
    for index, key in _items(lines, root):
        keyed.setdefault(index, []).append(key)
    fresh = []
    for index, line in enumerate(lines):
        keys = keyed.get(index, []) + [key for p in _TOOLS for key in _tool_errors(p, line, root)]
        digests = [_digest(key) for key in keys]
        if any(left[d] <= 0 for d in digests):
            fresh.append(line.rstrip())
        left.subtract(digests)
    return fresh


def _tool_errors(parser: Parser, text: str, root: str | None) -> list[str]:
    return [
        f"error:{note.path}|{note.title}|{' '.join(note.message.split())}"
        for note in parser(text, root=root)
        if note.annotation_level == "failure" or parser is parse_ruff
    ]


def _items(lines: list[str], root: str | None) -> Iterator[tuple[int, str]]:
    """(line index, key) of each failure the runners' own lines name, in order."""
    go_tests: list[tuple[int, str]] = []  # go prints a package's failed tests before its FAIL line
    jest_file = cargo_target = ""
    for index, raw in enumerate(lines):
        line = raw.rstrip()
        if match := _GO_TEST.match(line):
            go_tests.append((index, match["name"]))
        elif match := _GO_PACKAGE.match(line):
            pkg = match["pkg"]
            yield from ((i, f"test:{pkg}.{name}") for i, name in go_tests)
            go_tests = []
            yield index, f"test:{pkg}{match['why'] or ''}"
        elif match := _GO_ERROR.match(line):
            yield index, f"error:{_path(match['path'], root)}||{' '.join(match['msg'].split())}"
        elif match := _CARGO_TARGET.match(line):
            cargo_target = match["target"] or f"doc-tests {match['doc']}"
        elif match := _CARGO_TEST.match(line):
            item = f" - {match['item']}" if match["item"] else ""
            yield index, f"test:{cargo_target}::{_path(match['name'], root)}{item}"
        elif match := _RUST_ERROR.match(line):
            at = next((m for m in map(_RUST_AT.match, lines[index + 1 : index + 4]) if m), None)
            if at is not None:
                message = " ".join(match["msg"].split())
                yield index, f"error:{_path(at['path'], root)}|{match['code'] or ''}|{message}"
        elif match := _PYTEST.match(line):
            yield index, f"test:{_path(match['id'], root)}"
        elif match := _JEST.match(line):
            test_id = match["id"].strip()
            if file := _JEST_FILE.match(line):
                jest_file = _path(file["file"], root)
            if test_id.startswith(_SUITE_FAILED):
                yield index, f"test:{jest_file} › {_SUITE_FAILED}"  # the whole file's tests did not run
            elif not test_id.startswith(_NOT_A_TEST):
                yield index, f"test:{_path(test_id, root)}"
        elif match := _TAP.match(line):
            yield index, f"test:{_path(match['id'].strip(), root)}"
    yield from ((i, f"test:{name}") for i, name in go_tests)


def _path(text: str, root: str | None) -> str:
    """`text` with the worktree's own path (and a leading `./`) taken off, when it starts so."""
    return relative_path(text, root) or text


def counts(output: str) -> dict[str, int] | None:
    """The failures the tools' own summaries count, by tool and label (`pytest failed`: 2), summed
    over repeated summaries (one per cargo test binary); None when no summary we know is there."""
    found: dict[str, int] = {}
    for line in strip_ansi(output).splitlines():
        line = line.strip()
        for tool, pattern, labels in _COUNTS:
            if pattern.match(line):
                for label in labels:
                    number = re.search(rf"(\d+) {label}|\b{label} (\d+)", line)
                    key = f"{tool} {label}"
                    found[key] = found.get(key, 0) + (int(number[1] or number[2]) if number else 0)
                break
    return found or None


def grown(base: dict[str, int] | None, mine: dict[str, int] | None) -> list[str] | None:
    """Which counts grew from `base` to `mine` (`pytest failed 2 → 3`); None when the two cannot
    be compared (either has no counts, or they come from different summaries)."""
    if base is None or mine is None or set(base) != set(mine):
        return None
    return [f"{label} {base[label]} → {mine[label]}" for label in sorted(mine) if mine[label] > base[label]]


def fingerprint(output: str, *, root: str | None = None) -> str:
    """A digest of `output` without what changes from run to run by itself: ANSI colours, the
    worktree's path, timings, clock times, hashes and spacing."""
    text = strip_ansi(output)
    if root:
        text = text.replace(root.rstrip("/") + "/", "").replace(root.rstrip("/"), ".")
    for pattern in _VARYING:
        text = pattern.sub("~", text)
    lines = (" ".join(line.split()) for line in text.splitlines())
    return _digest("\n".join(line for line in lines if line))


def headline(output: str) -> str:
    """The tool's own one-line summary (`3 failed, 209 passed in 2.1s`), or ''.

    The last one in the output's end, preferring one that reports a failure (cargo prints a
    `test result:` line per test binary, the failing one not always last).
    """
    found = []
    for line in reversed(strip_ansi(output).splitlines()[-60:]):
        line = line.strip()
        for pattern in _HEADLINES:
            match = pattern.match(line)
            if match:
                found.append(match["h"].strip()[:120])
                break
    failing = [h for h in found if re.search(r"\b[1-9]\d* (?:failed|failing|errors?|previous)\b|^FAILED", h)]
    return (failing or found or [""])[0]
