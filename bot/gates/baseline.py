"""Judging a gate against the base: a story fails a gate only by making it worse. Pure.

On the unchanged base every gate runs once (see `orchestration.basecheck`). Its failures are
read from the tool's own output and kept as digests:

- tests by id: pytest's `FAILED`/`ERROR` summary lines (`tests/test_x.py::test_y`), jest's
  and vitest's `●`/`✕`/`FAIL` lines, TAP's `not ok` lines (node's test runner);
- type and lint errors by file, code and message, counted (mypy, ruff, tsc, eslint): a line
  number moves whenever a story edits above it, so it is not part of the identity, but a
  second error of the same kind in the same file counts as new.

Then a story's result is judged: a gate that passes on the base must pass; one that fails on
the base fails the story only with failures the base does not have. When the output cannot
be compared (no failure the parsers know), the gate is `neutral` and says what the base had.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

from bot.gates.annotations import parse_eslint, parse_mypy, parse_ruff, parse_tsc, strip_ansi
from bot.gates.report import GateResult, conclusion
from bot.plan.baseline import BaseGate, describe

MAX_FAILURES = 3000
"""Failures kept per gate; a base with more is not compared (its gate is neutral)."""
_PYTEST = re.compile(r"^(?:FAILED|ERROR) (?P<id>\S.*?\.py(?:::.+?)?)(?: - .*)?$")
_JEST = re.compile(r"^\s*(?:●|✕|×|FAIL)\s+(?P<id>\S.*?)(?:\s+\(\d+(?:\.\d+)? ?m?s\))?$")
_TAP = re.compile(r"^\s*not ok \d+ (?:- )?(?P<id>.+?)(?:\s+#.*)?$")
_NOT_A_TEST = ("Test suite failed to run", "Console")
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
)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def failures(output: str, *, root: str | None = None) -> list[str] | None:
    """Digests of the failures `output` reports (repeats kept); None when it reports none we know."""
    text = strip_ansi(output)
    keys: list[str] = []
    for line in text.splitlines():
        line = line.rstrip()
        for kind, pattern in (("test", _PYTEST), ("test", _JEST), ("test", _TAP)):
            match = pattern.match(line)
            if match and not match["id"].startswith(_NOT_A_TEST):
                keys.append(f"{kind}:{_relative(match['id'].strip(), root)}")
                break
    for parser in (parse_mypy, parse_ruff, parse_tsc, parse_eslint):
        for note in parser(text, root=root):
            if note.annotation_level == "failure" or parser is parse_ruff:
                keys.append(f"error:{note.path}|{note.title}|{' '.join(note.message.split())}")
    if not keys or len(keys) > MAX_FAILURES:
        return None
    return sorted(_digest(key) for key in keys)


def _relative(test_id: str, root: str | None) -> str:
    if root and test_id.startswith(root.rstrip("/") + "/"):
        return test_id[len(root.rstrip("/")) + 1 :]
    return test_id


def headline(output: str) -> str:
    """The tool's own one-line summary (`3 failed, 209 passed in 2.1s`), or ''."""
    for line in reversed(strip_ansi(output).splitlines()[-60:]):
        line = line.strip()
        for pattern in _HEADLINES:
            match = pattern.match(line)
            if match:
                return match["h"].strip()[:120]
    return ""


def base_gate(result: GateResult, *, root: str | None) -> BaseGate:
    """What the base check keeps of one gate's result on the base."""
    return BaseGate(
        name=result.name,
        command=result.command,
        conclusion=conclusion(result),
        exit_code=result.exit_code,
        headline=headline(result.output),
        failures=None if result.passed else failures(result.output, root=root),
    )


def judge(
    result: GateResult, base: BaseGate | None, *, root: str | None, label: str = "the base"
) -> GateResult:
    """`result` with its verdict against `base` (unchanged when there is nothing to judge against)."""
    if base is None or base.command != result.command:
        return result
    if base.conclusion == "success":
        if result.passed:
            return result
        return _verdict(result, "failure", f"passes on {label}, fails here")
    if result.passed:
        return _verdict(result, "success", f"passes here (fails on {label}: {describe(base)})")
    if result.timed_out and base.conclusion != "timed_out":
        return _verdict(result, "failure", f"times out here, finishes on {label} ({describe(base)})")
    mine = failures(result.output, root=root)
    if base.failures is not None and mine is None:
        return _verdict(
            result,
            "failure",
            f"no longer reports its failures as on {label} (exit {result.exit_code} here, "
            f"{describe(base)} there)",
        )
    if base.failures is None or mine is None:
        return _verdict(
            result, "neutral", f"fails on {label} too ({describe(base)}): not held against the story"
        )
    new = Counter(mine) - Counter(base.failures)
    if new:
        count = sum(new.values())
        lines = new_failures(result, base, root=root)
        shown = ("; new: " + " | ".join(" ".join(line.split()) for line in lines[:5]))[:600] if lines else ""
        return _verdict(
            result, "failure", f"{count} failure(s) not on {label} ({describe(base)} there){shown}"
        )
    return _verdict(
        result,
        "neutral",
        f"no failure that {label} does not have ({len(mine)} here; {describe(base)} there): "
        "not held against the story",
    )


def new_failures(result: GateResult, base: BaseGate | None, *, root: str | None) -> list[str]:
    """The lines of `result`'s output that report failures the base does not have (for the agent)."""
    if base is None or base.failures is None:
        return []
    known = Counter(base.failures)
    lines = []
    for line in strip_ansi(result.output).splitlines():
        digests = failures(line, root=root) or []
        fresh = [d for d in digests if known[d] <= 0]
        if fresh:
            lines.append(line.rstrip())
        for digest in digests:
            known[digest] -= 1
    return lines


def _verdict(result: GateResult, verdict: str, note: str) -> GateResult:
    return result.model_copy(update={"judged": verdict, "judgement": note})
